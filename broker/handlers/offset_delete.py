"""OffsetDelete (key 47), version 0.

Deletes a group's committed offsets for some partitions. Allowed for an empty group, and for a group
using the consumer protocol as long as no member subscribes to the topic (GROUP_SUBSCRIBED_TO_TOPIC
per partition otherwise). Top-level errors: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (a non-consumer group
with members), INVALID_GROUP_ID, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE
(also when the tombstones are not replicated within offsets.commit.timeout.ms).
With an authorizer, the group needs DELETE (GROUP_AUTHORIZATION_FAILED) and each topic READ (its partitions
TOPIC_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import OffsetDeleteRequest, OffsetDeleteResponse
from trafka.wire.protocol import ApiKey

TopicResponse = OffsetDeleteResponse.OffsetDeleteResponseTopic
PartitionResponse = OffsetDeleteResponse.OffsetDeleteResponsePartition


#: Kafka's mapping of a write not replicated in time.
_WRITE_ERRORS = {ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE}


@handles(ApiKey.OFFSET_DELETE, 0, 0)
async def handle_offset_delete(ctx: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
    if not request.group_id:
        return OffsetDeleteResponse(error_code=ErrorCode.INVALID_GROUP_ID, topics=[])
    if not ctx.authorize(AclOperation.DELETE, AclResourceType.GROUP, request.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, topics=[])
    authorized = ctx.authorized_names(AclOperation.READ, AclResourceType.TOPIC, (t.name for t in request.topics))
    topics = [(t.name, [p.partition_index for p in t.partitions]) for t in request.topics]
    try:
        coordinator = ctx.broker.group_coordinator()
        results = coordinator.delete_offsets(request.group_id, [topic for topic in topics if topic[0] in authorized])
    except KafkaError as exc:
        return OffsetDeleteResponse(error_code=exc.code, topics=[])
    written = await coordinator.await_written(request.group_id)
    if written is not ErrorCode.NONE:
        return OffsetDeleteResponse(error_code=_WRITE_ERRORS.get(written, written), topics=[])
    return OffsetDeleteResponse(
        error_code=ErrorCode.NONE,
        topics=[
            TopicResponse(
                name=name,
                partitions=[
                    PartitionResponse(partition_index=p, error_code=results.get((name, p), ErrorCode.NONE)
                                      if name in authorized else ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                    for p in partitions
                ],
            )
            for name, partitions in topics
        ],
    )
