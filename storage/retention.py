"""Retention: how many of a log's oldest segments have outlived its ``retention.ms`` or stand beyond its
``retention.bytes``, as a pure function of the segments, the config and the time.

As Kafka decides it: only whole segments from the oldest on, and only below the high watermark (the log
start offset never passes it); a segment's age is measured from the largest timestamp in it (from its
file's last change when no record has one); size retention deletes the oldest segments while what stays
is still at least ``retention.bytes``. The last segment may go too when all of it has expired (the log
then rolls a new one), but never when it is empty. -1 means no limit.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple


class SegmentSummary(NamedTuple):
    """What retention needs of a segment, besides its largest timestamp (asked only of the segments
    the time check reaches)."""

    base_offset: int
    size: int


def expired_segments(
    segments: Sequence[SegmentSummary],
    largest_timestamp: Callable[[int], int],
    *,
    log_end_offset: int,
    high_watermark: int,
    retention_ms: int,
    retention_bytes: int,
    now_ms: int,
) -> int:
    """How many segments, from the oldest, retention deletes: first those beyond the size, then, from
    there, those past the time. ``largest_timestamp(i)`` is segment i's, in ms."""

    def deletable(index: int) -> bool:
        last = index + 1 == len(segments)
        upper_bound = log_end_offset if last else segments[index + 1].base_offset
        return upper_bound <= high_watermark and not (last and segments[index].size == 0)

    count = 0
    if retention_bytes >= 0:
        over = sum(segment.size for segment in segments) - retention_bytes
        while count < len(segments) and deletable(count) and segments[count].size <= over:
            over -= segments[count].size
            count += 1
    if retention_ms >= 0:
        while (count < len(segments) and deletable(count)
               and now_ms - largest_timestamp(count) > retention_ms):
            count += 1
    return count
