"""Start-up recovery: torn and corrupt tails, lost or damaged indexes, leftover files, restarts."""
from __future__ import annotations

import logging
import os
import struct
from pathlib import Path

import pytest

from trafka.storage.config import LogConfig
from trafka.storage.log import Log
from trafka.wire.records import iter_batches

CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=200, segment_index_bytes=4096)


def _filled_log(tmp_path: Path, make_batch, batches: int = 30, config: LogConfig = CONFIG) -> Log:
    log = Log.create(tmp_path / "events-0", config, now_ms=0)
    for i in range(batches):
        log.append(make_batch(2, 60, timestamp=1000 + 2 * i), leader_epoch=1 + i // 10)
    return log


def _crash(log: Log) -> None:
    """Drop the log without closing it cleanly: what a killed process leaves behind."""
    for segment in log.segments:
        segment.close_handles()  # unmaps the indexes untrimmed, lets the descriptors go


def _contents(log: Log) -> list[tuple[int, int]]:
    out, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        records = log.read(offset, 10**6).records
        batches = [(b.base_offset, b.last_offset) for b in iter_batches(records.read())]
        out += batches
        offset = batches[-1][1] + 1
    return out


def _expected(batches: int) -> list[tuple[int, int]]:
    return [(2 * i, 2 * i + 1) for i in range(batches)]


def test_restart_after_clean_close_continues_offsets(tmp_path: Path, make_batch) -> None:
    log = _filled_log(tmp_path, make_batch)
    log.flush()
    log.close()
    reopened = Log.open(log.dir, CONFIG, recovery_point=60, had_clean_shutdown=True)
    assert reopened.log_end_offset == 60
    assert reopened.append(make_batch(2), leader_epoch=3).first_offset == 60
    assert _contents(reopened) == _expected(31)
    assert reopened.offset_for_timestamp(1021) == (21, 1021)
    assert reopened.latest_epoch == 3
    reopened.close()


def _index_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "rebuilding the indexes" in r.getMessage()]


@pytest.mark.parametrize("batches", [0, 1, 30])
def test_unclean_restart_reads_untrimmed_indexes_without_rebuilding_them(
    tmp_path: Path, make_batch, caplog: pytest.LogCaptureFixture, batches: int
) -> None:
    log = _filled_log(tmp_path, make_batch, batches=batches)
    active = log.active_segment
    # a crash leaves the active segment's indexes preallocated (their entries, then zeros), or
    # absent while nothing has been indexed
    _crash(log)
    if batches == 30:
        assert active.offset_index_path.stat().st_size == CONFIG.segment_index_bytes
        assert active.time_index_path.stat().st_size == CONFIG.segment_index_bytes // 12 * 12
    else:
        assert not active.offset_index_path.exists() and not active.time_index_path.exists()
    with caplog.at_level(logging.WARNING):
        reopened = Log.open(log.dir, CONFIG, recovery_point=0)
    assert not caplog.records
    assert reopened.log_end_offset == 2 * batches
    assert _contents(reopened) == _expected(batches)
    if batches:
        assert reopened.offset_for_timestamp(1000 + batches) == (batches, 1000 + batches)
    assert reopened.append(make_batch(2), leader_epoch=5).first_offset == 2 * batches
    reopened.close()


def test_unclean_restart_rebuilds_an_untrimmed_index_with_a_bad_entry(tmp_path: Path, make_batch) -> None:
    log = _filled_log(tmp_path, make_batch)
    active = log.active_segment
    entries = active.offset_index.entries
    _crash(log)
    with open(active.offset_index_path, "r+b") as file:  # an entry past the end of the log
        file.seek(entries * 8)
        file.write(struct.pack(">ii", 500, 10**6))
    # the active segment is recovered from its batches, which rebuilds its indexes
    reopened = Log.open(log.dir, CONFIG, recovery_point=0)
    assert reopened.active_segment.offset_index.entries == entries
    assert reopened.active_segment.offset_index.lookup_position(10**6)[1] < active.size
    assert _contents(reopened) == _expected(30)
    reopened.close()


def test_torn_tail_is_truncated(tmp_path: Path, make_batch, caplog: pytest.LogCaptureFixture) -> None:
    log = _filled_log(tmp_path, make_batch)
    active_path = log.active_segment.log_path
    _crash(log)
    size = active_path.stat().st_size
    os.truncate(active_path, size - 10)
    with caplog.at_level(logging.WARNING):
        reopened = Log.open(log.dir, CONFIG, recovery_point=0)
    assert reopened.log_end_offset == 58
    assert _contents(reopened) == _expected(29)
    assert any("truncating" in r.message and "invalid bytes" in r.message for r in caplog.records)
    assert reopened.append(make_batch(2), leader_epoch=3).first_offset == 58
    reopened.close()


def test_flipped_byte_in_last_batch_is_truncated(tmp_path: Path, make_batch) -> None:
    log = _filled_log(tmp_path, make_batch)
    active_path = log.active_segment.log_path
    _crash(log)
    data = bytearray(active_path.read_bytes())
    data[-5] ^= 0x01
    active_path.write_bytes(data)
    reopened = Log.open(log.dir, CONFIG, recovery_point=0)
    assert reopened.log_end_offset == 58
    assert active_path.stat().st_size == reopened.active_segment.size < len(data)
    assert _contents(reopened) == _expected(29)
    reopened.close()


def test_corruption_in_an_earlier_segment_drops_what_follows(tmp_path: Path, make_batch) -> None:
    log = _filled_log(tmp_path, make_batch)
    second = log.segments[1]
    later = [s.log_path for s in log.segments[2:]]
    second_start, second_next = second.base_offset, log.segments[2].base_offset
    _crash(log)
    data = bytearray(second.log_path.read_bytes())
    middle = len(data) // 2
    data[middle] ^= 0xFF
    second.log_path.write_bytes(data)
    reopened = Log.open(log.dir, CONFIG, recovery_point=0)
    assert second_start < reopened.log_end_offset < second_next
    assert not any(path.exists() for path in later)
    assert _contents(reopened) == _expected(reopened.log_end_offset // 2)
    reopened.close()


def test_segments_below_the_recovery_point_are_not_rescanned(tmp_path: Path, make_batch) -> None:
    log = _filled_log(tmp_path, make_batch)
    log.flush()
    first = log.segments[0]
    recovery_point = log.recovery_point
    _crash(log)
    data = bytearray(first.log_path.read_bytes())
    data[-5] ^= 0x01  # damage that only a rescan would notice
    first.log_path.write_bytes(data)
    reopened = Log.open(log.dir, CONFIG, recovery_point=recovery_point)
    assert reopened.log_end_offset == 60
    reopened.close()
    rescanned = Log.open(log.dir, CONFIG, recovery_point=0)
    assert rescanned.log_end_offset < log.segments[1].base_offset
    rescanned.close()


@pytest.mark.parametrize("damage", ["delete_index", "delete_timeindex", "garbage_index", "short_index", "index_past_end"])
def test_missing_or_corrupt_indexes_are_rebuilt(tmp_path: Path, make_batch, damage: str) -> None:
    log = _filled_log(tmp_path, make_batch)
    log.flush()
    segment = log.segments[1]
    offset_index, time_index = segment.offset_index_path, segment.time_index_path
    log.close()
    expected_index = offset_index.read_bytes()
    expected_time_index = time_index.read_bytes()
    assert expected_index and expected_time_index
    if damage == "delete_index":
        offset_index.unlink()
    elif damage == "delete_timeindex":
        time_index.unlink()
    elif damage == "garbage_index":
        offset_index.write_bytes(bytes(range(16)))
    elif damage == "short_index":
        offset_index.write_bytes(expected_index[:-3])
    else:
        time_index.write_bytes(expected_time_index + (10**12).to_bytes(8, "big") + (999).to_bytes(4, "big"))
    reopened = Log.open(log.dir, CONFIG, recovery_point=60, had_clean_shutdown=True)
    assert offset_index.read_bytes() == expected_index
    assert time_index.read_bytes() == expected_time_index
    assert _contents(reopened) == _expected(30)
    assert reopened.offset_for_timestamp(1031) == (31, 1031)
    reopened.close()


def test_leftover_files_are_handled(tmp_path: Path, make_batch) -> None:
    log = _filled_log(tmp_path, make_batch)
    log.flush()
    directory = log.dir
    log.close()
    (directory / "00000000000000000000.log.deleted").write_bytes(b"old")
    (directory / "00000000000000000000.index.deleted").write_bytes(b"old")
    (directory / "00000000000000000010.log.cleaned").write_bytes(b"partial")
    (directory / "recovery.tmp").write_bytes(b"partial")
    (directory / "00000000000000099999.index").write_bytes(b"")  # an index without its log
    reopened = Log.open(directory, CONFIG, recovery_point=60, had_clean_shutdown=True)
    names = {p.name for p in directory.iterdir()}
    assert not any(name.endswith((".deleted", ".cleaned", ".tmp")) for name in names)
    assert "00000000000000099999.index" not in names
    assert _contents(reopened) == _expected(30)
    reopened.close()


def test_swap_files_replace_the_segments_they_cover(tmp_path: Path, make_batch) -> None:
    log = _filled_log(tmp_path, make_batch)
    log.flush()
    first, second = log.segments[0], log.segments[1]
    directory = log.dir
    log.close()
    # a compacted copy of the first segment, renamed .swap but not yet swapped in
    swap = directory / (first.log_path.name + ".swap")
    swap.write_bytes(first.log_path.read_bytes())
    first.log_path.unlink()
    reopened = Log.open(directory, CONFIG, recovery_point=0)
    assert not list(directory.glob("*.swap"))
    assert reopened.segments[0].base_offset == 0
    assert reopened.segments[1].base_offset == second.base_offset
    assert _contents(reopened) == _expected(30)
    reopened.close()


def test_log_end_below_the_log_start_checkpoint_starts_over(tmp_path: Path, make_batch) -> None:
    log = _filled_log(tmp_path, make_batch, batches=3)
    log.close()
    reopened = Log.open(log.dir, CONFIG, log_start_offset=100, recovery_point=0)
    assert reopened.log_start_offset == reopened.log_end_offset == 100
    assert reopened.append(make_batch(1), leader_epoch=0).first_offset == 100
    reopened.close()


def test_producer_state_survives_restarts(tmp_path: Path, make_batch) -> None:
    log = Log.create(tmp_path / "p-0", CONFIG, now_ms=0)
    for sequence in range(0, 40, 2):
        log.append(make_batch(2, 50, producer_id=11, producer_epoch=0, base_sequence=sequence), leader_epoch=0)
    last = log.log_end_offset
    _crash(log)
    reopened = Log.open(log.dir, CONFIG, recovery_point=0)
    retry = reopened.append(make_batch(2, 50, producer_id=11, producer_epoch=0, base_sequence=38), leader_epoch=0)
    assert retry.duplicate and retry.last_offset == last - 1
    reopened.close()
    again = Log.open(log.dir, CONFIG, recovery_point=last, had_clean_shutdown=True)
    assert again.append(make_batch(1, producer_id=11, producer_epoch=0, base_sequence=40), leader_epoch=0).first_offset == last
    again.close()


def test_leader_epochs_not_yet_checkpointed_are_learned_from_the_batches(tmp_path: Path, make_batch) -> None:
    log = _filled_log(tmp_path, make_batch)  # epochs 1, 2, 3 from offsets 0, 20, 40
    _crash(log)
    reopened = Log.open(log.dir, CONFIG, recovery_point=log.recovery_point)
    assert [tuple(entry) for entry in reopened.leader_epoch_cache.entries] == [(1, 0), (2, 20), (3, 40)]
    reopened.close()


def test_unreadable_leader_epoch_checkpoint_is_rebuilt_from_the_batches(tmp_path: Path, make_batch) -> None:
    log = _filled_log(tmp_path, make_batch)
    log.flush()
    log.close()
    (log.dir / "leader-epoch-checkpoint").write_text("garbage")
    reopened = Log.open(log.dir, CONFIG, recovery_point=60, had_clean_shutdown=True)
    assert [tuple(e) for e in reopened.leader_epoch_cache.entries] == [(1, 0), (2, 20), (3, 40)]
    reopened.close()
