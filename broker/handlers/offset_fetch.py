"""OffsetFetch (key 9), versions 1-10.

A group's committed offsets, with their leader epochs and metadata strings; -1 for partitions
without one. From v2 a null topic list asks for every partition the group has committed; from v8 one
request asks for several groups, each with its own error.

``require_stable`` (v7+, KIP-447) asks not to be given an offset that an open transaction may still
change: a partition with offsets pending in a transaction (TxnOffsetCommit, before the COMMIT or ABORT
marker) is answered UNSTABLE_OFFSET_COMMIT with offset -1, as a partition error in every version (the
group's error stays NONE), and the client retries. Without it, or for other partitions, the committed
offset is answered as usual. As Kafka's coordinator does for such a fetch, the answer waits for the
group's writes to be replicated (NOT_COORDINATOR when they are not within offsets.commit.timeout.ms).
Errors (per group from v8): NOT_COORDINATOR when the group's ``__consumer_offsets`` partition is not
led here, COORDINATOR_LOAD_IN_PROGRESS while it loads, COORDINATOR_NOT_AVAILABLE while the broker stops,
INVALID_GROUP_ID for a null group id; v10 names topics by id (UNKNOWN_TOPIC_ID for ids this broker does not know).

v9 adds ``member_id`` and ``member_epoch`` to each group. A consumer-protocol (KIP-848) member reads
its offsets with them; admin clients and classic consumers leave them null and -1, which any group
accepts. A consumer group checks them otherwise: UNKNOWN_MEMBER_ID for a member it does not have,
STALE_MEMBER_EPOCH for an epoch that is not the member's current one (ILLEGAL_GENERATION when that
member uses the classic protocol). A classic group ignores them. Like every group error these are the
group's ``error_code``, with no topics; an unknown group simply has no offsets.

With an authorizer, a group needs DESCRIBE (GROUP_AUTHORIZATION_FAILED, the group's error) and a topic DESCRIBE:
a topic asked for without it is answered TOPIC_AUTHORIZATION_FAILED per partition, and one the principal may
not describe is left out of an answer for all the group's partitions.
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import OffsetFetchRequest, OffsetFetchResponse
from trafka.wire.protocol import ApiKey

Response = OffsetFetchResponse
GroupResponse = OffsetFetchResponse.OffsetFetchResponseGroup
TopicsResponse = OffsetFetchResponse.OffsetFetchResponseTopics
PartitionsResponse = OffsetFetchResponse.OffsetFetchResponsePartitions
TopicResponse = OffsetFetchResponse.OffsetFetchResponseTopic
PartitionResponse = OffsetFetchResponse.OffsetFetchResponsePartition

BATCHED_MIN_VERSION = 8
TOPIC_IDS_MIN_VERSION = 10


@handles(ApiKey.OFFSET_FETCH, 1, 10)
async def handle_offset_fetch(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    version = ctx.api_version
    if version >= BATCHED_MIN_VERSION:
        return Response(groups=[await _fetch_group(ctx, group, request.require_stable) for group in request.groups])

    topics = None if request.topics is None else [(t.name, list(t.partition_indexes)) for t in request.topics]
    error, fetched = await _fetch(ctx, request.group_id, topics, require_stable=request.require_stable)
    by_topic: dict[str, list[PartitionResponse]] = {}
    for offset in fetched:
        by_topic.setdefault(offset.topic, []).append(
            PartitionResponse(
                partition_index=offset.partition,
                committed_offset=offset.offset,
                committed_leader_epoch=offset.leader_epoch,
                metadata=offset.metadata,
                error_code=offset.error,
            )
        )
    if error is not ErrorCode.NONE and version < 2 and topics is not None:
        # v1 has no top-level error: every partition carries it.
        by_topic = {
            name: [
                PartitionResponse(partition_index=p, committed_offset=-1, metadata="", error_code=error)
                for p in partitions
            ]
            for name, partitions in topics
        }
    return Response(
        error_code=error,
        topics=[TopicResponse(name=name, partitions=partitions) for name, partitions in by_topic.items()],
    )


async def _fetch_group(
    ctx: RequestContext, group: OffsetFetchRequest.OffsetFetchRequestGroup, require_stable: bool
) -> GroupResponse:
    topics_by_id = ctx.api_version >= TOPIC_IDS_MIN_VERSION
    topic_registry = ctx.broker.topics
    unknown_ids: list = []
    topics = None
    if group.topics is not None:
        topics = []
        for t in group.topics:
            if topics_by_id:
                known = topic_registry.by_id(t.topic_id)
                if known is None:
                    unknown_ids.append(t)
                    continue
                topics.append((known.name, list(t.partition_indexes)))
            else:
                topics.append((t.name, list(t.partition_indexes)))
    error, fetched = await _fetch(ctx, group.group_id, topics, group.member_id, group.member_epoch,
                                  require_stable=require_stable)
    if error is not ErrorCode.NONE:
        return GroupResponse(group_id=group.group_id, error_code=error, topics=[])
    by_topic: dict[str, list[PartitionsResponse]] = {}
    for offset in fetched:
        by_topic.setdefault(offset.topic, []).append(
            PartitionsResponse(
                partition_index=offset.partition,
                committed_offset=offset.offset,
                committed_leader_epoch=offset.leader_epoch,
                metadata=offset.metadata,
                error_code=offset.error,
            )
        )
    responses = []
    for name, partitions in by_topic.items():
        topic_id = None
        if topics_by_id:
            known = topic_registry.get(name)
            if known is None:
                continue  # committed for a topic that no longer exists: it has no id to report
            topic_id = known.topic_id
        if topic_id is None:
            responses.append(TopicsResponse(name=name, partitions=partitions))
        else:
            responses.append(TopicsResponse(topic_id=topic_id, partitions=partitions))
    for t in unknown_ids:
        responses.append(
            TopicsResponse(
                topic_id=t.topic_id,
                partitions=[
                    PartitionsResponse(
                        partition_index=p, committed_offset=-1, metadata="", error_code=ErrorCode.UNKNOWN_TOPIC_ID
                    )
                    for p in t.partition_indexes
                ],
            )
        )
    return GroupResponse(group_id=group.group_id, error_code=ErrorCode.NONE, topics=responses)


async def _fetch(
    ctx: RequestContext,
    group_id: str | None,
    topics: list[tuple[str, list[int]]] | None,
    member_id: str | None = None,
    member_epoch: int = -1,
    *,
    require_stable: bool = False,
):
    if group_id is None:
        return ErrorCode.INVALID_GROUP_ID, []
    if not ctx.authorize(AclOperation.DESCRIBE, AclResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
    denied: list[tuple[str, list[int]]] = []
    if ctx.broker.authorizer is not None and topics is not None:
        allowed = ctx.authorized_names(AclOperation.DESCRIBE, AclResourceType.TOPIC, (name for name, _ in topics))
        denied = [(name, partitions) for name, partitions in topics if name not in allowed]
        topics = [(name, partitions) for name, partitions in topics if name in allowed]
    error, fetched = await _fetch_authorized(ctx, group_id, topics, member_id, member_epoch, require_stable)
    if error is not ErrorCode.NONE or ctx.broker.authorizer is None:
        return error, fetched
    if denied:
        from trafka.broker.groups.coordinator import FetchedOffset  # loaded with the coordinator

        fetched.extend(FetchedOffset(name, p, -1, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                       for name, partitions in denied for p in partitions)
    elif topics is None:  # every committed partition: only those of topics the principal may describe
        allowed = ctx.authorized_names(AclOperation.DESCRIBE, AclResourceType.TOPIC, {o.topic for o in fetched},
                                       log_if_denied=False)
        fetched = [offset for offset in fetched if offset.topic in allowed]
    return error, fetched


async def _fetch_authorized(ctx: RequestContext, group_id: str, topics: list[tuple[str, list[int]]] | None,
                            member_id: str | None, member_epoch: int, require_stable: bool):
    coordinator = ctx.broker.group_coordinator()
    if require_stable and coordinator.is_serving(group_id):
        # Kafka answers a stable fetch as a write: once the group's writes are replicated. Its
        # timeouts are NOT_COORDINATOR, which every client retries after a new FindCoordinator.
        written = await coordinator.await_written(group_id)
        if written is not ErrorCode.NONE:
            return ErrorCode.NOT_COORDINATOR, []
    try:
        return ErrorCode.NONE, coordinator.fetch_offsets(
            group_id, topics, member_id=member_id, member_epoch=member_epoch, require_stable=require_stable
        )
    except KafkaError as exc:
        return exc.code, []
