"""ListPartitionReassignments (key 46), version 0.

The reassignments in progress (AlterPartitionReassignments): per partition its current replicas, and
those being added and removed. Null topics lists every reassignment; partitions named that do not
exist, or are not being reassigned, are left out, as in Kafka. In a cluster the controller answers;
another broker answers NOT_CONTROLLER. A single node never reassigns: the list is empty.
With an authorizer, DESCRIBE on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from collections import defaultdict

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse
from trafka.wire.protocol import ApiKey

Ongoing = ListPartitionReassignmentsResponse.OngoingPartitionReassignment
OngoingTopic = ListPartitionReassignmentsResponse.OngoingTopicReassignment


@handles(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0)
async def handle_list_partition_reassignments(
    ctx: RequestContext, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    message = ctx.cluster_refusal(AclOperation.DESCRIBE)
    if message is not None:
        return ListPartitionReassignmentsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                  error_message=message, topics=[])
    wanted = None if request.topics is None else [
        (topic.name, index) for topic in request.topics for index in topic.partition_indexes]
    try:
        ongoing = ctx.broker.topics.list_partition_reassignments(wanted)
    except KafkaError as exc:  # NOT_CONTROLLER
        return ListPartitionReassignmentsResponse(error_code=exc.code, error_message=exc.message or None, topics=[])
    by_topic: dict[str, list[Ongoing]] = defaultdict(list)
    for (topic, index), (replicas, adding, removing) in sorted(ongoing.items()):
        by_topic[topic].append(Ongoing(partition_index=index, replicas=list(replicas), adding_replicas=list(adding),
                                       removing_replicas=list(removing)))
    return ListPartitionReassignmentsResponse(error_code=ErrorCode.NONE, topics=[
        OngoingTopic(name=topic, partitions=partitions) for topic, partitions in by_topic.items()])
