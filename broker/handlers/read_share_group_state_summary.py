"""ReadShareGroupStateSummary (key 87), versions 0-1.

Sent by a group coordinator to the share coordinator of each share partition (group, topic id, partition) for
DescribeShareGroupOffsets: the state epoch, leader epoch and start offset kept for it, without its batches, and from
v1 its delivery complete count. A share partition never initialized is answered with start offset -1 (no error). A
negative partition is INVALID_REQUEST; a topic or partition that does not exist UNKNOWN_TOPIC_OR_PARTITION; a key
whose ``__share_group_state`` partition this broker does not lead NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS
while it loads). See broker.share.coordinator.

An empty group id, no topics, or a topic without partitions is answered with no results, as Kafka does. With an
authorizer, the sender (another broker) needs CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED for every
partition).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.handlers.share_state import answer_each_partition
from trafka.wire.messages import ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse
from trafka.wire.protocol import ApiKey

Result = ReadShareGroupStateSummaryResponse.ReadStateSummaryResult
PartitionResult = ReadShareGroupStateSummaryResponse.PartitionResult


@handles(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, 1)
async def handle_read_share_group_state_summary(
        ctx: RequestContext, request: ReadShareGroupStateSummaryRequest) -> ReadShareGroupStateSummaryResponse:
    async def read_summary(coordinator, topic_id, wanted) -> dict:
        state = await coordinator.read_summary(request.group_id, topic_id, wanted.partition, wanted.leader_epoch)
        return {"state_epoch": state.state_epoch, "leader_epoch": state.leader_epoch,
                "start_offset": state.start_offset, "delivery_complete_count": state.delivery_complete_count}

    return await answer_each_partition(ctx, request, ReadShareGroupStateSummaryResponse, Result, PartitionResult,
                                       read_summary)
