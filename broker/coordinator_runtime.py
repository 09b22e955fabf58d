"""The coordinator runtime: what every coordinator that keeps its state in an internal topic shares
(Kafka's coordinator-common ``CoordinatorRuntime`` with its ``PartitionWriter``). The group coordinator
(``__consumer_offsets``) and the transaction coordinator (``__transaction_state``) are its users; each
keeps only its own state machines and hands the runtime a :class:`CoordinatorShard`, the three calls by
which its state follows the partitions.

**Keys and partitions.** A key (a group id, a transactional id) belongs to the partition
``abs(java hashCode(key)) % partitions`` of the topic (:func:`partition_for`), as in Kafka, so that all
of a key's records are ordered in one partition.

**Coordination follows leadership** (Kafka's onElection / onResignation).
:meth:`CoordinatorRuntime.on_partition_leadership` is told when this broker becomes, or stops being, a
partition's leader:

- on election the partition is loaded in the runtime's task, one partition at a time, the log read
  ``load.buffer.size`` bytes at a time with a yield between reads (:func:`read_for_load`); every batch
  goes to the shard's ``replay``, and ``loaded`` follows; meanwhile the partition's keys are
  COORDINATOR_LOAD_IN_PROGRESS. A partition with an empty log is served at once;
- on resignation the load is cancelled and the shard's ``unloaded`` forgets the partition's keys.

:meth:`CoordinatorRuntime.error` says whether a partition's keys are served here: NONE,
COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, or COORDINATOR_NOT_AVAILABLE once the runtime stops. On a
single node the broker leads every partition, so it serves every key (before the topic exists too: it
leads each partition once created, which :meth:`CoordinatorRuntime.ensure_topic` does on demand).

**Writes** go to the partition's leader log as a coordinator writes, in the two styles coordinators
need, both acknowledged once replicated (acks=all, as Kafka writes its internal topics):

- apply on append (the group coordinator): :meth:`CoordinatorRuntime.append` writes, the caller
  applies the change at once, and whoever answers a request that depends on it first awaits
  :meth:`CoordinatorRuntime.await_written` for the key, which waits until the high watermark covers
  every write of the key (nothing waits on a single node, where the high watermark moves with the
  append);
- apply once replicated (the transaction coordinator): :meth:`CoordinatorRuntime.write` appends and
  waits until replicated, and the caller applies the change only when it says NONE.

A failed write is answered as Kafka's coordinators answer it (:data:`WRITE_ERRORS`).
"""
from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

import trio

from trafka.broker.partition import Partition
from trafka.broker.topics import TopicCreator
from trafka.storage.log import AppendInfo, AppendOrigin, Log
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.records import RecordBatch, iter_batches

log = logging.getLogger(__name__)


def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode``: over UTF-16 code units, wrapped to a signed 32-bit int."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


@functools.lru_cache(maxsize=8192)
def partition_for(key: str, partitions: int) -> int:
    """Kafka's key-to-partition mapping for a group id or a transactional id: ``Utils.abs(hashCode) %
    partitions`` (``Utils.abs`` maps Integer.MIN_VALUE to 0)."""
    h = java_string_hash(key)
    return (0 if h == -(2**31) else abs(h)) % partitions


def read_for_load(storage_log: Log, buffer_bytes: int) -> Iterator[list[RecordBatch]]:
    """The batches of a partition from its log start offset to its log end (as it is when the reading
    gets there), ``buffer_bytes`` at a time (a larger batch comes whole), as Kafka's coordinators read
    with their load buffer (``offsets.load.buffer.size``, ``transaction.state.log.load.buffer.size``):
    a list per read, so that a loader may yield between them. The first batch may begin below the log
    start offset; its records there are not the partition's any more."""
    offset = storage_log.log_start_offset
    while offset < storage_log.log_end_offset:
        info = storage_log.read(offset, buffer_bytes, max_offset=storage_log.log_end_offset, min_one_batch=True)
        if info.records is None or info.records.size == 0:
            return
        batches = [batch for batch in iter_batches(info.records.read()) if batch.last_offset >= offset]
        if not batches:
            return
        yield batches
        offset = batches[-1].last_offset + 1


#: A failed append to an internal topic, as the coordinator answers it (Kafka's mapping).
WRITE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


class CoordinatorShard(Protocol):
    """What a coordinator does as its partitions are loaded and unloaded (on the Trio thread)."""

    def replay(self, index: int, batch: RecordBatch, log_start_offset: int) -> int:
        """Apply one batch read from partition ``index`` (records below ``log_start_offset`` are not
        the partition's any more); returns how many records it applied."""
        ...

    def loaded(self, index: int) -> None:
        """Partition ``index`` is replayed: its keys are served from now on."""
        ...

    def unloaded(self, index: int) -> int:
        """Forget the keys of partition ``index`` (no longer led here, or about to be loaded again);
        returns how many there were."""
        ...


@dataclass(frozen=True, slots=True)
class InternalTopic:
    """An internal topic and how its coordinator uses it, from the broker's settings."""

    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str]
    #: The broker settings that size the topic, for the message when it cannot be created.
    settings: str
    #: What a key is ("group", "transactional id") and who goes without a coordinator, for messages.
    key_name: str
    users: str
    load_buffer_bytes: int
    #: How long a write may wait for its replicas.
    write_timeout_s: float


class _Load:
    """A partition led here whose records are being replayed."""

    __slots__ = ("index", "scope")

    def __init__(self, index: int) -> None:
        self.index = index
        self.scope = trio.CancelScope()


#: The state of a partition led here whose keys are served (a :class:`_Load` while loading).
LOADED = "loaded"


class CoordinatorRuntime:
    """One internal topic's partitions as their coordinator sees them (see the module's docstring)."""

    def __init__(self, topic: InternalTopic, shard: CoordinatorShard, topics: TopicCreator, *,
                 single_node: bool) -> None:
        self.topic = topic
        self._shard = shard
        self._topics = topics
        self._single_node = single_node
        #: The partitions led here: LOADED, or their load while it runs.
        self._led: dict[int, _Load | str] = {}
        #: Partitions this broker was told it no longer leads (a single node otherwise leads them all).
        self._resigned: set[int] = set()
        self._loading = 0
        #: Loads waiting for :meth:`run` (leadership can be taken before the runtime's task starts).
        self._pending_loads: list[_Load] = []
        self._nursery: trio.Nursery | None = None
        self._load_turn = trio.Lock()  # partitions are replayed one at a time
        self._load_summary = [0, 0, 0.0]  # partitions, records, seconds: since the last summary
        #: Key -> end offset of its last write not yet known to be replicated; and per partition, the
        #: log end offset at its load when the high watermark was below it. Empty on a single node.
        self._unreplicated: dict[str, int] = {}
        self._unreplicated_at_load: dict[int, int] = {}
        self._stopping = False
        self._topic_error_logged: ErrorCode | None = None

    # ============================================================================ life-cycle

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """The loads of the partitions this broker is elected to lead."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            pending, self._pending_loads = self._pending_loads, []
            for load in pending:
                if self._led.get(load.index) is load:
                    nursery.start_soon(self._load, load)
            task_status.started()
            await trio.sleep_forever()

    def lead_existing(self) -> None:
        """Take up the partitions of the topic this broker leads now (as it is told of the others as
        leadership moves)."""
        topic = self._topics.get(self.topic.name)
        if topic is not None:
            for partition in topic.partitions:
                if partition.is_leader:
                    self.on_partition_leadership(partition.index, True)

    def stop(self) -> None:
        """Serve no more: every key is COORDINATOR_NOT_AVAILABLE from now on."""
        self._stopping = True

    @property
    def stopping(self) -> bool:
        return self._stopping

    @property
    def loading(self) -> bool:
        """Some partition led here is still loading."""
        return self._loading > 0

    # ============================================================================ partitions and keys

    def partition_for(self, key: str) -> int:
        topic = self._topics.get(self.topic.name)
        return partition_for(key, len(topic.partitions) if topic is not None else self.topic.partitions)

    def partition(self, index: int) -> Partition | None:
        topic = self._topics.get(self.topic.name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]

    def coordinator_id(self, key: str) -> int | None:
        """The broker that coordinates ``key``: the leader of its partition (None: no leader, or no
        topic yet)."""
        partition = self.partition(self.partition_for(key))
        if partition is None or partition.leader_id < 0:
            return None
        return partition.leader_id

    def is_loaded(self, index: int) -> bool:
        return self._led.get(index) is LOADED

    # ============================================================================ leadership and loading

    def on_partition_leadership(self, index: int, leading: bool) -> None:
        """This broker became (``leading``) or stopped being the leader of partition ``index``: load it
        (in the runtime's task), or forget it (cancelling its load). Idempotent."""
        name = self.topic.name
        if leading:
            self._resigned.discard(index)
            if index in self._led:
                return
            partition = self.partition(index)
            if partition is None or partition.log is None:
                log.warning("told to coordinate the %ss of %s-%d, which has no log here", self.topic.key_name,
                            name, index)
                return
            self._shard.unloaded(index)  # nothing should be left; a load starts from scratch
            storage_log = partition.log
            if storage_log.log_end_offset <= storage_log.log_start_offset:
                self._led[index] = LOADED  # nothing to replay
                self._shard.loaded(index)
                return
            load = _Load(index)
            self._led[index] = load
            self._loading += 1
            if self._nursery is None:
                self._pending_loads.append(load)
            else:
                self._nursery.start_soon(self._load, load)
            return
        self._resigned.add(index)
        state = self._led.pop(index, None)
        if isinstance(state, _Load):
            self._loading -= 1
            state.scope.cancel()
        self._unreplicated_at_load.pop(index, None)
        for key in [k for k in self._unreplicated if self.partition_for(k) == index]:
            del self._unreplicated[key]
        dropped = self._shard.unloaded(index)
        if state is not None:
            log.info("resigned as coordinator of %s-%d: %d %ss unloaded", name, index, dropped, self.topic.key_name)

    def _state(self, index: int) -> _Load | str | None:
        state = self._led.get(index)
        if state is not None:
            return state
        if self._single_node and index not in self._resigned:
            topic = self._topics.get(self.topic.name)
            if topic is None:
                return LOADED  # a single node will lead every partition once the topic exists: nothing yet
            if index < len(topic.partitions) and topic.partitions[index].is_leader:
                self.on_partition_leadership(index, True)  # created since (CreateTopics)
                return self._led.get(index)
        return None

    def error(self, index: int) -> ErrorCode:
        """NONE when this broker serves the keys of partition ``index`` now; otherwise why not, as Kafka
        says it: COORDINATOR_NOT_AVAILABLE (stopping), COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR."""
        if self._stopping:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        state = self._state(index)
        if state is LOADED:
            if not self._single_node:
                partition = self.partition(index)
                if partition is None or not partition.is_leader:  # leadership moved, resignation not yet told
                    return ErrorCode.NOT_COORDINATOR
            return ErrorCode.NONE
        if state is None:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    async def _load(self, load: _Load) -> None:
        """Replay partition ``load.index`` (elected to lead it), then serve its keys."""
        index, name = load.index, self.topic.name
        with load.scope:
            async with self._load_turn:
                partition = self.partition(index)
                if partition is None or partition.log is None or self._led.get(index) is not load:
                    return
                started = time.monotonic()
                try:
                    count, end = await self._replay(partition, load)
                except (OSError, ValueError) as exc:
                    log.error("cannot load %s-%d: %s", name, index, exc)
                    if self._led.get(index) is load:
                        del self._led[index]
                        self._loading -= 1
                        self._shard.unloaded(index)
                    return
                if self._led.get(index) is not load:
                    return
                self._led[index] = LOADED
                self._loading -= 1
                if partition.log.high_watermark < end:
                    # Replayed past the high watermark: answers about these keys wait for it.
                    self._unreplicated_at_load[index] = end
                self._shard.loaded(index)
                elapsed = time.monotonic() - started
                summary = self._load_summary
                summary[0] += 1
                summary[1] += count
                summary[2] += elapsed
                log.debug("loaded %d records of %s-%d in %.3f s", count, name, index, elapsed)
                if not self._loading:
                    log.info("loaded %d records of %d partitions of %s in %.3f s", summary[1], summary[0], name,
                             summary[2])
                    self._load_summary = [0, 0, 0.0]

    async def _replay(self, partition: Partition, load: _Load) -> tuple[int, int]:
        """Hand the partition's batches to the shard; returns how many records it applied and the
        offset read up to. Like Kafka's loader, reads to the log end as it is when the load finishes:
        as leader, all of it will be committed."""
        storage_log = partition.log
        start = offset = storage_log.log_start_offset
        count = 0
        for batches in read_for_load(storage_log, self.topic.load_buffer_bytes):
            for batch in batches:
                count += self._shard.replay(load.index, batch, start)
            offset = batches[-1].last_offset + 1
            await trio.sleep(0)
            if self._led.get(load.index) is not load:
                break  # resigned meanwhile: the caller sees it
        return count, max(offset, storage_log.log_start_offset)

    # ============================================================================ the topic

    async def ensure_topic(self) -> None:
        """Create the topic if it does not exist yet (FindCoordinator does, as in Kafka). A failure
        (fewer live brokers than its replication factor, say) is logged once and raised."""
        topic = self.topic
        if self._topics.get(topic.name) is not None:
            return
        started = time.monotonic()
        try:
            created = await self._topics.create(topic.name, topic.partitions, topic.replication_factor,
                                                dict(topic.configs))
        except KafkaError as exc:
            if exc.code == ErrorCode.TOPIC_ALREADY_EXISTS:  # created by another request meanwhile
                return
            if self._topic_error_logged != exc.code:
                self._topic_error_logged = exc.code
                log.error("cannot create %s (%s): %s %s; %s have no coordinator (COORDINATOR_NOT_AVAILABLE) until "
                          "it can be created", topic.name, topic.settings, exc.code.name, exc.message, topic.users)
            raise
        self._topic_error_logged = None
        log.info("created %s with %d partitions in %.3f s", topic.name, len(created.partitions),
                 time.monotonic() - started)
        if self._single_node:
            for partition in created.partitions:  # led here from the start
                self.on_partition_leadership(partition.index, True)

    # ============================================================================ writes

    def append(self, key: str, batch: bytearray, *, origin: AppendOrigin = AppendOrigin.CLIENT) -> AppendInfo:
        """Append ``batch`` (records of ``key``) to the key's partition; raises KafkaError with the code
        a coordinator answers (:data:`WRITE_ERRORS`). The caller applies the change at once; an answer
        that depends on it awaits :meth:`await_written` first."""
        name = self.topic.name
        topic = self._topics.get(name)
        if topic is None:  # FindCoordinator creates it: the client asks again
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{name} does not exist yet.")
        partition = topic.partitions[partition_for(key, len(topic.partitions))]
        try:
            info = partition.append(batch, origin=origin)
        except KafkaError as exc:
            log.warning("%s %s: appending to %s failed: %s", self.topic.key_name, key, name, exc)
            raise KafkaError(WRITE_ERRORS.get(exc.code, exc.code), exc.message) from exc
        except OSError as exc:
            log.error("%s %s: appending to %s failed: %s", self.topic.key_name, key, name, exc)
            raise KafkaError(ErrorCode.NOT_COORDINATOR, str(exc)) from exc
        storage_log = partition.log
        if storage_log.high_watermark < storage_log.log_end_offset:  # followers have it to fetch
            self._unreplicated[key] = storage_log.log_end_offset
        return info

    async def await_written(self, key: str) -> ErrorCode:
        """Wait until what has been appended for ``key`` is replicated, within the topic's write
        timeout. Returns NONE, REQUEST_TIMED_OUT, or NOT_COORDINATOR when this broker stopped leading
        the partition meanwhile; the caller maps them to its API's error as Kafka does. Nothing pending
        (always on a single node): no wait."""
        if not self._unreplicated and not self._unreplicated_at_load:
            return ErrorCode.NONE
        index = self.partition_for(key)
        target = max(self._unreplicated.get(key, -1), self._unreplicated_at_load.get(index, -1))
        if target < 0:
            return ErrorCode.NONE
        partition = self.partition(index)
        if partition is None or not partition.is_leader or index not in self._led:
            return ErrorCode.NOT_COORDINATOR
        timeout_s = self.topic.write_timeout_s
        code = await partition.await_replicated(target, trio.current_time() + timeout_s)
        if code == ErrorCode.NOT_LEADER_OR_FOLLOWER or index not in self._led:
            return ErrorCode.NOT_COORDINATOR
        if code == ErrorCode.REQUEST_TIMED_OUT:
            log.warning("%s %s: %s-%d not replicated up to offset %d within %d ms (high watermark %d)",
                        self.topic.key_name, key, self.topic.name, index, target, timeout_s * 1000,
                        partition.high_watermark)
            return code
        if self._unreplicated.get(key, -1) <= partition.high_watermark:
            self._unreplicated.pop(key, None)
        if self._unreplicated_at_load.get(index, -1) <= partition.high_watermark:
            self._unreplicated_at_load.pop(index, None)
        return ErrorCode.NONE

    async def write(self, key: str, batch: bytearray) -> ErrorCode:
        """Append ``batch`` for ``key`` and wait until it is replicated, within the topic's write
        timeout: NONE, or the error a coordinator answers (:data:`WRITE_ERRORS`)."""
        try:
            info = self.append(key, batch)
        except KafkaError as exc:
            return exc.code
        partition = self.partition(self.partition_for(key))
        code = await partition.await_replicated(info.last_offset + 1, trio.current_time() + self.topic.write_timeout_s)
        if code == ErrorCode.NONE and self._unreplicated.get(key, -1) <= partition.high_watermark:
            self._unreplicated.pop(key, None)
        return WRITE_ERRORS.get(code, code)

    def forget_replicated(self) -> None:
        """Drop the pending-write marks that replication has covered (writes no request waited on)."""
        for key, end in list(self._unreplicated.items()):
            partition = self.partition(self.partition_for(key))
            if partition is None or partition.log is None or partition.log.high_watermark >= end:
                del self._unreplicated[key]
        for index, end in list(self._unreplicated_at_load.items()):
            partition = self.partition(index)
            if partition is None or partition.log is None or partition.log.high_watermark >= end:
                del self._unreplicated_at_load[index]
