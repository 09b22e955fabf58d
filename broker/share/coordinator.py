"""The share coordinator: the durable state of share groups' partitions (KIP-932; Kafka's ShareCoordinatorService
and ShareCoordinatorShard).

Each share partition's state -- keyed by (group id, topic id, partition) -- belongs to one partition of
``__share_group_state``: the partition ``abs(java hashCode("group:topic_id:partition")) % partitions``, and the
broker leading that partition coordinates it. The coordinator runtime (:mod:`trafka.broker.coordinator_runtime`)
follows that leadership, loads the partitions and writes to them; this module keeps the states and Kafka's rules.

**Records** (:mod:`trafka.broker.share.records`). A share partition's first record, and every initialization, is a
*snapshot* (its whole state). A write is an *update* (the batches it brings, its start offset and delivery complete
count) until ``share.coordinator.snapshot.update.records.per.snapshot`` updates have followed the last snapshot; the
next write is then a snapshot again, with the snapshot epoch one higher, the batches merged into it. A read that
brings a newer leader epoch records it with a record of its own. A delete is a tombstone of the snapshot key.
Replaying these records (at a load, or as each is appended) rebuilds the same state, so progress survives a restart
and follows leadership to another broker.

**Merging batches** (Kafka's PersisterStateBatchCombiner): batches ending before the start offset go, one straddling
it is cut there; where batches overlap, the one delivered more often wins, then the one in the higher state; runs of
one state and count next to each other become one batch.

**Rules**, as Kafka 4.4 answers them: a negative partition, state epoch or leader epoch is INVALID_REQUEST (with
Kafka's message); reading or writing a share partition never initialized is INVALID_REQUEST; a leader epoch older
than the newest seen is FENCED_LEADER_EPOCH (reads and writes); a state epoch older than the newest is
FENCED_STATE_EPOCH (writes and initializations); a topic or partition that does not exist is
UNKNOWN_TOPIC_OR_PARTITION. A key whose state partition is not led here is NOT_COORDINATOR, one still loading
COORDINATOR_LOAD_IN_PROGRESS; those errors' messages say which operation failed, as Kafka's do.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

import trio

from trafka.broker.coordinator_runtime import CoordinatorRuntime, InternalTopic
from trafka.broker.share.records import (
    ShareKey,
    ShareSnapshotValue,
    ShareUpdateValue,
    decode_key,
    decode_snapshot_value,
    decode_update_value,
    encode_key,
    encode_snapshot_value,
    encode_update_value,
)
from trafka.broker.share.state import PartitionState, StateBatch, share_coordinator_key
from trafka.broker.topics import SHARE_STATE_TOPIC, TopicCreator
from trafka.storage import clock
from trafka.storage.config_defs import BROKER_CONFIG_DEFS
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.primitives import DecodeError
from trafka.wire.records import RecordBatch, build_batch

log = logging.getLogger(__name__)

#: Topic configs of ``__share_group_state``, besides those from the share.coordinator.state.topic.* settings (its
#: records are pruned by the coordinator, not compacted).
SHARE_STATE_TOPIC_CONFIGS = {
    "cleanup.policy": "delete",
    "retention.ms": "-1",
}

#: Kafka's messages for the errors the share coordinator answers with.
MESSAGES = {
    ErrorCode.NOT_COORDINATOR: "This is not the correct coordinator.",
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: "The coordinator is loading and hence can't process requests.",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.FENCED_LEADER_EPOCH: "The leader epoch in the request is older than the epoch on the broker.",
    ErrorCode.FENCED_STATE_EPOCH: "The coordinator rejected the request because the state epoch did not match.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ErrorCode.REQUEST_TIMED_OUT: "The request timed out.",
    ErrorCode.UNKNOWN_SERVER_ERROR: "The server experienced an unexpected error when processing the request.",
}
NULL_TOPIC_ID = "The topic id cannot be null."
NEGATIVE_PARTITION_ID = "The partition id cannot be a negative number."
NEGATIVE_LEADER_EPOCH = "The leader epoch cannot be a negative number."
NEGATIVE_STATE_EPOCH = "The state epoch cannot be a negative number."
WRITE_UNINITIALIZED = "Write operation on uninitialized share partition not allowed."
READ_UNINITIALIZED = "Read operation on uninitialized share partition not allowed."
NOT_AVAILABLE = "Share coordinator is not available."

#: What each operation's failures in the runtime are prefixed with (Kafka's ShareCoordinatorService).
OPERATIONS = {
    "initialize": "Unable to initialize share group state",
    "read": "Unable to read share group state",
    "write": "Unable to write share group state",
    "delete": "Unable to delete share group state",
    "read_summary": "Unable to read share group state summary",
}

Key = tuple[str, uuid.UUID, int]


def setting(properties: Mapping[str, str], name: str, *, clustered: bool):
    """The share coordinator's setting ``name`` (storage/config_defs.py), as a broker of a cluster or a single node
    reads it."""
    from trafka.broker.config import read_setting

    definition = BROKER_CONFIG_DEFS[name]
    default = definition.cluster_default if clustered and definition.cluster_default is not None else (
        definition.default)
    return read_setting(properties, definition, default)


def share_state_topic(properties: Mapping[str, str], *, clustered: bool) -> InternalTopic:
    """``__share_group_state`` as the broker's ``share.coordinator.*`` settings make it."""
    def get(name: str):
        return setting(properties, name, clustered=clustered)

    partitions = get("share.coordinator.state.topic.num.partitions")
    replication = get("share.coordinator.state.topic.replication.factor")
    return InternalTopic(
        name=SHARE_STATE_TOPIC,
        partitions=partitions,
        replication_factor=replication,
        configs={**SHARE_STATE_TOPIC_CONFIGS,
                 "min.insync.replicas": str(get("share.coordinator.state.topic.min.isr")),
                 "segment.bytes": str(get("share.coordinator.state.topic.segment.bytes"))},
        settings=f"share.coordinator.state.topic.num.partitions={partitions}, "
                 f"share.coordinator.state.topic.replication.factor={replication}",
        key_name="share partition",
        users="share groups",
        load_buffer_bytes=get("share.coordinator.load.buffer.size"),
        write_timeout_s=get("share.coordinator.write.timeout.ms") / 1000,
    )


# ==================================================================================================== batches


def combine_batches(so_far: Iterable[StateBatch], new: Iterable[StateBatch], start_offset: int) -> tuple[
        StateBatch, ...]:
    """``so_far`` and ``new`` merged as Kafka merges state batches (see the module docstring); ``start_offset`` -1
    prunes nothing."""
    pruned: list[StateBatch] = []
    for batch in (*so_far, *new):
        if start_offset != -1 and batch.last_offset < start_offset:
            continue
        if start_offset != -1 and batch.first_offset < start_offset:
            batch = replace(batch, first_offset=start_offset)
        pruned.append(batch)
    if len(pruned) <= 1:
        return tuple(pruned)
    pruned.sort(key=lambda b: b.first_offset)
    bounds = sorted({b.first_offset for b in pruned} | {b.last_offset + 1 for b in pruned})
    merged: list[StateBatch] = []
    active: list[tuple[int, int, int, int]] = []  # (-count, -state, last offset, order): the best on top
    following = 0
    for low, high in itertools.pairwise(bounds):
        while following < len(pruned) and pruned[following].first_offset <= low:
            batch = pruned[following]
            heapq.heappush(active, (-batch.delivery_count, -batch.delivery_state, batch.last_offset, following))
            following += 1
        while active and active[0][2] < low:
            heapq.heappop(active)
        if not active:
            continue
        count, state = -active[0][0], -active[0][1]
        last = merged[-1] if merged else None
        if (last is not None and last.last_offset + 1 == low and last.delivery_state == state
                and last.delivery_count == count):
            merged[-1] = replace(last, last_offset=high - 1)
        else:
            merged.append(StateBatch(low, high - 1, state, count))
    return tuple(merged)


# ==================================================================================================== the state


@dataclass(frozen=True)
class ShareGroupOffset:
    """A share partition's state as the coordinator keeps it (Kafka's ShareGroupOffset)."""

    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int
    batches: tuple[StateBatch, ...]
    create_timestamp: int = 0
    write_timestamp: int = 0

    def to_partition_state(self, *, with_batches: bool = True) -> PartitionState:
        return PartitionState(self.state_epoch, self.leader_epoch, self.start_offset,
                              self.batches if with_batches else (), self.delivery_complete_count,
                              self.create_timestamp, self.write_timestamp)


class _Entry:
    """One share partition: its state, the newest leader and state epochs seen, the updates since its snapshot."""

    __slots__ = ("offset", "leader_epoch", "state_epoch", "updates")

    def __init__(self) -> None:
        self.offset: ShareGroupOffset | None = None
        self.leader_epoch: int | None = None
        self.state_epoch: int | None = None
        self.updates: int | None = None


class ShareStates:
    """The share partitions of one ``__share_group_state`` partition, as its records make them (pure)."""

    def __init__(self, updates_per_snapshot: int) -> None:
        self.updates_per_snapshot = updates_per_snapshot
        self.entries: dict[Key, _Entry] = {}
        #: The offset of each share partition's last snapshot record, and the offset below which every record
        #: of this state partition is superseded by a later snapshot (None: not known yet).
        self.snapshot_offsets: dict[Key, int] = {}
        self.redundant_offset: int | None = None

    # -------------------------------------------------------------------------------- replay

    def replay(self, key: ShareKey, value: bytes | memoryview | None, offset: int | None = None) -> None:
        """Apply one record of ``__share_group_state`` (at ``offset`` of its partition, where known)."""
        map_key = (key.group_id, key.topic_id, key.partition)
        if key.snapshot:
            if offset is not None:
                self.snapshot_offsets[map_key] = offset
                self.redundant_offset = min(self.snapshot_offsets.values())
                if value is None:
                    del self.snapshot_offsets[map_key]
            if value is None:
                self.entries.pop(map_key, None)
                return
            snapshot = decode_snapshot_value(value)
            entry = self.entries.setdefault(map_key, _Entry())
            entry.leader_epoch = max(entry.leader_epoch if entry.leader_epoch is not None else snapshot.leader_epoch,
                                     snapshot.leader_epoch)
            entry.state_epoch = max(entry.state_epoch if entry.state_epoch is not None else snapshot.state_epoch,
                                    snapshot.state_epoch)
            entry.offset = ShareGroupOffset(snapshot.snapshot_epoch, snapshot.state_epoch, snapshot.leader_epoch,
                                            snapshot.start_offset, snapshot.delivery_complete_count,
                                            snapshot.state_batches, snapshot.create_timestamp,
                                            snapshot.write_timestamp)
            if entry.updates is not None and entry.updates >= self.updates_per_snapshot:
                entry.updates = 0
            return
        if value is None:
            return
        update = decode_update_value(value)
        entry = self.entries.setdefault(map_key, _Entry())
        entry.leader_epoch = max(entry.leader_epoch if entry.leader_epoch is not None else update.leader_epoch,
                                 update.leader_epoch)
        current = entry.offset
        if current is None:
            entry.offset = ShareGroupOffset(update.snapshot_epoch, 0, update.leader_epoch, update.start_offset,
                                            update.delivery_complete_count, update.state_batches)
        else:
            start = current.start_offset if update.start_offset == -1 else update.start_offset
            entry.offset = replace(
                current, start_offset=start, delivery_complete_count=update.delivery_complete_count,
                leader_epoch=current.leader_epoch if update.leader_epoch == -1 else update.leader_epoch,
                batches=combine_batches(current.batches, update.state_batches, start))
        entry.updates = 1 if entry.updates is None else entry.updates + 1

    def get(self, key: Key) -> ShareGroupOffset | None:
        entry = self.entries.get(key)
        return None if entry is None else entry.offset

    # -------------------------------------------------------------------------------- records for requests

    def write_record(self, key: Key, state_epoch: int, leader_epoch: int, start_offset: int,
                     delivery_complete_count: int, batches: tuple[StateBatch, ...], *, now_ms: int,
                     update_leader_epoch: bool) -> tuple[ShareKey, bytes]:
        """The record a write (or a read bringing a newer leader epoch) of an initialized key appends."""
        entry = self.entries[key]
        current = entry.offset
        assert current is not None
        leader = leader_epoch if update_leader_epoch else current.leader_epoch
        start = max(start_offset, current.start_offset)
        count = delivery_complete_count
        if start_offset == current.start_offset:
            count = max(delivery_complete_count, current.delivery_complete_count)
        elif start_offset < current.start_offset:
            count = current.delivery_complete_count
        group_id, topic_id, partition = key
        if (entry.updates or 0) >= self.updates_per_snapshot:
            value = ShareSnapshotValue(current.snapshot_epoch + 1, current.state_epoch, leader, start, now_ms, now_ms,
                                       combine_batches(current.batches, batches, start), count)
            return ShareKey(group_id, topic_id, partition, True), encode_snapshot_value(value)
        update = ShareUpdateValue(current.snapshot_epoch, leader, start, combine_batches((), batches, start), count)
        return ShareKey(group_id, topic_id, partition, False), encode_update_value(update)

    def initialize_record(self, key: Key, state_epoch: int, start_offset: int, *, now_ms: int) -> tuple[
            ShareKey, bytes]:
        current = self.get(key)
        snapshot_epoch = 0 if current is None else current.snapshot_epoch + 1
        value = ShareSnapshotValue(snapshot_epoch, state_epoch, 0, start_offset, now_ms, now_ms, (),
                                   -1 if start_offset == -1 else 0)
        group_id, topic_id, partition = key
        return ShareKey(group_id, topic_id, partition, True), encode_snapshot_value(value)

    # -------------------------------------------------------------------------------- validation

    def check_write(self, key: Key, state_epoch: int, leader_epoch: int) -> None:
        _check_partition(key[2])
        if leader_epoch < 0:
            raise KafkaError(ErrorCode.INVALID_REQUEST, NEGATIVE_LEADER_EPOCH)
        if state_epoch < 0:
            raise KafkaError(ErrorCode.INVALID_REQUEST, NEGATIVE_STATE_EPOCH)
        entry = self.entries.get(key)
        if entry is None or entry.offset is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, WRITE_UNINITIALIZED)
        if entry.leader_epoch is not None and entry.leader_epoch > leader_epoch:
            log.error("share partition %s: write with leader epoch %d, older than %d", _name(key), leader_epoch,
                      entry.leader_epoch)
            raise _error(ErrorCode.FENCED_LEADER_EPOCH)
        if entry.state_epoch is not None and entry.state_epoch > state_epoch:
            log.info("share partition %s: write with state epoch %d, older than %d", _name(key), state_epoch,
                     entry.state_epoch)
            raise _error(ErrorCode.FENCED_STATE_EPOCH)

    def check_read(self, key: Key, leader_epoch: int) -> None:
        _check_partition(key[2])
        if leader_epoch < 0:
            raise KafkaError(ErrorCode.INVALID_REQUEST, NEGATIVE_LEADER_EPOCH)
        entry = self.entries.get(key)
        if entry is None or entry.offset is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST, READ_UNINITIALIZED)
        if entry.leader_epoch is not None and entry.leader_epoch > leader_epoch:
            log.error("share partition %s: read with leader epoch %d, older than %d", _name(key), leader_epoch,
                      entry.leader_epoch)
            raise _error(ErrorCode.FENCED_LEADER_EPOCH)

    def check_initialize(self, key: Key, state_epoch: int) -> None:
        _check_partition(key[2])
        if state_epoch < 0:
            raise KafkaError(ErrorCode.INVALID_REQUEST, NEGATIVE_STATE_EPOCH)
        entry = self.entries.get(key)
        if entry is not None and entry.state_epoch is not None and entry.state_epoch > state_epoch:
            log.info("share partition %s: initialize with state epoch %d, older than %d", _name(key), state_epoch,
                     entry.state_epoch)
            raise _error(ErrorCode.FENCED_STATE_EPOCH)


def _check_partition(partition: int) -> None:
    if partition < 0:
        raise KafkaError(ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION_ID)


def _error(code: ErrorCode) -> KafkaError:
    return KafkaError(code, MESSAGES[code])


def _name(key: Key) -> str:
    return share_coordinator_key(*key)


# ==================================================================================================== coordinator


class ShareCoordinator:
    """The share partitions whose ``__share_group_state`` partition is led here.

    It is given what it uses: the broker's properties (the ``share.coordinator.*`` settings), its topics (to look
    partitions up and create ``__share_group_state``), whether it is a single node, and how many partitions a topic
    id has (None: no such topic)."""

    def __init__(self, properties: Mapping[str, str], topics: TopicCreator, *, single_node: bool,
                 topic_partitions: Callable[[uuid.UUID], int | None]) -> None:
        clustered = not single_node
        self.updates_per_snapshot = setting(properties, "share.coordinator.snapshot.update.records.per.snapshot",
                                            clustered=clustered)
        self.prune_interval_ms = setting(properties, "share.coordinator.state.topic.prune.interval.ms",
                                         clustered=clustered)
        self.cold_snapshot_interval_ms = setting(properties, "share.coordinator.cold.partition.snapshot.interval.ms",
                                                 clustered=clustered)
        self._topic_partitions = topic_partitions
        #: The share partitions of each state partition loaded here.
        self._shards: dict[int, ShareStates] = {}
        #: Per state partition being loaded, its share partitions replayed so far.
        self._replayed: dict[int, ShareStates] = {}
        self.runtime = CoordinatorRuntime(share_state_topic(properties, clustered=clustered), self, topics,
                                          single_node=single_node)
        self.runtime.lead_existing()

    @staticmethod
    def now_ms() -> int:
        return clock.now_ms()

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """The loads of the ``__share_group_state`` partitions this broker is elected to lead; every
        ``share.coordinator.cold.partition.snapshot.interval.ms`` a snapshot of the share partitions not snapshotted
        for that long, and every ``share.coordinator.state.topic.prune.interval.ms`` the records every share
        partition has a later snapshot of deleted."""
        async with trio.open_nursery() as nursery:
            await nursery.start(self.runtime.run)
            nursery.start_soon(self._every, self.cold_snapshot_interval_ms, self.snapshot_cold_partitions)
            nursery.start_soon(self._every, self.prune_interval_ms, self.prune)
            task_status.started()

    @staticmethod
    async def _every(interval_ms: int, action) -> None:
        while True:
            await trio.sleep(interval_ms / 1000)
            await action()

    async def snapshot_cold_partitions(self) -> int:
        """Snapshot again the share partitions whose last snapshot is older than the cold snapshot interval (unless
        every share partition of the state partition has been snapshotted so already), as Kafka does: their older
        records become prunable. Returns how many snapshots were written."""
        written = 0
        now = self.now_ms()
        for index, states in list(self._shards.items()):
            offsets = [e.offset for e in states.entries.values() if e.offset is not None]
            if not offsets or all(o.create_timestamp != o.write_timestamp for o in offsets):
                continue
            records = []
            for key, entry in states.entries.items():
                current = entry.offset
                if current is None or now - current.write_timestamp < self.cold_snapshot_interval_ms:
                    continue
                group_id, topic_id, partition = key
                value = ShareSnapshotValue(current.snapshot_epoch + 1, current.state_epoch, current.leader_epoch,
                                           current.start_offset, current.create_timestamp, now, current.batches,
                                           current.delivery_complete_count)
                records.append((ShareKey(group_id, topic_id, partition, True), encode_snapshot_value(value)))
            if not records or self.runtime.error(index) != ErrorCode.NONE or self._shards.get(index) is not states:
                continue
            coordinator_key = share_coordinator_key(*next(
                (k.group_id, k.topic_id, k.partition) for k, _ in records))
            batch = bytearray(build_batch([(encode_key(k), v) for k, v in records]))
            try:
                info = self.runtime.append(coordinator_key, batch)
            except KafkaError as exc:
                log.warning("%s-%d: cold snapshots not written: %s", SHARE_STATE_TOPIC, index, exc)
                continue
            for position, (share_key, value) in enumerate(records):
                states.replay(share_key, value, info.first_offset + position)
            written += len(records)
            await self.runtime.await_written(coordinator_key)
        return written

    async def forget_deleted_topics(self) -> int:
        """Delete the state of share partitions whose topic no longer exists (a tombstone each, as Kafka does when
        topics are deleted). Returns how many were deleted."""
        deleted = 0
        for index, states in list(self._shards.items()):
            gone = [key for key in states.entries if self._topic_partitions(key[1]) is None]
            if not gone or self.runtime.error(index) != ErrorCode.NONE or self._shards.get(index) is not states:
                continue
            records = [(ShareKey(group_id, topic_id, partition, True), None) for group_id, topic_id, partition in gone]
            coordinator_key = share_coordinator_key(*gone[0])
            try:
                info = self.runtime.append(coordinator_key, bytearray(build_batch(
                    [(encode_key(key), None) for key, _ in records])))
            except KafkaError as exc:
                log.warning("%s-%d: the state of deleted topics not deleted: %s", SHARE_STATE_TOPIC, index, exc)
                continue
            for position, (share_key, _) in enumerate(records):
                states.replay(share_key, None, info.first_offset + position)
            log.info("%s-%d: the state of %d share partitions of deleted topics deleted", SHARE_STATE_TOPIC, index,
                     len(records))
            deleted += len(records)
            await self.runtime.await_written(coordinator_key)
        return deleted

    async def prune(self) -> int:
        """Delete the state of share partitions of deleted topics, then the records of the state partitions led here
        that a later snapshot supersedes for every share partition (Kafka's prune job): their log start offset moves
        up to the oldest last snapshot, within the high watermark. Returns how many partitions were pruned."""
        await self.forget_deleted_topics()
        pruned = 0
        for index, states in list(self._shards.items()):
            offset = states.redundant_offset
            partition = self.runtime.partition(index)
            if (offset is None or offset <= 0 or partition is None or partition.log is None
                    or self.runtime.error(index) != ErrorCode.NONE):
                continue
            offset = min(offset, partition.high_watermark)
            if offset <= partition.log.log_start_offset:
                continue
            try:
                partition.log.delete_records_before(offset)
            except (KafkaError, OSError) as exc:
                log.warning("%s-%d: records below %d not pruned: %s", SHARE_STATE_TOPIC, index, offset, exc)
                continue
            log.debug("%s-%d pruned below offset %d", SHARE_STATE_TOPIC, index, offset)
            pruned += 1
        return pruned

    # -------------------------------------------------------------------------------- loading (the runtime's shard)

    def on_partition_leadership(self, index: int, leading: bool) -> None:
        self.runtime.on_partition_leadership(index, leading)

    def replay(self, index: int, batch: RecordBatch, log_start_offset: int) -> int:
        if batch.is_control:
            return 0
        states = self._replayed.setdefault(index, ShareStates(self.updates_per_snapshot))
        count = 0
        for record in batch.records():
            if record.offset < log_start_offset or record.key is None:
                continue
            count += 1
            try:
                key = decode_key(record.key)
                if key is not None:
                    states.replay(key, record.value, record.offset)
            except (DecodeError, ValueError, IndexError) as exc:
                log.warning("skipping a %s-%d record that cannot be read: %s", SHARE_STATE_TOPIC, index, exc)
        return count

    def loaded(self, index: int) -> None:
        states = self._replayed.pop(index, None) or ShareStates(self.updates_per_snapshot)
        self._shards[index] = states
        if states.entries:
            log.info("loaded the state of %d share partitions from %s-%d", len(states.entries), SHARE_STATE_TOPIC,
                     index)

    def unloaded(self, index: int) -> int:
        self._replayed.pop(index, None)
        states = self._shards.pop(index, None)
        return 0 if states is None else len(states.entries)

    # -------------------------------------------------------------------------------- keys

    def partition_for(self, group_id: str, topic_id: uuid.UUID, partition: int) -> int:
        return self.runtime.partition_for(share_coordinator_key(group_id, topic_id, partition))

    def coordinator_id(self, key: str) -> int | None:
        """The broker coordinating the share partition whose coordinator key is ``key``."""
        return self.runtime.coordinator_id(key)

    async def ensure_topic(self) -> None:
        """Create ``__share_group_state`` if it does not exist yet (FindCoordinator does, as in Kafka)."""
        await self.runtime.ensure_topic()

    def _shard(self, operation: str, key: Key) -> tuple[ShareStates, str]:
        """The states of ``key``'s state partition, if this broker coordinates it now; its coordinator key."""
        coordinator_key = share_coordinator_key(*key)
        if self.runtime.stopping:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, NOT_AVAILABLE)
        index = self.runtime.partition_for(coordinator_key)
        code = self.runtime.error(index)
        if code == ErrorCode.NONE:
            states = self._shards.get(index)
            if states is not None:
                return states, coordinator_key
            code = ErrorCode.NOT_COORDINATOR  # (a single node before the topic exists)
        raise self._failed(operation, code)

    @staticmethod
    def _failed(operation: str, code: ErrorCode) -> KafkaError:
        return KafkaError(code, f"{OPERATIONS[operation]}: {MESSAGES.get(code, code.name)}")

    def _check_topic(self, key: Key, what: str) -> None:
        count = self._topic_partitions(key[1])
        if count is None or key[2] >= count:
            log.error("topic or partition not found when %s: %s", what, _name(key))
            raise _error(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    async def _append(self, operation: str, states: ShareStates, coordinator_key: str, share_key: ShareKey,
                      value: bytes | None) -> None:
        """Append one record for ``coordinator_key``, apply it, and wait until it is replicated."""
        batch = bytearray(build_batch([(encode_key(share_key), value)]))
        try:
            info = self.runtime.append(coordinator_key, batch)
        except KafkaError as exc:
            raise self._failed(operation, exc.code) from exc
        states.replay(share_key, value, info.last_offset)
        code = await self.runtime.await_written(coordinator_key)
        if code != ErrorCode.NONE:
            raise self._failed(operation, ErrorCode.COORDINATOR_NOT_AVAILABLE if code == ErrorCode.REQUEST_TIMED_OUT
                               else code)

    # -------------------------------------------------------------------------------- the APIs

    async def initialize(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int) -> None:
        key = (group_id, topic_id, partition)
        states, coordinator_key = self._shard("initialize", key)
        states.check_initialize(key, state_epoch)
        self._check_topic(key, "initializing")
        share_key, value = states.initialize_record(key, state_epoch, start_offset, now_ms=self.now_ms())
        await self._append("initialize", states, coordinator_key, share_key, value)

    async def read(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int) -> PartitionState:
        key = (group_id, topic_id, partition)
        states, coordinator_key = self._shard("read", key)
        states.check_read(key, leader_epoch)
        self._check_topic(key, "reading")
        entry = states.entries[key]
        current = entry.offset
        assert current is not None
        state = current.to_partition_state()
        if entry.leader_epoch is not None and entry.leader_epoch == leader_epoch:
            return state
        log.info("share partition %s: read with a new leader epoch %d", coordinator_key, leader_epoch)
        share_key, value = states.write_record(key, current.state_epoch, leader_epoch, current.start_offset,
                                               current.delivery_complete_count, (), now_ms=self.now_ms(),
                                               update_leader_epoch=True)
        await self._append("read", states, coordinator_key, share_key, value)
        return state

    async def write(self, group_id: str, topic_id: uuid.UUID, partition: int, state: PartitionState) -> None:
        key = (group_id, topic_id, partition)
        states, coordinator_key = self._shard("write", key)
        states.check_write(key, state.state_epoch, state.leader_epoch)
        self._check_topic(key, "writing")
        share_key, value = states.write_record(key, state.state_epoch, state.leader_epoch, state.start_offset,
                                               state.delivery_complete_count, tuple(state.batches),
                                               now_ms=self.now_ms(), update_leader_epoch=False)
        await self._append("write", states, coordinator_key, share_key, value)

    async def delete(self, group_id: str, topic_id: uuid.UUID, partition: int) -> None:
        key = (group_id, topic_id, partition)
        states, coordinator_key = self._shard("delete", key)
        _check_partition(partition)
        self._check_topic(key, "deleting")
        if states.get(key) is None:
            log.info("share partition %s: deleting a state that does not exist", coordinator_key)
            return
        await self._append("delete", states, coordinator_key, ShareKey(group_id, topic_id, partition, True), None)

    async def read_summary(self, group_id: str, topic_id: uuid.UUID, partition: int,
                           leader_epoch: int) -> PartitionState:
        key = (group_id, topic_id, partition)
        states, _coordinator_key = self._shard("read_summary", key)
        _check_partition(partition)
        self._check_topic(key, "reading summary")
        current = states.get(key)
        if current is None:
            return PartitionState(0, 0, -1, (), -1)
        return current.to_partition_state(with_batches=False)

    def stop(self) -> None:
        self.runtime.stop()
