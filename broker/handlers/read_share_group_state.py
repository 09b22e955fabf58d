"""ReadShareGroupState (key 84), version 0.

Sent by the leader of a topic partition to the share coordinator of each share partition (group, topic id,
partition) it loads: the state epoch, start offset and state batches kept for it. A leader epoch newer than the
newest seen is recorded (with a record of its own); an older one is FENCED_LEADER_EPOCH. A share partition never
initialized is INVALID_REQUEST ("Read operation on uninitialized share partition not allowed."); a negative
partition or leader epoch INVALID_REQUEST; a topic or partition that does not exist UNKNOWN_TOPIC_OR_PARTITION; a
key whose ``__share_group_state`` partition this broker does not lead NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS
while it loads). See broker.share.coordinator.

An empty group id, no topics, or a topic without partitions is answered with no results, as Kafka does. With an
authorizer, the sender (another broker) needs CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED for every
partition).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.handlers.share_state import answer_each_partition
from trafka.wire.messages import ReadShareGroupStateRequest, ReadShareGroupStateResponse
from trafka.wire.protocol import ApiKey

Result = ReadShareGroupStateResponse.ReadStateResult
PartitionResult = ReadShareGroupStateResponse.PartitionResult
StateBatch = ReadShareGroupStateResponse.StateBatch


@handles(ApiKey.READ_SHARE_GROUP_STATE, 0, 0)
async def handle_read_share_group_state(ctx: RequestContext,
                                        request: ReadShareGroupStateRequest) -> ReadShareGroupStateResponse:
    async def read(coordinator, topic_id, wanted) -> dict:
        state = await coordinator.read(request.group_id, topic_id, wanted.partition, wanted.leader_epoch)
        return {"state_epoch": state.state_epoch, "start_offset": state.start_offset, "state_batches": [
            StateBatch(first_offset=b.first_offset, last_offset=b.last_offset, delivery_state=b.delivery_state,
                       delivery_count=b.delivery_count) for b in state.batches]}

    return await answer_each_partition(ctx, request, ReadShareGroupStateResponse, Result, PartitionResult, read)
