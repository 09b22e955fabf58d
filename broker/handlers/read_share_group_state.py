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
from trafka.broker.security.authorizer import AclOperation
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import ReadShareGroupStateRequest, ReadShareGroupStateResponse
from trafka.wire.protocol import ApiKey

#: Kafka's message for a request its sender may not make (it names no permission here).
CLUSTER_REFUSED = "Cluster authorization failed."

Result = ReadShareGroupStateResponse.ReadStateResult
PartitionResult = ReadShareGroupStateResponse.PartitionResult
StateBatch = ReadShareGroupStateResponse.StateBatch


@handles(ApiKey.READ_SHARE_GROUP_STATE, 0, 0)
async def handle_read_share_group_state(ctx: RequestContext,
                                        request: ReadShareGroupStateRequest) -> ReadShareGroupStateResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return ReadShareGroupStateResponse(results=[Result(topic_id=topic.topic_id, partitions=[
            PartitionResult(partition=p.partition, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                            error_message=CLUSTER_REFUSED) for p in topic.partitions]) for topic in request.topics])
    if not request.group_id or not request.topics or any(not topic.partitions for topic in request.topics):
        return ReadShareGroupStateResponse(results=[])
    coordinator = ctx.broker.share_coordinator()
    results = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            try:
                state = await coordinator.read(request.group_id, topic.topic_id, wanted.partition,
                                               wanted.leader_epoch)
            except KafkaError as exc:
                partitions.append(PartitionResult(partition=wanted.partition, error_code=exc.code,
                                                  error_message=exc.message))
            else:
                partitions.append(PartitionResult(
                    partition=wanted.partition, state_epoch=state.state_epoch, start_offset=state.start_offset,
                    state_batches=[StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                              delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                                   for b in state.batches]))
        results.append(Result(topic_id=topic.topic_id, partitions=partitions))
    return ReadShareGroupStateResponse(results=results)
