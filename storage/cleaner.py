"""Log compaction: Kafka's log cleaner, for logs whose ``cleanup.policy`` includes ``compact``.

A compacted log keeps, for every key, at least its latest record. The log is split at its *first dirty
offset* (kept per partition in the data directory's ``cleaner-offset-checkpoint``): below it the *clean*
section, already compacted; from it up to the *first uncleanable offset* the *dirty* section, written
since. The first uncleanable offset is the lowest of the last stable offset (at most the high watermark),
the active segment's base offset (the active segment is never cleaned) and the base offset of the first
segment holding a record younger than ``min.compaction.lag.ms``.

Choosing (``filthiest_log``): every compacted log's *cleanable ratio*, the bytes of the dirty section's
segments over those of the whole log, and the log with the largest ratio above its
``min.cleanable.dirty.ratio`` is cleaned first; a log whose oldest dirty record is older than
``max.compaction.lag.ms`` is cleaned whatever its ratio.

Cleaning (``CleaningJob``):

1. The *offset map* (``OffsetMap``): the dirty section is read batch by batch, and each key's MD5 digest
   is mapped to the offset of its latest record. The map holds at most what
   ``log.cleaner.dedupe.buffer.size`` bytes (times ``log.cleaner.io.buffer.load.factor``) allow; when it is
   full, cleaning goes only up to the last batch mapped whole, and the next pass starts there, as in
   Kafka. Control batches and the batches of aborted transactions are not mapped.
2. The log's segments from its start up to the end of the mapped section are rewritten in groups, each
   no larger than ``segment.bytes`` (and whose indexes fit ``segment.index.bytes``), into one new segment
   per group. A record is kept when it lies past the mapped section, or when no later record of its key
   was mapped and it is not a tombstone (a null value) past the delete horizon; records without a key are
   dropped. A batch none of whose records goes keeps its bytes untouched (the common case, and cheap);
   one that loses some is re-encoded with its own codec, its base offset, base timestamp, producer id,
   epoch, base sequence, leader epoch and last offset delta kept, each kept record byte for byte (offset
   and timestamp deltas, headers). A batch that loses every record goes, unless it is its producer's
   last batch: that one stays as an empty batch header, so that the producer's sequence numbers survive
   (Kafka's ``RETAIN_EMPTY``). Control batches (transaction markers) are kept as they are; records of
   aborted transactions go.
3. Tombstones, as Kafka does it for magic-2 batches (KIP-534): the first cleaning that keeps a batch
   holding a tombstone stamps the batch with a *delete horizon*, that cleaning's time plus
   ``delete.retention.ms`` (attribute bit 6, the horizon in ``base_timestamp``, record timestamp deltas
   re-based on it so every record keeps its timestamp); a cleaning after the horizon drops the
   tombstones of that batch. So a tombstone outlives its first cleaning by at least
   ``delete.retention.ms``, and a consumer reading the log from its start within that time sees it. (A
   cleaned segment keeps the last-modified time of the last segment it replaces, as in Kafka.)

Crash safety, as Kafka does it: a group is written to ``<base>.log.cleaned`` (and ``.index.cleaned``,
``.timeindex.cleaned``, ``.txnindex.cleaned``) and fsynced; then ``Log.replace_segments`` renames the files
``.swap``, renames the replaced segments ``.deleted`` (removed after ``file.delete.delay.ms``, so that
reads in flight keep their files) and renames the ``.swap`` files to their final names. Loading a log
deletes ``.cleaned`` files and completes (or, for a group whose ``.cleaned`` files had not all become
``.swap``, rolls back) an interrupted swap; at worst a kill -9 loses superseded records only. The
checkpoint moves once every group is swapped.

Threads: ``CleaningJob.prepare`` runs where the log is owned (it reads the log's state); building the map
and writing cleaned segments (``build_offset_map``, ``clean_group``) run in any thread, reading the old
segments' files through descriptors of their own and never touching the ``Log``; each swap runs back
where the log is owned. ``Cleaner`` does all of it in the calling thread.

Memory: ``OffsetMap`` is a dict from 16-byte digests to offsets, about ``OffsetMap.ENTRY_BYTES`` per key
(Kafka's array packs 24): a 128 MiB buffer maps some 750,000 keys per pass.
"""
from __future__ import annotations

import hashlib
import logging
import os
import struct
import threading
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from trafka.storage import files
from trafka.storage import clock
from trafka.storage.checkpoints import (
    CLEANER_OFFSET_CHECKPOINT,
    OrderedWrites,
    read_offsets_checkpoint,
    write_offsets_checkpoint,
)
from trafka.storage.config import LONG_MAX, LogConfig
from trafka.storage.config_defs import BROKER_CONFIG_DEFS
from trafka.storage.index import AbortedTxn
from trafka.storage.segment import AppendedBatch, LogSegment
from trafka.wire.compression import Compression, compress
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.records import (
    LOG_OVERHEAD,
    MAGIC,
    RECORD_BATCH_OVERHEAD,
    RecordBatch,
    RecordSpan,
    batch_records_data,
    crc32c,
    encode_varint,
    read_varint,
    scan_records,
)

if TYPE_CHECKING:
    from trafka.storage.log import Log

logger = logging.getLogger(__name__)

#: Kafka's defaults of the cleaner's broker settings, as the catalog has them.
DEFAULT_DEDUPE_BUFFER_SIZE: int = BROKER_CONFIG_DEFS["log.cleaner.dedupe.buffer.size"].default
DEFAULT_IO_BUFFER_SIZE: int = BROKER_CONFIG_DEFS["log.cleaner.io.buffer.size"].default
DEFAULT_IO_BUFFER_LOAD_FACTOR: float = BROKER_CONFIG_DEFS["log.cleaner.io.buffer.load.factor"].default
INT32_MAX = 2**31 - 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")
_CRC_POSITION = 17
_ATTRIBUTES_POSITION = 21
_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08
_TRANSACTIONAL_MASK = 0x10
_CONTROL_MASK = 0x20
_DELETE_HORIZON_MASK = 0x40
_EMPTY_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
_MIN_BATCH_SIZE = RECORD_BATCH_OVERHEAD
_CLEANED_SUFFIXES = (files.LOG_FILE_SUFFIX, files.INDEX_FILE_SUFFIX, files.TIME_INDEX_FILE_SUFFIX,
                     files.TXN_INDEX_FILE_SUFFIX)


class CleaningAborted(Exception):
    """The cleaning of a log stopped before its end: the log changed under it, or it was asked to stop.
    The log is as it was before the group being cleaned."""


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    """The broker-wide settings of the cleaner (one ``OffsetMap`` of ``dedupe_buffer_size`` per thread)."""

    dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE
    io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE
    io_buffer_load_factor: float = DEFAULT_IO_BUFFER_LOAD_FACTOR
    io_max_bytes_per_second: float = float("inf")


# -- records, walked without decoding them ---------------------------------------------------------------

def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.CORRUPT_MESSAGE, message)


def _rebased_record(data: bytes, span: RecordSpan, timestamp_shift: int) -> bytes:
    """The record at ``span`` with its timestamp delta made ``timestamp_shift`` larger, the rest as it was."""
    _, position = read_varint(data, span[0])
    attributes = data[position:position + 1]
    _, rest = read_varint(data, position + 1)
    body = attributes + encode_varint(span[3] + timestamp_shift) + data[rest:span[1]]
    return encode_varint(len(body)) + body


# -- the offset map --------------------------------------------------------------------------------------

def _digest(key: bytes | memoryview) -> bytes:
    return hashlib.md5(key, usedforsecurity=False).digest()


class OffsetMap:
    """Key (by its MD5 digest, as Kafka's ``SkimpyOffsetMap``) -> offset of its latest record, holding at
    most ``capacity`` keys: ``memory // ENTRY_BYTES`` slots times ``load_factor``."""

    #: What one key costs in a dict of 16-byte digests to offsets, measured (a Python int, a bytes object
    #: and the dict's own slot), rounded up for the dict's growth.
    ENTRY_BYTES = 160

    def __init__(self, memory: int, load_factor: float = DEFAULT_IO_BUFFER_LOAD_FACTOR) -> None:
        self.slots = memory // self.ENTRY_BYTES
        self.capacity = int(self.slots * load_factor)
        if self.capacity < 1:
            raise ValueError(
                f"an offset map of {memory} bytes cannot hold even one key; increase "
                "log.cleaner.dedupe.buffer.size or decrease log.cleaner.threads"
            )
        self._offsets: dict[bytes, int] = {}
        #: The last offset of the last batch mapped whole (-1 when none).
        self.latest_offset = -1

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def utilization(self) -> float:
        return len(self._offsets) / self.slots

    def clear(self) -> None:
        self._offsets = {}
        self.latest_offset = -1

    def put(self, key: bytes | memoryview, offset: int) -> bool:
        """Map ``key`` to ``offset``; False (and nothing mapped) when the map is full and the key new."""
        return self.put_digest(_digest(key), offset)

    def put_digest(self, digest: bytes, offset: int) -> bool:
        offsets = self._offsets
        if digest not in offsets and len(offsets) >= self.capacity:
            return False
        offsets[digest] = offset
        return True

    def get(self, key: bytes | memoryview) -> int:
        """The offset ``key`` maps to, -1 when it maps to none."""
        return self._offsets.get(_digest(key), -1)

    def get_digest(self, digest: bytes) -> int:
        return self._offsets.get(digest, -1)


# -- throttling ------------------------------------------------------------------------------------------

class Throttler:
    """Keeps the bytes read and written by every cleaner thread under ``bytes_per_second`` (Kafka's
    ``log.cleaner.io.max.bytes.per.second``), measured over periods of ``check_interval_s`` (or sooner,
    once a burst is a period ahead of the rate): a thread that reports more than the rate allows sleeps
    it off. Thread-safe."""

    def __init__(
        self,
        bytes_per_second: float,
        *,
        check_interval_s: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.bytes_per_second = bytes_per_second
        self.check_interval_s = check_interval_s
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._period_start = self._last_call = clock()
        self._observed = 0.0

    @property
    def unlimited(self) -> bool:
        return not 0 < self.bytes_per_second < float("inf")

    def maybe_throttle(self, size: int) -> None:
        if self.unlimited:
            return
        pause = 0.0
        with self._lock:
            now = self._clock()
            if now - self._last_call > 10 * self.check_interval_s:  # idle meanwhile: a new period
                self._period_start, self._observed = now, 0.0
            self._last_call = now
            self._observed += size
            elapsed = now - self._period_start
            ahead = self._observed / self.bytes_per_second - elapsed
            # Checked once a period has passed, or as soon as a burst is a period ahead of the rate.
            if elapsed >= self.check_interval_s or ahead >= self.check_interval_s:
                pause = ahead
                self._period_start = now + max(pause, 0.0)
                self._observed = 0.0
        if pause > 0:
            self._sleep(pause)


# -- choosing a log --------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class LogToClean:
    """A compacted log and its cleanable section, as ``log_to_clean`` found them."""

    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool = False

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def _overlapping(bases: Sequence[int], start: int, end: int) -> range:
    """Indexes of the segments (by base offsets, the last one open-ended) overlapping [start, end)."""
    first = max(bisect_right(bases, start) - 1, 0)
    last = bisect_left(bases, end)
    return range(first, max(first, last))


def _largest_timestamp(segment: LogSegment) -> int:
    """A segment's largest record timestamp, or its file's last modification when none has one."""
    if segment.max_timestamp >= 0:
        return segment.max_timestamp
    try:
        return os.stat(segment.log_path).st_mtime_ns // 1_000_000
    except OSError:
        return 0


def log_to_clean(log: Log, checkpoint: int | None, now_ms: int) -> LogToClean:
    """The cleanable section of ``log`` whose cleaner checkpoint is ``checkpoint`` (None when it has none),
    as Kafka's ``LogCleanerManager.cleanableOffsets`` computes it."""
    config = log.config
    segments = log.segments
    bases = [segment.base_offset for segment in segments]
    active = segments[-1]
    log_start = log.log_start_offset
    first_dirty = log_start
    if checkpoint is not None and log_start <= checkpoint <= log.log_end_offset:
        first_dirty = checkpoint
    bounds = [log.last_stable_offset, active.base_offset]
    dirty_non_active = [segments[i] for i in _overlapping(bases, first_dirty, active.base_offset)
                        if segments[i] is not active]
    if config.min_compaction_lag_ms > 0:
        for segment in dirty_non_active:
            if _largest_timestamp(segment) > now_ms - config.min_compaction_lag_ms:
                bounds.append(segment.base_offset)
                break
    first_uncleanable = max(min(bounds), first_dirty)
    need_now = False
    if config.max_compaction_lag_ms < LONG_MAX and dirty_non_active:
        first_timestamps = [t for t in (segment.first_batch_timestamp() for segment in dirty_non_active)
                            if t is not None and t > 0]
        if first_timestamps and min(first_timestamps) < now_ms - config.max_compaction_lag_ms:
            need_now = True
    clean_bytes = sum(segments[i].size for i in _overlapping(bases, -1, first_dirty))
    cleanable_bytes = sum(segments[i].size for i in _overlapping(bases, first_dirty, first_uncleanable))
    return LogToClean(log, first_dirty, first_uncleanable, clean_bytes, cleanable_bytes, need_now)


def filthiest_log(
    logs: Iterable[Log],
    checkpoints: Mapping[tuple[str, int], int],
    now_ms: int,
    *,
    skip: Callable[[LogToClean], bool] | None = None,
) -> LogToClean | None:
    """Of the compacted ``logs``, the one to clean next: the largest cleanable ratio above the log's
    ``min.cleanable.dirty.ratio``, or any cleanable log past its ``max.compaction.lag.ms``. ``skip`` leaves
    out the logs it is true of (being cleaned, or known to make no progress)."""
    best: LogToClean | None = None
    for log in logs:
        if not log.config.compact or log.closed:
            continue
        candidate = log_to_clean(log, checkpoints.get((log.topic, log.partition)), now_ms)
        if candidate.total_bytes <= 0 or candidate.cleanable_bytes <= 0:
            continue
        if not (candidate.need_compaction_now or candidate.cleanable_ratio > log.config.min_cleanable_dirty_ratio):
            continue
        if skip is not None and skip(candidate):
            continue
        if best is None or (candidate.need_compaction_now, candidate.cleanable_ratio) > (
            best.need_compaction_now, best.cleanable_ratio
        ):
            best = candidate
    return best


# -- the checkpoint --------------------------------------------------------------------------------------

class CleanerCheckpoint:
    """The data directory's ``cleaner-offset-checkpoint``: each compacted log's first dirty offset.

    ``offsets`` is changed where the logs are owned, and ``snapshot`` taken there; ``write`` runs in any
    thread: writers take turns, and a snapshot older than the last one written is dropped."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / CLEANER_OFFSET_CHECKPOINT
        self._writes = OrderedWrites()
        try:
            self.offsets: dict[tuple[str, int], int] = read_offsets_checkpoint(self.path)
        except (ValueError, OSError) as e:
            logger.warning("ignoring unreadable cleaner checkpoint %s: %s", self.path, e)
            self.offsets = {}

    def snapshot(
        self, live: Iterable[tuple[str, int]] | None = None
    ) -> tuple[int, dict[tuple[str, int], int]]:
        """``(generation, offsets)`` to write, of the ``live`` logs only when given (deleted logs leave
        the file)."""
        if live is not None:
            keep = set(live)
            self.offsets = {key: offset for key, offset in self.offsets.items() if key in keep}
        return self._writes.take(), dict(self.offsets)

    def write(self, generation: int, offsets: Mapping[tuple[str, int], int]) -> None:
        self._writes.write(generation, lambda: write_offsets_checkpoint(self.path, offsets))


# -- one cleaning ----------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class SourceSegment:
    """What a cleaning needs of one of the log's segments, taken where the log is owned."""

    segment: LogSegment
    base_offset: int
    next_offset: int  # the next segment's base offset: above every offset of this one
    size: int
    log_path: Path
    offset_index_path: Path
    time_index_path: Path
    aborted: tuple[AbortedTxn, ...]


@dataclass(frozen=True, slots=True)
class CleanedSegment:
    """A group's replacement, written and fsynced as ``.cleaned`` files, not yet swapped in."""

    base_offset: int
    sources: tuple[SourceSegment, ...]
    size: int


@dataclass(slots=True)
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_retained: int = 0
    batches_rewritten: int = 0
    map_records_read: int = 0
    map_bytes_read: int = 0
    invalid_records: int = 0
    groups: int = 0
    started: float = field(default_factory=time.monotonic)
    map_done: float = 0.0
    done: float = 0.0

    @property
    def elapsed_s(self) -> float:
        return (self.done or time.monotonic()) - self.started

    def describe(self) -> str:
        elapsed = max(self.elapsed_s, 1e-9)
        mb = (self.bytes_read + self.map_bytes_read) / 1e6
        return (
            f"{self.map_records_read} records ({self.map_bytes_read / 1e6:.1f} MB) mapped, "
            f"{self.bytes_read / 1e6:.1f} MB read into {self.groups} segment(s), "
            f"{self.bytes_written / 1e6:.1f} MB written "
            f"({self.records_retained}/{self.records_read} records kept), "
            f"{elapsed:.2f} s, {mb / elapsed:.1f} MB/s"
        )


class CleaningJob:
    """The cleaning of one log, in steps: see the module docstring for which step runs where.

    ::

        job = CleaningJob.prepare(to_clean, config)                 # where the log is owned
        end_offset = job.build_offset_map(offset_map)               # any thread
        for group in job.groups():                                  # any thread
            cleaned = job.clean_group(group)                        # any thread
            job.swap(cleaned)                                       # where the log is owned
        # then the log's checkpoint becomes end_offset
    """

    def __init__(
        self,
        to_clean: LogToClean,
        sources: list[SourceSegment],
        active_producers: dict[int, int],
        aborted: list[AbortedTxn],
        *,
        cleaner_config: CleanerConfig,
        throttler: Throttler | None = None,
        check_done: Callable[[], None] | None = None,
        now_ms: int,
    ) -> None:
        self.to_clean = to_clean
        self.log = to_clean.log
        self.dir = self.log.dir
        self.log_config: LogConfig = self.log.config
        self.sources = sources
        self.first_dirty_offset = to_clean.first_dirty_offset
        self.first_uncleanable_offset = to_clean.first_uncleanable_offset
        self.active_producers = active_producers  # producer id -> last offset of its last batch
        self.cleaner_config = cleaner_config
        self.throttler = throttler or Throttler(cleaner_config.io_max_bytes_per_second)
        self.check_done = check_done or (lambda: None)
        self.now_ms = now_ms
        self.stats = CleanerStats()
        self.offset_map: OffsetMap | None = None
        self.end_offset = to_clean.first_dirty_offset
        self._aborted: dict[int, tuple[list[int], list[int]]] = {}
        for txn in sorted(aborted, key=lambda t: t.first_offset):
            firsts, lasts = self._aborted.setdefault(txn.producer_id, ([], []))
            firsts.append(txn.first_offset)
            lasts.append(txn.last_offset)

    @classmethod
    def prepare(
        cls,
        to_clean: LogToClean,
        cleaner_config: CleanerConfig | None = None,
        *,
        throttler: Throttler | None = None,
        check_done: Callable[[], None] | None = None,
        now_ms: int | None = None,
    ) -> CleaningJob:
        """Take what the cleaning needs of the log: run where the log is owned (it reads its state)."""
        log = to_clean.log
        segments = log.segments
        sources = []
        aborted: list[AbortedTxn] = []
        for i, segment in enumerate(segments):
            entries = tuple(segment.txn_index.entries)
            aborted += entries
            if segment.base_offset >= to_clean.first_uncleanable_offset or i == len(segments) - 1:
                continue
            sources.append(SourceSegment(
                segment, segment.base_offset, segments[i + 1].base_offset, segment.size, segment.log_path,
                segment.offset_index_path, segment.time_index_path, entries,
            ))
        producers = {
            producer_id: entry.last_data_offset
            for producer_id, entry in log.producer_state.active_producers.items()
        }
        return cls(
            to_clean, sources, producers, aborted,
            cleaner_config=cleaner_config or CleanerConfig(), throttler=throttler, check_done=check_done,
            now_ms=clock.now_ms() if now_ms is None else now_ms,
        )

    # -- reading the old segments ---------------------------------------------------------------------

    def _batches(self, source: SourceSegment, stats_bytes: Callable[[int], None]) -> Iterator[RecordBatch]:
        """Every batch of ``source``, read through a descriptor of the cleaning's own, a chunk at a time."""
        chunk_size = self.cleaner_config.io_buffer_size
        try:
            fd = os.open(source.log_path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise CleaningAborted(f"segment {source.log_path} is gone") from None
        try:
            if os.fstat(fd).st_size < source.size:
                raise CleaningAborted(f"segment {source.log_path} was truncated")
            position = 0
            end = source.size
            while position < end:
                self.check_done()
                chunk = os.pread(fd, min(chunk_size, end - position), position)
                stats_bytes(len(chunk))
                self.throttler.maybe_throttle(len(chunk))
                relative = 0
                while len(chunk) - relative >= LOG_OVERHEAD:
                    size = LOG_OVERHEAD + struct.unpack_from(">i", chunk, relative + 8)[0]
                    if size < _MIN_BATCH_SIZE or position + relative + size > end:
                        raise _corrupt(f"segment {source.log_path} holds no valid batch at byte {position + relative}")
                    if relative + size > len(chunk):
                        break
                    yield RecordBatch(chunk, relative)
                    relative += size
                if relative == 0:  # a batch larger than the chunk: read it whole
                    size = LOG_OVERHEAD + struct.unpack_from(">i", os.pread(fd, LOG_OVERHEAD, position), 8)[0]
                    if size < _MIN_BATCH_SIZE or position + size > end:
                        raise _corrupt(f"segment {source.log_path} holds no valid batch at byte {position}")
                    chunk = os.pread(fd, size, position)
                    stats_bytes(len(chunk))
                    self.throttler.maybe_throttle(len(chunk))
                    yield RecordBatch(chunk)
                    relative = size
                position += relative
        finally:
            os.close(fd)

    def _is_aborted(self, producer_id: int, offset: int) -> bool:
        ranges = self._aborted.get(producer_id)
        if ranges is None:
            return False
        firsts, lasts = ranges
        i = bisect_right(firsts, offset) - 1
        return i >= 0 and offset <= lasts[i]

    # -- 1. the offset map ----------------------------------------------------------------------------

    def build_offset_map(self, offset_map: OffsetMap) -> int:
        """Map the dirty section's keys to their latest offsets; returns the end offset of what was
        mapped (where the next cleaning starts). Any thread."""
        offset_map.clear()
        self.offset_map = offset_map
        stats = self.stats
        start, end = self.first_dirty_offset, self.first_uncleanable_offset
        put = offset_map.put_digest
        full = False

        def count(n: int) -> None:
            stats.map_bytes_read += n

        for source in self.sources:
            if full or source.base_offset >= end:
                break
            if source.next_offset <= start:
                continue
            for batch in self._batches(source, count):
                header = batch.header()
                base_offset = header.base_offset
                last_offset = base_offset + header.last_offset_delta
                if base_offset >= end:
                    break
                if last_offset < start:
                    continue
                if not (header.attributes & _CONTROL_MASK) and not (
                    header.attributes & _TRANSACTIONAL_MASK and self._is_aborted(header.producer_id, base_offset)
                ) and header.record_count > 0:
                    data = batch_records_data(batch)
                    for _, _, offset_delta, _, key_start, key_end, _ in scan_records(data, header.record_count):
                        stats.map_records_read += 1
                        offset = base_offset + offset_delta
                        if key_start < 0 or offset < start:
                            continue
                        if not put(_digest(data[key_start:key_end]), offset):
                            full = True
                            break
                    if full:
                        logger.info(
                            "%s: the offset map is full (%d keys): cleaning up to offset %d this time",
                            self.dir.name, len(offset_map), offset_map.latest_offset + 1,
                        )
                        break
                offset_map.latest_offset = last_offset
        stats.map_done = time.monotonic()
        self.end_offset = max(offset_map.latest_offset + 1, start)
        return self.end_offset

    # -- 2. grouping and rewriting --------------------------------------------------------------------

    def groups(self) -> list[list[SourceSegment]]:
        """The segments to rewrite, from the log's start up to the end of the mapped section, in groups
        no larger than ``segment.bytes`` whose indexes fit ``segment.index.bytes`` (and whose offsets fit
        one segment). Any thread."""
        if self.end_offset <= self.first_dirty_offset:
            return []
        segments = [source for source in self.sources if source.base_offset < self.end_offset]
        max_size = self.log_config.segment_bytes
        max_index_size = self.log_config.segment_index_bytes

        def file_size(path: Path) -> int:
            try:
                return os.stat(path).st_size
            except FileNotFoundError:
                return 0

        index_sizes = {id(s): (file_size(s.offset_index_path), file_size(s.time_index_path)) for s in segments}
        grouped: list[list[SourceSegment]] = []
        i = 0
        while i < len(segments):
            group = [segments[i]]
            log_size = segments[i].size
            index_size, time_index_size = index_sizes[id(segments[i])]
            i += 1
            while i < len(segments):
                candidate = segments[i]
                candidate_index, candidate_time_index = index_sizes[id(candidate)]
                last_offset = min(candidate.next_offset, self.first_uncleanable_offset) - 1
                if (
                    log_size + candidate.size > max_size
                    or index_size + candidate_index > max_index_size
                    or time_index_size + candidate_time_index > max_index_size
                    or last_offset - group[0].base_offset > INT32_MAX
                ):
                    break
                group.append(candidate)
                log_size += candidate.size
                index_size += candidate_index
                time_index_size += candidate_time_index
                i += 1
            grouped.append(group)
        return grouped

    def cleaned_paths(self, base_offset: int) -> list[Path]:
        suffix = files.CLEANED_FILE_SUFFIX
        return [
            files.log_file(self.dir, base_offset, suffix), files.offset_index_file(self.dir, base_offset, suffix),
            files.time_index_file(self.dir, base_offset, suffix), files.txn_index_file(self.dir, base_offset, suffix),
        ]

    def delete_cleaned(self, base_offset: int) -> None:
        for path in self.cleaned_paths(base_offset):
            path.unlink(missing_ok=True)

    def clean_group(self, group: Sequence[SourceSegment]) -> CleanedSegment:
        """Write the group's replacement as ``.cleaned`` files, fsynced. Any thread."""
        if self.offset_map is None:
            raise RuntimeError("build_offset_map() first")
        base_offset = group[0].base_offset
        self.delete_cleaned(base_offset)
        stats = self.stats
        stats.groups += 1
        cleaned = LogSegment(self.dir, base_offset, self.log_config, now_ms=self.now_ms,
                             suffix=files.CLEANED_FILE_SUFFIX)
        try:
            mtimes = []
            for source in group:
                try:
                    mtimes.append(os.stat(source.log_path).st_mtime_ns)
                except FileNotFoundError:
                    raise CleaningAborted(f"segment {source.log_path} is gone") from None
            out = bytearray()
            appended: list[AppendedBatch] = []
            flush_at = self.cleaner_config.io_buffer_size

            def count(n: int) -> None:
                stats.bytes_read += n

            for source in group:
                for batch in self._batches(source, count):
                    kept = self._filter(batch)
                    if kept is None:
                        continue
                    data, last_offset, max_timestamp = kept
                    out += data
                    appended.append(AppendedBatch(len(data), last_offset, max_timestamp))
                    if len(out) >= flush_at:
                        self._write(cleaned, out, appended)
                        out, appended = bytearray(), []
            if appended:
                self._write(cleaned, out, appended)
            for source in group:
                for txn in source.aborted:
                    cleaned.txn_index.append(txn)
            os.fsync(cleaned.open_for_append().fd)
            cleaned.on_become_inactive()
            cleaned.release_indexes()
            size = cleaned.size
            cleaned.close_handles()
            for path in self.cleaned_paths(base_offset)[1:]:
                if path.exists():
                    fd = os.open(path, os.O_RDONLY)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
            # The replacement keeps the last-modified time of the last segment it replaces, as in Kafka.
            os.utime(self.cleaned_paths(base_offset)[0], ns=(mtimes[-1], mtimes[-1]))
        except BaseException:
            cleaned.close_handles()
            self.delete_cleaned(base_offset)
            raise
        return CleanedSegment(base_offset, tuple(group), size)

    def swap(self, cleaned: CleanedSegment, *, now_ms: int | None = None) -> None:
        """Swap ``cleaned`` in for the segments it replaces (``Log.replace_segments``): where the log is
        owned. Raises ``CleaningAborted``, the ``.cleaned`` files removed, when the log no longer holds
        those segments as they were (retention, DeleteRecords or a truncation took them meanwhile)."""
        try:
            self.log.replace_segments(
                cleaned.base_offset,
                [source.segment for source in cleaned.sources],
                expected_sizes=[source.size for source in cleaned.sources],
                now_ms=now_ms,
            )
        except ValueError as e:
            self.delete_cleaned(cleaned.base_offset)
            raise CleaningAborted(str(e)) from None

    def _write(self, cleaned: LogSegment, data: bytearray, appended: list[AppendedBatch]) -> None:
        cleaned.append(data, appended)
        self.stats.bytes_written += len(data)
        self.throttler.maybe_throttle(len(data))

    def _filter(self, batch: RecordBatch) -> tuple[bytes | memoryview, int, int] | None:
        """What of ``batch`` stays: ``(bytes, last offset, max timestamp)``, or None when nothing does."""
        batch.validate()
        header = batch.header()
        attributes = header.attributes
        base_offset = header.base_offset
        last_offset = base_offset + header.last_offset_delta
        count = header.record_count
        stats = self.stats
        stats.records_read += max(count, 0)
        if attributes & _CONTROL_MASK:  # transaction markers stay as they are
            stats.records_retained += count
            return batch.raw(), last_offset, header.max_timestamp
        offset_map = self.offset_map
        assert offset_map is not None
        latest = offset_map.latest_offset
        producer_id = header.producer_id
        last_of_producer = producer_id >= 0 and self.active_producers.get(producer_id) == last_offset
        discard = bool(attributes & _TRANSACTIONAL_MASK) and self._is_aborted(producer_id, base_offset)
        if not discard and (base_offset > latest or count <= 0):
            stats.records_retained += max(count, 0)
            return batch.raw(), last_offset, header.max_timestamp
        kept: list[RecordSpan] = []
        data = b""
        horizon = header.base_timestamp if attributes & _DELETE_HORIZON_MASK else None
        retain_deletes = horizon is None or self.now_ms < horizon
        tombstones = False
        if not discard:
            data = batch_records_data(batch)
            get = offset_map.get_digest
            for span in scan_records(data, count):
                offset = base_offset + span[2]
                if offset > latest:
                    kept.append(span)
                    continue
                key_start = span[4]
                if key_start < 0:
                    stats.invalid_records += 1
                    continue
                found = get(_digest(data[key_start:span[5]]))
                if (found >= 0 and offset < found) or (span[6] and not retain_deletes):
                    continue
                tombstones = tombstones or span[6]
                kept.append(span)
        stats.records_retained += len(kept)
        new_horizon = None
        if tombstones and horizon is None:
            new_horizon = self.now_ms + self.log_config.delete_retention_ms
        if len(kept) == count and new_horizon is None:
            return batch.raw(), last_offset, header.max_timestamp
        stats.batches_rewritten += 1
        if not kept:
            if not last_of_producer:
                return None
            return _empty_batch(header), last_offset, header.max_timestamp
        return _rebuilt_batch(header, data, kept, new_horizon)


def _empty_batch(header) -> bytes:
    """A batch header without records that keeps a producer's state (Kafka's ``writeEmptyHeader``)."""
    attributes = header.attributes & ~(_CODEC_MASK | _DELETE_HORIZON_MASK)
    batch = bytearray(RECORD_BATCH_OVERHEAD)
    _HEADER.pack_into(
        batch, 0, header.base_offset, _EMPTY_BATCH_LENGTH, header.partition_leader_epoch, MAGIC, 0, attributes,
        header.last_offset_delta, -1, header.max_timestamp, header.producer_id, header.producer_epoch,
        header.base_sequence, 0,
    )
    _CRC.pack_into(batch, _CRC_POSITION, crc32c(memoryview(batch)[_ATTRIBUTES_POSITION:]))
    return bytes(batch)


def _rebuilt_batch(
    header, data: bytes, kept: list[RecordSpan], delete_horizon_ms: int | None = None
) -> tuple[bytes, int, int]:
    """The batch with only the ``kept`` records (their bytes as they were), compressed with its codec;
    given a ``delete_horizon_ms``, stamped with it (records re-based on it, their timestamps unchanged)."""
    attributes = header.attributes
    base_timestamp = header.base_timestamp
    if delete_horizon_ms is None:
        records = b"".join([data[span[0]:span[1]] for span in kept])
    else:
        shift = base_timestamp - delete_horizon_ms
        records = b"".join([_rebased_record(data, span, shift) for span in kept])
        attributes |= _DELETE_HORIZON_MASK
    codec = Compression(attributes & _CODEC_MASK)
    payload = records if codec is Compression.NONE else compress(codec, records)
    if attributes & _TIMESTAMP_TYPE_MASK:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = base_timestamp + max(span[3] for span in kept)
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
    batch = bytearray(RECORD_BATCH_OVERHEAD + len(payload))
    _HEADER.pack_into(
        batch, 0, header.base_offset, _EMPTY_BATCH_LENGTH + len(payload), header.partition_leader_epoch, MAGIC, 0,
        attributes, header.last_offset_delta, base_timestamp, max_timestamp, header.producer_id,
        header.producer_epoch, header.base_sequence, len(kept),
    )
    batch[RECORD_BATCH_OVERHEAD:] = payload
    _CRC.pack_into(batch, _CRC_POSITION, crc32c(memoryview(batch)[_ATTRIBUTES_POSITION:]))
    return bytes(batch), header.base_offset + header.last_offset_delta, max_timestamp


# -- the whole cleaning, in the calling thread -----------------------------------------------------------

class Cleaner:
    """Cleans logs one at a time in the calling thread, with one offset map (for tests and tools; the
    broker runs the same steps with the swaps on its event loop, see ``trafka.broker.log_cleaner``)."""

    def __init__(self, config: CleanerConfig | None = None, *, throttler: Throttler | None = None) -> None:
        self.config = config or CleanerConfig()
        self.offset_map = OffsetMap(self.config.dedupe_buffer_size, self.config.io_buffer_load_factor)
        self.throttler = throttler or Throttler(self.config.io_max_bytes_per_second)

    def clean(self, to_clean: LogToClean, *, now_ms: int | None = None) -> tuple[int, CleanerStats]:
        """Clean the log; returns its new first dirty offset (for the checkpoint) and the statistics."""
        job = CleaningJob.prepare(to_clean, self.config, throttler=self.throttler, now_ms=now_ms)
        end_offset = job.build_offset_map(self.offset_map)
        for group in job.groups():
            cleaned = job.clean_group(group)
            job.swap(cleaned, now_ms=now_ms)
        job.stats.done = time.monotonic()
        return end_offset, job.stats

    def clean_log(
        self, log: Log, checkpoint: CleanerCheckpoint | None = None, *, now_ms: int | None = None
    ) -> CleanerStats | None:
        """Clean ``log`` from its checkpointed first dirty offset, whatever its dirty ratio, and move the
        checkpoint; None when nothing is cleanable."""
        now = clock.now_ms() if now_ms is None else now_ms
        key = (log.topic, log.partition)
        offsets = checkpoint.offsets if checkpoint is not None else {}
        to_clean = log_to_clean(log, offsets.get(key), now)
        if to_clean.cleanable_bytes <= 0:
            return None
        end_offset, stats = self.clean(to_clean, now_ms=now)
        if checkpoint is not None:
            checkpoint.offsets[key] = end_offset
            checkpoint.write(*checkpoint.snapshot())
        return stats

