"""Descriptors of segment files: one per log for its active segment, readers of older segments
from a bounded LRU cache, slices that keep their descriptor past eviction, flushes and recovery
that do not depend on any of them, and out-of-descriptor errors that stay with one request."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from trafka.storage import open_files, segment as segment_module
from trafka.storage.config import LogConfig
from trafka.storage.log import Log
from trafka.storage.open_files import LogFile, ReaderCache
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.records import iter_batches

SMALL = LogConfig(segment_bytes=1024, index_interval_bytes=128, segment_index_bytes=4096)


@pytest.fixture
def readers(monkeypatch: pytest.MonkeyPatch) -> ReaderCache:
    """A private reader cache with room for two files, used by every segment in the test."""
    cache = ReaderCache(2)
    monkeypatch.setattr(segment_module, "READERS", cache)
    return cache


def _open_in(directory: Path) -> list[str]:
    """The files under ``directory`` this process holds descriptors of."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory) + os.sep):
            names.append(os.path.basename(target))
    return sorted(names)


def _filled_log(tmp_path: Path, make_batch, batches: int = 60) -> Log:
    log = Log.create(tmp_path / "orders-0", SMALL, now_ms=0)
    for _ in range(batches):
        log.append(make_batch(2, 40), leader_epoch=0, now_ms=0)
    assert len(log.segments) > 4
    return log


def _offsets(data: bytes) -> list[tuple[int, int]]:
    return [(batch.base_offset, batch.last_offset) for batch in iter_batches(data)]


def _read_every_segment(log: Log) -> list[tuple[int, int]]:
    found, offset = [], 0
    while offset < log.log_end_offset:
        records = log.read(offset, 100).records
        assert records is not None
        batches = _offsets(records.read())
        found += batches
        offset = batches[-1][1] + 1
    return found


def test_a_log_holds_one_descriptor_its_active_segment(tmp_path: Path, make_batch, readers) -> None:
    log = _filled_log(tmp_path, make_batch)
    # index files are mapped with no descriptor kept; rolled segments hold none
    assert _open_in(tmp_path) == [log.active_segment.log_path.name]
    assert [s.holds_descriptor for s in log.segments] == [False] * (len(log.segments) - 1) + [True]
    assert log.active_segment.offset_index.entries > 0
    log.close()
    assert _open_in(tmp_path) == []


def test_old_segments_are_read_after_eviction(tmp_path: Path, make_batch, readers) -> None:
    log = _filled_log(tmp_path, make_batch)
    expected = [(2 * i, 2 * i + 1) for i in range(60)]
    assert _read_every_segment(log) == expected
    assert len(readers) == 2
    assert len(_open_in(tmp_path)) == 3  # the active segment and two readers
    # read again from the start: every segment evicted is opened again
    assert _read_every_segment(log) == expected
    assert len(_open_in(tmp_path)) == 3
    log.close()
    assert len(readers) == 0 and _open_in(tmp_path) == []


def test_a_file_slice_outlives_the_eviction_of_its_reader(tmp_path: Path, make_batch, readers) -> None:
    log = _filled_log(tmp_path, make_batch)
    first = log.read(0, 100).records
    assert first is not None
    expected = first.read()
    _read_every_segment(log)  # evicts the first segment's reader many times over
    assert log.segments[0] not in readers
    assert first.read() == expected  # its descriptor is still the one it was read from
    fd = first.file.fileno()
    del first
    with pytest.raises(OSError):
        os.fstat(fd)  # closed with its last reference
    log.close()


def test_a_slice_of_the_active_segment_outlives_the_roll(tmp_path: Path, make_batch, readers) -> None:
    log = Log.create(tmp_path / "orders-0", SMALL, now_ms=0)
    log.append(make_batch(2, 40), leader_epoch=0, now_ms=0)
    in_flight = log.read(0, 10_000).records
    assert in_flight is not None
    log.roll(now_ms=0)
    log.close()
    assert _offsets(in_flight.read()) == [(0, 1)]


def test_flush_and_recovery_after_eviction(tmp_path: Path, make_batch, readers) -> None:
    log = _filled_log(tmp_path, make_batch)
    _read_every_segment(log)
    flush = log.due_flush(now_ms=0)  # what the rolls left unflushed
    assert flush is not None
    flush.run()
    log.complete_flush(flush, now_ms=0)
    assert log.recovery_point == log.active_segment.base_offset
    log.flush(now_ms=0)
    assert log.recovery_point == log.log_end_offset
    end = log.log_end_offset
    for segment in log.segments:  # as a killed process leaves them
        segment.close_handles()
    reopened = Log.open(tmp_path / "orders-0", SMALL, recovery_point=0, had_clean_shutdown=False, now_ms=0)
    assert reopened.log_end_offset == end
    # recovery read the segments through the cache: the active segment and at most two readers
    held = _open_in(tmp_path)
    assert reopened.active_segment.log_path.name in held and len(held) <= 3
    assert _read_every_segment(reopened) == [(2 * i, 2 * i + 1) for i in range(60)]
    reopened.close()


def test_truncation_makes_an_old_segment_writable_again(tmp_path: Path, make_batch, readers) -> None:
    log = _filled_log(tmp_path, make_batch)
    second = log.segments[1]
    assert not second.holds_descriptor
    log.truncate_to(second.base_offset + 2)
    assert log.active_segment is second
    log.append(make_batch(2, 40), leader_epoch=0, now_ms=0)
    assert second.holds_descriptor and second not in readers
    assert _read_every_segment(log)[-1] == (second.base_offset + 2, second.base_offset + 3)
    log.close()


def test_reader_cache_closes_the_least_recently_used(tmp_path: Path) -> None:
    paths = []
    for name in "abc":
        path = tmp_path / name
        path.write_bytes(name.encode())
        paths.append(path)
    cache = ReaderCache(2)
    a = cache.get("a", paths[0])
    fd_a = a.fileno()
    del a
    cache.get("b", paths[1])
    cache.get("a", paths[0])  # a is now the most recently used
    cache.get("c", paths[2])  # b goes
    assert "a" in cache and "c" in cache and "b" not in cache
    assert os.pread(cache.get("a", paths[0]).fileno(), 1, 0) == b"a"
    assert cache.get("a", paths[0]).fileno() == fd_a  # the same descriptor all along
    cache.discard("a")
    assert "a" not in cache and len(cache) == 1
    cache.clear()
    assert len(cache) == 0 and _open_in(tmp_path) == []
    with pytest.raises(ValueError):
        ReaderCache(0)


def test_a_closed_segment_opens_no_reader(tmp_path: Path, make_batch, readers) -> None:
    log = _filled_log(tmp_path, make_batch)
    old = log.segments[0]
    log.close()
    with pytest.raises(ValueError, match="closed"):
        old.file
    assert len(readers) == 0


def _out_of_descriptors(*args, **kwargs):
    raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))


def test_out_of_descriptors_fails_the_read_with_a_storage_error(
    tmp_path: Path, make_batch, readers, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = _filled_log(tmp_path, make_batch)
    monkeypatch.setattr(readers, "get", _out_of_descriptors)
    with pytest.raises(KafkaError) as failure:
        log.read(0, 100)
    assert failure.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert "Too many open files" in str(failure.value)
    # the active segment, which holds its descriptor, is still read
    assert log.read(log.active_segment.base_offset, 100).records is not None
    monkeypatch.undo()
    log.close()


def test_out_of_descriptors_at_a_roll_fails_the_append_and_changes_nothing(
    tmp_path: Path, make_batch, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = Log.create(tmp_path / "orders-0", SMALL, now_ms=0)
    while len(log.segments) == 1 or log.active_segment.size < SMALL.segment_bytes - 200:
        log.append(make_batch(2, 40), leader_epoch=0, now_ms=0)
    segments, end = log.segments, log.log_end_offset
    real_init = LogFile.__init__

    def refuse_new_files(self, path, *, writable):
        if writable:
            _out_of_descriptors()
        real_init(self, path, writable=writable)

    monkeypatch.setattr(open_files.LogFile, "__init__", refuse_new_files)
    with pytest.raises(KafkaError) as failure:
        log.append(make_batch(2, 400), leader_epoch=0, now_ms=0)
    assert failure.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert log.segments == segments and log.log_end_offset == end
    assert log.active_segment.holds_descriptor
    monkeypatch.undo()
    log.append(make_batch(2, 400), leader_epoch=0, now_ms=0)
    assert len(log.segments) == len(segments) + 1 and log.log_end_offset == end + 2
    log.close()


def test_no_memory_map_left_for_the_first_index_entry_fails_the_append_before_writing(
    tmp_path: Path, make_batch, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trafka.storage import index as index_module

    log = Log.create(tmp_path / "orders-0", SMALL, now_ms=0)
    log.append(make_batch(2, 40), leader_epoch=0, now_ms=0)
    active, end = log.active_segment, log.log_end_offset
    size = active.size

    def no_map_left(self, fd, length):
        raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM))

    monkeypatch.setattr(index_module._Mapping, "__init__", no_map_left)
    with pytest.raises(KafkaError) as failure:
        log.append(make_batch(2, 200), leader_epoch=0, now_ms=0)
    assert failure.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert log.log_end_offset == end and active.size == size == active.log_path.stat().st_size
    monkeypatch.undo()
    log.append(make_batch(2, 200), leader_epoch=0, now_ms=0)
    assert _read_every_segment(log) == [(0, 1), (2, 3)]
    assert active.offset_index.entries == 1
    log.close()


def test_a_deleted_log_gives_its_descriptors_back_at_once(tmp_path: Path, make_batch, readers) -> None:
    from trafka.storage.manager import LogManager

    manager = LogManager(tmp_path, SMALL)
    manager.load()
    gone = manager.create_log("gone", 0, SMALL, __import__("uuid").uuid4())
    for _ in range(30):
        gone.append(make_batch(2, 40), leader_epoch=0, now_ms=0)
    in_flight = gone.read(0, 100).records
    _read_every_segment(gone)
    assert len(_open_in(tmp_path)) == 5  # the lock, the active segment, two readers, the slice's
    manager.remove_logs("gone").run()
    # only the slice in flight holds a descriptor now, and it still reads
    assert len(_open_in(tmp_path)) == 2 and len(readers) == 0
    assert _offsets(in_flight.read()) == [(0, 1)]
    del in_flight
    assert len(_open_in(tmp_path)) == 1
    manager.close()


def test_reader_cache_shared_by_threads_stays_bounded(tmp_path: Path) -> None:
    import threading

    paths = []
    for n in range(10):
        path = tmp_path / f"{n}.log"
        path.write_bytes(bytes([n]) * 4)
        paths.append(path)
    cache = ReaderCache(3)
    failures: list[BaseException] = []

    def read_all(seed: int) -> None:
        try:
            for i in range(2000):
                n = (i * 7 + seed) % 10
                assert os.pread(cache.get(n, paths[n]).fileno(), 1, 0) == bytes([n])
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    threads = [threading.Thread(target=read_all, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    assert len(cache) == 3
    cache.clear()
    assert _open_in(tmp_path) == []
