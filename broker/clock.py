"""Time on cue: a broker started with ``--controllable-clock`` lets a test move its time forward
(``TrafkaBroker.advance(seconds)``, ``POST /clock/advance`` on the control endpoint, ``trafka control clock
advance``), and whatever the broker decides by time happens as if that time had passed.

Both of the broker's clocks move together:

- its wall clock (trafka.storage.clock), which every decision by wall time reads: retention by time and
  ``delete.retention.ms``, segment rolls, producer id and transactional id expiry, offsets retention;
- its monotonic clock, the one Trio's timers run on: such a broker runs on a Trio clock that a test can jump
  (Trio's ``MockClock``, running at the real rate), so every sleep, timeout and deadline in the broker — group
  session and rebalance timeouts, transaction timeouts, share record locks, connections' idle timeouts, the
  periodic checks — ends as if the time had passed.

Moving the clock back is not offered (Kafka's decisions assume time moves forward). Record timestamps that clients
set are never touched. What is outside the broker's process keeps the real time: ZooKeeper sessions in a cluster,
clients' own timeouts.
"""
from __future__ import annotations

import trio
from trio.testing import MockClock

from trafka.storage import clock as wall_clock


class ControllableClock:
    """The clocks of a broker whose time a test may advance (one per process, as the broker is)."""

    def __init__(self) -> None:
        #: The clock to run Trio on.
        self.trio_clock = MockClock(rate=1.0)

    def advance(self, seconds: float) -> int:
        """Move the broker's time ``seconds`` forward (from within its Trio loop); returns its wall time, in ms."""
        if not seconds >= 0:
            raise ValueError("the clock moves forward only: seconds >= 0")
        ms = round(seconds * 1000)
        wall_clock.advance(ms)
        self.trio_clock.jump(ms / 1000)
        return wall_clock.now_ms()

    @staticmethod
    def state() -> dict[str, object]:
        return {"now_ms": wall_clock.now_ms(), "advanced_ms": wall_clock.advanced_ms(),
                "monotonic_s": trio.current_time()}


#: The process's controllable clock, when the broker was started with one.
current: ControllableClock | None = None


def install() -> ControllableClock:
    """Make this process's broker one with a controllable clock; run Trio with ``current.trio_clock``."""
    global current
    current = ControllableClock()
    return current
