"""Keyed timers for the group coordinator, run by a single Trio task.

Session timeouts, rebalance timeouts and the initial rebalance delay are all deadlines attached to a
key ("heartbeat of member m in group g", "join phase of group g"). Scheduling a key replaces its
previous deadline; cancelling it forgets it. Callbacks are plain functions: they run in the timer
task, one at a time, so they see and change group state without interleaving with anything else.
The task sleeps until the earliest deadline (a cancel scope whose deadline moves as timers are
added), never polling; it follows Trio's clock, so tests drive it with ``trio.testing.MockClock``.
"""
from __future__ import annotations

import heapq
import itertools
import logging
import math
from collections.abc import Callable, Hashable

import trio

log = logging.getLogger(__name__)


class Timers:
    def __init__(self) -> None:
        self._entries: dict[Hashable, tuple[float, int, Callable[[], object]]] = {}
        self._heap: list[tuple[float, int, Hashable]] = []
        self._sequence = itertools.count()
        self._sleep: trio.CancelScope | None = None

    def schedule(self, key: Hashable, delay_ms: float, callback: Callable[[], object]) -> None:
        """Run ``callback`` ``delay_ms`` from now, replacing whatever ``key`` was scheduled for."""
        deadline = trio.current_time() + max(delay_ms, 0) / 1000.0
        sequence = next(self._sequence)
        self._entries[key] = (deadline, sequence, callback)
        heapq.heappush(self._heap, (deadline, sequence, key))
        if self._sleep is not None and deadline < self._sleep.deadline:
            self._sleep.deadline = deadline

    def cancel(self, key: Hashable) -> None:
        self._entries.pop(key, None)

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            self._fire_due()
            with trio.CancelScope(deadline=self._next_deadline()) as self._sleep:
                await trio.sleep_forever()
            self._sleep = None

    def _next_deadline(self) -> float:
        heap = self._heap
        while heap:
            deadline, sequence, key = heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry[1] == sequence:
                return deadline
            heapq.heappop(heap)  # cancelled or rescheduled
        return math.inf

    def _fire_due(self) -> None:
        now = trio.current_time()
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, sequence, key = heapq.heappop(heap)
            entry = self._entries.get(key)
            if entry is None or entry[1] != sequence:
                continue
            del self._entries[key]
            try:
                entry[2]()
            except Exception:
                log.exception("group coordinator timer %r failed", key)
