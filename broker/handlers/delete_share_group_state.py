"""DeleteShareGroupState (key 86), version 0.

Sent by a group coordinator to the share coordinator of each share partition (group, topic id, partition) of a
share group being deleted, or whose offsets for a topic are deleted: the state is forgotten (a tombstone of its
snapshot key). Deleting a state that does not exist succeeds. A negative partition is INVALID_REQUEST; a topic or
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
from trafka.wire.messages import DeleteShareGroupStateRequest, DeleteShareGroupStateResponse
from trafka.wire.protocol import ApiKey

#: Kafka's message for a request its sender may not make (it names no permission here).
CLUSTER_REFUSED = "Cluster authorization failed."

Result = DeleteShareGroupStateResponse.DeleteStateResult
PartitionResult = DeleteShareGroupStateResponse.PartitionResult


@handles(ApiKey.DELETE_SHARE_GROUP_STATE, 0, 0)
async def handle_delete_share_group_state(ctx: RequestContext,
                                          request: DeleteShareGroupStateRequest) -> DeleteShareGroupStateResponse:
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return DeleteShareGroupStateResponse(results=[Result(topic_id=topic.topic_id, partitions=[
            PartitionResult(partition=p.partition, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                            error_message=CLUSTER_REFUSED) for p in topic.partitions]) for topic in request.topics])
    if not request.group_id or not request.topics or any(not topic.partitions for topic in request.topics):
        return DeleteShareGroupStateResponse(results=[])
    coordinator = ctx.broker.share_coordinator()
    results = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            try:
                await coordinator.delete(request.group_id, topic.topic_id, wanted.partition)
            except KafkaError as exc:
                partitions.append(PartitionResult(partition=wanted.partition, error_code=exc.code,
                                                  error_message=exc.message))
            else:
                partitions.append(PartitionResult(partition=wanted.partition))
        results.append(Result(topic_id=topic.topic_id, partitions=partitions))
    return DeleteShareGroupStateResponse(results=results)
