"""ShareFetch (key 78), versions 1-2 (KIP-932).

A share consumer's fetch: records acquired for the member from the share partitions of its group that this broker
leads (broker.share.manager), sent as file slices of the log with the acquired ranges (first offset, last offset,
delivery count) the consumer may deliver; records outside them are not the member's to deliver. Acknowledgements
of records acquired before ride along, per partition, applied (and persisted) before anything is acquired; their
outcome is the partition's acknowledge_error_code. The records they release are still in transition for the
request's first acquisition, as on Kafka; a wait that follows may take them.

Share sessions: epoch 0 opens the member's share session (a request opening one must not acknowledge anything:
INVALID_REQUEST), each later request carries the next epoch (INVALID_SHARE_SESSION_EPOCH otherwise,
SHARE_SESSION_NOT_FOUND without a session), adds its topics' partitions and removes its forgotten topics'; -1 closes
it, applying the acknowledgements and releasing what the member still holds (a closing request fetches nothing,
whatever partitions it names).
``max_records`` bounds the records acquired (whole log batches; exactly from v2 with share_acquire_mode 1),
``batch_size`` cuts the acquired ranges, ``max_bytes`` is shared evenly among the partitions. With nothing
acquirable, the request waits up to ``max_wait_ms`` for records to be appended or released, never polling.
From v2 ``is_renew_ack`` requests renew locks (RENEW acknowledgements) and acquire nothing: their max_wait_ms,
min_bytes, max_bytes and max_records must be 0 (INVALID_REQUEST otherwise).

Errors: top-level INVALID_REQUEST for a null group id or an empty member id, GROUP_AUTHORIZATION_FAILED without
READ on the group; per partition UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, TOPIC_AUTHORIZATION_FAILED without
READ on the topic, NOT_LEADER_OR_FOLLOWER (with the leader), UNKNOWN_SERVER_ERROR when the share partition's state
cannot be read (never initialized: no such group), the share coordinator's retriable codes; acknowledge_error_code
INVALID_RECORD_STATE for records not acquired by the member (or acknowledged twice by overlapping batches),
INVALID_REQUEST for malformed batches and offsets past the last one in flight; offsets below the share-partition
start offset are done with and skipped. A partition's acknowledgements are applied all or nothing.

Partitions answered: every partition of the request when it opens the session (but one at its in-flight limit,
share.partition.max.record.locks, that can acquire nothing); afterwards those with acquired records, an error or
acknowledgements. A partition whose log start offset passed its next fetch answers nothing at once; the next
fetch reads from the log start.
"""
from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import trio

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.partition import DataWaiter, Partition
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.broker.share.sessions import FINAL_EPOCH, INITIAL_EPOCH
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import ShareFetchRequest, ShareFetchResponse
from trafka.wire.protocol import ApiKey

if TYPE_CHECKING:  # the share partitions load with the first share group (Broker.share_manager)
    from trafka.broker.share.partition import OffsetRanges

TopicResponse = ShareFetchResponse.ShareFetchableTopicResponse
PartitionData = ShareFetchResponse.PartitionData
AcquiredRecords = ShareFetchResponse.AcquiredRecords
LeaderIdAndEpoch = ShareFetchResponse.LeaderIdAndEpoch
RENEW = 4
#: Among the skipped partitions: a partition's log start offset passed its next fetch (the request returns at once).
_MOVED = (None, -1)


@handles(ApiKey.SHARE_FETCH, 1, 2)
async def handle_share_fetch(ctx: RequestContext, request: ShareFetchRequest) -> ShareFetchResponse:
    manager = ctx.broker.share_manager()
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    settings = manager.group_settings(group_id or "")
    lock_ms = settings.record_lock_duration_ms

    def refuse(code: ErrorCode, message: str | None = None) -> ShareFetchResponse:
        return ShareFetchResponse(error_code=code, error_message=message, acquisition_lock_timeout_ms=0,
                                  responses=[], node_endpoints=[])

    if group_id is None:
        return refuse(ErrorCode.INVALID_REQUEST, "The group id is missing.")
    if not member_id:
        return refuse(ErrorCode.INVALID_REQUEST, "The member id is missing.")
    if not ctx.authorize(AclOperation.READ, AclResourceType.GROUP, group_id):
        return refuse(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    acknowledging = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    renewing = ctx.api_version >= 2 and request.is_renew_ack
    if renewing and (request.max_wait_ms or request.min_bytes or request.max_bytes or request.max_records):
        return refuse(ErrorCode.INVALID_REQUEST)  # a renewing request fetches nothing, and says so
    if epoch == INITIAL_EPOCH and acknowledging:
        return refuse(ErrorCode.INVALID_REQUEST, "Acknowledge data present on initial share fetch request")
    wanted = [(t.topic_id, p.partition_index) for t in request.topics for p in t.partitions]
    try:
        if epoch == INITIAL_EPOCH:  # (a session it replaces leaves the member's records its own, as on Kafka)
            session, _ = manager.sessions.open(group_id, member_id, ctx.connection_id)
        elif epoch == FINAL_EPOCH:
            session = manager.sessions.close(group_id, member_id)
        else:
            session = manager.sessions.use(group_id, member_id, epoch)
    except KafkaError as exc:
        return refuse(exc.code, exc.message or None)
    session.connection_id = ctx.connection_id
    if epoch != FINAL_EPOCH:
        session.add(wanted)
        session.forget((f.topic_id, index) for f in request.forgotten_topics_data for index in f.partitions)

    results: dict[tuple[uuid.UUID, int], PartitionData] = {}
    targets: dict[tuple[uuid.UUID, int], Partition] = {}
    for key in (wanted if epoch == FINAL_EPOCH else session.partitions):
        partition, error = _resolve(ctx, *key)
        if error is not None:
            results[key] = _partition(key[1], error)
        else:
            targets[key] = partition

    # The acknowledgements first. The records they release are still being written as this request first
    # acquires (as on Kafka, where they are in transition until persisted): a wait that follows can take them.
    in_transition: dict[tuple[uuid.UUID, int], OffsetRanges] = {}
    for topic in request.topics:
        for wanted_partition in topic.partitions:
            if not wanted_partition.acknowledgement_batches:
                continue
            key = (topic.topic_id, wanted_partition.partition_index)
            data = results.setdefault(key, _partition(key[1]))
            partition = targets.get(key)
            if partition is None:
                data.acknowledge_error_code = data.error_code
                continue
            batches, code = acknowledgement_batches(wanted_partition.acknowledgement_batches, renewing)
            message = None
            if code == ErrorCode.NONE:
                code, message, in_transition[key] = await manager.acknowledge(group_id, member_id, partition,
                                                                              batches)
            data.acknowledge_error_code = code
            data.acknowledge_error_message = message

    if epoch == FINAL_EPOCH:
        await manager.release_member(group_id, member_id, set(session.partitions))
        return _response(results, lock_ms)

    fetching = not renewing and bool(targets)
    skipped: set[tuple[uuid.UUID, int]] = set()
    if fetching:
        max_bytes = min(request.max_bytes, ctx.broker.config.fetch_max_bytes)
        per_partition = max(max_bytes // len(targets), 1)
        max_records = request.max_records if request.max_records > 0 else 500
        batch_size = request.batch_size if request.batch_size > 0 else max_records
        mode = request.share_acquire_mode if ctx.api_version >= 2 else 0
        deadline = trio.current_time() + max(request.max_wait_ms, 0) / 1000
        acquired = await _acquire(manager, group_id, member_id, targets, results, max_records, batch_size,
                                  per_partition, mode, skipped, in_transition)

    if fetching and not acquired and _MOVED not in skipped:
        while True:
            acquired = await _acquire(manager, group_id, member_id, targets, results, max_records, batch_size,
                                      per_partition, mode, skipped)
            if acquired or trio.current_time() >= deadline:
                break
            waiter = DataWaiter(1)
            for partition in targets.values():
                if partition.is_leader:
                    partition.add_waiter(waiter, read_committed=settings.read_committed)
            entries = manager.add_release_waiter(group_id, targets.values(), waiter.event)
            try:
                with trio.move_on_at(deadline):
                    await waiter.event.wait()
            finally:
                for partition in targets.values():
                    partition.remove_waiter(waiter)
                for entry in entries:
                    entry.waiters.discard(waiter.event)
    if epoch == INITIAL_EPOCH:  # every partition, but those at their in-flight limit, as Kafka answers
        for key in targets:
            if key not in skipped:
                results.setdefault(key, _partition(key[1]))
    response = _response(results, lock_ms)
    response.node_endpoints = node_endpoints(ctx, (p.current_leader.leader_id for t in response.responses
                                                   for p in t.partitions
                                                   if p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER))
    return response


async def _acquire(manager, group_id, member_id, targets, results, max_records, batch_size, per_partition,
                   mode, skipped: set | None = None, in_transition: dict | None = None) -> int:
    """One pass over the partitions; the records acquired. ``skipped`` collects the partitions left out (at their
    in-flight limit) and takes back those answered; ``in_transition``: offsets not to acquire, by partition."""
    total = 0
    for key, partition in targets.items():
        if total >= max_records:
            break
        acquired = await manager.acquire(group_id, member_id, partition, max_records=max_records - total,
                                         batch_size=batch_size, max_bytes=per_partition, mode=mode,
                                         exclude=(in_transition or {}).get(key, ()))
        if skipped is not None:
            if acquired.skipped:
                skipped.add(key)
            else:
                skipped.discard(key)
            if acquired.moved:
                skipped.add(_MOVED)
        if acquired.error != ErrorCode.NONE:
            data = results.setdefault(key, _partition(key[1]))
            data.error_code = acquired.error
            data.error_message = acquired.message
            if acquired.error == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                not_leader(data, partition)
            continue
        if acquired.ranges:
            data = results.setdefault(key, _partition(key[1]))
            data.records = acquired.records
            data.acquired_records = [AcquiredRecords(first_offset=r.first_offset, last_offset=r.last_offset,
                                                     delivery_count=r.delivery_count) for r in acquired.ranges]
            total += sum(r.last_offset - r.first_offset + 1 for r in acquired.ranges)
    return total


def acknowledgement_batches(batches, renew_allowed: bool) -> tuple[list[tuple[int, int, list[int]]], ErrorCode]:
    """The request's acknowledgement batches as (first, last, types), or INVALID_REQUEST: a bad range, types
    neither one nor one per offset, an unknown type, RENEW outside a renewing request. (Overlapping batches are
    applied in turn: the second acknowledgement of an offset is INVALID_RECORD_STATE.)"""
    result = []
    for batch in batches:
        types = list(batch.acknowledge_types)
        if (batch.first_offset > batch.last_offset or not types
                or (len(types) != 1 and len(types) != batch.last_offset - batch.first_offset + 1)
                or any(t < 0 or t > RENEW for t in types) or (RENEW in types and not renew_allowed)):
            return [], ErrorCode.INVALID_REQUEST
        result.append((batch.first_offset, batch.last_offset, types))
    return result, ErrorCode.NONE


def node_endpoints(ctx: RequestContext, leader_ids, endpoint=ShareFetchResponse.NodeEndpoint) -> list:
    """The addresses (on the request's listener) of the leaders named for partitions this broker does not lead."""
    wanted = {leader for leader in leader_ids if leader >= 0}
    if not wanted:
        return []
    live = ctx.broker.topics.live_brokers(ctx.listener)
    return [endpoint(node_id=node_id, host=live[node_id][0], port=live[node_id][1], rack=live[node_id][2])
            for node_id in sorted(wanted) if node_id in live]


def _resolve(ctx: RequestContext, topic_id: uuid.UUID, index: int) -> tuple[Partition | None, ErrorCode | None]:
    topic = ctx.broker.topics.by_id(topic_id)
    if topic is None:
        return None, ErrorCode.UNKNOWN_TOPIC_ID
    if not ctx.authorize(AclOperation.READ, AclResourceType.TOPIC, topic.name):
        return None, ErrorCode.TOPIC_AUTHORIZATION_FAILED
    if not 0 <= index < len(topic.partitions):
        return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return topic.partitions[index], None


def not_leader(data, partition: Partition, leader=LeaderIdAndEpoch) -> None:
    """NOT_LEADER_OR_FOLLOWER's current leader, as this broker knows it."""
    data.current_leader = leader(leader_id=partition.leader_id, leader_epoch=partition.leader_epoch)


def _partition(index: int, error: ErrorCode = ErrorCode.NONE) -> PartitionData:
    return PartitionData(partition_index=index, error_code=error, error_message=None, acknowledge_error_code=0,
                         acknowledge_error_message=None,
                         current_leader=LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1), records=b"",
                         acquired_records=[])


def _response(results: dict[tuple[uuid.UUID, int], PartitionData], lock_ms: int) -> ShareFetchResponse:
    topics: dict[uuid.UUID, list[PartitionData]] = {}
    for (topic_id, _), data in results.items():
        topics.setdefault(topic_id, []).append(data)
    return ShareFetchResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, acquisition_lock_timeout_ms=lock_ms,
        responses=[TopicResponse(topic_id=topic_id, partitions=partitions) for topic_id, partitions in topics.items()],
        node_endpoints=[])
