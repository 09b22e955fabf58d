"""One log segment: a ``.log`` file of record batches and its offset and time indexes.

The ``.log`` file holds batches exactly as they travel on the wire, back to back, the first one
starting at the segment's base offset. Only batch headers are ever read on the hot paths: a read
finds its starting batch through the offset index and a short forward scan of headers, and returns
a ``FileSlice`` of whole batches that the broker sends with ``sendfile``.

Only the segment being written (the active one) keeps a descriptor of its ``.log`` file open; a
segment that is no longer written to opens one for reading when it is read, from the process-wide
cache of readers in ``trafka.storage.open_files``, which keeps a bounded number of them open. Slices
handed out hold the descriptor they read from, which stays open until they are gone.

Every ``index.interval.bytes`` of appended data, the segment adds an offset index entry for the
batch being appended (its last offset and its byte position) and a time index entry with the
largest timestamp seen so far. Indexes are opened lazily, so a broker with many old segments maps
only the indexes it uses, and an index file is created with its first entry (or when a segment
with data stops being active or is closed), so a new partition starts with its ``.log`` alone.

``recover`` re-validates every batch (framing, CRC, increasing offsets) after an unclean shutdown,
truncates the file after the last good batch and rebuilds both indexes from scratch.
"""
from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

from trafka.storage import files
from trafka.storage.config import LogConfig
from trafka.storage.index import NO_TIMESTAMP, CorruptIndexError, OffsetIndex, TimeIndex, TransactionIndex
from trafka.storage.open_files import READERS, LogFile
from trafka.wire.chunks import FileSlice
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.records import LOG_OVERHEAD, MAGIC, RECORD_BATCH_OVERHEAD, BatchScan, RecordBatch, TimestampType

logger = logging.getLogger(__name__)

# base_offset, batch_length, partition_leader_epoch, magic, (crc, attributes), last_offset_delta,
# (base_timestamp), max_timestamp: what scans need from a batch header.
_SCAN_HEADER = struct.Struct(">qiib6xi8xq")
_MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
_BATCH_LENGTH = struct.Struct(">i")
_SCAN_CHUNK = 16 * 1024
_READ_CHUNK = 1024 * 1024


class _HasFileno(Protocol):
    def fileno(self) -> int: ...


class BatchPosition(NamedTuple):
    """Where a batch lies in a ``.log`` file, and the header fields scans need."""

    position: int
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    partition_leader_epoch: int

    @property
    def end(self) -> int:
        return self.position + self.size


class AppendedBatch(NamedTuple):
    """What a segment needs to know of each batch of an append, in order."""

    size: int
    last_offset: int
    max_timestamp: int


class LogSegment:
    """A ``.log`` file with its ``.index`` and ``.timeindex``, named after ``base_offset``.

    An ``active`` segment (the default) creates its ``.log`` file if needed and keeps it open for
    appending; an inactive one only looks at its size, and opens the file when it is read (or
    appended to again, after a truncation makes it the last segment of its log).
    """

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        *,
        now_ms: int,
        suffix: str = "",
        roll_jitter_ms: int = 0,
        active: bool = True,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = config.index_interval_bytes
        self.max_index_bytes = config.segment_index_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self.created_ms = now_ms
        self.log_path = files.log_file(directory, base_offset, suffix)
        self.offset_index_path = files.offset_index_file(directory, base_offset, suffix)
        self.time_index_path = files.time_index_file(directory, base_offset, suffix)
        self.txn_index = TransactionIndex(files.txn_index_file(directory, base_offset, suffix))
        # The descriptor appends go to (and reads, while it is open); None when not active.
        self._file: LogFile | None = None
        self._closed = False
        if active:
            self._file = LogFile(self.log_path, writable=True)
            self.size = os.fstat(self._file.fd).st_size
        else:
            self.size = os.stat(self.log_path).st_size
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._max_timestamp_and_offset: tuple[int, int] | None = None
        self._rolling_based_timestamp: int | None = None
        self._bytes_since_last_index_entry = 0
        if self.size == 0:
            # Open the indexes while the log is known to be empty (an all-zero first time index
            # slot is then zero fill); their files are created when first written to.
            _ = self.offset_index, self.time_index

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, path={self.log_path})"

    # -- the .log descriptor -----------------------------------------------------------------------

    @property
    def file(self) -> LogFile:
        """The descriptor reads go through: the segment's own while it is active, otherwise its
        reader from the process-wide cache, opened now if the cache does not hold it (OSError
        when it cannot be opened). Hold the returned object, not its number, while reading."""
        file = self._file
        if file is not None:
            return file
        if self._closed:
            raise ValueError(f"segment {self.log_path} is closed")
        return READERS.get(self, self.log_path)

    @property
    def holds_descriptor(self) -> bool:
        """Whether the segment keeps a descriptor of its own open (it is being written to)."""
        return self._file is not None

    def open_for_append(self) -> LogFile:
        """The descriptor appends go to, opened if the segment does not hold it."""
        file = self._file
        if file is None:
            if self._closed:
                raise ValueError(f"segment {self.log_path} is closed")
            file = self._file = LogFile(self.log_path, writable=True)
            READERS.discard(self)
        return file

    def release_file(self) -> None:
        """Stop keeping a descriptor open: the segment is no longer written to. Slices already
        handed out keep theirs until they are gone."""
        self._file = None

    def release_descriptors(self) -> None:
        """Let go of every descriptor of the segment, its own and its reader's (slices keep
        theirs); a later read or append opens the file again."""
        self._file = None
        READERS.discard(self)

    def _truncate_file(self, size: int) -> None:
        if self._file is not None:
            os.ftruncate(self._file.fd, size)
        else:
            os.truncate(self.log_path, size)

    # -- indexes ---------------------------------------------------------------------------------

    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            self._offset_index = OffsetIndex(self.offset_index_path, self.base_offset, self.max_index_bytes)
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._time_index = TimeIndex(
                self.time_index_path, self.base_offset, self.max_index_bytes, log_is_empty=not self.size
            )
        return self._time_index

    @property
    def txn_index_path(self) -> Path:
        return self.txn_index.path

    def indexes_exist(self) -> bool:
        return self.offset_index_path.exists() and self.time_index_path.exists()

    def sanity_check(self) -> None:
        """Raise ``CorruptIndexError`` if an index file is implausible, or missing for a segment
        with data (an empty segment's index files are created when first written to)."""
        if self.size and not self.indexes_exist():
            raise CorruptIndexError(f"index files of segment {self.log_path} are missing")
        self.offset_index.sanity_check(self.size)
        self.time_index.sanity_check(self.size)
        self.txn_index.sanity_check()
        last_offset_in_index = max(self.offset_index.last_offset, self.time_index.last_entry[1])
        if self.size and last_offset_in_index >= self.base_offset:
            last_batch = self._last_batch_from(self.offset_index.lookup(last_offset_in_index)[1])
            if last_batch is None or last_batch.last_offset < last_offset_in_index:
                raise CorruptIndexError(
                    f"indexes of segment {self.log_path} refer to offset {last_offset_in_index}, "
                    "beyond the segment's last batch"
                )

    def release_indexes(self) -> None:
        """Trim and unmap both indexes (they reopen on next use); for segments that are not active.

        A segment with data keeps both index files on disk, empty ones too, so that a restart
        finds them and does not rebuild them."""
        for index in (self._offset_index, self._time_index):
            if index is not None:
                index.close()
                if self.size:
                    index.create_file()
        self._offset_index = None
        self._time_index = None

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    # -- timestamps ------------------------------------------------------------------------------

    @property
    def max_timestamp_and_offset(self) -> tuple[int, int]:
        """``(max_timestamp, last offset of the batch holding it)``; (-1, base_offset) when empty."""
        if self._max_timestamp_and_offset is None:
            self._max_timestamp_and_offset = self.time_index.last_entry
        return self._max_timestamp_and_offset

    @property
    def max_timestamp(self) -> int:
        return self.max_timestamp_and_offset[0]

    def first_batch_timestamp(self) -> int | None:
        """The max timestamp of the first batch: what time-based rolling measures from."""
        if self._rolling_based_timestamp is None and self.size:
            first = next(self.batch_positions(0), None)
            if first is not None:
                self._rolling_based_timestamp = first.max_timestamp
        return self._rolling_based_timestamp

    def time_waited_for_roll(self, now_ms: int, max_timestamp_in_messages: int) -> int:
        first_timestamp = self.first_batch_timestamp()
        if first_timestamp is not None and first_timestamp >= 0:
            return max_timestamp_in_messages - first_timestamp
        return now_ms - self.created_ms

    def should_roll(
        self,
        config: LogConfig,
        *,
        messages_size: int,
        max_timestamp_in_messages: int,
        max_offset_in_messages: int,
        now_ms: int,
    ) -> bool:
        """Kafka's roll rule: the segment is full, old enough, an index is full, or offsets overflow."""
        if self.size > config.segment_bytes - messages_size:
            return True
        if self.size > 0 and (
            self.time_waited_for_roll(now_ms, max_timestamp_in_messages) > config.segment_ms - self.roll_jitter_ms
        ):
            return True
        return (
            self.offset_index.is_full()
            or self.time_index.is_full()
            or not self.offset_index.can_append_offset(max_offset_in_messages)
        )

    # -- appending -------------------------------------------------------------------------------

    def append(self, data: bytes | bytearray | memoryview, batches: Sequence[AppendedBatch]) -> None:
        """Write ``data`` (the whole batches described by ``batches``) with one write call, and index it."""
        if not batches:
            return
        if not self.offset_index.can_append_offset(batches[-1].last_offset):
            raise ValueError(
                f"offset {batches[-1].last_offset} does not fit segment {self.log_path} "
                f"with base offset {self.base_offset}"
            )
        offset_index, time_index = self.offset_index, self.time_index
        # Bytes since the last entry when the last batch comes: over the interval, an entry is added.
        if self._bytes_since_last_index_entry + len(data) - batches[-1].size > self.index_interval_bytes:
            # Have the index files mapped before writing (they are mapped with their first entry):
            # running out of memory maps (vm.max_map_count) then fails the append with nothing written.
            offset_index.prepare_append()
            time_index.prepare_append()
        position = self.size
        if position == 0:
            self._rolling_based_timestamp = max(batch.max_timestamp for batch in batches)
        _write_all(self.open_for_append().fd, data)
        self.size += len(data)
        max_timestamp, offset_of_max_timestamp = self.max_timestamp_and_offset
        for batch in batches:
            if batch.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max_timestamp = batch.max_timestamp, batch.last_offset
            if self._bytes_since_last_index_entry > self.index_interval_bytes:
                if not offset_index.is_full():
                    offset_index.append(batch.last_offset, position)
                if not time_index.is_full():
                    time_index.maybe_append(max_timestamp, offset_of_max_timestamp)
                self._bytes_since_last_index_entry = 0
            self._bytes_since_last_index_entry += batch.size
            position += batch.size
        self._max_timestamp_and_offset = (max_timestamp, offset_of_max_timestamp)

    def on_become_inactive(self) -> None:
        """The segment was rolled: record its final max timestamp, trim the indexes and let its
        descriptor go (reads open one on demand)."""
        max_timestamp, offset = self.max_timestamp_and_offset
        self.time_index.maybe_append(max_timestamp, offset, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.release_file()

    # -- reading ---------------------------------------------------------------------------------

    def batch_positions(self, start: int = 0, end: int | None = None) -> Iterator[BatchPosition]:
        """The batches from byte ``start`` (a batch boundary) up to ``end``, read header by header."""
        return scan_batches(self.file, start, self.size if end is None else end, self.log_path)

    def _last_batch_from(self, position: int) -> BatchPosition | None:
        last = None
        for last in self.batch_positions(position):
            pass
        return last

    def translate_offset(self, offset: int, starting_position: int = 0) -> BatchPosition | None:
        """The first batch whose last offset is >= ``offset``; None if the segment ends before it."""
        position = max(self.offset_index.lookup(offset)[1], starting_position)
        for batch in self.batch_positions(position):
            if batch.last_offset >= offset:
                return batch
        return None

    def read_next_offset(self) -> int:
        """The offset after the segment's last batch (its base offset when empty)."""
        last = self._last_batch_from(self.offset_index.lookup_position(self.size)[1]) if self.size else None
        return last.last_offset + 1 if last is not None else self.base_offset

    def slice_from(
        self,
        first: BatchPosition,
        max_bytes: int,
        *,
        end_position: int | None = None,
        min_one_batch: bool = True,
    ) -> FileSlice | None:
        """Whole batches from ``first`` up to ``max_bytes`` and not past byte ``end_position``.

        With ``min_one_batch`` the first batch is returned even when it is larger than ``max_bytes``.
        None when nothing may be returned.
        """
        end_position = self.size if end_position is None else end_position
        if first.position >= end_position:
            return None
        if first.size > max_bytes:
            return FileSlice(self.file, first.position, first.size) if min_one_batch else None
        file = self.file
        limit = first.position + max_bytes
        if limit >= end_position:
            return FileSlice(file, first.position, end_position - first.position)
        # Every batch before the last indexed batch starting at or below the limit fits whole:
        # scan forward from there.
        end = max(self.offset_index.lookup_position(limit)[1], first.end)
        for batch in self.batch_positions(end, end_position):
            if batch.end > limit:
                break
            end = batch.end
        return FileSlice(file, first.position, end - first.position)

    def upper_bound_offset(self, position: int) -> int | None:
        """An offset at or after the batch beginning at byte ``position`` (from the index); None
        when the index has no entry that far."""
        return self.offset_index.upper_bound_offset(position)

    def position_bound(self, max_offset: int) -> int:
        """The byte position where batches with ``base_offset >= max_offset`` begin."""
        batch = self.translate_offset(max_offset)
        if batch is None:
            return self.size
        return batch.position if batch.base_offset >= max_offset else batch.end

    def read_batch(self, batch: BatchPosition) -> RecordBatch:
        """The whole batch, read into memory (for the rare paths that decode records)."""
        file = self.file
        return RecordBatch(os.pread(file.fd, batch.size, batch.position))

    def record_batches(self, start: int = 0) -> Iterator[tuple[int, RecordBatch]]:
        """``(position, batch)`` for every batch from byte ``start``, read in large chunks."""
        file = self.file  # held while the batches are read
        fd = file.fd
        position = start
        while position < self.size:
            chunk = os.pread(fd, min(_READ_CHUNK, self.size - position), position)
            relative = 0
            while len(chunk) - relative >= RECORD_BATCH_OVERHEAD:
                batch = RecordBatch(chunk, relative)
                size = batch.size
                if size < RECORD_BATCH_OVERHEAD:
                    raise _corrupt_at(self.log_path, position + relative)
                if relative + size > len(chunk):
                    break
                yield position + relative, batch
                relative += size
            if relative == 0:  # a batch larger than a chunk
                if len(chunk) < RECORD_BATCH_OVERHEAD:
                    raise _corrupt_at(self.log_path, position)
                size = RecordBatch(chunk).size
                chunk = os.pread(fd, size, position)
                if len(chunk) != size:
                    raise _corrupt_at(self.log_path, position)
                yield position, RecordBatch(chunk)
                relative = size
            position += relative

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record at or after ``starting_offset`` with a
        timestamp >= ``timestamp``; None if the segment has none."""
        indexed_offset = self.time_index.lookup(timestamp)[1]
        position = self.offset_index.lookup(max(indexed_offset, starting_offset))[1]
        for batch in self.batch_positions(position):
            if batch.max_timestamp < timestamp or batch.last_offset < starting_offset:
                continue
            for record in self.read_batch(batch).records():
                if record.timestamp >= timestamp and record.offset >= starting_offset:
                    return record.offset, record.timestamp
        return None

    def offset_of_max_timestamp(self) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record holding the segment's max timestamp."""
        max_timestamp, offset = self.max_timestamp_and_offset
        if max_timestamp == NO_TIMESTAMP or not self.size:
            return None
        position = self.offset_index.lookup(offset)[1]
        for batch in self.batch_positions(position):
            if batch.max_timestamp != max_timestamp:
                continue
            record_batch = self.read_batch(batch)
            if record_batch.timestamp_type == TimestampType.LOG_APPEND_TIME:
                return batch.base_offset, max_timestamp
            for record in record_batch.records():
                if record.timestamp == max_timestamp:
                    return record.offset, max_timestamp
        return None

    # -- recovery and truncation -----------------------------------------------------------------

    def recover(self, on_batch: Callable[[RecordBatch], None] | None = None) -> int:
        """Re-validate every batch, rebuild both indexes, and cut the file after the last good batch.

        ``on_batch`` sees each valid batch in order. Returns the number of bytes truncated.
        """
        offset_index, time_index = self.offset_index, self.time_index
        offset_index.reset()
        time_index.reset()
        file = self.file  # held while the segment is read
        fd = file.fd
        file_size = self.size
        valid_bytes = last_index_entry = 0
        max_timestamp, offset_of_max_timestamp = NO_TIMESTAMP, self.base_offset
        previous_last_offset = self.base_offset - 1
        problem: str | None = None
        read_size = _READ_CHUNK
        while valid_bytes < file_size and problem is None:
            chunk_start = valid_bytes
            chunk = os.pread(fd, min(read_size, file_size - chunk_start), chunk_start)
            read_size = _READ_CHUNK
            scan = BatchScan(chunk)
            accepted_end = 0
            for batch in scan:
                base_offset, last_offset_delta = batch.base_offset, batch.last_offset_delta
                last_offset = base_offset + last_offset_delta
                if base_offset <= previous_last_offset or last_offset_delta < 0:
                    problem = f"batch at offset {base_offset} does not follow offset {previous_last_offset}"
                    break
                if not offset_index.can_append_offset(last_offset):
                    problem = f"offset {last_offset} does not fit the segment"
                    break
                if batch.max_timestamp > max_timestamp:
                    max_timestamp, offset_of_max_timestamp = batch.max_timestamp, last_offset
                position = chunk_start + batch.position
                if position - last_index_entry > self.index_interval_bytes:
                    if not offset_index.is_full():
                        offset_index.append(last_offset, position)
                    if not time_index.is_full():
                        time_index.maybe_append(max_timestamp, offset_of_max_timestamp)
                    last_index_entry = position
                if on_batch is not None:
                    on_batch(batch)
                previous_last_offset = last_offset
                accepted_end = batch.position + batch.size
            valid_bytes = chunk_start + accepted_end
            if problem is not None or scan.error is None:
                continue
            if scan.truncated and chunk_start + len(chunk) < file_size:
                # The next batch continues past this chunk: read it whole next time round.
                if len(chunk) - accepted_end >= LOG_OVERHEAD:
                    needed = LOG_OVERHEAD + _BATCH_LENGTH.unpack_from(chunk, accepted_end + 8)[0]
                    if valid_bytes + needed > file_size:
                        problem = "the last batch is incomplete"
                    read_size = max(_READ_CHUNK, needed)
                continue
            problem = str(scan.error)
        truncated = file_size - valid_bytes
        if truncated:
            logger.warning(
                "segment %s: truncating %d invalid bytes at byte %d: %s",
                self.log_path, truncated, valid_bytes, problem or "incomplete batch",
            )
            self._truncate_file(valid_bytes)
            self.size = valid_bytes
        self.txn_index.truncate_to(previous_last_offset + 1)
        offset_index.trim_to_valid_size()
        time_index.maybe_append(max_timestamp, offset_of_max_timestamp, skip_full_check=True)
        time_index.trim_to_valid_size()
        self._max_timestamp_and_offset = (max_timestamp, offset_of_max_timestamp)
        self._rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding ``offset`` and everything after it; returns bytes removed."""
        batch = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.resize_indexes(self.max_index_bytes)
        if batch is None:
            return 0
        removed = self.size - batch.position
        self._truncate_file(batch.position)
        self.size = batch.position
        self._bytes_since_last_index_entry = 0
        self._rolling_based_timestamp = None
        self._max_timestamp_and_offset = self._read_max_timestamp_and_offset()
        return removed

    def _read_max_timestamp_and_offset(self) -> tuple[int, int]:
        max_timestamp, offset = self.time_index.last_entry
        position = self.offset_index.lookup(offset)[1] if max_timestamp != NO_TIMESTAMP else 0
        for batch in self.batch_positions(position):
            if batch.max_timestamp > max_timestamp:
                max_timestamp, offset = batch.max_timestamp, batch.last_offset
        return max_timestamp, offset

    # -- files -----------------------------------------------------------------------------------

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the segment's files, e.g. to ``.deleted`` before removing them."""

        def rename(path: Path) -> Path:
            new_path = path.with_name(path.name.removesuffix(old_suffix) + new_suffix)
            if path.exists():
                os.replace(path, new_path)
            return new_path

        self.log_path = rename(self.log_path)
        self.offset_index_path = rename(self.offset_index_path)
        self.time_index_path = rename(self.time_index_path)
        self.txn_index.path = rename(self.txn_index.path)
        if self._offset_index is not None:
            self._offset_index.path = self.offset_index_path
        if self._time_index is not None:
            self._time_index.path = self.time_index_path

    def close(self) -> None:
        """Record the final max timestamp, trim the indexes and let the ``.log`` descriptors go
        (slices already handed out keep theirs until they are gone)."""
        if self._closed:
            return
        # An inactive segment got its final time index entry when it stopped being active.
        if self._time_index is not None and self.max_timestamp != NO_TIMESTAMP:
            self._time_index.maybe_append(*self.max_timestamp_and_offset, skip_full_check=True)
        self.release_indexes()
        self._close_files()

    def close_handles(self) -> None:
        """Unmap the indexes and let the ``.log`` descriptors go, without touching anything on disk."""
        for index in (self._offset_index, self._time_index):
            if index is not None:
                index.close_handler()
        self._offset_index = self._time_index = None
        self._close_files()

    def _close_files(self) -> None:
        self._closed = True
        self._file = None
        READERS.discard(self)

    def delete(self) -> None:
        """Close and remove the segment's files."""
        self.close_handles()
        for path in (self.log_path, self.offset_index_path, self.time_index_path, self.txn_index_path):
            path.unlink(missing_ok=True)


def scan_batches(file: _HasFileno, start: int, end: int, path: Path) -> Iterator[BatchPosition]:
    """The batches of the open ``.log`` file ``file`` (held while they are read) from byte
    ``start`` up to ``end``, from their headers, read a chunk at a time."""
    fd = file.fileno()
    buffer = b""
    buffer_start = position = start
    while position < end:
        relative = position - buffer_start
        if relative + RECORD_BATCH_OVERHEAD > len(buffer):
            buffer = os.pread(fd, min(_SCAN_CHUNK, end - position), position)
            buffer_start, relative = position, 0
            if len(buffer) < RECORD_BATCH_OVERHEAD:
                raise _corrupt_at(path, position)
        base_offset, batch_length, leader_epoch, magic, last_offset_delta, max_timestamp = (
            _SCAN_HEADER.unpack_from(buffer, relative)
        )
        size = LOG_OVERHEAD + batch_length
        if magic != MAGIC or batch_length < _MIN_BATCH_LENGTH or position + size > end:
            raise _corrupt_at(path, position)
        yield BatchPosition(position, size, base_offset, base_offset + last_offset_delta, max_timestamp, leader_epoch)
        position += size


def next_offset_in_file(path: Path, base_offset: int) -> int:
    """The offset after the last batch of the ``.log`` file at ``path`` (``base_offset`` if empty)."""
    with open(path, "rb", buffering=0) as file:
        last = None
        for last in scan_batches(file, 0, os.fstat(file.fileno()).st_size, path):
            pass
    return last.last_offset + 1 if last is not None else base_offset


def _corrupt_at(path: Path, position: int) -> KafkaError:
    return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"segment {path} holds no valid batch header at byte {position}")


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
