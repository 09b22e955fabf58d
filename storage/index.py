"""Segment indexes in Kafka's on-disk format: offset index, time index, transaction index.

The offset and time indexes are sparse files of fixed-size big-endian entries, sorted,
memory-mapped while open:

* ``.index`` (``OffsetIndex``), 8 bytes per entry: relative offset (int32, offset minus the
  segment's base offset) and the byte position in the ``.log`` file (int32) of the batch whose
  last offset is that offset.
* ``.timeindex`` (``TimeIndex``), 12 bytes per entry: a timestamp (int64) and the relative offset
  (int32) of the batch where the segment's maximum timestamp reached that value.

An entry is added every ``index.interval.bytes`` of log, so a lookup lands on a nearby batch and
the log is scanned forward from there. Like Kafka, a writable index file is preallocated to
``segment.index.bytes`` (rounded down to whole entries) and trimmed to its entries when the
segment stops being active or is closed. Slots past the last entry are kept zero, so the file of
an index that was not closed (an unclean shutdown) is its entries followed by zeros. No entry
after the first is all zeros (an offset index's offsets and a time index's timestamps increase
from one entry to the next, and are never negative), so an index file found on disk holds the
entries before its first all-zero slot after slot 0. Whether an all-zero slot 0 is an entry
depends on the index: never in an offset index, whose entries never point at byte 0; in a time
index, unless the segment's log is empty.

An index file is created when its first entry is written: until then the index is empty and
nothing is mapped, so creating many partitions creates no index files. A mapping keeps no file
descriptor (the file is opened, mapped and closed at once), so indexes do not count against the
process's descriptor limit; each mapped index takes one memory map (``vm.max_map_count``).

Indexes can always be rebuilt from the log, so a file that fails ``sanity_check`` is discarded
and rebuilt by the caller.

The ``.txnindex`` (``TransactionIndex``) lists the aborted transactions whose ABORT markers lie in
the segment, so that Fetch can tell read-committed consumers which records to skip.
"""
from __future__ import annotations

import ctypes
import mmap
import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import NamedTuple

INT32_MAX = 2**31 - 1
NO_TIMESTAMP = -1

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class CorruptIndexError(Exception):
    """An index file is inconsistent with itself or with its segment; rebuild it from the log."""


class _Mapping:
    """A shared, writable mapping of ``length`` bytes of the open file ``fd`` that keeps no
    descriptor of the file: the caller closes ``fd`` right after.

    ``buffer`` holds the bytes (struct ``unpack_from``/``pack_into``, slices, slice assignment);
    ``close`` unmaps them. Python's ``mmap`` keeps a duplicate of the descriptor for as long as
    the map lives unless it is told not to (``trackfd=False``, Python 3.13); before 3.13 the map
    is made with the C library's ``mmap`` and the bytes are a memoryview over it, which ``close``
    releases before unmapping, so that a later access raises ValueError rather than touching
    unmapped memory.
    """

    __slots__ = ("buffer", "_address", "_length", "_array")

    def __init__(self, fd: int, length: int) -> None:
        self._address: int | None = None
        self._length = length
        self._array: ctypes.Array[ctypes.c_char] | None = None
        self.buffer: mmap.mmap | memoryview
        if _TRACKFD:
            mapped = mmap.mmap(fd, length, trackfd=False)  # type: ignore[call-arg]
            if hasattr(mmap, "MADV_RANDOM"):
                mapped.madvise(mmap.MADV_RANDOM)
            self.buffer = mapped
            return
        address = _libc.mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
        if address is None or address == _MAP_FAILED:
            errno = ctypes.get_errno()
            raise OSError(errno, f"cannot map {length} bytes: {os.strerror(errno)}")
        self._address = address
        _libc.madvise(address, length, _MADV_RANDOM)
        self._array = (ctypes.c_char * length).from_address(address)
        self.buffer = memoryview(self._array).cast("B")

    def close(self) -> None:
        if self._address is None:
            self.buffer.close()  # type: ignore[union-attr]
            return
        self.buffer.release()  # type: ignore[union-attr]
        # A view taken from the buffer and still alive holds the array: leave the memory mapped.
        if sys.getrefcount(self._array) > 2:
            return
        self._array = None
        address, self._address = self._address, None
        _libc.munmap(address, self._length)


_TRACKFD = sys.version_info >= (3, 13)
_MADV_RANDOM = getattr(mmap, "MADV_RANDOM", 1)
_MAP_FAILED = ctypes.c_void_p(-1).value
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int64]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.madvise.restype = ctypes.c_int
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def _map(path: Path, length: int, *, create: bool = False) -> _Mapping:
    """Map the first ``length`` bytes of the file at ``path`` (sized to ``length`` first with
    ``create``, which also creates it) and close its descriptor.

    Index pages are touched one at a time (appends, bisection), so the kernel is told not to read
    ahead: without that the first fault on a fresh, mostly sparse index reads ahead up to the
    device's read-ahead window (megabytes of zero-filled page cache per index), which makes the
    first entry of each partition's index cost milliseconds."""
    fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0), 0o644)
    try:
        if create:
            os.ftruncate(fd, length)
        return _Mapping(fd, length)
    finally:
        os.close(fd)


class _MappedIndex:
    """A file of fixed-size sorted entries, memory-mapped, with a count of valid entries.

    A file that does not exist yet reads as an empty index and is created, preallocated, when
    its first entry is written (or ``create_file`` is called): a new partition, or one that is
    never written to, maps nothing and creates no index files.
    """

    entry_size: int
    # Whether an all-zero slot 0 in a file found on disk is an entry rather than zero fill.
    zero_first_entry_is_valid = False

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_index_bytes = max_index_bytes
        # The mapping, and its bytes (``_mmap``, what entries are read from and written to).
        self._mapping: _Mapping | None = None
        self._mmap: mmap.mmap | memoryview | None = None
        self._closed = False
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            # Created (preallocated to ``length``) when the first entry is written.
            if max_index_bytes < self.entry_size:
                raise ValueError(f"invalid max index size {max_index_bytes}") from None
            self.file_exists = False
            self.length = self._round_down(max_index_bytes)
            self.max_entries = self.length // self.entry_size
            self.entries = 0
            return
        try:
            self.length = os.fstat(fd).st_size
            if self.length > 0:
                self._set_mapping(_Mapping(fd, self.length))
        finally:
            os.close(fd)
        self.file_exists = True
        self.max_entries = self.length // self.entry_size
        self.entries = self._entries_before_zero_fill()

    def _set_mapping(self, mapping: _Mapping | None) -> None:
        self._mapping = mapping
        self._mmap = mapping.buffer if mapping is not None else None

    def _unmap(self) -> None:
        mapping = self._mapping
        self._set_mapping(None)
        if mapping is not None:
            mapping.close()

    def _writable_map(self) -> mmap.mmap | memoryview:
        """The bytes entries are written to; creates the file on the first write."""
        if self._mmap is None:
            self._set_mapping(_map(self.path, self.length, create=True))
            self.file_exists = True
        return self._mmap  # type: ignore[return-value]

    def prepare_append(self) -> None:
        """Map the file for entries now (creating it), so that appending one cannot fail later."""
        if self._mmap is None and self.length > 0 and not self._closed:
            self._writable_map()

    def create_file(self) -> None:
        """Make sure the file exists on disk (holding the current entries), even with none."""
        if not self.file_exists:
            if self.length > 0:
                self._set_mapping(_map(self.path, self.length, create=True))
            else:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
                try:
                    os.ftruncate(fd, 0)
                finally:
                    os.close(fd)
            self.file_exists = True

    def _round_down(self, size: int) -> int:
        return size - size % self.entry_size

    def _slot_is_zero(self, slot: int) -> bool:
        start = slot * self.entry_size
        return not any(self._mmap[start : start + self.entry_size])  # type: ignore[index]

    def _entries_before_zero_fill(self) -> int:
        """The entries of a file found on disk: the slots before the first all-zero slot after
        slot 0 (see the module docstring), found by bisection."""
        slots = self.max_entries
        if slots == 0 or not self._slot_is_zero(slots - 1):
            return slots  # a trimmed file: every slot is an entry
        low, high = 1, slots - 1  # the first all-zero slot after slot 0 is in [low, high]
        while low < high:
            middle = (low + high) // 2
            if self._slot_is_zero(middle):
                high = middle
            else:
                low = middle + 1
        if low == 1 and not self.zero_first_entry_is_valid and self._slot_is_zero(0):
            return 0
        return low

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.entry_size

    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def _relative_offset(self, offset: int) -> int:
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise ValueError(f"offset {offset} does not fit an index with base offset {self.base_offset}")
        return relative

    def resize(self, new_size: int) -> bool:
        """Set the file's length (rounded down to whole entries); False if it already had it."""
        new_length = self._round_down(new_size)
        if new_length == self.length:
            return False
        if self.file_exists:  # otherwise the file is created with the new length when written to
            self._unmap()
            os.truncate(self.path, new_length)
            if new_length > 0:
                self._set_mapping(_map(self.path, new_length))
        self.length = new_length
        self.max_entries = new_length // self.entry_size
        self.entries = min(self.entries, self.max_entries)
        return True

    def trim_to_valid_size(self) -> None:
        self.resize(self.size_in_bytes)

    def _truncate_to_entries(self, entries: int) -> None:
        """Keep the first ``entries`` entries; the slots freed are zeroed."""
        if self._mmap is not None and entries < self.entries:
            start, end = entries * self.entry_size, self.entries * self.entry_size
            self._mmap[start:end] = bytes(end - start)
        self.entries = entries

    def reset(self) -> None:
        """Drop every entry and make room for a full index again."""
        self._truncate_to_entries(0)
        self.resize(self.max_index_bytes)

    def close(self) -> None:
        """Trim the file to its entries and unmap it."""
        if not self._closed:
            self.trim_to_valid_size()
            self.close_handler()

    def close_handler(self) -> None:
        """Unmap without trimming."""
        self._closed = True
        self._unmap()

    def _check_length(self) -> None:
        if self.length % self.entry_size != 0:
            raise CorruptIndexError(
                f"index file {self.path} is corrupt: its {self.length} bytes are not a multiple "
                f"of the {self.entry_size}-byte entry size"
            )


class OffsetIndex(_MappedIndex):
    """Maps offsets to byte positions in the segment's ``.log`` file (``.index`` files).

    The first batch of a segment is never indexed (lookups below the first entry start at byte
    0), so no entry points at byte 0 and an all-zero slot is never an entry.
    """

    entry_size = _OFFSET_ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self.last_offset = self._last_entry()[0]
        # Lookups bisect in-memory copies of the two columns, decoded on first use.
        self._relative_offsets: array[int] | None = None
        self._positions: array[int] | None = None

    def _columns(self) -> tuple[array[int], array[int]]:
        if self._relative_offsets is None or self._positions is None:
            flat = array("i")
            if self._mmap is not None:
                flat.frombytes(self._mmap[: self.entries * 8])
            if sys.byteorder == "little":
                flat.byteswap()
            self._relative_offsets, self._positions = flat[0::2], flat[1::2]
        return self._relative_offsets, self._positions

    def _entry(self, slot: int) -> tuple[int, int]:
        relative, position = _OFFSET_ENTRY.unpack_from(self._mmap, slot * 8)  # type: ignore[arg-type]
        return self.base_offset + relative, position

    def _last_entry(self) -> tuple[int, int]:
        return self._entry(self.entries - 1) if self.entries else (self.base_offset, 0)

    def entry(self, n: int) -> tuple[int, int]:
        """The ``n``-th entry as ``(offset, position)``."""
        if not 0 <= n < self.entries:
            raise IndexError(f"entry {n} of index {self.path} with {self.entries} entries")
        return self._entry(n)

    def lookup(self, offset: int) -> tuple[int, int]:
        """``(offset, position)`` of the last entry at or below ``offset``; (base_offset, 0) if none."""
        relative_offsets, positions = self._columns()
        slot = bisect_right(relative_offsets, offset - self.base_offset) - 1
        return (self.base_offset + relative_offsets[slot], positions[slot]) if slot >= 0 else (self.base_offset, 0)

    def lookup_position(self, position: int) -> tuple[int, int]:
        """``(offset, position)`` of the last entry at or below byte ``position``; (base_offset, 0) if none."""
        relative_offsets, positions = self._columns()
        slot = bisect_right(positions, position) - 1
        return (self.base_offset + relative_offsets[slot], positions[slot]) if slot >= 0 else (self.base_offset, 0)

    def upper_bound_offset(self, position: int) -> int | None:
        """The offset of the first entry at or after byte ``position``; None if there is none."""
        relative_offsets, positions = self._columns()
        slot = bisect_left(positions, position)
        return self.base_offset + relative_offsets[slot] if slot < len(positions) else None

    def append(self, offset: int, position: int) -> None:
        if self.is_full():
            raise ValueError(f"attempt to append to the full index {self.path} ({self.entries} entries)")
        if self.entries and offset <= self.last_offset:
            raise ValueError(
                f"attempt to append offset {offset} to index {self.path} at or below its last "
                f"offset {self.last_offset}"
            )
        relative = self._relative_offset(offset)
        _OFFSET_ENTRY.pack_into(self._writable_map(), self.entries * 8, relative, position)
        self.entries += 1
        self.last_offset = offset
        if self._relative_offsets is not None and self._positions is not None:
            self._relative_offsets.append(relative)
            self._positions.append(position)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry for ``offset`` and above."""
        self._truncate_to_entries(bisect_right(self._columns()[0], offset - self.base_offset - 1))

    def _truncate_to_entries(self, entries: int) -> None:
        super()._truncate_to_entries(entries)
        self.last_offset = self._last_entry()[0]
        if self._relative_offsets is not None and self._positions is not None:
            del self._relative_offsets[entries:]
            del self._positions[entries:]

    def resize(self, new_size: int) -> bool:
        resized = super().resize(new_size)
        if resized and self._relative_offsets is not None and len(self._relative_offsets) != self.entries:
            self._relative_offsets = self._positions = None
        return resized

    def sanity_check(self, log_size: int) -> None:
        """Raise ``CorruptIndexError`` unless the index is plausible for a log of ``log_size`` bytes."""
        self._check_length()
        if not self.entries:
            return
        first_offset, first_position = self._entry(0)
        last_offset, last_position = self._entry(self.entries - 1)
        if last_offset < self.base_offset or first_offset < self.base_offset:
            raise CorruptIndexError(
                f"index {self.path} has an offset below its base offset {self.base_offset}"
            )
        if first_position <= 0 or last_position >= log_size:
            raise CorruptIndexError(
                f"index {self.path} has positions [{first_position}, {last_position}] outside "
                f"its {log_size}-byte log"
            )
        if self.entries > 1 and (last_offset <= first_offset or last_position <= first_position):
            raise CorruptIndexError(f"index {self.path} is not sorted")


class TimeIndex(_MappedIndex):
    """Maps timestamps to offsets (``.timeindex`` files).

    Each entry says: up to this offset, the largest timestamp in the segment is this timestamp.
    The last slot is kept free for the final entry written when the segment stops being active.
    ``log_is_empty`` tells a file found on disk that its segment has no batches: an all-zero
    slot 0 is then zero fill, otherwise it is an entry for timestamp 0 at the base offset.
    """

    entry_size = _TIME_ENTRY.size

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int, *, log_is_empty: bool = False) -> None:
        self.zero_first_entry_is_valid = not log_is_empty
        super().__init__(path, base_offset, max_index_bytes)
        self.last_entry = self._last_entry_from_file()

    def _entry(self, slot: int) -> tuple[int, int]:
        timestamp, relative = _TIME_ENTRY.unpack_from(self._mmap, slot * 12)  # type: ignore[arg-type]
        return timestamp, self.base_offset + relative

    def _field(self, slot: int, key: int) -> int:
        return _TIME_ENTRY.unpack_from(self._mmap, slot * 12)[key]  # type: ignore[arg-type]

    def _largest_lower_bound(self, target: int, key: int) -> int:
        """The slot of the last entry whose field ``key`` is <= target, or -1 if none is."""
        lo, hi = 0, self.entries - 1
        if hi < 0 or self._field(0, key) > target:
            return -1
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if self._field(mid, key) <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def _last_entry_from_file(self) -> tuple[int, int]:
        return self._entry(self.entries - 1) if self.entries else (NO_TIMESTAMP, self.base_offset)

    def is_full(self) -> bool:
        return self.entries >= self.max_entries - 1

    def entry(self, n: int) -> tuple[int, int]:
        """The ``n``-th entry as ``(timestamp, offset)``."""
        if not 0 <= n < self.entries:
            raise IndexError(f"entry {n} of time index {self.path} with {self.entries} entries")
        return self._entry(n)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry at or below ``timestamp``; (-1, base_offset) if none."""
        slot = self._largest_lower_bound(timestamp, 0)
        return self._entry(slot) if slot >= 0 else (NO_TIMESTAMP, self.base_offset)

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Add ``(timestamp, offset)`` if ``timestamp`` is larger than the last entry's."""
        if not skip_full_check and self.is_full():
            raise ValueError(f"attempt to append to the full time index {self.path} ({self.entries} entries)")
        last_timestamp, last_offset = self.last_entry
        if self.entries and offset < last_offset:
            raise ValueError(
                f"attempt to append offset {offset} to time index {self.path} below its last "
                f"offset {last_offset}"
            )
        if self.entries and timestamp < last_timestamp:
            raise ValueError(
                f"attempt to append timestamp {timestamp} to time index {self.path} below its "
                f"last timestamp {last_timestamp}"
            )
        if timestamp > last_timestamp:
            if self.entries >= self.max_entries:
                self.resize(self.length + self.entry_size)
            _TIME_ENTRY.pack_into(self._writable_map(), self.entries * 12, timestamp, self._relative_offset(offset))
            self.entries += 1
            self.last_entry = (timestamp, offset)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry for ``offset`` and above."""
        self._truncate_to_entries(self._largest_lower_bound(offset - self.base_offset - 1, 1) + 1)

    def _truncate_to_entries(self, entries: int) -> None:
        super()._truncate_to_entries(entries)
        self.last_entry = self._last_entry_from_file()

    def resize(self, new_size: int) -> bool:
        resized = super().resize(new_size)
        if resized:
            self.last_entry = self._last_entry_from_file()
        return resized

    def sanity_check(self, log_size: int) -> None:
        """Raise ``CorruptIndexError`` unless the index is plausible for a log of ``log_size`` bytes."""
        self._check_length()
        if not self.entries:
            return
        if not log_size:
            raise CorruptIndexError(f"time index {self.path} has {self.entries} entries for an empty log")
        first_timestamp, first_offset = self._entry(0)
        last_timestamp, last_offset = self.last_entry
        if last_timestamp < first_timestamp:
            raise CorruptIndexError(
                f"time index {self.path} ends with timestamp {last_timestamp}, below its first "
                f"timestamp {first_timestamp}"
            )
        if first_offset < self.base_offset or last_offset < first_offset:
            raise CorruptIndexError(
                f"time index {self.path} has offsets [{first_offset}, {last_offset}] that are "
                f"unsorted or below its base offset {self.base_offset}"
            )


_ABORTED_TXN = struct.Struct(">hqqqq")  # version, producer_id, first_offset, last_offset, last_stable_offset
ABORTED_TXN_VERSION = 0


class AbortedTxn(NamedTuple):
    """An aborted transaction: its producer, its offsets (``last_offset`` is the ABORT marker's)
    and the last stable offset right after the marker."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """The aborted transactions whose markers lie in a segment (``.txnindex`` files).

    Kafka's format: 34-byte entries of version (int16, 0), producer id, first offset, last offset
    and last stable offset (int64 each), in the order the markers were written. The file exists
    only once a transaction has been aborted in the segment; it is read on first use.
    """

    entry_size = _ABORTED_TXN.size

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] | None = None

    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                data = b""
            whole = len(data) - len(data) % self.entry_size
            self._entries = [AbortedTxn(*fields[1:]) for fields in _ABORTED_TXN.iter_unpack(data[:whole])]
        return self._entries

    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(
                f"aborted transaction ending at {txn.last_offset} does not follow the last one in "
                f"{self.path}, ending at {entries[-1].last_offset}"
            )
        with open(self.path, "ab") as file:
            file.write(_ABORTED_TXN.pack(ABORTED_TXN_VERSION, *txn))
        entries.append(txn)

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """The aborted transactions overlapping ``[fetch_offset, upper_bound_offset)``, and whether
        the search is complete (no later segment can hold more)."""
        found = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def truncate_to(self, offset: int) -> None:
        """Remove the transactions whose marker is at or after ``offset``."""
        entries = self.entries
        keep = 0
        while keep < len(entries) and entries[keep].last_offset < offset:
            keep += 1
        if keep < len(entries) or (self.path.exists() and self.path.stat().st_size != keep * self.entry_size):
            del entries[keep:]
            if self.path.exists():
                os.truncate(self.path, keep * self.entry_size)

    def sanity_check(self) -> None:
        if self.path.exists():
            size = self.path.stat().st_size
            if size % self.entry_size:
                raise CorruptIndexError(
                    f"transaction index {self.path} is corrupt: its {size} bytes are not a multiple of "
                    f"the {self.entry_size}-byte entry size"
                )
