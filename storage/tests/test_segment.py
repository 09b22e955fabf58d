"""LogSegment: appends and their index entries, header scans, slices, timestamps, recovery."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from trafka.storage.config import LogConfig
from trafka.storage.segment import AppendedBatch, LogSegment
from trafka.wire.errors import KafkaError
from trafka.wire.records import RECORD_BATCH_OVERHEAD, RecordBatch, iter_batches, set_base_offset

CONFIG = LogConfig(index_interval_bytes=300, segment_index_bytes=4096)


def _segment(tmp_path: Path, base_offset: int = 0, config: LogConfig = CONFIG) -> LogSegment:
    directory = tmp_path / "t-0"
    directory.mkdir(exist_ok=True)
    return LogSegment(directory, base_offset, config, now_ms=0)


def _append(segment: LogSegment, batch: bytearray, base_offset: int) -> AppendedBatch:
    set_base_offset(batch, 0, base_offset)
    view = RecordBatch(batch)
    appended = AppendedBatch(view.size, view.last_offset, view.max_timestamp)
    segment.append(batch, [appended])
    return appended


def _fill(segment: LogSegment, make_batch, batches: int, *, records: int = 2, start: int | None = None) -> list[int]:
    """Append ``batches`` batches of ``records`` records; returns each batch's base offset."""
    offset = segment.base_offset if start is None else start
    bases = []
    for i in range(batches):
        _append(segment, make_batch(records, 50, timestamp=10_000 + offset), offset)
        bases.append(offset)
        offset += records
    return bases


def test_new_segment_creates_its_files_with_kafka_names(tmp_path: Path, make_batch) -> None:
    segment = _segment(tmp_path, 1234)
    directory = tmp_path / "t-0"
    # the index files come with the first index entry, or when a segment with data is closed
    assert sorted(p.name for p in directory.iterdir()) == ["00000000000000001234.log"]
    assert segment.read_next_offset() == 1234
    _fill(segment, make_batch, 1)
    segment.close()
    assert sorted(p.name for p in directory.iterdir()) == [
        "00000000000000001234.index",
        "00000000000000001234.log",
        "00000000000000001234.timeindex",
    ]


def test_an_empty_segment_closes_without_index_files(tmp_path: Path) -> None:
    segment = _segment(tmp_path, 0)
    segment.close()
    reopened = _segment(tmp_path, 0)
    reopened.sanity_check()  # no index files are needed for an empty log
    assert sorted(p.name for p in (tmp_path / "t-0").iterdir()) == ["00000000000000000000.log"]
    reopened.close()


def test_append_writes_bytes_as_given_and_indexes_every_interval(tmp_path: Path, make_batch) -> None:
    segment = _segment(tmp_path, 100)
    bases = _fill(segment, make_batch, 10)
    batch_size = segment.size // 10
    raw = (tmp_path / "t-0" / "00000000000000000100.log").read_bytes()
    assert len(raw) == segment.size
    assert [b.base_offset for b in iter_batches(raw)] == bases
    # an entry for the first batch appended after more than index_interval_bytes
    entries = [segment.offset_index.entry(i) for i in range(segment.offset_index.entries)]
    assert entries
    for offset, position in entries:
        assert position % batch_size == 0
        assert offset == bases[position // batch_size] + 1  # the batch's last offset
    gaps = [b[1] - a[1] for a, b in zip(entries, entries[1:])]
    assert all(gap > CONFIG.index_interval_bytes for gap in gaps)
    assert segment.read_next_offset() == 120
    segment.close()


def test_translate_offset_finds_the_batch_holding_an_offset(tmp_path: Path, make_batch) -> None:
    segment = _segment(tmp_path)
    _fill(segment, make_batch, 20, records=3)
    for offset in range(60):
        batch = segment.translate_offset(offset)
        assert batch.base_offset <= offset <= batch.last_offset
        assert batch.base_offset == offset - offset % 3
    assert segment.translate_offset(60) is None
    segment.close()


def test_slice_from_returns_whole_batches_within_max_bytes(tmp_path: Path, make_batch) -> None:
    segment = _segment(tmp_path)
    _fill(segment, make_batch, 30)
    batch_size = segment.size // 30
    first = segment.translate_offset(7)
    for max_bytes in (batch_size, batch_size + 1, 5 * batch_size - 1, 5 * batch_size, 17 * batch_size + 3):
        records = segment.slice_from(first, max_bytes)
        assert records.position == first.position
        assert records.size == (max_bytes // batch_size) * batch_size
    assert segment.slice_from(first, 10**9).size == segment.size - first.position
    # smaller than one batch: the whole first batch, or nothing
    assert segment.slice_from(first, 10).size == batch_size
    assert segment.slice_from(first, 10, min_one_batch=False) is None
    # bounded by a position
    bound = segment.position_bound(15)  # batch 14-15 holds 15: it is included
    assert segment.slice_from(first, 10**9, end_position=bound).size == 5 * batch_size  # 6-7 to 14-15
    assert segment.position_bound(16) == bound
    assert segment.position_bound(10**6) == segment.size
    segment.close()


def test_time_index_tracks_max_timestamp_and_search(tmp_path: Path, make_batch) -> None:
    segment = _segment(tmp_path)
    offset = 0
    for i in range(12):
        # timestamps go up and down inside and across batches
        stamps = [5000 + 100 * i, 5000 + 100 * i + 50, 4000]
        _append(segment, make_batch(3, 100, timestamps=stamps), offset)
        offset += 3
    assert segment.max_timestamp_and_offset == (5000 + 1100 + 50, 35)
    assert segment.time_index.entries > 0
    assert segment.find_offset_by_timestamp(5120, 0) == (4, 5150)
    assert segment.find_offset_by_timestamp(5200, 0) == (6, 5200)
    assert segment.find_offset_by_timestamp(0, 0) == (0, 5000)
    assert segment.find_offset_by_timestamp(0, 10) == (10, 5350)
    assert segment.find_offset_by_timestamp(99_999, 0) is None
    assert segment.offset_of_max_timestamp() == (34, 6150)
    segment.close()


def test_on_become_inactive_records_the_final_entry_and_trims(tmp_path: Path, make_batch) -> None:
    segment = _segment(tmp_path)
    _fill(segment, make_batch, 3)
    segment.on_become_inactive()
    assert segment.time_index.last_entry == (10_005, 5)
    assert segment.offset_index_path.stat().st_size == 8 * segment.offset_index.entries
    assert segment.time_index_path.stat().st_size == 12 * segment.time_index.entries
    segment.close()


def test_should_roll(tmp_path: Path, make_batch) -> None:
    config = LogConfig(segment_bytes=1000, segment_ms=60_000, index_interval_bytes=300)
    segment = _segment(tmp_path, 0, config)

    def should_roll(size: int = 100, timestamp: int = 10_000, offset: int = 10, now: int = 0) -> bool:
        return segment.should_roll(
            config, messages_size=size, max_timestamp_in_messages=timestamp,
            max_offset_in_messages=offset, now_ms=now,
        )

    assert not should_roll(size=1000)  # an empty segment takes even a full-size append
    _append(segment, make_batch(1, 100, timestamp=10_000), 0)
    assert not should_roll()
    assert should_roll(size=1000 - segment.size + 1)
    assert not should_roll(timestamp=10_000 + 60_000)
    assert should_roll(timestamp=10_000 + 60_001)  # measured from the first batch's timestamp
    assert should_roll(offset=2**31)  # the relative offset would overflow
    segment.close()


def test_truncate_to(tmp_path: Path, make_batch) -> None:
    segment = _segment(tmp_path)
    _fill(segment, make_batch, 20)
    batch_size = segment.size // 20
    assert segment.truncate_to(21) == 10 * batch_size  # the batch holding 21 (20-21) goes too
    assert segment.read_next_offset() == 20
    assert segment.offset_index.last_offset < 20
    assert segment.max_timestamp_and_offset == (10_019, 19)
    _append(segment, make_batch(2, 50, timestamp=10_020), 20)
    assert segment.read_next_offset() == 22
    segment.close()


def test_recover_rebuilds_indexes_and_truncates_a_torn_tail(tmp_path: Path, make_batch) -> None:
    segment = _segment(tmp_path)
    _fill(segment, make_batch, 20)
    size = segment.size
    entries = [segment.offset_index.entry(i) for i in range(segment.offset_index.entries)]
    time_entries = [segment.time_index.entry(i) for i in range(segment.time_index.entries)]
    os.ftruncate(segment.file.fileno(), size - 7)
    segment.size = size - 7
    seen = []
    assert segment.recover(lambda batch: seen.append(batch.base_offset)) == size // 20 - 7
    assert seen == list(range(0, 38, 2))
    assert segment.size == size // 20 * 19
    assert [segment.offset_index.entry(i) for i in range(segment.offset_index.entries)] == [
        e for e in entries if e[1] < segment.size
    ]
    expected_time_entries = sorted({e for e in time_entries if e[1] < 38} | {(10_037, 37)})
    assert [segment.time_index.entry(i) for i in range(segment.time_index.entries)] == expected_time_entries
    segment.close()


def test_recover_reads_batches_larger_than_its_read_chunk(tmp_path: Path, make_batch) -> None:
    segment = _segment(tmp_path)
    _append(segment, make_batch(1, 100), 0)
    _append(segment, make_batch(3, 700_000), 1)
    _append(segment, make_batch(1, 100), 4)
    size = segment.size
    assert segment.recover() == 0
    assert segment.size == size
    assert [b.base_offset for _, b in segment.record_batches()] == [0, 1, 4]
    segment.close()


def test_record_batches_report_a_garbled_header(tmp_path: Path, make_batch) -> None:
    segment = _segment(tmp_path)
    _fill(segment, make_batch, 2)
    garbage = bytes(RECORD_BATCH_OVERHEAD)  # a batch length of 0
    os.write(segment.file.fd, garbage)
    segment.size += len(garbage)
    with pytest.raises(KafkaError, match=f"no valid batch header at byte {segment.size - len(garbage)}"):
        list(segment.record_batches())
    segment.close()


def test_segment_reopened_after_a_crash_keeps_its_index_entries(tmp_path: Path, make_batch) -> None:
    segment = _segment(tmp_path)
    _fill(segment, make_batch, 40)
    offset_entries = [segment.offset_index.entry(n) for n in range(segment.offset_index.entries)]
    time_entries = [segment.time_index.entry(n) for n in range(segment.time_index.entries)]
    assert offset_entries and time_entries
    segment.close_handles()  # the preallocated indexes stay untrimmed
    reopened = _segment(tmp_path)
    reopened.sanity_check()
    assert [reopened.offset_index.entry(n) for n in range(reopened.offset_index.entries)] == offset_entries
    assert [reopened.time_index.entry(n) for n in range(reopened.time_index.entries)] == time_entries
    reopened.close()
