"""The share partition manager: the share partitions this broker leads, their locks, share sessions and waits.

For every (share group, topic partition) that a share consumer fetches from this broker, the leader of the
partition keeps a :class:`~trafka.broker.share.partition.SharePartition`, loaded on first use from the share
persister (the share coordinator, :meth:`Broker.share_persister`) and written back through it whenever an
acknowledgement, a release or an expired lock changes it: an acknowledgement is answered once its state is
written, and undone if the write fails.

Acquisition locks expire on one timer task: a heap of deadlines, the task asleep until the earliest (a sooner
one moves its wake-up). Long-polling ShareFetches wait on the partitions' data waiters (records appended) and on
the share partitions' own waiters (records released by an acknowledgement, an expired lock or a member leaving),
never polling.

A member that closes its share session has the records it holds released at once; so does one whose connection
closes (its share session ends with it). Leaving the group releases nothing by itself, as on Kafka 4.4.

Settings (broker defaults; a group's own ``share.*`` configs win): ``group.share.record.lock.duration.ms``
(30 s), ``group.share.delivery.count.limit`` (5), ``group.share.partition.max.record.locks`` (2000),
``group.share.max.share.sessions`` (2000); per group only: ``share.auto.offset.reset`` (latest, earliest or
by_duration:<ISO 8601 duration>: where a share partition without a start offset starts when first fetched),
``share.isolation.level`` (read_uncommitted) and ``share.renew.acknowledge.enable`` (true; false: RENEW
acknowledgements are INVALID_RECORD_STATE).
"""
from __future__ import annotations

import heapq
import itertools
import logging
import math
import re
import struct
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import trio

from trafka.broker.share.partition import (
    BATCH_OPTIMIZED,
    AcquiredRange,
    Change,
    LogBatch,
    OffsetRanges,
    SharePartition,
)
from trafka.broker.share.sessions import ShareSessionCache
from trafka.broker.share.state import SharePersister
from trafka.storage import clock
from trafka.storage.config_defs import BROKER_CONFIG_DEFS
from trafka.wire.chunks import FileSlice
from trafka.wire.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from trafka.broker.partition import Partition

log = logging.getLogger(__name__)

#: The batch header fields acquisition reads: base offset, length, ..., attributes, last offset delta, ...,
#: producer id.
_HEADER = struct.Struct(">qiibihiqqqhii")
_HEADER_SIZE = _HEADER.size
#: Errors of loading a share partition that its fetches are told as they are (the others: UNKNOWN_SERVER_ERROR).
_PASSED_ON = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_COORDINATOR,
                        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        ErrorCode.FENCED_LEADER_EPOCH})
#: The persister's answers that say a share partition's state changed without this broker.
_STALE = frozenset({ErrorCode.FENCED_STATE_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.FENCED_LEADER_EPOCH})
_TRANSACTIONAL = 0x10
_CONTROL = 0x20


def setting(properties: Mapping[str, Any], name: str) -> Any:
    """A broker setting from the properties, checked by the catalog, or its default."""
    definition = BROKER_CONFIG_DEFS[name]
    raw = properties.get(name)
    return definition.default if raw is None else definition.parse(name, raw)


@dataclass(slots=True)
class ShareSettings:
    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    partition_max_record_locks: int = 2000
    max_share_sessions: int = 2000

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> ShareSettings:
        return cls(setting(properties, "group.share.record.lock.duration.ms"),
                   setting(properties, "group.share.delivery.count.limit"),
                   setting(properties, "group.share.partition.max.record.locks"),
                   setting(properties, "group.share.max.share.sessions"))


@dataclass(slots=True)
class GroupSettings:
    """A share group's settings, its own configs over the broker's."""

    record_lock_duration_ms: int
    delivery_count_limit: int
    partition_max_record_locks: int
    auto_offset_reset: str = "latest"
    read_committed: bool = False
    renew_enabled: bool = True


@dataclass(slots=True)
class Entry:
    """One share partition and what serializes and waits on it."""

    share_partition: SharePartition
    partition: Partition
    topic_id: uuid.UUID
    #: The partition's leader epoch when the share partition was loaded.
    leader_epoch: int
    lock: trio.Lock = field(default_factory=trio.Lock)
    loaded: trio.Event = field(default_factory=trio.Event)
    error: KafkaError | None = None
    #: Fetches waiting for records to be released.
    waiters: set[trio.Event] = field(default_factory=set)
    #: Where the next read of the log starts at the earliest (the log start offset, once it passed the next fetch).
    read_from: int = 0

    def wake(self) -> None:
        for event in self.waiters:
            event.set()


@dataclass(slots=True)
class Acquired:
    """What one partition gave a ShareFetch."""

    records: FileSlice | None = None
    ranges: list[AcquiredRange] = field(default_factory=list)
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    #: The share partition could not acquire anything (at its in-flight limit): the partition is not answered.
    skipped: bool = False
    #: Its log start offset had passed the next fetch: the request is answered at once (as Kafka does).
    moved: bool = False


class SharePartitionManager:
    def __init__(self, properties: Mapping[str, Any], persister: Callable[[], SharePersister],
                 group_configs: Callable[[str], Mapping[str, str]] | None = None,
                 group_members: Callable[[str], int | None] | None = None) -> None:
        self.settings = ShareSettings.from_properties(properties)
        self._persister = persister
        self._group_configs = group_configs
        #: How many members a share group coordinated here has (None: not coordinated here).
        self._group_members = group_members
        self.sessions = ShareSessionCache(self.settings.max_share_sessions)
        self._entries: dict[tuple[str, uuid.UUID, int], Entry] = {}
        self._deadlines: list[tuple[float, int, tuple[str, uuid.UUID, int]]] = []
        self._sequence = itertools.count()
        self._timer: trio.CancelScope | None = None
        self._timer_wakeup = trio.Event()
        #: Counters for the metrics.
        self.lock_expiries = 0

    # -- settings -----------------------------------------------------------------------------------

    def group_settings(self, group_id: str) -> GroupSettings:
        configs: Mapping[str, str] = {}
        if self._group_configs is not None:
            try:
                configs = self._group_configs(group_id) or {}
            except KafkaError:
                configs = {}
        s = self.settings

        def number(name: str, default: int) -> int:
            raw = configs.get(name)
            try:
                return default if raw is None else int(raw)
            except ValueError:
                return default

        return GroupSettings(
            number("share.record.lock.duration.ms", s.record_lock_duration_ms),
            number("share.delivery.count.limit", s.delivery_count_limit),
            number("share.partition.max.record.locks", s.partition_max_record_locks),
            str(configs.get("share.auto.offset.reset", "latest")),
            str(configs.get("share.isolation.level", "read_uncommitted")) == "read_committed",
            str(configs.get("share.renew.acknowledge.enable", "true")).lower() != "false",
        )

    # -- metrics ------------------------------------------------------------------------------------

    def share_partitions(self) -> list[SharePartition]:
        """The share partitions loaded here."""
        return [e.share_partition for e in list(self._entries.values()) if e.loaded.is_set() and e.error is None]

    # -- share partitions ---------------------------------------------------------------------------

    async def entry(self, group_id: str, partition: Partition) -> Entry:
        """The share partition of ``group_id`` on ``partition`` (led here), loaded from the persister on first use.

        Raises KafkaError: NOT_LEADER_OR_FOLLOWER, or the persister's error while loading."""
        if not partition.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"this broker does not lead {partition}")
        key = (group_id, partition.topic_id, partition.index)
        entry = self._entries.get(key)
        if entry is None or entry.partition is not partition or (
                entry.loaded.is_set() and entry.leader_epoch != partition.leader_epoch):
            # (a new leader epoch: this broker led the partition before, and its state may have moved on since)
            settings = self.group_settings(group_id)
            entry = self._entries[key] = Entry(
                SharePartition(group_id, partition.topic, partition.index,
                               delivery_count_limit=settings.delivery_count_limit,
                               max_in_flight_records=settings.partition_max_record_locks,
                               lock_duration_ms=settings.record_lock_duration_ms),
                partition, partition.topic_id, partition.leader_epoch)
            try:
                await self._load(entry, settings)
            except BaseException as exc:  # (cancelled too: the next use loads it again)
                entry.error = exc if isinstance(exc, KafkaError) else KafkaError(
                    ErrorCode.UNKNOWN_SERVER_ERROR, f"loading the share state failed: {exc!r}")
                if self._entries.get(key) is entry:
                    del self._entries[key]
                if not isinstance(exc, (KafkaError, trio.Cancelled)):
                    log.exception("loading the state of %s failed", entry.share_partition)
                    raise entry.error from exc
                raise
            finally:
                entry.loaded.set()
        else:
            await entry.loaded.wait()
            if entry.error is not None:
                raise entry.error
        return entry

    async def _load(self, entry: Entry, settings: GroupSettings) -> None:
        sp, partition = entry.share_partition, entry.partition
        state = await self._persister().read(sp.group_id, entry.topic_id, sp.partition, partition.leader_epoch)
        sp.leader_epoch = partition.leader_epoch
        latest = partition.last_stable_offset if settings.read_committed else partition.high_watermark
        reset = latest
        policy = settings.auto_offset_reset.strip().lower()
        if policy == "earliest":
            reset = partition.log_start_offset
        elif policy.startswith("by_duration:"):
            duration_ms = iso_duration_ms(settings.auto_offset_reset.strip()[len("by_duration:"):])
            if duration_ms is not None:
                found = partition.log.offset_for_timestamp(clock.now_ms() - duration_ms)
                reset = latest if found is None else min(max(found[0], partition.log_start_offset), latest)
        sp.load(state, reset)
        if state.start_offset >= 0 and state.start_offset < partition.log_start_offset:
            sp.archive_before(partition.log_start_offset)
            sp.commit()

    async def _persist(self, entry: Entry, change: Change) -> None:
        """Write the share partition's state after ``change``; on failure undo it and raise."""
        sp = entry.share_partition
        state = sp.persistent_state(start_offset=sp.start_offset_after())
        try:
            await self._persister().write(sp.group_id, entry.topic_id, sp.partition, state)
        except KafkaError as exc:
            change.rollback()
            if exc.code in _STALE:  # the state moved on without this broker (re-initialized, deleted): load it again
                self._forget(entry)
            raise
        except Exception as exc:  # an unexpected failure of the persister: the change is not kept
            change.rollback()
            log.exception("writing the state of %s failed", sp)
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc)) from exc
        sp.commit()

    # -- acquiring ----------------------------------------------------------------------------------

    async def acquire(self, group_id: str, member_id: str, partition: Partition, *, max_records: int,
                      batch_size: int, max_bytes: int, mode: int = BATCH_OPTIMIZED, exclude=()) -> Acquired:
        """Acquire records of ``partition`` for the member: the acquired ranges and the log batches holding them
        (none of the offsets in ``exclude``)."""
        try:
            entry = await self.entry(group_id, partition)
        except KafkaError as exc:
            if exc.code in _PASSED_ON:
                return Acquired(error=exc.code, message=exc.message or None)
            # a state that cannot be read (never initialized: no such group, say): as Kafka answers it
            return Acquired(error=ErrorCode.UNKNOWN_SERVER_ERROR, message=None)
        settings = self.group_settings(group_id)
        async with entry.lock:
            sp = entry.share_partition
            if partition.log_start_offset > sp.start_offset:  # records deleted from the log: done with
                before = sp.start_offset
                change = sp.archive_before(partition.log_start_offset)
                sp.commit()
                if change or sp.start_offset != before:
                    try:
                        await self._persist(entry, Change())
                    except KafkaError:
                        pass
            if not sp.can_acquire():  # at its in-flight limit: left out of the answer
                return Acquired(skipped=True)
            offset = max(sp.next_fetch_offset(), entry.read_from)
            if offset < partition.log_start_offset:
                # Deleted from under the next fetch: this one gets nothing, the next reads from the log start.
                entry.read_from = partition.log_start_offset
                return Acquired(skipped=True, moved=True)
            try:
                info = partition.read(offset, max_bytes, min_one_batch=True, read_committed=settings.read_committed)
            except KafkaError as exc:
                return Acquired(error=exc.code, message=exc.message or None)
            if info.records is None:
                return Acquired()
            headers = _batch_headers(info.records)
            log_batches = [h[2] for h in headers]
            aborted = [(t.producer_id, t.first_offset, t.last_offset) for t in info.aborted_transactions or ()]
            now = trio.current_time()
            ranges = sp.acquire(member_id, log_batches, max_records=max_records, batch_size=batch_size, now=now,
                                mode=mode, lock_duration_ms=settings.record_lock_duration_ms, aborted=aborted,
                                fetch_offset=offset, exclude=exclude)
            if not ranges:
                return Acquired()
            self._schedule(now + settings.record_lock_duration_ms / 1000, (group_id, entry.topic_id, sp.partition))
            return Acquired(records=_slice(info.records, headers, ranges), ranges=ranges)

    # -- acknowledging ------------------------------------------------------------------------------

    async def acknowledge(self, group_id: str, member_id: str, partition: Partition,
                          batches: list[tuple[int, int, list[int]]]) -> tuple[ErrorCode, str | None, OffsetRanges]:
        """Apply a member's acknowledgements to a partition and persist them: the error code for the partition, its
        message, and the offsets the acknowledgements made available again. A share partition not loaded here
        (never fetched from since this broker started leading it) is UNKNOWN_TOPIC_OR_PARTITION, as on Kafka."""
        if not partition.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, f"this broker does not lead {partition}", OffsetRanges()
        entry = self._entries.get((group_id, partition.topic_id, partition.index))
        if entry is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, OffsetRanges()
        try:
            entry = await self.entry(group_id, partition)
        except KafkaError as exc:
            code = exc.code if exc.code in _PASSED_ON else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return code, exc.message or None, OffsetRanges()
        settings = self.group_settings(group_id)
        if not settings.renew_enabled and any(4 in types for _, _, types in batches):
            return ErrorCode.INVALID_RECORD_STATE, "the group does not renew acquisition locks", OffsetRanges()
        async with entry.lock:
            now = trio.current_time()
            try:
                change = entry.share_partition.acknowledge(member_id, batches, now=now,
                                                           lock_duration_ms=settings.record_lock_duration_ms)
                await self._persist(entry, change)
            except KafkaError as exc:
                return exc.code, exc.message or None, OffsetRanges()
            if any(4 in types for _, _, types in batches):  # renewed locks
                self._schedule(now + settings.record_lock_duration_ms / 1000,
                               (group_id, entry.topic_id, entry.share_partition.partition))
            released = change.released_offsets()
        entry.wake()
        return ErrorCode.NONE, None, released

    async def release_member(self, group_id: str, member_id: str, partitions: set | None = None) -> None:
        """Release what ``member_id`` holds in its group's share partitions here (all of them, or ``partitions``:
        (topic id, index) pairs)."""
        for key, entry in list(self._entries.items()):
            if key[0] != group_id or not entry.loaded.is_set() or entry.error is not None:
                continue
            if partitions is not None and (key[1], key[2]) not in partitions:
                continue
            async with entry.lock:
                change = entry.share_partition.release_member(member_id)
                if change:
                    try:
                        await self._persist(entry, change)
                    except KafkaError as exc:  # (undone by the failed write) released in memory all the same:
                        log.warning("the release of %s's records of %s is not persisted: %s", member_id,
                                    entry.share_partition, exc)  # the member is gone, others may take them
                        entry.share_partition.release_member(member_id)
                        entry.share_partition.commit()
            if change:
                entry.wake()

    def member_left(self, group_id: str, member_id: str) -> None:
        """The group coordinator's word that a member left. What it holds stays its own, as on Kafka 4.4, until its
        share session ends (a consumer leaving acknowledges what it read after its last heartbeat, then closes
        its sessions) or the locks expire. Once the group is empty its share partitions are forgotten here, to be
        loaded again when next read: while it is empty its state may be altered or deleted
        (AlterShareGroupOffsets, DeleteShareGroupOffsets)."""
        self._spawn(self._member_left, group_id, member_id)

    async def _member_left(self, group_id: str, member_id: str) -> None:
        members = self._group_members(group_id) if self._group_members is not None else None
        if members == 0:
            for key, entry in list(self._entries.items()):
                if key[0] == group_id:
                    async with entry.lock:
                        self._forget(entry)

    def _forget(self, entry: Entry) -> None:
        sp = entry.share_partition
        key = (sp.group_id, entry.topic_id, sp.partition)
        if self._entries.get(key) is entry:
            del self._entries[key]

    def connection_closed(self, connection_id: int) -> None:
        """The share sessions last used on a connection that closed end, and their members' records are released
        (a consumer that died lets its records go at once, not when their locks expire)."""
        for session in self.sessions.on_connection(connection_id):
            self.sessions.remove(session.group_id, session.member_id)
            self._spawn(self.release_member, session.group_id, session.member_id, set(session.partitions))

    # -- waiting ------------------------------------------------------------------------------------

    def add_release_waiter(self, group_id: str, partitions, event: trio.Event) -> list[Entry]:
        entries = []
        for partition in partitions:
            entry = self._entries.get((group_id, partition.topic_id, partition.index))
            if entry is not None:
                entry.waiters.add(event)
                entries.append(entry)
        return entries

    # -- lock expiry --------------------------------------------------------------------------------

    _nursery: trio.Nursery | None = None

    def _spawn(self, fn, *args) -> None:
        """Run ``fn(*args)`` with the manager's tasks; nothing once they have stopped (the broker is stopping: what
        is persisted is what a restart finds)."""
        if self._nursery is not None:
            try:
                self._nursery.start_soon(fn, *args)
            except RuntimeError:  # closed, its task not yet told
                pass

    def _schedule(self, deadline: float, key: tuple[str, uuid.UUID, int]) -> None:
        heapq.heappush(self._deadlines, (deadline, next(self._sequence), key))
        if self._timer is not None and deadline < self._timer.deadline:
            self._timer.deadline = deadline

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Expire acquisition locks as they come due (one task for every share partition)."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started()
                await self._expire_due()
        finally:
            self._nursery = None

    async def _expire_due(self) -> None:
        while True:
            self._timer = trio.CancelScope(deadline=self._deadlines[0][0] if self._deadlines else math.inf)
            with self._timer:
                await trio.sleep_forever()
            self._timer = None
            now = trio.current_time()
            due = set()
            while self._deadlines and self._deadlines[0][0] <= now:
                due.add(heapq.heappop(self._deadlines)[2])
            for key in due:
                entry = self._entries.get(key)
                if entry is not None and entry.loaded.is_set() and entry.error is None:
                    self._spawn(self._expire, entry, now)  # (a slow write holds up no other)

    async def _expire(self, entry: Entry, now: float) -> None:
        async with entry.lock:
            sp = entry.share_partition
            change = sp.expire_locks(now)
            if not change:
                return
            self.lock_expiries += change.records
            try:
                await self._persist(entry, Change())  # the records are free whether or not this is written
            except KafkaError as exc:
                log.warning("the expiry of locks of %s is not persisted: %s", sp, exc)
                sp.commit()
        entry.wake()


_ISO_DURATION = re.compile(r"^P(?:(?P<days>\d+)D)?(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?"
                           r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)


def iso_duration_ms(text: str) -> int | None:
    """An ISO 8601 duration as share.auto.offset.reset's by_duration gives it (PnDTnHnMn.nS), in ms; None if it
    is not one."""
    match = _ISO_DURATION.match(text.strip())
    if match is None or text.strip().upper() in ("P", "PT"):
        return None
    parts = {k: float(v) for k, v in match.groupdict().items() if v is not None}
    seconds = (parts.get("days", 0) * 86400 + parts.get("hours", 0) * 3600 + parts.get("minutes", 0) * 60
               + parts.get("seconds", 0))
    return int(seconds * 1000)


def _batch_headers(records: FileSlice) -> list[tuple[int, int, LogBatch]]:
    """(position, size, batch) of each record batch of a file slice, read from their headers."""
    import os

    headers = []
    position, end = records.position, records.position + records.size
    fd = records.file.fileno()
    while position + _HEADER_SIZE <= end:
        raw = os.pread(fd, _HEADER_SIZE, position)
        if len(raw) < _HEADER_SIZE:
            break
        (base_offset, length, _epoch, _magic, _crc, attributes, last_delta, _t0, _t1, producer_id, _pe, _seq,
         _count) = _HEADER.unpack(raw)
        size = 12 + length
        if position + size > end:
            break
        headers.append((position, size, LogBatch(base_offset, base_offset + last_delta, producer_id,
                                                 bool(attributes & _TRANSACTIONAL), bool(attributes & _CONTROL))))
        position += size
    return headers


def _slice(records: FileSlice, headers: list[tuple[int, int, LogBatch]], ranges: list[AcquiredRange]) -> FileSlice:
    """The part of ``records`` from the first batch holding an acquired record to the last one."""
    first = min(r.first_offset for r in ranges)
    last = max(r.last_offset for r in ranges)
    start = end = None
    for position, size, batch in headers:
        if batch.last_offset >= first and batch.base_offset <= last:
            if start is None:
                start = position
            end = position + size
    if start is None:
        return records
    return FileSlice(records.file, start, end - start)
