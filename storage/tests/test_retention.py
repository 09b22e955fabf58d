"""Retention as a pure function of the segments, the config and the time (storage.retention)."""
from __future__ import annotations

import pytest

from trafka.storage.retention import SegmentSummary, expired_segments

# Three full segments of 100 bytes, 10 records each, and the active one holding 5 (offsets 30-34).
SEGMENTS = [SegmentSummary(0, 100), SegmentSummary(10, 100), SegmentSummary(20, 100), SegmentSummary(30, 50)]
TIMESTAMPS = [1_000, 2_000, 3_000, 4_000]


def expired(*, retention_ms: int = -1, retention_bytes: int = -1, now_ms: int = 10_000, high_watermark: int = 35,
            segments=SEGMENTS, log_end_offset: int = 35) -> int:
    asked = []

    def largest_timestamp(index: int) -> int:
        asked.append(index)
        return TIMESTAMPS[index]

    count = expired_segments(segments, largest_timestamp, log_end_offset=log_end_offset,
                             high_watermark=high_watermark, retention_ms=retention_ms,
                             retention_bytes=retention_bytes, now_ms=now_ms)
    assert asked == sorted(set(asked)) and len(asked) <= count + 1  # timestamps asked for as the check walks
    return count


@pytest.mark.parametrize(
    ("retention_ms", "now_ms", "count"),
    [
        (-1, 10_000, 0),          # unlimited
        (8_500, 10_000, 1),       # 9,000 ms old: only the first
        (7_000, 10_000, 2),       # strictly older than retention.ms: 3,000 ms is not past 7,000 ms
        (6_500, 10_000, 3),
        (1_000, 10_000, 4),       # the active segment too, all of it expired (the log rolls)
        (9_000, 10_000, 0),       # exactly retention.ms old is kept
    ],
)
def test_time(retention_ms, now_ms, count):
    assert expired(retention_ms=retention_ms, now_ms=now_ms) == count


@pytest.mark.parametrize(
    ("retention_bytes", "count"),
    [(-1, 0), (350, 0), (250, 1), (150, 2), (149, 2), (50, 3), (0, 4)],
)
def test_size_keeps_at_least_retention_bytes(retention_bytes, count):
    assert expired(retention_bytes=retention_bytes) == count


def test_size_first_then_time_from_there():
    assert expired(retention_bytes=250, retention_ms=7_500) == 2  # 1 by size, then the second by time


def test_nothing_at_or_above_the_high_watermark():
    assert expired(retention_ms=0, high_watermark=20) == 2
    assert expired(retention_ms=0, high_watermark=34) == 3  # the active segment ends at 35


def test_an_empty_last_segment_is_never_deleted():
    rolled = SEGMENTS[:3] + [SegmentSummary(30, 0)]
    assert expired(retention_ms=0, segments=rolled, log_end_offset=30, high_watermark=30) == 3
