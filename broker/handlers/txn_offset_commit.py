"""TxnOffsetCommit (key 28), versions 0-5.

A transactional producer commits a consumer group's offsets inside its transaction (KIP-98; Kafka's
``sendOffsetsToTransaction``): they count only if the transaction commits. The group coordinator
writes them to the group's partition of ``__consumer_offsets`` as a transactional batch of the
request's producer id and epoch, and holds them pending until the transaction's marker reaches that
partition: COMMIT makes them the group's committed offsets (unless a plain OffsetCommit of the same
partition was written after them), ABORT drops them. Meanwhile OffsetFetch answers the committed
offsets as before, or UNSTABLE_OFFSET_COMMIT for those partitions when asked with ``require_stable``.
The response is sent once the batch is replicated.

Validation, as Kafka's: from v3 the request carries the consumer's member id, generation and group
instance id (KIP-447), checked against the group like an OffsetCommit's (ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID; a consumer group's stale member epoch is ILLEGAL_GENERATION);
generation -1 commits to an empty group, and to a group that does not exist yet, which it creates.
A group that does not exist with a generation is ILLEGAL_GENERATION. Requests of v0-2, without a
member, are accepted whatever the group's state. Unknown topics and partitions are answered
UNKNOWN_TOPIC_OR_PARTITION and left out of the commit (when none is left the group is not asked);
metadata longer than offset.metadata.max.bytes is OFFSET_METADATA_TOO_LARGE for its partition.

Errors for every partition: INVALID_GROUP_ID (an empty group id), NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS (COORDINATOR_NOT_AVAILABLE before v2, whose clients do not retry it),
COORDINATOR_NOT_AVAILABLE while the broker stops or when the write is not replicated within
offsets.commit.timeout.ms, INVALID_PRODUCER_EPOCH when the log knows a newer epoch of the producer.

Version notes: v2 adds the committed leader epoch; v3 the member id, generation and group instance
id (and flexible encoding); v4 and v5 change nothing here (v4 lets Kafka answer TRANSACTION_ABORTABLE,
v5 adds the partition to the transaction implicitly under transactions v2: the transaction
coordinator's business, not checked by the group coordinator).
With an authorizer, the transactional id needs WRITE (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), the group READ
(GROUP_AUTHORIZATION_FAILED), both for every partition, and each topic READ (TOPIC_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from trafka.wire.protocol import ApiKey

TopicResponse = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
PartitionResponse = TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition

#: From v2 clients retry COORDINATOR_LOAD_IN_PROGRESS; older ones get COORDINATOR_NOT_AVAILABLE.
LOAD_IN_PROGRESS_MIN_VERSION = 2


@handles(ApiKey.TXN_OFFSET_COMMIT, 0, 5)
async def handle_txn_offset_commit(ctx: RequestContext, request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    broker = ctx.broker
    refusal = None
    if not ctx.authorize(AclOperation.WRITE, AclResourceType.TRANSACTIONAL_ID, request.transactional_id):
        refusal = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not ctx.authorize(AclOperation.READ, AclResourceType.GROUP, request.group_id):
        refusal = ErrorCode.GROUP_AUTHORIZATION_FAILED
    if refusal is not None:
        return TxnOffsetCommitResponse(topics=[
            TopicResponse(name=topic.name, partitions=[PartitionResponse(partition_index=p.partition_index,
                                                                         error_code=refusal)
                                                       for p in topic.partitions])
            for topic in request.topics])
    authorized = ctx.authorized_names(AclOperation.READ, AclResourceType.TOPIC, (t.name for t in request.topics))
    unknown: dict[tuple[int, int], ErrorCode] = {}  # (topic's place in the request, partition) -> code
    known: list[tuple[str, TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition]] = []
    for i, topic in enumerate(request.topics):
        for p in topic.partitions:
            if topic.name not in authorized:
                unknown[(i, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif broker.topics.partition(topic.name, p.partition_index) is None:
                unknown[(i, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                known.append((topic.name, p))

    everywhere: ErrorCode | None = None
    results: dict[tuple[str, int], ErrorCode] = {}
    if known:  # with none left, the group is not asked (nor created)
        if not request.group_id:
            everywhere = ErrorCode.INVALID_GROUP_ID
        else:
            everywhere, results = await _commit(ctx, request, known)
    if everywhere is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and ctx.api_version < LOAD_IN_PROGRESS_MIN_VERSION:
        everywhere = ErrorCode.COORDINATOR_NOT_AVAILABLE

    responses = []
    for i, topic in enumerate(request.topics):
        partitions = []
        for p in topic.partitions:
            if (i, p.partition_index) in unknown:
                code = unknown[(i, p.partition_index)]
            elif everywhere is not None:
                code = everywhere
            else:
                code = results.get((topic.name, p.partition_index), ErrorCode.NONE)
            partitions.append(PartitionResponse(partition_index=p.partition_index, error_code=code))
        responses.append(TopicResponse(name=topic.name, partitions=partitions))
    return TxnOffsetCommitResponse(topics=responses)


async def _commit(
    ctx: RequestContext,
    request: TxnOffsetCommitRequest,
    known: list[tuple[str, TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition]],
) -> tuple[ErrorCode | None, dict[tuple[str, int], ErrorCode]]:
    """Commit the partitions of known topics: an error for all of them, or each one's."""
    coordinator = ctx.broker.group_coordinator()
    await coordinator.prepare_to_store()
    from trafka.broker.groups.coordinator import CommitRequestOffset  # loaded with the coordinator (Broker.group_coordinator)

    offsets = [
        CommitRequestOffset(name, p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
        for name, p in known
    ]
    try:
        results = coordinator.commit_transactional_offsets(
            group_id=request.group_id,
            producer_id=request.producer_id,
            producer_epoch=request.producer_epoch,
            member_id=request.member_id,
            group_instance_id=request.group_instance_id,
            generation_id=request.generation_id,
            offsets=offsets,
            api_version=ctx.api_version,
        )
    except KafkaError as exc:
        return exc.code, {}
    # Acknowledged once replicated. Kafka's coordinator answers a write that timed out
    # COORDINATOR_NOT_AVAILABLE for this API.
    written = await coordinator.await_written(request.group_id)
    if written is ErrorCode.REQUEST_TIMED_OUT:
        written = ErrorCode.COORDINATOR_NOT_AVAILABLE
    if written is not ErrorCode.NONE:
        return written, {}
    return None, results
