"""The log of one partition: an ordered list of segments, the last one active.

Appends (``append``) validate the batches of one produce request from their headers alone, check
idempotent producers' sequences, assign offsets by patching the batches' base offsets in place,
stamp the leader epoch (and log-append time where configured), roll the active segment when
Kafka would, and write all the request's bytes with one ``write`` call. A request that is
rejected leaves the log, its files and the producer state exactly as they were.

Reads (``read``) return a ``FileSlice`` of whole batches of one segment, starting with the batch
that holds the requested offset, for the broker to send with ``sendfile``. Transactions aborted by
an append are recorded in the active segment's transaction index, from which read-committed
fetches learn which records to skip.

``Log.open`` loads a partition directory after a restart: leftover temporary files are handled,
each segment's indexes are sanity-checked and rebuilt when missing or corrupt, and after an
unclean shutdown every segment from the recovery point on is re-validated batch by batch and a
torn or corrupt tail is truncated. The producer state is rebuilt from its latest snapshot and the
batches written after it.

A roll does not wait for the disk: as in Kafka, the rolled segment is flushed afterwards, off the
append path (``due_flush`` opens what needs an fsync, ``SegmentFlush.run`` does it in any thread,
``complete_flush`` moves the recovery point). ``flush.ms`` is served the same way; only
``flush.messages`` flushes inside an append.

The log keeps Kafka's offsets: ``log_start_offset`` (first offset still readable),
``log_end_offset`` (offset of the next appended record), ``high_watermark`` (set by the broker;
consumers read below it), ``recovery_point`` (everything below it is flushed to disk) and
``last_stable_offset`` (below the first open transaction).
"""
from __future__ import annotations

import bisect
import enum
import logging
import os
import random
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from trafka.storage import clock, files
from trafka.storage.checkpoints import atomic_write, fsync_path
from trafka.storage.config import LONG_MAX, LogConfig
from trafka.storage.index import AbortedTxn, CorruptIndexError
from trafka.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, UNDEFINED_EPOCH, EpochEntry, LeaderEpochCache
from trafka.storage.producer_state import CompletedTxn, ProducerStateManager
from trafka.storage.retention import SegmentSummary, expired_segments
from trafka.storage.segment import AppendedBatch, LogSegment, next_offset_in_file
from trafka.storage.topics import topic_id_from_string, topic_id_to_string
from trafka.wire.chunks import FileSlice
from trafka.wire.errors import ErrorCode, KafkaError, RecordError
from trafka.wire.records import (
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    BatchHeader,
    RecordBatch,
    batch_records_data,
    iter_batches,
    scan_records,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)

logger = logging.getLogger(__name__)

PARTITION_METADATA_VERSION = 0


class AppendOrigin(enum.Enum):
    """Who wrote an append: the rules differ (Kafka's ``AppendOrigin``)."""

    CLIENT = "client"  # a producer: client batch rules, duplicate detection
    COORDINATOR = "coordinator"  # the broker's own coordinators: transaction markers, group metadata


@dataclass(frozen=True, slots=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    log_append_time: int  # -1 for CreateTime topics
    log_start_offset: int
    record_count: int
    duplicate: bool = False  # an idempotent retry: nothing written, the original offsets returned


@dataclass(frozen=True, slots=True)
class FetchInfo:
    records: FileSlice | None
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int
    # With ``read(..., include_aborted_transactions=True)``: the aborted transactions overlapping
    # the records returned, for read-committed consumers; otherwise None.
    aborted_transactions: list[AbortedTxn] | None = None


class SegmentFlush:
    """An fsync of part of a log, to run in any thread while the log goes on taking appends.

    Made by :meth:`Log.due_flush`, which opens the files (the ``.log`` and index files from the
    recovery point up to ``upto``, the producer snapshots taken when they rolled, the leader epoch
    checkpoint when written since the last flush, and the log's directory, for new files' entries)
    so that they stay valid whatever the log does meanwhile.
    ``run`` fsyncs and closes them; then :meth:`Log.complete_flush` moves the recovery point to
    ``upto``.
    """

    __slots__ = ("upto", "truncations", "leader_epoch_writes", "_fds")

    def __init__(self, upto: int, fds: list[int], truncations: int, leader_epoch_writes: int) -> None:
        self.upto = upto
        self.truncations = truncations  # the log's truncation count when made: a truncation voids it
        self.leader_epoch_writes = leader_epoch_writes  # the checkpoint writes it makes durable
        self._fds = fds

    def run(self) -> None:
        """fsync every file, then close them (also when one fails: the OSError is raised)."""
        try:
            for fd in self._fds:
                os.fsync(fd)
        finally:
            self.close()

    def close(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)


def _now_ms(now_ms: int | None) -> int:
    return clock.now_ms() if now_ms is None else now_ms


class Log:
    """One partition's segmented log in ``<data dir>/<topic>-<partition>``.

    Create with ``Log.create`` (a new, empty log) or ``Log.open`` (load and recover a directory).
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        topic_id: uuid.UUID | None,
        log_start_offset: int,
        log_end_offset: int,
        recovery_point: int,
        high_watermark: int,
        leader_epoch_cache: LeaderEpochCache,
        producer_state: ProducerStateManager,
        now_ms: int,
    ) -> None:
        self.dir = directory
        self.topic, self.partition = files.parse_partition_dir_name(directory.name)
        self.config = config
        self.topic_id = topic_id
        self._leader_epoch_cache = leader_epoch_cache
        # Leader epoch checkpoint writes (without fsync) so far, and how many of them a flush has synced.
        self._leader_epoch_writes = self._leader_epoch_writes_synced = 0
        # A new leader epoch seen by an append, not yet in the cache (see ``_note_leader_epoch``).
        self._unrecorded_leader_epoch: EpochEntry | None = None
        self.producer_state = producer_state
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self._segments = segments
        self._base_offsets = [segment.base_offset for segment in segments]
        self._log_end_offset = log_end_offset
        self._high_watermark = min(max(high_watermark, log_start_offset), log_end_offset)
        self._deleted_segments: list[tuple[int, LogSegment]] = []  # (delete at ms, segment)
        self._unflushed_messages = 0
        self._last_flush_ms = now_ms
        self._truncations = 0  # see SegmentFlush
        self._read_bound: tuple[int, int, int] | None = None  # (max_offset, segment base, position)
        self._closed = False
        # The lowest log end offset a truncation has left since the log cleaner last looked (None: no
        # truncation): the cleaner's checkpoint may not stay above it.
        self.truncated_to: int | None = None

    def __repr__(self) -> str:
        return (
            f"Log({self.topic}-{self.partition}, log_start_offset={self.log_start_offset}, "
            f"log_end_offset={self._log_end_offset}, high_watermark={self._high_watermark}, "
            f"segments={len(self._segments)})"
        )

    # -- creation and loading ------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        topic_id: uuid.UUID | None = None,
        now_ms: int | None = None,
        sync: bool = True,
    ) -> Log:
        """A new, empty log in ``directory``: the directory, ``partition.metadata`` (given a topic
        id) and the ``.log`` file of the first segment (its index files are created when first
        written to). A directory that already exists is loaded as it is instead.

        With ``sync`` the log is durable on return: ``partition.metadata``, the directory and its
        parent are fsynced. Without it the caller fsyncs them before the first append, so that
        one fsync of the parent covers many new logs (``LogCreation``).
        """
        files.parse_partition_dir_name(directory.name)  # a ValueError for a directory that is no log
        try:
            directory.mkdir(parents=True)
            is_new = True
        except FileExistsError:
            is_new = False
        if topic_id is not None:
            with open(directory / files.PARTITION_METADATA_FILE, "wb") as file:
                file.write(_partition_metadata(topic_id))
        if is_new:
            # Nothing to load from an empty directory: build the log directly.
            now = _now_ms(now_ms)
            log = cls(
                directory,
                config,
                [LogSegment(directory, 0, config, now_ms=now)],
                topic_id=topic_id,
                log_start_offset=0,
                log_end_offset=0,
                recovery_point=0,
                high_watermark=0,
                leader_epoch_cache=LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT),
                producer_state=ProducerStateManager(directory),
                now_ms=now,
            )
        else:
            log = cls.open(directory, config, had_clean_shutdown=True, now_ms=now_ms)
        if sync:
            if topic_id is not None:
                fsync_path(directory / files.PARTITION_METADATA_FILE)
            fsync_path(directory)
            fsync_path(directory.parent)
        return log

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int = 0,
        had_clean_shutdown: bool = False,
        now_ms: int | None = None,
    ) -> Log:
        """Load the log in ``directory``, recovering what the last shutdown may have left broken.

        ``recovery_point``, ``log_start_offset`` and ``high_watermark`` come from the data
        directory's checkpoint files. Without a clean shutdown, segments from the one holding
        the recovery point on are re-validated and a corrupt tail is truncated.
        """
        now = _now_ms(now_ms)
        files.parse_partition_dir_name(directory.name)  # a ValueError for a directory that is no log
        directory.mkdir(parents=True, exist_ok=True)
        loader = _LogLoader(directory, config, now)
        return loader.load(
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            high_watermark=high_watermark,
            had_clean_shutdown=had_clean_shutdown,
        )

    # -- offsets -------------------------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def last_stable_offset(self) -> int:
        """The first offset of an open (or not yet fully replicated) transaction, at most the HW."""
        first_unstable = self.producer_state.first_unstable_offset()
        if first_unstable is None:
            return self._high_watermark
        return max(self.log_start_offset, min(first_unstable, self._high_watermark))

    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark, kept within [log_start_offset, log_end_offset]; returns it."""
        self._high_watermark = min(max(offset, self.log_start_offset), self._log_end_offset)
        self.producer_state.on_high_watermark_updated(self._high_watermark)
        return self._high_watermark

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        """Raise the high watermark to ``offset`` (at most the log end offset) if that is higher."""
        if min(offset, self._log_end_offset) <= self._high_watermark:
            return False
        self.update_high_watermark(offset)
        return True

    @property
    def segments(self) -> Sequence[LogSegment]:
        """The live segments, oldest first; the last one is active."""
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    # -- appending -----------------------------------------------------------------------------------

    def append(
        self,
        records: bytearray | memoryview,
        *,
        leader_epoch: int,
        now_ms: int | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendInfo:
        """Append one request's record batches as the partition leader; see the module docstring.

        Raises ``KafkaError``: ``CORRUPT_MESSAGE`` (framing, CRC), ``INVALID_RECORD`` (client rules),
        ``UNSUPPORTED_COMPRESSION_TYPE``, ``MESSAGE_TOO_LARGE``, ``RECORD_LIST_TOO_LARGE``,
        ``INVALID_TIMESTAMP``, ``OUT_OF_ORDER_SEQUENCE_NUMBER``, ``INVALID_PRODUCER_EPOCH``,
        ``INVALID_TXN_STATE``, ``TRANSACTION_COORDINATOR_FENCED``.
        """
        now = _now_ms(now_ms)
        if isinstance(records, bytes):
            records = bytearray(records)
        config = self.config
        from_client = origin is AppendOrigin.CLIENT
        batches = self._analyze(
            records, from_client=from_client, check_size=True, now_ms=now, check_keys=config.compact
        )
        if not batches:
            return AppendInfo(-1, -1, -1, self.log_start_offset, 0)
        self._check_set_size(len(records))
        append_time = now if config.log_append_time else None

        producer_state = self.producer_state
        producer_state.begin_append()
        try:
            appended: list[AppendedBatch] = []
            next_offset = first_offset = self._log_end_offset
            for batch, header in batches:
                duplicate = producer_state.check(batch, from_client=from_client)
                if duplicate is not None and from_client:
                    producer_state.abort_append()
                    return self._duplicate_info(batch, duplicate)
                last_offset = next_offset + header.last_offset_delta
                producer_state.record(batch, next_offset, last_offset, append_time_ms=append_time)
                appended.append(AppendedBatch(
                    LOG_OVERHEAD + header.batch_length,
                    last_offset,
                    header.max_timestamp if append_time is None else append_time,
                ))
                next_offset = last_offset + 1
            # Everything is accepted: only now patch the batches.
            next_offset = first_offset
            for (batch, header), summary in zip(batches, appended):
                position = batch.position
                set_base_offset(records, position, next_offset)
                set_partition_leader_epoch(records, position, leader_epoch)
                if append_time is not None:
                    set_log_append_time(records, position, append_time)
                next_offset = summary.last_offset + 1
            self._write(records, appended, now)
        except BaseException:
            producer_state.abort_append()
            raise
        self._index_aborted_transactions(producer_state.commit_append())
        if leader_epoch >= 0:
            self._note_leader_epoch(leader_epoch, first_offset)
        record_count = sum(header.record_count for _, header in batches)
        self._after_append(record_count, now)
        return AppendInfo(
            first_offset=first_offset,
            last_offset=appended[-1].last_offset,
            log_append_time=-1 if append_time is None else append_time,
            log_start_offset=self.log_start_offset,
            record_count=record_count,
        )

    def append_as_follower(self, records: bytearray | memoryview | bytes, *, now_ms: int | None = None) -> AppendInfo:
        """Append batches replicated from the leader, keeping their offsets and leader epochs.

        The batches must start at or after the log end offset and their offsets must increase.
        """
        now = _now_ms(now_ms)
        batches = self._analyze(records, from_client=False, check_size=False, now_ms=now)
        if not batches:
            return AppendInfo(-1, -1, -1, self.log_start_offset, 0)
        appended: list[AppendedBatch] = []
        previous_last_offset = self._log_end_offset - 1
        for _, header in batches:
            if header.base_offset <= previous_last_offset:
                raise KafkaError(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"replicated batch at offset {header.base_offset} does not follow offset "
                    f"{previous_last_offset} in {self.topic}-{self.partition}",
                )
            previous_last_offset = header.base_offset + header.last_offset_delta
            appended.append(AppendedBatch(LOG_OVERHEAD + header.batch_length, previous_last_offset, header.max_timestamp))
        self._check_set_size(len(records))
        producer_state = self.producer_state
        producer_state.begin_append()
        try:
            for (batch, header), summary in zip(batches, appended):
                producer_state.record(batch, header.base_offset, summary.last_offset)
            self._write(records, appended, now, first_offset=batches[0][1].base_offset)
        except BaseException:
            producer_state.abort_append()
            raise
        self._index_aborted_transactions(producer_state.commit_append())
        for _, header in batches:
            if header.partition_leader_epoch >= 0:
                self._note_leader_epoch(header.partition_leader_epoch, header.base_offset)
        record_count = sum(header.record_count for _, header in batches)
        self._after_append(record_count, now)
        return AppendInfo(batches[0][1].base_offset, appended[-1].last_offset, -1, self.log_start_offset, record_count)

    def _analyze(
        self,
        records: bytearray | memoryview | bytes,
        *,
        from_client: bool,
        check_size: bool,
        now_ms: int,
        check_keys: bool = False,
    ) -> list[tuple[RecordBatch, BatchHeader]]:
        """Every batch of the request with its header, validated from the header and CRC (records
        stay undecoded). With ``check_keys`` (a leader's append to a compacted topic) every record of
        a data batch must have a key, the one thing for which records are looked at (keys only)."""
        config = self.config
        batches = []
        for batch in iter_batches(records):
            header = batch.header()
            if check_size and LOG_OVERHEAD + header.batch_length > config.max_message_bytes:
                raise KafkaError(
                    ErrorCode.MESSAGE_TOO_LARGE,
                    f"The record batch size in the append to {self.topic}-{self.partition} is "
                    f"{LOG_OVERHEAD + header.batch_length} bytes which exceeds the maximum configured "
                    f"value of {config.max_message_bytes}.",
                )
            batch.validate(from_client=from_client)
            if from_client and header.base_offset != 0:
                raise KafkaError(
                    ErrorCode.INVALID_RECORD,
                    f"The baseOffset of the record batch in the append to {self.topic}-"
                    f"{self.partition} should be 0, but it is {header.base_offset}",
                )
            self._check_records(batch, header, now_ms, check_times=from_client and not config.log_append_time,
                                check_keys=check_keys and not batch.is_control)
            batches.append((batch, header))
        return batches

    def _check_records(self, batch: RecordBatch, header: BatchHeader, now_ms: int, *, check_times: bool,
                       check_keys: bool) -> None:
        """Kafka's checks of single records: a key in a compacted topic, a timestamp within
        ``message.timestamp.before/after.max.ms`` of now. The refused records are named in the error's
        record errors, as Kafka names them: a record without a key for its key, whatever its timestamp;
        the batch's code is INVALID_TIMESTAMP when any timestamp is out of range, else INVALID_RECORD.

        Records are looked at only where the header cannot clear the batch: for keys, and for timestamps
        when the newest is too new or ``message.timestamp.before.max.ms`` is set (the header has no oldest
        timestamp). A batch of a topic without those settings stays undecoded."""
        before, after = self.config.message_timestamp_before_max_ms, self.config.message_timestamp_after_max_ms
        check_times = check_times and (before != LONG_MAX or header.max_timestamp - now_ms > after)
        if not (check_times or check_keys):
            return
        # The range as Kafka prints it: Java's 64-bit arithmetic, overflow included.
        low, high = now_ms - before, _java_long(now_ms + after)
        errors = []
        out_of_range = False
        for index, span in enumerate(scan_records(batch_records_data(batch), header.record_count)):
            timestamp = header.base_timestamp + span[3]
            if check_keys and span[4] < 0:
                errors.append(RecordError(index, "Compacted topic cannot accept message without key in topic "
                                                 f"partition {self.topic}-{self.partition}"))
            elif check_times and timestamp != NO_TIMESTAMP and not low <= timestamp <= now_ms + after:
                out_of_range = True
                errors.append(RecordError(index, f"Timestamp {timestamp} of message with offset "
                                                 f"{header.base_offset + span[2]} is out of range. The timestamp "
                                                 f"should be within [{low}, {high}]"))
        if errors:
            raise KafkaError.for_records(ErrorCode.INVALID_TIMESTAMP if out_of_range else ErrorCode.INVALID_RECORD,
                                         errors)

    def _check_set_size(self, size: int) -> None:
        if size > self.config.segment_bytes:
            raise KafkaError(
                ErrorCode.RECORD_LIST_TOO_LARGE,
                f"Message batch size is {size} bytes in append to partition {self.topic}-{self.partition}, "
                f"which exceeds the maximum configured segment size of {self.config.segment_bytes}.",
            )

    def _duplicate_info(self, batch: RecordBatch, offsets: tuple[int, int]) -> AppendInfo:
        log_append_time = -1
        if self.config.log_append_time:
            entry = self.producer_state.last_entry(batch.producer_id)
            original = entry.find_duplicate(batch.producer_epoch, batch.base_sequence, batch.last_sequence) if entry else None
            if original is not None:
                log_append_time = original.timestamp
        first_offset, last_offset = offsets
        return AppendInfo(
            first_offset, last_offset, log_append_time, self.log_start_offset,
            record_count=last_offset - first_offset + 1, duplicate=True,
        )

    def _write(
        self, data: bytearray | memoryview | bytes, batches: list[AppendedBatch], now_ms: int, *, first_offset: int | None = None
    ) -> None:
        try:
            segment = self._maybe_roll(
                len(data),
                max_timestamp=max(batch.max_timestamp for batch in batches),
                max_offset=batches[-1].last_offset,
                first_offset=self._log_end_offset if first_offset is None else first_offset,
                now_ms=now_ms,
            )
        except OSError as e:
            raise KafkaError(
                ErrorCode.KAFKA_STORAGE_ERROR, f"rolling a new segment of {self.topic}-{self.partition} failed: {e}"
            ) from e
        try:
            segment.append(data, batches)
        except OSError as e:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"append to {segment.log_path} failed: {e}") from e
        self._log_end_offset = batches[-1].last_offset + 1

    def _index_aborted_transactions(self, completed: Sequence[CompletedTxn]) -> None:
        """Record the transactions an append aborted in the active segment's transaction index."""
        for txn in completed:
            if txn.is_aborted:
                self._segments[-1].txn_index.append(
                    AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset)
                )

    def _after_append(self, record_count: int, now_ms: int) -> None:
        self._unflushed_messages += record_count
        config = self.config
        if self._unflushed_messages >= config.flush_interval_messages:
            self.flush(now_ms=now_ms)
        if self._deleted_segments:
            self.remove_deleted_segments(now_ms)

    def _maybe_roll(
        self, messages_size: int, *, max_timestamp: int, max_offset: int, first_offset: int, now_ms: int
    ) -> LogSegment:
        segment = self._segments[-1]
        if segment.should_roll(
            self.config,
            messages_size=messages_size,
            max_timestamp_in_messages=max_timestamp,
            max_offset_in_messages=max_offset,
            now_ms=now_ms,
        ):
            return self.roll(now_ms=now_ms, base_offset=first_offset)
        return segment

    def roll(self, *, now_ms: int | None = None, base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (or ``base_offset``, when later).

        The old active segment gets its final time index entry and its indexes are trimmed; it is
        flushed later (``due_flush``), so the append that rolls does not wait for the disk. An empty
        active segment is kept rather than rolled.
        """
        now = _now_ms(now_ms)
        new_base = max(self._log_end_offset, base_offset or 0)
        active = self._segments[-1]
        if active.size == 0 and active.base_offset == new_base:
            return active
        for path in (
            files.log_file(self.dir, new_base),
            files.offset_index_file(self.dir, new_base),
            files.time_index_file(self.dir, new_base),
            files.txn_index_file(self.dir, new_base),
        ):
            if path.exists():
                logger.warning("newly rolled segment file %s already exists; deleting it first", path)
                path.unlink()
        # The new segment's file first: should it fail (out of descriptors), nothing has changed.
        segment = LogSegment(self.dir, new_base, self.config, now_ms=now, roll_jitter_ms=self._roll_jitter_ms())
        active.on_become_inactive()
        self._segments.append(segment)
        self._base_offsets.append(new_base)
        # Flushed with the segment it follows (due_flush), as Kafka does since 3.5: a crash before
        # that leaves at worst a torn snapshot, which loading skips for an older one. Without it,
        # loading replays the batches from an older snapshot instead.
        try:
            self.producer_state.take_snapshot(new_base, sync=False)
        except OSError as e:
            logger.warning("%s: could not snapshot the producer state at offset %d: %s", self.dir, new_base, e)
        active.release_indexes()
        return segment

    def _roll_jitter_ms(self) -> int:
        jitter = self.config.segment_jitter_ms
        return random.randrange(min(jitter, self.config.segment_ms)) if jitter > 0 else 0

    # -- reading -------------------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
        include_aborted_transactions: bool = False,
    ) -> FetchInfo:
        """Whole batches from the one holding ``offset``: up to ``max_bytes`` (at least one batch
        with ``min_one_batch``), none starting at or after ``max_offset``, all from one segment.

        ``records`` is None when there is nothing to return. With ``include_aborted_transactions``
        (read-committed fetches), ``aborted_transactions`` lists the aborted transactions that
        overlap the records. Raises ``KafkaError(OFFSET_OUT_OF_RANGE)`` for an offset below the log
        start offset or above the log end offset.
        """
        log_end_offset = self._log_end_offset
        if offset < self.log_start_offset or offset > log_end_offset:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"Received request for offset {offset} for partition {self.topic}-{self.partition}, "
                f"but we only have log segments from offset {self.log_start_offset} up to "
                f"{log_end_offset}.",
            )
        bound = log_end_offset if max_offset is None else min(max_offset, log_end_offset)
        records = None
        aborted: list[AbortedTxn] | None = [] if include_aborted_transactions else None
        if offset < bound and (max_bytes > 0 or min_one_batch):
            try:
                index = self._segment_index(offset)
                for i in range(index, len(self._segments)):
                    segment = self._segments[i]
                    if segment.base_offset >= bound:
                        break
                    first = segment.translate_offset(offset)
                    if first is None:
                        continue
                    end_position = None
                    if bound < log_end_offset and (
                        i + 1 == len(self._segments) or bound < self._base_offsets[i + 1]
                    ):
                        end_position = self._position_bound(segment, bound)
                    records = segment.slice_from(
                        first, max_bytes, end_position=end_position, min_one_batch=min_one_batch
                    )
                    if records is not None and aborted is not None:
                        aborted = self._aborted_transactions(i, offset, records.position + records.size)
                    break
            except OSError as e:  # a segment that cannot be opened for reading (out of descriptors)
                raise KafkaError(
                    ErrorCode.KAFKA_STORAGE_ERROR,
                    f"reading offset {offset} of {self.topic}-{self.partition} failed: {e}",
                ) from e
        return FetchInfo(
            records=records,
            high_watermark=self._high_watermark,
            log_start_offset=self.log_start_offset,
            log_end_offset=log_end_offset,
            last_stable_offset=self.last_stable_offset,
            aborted_transactions=aborted,
        )

    def _aborted_transactions(self, segment_index: int, offset: int, end_position: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping the records read from ``offset`` up to byte
        ``end_position`` of segment ``segment_index``: their markers lie in that segment or later."""
        segment = self._segments[segment_index]
        upper_bound = segment.upper_bound_offset(end_position)
        if upper_bound is None:
            next_index = segment_index + 1
            upper_bound = self._base_offsets[next_index] if next_index < len(self._segments) else self._log_end_offset
        found: list[AbortedTxn] = []
        for later in self._segments[segment_index:]:
            txns, complete = later.txn_index.collect(offset, upper_bound)
            found += txns
            if complete:
                break
        return found

    def _segment_index(self, offset: int) -> int:
        """Index of the segment that would hold ``offset`` (the last one based at or below it)."""
        return max(bisect.bisect_right(self._base_offsets, offset) - 1, 0)

    def _position_bound(self, segment: LogSegment, max_offset: int) -> int:
        """Byte position in ``segment`` where batches at or after ``max_offset`` begin (cached:
        every fetch bounded by the same high watermark asks for the same position)."""
        cached = self._read_bound
        if cached is not None and cached[0] == max_offset and cached[1] == segment.base_offset:
            return cached[2]
        position = segment.position_bound(max_offset)
        self._read_bound = (max_offset, segment.base_offset, position)
        return position

    def batches_from(self, offset: int) -> Iterator[RecordBatch]:
        """Every batch from the one holding ``offset`` to the end, read in large chunks."""
        for i in range(self._segment_index(offset), len(self._segments)):
            segment = self._segments[i]
            first = segment.translate_offset(offset)
            if first is None:
                continue
            for _, batch in segment.record_batches(first.position):
                yield batch

    # -- timestamps and leader epochs ----------------------------------------------------------------

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record with a timestamp >= ``timestamp_ms``."""
        for segment in self._segments:
            if segment.max_timestamp >= timestamp_ms:
                found = segment.find_offset_by_timestamp(timestamp_ms, self.log_start_offset)
                if found is not None:
                    return found
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the record with the largest timestamp (the first such)."""
        best: LogSegment | None = None
        for segment in self._segments:
            if segment.size and (best is None or segment.max_timestamp > best.max_timestamp):
                best = segment
        return best.offset_of_max_timestamp() if best is not None else None

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        """The leader epoch cache, holding the epochs of every append so far."""
        self._record_leader_epoch()
        return self._leader_epoch_cache

    def _note_leader_epoch(self, epoch: int, start_offset: int) -> None:
        """Remember that appends under ``epoch`` began at ``start_offset`` (the log end offset
        before them).

        An epoch that changes is recorded in the cache, which writes ``leader-epoch-checkpoint``,
        when segments are flushed, the log is closed or the cache is read, not on the append:
        the first append of each partition stays one write. Batches not yet flushed carry their
        epoch, and recovery after a crash learns it from them.
        """
        unrecorded = self._unrecorded_leader_epoch
        latest = unrecorded.epoch if unrecorded is not None else self._leader_epoch_cache.latest_epoch()
        if epoch == latest:
            return
        self._record_leader_epoch()
        self._unrecorded_leader_epoch = EpochEntry(epoch, start_offset)

    def _record_leader_epoch(self) -> None:
        """Put the epoch an append noted into the cache, whose checkpoint is written without fsync:
        every flush fsyncs it before the recovery point passes the batches it covers (a crash before
        that leaves a checkpoint that loading discards, and recovery learns the epochs from the
        batches)."""
        unrecorded = self._unrecorded_leader_epoch
        if unrecorded is not None:
            self._unrecorded_leader_epoch = None
            if self._leader_epoch_cache.assign(*unrecorded, sync=False):
                self._leader_epoch_writes += 1

    def _sync_leader_epochs(self) -> None:
        if self._leader_epoch_writes != self._leader_epoch_writes_synced:
            writes = self._leader_epoch_writes
            fsync_path(self._leader_epoch_cache.path)
            fsync_path(self.dir)
            self._leader_epoch_writes_synced = writes

    def end_offset_for_leader_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: ``(epoch, end_offset)``; (-1, -1) when unknown."""
        return self.leader_epoch_cache.end_offset_for(epoch, self._log_end_offset)

    @property
    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch()

    def leader_epoch_for_offset(self, offset: int) -> int:
        """The leader epoch under which ``offset`` was written; -1 when unknown."""
        epoch = UNDEFINED_EPOCH
        for entry in self.leader_epoch_cache.entries:
            if entry.start_offset > offset:
                break
            epoch = entry.epoch
        return epoch

    # -- flushing ------------------------------------------------------------------------------------

    def flush(self, *, now_ms: int | None = None) -> None:
        """fsync every segment with unflushed data; the recovery point becomes the log end offset."""
        now = _now_ms(now_ms)
        if self.recovery_point < self._log_end_offset:
            try:
                flush = self._segment_flush(self._log_end_offset, len(self._segments))
                flush.run()
            except OSError as e:
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"flush of {self.dir} failed: {e}") from e
            self.complete_flush(flush, now_ms=now)
        self._unflushed_messages = 0
        self._last_flush_ms = now

    def due_flush(self, now_ms: int | None = None) -> SegmentFlush | None:
        """The flush that is due, to run off the append path; None when there is none.

        Everything up to the log end offset once ``flush.ms`` has passed since the last flush (as
        Kafka's log flusher does), otherwise the segments that rolls have left unflushed (as Kafka's
        flush after a roll does). The caller runs it and then passes it to :meth:`complete_flush`,
        or closes it.
        """
        now = _now_ms(now_ms)
        if self._closed:
            return None
        if now - self._last_flush_ms >= self.config.flush_interval_ms:
            upto, last = self._log_end_offset, len(self._segments)
        else:
            upto, last = self._segments[-1].base_offset, len(self._segments) - 1
        if self.recovery_point >= upto:
            return None
        return self._segment_flush(upto, last)

    def _segment_flush(self, upto: int, last: int) -> SegmentFlush:
        """The flush of the segments from the recovery point's up to ``last`` (exclusive)."""
        self._record_leader_epoch()  # its checkpoint is fsynced with the segments
        fds: list[int] = []
        try:
            if self._leader_epoch_writes != self._leader_epoch_writes_synced:
                fds.append(os.open(self._leader_epoch_cache.path, os.O_RDONLY))
            first = self._segment_index(self.recovery_point)
            for i, segment in enumerate(self._segments[first:last], first):
                paths = [segment.log_path, segment.offset_index_path, segment.time_index_path]
                if i + 1 < len(self._segments):  # the producer snapshot taken when it rolled
                    paths.append(files.producer_snapshot_file(self.dir, self._base_offsets[i + 1]))
                for path in paths:
                    try:
                        fds.append(os.open(path, os.O_RDONLY))
                    except FileNotFoundError:  # an index not created yet, a snapshot already deleted
                        pass
            fds.append(os.open(self.dir, os.O_RDONLY))
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        return SegmentFlush(upto, fds, self._truncations, self._leader_epoch_writes)

    def complete_flush(self, flush: SegmentFlush, now_ms: int | None = None) -> None:
        """``flush`` has run: the recovery point moves up to it (unless the log was truncated since)."""
        self._leader_epoch_writes_synced = max(self._leader_epoch_writes_synced, flush.leader_epoch_writes)
        if flush.truncations != self._truncations:
            return
        if flush.upto > self.recovery_point:
            self.recovery_point = flush.upto
        self._last_flush_ms = _now_ms(now_ms)

    # -- deleting and truncating ---------------------------------------------------------------------

    def delete_records_before(self, offset: int, *, now_ms: int | None = None) -> int:
        """DeleteRecords: make ``offset`` the log start offset and delete the segments wholly below it.

        ``offset`` may not exceed the high watermark (``OFFSET_OUT_OF_RANGE``). Returns the (possibly
        unchanged) log start offset.
        """
        if offset > self._high_watermark:
            raise KafkaError(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                f"Cannot increment the log start offset to {offset} of partition {self.topic}-"
                f"{self.partition} since it is larger than the high watermark {self._high_watermark}",
            )
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.leader_epoch_cache.truncate_from_start(offset)
            deletable = [
                segment for segment, next_base in zip(self._segments, self._base_offsets[1:])
                if next_base <= offset
            ]
            self._delete_segments(deletable, _now_ms(now_ms))
            self.producer_state.truncate(self.log_start_offset, self._log_end_offset)
        return self.log_start_offset

    def delete_old_segments(self, segments: Sequence[LogSegment], *, now_ms: int | None = None) -> int:
        """Delete the oldest ``segments`` (retention): the log then starts at the next segment.

        Deleting every segment first rolls a new, empty active segment. Returns the number deleted.
        """
        if not segments:
            return 0
        if list(segments) != self._segments[: len(segments)]:
            raise ValueError("only a prefix of the log's segments can be deleted")
        now = _now_ms(now_ms)
        if len(segments) == len(self._segments):
            self.roll(now_ms=now)
        self._delete_segments(segments, now)
        new_start = max(self.log_start_offset, self._segments[0].base_offset)
        if new_start > self.log_start_offset:
            self.log_start_offset = new_start
            self._high_watermark = max(self._high_watermark, new_start)
            self.leader_epoch_cache.truncate_from_start(new_start)
        self.producer_state.truncate(self.log_start_offset, self._log_end_offset)
        return len(segments)

    def apply_retention(self, *, now_ms: int | None = None) -> int:
        """Delete the oldest segments that ``retention.bytes`` and ``retention.ms`` no longer keep (see
        storage.retention), on a log whose ``cleanup.policy`` includes delete. Returns how many."""
        config = self.config
        if self._closed or not config.delete or (config.retention_ms < 0 and config.retention_bytes < 0):
            return 0
        now = _now_ms(now_ms)
        segments = list(self._segments)

        def largest_timestamp(index: int) -> int:
            segment = segments[index]
            if segment.max_timestamp >= 0:
                return segment.max_timestamp
            return os.stat(segment.log_path).st_mtime_ns // 1_000_000

        count = expired_segments(
            [SegmentSummary(segment.base_offset, segment.size) for segment in segments],
            largest_timestamp,
            log_end_offset=self._log_end_offset,
            high_watermark=self._high_watermark,
            retention_ms=config.retention_ms,
            retention_bytes=config.retention_bytes,
            now_ms=now,
        )
        if count:
            logger.info(
                "%s-%d: deleting %d segment(s) past retention (retention.ms=%d, retention.bytes=%d); the log "
                "now starts at %d", self.topic, self.partition, count, config.retention_ms, config.retention_bytes,
                segments[count].base_offset if count < len(segments) else self._log_end_offset,
            )
        return self.delete_old_segments(segments[:count], now_ms=now)

    def _delete_segments(self, segments: Sequence[LogSegment], now_ms: int) -> None:
        """Take segments out of the log and rename them ``.deleted``; their files are removed after
        ``file.delete.delay.ms``, so that reads already handed out stay valid meanwhile."""
        for segment in segments:
            index = self._segments.index(segment)
            del self._segments[index]
            del self._base_offsets[index]
            segment.change_file_suffixes("", files.DELETED_FILE_SUFFIX)
            self._deleted_segments.append((now_ms + self.config.file_delete_delay_ms, segment))
        self._read_bound = None

    def replace_segments(
        self,
        base_offset: int,
        old_segments: Sequence[LogSegment],
        *,
        expected_sizes: Sequence[int] | None = None,
        now_ms: int | None = None,
    ) -> LogSegment:
        """Swap in the compacted segment written as ``<base_offset>.log.cleaned`` (with its
        ``.index.cleaned``, ``.timeindex.cleaned`` and ``.txnindex.cleaned``) for ``old_segments``, a run
        of inactive segments starting at ``base_offset`` (Kafka's ``replaceSegments``); returns it.

        The steps, each of which a crash may interrupt (loading then completes or rolls back the swap,
        see ``_LogLoader._remove_temporary_files``): the ``.cleaned`` files are renamed ``.swap``, the
        ``.log`` last; the old segments are renamed ``.deleted`` (their files are removed after
        ``file.delete.delay.ms``, so reads already handed out stay valid); the ``.swap`` files take
        their final names. Raises ``ValueError``, with nothing changed, when ``old_segments`` are no
        longer such a run of this log (or their sizes differ from ``expected_sizes``).
        """
        now = _now_ms(now_ms)
        old = list(old_segments)
        if self._closed:
            raise ValueError(f"{self.topic}-{self.partition} is closed")
        if not old or old[0].base_offset != base_offset:
            raise ValueError(f"the segments to replace do not start at offset {base_offset}")
        first = next((i for i, segment in enumerate(self._segments) if segment is old[0]), None)
        if (
            first is None
            or first + len(old) >= len(self._segments)
            or any(a is not b for a, b in zip(self._segments[first:first + len(old)], old))
        ):
            raise ValueError(
                f"segments {[segment.base_offset for segment in old]} of {self.topic}-{self.partition} are no "
                "longer inactive segments of the log"
            )
        if expected_sizes is not None and [segment.size for segment in old] != list(expected_sizes):
            raise ValueError(f"segments of {self.topic}-{self.partition} changed size while being cleaned")
        cleaned, swap = files.CLEANED_FILE_SUFFIX, files.SWAP_FILE_SUFFIX
        if not files.log_file(self.dir, base_offset, cleaned).exists():
            raise ValueError(f"no cleaned segment {files.log_file(self.dir, base_offset, cleaned)}")
        for name in (files.offset_index_file, files.time_index_file, files.txn_index_file, files.log_file):
            source = name(self.dir, base_offset, cleaned)
            if source.exists():
                os.replace(source, name(self.dir, base_offset, swap))
        new = LogSegment(self.dir, base_offset, self.config, now_ms=now, suffix=swap, active=False)
        for segment in old:
            segment.change_file_suffixes("", files.DELETED_FILE_SUFFIX)
            self._deleted_segments.append((now + self.config.file_delete_delay_ms, segment))
        new.change_file_suffixes(swap, "")
        self._segments[first:first + len(old)] = [new]
        self._base_offsets[first:first + len(old)] = [base_offset]
        self._read_bound = None
        return new

    def remove_deleted_segments(self, now_ms: int | None = None, *, force: bool = False) -> None:
        """Remove the files of deleted segments whose delay has passed (all of them with ``force``)."""
        now = _now_ms(now_ms)
        keep = []
        for deadline, segment in self._deleted_segments:
            if force or deadline <= now:
                segment.delete()
            else:
                keep.append((deadline, segment))
        self._deleted_segments = keep

    def truncate_to(self, offset: int, *, now_ms: int | None = None) -> bool:
        """Remove everything at or after ``offset`` (a follower diverging from its leader).

        Returns False when the log ends at or before ``offset`` already.
        """
        if offset < 0:
            raise ValueError(f"cannot truncate {self.topic}-{self.partition} to negative offset {offset}")
        if offset >= self._log_end_offset:
            return False
        now = _now_ms(now_ms)
        if offset < self._segments[0].base_offset:
            self.truncate_fully_and_start_at(offset, now_ms=now)
            return True
        index = self._segment_index(offset)
        for segment in self._segments[index + 1:]:
            segment.change_file_suffixes("", files.DELETED_FILE_SUFFIX)
            self._deleted_segments.append((now + self.config.file_delete_delay_ms, segment))
        del self._segments[index + 1:]
        del self._base_offsets[index + 1:]
        active = self._segments[-1]
        active.truncate_to(offset)
        active.resize_indexes(self.config.segment_index_bytes)
        self._after_truncation(active.read_next_offset())
        return True

    def truncate_fully_and_start_at(self, offset: int, *, now_ms: int | None = None) -> None:
        """Delete every segment and start again, empty, at ``offset``."""
        now = _now_ms(now_ms)
        self._delete_segments(list(self._segments), now)
        segment = LogSegment(self.dir, offset, self.config, now_ms=now, roll_jitter_ms=self._roll_jitter_ms())
        self._segments.append(segment)
        self._base_offsets.append(offset)
        self.log_start_offset = offset
        self.leader_epoch_cache.truncate_from_end(0)
        self._after_truncation(offset)
        self._high_watermark = offset  # nothing below the new start remains to be replicated

    def _after_truncation(self, log_end_offset: int) -> None:
        self._truncations += 1
        self.truncated_to = log_end_offset if self.truncated_to is None else min(self.truncated_to, log_end_offset)
        self._log_end_offset = log_end_offset
        self.log_start_offset = min(self.log_start_offset, log_end_offset)
        self._high_watermark = min(self._high_watermark, log_end_offset)
        self.recovery_point = min(self.recovery_point, log_end_offset)
        self._read_bound = None
        self.leader_epoch_cache.truncate_from_end(log_end_offset)
        self.producer_state.truncate(self.log_start_offset, log_end_offset, self.batches_from)

    # -- configuration and shutdown ------------------------------------------------------------------

    def update_config(self, config: LogConfig) -> None:
        """Apply new topic configs; indexes keep their size until the next roll."""
        self.config = config

    def remove_expired_producers(self, now_ms: int | None = None) -> None:
        self.producer_state.remove_expired(_now_ms(now_ms))

    def close(self) -> None:
        """Snapshot the producer state and close every segment (the log is not flushed here)."""
        if self._closed:
            return
        self._closed = True
        try:
            self._record_leader_epoch()
            self._sync_leader_epochs()
        except OSError as e:
            logger.warning("%s: could not write the leader epoch checkpoint: %s", self.dir, e)
        # A snapshot spares the next start replaying the log's batches into the producer state; an
        # empty log has none to replay, and one snapshotted at its end already has it (thousands of
        # idle partitions then close without a write and an fsync each).
        if self._log_end_offset > self.log_start_offset and (
            self._log_end_offset not in self.producer_state.snapshot_offsets()
        ):
            try:
                self.producer_state.take_snapshot(self._log_end_offset)
            except OSError as e:
                logger.warning("%s: could not snapshot the producer state: %s", self.dir, e)
        for segment in self._segments:
            segment.close()
        self.remove_deleted_segments(force=True)

    def release_descriptors(self) -> None:
        """Let go of the descriptors of every segment (slices already handed out keep theirs):
        the log is being deleted, and its descriptors go back to the process's budget at once."""
        for segment in self._segments + [segment for _, segment in self._deleted_segments]:
            segment.release_descriptors()

    def close_handles(self) -> None:
        """Close every file without touching the disk: the directory has been removed."""
        self._closed = True
        for segment in self._segments + [segment for _, segment in self._deleted_segments]:
            segment.close_handles()
        self._deleted_segments = []


# -- partition.metadata --------------------------------------------------------------------------------

def _partition_metadata(topic_id: uuid.UUID) -> bytes:
    return f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {topic_id_to_string(topic_id)}".encode("ascii")


def write_partition_metadata(directory: Path, topic_id: uuid.UUID) -> None:
    """Kafka's ``partition.metadata``: the topic id the partition directory belongs to."""
    atomic_write(directory / files.PARTITION_METADATA_FILE, _partition_metadata(topic_id))


def read_partition_metadata(directory: Path) -> uuid.UUID | None:
    """The topic id in ``partition.metadata``; None when the file is absent or empty (as a crash
    can leave the file of a log being created, see ``Log.create``)."""
    path = directory / files.PARTITION_METADATA_FILE
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        return None
    if not text:
        return None
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip()] = value.strip()
    if fields.get("version") != str(PARTITION_METADATA_VERSION) or "topic_id" not in fields:
        raise ValueError(f"{path}: malformed partition metadata {text!r}")
    return topic_id_from_string(fields["topic_id"])


# -- loading -------------------------------------------------------------------------------------------

class _LogLoader:
    """Brings a partition directory back to a consistent log (Kafka's ``LogLoader``)."""

    def __init__(self, directory: Path, config: LogConfig, now_ms: int) -> None:
        self.dir = directory
        self.config = config
        self.now_ms = now_ms
        self.rebuild_leader_epochs = False
        self.leader_epoch_cache = self._open_leader_epoch_cache()

    def load(
        self, *, recovery_point: int, log_start_offset: int, high_watermark: int, had_clean_shutdown: bool
    ) -> Log:
        self._remove_temporary_files()
        segments = self._load_segments(None if had_clean_shutdown else recovery_point)
        if not had_clean_shutdown:
            segments = self._recover_unflushed(segments, recovery_point)
        if self.rebuild_leader_epochs:
            for segment in segments:
                for batch in segment.batch_positions():
                    self._assign_leader_epoch(batch.partition_leader_epoch, batch.base_offset)
        log_end_offset = segments[-1].read_next_offset() if segments else log_start_offset
        if segments and log_end_offset < log_start_offset:
            logger.warning(
                "%s: deleting every segment: the log ends at %d, before its start offset %d",
                self.dir, log_end_offset, log_start_offset,
            )
            for segment in segments:
                segment.delete()
            segments = []
            log_end_offset = log_start_offset
        if not segments:
            segments = [LogSegment(self.dir, log_start_offset, self.config, now_ms=self.now_ms)]
        log_start_offset = max(log_start_offset, segments[0].base_offset)
        recovery_point = log_end_offset if had_clean_shutdown else min(recovery_point, log_end_offset)
        for segment in segments[:-1]:
            segment.release_indexes()
            segment.release_file()
        segments[-1].open_for_append()  # the active segment keeps its descriptor
        segments[-1].resize_indexes(self.config.segment_index_bytes)

        self.leader_epoch_cache.truncate_from_end(log_end_offset)
        self.leader_epoch_cache.truncate_from_start(log_start_offset)
        try:
            topic_id = read_partition_metadata(self.dir)
        except ValueError as e:
            logger.warning("%s: ignoring unreadable partition metadata: %s", self.dir, e)
            topic_id = None
        producer_state = ProducerStateManager(self.dir)
        log = Log(
            self.dir,
            self.config,
            segments,
            topic_id=topic_id,
            log_start_offset=log_start_offset,
            log_end_offset=log_end_offset,
            recovery_point=recovery_point,
            high_watermark=high_watermark,
            leader_epoch_cache=self.leader_epoch_cache,
            producer_state=producer_state,
            now_ms=self.now_ms,
        )
        producer_state.load(log_start_offset, log_end_offset, log.batches_from, now_ms=self.now_ms)
        return log

    def _open_leader_epoch_cache(self) -> LeaderEpochCache:
        path = self.dir / LEADER_EPOCH_CHECKPOINT
        try:
            return LeaderEpochCache(path)
        except (ValueError, OSError) as e:
            logger.warning("%s: discarding unreadable leader epoch checkpoint: %s", self.dir, e)
            path.unlink(missing_ok=True)
            self.rebuild_leader_epochs = True
            return LeaderEpochCache(path)

    def _remove_temporary_files(self) -> None:
        """Delete ``.deleted``, ``.cleaned`` and ``.tmp`` leftovers, complete interrupted swaps,
        and drop index files that have lost their ``.log`` file."""
        swap_files: list[Path] = []
        cleaned_offsets: list[int] = []
        for path in self.dir.iterdir():
            name = path.name
            if not path.is_file():
                continue
            if name.endswith((files.DELETED_FILE_SUFFIX, ".tmp")):
                path.unlink()
            elif name.endswith(files.CLEANED_FILE_SUFFIX):
                cleaned_offsets.append(_offset_or_none(name) or 0)
                path.unlink()
            elif name.endswith(files.SWAP_FILE_SUFFIX):
                swap_files.append(path)
        # A swap file at or after a .cleaned file belongs to an interrupted split: not usable.
        min_cleaned = min(cleaned_offsets, default=None)
        usable_swaps = []
        for path in swap_files:
            offset = _offset_or_none(path.name)
            if offset is None or (min_cleaned is not None and offset >= min_cleaned):
                path.unlink()
            else:
                usable_swaps.append(path)
        self._complete_swaps(usable_swaps)
        for path in self.dir.iterdir():
            if path.is_file() and files.is_index_file(path.name):
                offset = _offset_or_none(path.name)
                if offset is not None and not files.log_file(self.dir, offset).exists():
                    logger.warning("%s: deleting orphaned index file %s", self.dir, path.name)
                    path.unlink()

    def _complete_swaps(self, swap_files: list[Path]) -> None:
        """Compaction output (``.swap``) replaces the segments it covers: finish that replacement."""
        swap_logs = [p for p in swap_files if p.name.endswith(files.LOG_FILE_SUFFIX + files.SWAP_FILE_SUFFIX)]
        if swap_logs:
            bases = [files.offset_from_file_name(path.name) for path in swap_logs]
            low = min(bases)
            high = max(next_offset_in_file(path, base) for path, base in zip(swap_logs, bases))
            for path in self.dir.iterdir():
                offset = _offset_or_none(path.name)
                if (
                    offset is not None and low <= offset < high and path.is_file()
                    and (files.is_log_file(path.name) or files.is_index_file(path.name))
                ):
                    logger.info("%s: deleting %s, replaced by a compacted segment", self.dir, path.name)
                    path.unlink()
        for path in swap_files:
            os.replace(path, path.with_name(path.name.removesuffix(files.SWAP_FILE_SUFFIX)))

    def _load_segments(self, recovery_point: int | None) -> list[LogSegment]:
        """Open every segment; rebuild the indexes of those that fail their sanity check.

        Given the ``recovery_point`` of an unclean shutdown, the segments from the one holding it
        on are not checked: ``_recover_unflushed`` rebuilds their indexes anyway (and an active
        segment's index files may not have been written yet).
        """
        named = (_offset_or_none(path.name) for path in self.dir.glob("*" + files.LOG_FILE_SUFFIX))
        bases = sorted(base_offset for base_offset in named if base_offset is not None)
        first_recovered = len(bases)
        if recovery_point is not None and bases:
            first_recovered = max(bisect.bisect_right(bases, recovery_point) - 1, 0)
        segments = []
        for i, base_offset in enumerate(bases):
            # Only the last segment is written to: the others open their files when read.
            segment = LogSegment(
                self.dir, base_offset, self.config, now_ms=self.now_ms, active=i == len(bases) - 1
            )
            if i < first_recovered:
                try:
                    segment.sanity_check()
                except (CorruptIndexError, KafkaError) as e:
                    logger.warning("%s: rebuilding the indexes of segment %d: %s", self.dir, base_offset, e)
                    segment.release_indexes()
                    for index_path in (segment.offset_index_path, segment.time_index_path):
                        index_path.unlink(missing_ok=True)
                    segment.recover(self._on_recovered_batch)
            segments.append(segment)
        return segments

    def _recover_unflushed(self, segments: list[LogSegment], recovery_point: int) -> list[LogSegment]:
        """Re-validate the segments from the one holding the recovery point; after a corrupt tail,
        drop the segments that follow it."""
        bases = [segment.base_offset for segment in segments]
        first = max(bisect.bisect_right(bases, recovery_point) - 1, 0)
        for i in range(first, len(segments)):
            segment = segments[i]
            truncated = segment.recover(self._on_recovered_batch)
            if truncated:
                for later in segments[i + 1:]:
                    logger.warning("%s: deleting segment %d after the corruption", self.dir, later.base_offset)
                    later.delete()
                return segments[: i + 1]
        return segments

    def _on_recovered_batch(self, batch: RecordBatch) -> None:
        self._assign_leader_epoch(batch.partition_leader_epoch, batch.base_offset)

    def _assign_leader_epoch(self, epoch: int, base_offset: int) -> None:
        """Learn an epoch the checkpoint may have missed (it is written after the data)."""
        latest = self.leader_epoch_cache.latest_epoch()
        if epoch >= 0 and (latest is None or epoch > latest):
            self.leader_epoch_cache.assign(epoch, base_offset)


def _offset_or_none(name: str) -> int | None:
    try:
        return files.offset_from_file_name(name)
    except ValueError:
        return None


def _java_long(value: int) -> int:
    """``value`` as a Java long holds it (wrapped to 64 bits)."""
    return (value + 2**63) % 2**64 - 2**63
