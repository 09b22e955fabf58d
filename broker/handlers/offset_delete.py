"""OffsetDelete (key 47), version 0.

Deletes a group's committed offsets for some partitions. Allowed for an empty group, and for a group
using the consumer protocol as long as no member subscribes to the topic (GROUP_SUBSCRIBED_TO_TOPIC
per partition otherwise). Top-level errors: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (a non-consumer group
with members), INVALID_GROUP_ID, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE
(also when the tombstones are not replicated within offsets.commit.timeout.ms).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
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
    topics = [(t.name, [p.partition_index for p in t.partitions]) for t in request.topics]
    try:
        coordinator = ctx.broker.group_coordinator()
        results = coordinator.delete_offsets(request.group_id, topics)
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
                    PartitionResponse(partition_index=p, error_code=results.get((name, p), ErrorCode.NONE))
                    for p in partitions
                ],
            )
            for name, partitions in topics
        ],
    )
