"""Blocks reserved ahead of appends: the file's size never shows them, and they are given back when the
segment stops taking appends, is closed, or is reopened after a crash."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from storage import reserve
from storage.config import LogConfig
from storage.segment import RESERVE_MIN_BYTES, LogSegment
from storage.tests.test_segment import _fill

CONFIG = LogConfig(segment_bytes=256 * 1024 * 1024)


def allocated(path: Path) -> int:
    return os.stat(path).st_blocks * 512


@pytest.fixture
def segment(tmp_path: Path) -> LogSegment:
    directory = tmp_path / "t-0"
    directory.mkdir()
    probe = directory / "probe"
    with open(probe, "wb") as f:
        if not reserve.reserve(f.fileno(), 0, 4096):
            pytest.skip(f"this file system cannot reserve blocks past the end of a file ({tmp_path})")
    probe.unlink()
    return LogSegment(directory, 0, CONFIG, now_ms=0)


def test_appends_reserve_ahead_without_changing_the_file_size(segment: LogSegment, make_batch) -> None:
    _fill(segment, make_batch, 10)
    assert os.path.getsize(segment.log_path) == segment.size
    assert allocated(segment.log_path) >= RESERVE_MIN_BYTES
    # Reads see exactly the batches appended, nothing of the reserved range.
    assert [b.position for b in segment.batch_positions()][-1] < segment.size
    assert segment.slice_from(next(segment.batch_positions()), 1 << 30).size == segment.size


def test_a_segment_that_stops_taking_appends_gives_its_reservation_back(segment: LogSegment, make_batch) -> None:
    _fill(segment, make_batch, 10)
    segment.on_become_inactive()
    assert allocated(segment.log_path) < RESERVE_MIN_BYTES
    assert os.path.getsize(segment.log_path) == segment.size


def test_close_gives_the_reservation_back(segment: LogSegment, make_batch) -> None:
    _fill(segment, make_batch, 10)
    path = segment.log_path
    segment.close()
    assert allocated(path) < RESERVE_MIN_BYTES


def test_reopening_after_a_crash_gives_a_leftover_reservation_back(segment: LogSegment, make_batch) -> None:
    _fill(segment, make_batch, 10)
    size = segment.size
    segment.close_handles()  # the process dies: nothing is trimmed
    assert allocated(segment.log_path) >= RESERVE_MIN_BYTES
    reopened = LogSegment(segment.directory, 0, CONFIG, now_ms=0)
    assert reopened.size == size
    assert allocated(reopened.log_path) < RESERVE_MIN_BYTES
    reopened.close()


def test_reservations_grow_with_the_data_and_stop_at_segment_bytes(tmp_path: Path, make_batch) -> None:
    directory = tmp_path / "t-0"
    directory.mkdir()
    small = LogSegment(directory, 0, LogConfig(segment_bytes=2 * RESERVE_MIN_BYTES), now_ms=0)
    _fill(small, make_batch, 3)
    if allocated(small.log_path) < RESERVE_MIN_BYTES:
        pytest.skip("this file system cannot reserve blocks past the end of a file")
    assert allocated(small.log_path) <= 2 * RESERVE_MIN_BYTES + 4096
    small.close()
