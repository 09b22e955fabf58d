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
from trafka.broker.security.authorizer import AclOperation
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse
from trafka.wire.protocol import ApiKey

#: Kafka's message for a request its sender may not make (it names no permission here).
CLUSTER_REFUSED = "Cluster authorization failed."

Result = ReadShareGroupStateSummaryResponse.ReadStateSummaryResult
PartitionResult = ReadShareGroupStateSummaryResponse.PartitionResult


@handles(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, 1)
async def handle_read_share_group_state_summary(
        ctx: RequestContext, request: ReadShareGroupStateSummaryRequest) -> ReadShareGroupStateSummaryResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return ReadShareGroupStateSummaryResponse(results=[Result(topic_id=topic.topic_id, partitions=[
            PartitionResult(partition=p.partition, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                            error_message=CLUSTER_REFUSED) for p in topic.partitions]) for topic in request.topics])
    if not request.group_id or not request.topics or any(not topic.partitions for topic in request.topics):
        return ReadShareGroupStateSummaryResponse(results=[])
    coordinator = ctx.broker.share_coordinator()
    results = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            try:
                state = await coordinator.read_summary(request.group_id, topic.topic_id, wanted.partition,
                                                       wanted.leader_epoch)
            except KafkaError as exc:
                partitions.append(PartitionResult(partition=wanted.partition, error_code=exc.code,
                                                  error_message=exc.message))
            else:
                partitions.append(PartitionResult(
                    partition=wanted.partition, state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
                    start_offset=state.start_offset, delivery_complete_count=state.delivery_complete_count))
        results.append(Result(topic_id=topic.topic_id, partitions=partitions))
    return ReadShareGroupStateSummaryResponse(results=results)
