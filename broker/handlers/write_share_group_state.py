"""WriteShareGroupState (key 85), versions 0-1.

Sent by the leader of a topic partition to the share coordinator of each share partition (group, topic id,
partition) as its records are acquired, acknowledged, released or archived: the state batches that changed, the
start offset (-1: unchanged; never moved back) and, from v1, the delivery complete count. The record written is an
update, or a snapshot with the batches merged once ``share.coordinator.snapshot.update.records.per.snapshot``
updates followed the last one. A share partition never initialized is INVALID_REQUEST ("Write operation on
uninitialized share partition not allowed."); a negative partition, state epoch or leader epoch INVALID_REQUEST; a
leader epoch older than the newest seen FENCED_LEADER_EPOCH, a state epoch older than the newest FENCED_STATE_EPOCH;
a topic or partition that does not exist UNKNOWN_TOPIC_OR_PARTITION; a key whose ``__share_group_state`` partition
this broker does not lead NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while it loads). See
broker.share.coordinator.

An empty group id, no topics, or a topic without partitions is answered with no results, as Kafka does. With an
authorizer, the sender (another broker) needs CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED for every
partition).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.handlers.share_state import answer_each_partition
from trafka.broker.share.state import PartitionState, StateBatch
from trafka.wire.messages import WriteShareGroupStateRequest, WriteShareGroupStateResponse
from trafka.wire.protocol import ApiKey

Result = WriteShareGroupStateResponse.WriteStateResult
PartitionResult = WriteShareGroupStateResponse.PartitionResult


@handles(ApiKey.WRITE_SHARE_GROUP_STATE, 0, 1)
async def handle_write_share_group_state(ctx: RequestContext,
                                         request: WriteShareGroupStateRequest) -> WriteShareGroupStateResponse:
    async def write(coordinator, topic_id, wanted) -> dict:
        state = PartitionState(
            wanted.state_epoch, wanted.leader_epoch, wanted.start_offset,
            tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                  for b in wanted.state_batches),
            wanted.delivery_complete_count)
        await coordinator.write(request.group_id, topic_id, wanted.partition, state)
        return {}

    return await answer_each_partition(ctx, request, WriteShareGroupStateResponse, Result, PartitionResult, write)
