"""AlterPartitionReassignments (key 45), versions 0-1.

Moves partitions' replicas to new brokers while producers and consumers go on (KIP-455): the new
replicas join and catch up as followers; once every target replica is in the ISR, leadership moves
into the target set if it must and the replicas no longer wanted are dropped. Null replicas cancel a
reassignment in progress (back to the original replicas). Per partition, as Kafka answers:
UNKNOWN_TOPIC_OR_PARTITION; INVALID_REPLICA_ASSIGNMENT for an empty target, a broker named twice or a
broker not registered (and, v1+ with ``allow_replication_factor_change`` false, a target of another
size); NO_REASSIGNMENT_IN_PROGRESS for a cancellation with nothing to cancel. In a cluster the
controller reassigns; another broker answers NOT_CONTROLLER at the top level, which makes the admin
client ask the controller. A single node can only be asked to keep its partitions where they are.

Version notes: flexible from v0; v1 added ``allow_replication_factor_change``.
With an authorizer, ALTER on the cluster is needed (CLUSTER_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse
from trafka.wire.protocol import ApiKey

TopicResponse = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
PartitionResponse = AlterPartitionReassignmentsResponse.ReassignablePartitionResponse


@handles(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 1)
async def handle_alter_partition_reassignments(
    ctx: RequestContext, request: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    allow_new_size = ctx.api_version < 1 or request.allow_replication_factor_change
    message = ctx.cluster_refusal(AclOperation.ALTER)
    if message is not None:
        refusal = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return AlterPartitionReassignmentsResponse(error_code=refusal, error_message=message, responses=[
            TopicResponse(name=topic.name, partitions=[
                PartitionResponse(partition_index=p.partition_index, error_code=refusal, error_message=message)
                for p in topic.partitions])
            for topic in request.topics])
    changes: dict[tuple[str, int], list[int] | None] = {}
    refused: dict[tuple[str, int], tuple[ErrorCode, str]] = {}
    for topic in request.topics:
        for partition in topic.partitions:
            key = (topic.name, partition.partition_index)
            changes[key] = partition.replicas
            current = ctx.broker.topics.partition(*key)
            if (not allow_new_size and partition.replicas is not None and current is not None
                    and len(partition.replicas) != len(current.replicas)):
                refused[key] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                "The replication factor is changed from "
                                f"{len(current.replicas)} to {len(partition.replicas)}")
    try:
        outcomes = await ctx.broker.topics.alter_partition_reassignments(
            {key: change for key, change in changes.items() if key not in refused},
            timeout_ms=request.timeout_ms)
    except KafkaError as exc:  # NOT_CONTROLLER
        return AlterPartitionReassignmentsResponse(error_code=exc.code, error_message=exc.message or None,
                                                   responses=[])
    outcomes.update(refused)
    return AlterPartitionReassignmentsResponse(
        error_code=ErrorCode.NONE,
        allow_replication_factor_change=allow_new_size,
        responses=[
            TopicResponse(name=topic.name, partitions=[
                PartitionResponse(partition_index=p.partition_index,
                                  error_code=outcomes[(topic.name, p.partition_index)][0],
                                  error_message=outcomes[(topic.name, p.partition_index)][1])
                for p in topic.partitions])
            for topic in request.topics
        ],
    )
