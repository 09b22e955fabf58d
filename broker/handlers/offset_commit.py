"""OffsetCommit (key 8), versions 2-10.

A group's consumers commit the offsets they have processed, with a metadata string each. Members of
the current generation commit with their member id and generation; anyone may commit for an empty
group with generation -1 (admin clients, consumers that assign partitions themselves), which creates
the group if needed. Every accepted partition becomes a record in ``__consumer_offsets`` before the
response is sent, so a commit that was acknowledged survives a restart.

Partitions of topics that do not exist, and partitions a topic does not have, are answered
UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID for an unknown topic id) and left out of the commit, as
Kafka does; when none is left the group is not asked at all.

Errors: ILLEGAL_GENERATION (a member of an older generation: after a rebalance it must rejoin),
UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS (the group is between JoinGroup and
SyncGroup), GROUP_ID_NOT_FOUND (v9+, a member commit to a group that does not exist; older versions get
ILLEGAL_GENERATION), OFFSET_METADATA_TOO_LARGE (per partition, offset.metadata.max.bytes),
NOT_COORDINATOR (the group's ``__consumer_offsets`` partition is not led here),
COORDINATOR_LOAD_IN_PROGRESS while it loads, COORDINATOR_NOT_AVAILABLE while the broker stops, and
REQUEST_TIMED_OUT when the commit is not replicated within offsets.commit.timeout.ms (the response waits
for the partition's high watermark, as Kafka's acks=all write does). During a cooperative rebalance the
members keep their generation until the join phase completes, so their commits of the partitions they
keep are accepted, as in Kafka.

Members of a consumer group (KIP-848) commit with their member epoch; from a member that uses the
classic protocol the generation is its member epoch (ILLEGAL_GENERATION when it differs), and any
version may be used; a consumer-protocol member needs v9+ (UNSUPPORTED_VERSION) and gets
STALE_MEMBER_EPOCH.

With an authorizer, the group needs READ (every partition GROUP_AUTHORIZATION_FAILED otherwise) and each topic
READ (its partitions TOPIC_AUTHORIZATION_FAILED, said before whether it exists).

Version notes: v2-4 carry a retention time (the offset then expires at commit time + retention); v6
adds the leader epoch; v7 group.instance.id; v10 names topics by id (UNKNOWN_TOPIC_ID when unknown).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import OffsetCommitRequest, OffsetCommitResponse
from trafka.wire.protocol import ApiKey

TopicResponse = OffsetCommitResponse.OffsetCommitResponseTopic
PartitionResponse = OffsetCommitResponse.OffsetCommitResponsePartition

TOPIC_IDS_MIN_VERSION = 10


@handles(ApiKey.OFFSET_COMMIT, 2, 10)
async def handle_offset_commit(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    broker = ctx.broker
    if not ctx.authorize(AclOperation.READ, AclResourceType.GROUP, request.group_id):
        return _refuse_all(request, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coordinator = broker.group_coordinator()
    await coordinator.prepare_to_store()
    from trafka.broker.groups.coordinator import CommitRequestOffset  # loaded with the coordinator (Broker.group_coordinator)

    by_topic_id = ctx.api_version >= TOPIC_IDS_MIN_VERSION
    offsets: list[CommitRequestOffset] = []
    unknown: dict[tuple[int, int], ErrorCode] = {}  # (topic's place in the request, partition) -> code
    names: list[str] = []
    for i, topic in enumerate(request.topics):
        name = topic.name
        if by_topic_id:
            known = broker.topics.by_id(topic.topic_id)
            if known is None:
                unknown.update(((i, p.partition_index), ErrorCode.UNKNOWN_TOPIC_ID) for p in topic.partitions)
                names.append("")
                continue
            name = known.name
        names.append(name)
        if not ctx.authorize(AclOperation.READ, AclResourceType.TOPIC, name):
            unknown.update(((i, p.partition_index), ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in topic.partitions)
            continue
        for p in topic.partitions:
            if broker.topics.partition(name, p.partition_index) is None:
                unknown[(i, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            offsets.append(
                CommitRequestOffset(name, p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
            )

    retention_ms = request.retention_time_ms if 2 <= ctx.api_version <= 4 else -1
    results, everywhere = {}, None
    if offsets:  # with none left, the group is not asked (nor created)
        try:
            results = coordinator.commit_offsets(
                group_id=request.group_id,
                member_id=request.member_id,
                group_instance_id=request.group_instance_id,
                generation_id=request.generation_id_or_member_epoch,
                retention_ms=retention_ms,
                offsets=offsets,
                api_version=ctx.api_version,
            )
        except KafkaError as exc:
            everywhere = exc.code
        else:
            # Acknowledged once replicated (acks=all). Kafka's commit error mapping passes
            # REQUEST_TIMED_OUT through, and NOT_COORDINATOR when leadership moved meanwhile.
            written = await coordinator.await_written(request.group_id)
            if written is not ErrorCode.NONE:
                results = {tp: written if code is ErrorCode.NONE else code for tp, code in results.items()}

    responses = []
    for i, topic in enumerate(request.topics):
        partitions = []
        for p in topic.partitions:
            if (i, p.partition_index) in unknown:
                code = unknown[(i, p.partition_index)]
            elif everywhere is not None:
                code = everywhere
            else:
                code = results.get((names[i], p.partition_index), ErrorCode.NONE)
            partitions.append(PartitionResponse(partition_index=p.partition_index, error_code=code))
        responses.append(TopicResponse(name=topic.name, topic_id=topic.topic_id, partitions=partitions))
    return OffsetCommitResponse(topics=responses)


def _refuse_all(request: OffsetCommitRequest, code: ErrorCode) -> OffsetCommitResponse:
    return OffsetCommitResponse(topics=[
        TopicResponse(name=topic.name, topic_id=topic.topic_id,
                      partitions=[PartitionResponse(partition_index=p.partition_index, error_code=code)
                                  for p in topic.partitions])
        for topic in request.topics])
