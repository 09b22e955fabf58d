"""Log compaction (storage.cleaner): the offset map, choosing a log, rewriting segments, tombstones, codecs,
producer state, and crashes at every step of a swap, on real files."""
from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from trafka.storage import files
from trafka.storage.checkpoints import CLEANER_OFFSET_CHECKPOINT, read_offsets_checkpoint
from trafka.storage.cleaner import (
    Cleaner,
    CleanerCheckpoint,
    CleanerConfig,
    CleaningAborted,
    CleaningJob,
    OffsetMap,
    Throttler,
    filthiest_log,
    log_to_clean,
)
from trafka.storage.config import LogConfig
from trafka.storage.log import AppendOrigin, Log
from trafka.wire.compression import Compression
from trafka.wire.errors import ErrorCode, KafkaError, RecordError
from trafka.wire.records import ControlRecordType, SimpleRecord, build_batch, build_control_batch

COMPACT = LogConfig(
    cleanup_policy="compact", segment_bytes=4096, index_interval_bytes=256, segment_index_bytes=4096,
    min_cleanable_dirty_ratio=0.01, file_delete_delay_ms=0,
)
NOW = 1_000_000


def _log(tmp_path: Path, config: LogConfig = COMPACT, name: str = "table-0") -> Log:
    return Log.create(tmp_path / name, config, now_ms=NOW)


def _batch(records, *, compression=Compression.NONE, timestamp=NOW, **kwargs) -> bytearray:
    simple = [SimpleRecord(key=None if k is None else str(k).encode(), value=None if v is None else v.encode(),
                           headers=[("h", b"%d" % i)], timestamp=timestamp + i)
              for i, (k, v) in enumerate(records)]
    return bytearray(build_batch(simple, compression=compression, base_timestamp=timestamp, **kwargs))


def _append(log: Log, records, **kwargs) -> None:
    log.append(_batch(records, **kwargs), leader_epoch=0, now_ms=NOW, origin=AppendOrigin.COORDINATOR)
    log.update_high_watermark(log.log_end_offset)


def _records(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for batch in log.batches_from(log.log_start_offset):
        batch.validate()
        for record in batch.records():
            out.append((record.offset, record.key, record.value))
    return out


def _latest(records) -> dict:
    latest = {}
    for offset, key, value in records:
        latest[key] = (offset, value)
    return latest


def _fill(log: Log, keys: int, rounds: int, *, value: str = "v", **kwargs) -> list:
    """``rounds`` versions of keys 0..keys-1, a few per batch; rolls the log at the end."""
    written = []
    for r in range(rounds):
        for start in range(0, keys, 5):
            batch = [(k, f"{value}{r}-{k}") for k in range(start, min(start + 5, keys))]
            _append(log, batch, **kwargs)
            written += batch
    log.roll(now_ms=NOW)
    log.update_high_watermark(log.log_end_offset)
    return written


def _clean(log: Log, checkpoint: CleanerCheckpoint | None = None, **config) -> object:
    return Cleaner(CleanerConfig(**config)).clean_log(log, checkpoint, now_ms=NOW)


# -- the offset map ----------------------------------------------------------------------------------------

def test_offset_map_holds_the_latest_offset_and_refuses_new_keys_when_full() -> None:
    offset_map = OffsetMap(OffsetMap.ENTRY_BYTES * 4, load_factor=0.75)
    assert offset_map.capacity == 3
    assert offset_map.put(b"a", 1) and offset_map.put(b"b", 2) and offset_map.put(b"a", 5)
    assert offset_map.get(b"a") == 5 and offset_map.get(b"zz") == -1
    assert offset_map.put(b"c", 6)
    assert not offset_map.put(b"d", 7)  # full
    assert offset_map.put(b"b", 8)  # a known key is still updated
    with pytest.raises(ValueError, match="dedupe.buffer.size"):
        OffsetMap(10)


def test_throttler_sleeps_off_what_exceeds_the_rate() -> None:
    now = [0.0]
    slept = []
    throttler = Throttler(1000, check_interval_s=0.1, clock=lambda: now[0], sleep=slept.append)
    throttler.maybe_throttle(50)
    now[0] = 0.1
    throttler.maybe_throttle(450)  # 500 bytes in 0.1 s at 1000 B/s: 0.4 s too fast
    assert slept == [pytest.approx(0.4)]
    assert Throttler(float("inf")).unlimited


# -- choosing ----------------------------------------------------------------------------------------------

def test_the_cleanable_section_stops_at_the_active_segment_and_the_high_watermark(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _fill(log, 10, 6)
    _append(log, [(1, "active")])
    to_clean = log_to_clean(log, None, NOW)
    assert to_clean.first_dirty_offset == 0
    assert to_clean.first_uncleanable_offset == log.active_segment.base_offset
    assert to_clean.cleanable_ratio > 0.9
    log.update_high_watermark(20)
    assert log_to_clean(log, None, NOW).first_uncleanable_offset == 20
    assert log_to_clean(log, 10**9, NOW).first_dirty_offset == 0  # a checkpoint past the end is reset


def test_filthiest_log_follows_the_ratio_and_the_compaction_lags(tmp_path: Path) -> None:
    quiet = _log(tmp_path, name="quiet-0")
    busy = _log(tmp_path, name="busy-0")
    plain = _log(tmp_path, LogConfig(segment_bytes=4096), name="plain-0")
    for log in (quiet, busy, plain):
        _fill(log, 10, 5)
    _append(busy, [(1, "x")])
    checkpoints = {("quiet", 0): quiet.active_segment.base_offset}
    assert filthiest_log([quiet, busy, plain], checkpoints, NOW).log is busy
    assert filthiest_log([quiet, plain], checkpoints, NOW) is None
    # min.compaction.lag.ms: segments holding records younger than the lag stay dirty
    busy.update_config(LogConfig.from_properties({"min.compaction.lag.ms": "10000"}, busy.config))
    assert filthiest_log([busy], {}, NOW + 5000) is None
    assert filthiest_log([busy], {}, NOW + 60_000) is not None
    # max.compaction.lag.ms: a log whose ratio is too low is cleaned once its oldest dirty record is too old
    busy.update_config(LogConfig.from_properties(
        {"min.compaction.lag.ms": "0", "min.cleanable.dirty.ratio": "0.99", "max.compaction.lag.ms": "1000"},
        busy.config))
    assert filthiest_log([busy], {("busy", 0): 10}, NOW) is None
    chosen = filthiest_log([busy], {("busy", 0): 10}, NOW + 10_000)
    assert chosen is not None and chosen.need_compaction_now


# -- cleaning ----------------------------------------------------------------------------------------------

def test_cleaning_keeps_the_latest_record_per_key_with_its_offset(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _fill(log, 20, 8)
    before = _records(log)
    size_before = log.size_in_bytes
    checkpoint = CleanerCheckpoint(tmp_path)
    stats = _clean(log, checkpoint)
    after = _records(log)
    assert stats is not None and stats.records_retained == 20
    assert after == sorted(_latest(before)[k][0:1] + (k, _latest(before)[k][1]) for k in _latest(before))
    assert [r[0] for r in after] == sorted(r[0] for r in after)
    assert log.size_in_bytes < size_before / 4
    assert log.log_end_offset == len(before) and log.log_start_offset == 0
    assert read_offsets_checkpoint(tmp_path / CLEANER_OFFSET_CHECKPOINT) == {("table", 0): len(before)}
    # headers and timestamps are kept, batch by batch
    for batch in log.batches_from(0):
        for record in batch.records():
            assert record.headers[0][0] == "h"
            assert record.timestamp >= NOW
    # the old segments went through .deleted; after the delay, nothing but the log's files remain
    log.remove_deleted_segments(NOW + 1)
    assert not [p for p in log.dir.iterdir() if p.name.endswith((".deleted", ".cleaned", ".swap"))]
    # a reload sees the same
    log.close()
    reopened = Log.open(log.dir, COMPACT, had_clean_shutdown=True, now_ms=NOW)
    assert _records(reopened) == after
    reopened.close()


def test_cleaning_twice_dedupes_the_clean_section_against_new_data(tmp_path: Path) -> None:
    log = _log(tmp_path)
    checkpoint = CleanerCheckpoint(tmp_path)
    _fill(log, 10, 3)
    _clean(log, checkpoint)
    _fill(log, 10, 2, value="w")
    assert _clean(log, checkpoint) is not None
    after = _records(log)
    assert [value for _, _, value in after] == [b"w1-%d" % k for k in range(10)]
    assert _clean(log, checkpoint) is None  # nothing dirty


def test_untouched_batches_keep_their_bytes(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _append(log, [(1, "a"), (2, "b")])
    _append(log, [(3, "c"), (4, "d")])  # never superseded
    _append(log, [(1, "a2")])
    log.roll(now_ms=NOW)
    kept = bytes(next(b for b in log.batches_from(2) if b.base_offset == 2).raw())
    _clean(log)
    batches = list(log.batches_from(0))
    assert bytes(batches[1].raw()) == kept
    # the first batch lost a record: rewritten, with its base offset and last offset delta
    assert (batches[0].base_offset, batches[0].last_offset, batches[0].record_count) == (0, 1, 1)
    assert [(r.offset, r.key) for r in batches[0].records()] == [(1, b"2")]


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD])
def test_rewritten_batches_keep_their_codec(tmp_path: Path, codec: Compression) -> None:
    log = _log(tmp_path)
    _fill(log, 10, 4, compression=codec)
    before = _latest(_records(log))
    _clean(log)
    batches = list(log.batches_from(0))
    assert batches and all(batch.compression is codec for batch in batches)
    assert _latest(_records(log)) == before
    assert len(_records(log)) == 10


def test_log_append_time_batches_keep_their_timestamp(tmp_path: Path) -> None:
    config = LogConfig.from_properties({"message.timestamp.type": "LogAppendTime"}, COMPACT)
    log = _log(tmp_path, config)
    log.append(_batch([(1, "a"), (2, "b")]), leader_epoch=0, now_ms=NOW + 5)
    log.append(_batch([(1, "c")]), leader_epoch=0, now_ms=NOW + 6)
    log.roll(now_ms=NOW)
    log.update_high_watermark(log.log_end_offset)
    _clean(log)
    first = next(iter(log.batches_from(0)))
    assert first.max_timestamp == NOW + 5 and [r.timestamp for r in first.records()] == [NOW + 5]


def test_tombstones_delete_their_key_and_go_after_delete_retention(tmp_path: Path) -> None:
    config = LogConfig.from_properties({"delete.retention.ms": "1000"}, COMPACT)
    log = _log(tmp_path, config)
    checkpoint = CleanerCheckpoint(tmp_path)
    _fill(log, 6, 2)
    _append(log, [(0, None), (1, None), (2, "live")], timestamp=NOW + 50)
    log.roll(now_ms=NOW)
    Cleaner().clean_log(log, checkpoint, now_ms=NOW)
    records = _records(log)
    assert {key: value for _, key, value in records} == {
        b"0": None, b"1": None, b"2": b"live", b"3": b"v1-3", b"4": b"v1-4", b"5": b"v1-5"}
    # the tombstones' batch now carries its delete horizon; every record keeps its timestamp
    stamped = [batch for batch in log.batches_from(0) if batch.delete_horizon_ms is not None]
    assert len(stamped) == 1 and stamped[0].delete_horizon_ms == NOW + 1000
    assert [r.timestamp for r in stamped[0].records()] == [NOW + 50, NOW + 51, NOW + 52]
    # before the horizon, another cleaning keeps them
    _append(log, [(9, "filler")])
    log.roll(now_ms=NOW)
    Cleaner().clean_log(log, checkpoint, now_ms=NOW + 999)
    assert (b"0", None) in [(key, value) for _, key, value in _records(log)]
    # after it, they go
    _append(log, [(9, "filler2")])
    log.roll(now_ms=NOW)
    Cleaner().clean_log(log, checkpoint, now_ms=NOW + 1001)
    records = _records(log)
    assert sorted(key for _, key, _ in records) == [b"%d" % k for k in (2, 3, 4, 5, 9)]
    assert all(value is not None for _, _, value in records)
    assert [r.timestamp for r in next(b for b in log.batches_from(0) if b.record_count and
                                      any(r.key == b"2" for r in b.records())).records()] == [NOW + 52]


def test_dedupe_buffer_too_small_cleans_in_several_passes(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _fill(log, 40, 4)
    before = _latest(_records(log))
    checkpoint = CleanerCheckpoint(tmp_path)
    cleaner = Cleaner(CleanerConfig(dedupe_buffer_size=OffsetMap.ENTRY_BYTES * 12, io_buffer_load_factor=0.9))
    passes = 0
    while cleaner.clean_log(log, checkpoint, now_ms=NOW) is not None:
        passes += 1
        first_dirty = checkpoint.offsets[("table", 0)]
        assert _latest(_records(log)) == before  # never anything but superseded records gone
        assert passes < 50
        if first_dirty >= log.active_segment.base_offset:
            break
    assert passes > 3
    assert checkpoint.offsets[("table", 0)] == log.active_segment.base_offset
    _clean(log)  # one full pass with a large map finishes the job
    assert len(_records(log)) == 40


def test_a_producers_last_batch_stays_as_an_empty_batch(tmp_path: Path) -> None:
    log = _log(tmp_path)
    producer = dict(producer_id=7, producer_epoch=0)
    log.append(_batch([(1, "a"), (2, "b")], base_sequence=0, **producer), leader_epoch=0, now_ms=NOW)
    log.append(_batch([(3, "c")], base_sequence=2, **producer), leader_epoch=0, now_ms=NOW)  # its last batch
    _append(log, [(1, "x"), (2, "y"), (3, "z")])
    log.roll(now_ms=NOW)
    log.update_high_watermark(log.log_end_offset)
    _clean(log)
    batches = list(log.batches_from(0))
    # the producer's first batch went entirely; its last one stays, empty, with its offsets and sequence
    empty = batches[0]
    assert (empty.base_offset, empty.last_offset, empty.record_count) == (2, 2, 0)
    assert (empty.producer_id, empty.base_sequence, empty.last_sequence) == (7, 2, 2)
    empty.validate()
    assert [r[1:] for r in _records(log)] == [(b"1", b"x"), (b"2", b"y"), (b"3", b"z")]
    # a reload rebuilds the producer's sequence from it
    log.close()
    for snapshot in log.dir.glob("*.snapshot"):
        snapshot.unlink()
    reopened = Log.open(log.dir, COMPACT, had_clean_shutdown=True, now_ms=NOW)
    assert reopened.producer_state.last_entry(7).last_sequence == 2
    reopened.close()


def test_control_batches_are_kept_and_aborted_data_goes(tmp_path: Path) -> None:
    log = _log(tmp_path)
    txn = dict(producer_id=9, producer_epoch=0, is_transactional=True)
    _append(log, [(1, "committed")])
    log.append(_batch([(1, "aborted")], base_sequence=0, **txn), leader_epoch=0, now_ms=NOW)
    log.append(bytearray(build_control_batch(ControlRecordType.ABORT, 9, 0, 0, timestamp=NOW)),
               leader_epoch=0, now_ms=NOW, origin=AppendOrigin.COORDINATOR)
    _append(log, [(2, "other")])
    log.roll(now_ms=NOW)
    log.update_high_watermark(log.log_end_offset)
    _clean(log)
    batches = list(log.batches_from(0))
    assert any(batch.is_control for batch in batches)
    values = {key: value for _, key, value in _records(log) if key is not None and not key.startswith(b"\x00")}
    assert values[b"1"] == b"committed"  # the aborted value neither shadows it nor survives


def test_keyless_records_are_refused_by_a_compacted_log_only(tmp_path: Path) -> None:
    log = _log(tmp_path)
    with pytest.raises(KafkaError) as e:
        log.append(_batch([("a", "1"), (None, "2")], compression=Compression.LZ4), leader_epoch=0, now_ms=NOW)
    assert e.value.code == ErrorCode.INVALID_RECORD
    reason = "Compacted topic cannot accept message without key in topic partition table-0"
    assert e.value.record_errors == (RecordError(1, reason),)
    assert e.value.message == ("One or more records have been rejected due to 1 record errors in total, and only "
                               f"showing the first three errors at most: [RecordError(batchIndex=1, message='{reason}')]")
    assert log.log_end_offset == 0
    plain = _log(tmp_path, LogConfig(), name="plain-0")
    plain.append(_batch([(None, "2")]), leader_epoch=0, now_ms=NOW)
    assert plain.log_end_offset == 1


def test_groups_respect_segment_bytes(tmp_path: Path) -> None:
    config = LogConfig.from_properties({"segment.bytes": "2048"}, COMPACT)
    log = _log(tmp_path, config)
    for i in range(60):
        _append(log, [(i, "x" * 50)])  # distinct keys: nothing shrinks
    log.roll(now_ms=NOW)
    log.update_high_watermark(log.log_end_offset)
    to_clean = log_to_clean(log, None, NOW)
    job = CleaningJob.prepare(to_clean, CleanerConfig(), now_ms=NOW)
    job.build_offset_map(OffsetMap(10**6))
    groups = job.groups()
    assert all(sum(s.size for s in group) <= 2048 for group in groups)
    assert [s.base_offset for group in groups for s in group] == [s.base_offset for s in log.segments[:-1]]


def test_a_swap_is_refused_when_the_log_changed_meanwhile(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _fill(log, 10, 6)
    job = CleaningJob.prepare(log_to_clean(log, None, NOW), CleanerConfig(), now_ms=NOW)
    job.build_offset_map(OffsetMap(10**6))
    group = job.groups()[0]
    cleaned = job.clean_group(group)
    log.delete_records_before(log.segments[1].base_offset, now_ms=NOW)  # the first segment goes meanwhile
    with pytest.raises(CleaningAborted):
        job.swap(cleaned, now_ms=NOW)
    assert not list(log.dir.glob("*.cleaned"))


def test_reads_handed_out_before_a_swap_stay_valid(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _fill(log, 10, 6)
    first = log.read(0, 100_000).records
    data_before = first.read()
    _clean(log)  # file.delete.delay.ms is 0 here
    log.remove_deleted_segments(NOW + 10)
    assert first.read() == data_before


# -- crashes ---------------------------------------------------------------------------------------------

class _Crash(Exception):
    pass


def _build_dirty_log(tmp_path: Path) -> tuple[Log, list]:
    log = _log(tmp_path)
    rng = random.Random(5)
    for r in range(100):
        batch = [(rng.randrange(25), None if rng.random() < 0.1 else f"v{r}-{i}") for i in range(4)]
        _append(log, batch, compression=[Compression.NONE, Compression.GZIP][r % 2])
    log.roll(now_ms=NOW)
    log.update_high_watermark(log.log_end_offset)
    return log, _records(log)


def _check_consistent(before: list, after: list, cleaned: list) -> None:
    """Only superseded records may be gone: what remains is a subset of what was there, holds everything
    the full cleaning kept, and every key still reads as its latest value."""
    assert [r[0] for r in after] == sorted({r[0] for r in after})
    assert set(after) <= set(before)
    assert set(cleaned) <= set(after)
    assert _latest(after) == _latest(before)


def test_a_crash_at_any_step_of_cleaning_leaves_a_consistent_log(tmp_path: Path, monkeypatch) -> None:
    """A kill at each fsync and rename of a cleaning (writing the cleaned files, the swap, the
    checkpoint), then a reload: only superseded records may be gone, and cleaning again finishes."""
    reference_log, before = _build_dirty_log(tmp_path / "reference")
    _clean(reference_log)
    cleaned = _records(reference_log)
    reference_log.close()
    real_replace, real_fsync = os.replace, os.fsync
    crash_at = 0
    while True:
        directory = tmp_path / f"crash-{crash_at}"
        log, before = _build_dirty_log(directory)
        calls = [0]

        def step(real):
            def wrapper(*args, **kwargs):
                calls[0] += 1
                if calls[0] == crash_at + 1:
                    raise _Crash()
                return real(*args, **kwargs)
            return wrapper

        monkeypatch.setattr(os, "replace", step(real_replace))
        monkeypatch.setattr(os, "fsync", step(real_fsync))
        try:
            Cleaner(CleanerConfig()).clean_log(log, CleanerCheckpoint(directory), now_ms=NOW)
        except _Crash:
            crashed = True
        else:
            crashed = False
        finally:
            monkeypatch.undo()
        if not crashed:
            break
        log.close_handles()  # a kill: nothing flushed, closed or renamed any more
        reopened = Log.open(log.dir, COMPACT, had_clean_shutdown=False, now_ms=NOW)
        after = _records(reopened)
        _check_consistent(before, after, cleaned)
        names = [p.name for p in reopened.dir.iterdir()]
        assert not [n for n in names if n.endswith((".cleaned", ".swap", ".deleted"))], crash_at
        reopened.update_high_watermark(reopened.log_end_offset)
        Cleaner(CleanerConfig()).clean_log(reopened, None, now_ms=NOW)
        assert _records(reopened) == cleaned, crash_at
        reopened.close()
        crash_at += 1
    assert crash_at > 30  # every step of a multi-group cleaning was tried


def test_each_leftover_state_of_a_swap_is_completed_or_rolled_back(tmp_path: Path) -> None:
    """The states a kill can leave between the renames of ``replace_segments``, made by hand."""
    for state in ("cleaned", "half-swap", "swap", "swap+deleted", "final+deleted"):
        base = tmp_path / state
        log, before = _build_dirty_log(base)
        job = CleaningJob.prepare(log_to_clean(log, None, NOW), CleanerConfig(), now_ms=NOW)
        job.build_offset_map(OffsetMap(10**6))
        group = job.groups()[0]
        cleaned_segment = job.clean_group(group)
        directory, offset = log.dir, cleaned_segment.base_offset
        log.close_handles()
        names = (files.offset_index_file, files.time_index_file, files.txn_index_file, files.log_file)
        if state != "cleaned":
            for name in names[: 2 if state == "half-swap" else 4]:
                if name(directory, offset, ".cleaned").exists():
                    os.replace(name(directory, offset, ".cleaned"), name(directory, offset, ".swap"))
        if state in ("swap+deleted", "final+deleted"):
            for source in group[: max(1, len(group) - 1)]:
                for name in names:
                    path = name(directory, source.base_offset)
                    if path.exists():
                        os.replace(path, name(directory, source.base_offset, ".deleted"))
        if state == "final+deleted":
            for name in names:
                if name(directory, offset, ".swap").exists():
                    os.replace(name(directory, offset, ".swap"), name(directory, offset))
            for source in group[max(1, len(group) - 1):]:
                for name in names:
                    name(directory, source.base_offset).unlink(missing_ok=True)
        reopened = Log.open(directory, COMPACT, had_clean_shutdown=False, now_ms=NOW)
        after = _records(reopened)
        assert [r[0] for r in after] == sorted({r[0] for r in after}), state
        assert set(after) <= set(before), state
        assert _latest(after) == _latest(before), state
        if state in ("cleaned", "half-swap"):
            assert after == before, state
        reopened.close()
