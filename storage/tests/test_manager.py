"""LogManager: the data directory layout, loading, checkpoints, clean shutdown, deleting topics."""
from __future__ import annotations

import logging
import os
import threading
import uuid
from pathlib import Path

import pytest

from trafka.storage import files
from trafka.storage.checkpoints import read_offsets_checkpoint
from trafka.storage.config import LogConfig
from trafka.storage.log import read_partition_metadata
from trafka.storage.manager import CLEAN_SHUTDOWN_FILE, DataDirectoryInUse, LogManager
from trafka.storage.topics import topic_id_to_string

CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=200)


def _crash(manager: LogManager) -> None:
    """Let go of the data directory without a clean shutdown, as a killed broker would."""
    for log in manager.logs():
        for segment in log.segments:
            segment.close_handles()  # unmaps the indexes untrimmed, lets the descriptors go
    manager._unlock()


def _manager(data_dir: Path, **kwargs) -> LogManager:
    manager = LogManager(data_dir, CONFIG, **kwargs)
    manager.load()
    return manager


@pytest.mark.parametrize("name, expected", [
    ("orders-0", ("orders", 0)),
    ("my-topic-12", ("my-topic", 12)),
    ("a.b-c.d-3", ("a.b-c.d", 3)),
    ("__consumer_offsets-49", ("__consumer_offsets", 49)),
    ("my-topic-7.0f1e2d3c4b5a69788796a5b4c3d2e1f0-delete", ("my-topic", 7)),
    ("x.y-1.abc-delete", ("x.y", 1)),
])
def test_partition_dir_names(name: str, expected: tuple[str, int]) -> None:
    assert files.parse_partition_dir_name(name) == expected
    topic, partition = expected
    if not name.endswith("-delete"):
        assert files.partition_dir_name(topic, partition) == name


@pytest.mark.parametrize("name", ["orders", "orders-", "-1", "orders-x", "orders-1.tmp", "orders-١"])
def test_names_that_are_not_partition_dirs(name: str) -> None:
    with pytest.raises(ValueError):
        files.parse_partition_dir_name(name)


def test_segment_file_names() -> None:
    directory = Path("/data/t-0")
    assert files.log_file(directory, 0).name == "00000000000000000000.log"
    assert files.offset_index_file(directory, 1234).name == "00000000000000001234.index"
    assert files.time_index_file(directory, 2**63 - 1).name == "09223372036854775807.timeindex"
    assert files.txn_index_file(directory, 5, ".deleted").name == "00000000000000000005.txnindex.deleted"
    assert files.producer_snapshot_file(directory, 42).name == "00000000000000000042.snapshot"
    assert files.offset_from_file_name("00000000000000001234.log.swap") == 1234
    with pytest.raises(ValueError):
        files.offset_from_file_name("leader-epoch-checkpoint")


def test_delete_dir_names_are_unique_and_fit_file_systems() -> None:
    name = files.delete_dir_name("t" * 249, 123)
    assert len(name) <= 255 and name.endswith("-delete")
    assert files.parse_partition_dir_name(name)[1] == 123
    assert files.delete_dir_name("t", 0) != files.delete_dir_name("t", 0)


def test_layout(tmp_path: Path, make_batch) -> None:
    manager = _manager(tmp_path, node_id=3, cluster_id="test-cluster")
    topic_id = uuid.uuid4()
    log = manager.create_log("orders.v1", 2, CONFIG, topic_id)
    log.append(make_batch(3), leader_epoch=0)
    assert log.dir == tmp_path / "orders.v1-2"
    assert (log.dir / "partition.metadata").read_text() == f"version: 0\ntopic_id: {topic_id_to_string(topic_id)}"
    assert read_partition_metadata(log.dir) == topic_id
    meta = (tmp_path / "meta.properties").read_text().splitlines()
    assert {"version=1", "node.id=3", "cluster.id=test-cluster"} <= set(meta)
    assert manager.cluster_id == "test-cluster"
    manager.checkpoint()
    for name in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint"):
        assert (tmp_path / name).exists()
    manager.close()


def test_cluster_id_is_generated_once_and_kept(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    cluster_id = manager.cluster_id
    assert cluster_id and len(cluster_id) == 22
    manager.close()
    again = _manager(tmp_path)
    assert again.cluster_id == cluster_id
    again.close()
    with pytest.raises(RuntimeError, match="node"):
        _manager(tmp_path, node_id=9)
    with pytest.raises(RuntimeError, match="belongs to cluster"):  # the refused start let the directory go
        _manager(tmp_path, cluster_id="another")


def test_a_data_dir_is_used_by_one_manager_at_a_time(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    with pytest.raises(DataDirectoryInUse, match="in use"):
        _manager(tmp_path)
    manager.close()
    _manager(tmp_path).close()


def test_restart_after_clean_shutdown(tmp_path: Path, make_batch) -> None:
    manager = _manager(tmp_path)
    topic_id = uuid.uuid4()
    for partition in range(3):
        log = manager.create_log("t", partition, CONFIG, topic_id)
        for _ in range(10 * (partition + 1)):
            log.append(make_batch(2, 50), leader_epoch=1)
        log.update_high_watermark(log.log_end_offset - 1)
    manager.get_log("t", 1).delete_records_before(7)
    manager.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).read_text() == '{"version": 0, "brokerEpoch": -1}'
    recovery_points = read_offsets_checkpoint(tmp_path / "recovery-point-offset-checkpoint")
    assert recovery_points == {("t", 0): 20, ("t", 1): 40, ("t", 2): 60}

    manager = _manager(tmp_path)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert sorted((log.topic, log.partition) for log in manager.logs()) == [("t", 0), ("t", 1), ("t", 2)]
    log = manager.get_log("t", 1)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (7, 40, 39)
    assert log.topic_id == topic_id
    assert log.append(make_batch(1), leader_epoch=2).first_offset == 40
    assert manager.get_log("t", 3) is None
    manager.close()


def test_high_watermark_is_capped_by_the_log_end_offset_on_load(tmp_path: Path, make_batch) -> None:
    manager = _manager(tmp_path)
    log = manager.create_log("t", 0, CONFIG, uuid.uuid4())
    for _ in range(10):
        log.append(make_batch(2, 50), leader_epoch=1)
    log.update_high_watermark(20)
    manager.checkpoint()
    active = log.active_segment.log_path
    manager.close()
    (tmp_path / CLEAN_SHUTDOWN_FILE).unlink()
    # lose the tail, as an unflushed page cache would
    active.write_bytes(active.read_bytes()[:-30])
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n0\n")
    manager = _manager(tmp_path)
    log = manager.get_log("t", 0)
    assert log.log_end_offset == 18
    assert log.high_watermark == 18
    manager.close()


def test_unclean_shutdown_recovers_and_clean_shutdown_trusts(tmp_path: Path, make_batch) -> None:
    manager = _manager(tmp_path)
    log = manager.create_log("t", 0, CONFIG, uuid.uuid4())
    for _ in range(5):
        log.append(make_batch(2, 50), leader_epoch=1)
    active = log.active_segment.log_path
    manager.close()
    data = bytearray(active.read_bytes())
    data[-3] ^= 0x40
    active.write_bytes(data)
    # the clean shutdown marker says the files are whole: they are not rescanned
    manager = _manager(tmp_path)
    assert manager.get_log("t", 0).log_end_offset == 10
    _crash(manager)
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    # no marker now: the segment after the recovery point is re-validated
    (tmp_path / "recovery-point-offset-checkpoint").write_text("0\n0\n")
    manager = _manager(tmp_path)
    assert manager.get_log("t", 0).log_end_offset == 8
    manager.close()


def test_delete_logs(tmp_path: Path, make_batch) -> None:
    manager = _manager(tmp_path)
    topic_id = uuid.uuid4()
    logs = [manager.create_log("gone-topic", p, CONFIG, topic_id) for p in range(2)]
    keep = manager.create_log("gone", 0, CONFIG, uuid.uuid4())
    for log in logs + [keep]:
        log.append(make_batch(2), leader_epoch=0)
    in_flight = logs[0].read(0, 10**6).records
    assert manager.delete_logs("gone-topic") == [("gone-topic", 0), ("gone-topic", 1)]
    assert manager.get_log("gone-topic", 0) is None and manager.get_log("gone", 0) is keep
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["gone-0"]
    assert in_flight.read()  # the descriptor outlives the directory until the delay passes
    assert ("gone-topic", 0) not in read_offsets_checkpoint(tmp_path / "recovery-point-offset-checkpoint")
    # the topic can be created again at once
    again = manager.create_log("gone-topic", 0, CONFIG, uuid.uuid4())
    assert again.log_end_offset == 0
    manager.delete_expired_files(now_ms=2**62)
    # the log has let its descriptors go; the slice holds its own until it is gone
    assert in_flight.read()
    fd = in_flight.file.fileno()
    del in_flight
    with pytest.raises(OSError):
        os.fstat(fd)
    manager.close()


def test_a_flush_in_flight_outlives_the_deletion_of_its_log(tmp_path: Path, make_batch) -> None:
    manager = _manager(tmp_path)
    log = manager.create_log("t", 0, CONFIG, uuid.uuid4())
    while len(log.segments) < 2:
        log.append(make_batch(2), leader_epoch=0)
    [(due_log, flush)] = list(manager.due_flushes())
    assert due_log is log and flush.upto == log.segments[-1].base_offset
    manager.delete_logs("t")
    manager.delete_expired_files(now_ms=2**62)  # the log's files are closed and removed
    flush.run()  # on the descriptors it opened itself
    log.complete_flush(flush)
    assert list(manager.due_flushes()) == []
    manager.close()


def test_leftover_delete_dirs_and_stray_dirs_on_load(tmp_path: Path) -> None:
    (tmp_path / "t-0.0123456789abcdef0123456789abcdef-delete").mkdir()
    (tmp_path / "t-0.0123456789abcdef0123456789abcdef-delete" / "00000000000000000000.log").write_bytes(b"")
    (tmp_path / "not a partition").mkdir()
    manager = _manager(tmp_path)
    assert not (tmp_path / "t-0.0123456789abcdef0123456789abcdef-delete").exists()
    assert list(manager.logs()) == []
    manager.close()


def test_create_log_is_idempotent_per_topic_id(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    topic_id = uuid.uuid4()
    log = manager.create_log("t", 0, CONFIG, topic_id)
    assert manager.create_log("t", 0, CONFIG, topic_id) is log
    with pytest.raises(ValueError):
        manager.create_log("t", 0, CONFIG, uuid.uuid4())
    manager.close()


def test_topic_configs_on_load(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    manager.create_log("compacted", 0, CONFIG, uuid.uuid4())
    manager.close()
    manager = LogManager(tmp_path, CONFIG)
    special = LogConfig(cleanup_policy="compact")
    manager.load({"compacted": special})
    assert manager.get_log("compacted", 0).config is special
    manager.close()


def test_create_logs(tmp_path: Path, make_batch) -> None:
    manager = _manager(tmp_path)
    topic_id, other_id = uuid.uuid4(), uuid.uuid4()
    existing = manager.create_log("t", 1, CONFIG, topic_id)
    bigger = LogConfig(segment_bytes=3000)
    logs = manager.create_logs([("t", p, bigger, topic_id) for p in range(3)] + [("u", 0, CONFIG, other_id)])
    assert [(log.topic, log.partition, log.topic_id) for log in logs] == [
        ("t", 0, topic_id), ("t", 1, topic_id), ("t", 2, topic_id), ("u", 0, other_id)
    ]
    assert logs[1] is existing and existing.config is bigger
    assert all(manager.get_log(log.topic, log.partition) is log for log in logs)
    assert read_partition_metadata(tmp_path / "u-0") == other_id
    assert logs[0].append(make_batch(2), leader_epoch=0).first_offset == 0
    # a conflict is found before anything is created
    with pytest.raises(ValueError, match="belongs to topic id"):
        manager.create_logs([("v", 0, CONFIG, topic_id), ("t", 2, CONFIG, other_id)])
    with pytest.raises(ValueError, match="too long"):
        manager.create_logs([("v", 0, CONFIG, topic_id), ("v" * 255, 0, CONFIG, topic_id)])
    assert manager.get_log("v", 0) is None and not (tmp_path / "v-0").exists()
    assert manager.create_logs([]) == []
    manager.close()


def test_a_creation_runs_in_another_thread_and_joins_the_manager_after(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    topic_id = uuid.uuid4()
    existing = manager.create_log("t", 0, CONFIG, topic_id)
    creation = manager.prepare_logs([("t", p, CONFIG, topic_id) for p in range(3)])
    with pytest.raises(RuntimeError, match="not completed"):
        manager.add_created(creation)
    worker = threading.Thread(target=creation.run)
    worker.start()
    worker.join()
    assert (tmp_path / "t-2").is_dir() and manager.get_log("t", 2) is None
    logs = manager.add_created(creation)
    assert logs[0] is existing
    assert [manager.get_log("t", p) for p in range(3)] == logs
    manager.close()


def test_a_failed_creation_adds_nothing_and_a_later_one_loads_its_directories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = _manager(tmp_path)
    specs = [("t", p, CONFIG, uuid.uuid4()) for p in range(2)]
    creation = manager.prepare_logs(specs)
    with monkeypatch.context() as patched:
        patched.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(5, "Input/output error")))
        with pytest.raises(OSError):
            creation.run()
    assert creation.created == {} and not creation.done
    assert manager.get_log("t", 0) is None
    logs = manager.create_logs(specs)
    assert [log.topic_id for log in logs] == [topic_id for _, _, _, topic_id in specs]
    manager.close()


def test_new_logs_are_made_durable_together(tmp_path: Path, make_batch, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each ``partition.metadata`` and new directory is fsynced once, then the data directory;
    appending fsyncs none of them again."""
    manager = _manager(tmp_path)
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.path.relpath(os.readlink(f"/proc/self/fd/{fd}"), tmp_path))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    logs = manager.create_logs([("t", p, CONFIG, uuid.uuid4()) for p in range(3)])
    assert synced == [
        "t-0/partition.metadata", "t-0", "t-1/partition.metadata", "t-1", "t-2/partition.metadata", "t-2", "."
    ]
    synced.clear()
    logs[1].append(make_batch(1), leader_epoch=0)
    logs[1].append(make_batch(1), leader_epoch=0)
    assert synced == []
    manager.create_log("t", 3, CONFIG, uuid.uuid4())
    assert synced == ["t-3/partition.metadata", "t-3", "."]
    monkeypatch.undo()
    manager.close()


def test_a_crash_while_a_log_is_created_can_leave_partition_metadata_empty(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    manager = _manager(tmp_path)
    topic_id = uuid.uuid4()
    manager.create_log("t", 0, CONFIG, topic_id)
    _crash(manager)
    (tmp_path / "t-0" / "partition.metadata").write_bytes(b"")  # its data never reached the disk
    with caplog.at_level(logging.WARNING):
        manager = _manager(tmp_path)
    assert not caplog.records
    log = manager.get_log("t", 0)
    assert log.topic_id is None and log.log_end_offset == 0
    assert manager.create_log("t", 0, CONFIG, topic_id) is log
    assert log.topic_id == topic_id == read_partition_metadata(log.dir)
    manager.close()


def test_unclean_restart_of_many_new_partitions_is_quiet(
    tmp_path: Path, make_batch, caplog: pytest.LogCaptureFixture
) -> None:
    manager = _manager(tmp_path)
    logs = manager.create_logs([("__consumer_offsets", p, CONFIG, uuid.uuid4()) for p in range(10)])
    logs[3].append(make_batch(2), leader_epoch=0)
    manager.checkpoint()
    _crash(manager)
    with caplog.at_level(logging.WARNING):
        manager = _manager(tmp_path)
    assert [r.getMessage() for r in caplog.records] == []
    assert [log.log_end_offset for log in manager.logs()] == [0, 0, 0, 2, 0, 0, 0, 0, 0, 0]
    manager.close()


def test_checkpoints_taken_before_the_last_written_are_dropped(tmp_path: Path) -> None:
    """The periodic checkpoint is written in a worker thread: one taken before a topic was deleted
    must not bring the deleted partitions back once the deletion's own checkpoint is written."""
    manager = _manager(tmp_path)
    manager.create_logs([("kept", 0, CONFIG, uuid.uuid4()), ("doomed", 0, CONFIG, uuid.uuid4())])
    earlier = manager.offsets_checkpoints()
    manager.delete_logs("doomed")  # checkpoints
    manager.write_checkpoints(earlier)
    assert read_offsets_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {("kept", 0): 0}
    manager.close()


def test_checkpoint_writers_in_several_threads_take_turns(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    manager.create_logs([(f"t{n}", 0, CONFIG, uuid.uuid4()) for n in range(200)])
    taken = [manager.offsets_checkpoints() for _ in range(8)]
    writers = [threading.Thread(target=manager.write_checkpoints, args=(checkpoints,)) for checkpoints in taken]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()
    assert len(read_offsets_checkpoint(tmp_path / "log-start-offset-checkpoint")) == 200
    manager.close()
