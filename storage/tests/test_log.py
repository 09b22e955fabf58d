"""Log: appends (validation, offsets, idempotence, all-or-nothing), reads, timestamps, deletion."""
from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trafka.storage.config import LogConfig
from trafka.storage.log import AppendOrigin, Log
from trafka.wire.compression import Compression
from trafka.wire.errors import ErrorCode, KafkaError, RecordError
from trafka.wire.records import RecordBatch, SimpleRecord, TimestampType, build_batch, iter_batches

SMALL = LogConfig(segment_bytes=2048, index_interval_bytes=256, segment_index_bytes=4096)


def _log(tmp_path: Path, config: LogConfig = SMALL, name: str = "orders-0") -> Log:
    return Log.create(tmp_path / name, config, now_ms=0)


def _offsets(data: bytes) -> list[tuple[int, int]]:
    return [(batch.base_offset, batch.last_offset) for batch in iter_batches(data)]


def _read_all(log: Log, max_bytes: int = 10_000) -> list[tuple[int, int]]:
    """Every batch from the log start, following offsets as a consumer does."""
    seen, offset = [], log.log_start_offset
    while offset < log.log_end_offset:
        records = log.read(offset, max_bytes).records
        assert records is not None
        batches = _offsets(records.read())
        seen += batches
        offset = batches[-1][1] + 1
    return seen


def _dir_digest(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


def _error(call) -> ErrorCode:
    with pytest.raises(KafkaError) as e:
        call()
    return e.value.code


def test_append_assigns_offsets_and_reads_back_across_rolls(tmp_path: Path, make_batch) -> None:
    log = _log(tmp_path)
    expected = []
    for i in range(40):
        info = log.append(make_batch(1 + i % 4, 30 + i), leader_epoch=3, now_ms=1)
        expected.append((info.first_offset, info.last_offset))
        assert info.record_count == 1 + i % 4
        assert not info.duplicate and info.log_append_time == -1
    assert len(log.segments) > 3
    assert expected[0][0] == 0 and all(b[0] == a[1] + 1 for a, b in zip(expected, expected[1:]))
    assert log.log_end_offset == expected[-1][1] + 1
    assert _read_all(log) == expected
    assert _read_all(log, max_bytes=1) == expected
    for batch in iter_batches(log.read(0, 10**6).records.read()):
        assert batch.partition_leader_epoch == 3
        batch.validate()
    # segments are named by their base offsets, each holding whole batches
    for segment in log.segments:
        assert segment.log_path.name == f"{segment.base_offset:020d}.log"
        assert segment.size <= SMALL.segment_bytes
    log.close()


def test_read_returns_the_batch_holding_the_offset(tmp_path: Path, make_batch) -> None:
    log = _log(tmp_path)
    for _ in range(3):
        log.append(make_batch(5), leader_epoch=0)
    assert _offsets(log.read(7, 10**6).records.read()) == [(5, 9), (10, 14)]
    log.close()


def test_read_bounds(tmp_path: Path, make_batch) -> None:
    log = _log(tmp_path, LogConfig())
    for _ in range(10):
        log.append(make_batch(2, 100), leader_epoch=0)
    size = RecordBatch(make_batch(2, 100)).size
    assert _offsets(log.read(0, 3 * size).records.read()) == [(0, 1), (2, 3), (4, 5)]
    assert _offsets(log.read(0, 3 * size - 1).records.read()) == [(0, 1), (2, 3)]
    # at least one whole batch, unless asked not to
    assert _offsets(log.read(4, 1).records.read()) == [(4, 5)]
    assert log.read(4, 1, min_one_batch=False).records is None
    # never a batch starting at or after max_offset
    assert _offsets(log.read(0, 10**6, max_offset=6).records.read()) == [(0, 1), (2, 3), (4, 5)]
    assert _offsets(log.read(0, 10**6, max_offset=5).records.read()) == [(0, 1), (2, 3), (4, 5)]
    assert log.read(6, 10**6, max_offset=6).records is None
    assert log.read(7, 10**6, max_offset=6).records is None
    # the log end offset is readable, with nothing to return; beyond it and below the start are errors
    fetch = log.read(20, 100)
    assert fetch.records is None and fetch.log_end_offset == 20
    assert _error(lambda: log.read(21, 100)) == ErrorCode.OFFSET_OUT_OF_RANGE
    assert _error(lambda: log.read(-1, 100)) == ErrorCode.OFFSET_OUT_OF_RANGE
    log.close()


def test_read_moves_to_the_next_segment_when_one_is_exhausted(tmp_path: Path, make_batch) -> None:
    log = _log(tmp_path)
    log.append(make_batch(3), leader_epoch=0)
    log.roll()
    log.append(make_batch(3), leader_epoch=0)
    log.delete_records_before(0)
    # offset 3 maps to the first segment by base offset; its data is in the second one
    assert _offsets(log.read(3, 10**6).records.read()) == [(3, 5)]
    log.close()


def test_high_watermark_and_max_offset_reads(tmp_path: Path, make_batch) -> None:
    log = _log(tmp_path)
    for _ in range(20):
        log.append(make_batch(3, 40), leader_epoch=0)
    assert log.high_watermark == 0
    assert log.update_high_watermark(10**9) == 60
    assert log.update_high_watermark(31) == 31
    assert not log.maybe_increment_high_watermark(30)
    assert log.maybe_increment_high_watermark(33)
    fetch = log.read(0, 10**6, max_offset=log.high_watermark)
    assert fetch.high_watermark == fetch.last_stable_offset == 33
    seen, offset = [], 0
    while (records := log.read(offset, 500, max_offset=33).records) is not None:
        seen += _offsets(records.read())
        offset = seen[-1][1] + 1
    assert seen == [(i, i + 2) for i in range(0, 33, 3)]
    log.close()


@pytest.mark.parametrize("problem, code", [
    ("too_large", ErrorCode.MESSAGE_TOO_LARGE),
    ("list_too_large", ErrorCode.RECORD_LIST_TOO_LARGE),
    ("crc", ErrorCode.CORRUPT_MESSAGE),
    ("torn", ErrorCode.CORRUPT_MESSAGE),
    ("codec", ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    ("base_offset", ErrorCode.INVALID_RECORD),
    ("sequence_gap", ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER),
    ("stale_epoch", ErrorCode.INVALID_PRODUCER_EPOCH),
])
def test_rejected_append_changes_nothing(tmp_path: Path, make_batch, problem: str, code: ErrorCode) -> None:
    config = LogConfig(segment_bytes=3000, max_message_bytes=1200, index_interval_bytes=100)
    log = _log(tmp_path, config)
    for _ in range(10):
        log.append(make_batch(2, 50, producer_id=7, producer_epoch=1, base_sequence=2 * _), leader_epoch=0)
    log.append(make_batch(1, 50), leader_epoch=0)
    log.flush()
    before = _dir_digest(log.dir)
    state = (log.log_end_offset, len(log.segments), dict(log.producer_state.active_producers))
    good = make_batch(2, 50, producer_id=7, producer_epoch=1, base_sequence=20)
    if problem == "too_large":
        bad = good + make_batch(5, 300)
    elif problem == "list_too_large":
        bad = good + b"".join(make_batch(2, 450) for _ in range(4))
    elif problem == "crc":
        bad = good + make_batch(2, 50)
        bad[-1] ^= 0xFF
    elif problem == "torn":
        bad = good + make_batch(2, 50)[:-3]
    elif problem == "codec":
        bad = make_batch(2, 50)
        bad[22] |= 0x07  # codec id 7
        bad = good + _fix_crc(bad)
    elif problem == "base_offset":
        second = make_batch(2, 50)
        second[7] = 1
        bad = good + second
    elif problem == "sequence_gap":
        bad = good + make_batch(2, 50, producer_id=7, producer_epoch=1, base_sequence=99)
    else:
        bad = good + make_batch(2, 50, producer_id=7, producer_epoch=0, base_sequence=0)
    assert _error(lambda: log.append(bad, leader_epoch=0)) == code
    assert (log.log_end_offset, len(log.segments), dict(log.producer_state.active_producers)) == state
    assert _dir_digest(log.dir) == before
    # and the log goes on as if nothing had happened
    assert log.append(good, leader_epoch=0).first_offset == 21
    log.close()


def _fix_crc(batch: bytearray) -> bytearray:
    view = RecordBatch(batch)
    batch[17:21] = view.compute_crc().to_bytes(4, "big")
    return batch


def test_idempotent_retry_is_a_duplicate_with_the_original_offsets(tmp_path: Path, make_batch) -> None:
    log = _log(tmp_path)
    first = log.append(make_batch(3, producer_id=42, producer_epoch=0, base_sequence=0), leader_epoch=0)
    log.append(make_batch(2, producer_id=42, producer_epoch=0, base_sequence=3), leader_epoch=0)
    end = log.log_end_offset
    retry = log.append(make_batch(3, producer_id=42, producer_epoch=0, base_sequence=0), leader_epoch=0)
    assert retry.duplicate
    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    assert log.log_end_offset == end
    log.close()


def test_close_snapshots_the_producer_state_only_where_the_next_start_would_replay(
    tmp_path: Path, make_batch
) -> None:
    empty = _log(tmp_path, name="empty-0")
    empty.close()
    assert not list(empty.dir.glob("*.snapshot"))

    now = int(time.time() * 1000)  # producers older than producer.id.expiration.ms are dropped on load
    log = _log(tmp_path)
    log.append(make_batch(3, producer_id=42, producer_epoch=0, base_sequence=0, timestamp=now), leader_epoch=0)
    log.close()
    assert [p.name for p in log.dir.glob("*.snapshot")] == ["00000000000000000003.snapshot"]
    reopened = Log.open(log.dir, SMALL, had_clean_shutdown=True)
    retry = reopened.append(make_batch(3, producer_id=42, producer_epoch=0, base_sequence=0, timestamp=now),
                            leader_epoch=0)
    assert retry.duplicate
    snapshot = log.dir / "00000000000000000003.snapshot"
    written = snapshot.stat().st_mtime_ns
    reopened.close()  # nothing appended since: the snapshot at the end is already there
    assert snapshot.stat().st_mtime_ns == written


def test_log_append_time_topics_stamp_the_broker_time(tmp_path: Path, make_batch) -> None:
    log = _log(tmp_path, LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append(make_batch(3, timestamp=5), leader_epoch=0, now_ms=123_456)
    assert info.log_append_time == 123_456
    batch = next(iter_batches(log.read(0, 10**6).records.read()))
    batch.validate()
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert batch.max_timestamp == 123_456
    assert [r.timestamp for r in batch.records()] == [123_456] * 3
    assert log.offset_for_timestamp(123_000) == (0, 123_456)
    log.close()


def test_timestamp_bounds(tmp_path: Path, make_batch) -> None:
    config = LogConfig(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=1000)
    log = _log(tmp_path, config)
    log.append(make_batch(1, timestamp=10_000), leader_epoch=0, now_ms=10_500)
    assert _error(lambda: log.append(make_batch(1, timestamp=8_000), leader_epoch=0, now_ms=10_500)) == (
        ErrorCode.INVALID_TIMESTAMP
    )
    assert _error(lambda: log.append(make_batch(1, timestamp=12_000), leader_epoch=0, now_ms=10_500)) == (
        ErrorCode.INVALID_TIMESTAMP
    )
    log.close()


def test_each_record_out_of_the_timestamp_range_is_named(tmp_path: Path) -> None:
    # The second record is older than its batch's base timestamp: only the records tell.
    log = _log(tmp_path, LogConfig(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=1000))
    batch = build_batch([SimpleRecord(b"a", b"1", timestamp=10_000), SimpleRecord(b"b", b"2", timestamp=8_000),
                         SimpleRecord(b"c", b"3", timestamp=10_400)], compression=Compression.LZ4)

    with pytest.raises(KafkaError) as refused:
        log.append(batch, leader_epoch=0, now_ms=10_500)

    assert refused.value.code == ErrorCode.INVALID_TIMESTAMP
    assert refused.value.message == "One or more records have been rejected due to invalid timestamp"
    assert refused.value.record_errors == (RecordError(
        1, "Timestamp 8000 of message with offset 1 is out of range. The timestamp should be within [9500, 11500]"),)
    assert log.log_end_offset == 0
    log.close()


def test_coordinator_appends_allow_control_batches(tmp_path: Path, make_batch) -> None:
    from trafka.wire.records import ControlRecordType, build_control_batch

    log = _log(tmp_path)
    log.append(make_batch(2, producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True), leader_epoch=0)
    assert log.last_stable_offset == 0
    marker = bytearray(build_control_batch(ControlRecordType.COMMIT, 5, 0, 0, timestamp=2000))
    assert _error(lambda: log.append(bytearray(marker), leader_epoch=0)) == ErrorCode.INVALID_RECORD
    info = log.append(marker, leader_epoch=0, origin=AppendOrigin.COORDINATOR)
    assert info.first_offset == 2
    log.update_high_watermark(3)
    assert log.last_stable_offset == 3
    log.close()


def test_a_new_leader_epoch_is_checkpointed_when_the_log_is_flushed(tmp_path: Path, make_batch) -> None:
    log = _log(tmp_path, LogConfig())
    checkpoint = log.dir / "leader-epoch-checkpoint"
    log.append(make_batch(2), leader_epoch=0)
    assert not checkpoint.exists()
    log.append(make_batch(2), leader_epoch=3)  # records epoch 0; epoch 3 waits for the flush
    log.append(make_batch(2), leader_epoch=3)
    assert checkpoint.read_text() == "0\n1\n0 0\n"
    log.flush()
    assert checkpoint.read_text() == "0\n2\n0 0\n3 2\n"
    log.append(make_batch(2), leader_epoch=4)
    log.close()
    assert checkpoint.read_text() == "0\n3\n0 0\n3 2\n4 6\n"


def test_leader_epochs(tmp_path: Path, make_batch) -> None:
    log = _log(tmp_path)
    log.append(make_batch(2), leader_epoch=0)
    log.append(make_batch(2), leader_epoch=0)
    log.append(make_batch(3), leader_epoch=2)
    assert log.latest_epoch == 2
    assert log.end_offset_for_leader_epoch(0) == (0, 4)
    assert log.end_offset_for_leader_epoch(1) == (0, 4)
    assert log.end_offset_for_leader_epoch(2) == (2, 7)
    assert log.end_offset_for_leader_epoch(3) == (-1, -1)
    assert [log.leader_epoch_for_offset(o) for o in (0, 3, 4, 6)] == [0, 0, 2, 2]
    assert (log.dir / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n2 4\n"
    log.close()


def test_offset_for_timestamp_and_max_timestamp(tmp_path: Path, make_batch) -> None:
    log = _log(tmp_path)
    for i in range(30):
        log.append(make_batch(2, 40, timestamps=[1000 + 10 * i, 1000 + 10 * i - 100]), leader_epoch=0)
    assert len(log.segments) > 1
    assert log.offset_for_timestamp(0) == (0, 1000)
    assert log.offset_for_timestamp(1001) == (2, 1010)
    assert log.offset_for_timestamp(1145) == (30, 1150)
    assert log.offset_for_timestamp(1290) == (58, 1290)
    assert log.offset_for_timestamp(1291) is None
    assert log.max_timestamp_offset() == (58, 1290)
    log.close()


def test_compressed_batches_are_stored_as_sent(tmp_path: Path, make_batch) -> None:
    log = _log(tmp_path, LogConfig())
    for i, codec in enumerate((Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD)):
        log.append(make_batch(10, 200, compression=codec, timestamp=7000 + 10 * i), leader_epoch=0)
    batches = list(iter_batches(log.read(0, 10**6).records.read()))
    assert [b.compression for b in batches] == [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
    assert log.offset_for_timestamp(7005) == (5, 7005)
    assert log.offset_for_timestamp(7015) == (15, 7015)
    log.close()


def test_delete_records_before(tmp_path: Path, make_batch) -> None:
    log = _log(tmp_path, LogConfig(segment_bytes=700, index_interval_bytes=100, file_delete_delay_ms=1000))
    for _ in range(20):
        log.append(make_batch(2, 60), leader_epoch=0)
    log.update_high_watermark(30)
    assert _error(lambda: log.delete_records_before(31)) == ErrorCode.OFFSET_OUT_OF_RANGE
    bases = [s.base_offset for s in log.segments]
    old = log.read(0, 10**6).records
    assert log.delete_records_before(25, now_ms=0) == 25
    assert log.log_start_offset == 25
    assert all(s.base_offset <= 25 for s in log.segments[:1])
    assert [s.base_offset for s in log.segments] == [b for b in bases if b >= max(b2 for b2 in bases if b2 <= 25)]
    assert _error(lambda: log.read(24, 100)) == ErrorCode.OFFSET_OUT_OF_RANGE
    assert log.read(25, 10).records is not None
    # deleted segments wait as .deleted files; a slice handed out earlier stays readable
    deleted = sorted(p.name for p in log.dir.glob("*.deleted"))
    assert deleted and all(name.endswith((".log.deleted", ".index.deleted", ".timeindex.deleted")) for name in deleted)
    assert _offsets(old.read())[0] == (0, 1)
    log.remove_deleted_segments(now_ms=999)
    assert list(log.dir.glob("*.deleted"))
    log.remove_deleted_segments(now_ms=1000)
    assert not list(log.dir.glob("*.deleted"))
    assert log.delete_records_before(10) == 25
    log.close()


@pytest.mark.parametrize("policy", ["delete", "compact,delete", "compact"])
def test_retention_deletes_expired_segments_below_the_high_watermark(tmp_path: Path, make_batch, policy) -> None:
    config = LogConfig(segment_bytes=1024, index_interval_bytes=256, segment_index_bytes=4096, retention_ms=60_000,
                       cleanup_policy=policy)
    log = _log(tmp_path, config)
    for n in range(12):  # timestamps 0, 10 s, 20 s ... about 400 bytes a batch: segments roll every two
        log.append(make_batch(2, 150, timestamp=n * 10_000), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)
    bases = [s.base_offset for s in log.segments]
    old = log.read(0, 10**6).records

    deleted = log.apply_retention(now_ms=110_001)  # past 60 s: what is older than 50 s

    if policy == "compact":
        assert deleted == 0 and [s.base_offset for s in log.segments] == bases
        return
    assert deleted >= 2 and [s.base_offset for s in log.segments] == bases[deleted:]
    assert log.log_start_offset == bases[deleted]
    assert all(s.max_timestamp >= 110_001 - 60_000 for s in log.segments)  # not past retention.ms
    assert _error(lambda: log.read(bases[deleted] - 1, 100)) == ErrorCode.OFFSET_OUT_OF_RANGE
    assert _offsets(old.read())[0] == (0, 1)  # a slice handed out before stays readable
    # Everything once it has all expired: the log rolls an empty active segment at its end.
    assert log.apply_retention(now_ms=10**9) > 0
    assert (log.log_start_offset, [s.base_offset for s in log.segments]) == (24, [24])


def test_retention_by_size_keeps_at_least_retention_bytes(tmp_path: Path, make_batch) -> None:
    config = LogConfig(segment_bytes=1024, index_interval_bytes=256, segment_index_bytes=4096, retention_bytes=2000)
    log = _log(tmp_path, config)
    for n in range(12):
        log.append(make_batch(2, 150, timestamp=n), leader_epoch=0)
    log.update_high_watermark(log.log_end_offset)

    log.apply_retention(now_ms=1_000)

    kept = sum(s.size for s in log.segments)
    assert 2000 <= kept < 2000 + log.segments[0].size


def test_delete_old_segments_rolls_when_deleting_everything(tmp_path: Path, make_batch) -> None:
    log = _log(tmp_path)
    for _ in range(6):
        log.append(make_batch(2, 100), leader_epoch=0)
    log.update_high_watermark(12)
    assert log.delete_old_segments(log.segments) >= 1
    assert log.log_start_offset == log.log_end_offset == 12
    assert log.read(12, 100).records is None
    assert log.append(make_batch(1), leader_epoch=0).first_offset == 12
    log.close()


def test_flush_policy_moves_the_recovery_point(tmp_path: Path, make_batch) -> None:
    log = _log(tmp_path, LogConfig(flush_interval_messages=5))
    log.append(make_batch(3), leader_epoch=0)
    assert log.recovery_point == 0
    log.append(make_batch(3), leader_epoch=0)
    assert log.recovery_point == 6
    log.close()
    # flush.ms is served off the append path, as Kafka's log flusher does it.
    timed = _log(tmp_path, LogConfig(flush_interval_ms=1000), name="timed-0")
    timed.append(make_batch(3), leader_epoch=0, now_ms=500)
    assert timed.due_flush(now_ms=999) is None
    timed.append(make_batch(3), leader_epoch=0, now_ms=1000)
    assert timed.recovery_point == 0
    flush = timed.due_flush(now_ms=1000)
    flush.run()
    timed.complete_flush(flush, now_ms=1000)
    assert timed.recovery_point == 6
    assert timed.due_flush(now_ms=1500) is None  # nothing new, and flush.ms has not passed again
    timed.close()


def _rolled_once(tmp_path: Path, make_batch) -> Log:
    """Offsets 0-2 in a rolled segment, 3-4 in the active one, nothing flushed."""
    log = _log(tmp_path)
    log.append(make_batch(3), leader_epoch=0)
    log.roll()
    log.append(make_batch(2), leader_epoch=0)
    return log


def test_a_roll_leaves_the_flush_to_due_flush(tmp_path: Path, make_batch) -> None:
    log = _rolled_once(tmp_path, make_batch)
    assert log.recovery_point == 0
    flush = log.due_flush(now_ms=1)
    assert flush.upto == 3  # the rolled segment; the active one waits for flush.ms or shutdown
    flush.run()
    log.complete_flush(flush)
    assert log.recovery_point == 3
    assert log.due_flush(now_ms=2) is None
    log.close()


def test_the_leader_epoch_checkpoint_is_fsynced_by_the_flush_not_by_the_caller(
    tmp_path: Path, make_batch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``due_flush`` runs on the broker's event loop: it writes the epoch's checkpoint, and the flush,
    in a worker thread, fsyncs it with the segments before the recovery point moves."""
    log = _rolled_once(tmp_path, make_batch)
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    flush = log.due_flush(now_ms=1)
    assert (log.dir / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    assert synced == []
    flush.run()
    assert "leader-epoch-checkpoint" in synced and synced[-1] == log.dir.name
    log.complete_flush(flush)
    synced.clear()
    log.flush()  # nothing new to record: only the segment
    assert "leader-epoch-checkpoint" not in synced
    monkeypatch.undo()
    log.close()


def test_a_truncation_voids_a_flush_made_before_it(tmp_path: Path, make_batch) -> None:
    log = _rolled_once(tmp_path, make_batch)
    flush = log.due_flush(now_ms=1)
    log.truncate_to(1)
    flush.run()
    log.complete_flush(flush)
    assert log.recovery_point == 0
    log.close()


def test_truncate_to(tmp_path: Path, make_batch) -> None:
    log = _log(tmp_path)
    for epoch in range(12):
        log.append(make_batch(2, 80), leader_epoch=epoch)
    log.update_high_watermark(24)
    assert log.truncate_to(11)
    assert log.log_end_offset == 10  # the batch holding offset 11 begins at 10
    assert log.high_watermark == 10
    assert log.latest_epoch == 4
    assert _read_all(log) == [(i, i + 1) for i in range(0, 10, 2)]
    assert log.append(make_batch(1), leader_epoch=20).first_offset == 10
    assert not log.truncate_to(50)
    log.close()


def test_append_as_follower_keeps_offsets_and_epochs(tmp_path: Path, make_batch) -> None:
    leader = _log(tmp_path, name="l-0")
    follower = _log(tmp_path, name="f-0")
    for sequence, epoch in ((0, 1), (3, 1), (6, 4)):
        leader.append(make_batch(3, 50, producer_id=9, producer_epoch=0, base_sequence=sequence), leader_epoch=epoch)
    data = bytearray(leader.read(0, 10**6).records.read())
    info = follower.append_as_follower(data)
    assert (info.first_offset, info.last_offset) == (0, 8)
    assert follower.log_end_offset == 9
    assert follower.read(0, 10**6).records.read() == bytes(data)
    assert follower.end_offset_for_leader_epoch(1) == (1, 6)
    assert _error(lambda: follower.append_as_follower(data)) == ErrorCode.UNKNOWN_SERVER_ERROR
    leader.close()
    follower.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_log_matches_an_in_memory_model(tmp_path_factory, make_batch, data) -> None:
    config = LogConfig(
        segment_bytes=data.draw(st.integers(1000, 3000)),
        index_interval_bytes=data.draw(st.integers(0, 500)),
        segment_index_bytes=data.draw(st.sampled_from([24, 48, 4096])),
    )
    log = Log.create(tmp_path_factory.mktemp("model") / "m-0", config, now_ms=0)
    model: list[tuple[int, int, bytes]] = []  # (base offset, last offset, batch bytes as stored)
    try:
        for _ in range(data.draw(st.integers(1, 25))):
            count = data.draw(st.integers(1, 5))
            batch = make_batch(count, data.draw(st.integers(0, 150)))
            info = log.append(batch, leader_epoch=1)
            model.append((info.first_offset, info.last_offset, bytes(batch)))
            if data.draw(st.booleans()):
                end = log.log_end_offset
                offset = data.draw(st.integers(0, end))
                max_bytes = data.draw(st.integers(0, 2000))
                max_offset = data.draw(st.none() | st.integers(0, end))
                min_one = data.draw(st.booleans())
                records = log.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one).records
                got = records.read() if records is not None else b""
                assert got == _model_read(model, config, offset, max_bytes, max_offset, min_one, log)
    finally:
        log.close()
    reopened = Log.open(log.dir, config)
    assert reopened.log_end_offset == model[-1][1] + 1
    assert b"".join(reopened.read(o, 10**6).records.read() for o in _segment_starts(reopened)) == b"".join(
        stored for _, _, stored in model
    )
    reopened.close()


def _segment_starts(log: Log) -> list[int]:
    return [segment.translate_offset(segment.base_offset).base_offset for segment in log.segments if segment.size]


def _model_read(model, config, offset, max_bytes, max_offset, min_one, log) -> bytes:
    """The expected answer: whole batches of the segment holding ``offset``'s batch."""
    bound = log.log_end_offset if max_offset is None else min(max_offset, log.log_end_offset)
    if offset >= bound:
        return b""
    segment_of = {}
    for segment in log.segments:
        for batch in segment.batch_positions():
            segment_of[batch.base_offset] = segment.base_offset
    start = next(i for i, (base, last, _) in enumerate(model) if last >= offset)
    out, size = [], 0
    for base, last, stored in model[start:]:
        if base >= bound or segment_of[base] != segment_of[model[start][0]]:
            break
        if size + len(stored) > max_bytes and not (min_one and not out):
            break
        out.append(stored)
        size += len(stored)
    return b"".join(out)


def test_aborted_transactions_are_indexed_for_read_committed_fetches(tmp_path: Path, make_batch) -> None:
    import struct

    from trafka.storage.index import AbortedTxn
    from trafka.wire.records import ControlRecordType, build_control_batch

    log = _log(tmp_path)

    def transactional(producer_id: int, sequence: int) -> bytearray:
        return make_batch(2, 40, producer_id=producer_id, producer_epoch=0, base_sequence=sequence, is_transactional=True)

    def marker(kind: ControlRecordType, producer_id: int) -> None:
        batch = bytearray(build_control_batch(kind, producer_id, 0, 0, timestamp=5000))
        log.append(batch, leader_epoch=0, origin=AppendOrigin.COORDINATOR)

    log.append(transactional(1, 0), leader_epoch=0)  # 0-1
    log.append(transactional(2, 0), leader_epoch=0)  # 2-3
    log.append(transactional(1, 2), leader_epoch=0)  # 4-5
    marker(ControlRecordType.ABORT, 1)  # 6
    marker(ControlRecordType.COMMIT, 2)  # 7
    log.append(make_batch(1), leader_epoch=0)  # 8
    log.update_high_watermark(log.log_end_offset)
    aborted = AbortedTxn(producer_id=1, first_offset=0, last_offset=6, last_stable_offset=2)
    assert log.read(0, 10**6, include_aborted_transactions=True).aborted_transactions == [aborted]
    assert log.read(7, 10**6, include_aborted_transactions=True).aborted_transactions == []
    assert log.read(0, 10**6).aborted_transactions is None
    txn_index = log.active_segment.txn_index_path
    assert txn_index.read_bytes() == struct.pack(">hqqqq", 0, 1, 0, 6, 2)
    log.close()
    reopened = Log.open(log.dir, LogConfig(), recovery_point=0)
    assert reopened.read(3, 10**6, include_aborted_transactions=True).aborted_transactions == [aborted]
    reopened.truncate_to(6)
    assert reopened.read(0, 10**6, include_aborted_transactions=True).aborted_transactions == []
    assert txn_index.read_bytes() == b""
    reopened.close()
