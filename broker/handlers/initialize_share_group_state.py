"""InitializeShareGroupState (key 83), version 0.

Sent by a group coordinator to the share coordinator of each share partition (group, topic id, partition) as a
share group starts consuming it, or when its start offset is altered: the state begins again at the start offset
given (-1: not known yet) with the state epoch given, its batches gone; the record written is a snapshot. A state
epoch older than the newest is FENCED_STATE_EPOCH; a negative partition or state epoch INVALID_REQUEST; a topic or
partition that does not exist UNKNOWN_TOPIC_OR_PARTITION; a key whose ``__share_group_state`` partition this broker
does not lead NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while it loads). See broker.share.coordinator.

An empty group id, no topics, or a topic without partitions is answered with no results, as Kafka does. With an
authorizer, the sender (another broker) needs CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED for every
partition).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import InitializeShareGroupStateRequest, InitializeShareGroupStateResponse
from trafka.wire.protocol import ApiKey

#: Kafka's message for a request its sender may not make (it names no permission here).
CLUSTER_REFUSED = "Cluster authorization failed."

Result = InitializeShareGroupStateResponse.InitializeStateResult
PartitionResult = InitializeShareGroupStateResponse.PartitionResult


@handles(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, 0)
async def handle_initialize_share_group_state(
        ctx: RequestContext, request: InitializeShareGroupStateRequest) -> InitializeShareGroupStateResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return InitializeShareGroupStateResponse(results=[Result(topic_id=topic.topic_id, partitions=[
            PartitionResult(partition=p.partition, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                            error_message=CLUSTER_REFUSED) for p in topic.partitions]) for topic in request.topics])
    if not request.group_id or not request.topics or any(not topic.partitions for topic in request.topics):
        return InitializeShareGroupStateResponse(results=[])
    coordinator = ctx.broker.share_coordinator()
    results = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            try:
                await coordinator.initialize(request.group_id, topic.topic_id, wanted.partition, wanted.state_epoch,
                                             wanted.start_offset)
            except KafkaError as exc:
                partitions.append(PartitionResult(partition=wanted.partition, error_code=exc.code,
                                                  error_message=exc.message))
            else:
                partitions.append(PartitionResult(partition=wanted.partition))
        results.append(Result(topic_id=topic.topic_id, partitions=partitions))
    return InitializeShareGroupStateResponse(results=results)
