"""Offset and time indexes: Kafka's entry format, lookups, truncation, trimming, sanity checks."""
from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trafka.storage.index import CorruptIndexError, OffsetIndex, TimeIndex


def test_offset_index_is_preallocated_and_trimmed_on_close(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    index = OffsetIndex(path, base_offset=100, max_index_bytes=1003)
    assert not path.exists()  # created with the first entry
    assert index.max_entries == 125  # rounded down to whole 8-byte entries
    index.append(105, 4200)
    assert path.stat().st_size == 1000
    index.append(110, 8400)
    index.close()
    assert path.read_bytes() == struct.pack(">iiii", 5, 4200, 10, 8400)


def test_an_index_never_written_to_creates_no_file(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.timeindex"
    index = TimeIndex(path, 0, 1200, log_is_empty=True)
    assert index.lookup(5) == (-1, 0)
    index.resize(600)
    assert index.max_entries == 50
    index.close()
    assert not path.exists()
    reopened = TimeIndex(path, 0, 1200, log_is_empty=True)
    reopened.create_file()  # an empty file, trimmed
    assert path.stat().st_size == 1200
    reopened.close()
    assert path.read_bytes() == b""


def test_offset_index_reopens_with_its_entries(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, 800)
    for i in range(1, 6):
        index.append(i * 10, i * 1000)
    index.close()
    index = OffsetIndex(path, 0, 800)
    assert index.entries == 5
    assert index.last_offset == 50
    assert index.entry(2) == (30, 3000)
    index.close()


def test_offset_index_lookup(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 1000, 4096)
    assert index.lookup(1005) == (1000, 0)
    for relative, position in [(9, 100), (19, 250), (29, 400)]:
        index.append(1000 + relative, position)
    assert index.lookup(999) == (1000, 0)
    assert index.lookup(1008) == (1000, 0)
    assert index.lookup(1009) == (1009, 100)
    assert index.lookup(1018) == (1009, 100)
    assert index.lookup(1019) == (1019, 250)
    assert index.lookup(5000) == (1029, 400)
    assert index.lookup_position(99) == (1000, 0)
    assert index.lookup_position(260) == (1019, 250)
    index.close()


def test_offset_index_rejects_unordered_and_overflowing_offsets(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 10, 16)
    index.append(12, 100)
    with pytest.raises(ValueError):
        index.append(12, 200)
    assert not index.can_append_offset(10 + 2**31)
    assert index.can_append_offset(10 + 2**31 - 1)
    index.append(13, 200)
    assert index.is_full()
    with pytest.raises(ValueError):
        index.append(14, 300)
    index.close()


def test_offset_index_truncate_to(tmp_path: Path) -> None:
    index = OffsetIndex(tmp_path / "x.index", 0, 4096)
    for offset in (10, 20, 30, 40):
        index.append(offset, offset * 10)
    index.truncate_to(31)
    assert index.entries == 3 and index.last_offset == 30
    index.truncate_to(30)
    assert index.entries == 2 and index.last_offset == 20
    index.truncate_to(0)
    assert index.entries == 0 and index.last_offset == 0
    index.append(5, 50)
    assert index.lookup(7) == (5, 50)
    index.close()


def test_offset_index_reset_makes_room_again(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 0, 80)
    index.append(1, 10)
    index.close()
    index = OffsetIndex(path, 0, 80)
    assert index.is_full()
    index.reset()
    assert index.entries == 0 and index.max_entries == 10
    index.close()
    assert path.stat().st_size == 0


def test_offset_index_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    path.write_bytes(struct.pack(">ii", 5, 100) + b"\x00\x00")
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, 4096).sanity_check(log_size=1000)
    path.write_bytes(struct.pack(">iiii", 5, 100, 9, 900))
    OffsetIndex(path, 0, 4096).sanity_check(log_size=1000)
    with pytest.raises(CorruptIndexError, match="outside"):
        OffsetIndex(path, 0, 4096).sanity_check(log_size=800)
    path.write_bytes(struct.pack(">iiii", 0, 0, 5, 100))  # zeros where an entry must be
    with pytest.raises(CorruptIndexError, match="outside"):
        OffsetIndex(path, 0, 4096).sanity_check(log_size=1000)
    path.write_bytes(struct.pack(">ii", -3, 100))
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, 0, 4096).sanity_check(log_size=1000)


def test_time_index_appends_only_larger_timestamps(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000050.timeindex"
    index = TimeIndex(path, 50, 1200)
    assert index.last_entry == (-1, 50)
    index.maybe_append(1000, 52)
    index.maybe_append(1000, 55)  # same timestamp: ignored
    index.maybe_append(2000, 60)
    with pytest.raises(ValueError):
        index.maybe_append(3000, 59)  # offsets never go back
    with pytest.raises(ValueError):
        index.maybe_append(1500, 61)  # timestamps never go back
    assert index.entries == 2
    index.close()
    assert path.read_bytes() == struct.pack(">qiqi", 1000, 2, 2000, 10)


def test_time_index_lookup_and_truncate(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", 0, 1200)
    for timestamp, offset in [(100, 3), (200, 7), (300, 12)]:
        index.maybe_append(timestamp, offset)
    assert index.lookup(99) == (-1, 0)
    assert index.lookup(100) == (100, 3)
    assert index.lookup(250) == (200, 7)
    assert index.lookup(10**12) == (300, 12)
    index.truncate_to(8)
    assert index.last_entry == (200, 7)
    index.truncate_to(7)
    assert index.last_entry == (100, 3)
    index.close()


def test_time_index_keeps_last_slot_for_the_closing_entry(tmp_path: Path) -> None:
    index = TimeIndex(tmp_path / "x.timeindex", 0, 36)
    index.maybe_append(1, 1)
    index.maybe_append(2, 2)
    assert index.is_full()
    with pytest.raises(ValueError):
        index.maybe_append(3, 3)
    index.maybe_append(3, 3, skip_full_check=True)
    assert index.entries == 3
    index.close()


def test_time_index_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / "x.timeindex"
    path.write_bytes(struct.pack(">qiqi", 500, 1, 400, 2))
    with pytest.raises(CorruptIndexError):
        TimeIndex(path, 0, 1200).sanity_check(log_size=100)
    path.write_bytes(struct.pack(">qiqi", 400, 1, 500, 2))
    TimeIndex(path, 0, 1200).sanity_check(log_size=100)
    with pytest.raises(CorruptIndexError, match="empty log"):
        TimeIndex(path, 0, 1200, log_is_empty=True).sanity_check(log_size=0)


def test_a_zero_filled_tail_is_not_entries(tmp_path: Path) -> None:
    """An index file left untrimmed by an unclean shutdown: its entries, then zeros."""
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes(struct.pack(">iiii", 5, 100, 9, 900) + bytes(4096 - 16))
    index = OffsetIndex(path, 100, 4096)
    assert (index.entries, index.last_offset, index.max_entries) == (2, 109, 512)
    index.sanity_check(log_size=1000)
    index.append(120, 1200)
    assert index.lookup(125) == (120, 1200)
    index.close()
    assert path.read_bytes() == struct.pack(">iiiiii", 5, 100, 9, 900, 20, 1200)

    path.write_bytes(bytes(4096))  # nothing was indexed yet
    index = OffsetIndex(path, 100, 4096)
    assert (index.entries, index.last_offset) == (0, 100)
    index.sanity_check(log_size=0)
    index.sanity_check(log_size=300)
    index.close()


def test_a_zero_filled_time_index_tail_is_not_entries(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.timeindex"
    path.write_bytes(struct.pack(">qiqi", 1000, 2, 2000, 7) + bytes(1200 - 24))
    index = TimeIndex(path, 100, 1200)
    assert (index.entries, index.last_entry) == (2, (2000, 107))
    index.sanity_check(log_size=500)
    index.close()
    # An all-zero slot 0 is zero fill when the log is empty, and an entry for timestamp 0 at
    # the base offset when it is not.
    path.write_bytes(bytes(1200))
    index = TimeIndex(path, 100, 1200, log_is_empty=True)
    assert (index.entries, index.last_entry) == (0, (-1, 100))
    index.sanity_check(log_size=0)
    index.close_handler()
    index = TimeIndex(path, 100, 1200)
    assert (index.entries, index.last_entry) == (1, (0, 100))
    index.sanity_check(log_size=500)
    index.close()
    assert path.read_bytes() == bytes(12)
    assert TimeIndex(path, 100, 1200).entries == 1


def test_truncated_entries_are_zeroed(tmp_path: Path) -> None:
    path = tmp_path / "x.index"
    index = OffsetIndex(path, 0, 80)
    for offset in (10, 20, 30):
        index.append(offset, offset * 10)
    index.truncate_to(20)
    index.close_handler()  # not trimmed, as after an unclean shutdown
    assert path.read_bytes() == struct.pack(">ii", 10, 100) + bytes(72)
    index = OffsetIndex(path, 0, 80)
    assert index.entries == 1
    index.reset()
    index.close_handler()
    assert path.read_bytes() == bytes(80)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(1, 10**6), max_size=40, unique=True),
    st.integers(0, 20),
    st.sampled_from([OffsetIndex, TimeIndex]),
)
def test_an_untrimmed_index_reopens_with_its_entries(tmp_path_factory, offsets, spare_slots, index_class) -> None:
    offsets.sort()
    path = tmp_path_factory.mktemp("idx") / "x.index"
    size = (len(offsets) + spare_slots + 1) * index_class.entry_size
    index = index_class(path, 0, size)
    for offset in offsets:
        if index_class is OffsetIndex:
            index.append(offset, offset * 7)
        else:
            index.maybe_append(offset * 3, offset)
    entries = [index.entry(n) for n in range(index.entries)]
    index.close_handler()
    # An empty log's time index is all zero fill; with a batch, a zero slot 0 could be an entry.
    options = {"log_is_empty": not offsets} if index_class is TimeIndex else {}
    reopened = index_class(path, 0, size, **options)
    assert reopened.entries == len(offsets)
    assert [reopened.entry(n) for n in range(reopened.entries)] == entries
    reopened.sanity_check(log_size=10**7)
    reopened.close()


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 1000), min_size=0, max_size=60, unique=True), st.integers(-5, 1100))
def test_offset_index_lookup_matches_a_linear_search(tmp_path_factory, offsets, target) -> None:
    offsets.sort()
    index = OffsetIndex(tmp_path_factory.mktemp("idx") / "x.index", 0, 8 * 64)
    for offset in offsets:
        index.append(offset, offset * 3)
    expected = max(((o, o * 3) for o in offsets if o <= target), default=(0, 0))
    assert index.lookup(target) == expected
    index.close()
