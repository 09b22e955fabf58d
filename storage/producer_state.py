"""Idempotent and transactional producer state of one partition.

For every producer id that has written to the partition, the leader keeps the producer's epoch, the
metadata of its last five batches (sequence range, offsets, timestamp), the epoch of the transaction
coordinator that wrote its last transaction marker and the first offset of its ongoing transaction.
From that it decides, for each incoming batch of an idempotent producer:

- a retry of one of the last five batches (same epoch, same first and last sequence) is a duplicate:
  it is not written again, and the producer is answered with the offsets of the original;
- an epoch below the producer's current epoch is fenced: ``INVALID_PRODUCER_EPOCH``;
- a new, larger epoch must start again at sequence 0, else ``OUT_OF_ORDER_SEQUENCE_NUMBER``;
- within the current epoch the first sequence must follow the last one by exactly one (sequences are
  non-negative int32 values and wrap from 2147483647 to 0), else ``OUT_OF_ORDER_SEQUENCE_NUMBER``;
- a producer of which nothing is known (it never wrote, or its state expired or was deleted with the
  log) is accepted at any sequence: the partition leader never answers ``UNKNOWN_PRODUCER_ID``;
- a transactional producer may not write non-transactional data inside an open transaction
  (``INVALID_TXN_STATE``), and a transaction marker from an older coordinator epoch is fenced
  (``TRANSACTION_COORDINATOR_FENCED``).

One append request is staged: ``begin_append``, then ``check`` and ``record`` for each batch (a batch
is checked against the state including the batches staged before it), then ``commit_append`` once the
batches are in the log, or ``abort_append`` if the request is rejected, which leaves the state exactly
as it was.

Transactions: a transactional data batch opens its producer's transaction at its first offset; a
COMMIT or ABORT control batch closes it. ``first_unstable_offset`` is the first offset of the oldest
transaction that is still open, or completed with its marker not yet below the high watermark; the
last stable offset is ``max(log_start_offset, min(first_unstable_offset, high_watermark))``.

Snapshots: ``take_snapshot(offset)`` writes the state of every producer to
``<20-digit offset>.snapshot`` in the partition directory, in Kafka's own producer snapshot format
(version 1), so the files are interchangeable with Kafka's. Big-endian::

    int16   version = 1
    uint32  CRC-32C of everything after this field
    int32   number of producer entries, each:
        int64 producer_id     int16 producer_epoch     int32 last_sequence     int64 last_offset
        int32 offset_delta    int64 timestamp          int32 coordinator_epoch int64 current_txn_first_offset

``last_offset`` is -1 for a producer with no batch metadata, ``offset_delta`` is last offset minus
first offset of the last batch, ``current_txn_first_offset`` is -1 outside a transaction. A snapshot
holds only the last batch of each producer; ``load`` restores the newest snapshot and replays the
batch headers written after it, which brings back the full last-five-batches window for recent
producers. A snapshot holds open transactions but not completed ones awaiting the high watermark: after
``load`` (and a ``truncate`` that reloads) only transactions completed after the snapshot await it, so
the log must call ``on_high_watermark_updated`` right after either, as Kafka's log does.
"""
from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Final

from trafka.storage import clock
from trafka.storage.checkpoints import atomic_write
from trafka.storage.files import PRODUCER_SNAPSHOT_FILE_SUFFIX, offset_from_file_name, producer_snapshot_file
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.records import (
    NO_PRODUCER_EPOCH,
    NO_SEQUENCE,
    ControlRecordType,
    EndTransactionMarker,
    RecordBatch,
    crc32c,
    parse_end_transaction_marker,
)

NUM_BATCHES_TO_RETAIN: Final = 5
INT32_MAX: Final = 2**31 - 1

PRODUCER_SNAPSHOT_VERSION: Final = 1
_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_START = 6  # the CRC covers everything after the version and the CRC itself


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement`` in the non-negative int32 space of producer sequences."""
    return (sequence - decrement) % (INT32_MAX + 1)


def _in_sequence(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == INT32_MAX)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """What is remembered of one appended batch of a producer."""

    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    """The state of one producer id: its epoch and its last batches, oldest first."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, producer_epoch: int, first_sequence: int, last_sequence: int) -> BatchMetadata | None:
        if producer_epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_sequence == first_sequence and batch.last_sequence == last_sequence:
                return batch
        return None

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
            deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
        )

    def update_epoch(self, producer_epoch: int) -> None:
        # A new epoch starts a new sequence space: the old batches cannot be retried any more.
        if producer_epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = producer_epoch


class VerificationGuard:
    """A pending transaction verification of one producer in one partition (compared by identity)."""

    __slots__ = ("producer_id", "created_ms")

    def __init__(self, producer_id: int, created_ms: int) -> None:
        self.producer_id = producer_id
        self.created_ms = created_ms


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction closed by a marker in a committed append.

    ``last_offset`` is the offset of the marker. ``last_stable_offset`` is where the last stable offset
    stood right after the marker: the first offset of the oldest transaction of another producer still
    open then, or ``last_offset + 1``. Aborted transactions go into the segment's transaction index
    with it.
    """

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool
    last_stable_offset: int


class CorruptSnapshotError(Exception):
    """A producer snapshot file that cannot be read back."""


@dataclass(slots=True)
class _StagedStart:
    producer_id: int
    first_offset: int


@dataclass(slots=True)
class _StagedCompletion:
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerStateManager:
    """Producer ids, epochs, sequences and open transactions of one partition log."""

    def __init__(self, log_dir: Path, *, max_producer_id_expiration_ms: int = 86400000) -> None:
        self.log_dir = log_dir
        self.max_producer_id_expiration_ms = max_producer_id_expiration_ms
        self._producers: dict[int, ProducerStateEntry] = {}
        self._ongoing_txns: dict[int, int] = {}  # first offset -> producer id
        self._unreplicated_txns: dict[int, int] = {}  # first offset -> offset of the closing marker
        # Offset after the last batch reflected in the state: truncating the log below it changes the state.
        self._end_offset = 0
        self._staged: dict[int, ProducerStateEntry] = {}
        self._staged_txn_events: list[_StagedStart | _StagedCompletion] = []
        self._staged_end_offset = 0
        # KIP-890 verification guards, by producer id: see ``start_verification``.
        self._verification_guards: dict[int, VerificationGuard] = {}

    # -- queries --------------------------------------------------------------------------------------

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        """The committed state of ``producer_id`` (do not mutate it), or None if nothing is known."""
        return self._producers.get(producer_id)

    @property
    def active_producers(self) -> Mapping[int, ProducerStateEntry]:
        """Every known producer, by producer id (a read-only view)."""
        return MappingProxyType(self._producers)

    @property
    def end_offset(self) -> int:
        """The offset after the last batch the state reflects (from a snapshot or a recorded batch)."""
        return self._end_offset

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction that is open, or closed by a marker at or above
        the high watermark; None when there is none. It may lie below the log start offset."""
        firsts = [min(txns) for txns in (self._ongoing_txns, self._unreplicated_txns) if txns]
        return min(firsts, default=None)

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget completed transactions whose marker is below the high watermark (now replicated)."""
        self._forget_completed_txns_below(high_watermark)

    # -- transaction verification (KIP-890) ----------------------------------------------------------

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Whether ``producer_id`` has a transaction open in this partition, at ``producer_epoch``."""
        entry = self._producers.get(producer_id)
        return (entry is not None and entry.current_txn_first_offset is not None
                and entry.producer_epoch == producer_epoch)

    def start_verification(self, producer_id: int) -> VerificationGuard:
        """The guard of a transactional batch of ``producer_id`` that would start a transaction here,
        taken before its coordinator is asked whether the partition is in the transaction. Any
        transactional batch or marker of the producer appended meanwhile drops the guard, so an append
        verified before a marker that ended the transaction is refused (``verified`` is then False)."""
        guard = self._verification_guards.get(producer_id)
        if guard is None:
            guard = VerificationGuard(producer_id, clock.now_ms())
            self._verification_guards[producer_id] = guard
        return guard

    def verified(self, producer_id: int, guard: VerificationGuard) -> bool:
        """Whether ``guard`` still stands: nothing of the producer's was appended since it was taken."""
        return self._verification_guards.get(producer_id) is guard

    def drop_verification(self, guard: VerificationGuard) -> None:
        """Forget ``guard``, unless it was replaced meanwhile. (A failed verification leaves its guard:
        another request of the producer may be waiting on it; ``remove_expired`` forgets it.)"""
        if self._verification_guards.get(guard.producer_id) is guard:
            del self._verification_guards[guard.producer_id]

    # -- one append -----------------------------------------------------------------------------------

    def begin_append(self) -> None:
        """Start staging the batches of one append request."""
        self.abort_append()

    def check(self, batch: RecordBatch, *, from_client: bool = True) -> tuple[int, int] | None:
        """Validate an incoming batch against the producer's state (and earlier batches of this append).

        Returns ``(first_offset, last_offset)`` of the original batch when ``batch`` is a retry of one
        of the producer's last five batches, None when it may be appended; raises ``KafkaError`` when it
        must be rejected. Batches without a producer id are always accepted. A batch written by a
        coordinator rather than a client (``from_client=False``) carries no sequences: only its producer
        epoch and the transaction state are checked.
        """
        producer_id = batch.producer_id
        if producer_id < 0:
            return None
        committed = self._producers.get(producer_id)
        producer_epoch = batch.producer_epoch
        if from_client and committed is not None and not batch.is_control:
            duplicate = committed.find_duplicate(producer_epoch, batch.base_sequence, batch.last_sequence)
            if duplicate is not None:
                return duplicate.first_offset, duplicate.last_offset

        entry = self._staged.get(producer_id) or committed or ProducerStateEntry(producer_id)
        if producer_epoch < entry.producer_epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {producer_id} epoch {producer_epoch} is older than the current epoch "
                f"{entry.producer_epoch}",
            )
        if batch.is_control:
            marker = _end_txn_marker(batch)
            if marker is not None and marker.coordinator_epoch < entry.coordinator_epoch:
                raise KafkaError(
                    ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                    f"transaction marker of producer {producer_id} from coordinator epoch "
                    f"{marker.coordinator_epoch}, older than {entry.coordinator_epoch}",
                )
            return None

        if from_client:
            committed_epoch = committed.producer_epoch if committed is not None else NO_PRODUCER_EPOCH
            _check_sequence(batch, entry, committed_epoch)
        if entry.current_txn_first_offset is not None and not batch.is_transactional:
            raise KafkaError(
                ErrorCode.INVALID_TXN_STATE,
                f"non-transactional batch from producer {producer_id} inside its transaction started at "
                f"offset {entry.current_txn_first_offset}",
            )
        return None

    def record(
        self, batch: RecordBatch, first_offset: int, last_offset: int, *, append_time_ms: int | None = None
    ) -> None:
        """Stage the effect of ``batch``, to be written at ``first_offset..last_offset``.

        ``append_time_ms`` is the batch's timestamp when the log stamps log-append time; otherwise its
        max timestamp counts. No validation happens here (``check`` does it); replay and replication
        record batches as they are in the log.
        """
        producer_id = batch.producer_id
        if producer_id < 0:
            return
        self._staged_end_offset = max(self._staged_end_offset, last_offset + 1)
        entry = self._staged.get(producer_id)
        if entry is None:
            committed = self._producers.get(producer_id)
            entry = committed.copy() if committed is not None else ProducerStateEntry(producer_id)
            self._staged[producer_id] = entry
        timestamp = batch.max_timestamp if append_time_ms is None else append_time_ms

        if batch.is_control:
            marker = _end_txn_marker(batch)
            if marker is None:
                return
            if entry.current_txn_first_offset is not None:
                is_aborted = marker.type is ControlRecordType.ABORT
                self._staged_txn_events.append(
                    _StagedCompletion(producer_id, entry.current_txn_first_offset, first_offset, is_aborted)
                )
            entry.update_epoch(batch.producer_epoch)
            entry.coordinator_epoch = marker.coordinator_epoch
            entry.current_txn_first_offset = None
            entry.last_timestamp = timestamp
            return

        entry.update_epoch(batch.producer_epoch)
        entry.batches.append(
            BatchMetadata(batch.base_sequence, batch.last_sequence, first_offset, last_offset, timestamp)
        )
        entry.last_timestamp = timestamp
        if batch.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = first_offset
            self._staged_txn_events.append(_StagedStart(producer_id, first_offset))

    def commit_append(self) -> list[CompletedTxn]:
        """Make the staged batches part of the state; returns the transactions they completed."""
        self._producers.update(self._staged)
        if self._verification_guards:  # a batch or marker of the producer ends its pending verification
            for producer_id in self._staged:
                self._verification_guards.pop(producer_id, None)
        completed: list[CompletedTxn] = []
        for event in self._staged_txn_events:
            if isinstance(event, _StagedStart):
                self._ongoing_txns[event.first_offset] = event.producer_id
                continue
            last_stable_offset = min(
                (first for first, pid in self._ongoing_txns.items() if pid != event.producer_id),
                default=event.last_offset + 1,
            )
            self._ongoing_txns.pop(event.first_offset, None)
            self._unreplicated_txns[event.first_offset] = event.last_offset
            completed.append(
                CompletedTxn(
                    event.producer_id, event.first_offset, event.last_offset, event.is_aborted, last_stable_offset
                )
            )
        self._end_offset = max(self._end_offset, self._staged_end_offset)
        self.abort_append()
        return completed

    def abort_append(self) -> None:
        """Drop everything staged since ``begin_append``."""
        self._staged = {}
        self._staged_txn_events = []
        self._staged_end_offset = 0

    # -- expiration -----------------------------------------------------------------------------------

    def remove_expired(self, now_ms: int) -> None:
        """Forget producers idle for ``max_producer_id_expiration_ms`` that have no open transaction."""
        if self._verification_guards:  # verifications never followed by an append, as Kafka expires them
            horizon = now_ms - self.max_producer_id_expiration_ms
            for pid in [pid for pid, guard in self._verification_guards.items() if guard.created_ms < horizon]:
                del self._verification_guards[pid]
        expired = [pid for pid, entry in self._producers.items() if self._is_expired(entry, now_ms)]
        for producer_id in expired:
            del self._producers[producer_id]

    def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (
            entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= self.max_producer_id_expiration_ms
        )

    # -- snapshots, loading, truncation ---------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files in the log directory, ascending."""
        offsets = []
        for path in self.log_dir.glob("*" + PRODUCER_SNAPSHOT_FILE_SUFFIX):
            try:
                offsets.append(offset_from_file_name(path.name))
            except ValueError:
                continue
        return sorted(offsets)

    def take_snapshot(self, offset: int, *, sync: bool = True) -> None:
        """Write the committed state, which reflects the log up to ``offset`` (exclusive), to disk
        (``sync=False``: without fsync; the log flushes it with the segments it follows)."""
        write_snapshot(producer_snapshot_file(self.log_dir, offset), self._producers.values(), sync=sync)

    def load(
        self,
        log_start_offset: int,
        log_end_offset: int,
        read_batches: Callable[[int], Iterable[RecordBatch]],
        *,
        now_ms: int | None = None,
    ) -> None:
        """Rebuild the state of a log holding ``log_start_offset..log_end_offset`` (exclusive).

        Snapshots outside that range are deleted. The newest readable snapshot is loaded (a corrupt one
        is deleted and the next older one tried), producers expired by ``now_ms`` (default: the wall
        clock) are dropped, then the batches from the snapshot's offset (or the log start offset when
        there is none) up to ``log_end_offset`` are replayed: ``read_batches(offset)`` yields the log's
        batches from the one containing ``offset`` onwards.
        """
        now_ms = clock.now_ms() if now_ms is None else now_ms
        self._producers.clear()
        self._ongoing_txns.clear()
        self._unreplicated_txns.clear()
        self._verification_guards.clear()
        self.abort_append()
        self._delete_snapshots_outside(log_start_offset, log_end_offset)

        replay_from = log_start_offset
        for offset in reversed(self.snapshot_offsets()):
            path = producer_snapshot_file(self.log_dir, offset)
            try:
                entries = read_snapshot(path)
            except CorruptSnapshotError:
                path.unlink(missing_ok=True)
                continue
            for entry in entries:
                if self._is_expired(entry, now_ms):
                    continue
                self._producers[entry.producer_id] = entry
                if entry.current_txn_first_offset is not None:
                    self._ongoing_txns[entry.current_txn_first_offset] = entry.producer_id
            replay_from = offset
            break
        self._end_offset = replay_from

        # One commit per batch, so that each completed transaction sees exactly the transactions that
        # were open when its marker was written.
        for batch in read_batches(replay_from):
            if batch.base_offset >= log_end_offset:
                break
            if batch.last_offset < replay_from or batch.producer_id < 0:
                continue
            self.record(batch, batch.base_offset, batch.last_offset)
            self.commit_append()

    def truncate(
        self,
        log_start_offset: int,
        log_end_offset: int,
        read_batches: Callable[[int], Iterable[RecordBatch]] | None = None,
        *,
        now_ms: int | None = None,
    ) -> None:
        """Follow the log to ``log_start_offset..log_end_offset`` after it was truncated at either end.

        Snapshots outside the range are deleted and completed transactions below the log start offset
        forgotten. When the log lost batches that the state reflects (``log_end_offset`` below
        ``end_offset``), the state is rebuilt with ``load``, which needs ``read_batches``: without it
        that case raises ``ValueError``.
        """
        self._delete_snapshots_outside(log_start_offset, log_end_offset)
        self._forget_completed_txns_below(log_start_offset)
        if log_end_offset < self._end_offset:
            if read_batches is None:
                raise ValueError(
                    f"truncating producer state to {log_end_offset}, below {self._end_offset}, "
                    "needs read_batches to replay the log"
                )
            self.load(log_start_offset, log_end_offset, read_batches, now_ms=now_ms)

    def _delete_snapshots_outside(self, log_start_offset: int, log_end_offset: int) -> None:
        for offset in self.snapshot_offsets():
            if offset < log_start_offset or offset > log_end_offset:
                producer_snapshot_file(self.log_dir, offset).unlink(missing_ok=True)

    def _forget_completed_txns_below(self, offset: int) -> None:
        for first_offset, marker_offset in list(self._unreplicated_txns.items()):
            if marker_offset < offset:
                del self._unreplicated_txns[first_offset]


def _check_sequence(batch: RecordBatch, entry: ProducerStateEntry, committed_epoch: int) -> None:
    """Raise OUT_OF_ORDER_SEQUENCE_NUMBER unless ``batch`` continues ``entry``'s sequence.

    ``entry`` includes the batches staged before this one; ``committed_epoch`` is the epoch known
    before the append began: while it is unknown, any sequence is accepted.
    """
    producer_id, producer_epoch, first_sequence = batch.producer_id, batch.producer_epoch, batch.base_sequence
    if producer_epoch != entry.producer_epoch:
        if first_sequence != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {producer_id} starts epoch {producer_epoch} at sequence {first_sequence}, not 0",
            )
    elif committed_epoch != NO_PRODUCER_EPOCH and not _in_sequence(entry.last_sequence, first_sequence):
        raise KafkaError(
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            f"producer {producer_id} epoch {producer_epoch}: sequence {first_sequence} does not follow "
            f"the last sequence {entry.last_sequence}",
        )


def _end_txn_marker(batch: RecordBatch) -> EndTransactionMarker | None:
    """The COMMIT or ABORT marker of a control batch; None for a control batch emptied by compaction."""
    for record in batch.records():
        return parse_end_transaction_marker(record)
    return None


def write_snapshot(path: Path, entries: Iterable[ProducerStateEntry], *, sync: bool = True) -> None:
    """Write a producer snapshot file (Kafka's version 1 format), atomically."""
    entries = sorted(entries, key=lambda e: e.producer_id)
    body = bytearray(_SNAPSHOT_HEADER.pack(PRODUCER_SNAPSHOT_VERSION, 0, len(entries)))
    for entry in entries:
        last = entry.batches[-1] if entry.batches else None
        body += _SNAPSHOT_ENTRY.pack(
            entry.producer_id,
            entry.producer_epoch,
            last.last_sequence if last else NO_SEQUENCE,
            last.last_offset if last else -1,
            last.last_offset - last.first_offset if last else 0,
            entry.last_timestamp,
            entry.coordinator_epoch,
            -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset,
        )
    struct.pack_into(">I", body, 2, crc32c(memoryview(body)[_CRC_START:]))
    atomic_write(path, bytes(body), sync=sync)


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    """The producer entries of a snapshot file; ``CorruptSnapshotError`` if it is not a valid one."""
    data = path.read_bytes()
    if len(data) < _SNAPSHOT_HEADER.size:
        raise CorruptSnapshotError(f"{path}: {len(data)} bytes is too short for a producer snapshot")
    version, crc, count = _SNAPSHOT_HEADER.unpack_from(data)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"{path}: unknown producer snapshot version {version}")
    if count < 0 or len(data) != _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshotError(f"{path}: {len(data)} bytes do not hold {count} producer entries")
    computed = crc32c(memoryview(data)[_CRC_START:])
    if crc != computed:
        raise CorruptSnapshotError(f"{path}: stored CRC {crc:#010x}, computed {computed:#010x}")
    entries = []
    for fields in _SNAPSHOT_ENTRY.iter_unpack(memoryview(data)[_SNAPSHOT_HEADER.size :]):
        producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp, coordinator_epoch, txn = fields
        entry = ProducerStateEntry(
            producer_id, epoch, coordinator_epoch, timestamp, None if txn < 0 else txn
        )
        if last_offset >= 0:
            entry.batches.append(
                BatchMetadata(
                    decrement_sequence(last_sequence, offset_delta),
                    last_sequence,
                    last_offset - offset_delta,
                    last_offset,
                    timestamp,
                )
            )
        entries.append(entry)
    return entries
