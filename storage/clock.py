"""The broker's wall clock, in milliseconds since the epoch: the system's, moved forward by what a test advanced a
broker with a controllable clock by (``trafka --controllable-clock``; trafka.broker.clock). Every decision the
broker makes by wall time reads it (retention by time, segment rolls, producer id and transactional id expiry,
group session and offsets expiry, transaction timeouts); record timestamps that clients set are never touched.

One clock per process: a broker process is one broker. Its monotonic time, which Trio's timers run on, moves
forward with it (trafka.broker.clock).
"""
from __future__ import annotations

import time

_advanced_ms = 0


def now_ms() -> int:
    """The broker's time, in ms since the epoch."""
    return time.time_ns() // 1_000_000 + _advanced_ms


def advanced_ms() -> int:
    """How far the clock has been moved ahead of the system's, in ms."""
    return _advanced_ms


def advance(ms: int) -> None:
    """Move the clock ``ms`` forward (never back)."""
    global _advanced_ms
    if ms < 0:
        raise ValueError("the clock moves forward only")
    _advanced_ms += ms
