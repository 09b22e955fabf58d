"""The group coordinator's keyed timers (broker.groups.timers), on Trio's mock clock: deadlines fire in
order at their time, a key scheduled again replaces its deadline, a cancelled key never fires, and a
failing callback is logged without stopping the others. No test here waits for real time."""
from __future__ import annotations

import trio
import trio.testing

from trafka.broker.groups.timers import Timers


async def _running(nursery: trio.Nursery) -> Timers:
    timers = Timers()
    await nursery.start(timers.run)
    return timers


async def test_deadlines_fire_in_order_at_their_time(autojump_clock: trio.testing.MockClock):
    fired: list[tuple[str, float]] = []
    async with trio.open_nursery() as nursery:
        timers = await _running(nursery)
        start = trio.current_time()
        for key, delay in (("late", 3000), ("early", 1000), ("middle", 2000)):
            timers.schedule(key, delay, lambda key=key: fired.append((key, trio.current_time() - start)))
        await trio.sleep(5)
        nursery.cancel_scope.cancel()
    assert fired == [("early", 1.0), ("middle", 2.0), ("late", 3.0)]


async def test_scheduling_a_key_again_replaces_its_deadline(autojump_clock: trio.testing.MockClock):
    fired: list[float] = []
    async with trio.open_nursery() as nursery:
        timers = await _running(nursery)
        start = trio.current_time()
        timers.schedule("session", 1000, lambda: fired.append(trio.current_time() - start))
        await trio.sleep(0.8)
        timers.schedule("session", 1000, lambda: fired.append(trio.current_time() - start))  # a heartbeat
        await trio.sleep(0.8)
        assert fired == [] and timers.is_scheduled("session")
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert fired == [1.8]


async def test_a_cancelled_key_never_fires_and_an_earlier_deadline_wakes_the_task(
    autojump_clock: trio.testing.MockClock,
):
    fired: list[str] = []
    async with trio.open_nursery() as nursery:
        timers = await _running(nursery)
        timers.schedule("gone", 500, lambda: fired.append("gone"))
        timers.schedule("far", 10_000, lambda: fired.append("far"))
        timers.cancel("gone")
        await trio.sleep(1)
        timers.schedule("near", 100, lambda: fired.append("near"))  # sooner than the task's sleep
        await trio.sleep(0.2)
        assert fired == ["near"] and len(timers) == 1
        nursery.cancel_scope.cancel()


async def test_a_failing_callback_is_logged_and_the_others_still_fire(autojump_clock, caplog):
    fired: list[str] = []

    def fail() -> None:
        raise RuntimeError("boom")

    async with trio.open_nursery() as nursery:
        timers = await _running(nursery)
        timers.schedule("bad", 100, fail)
        timers.schedule("good", 200, lambda: fired.append("good"))
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert fired == ["good"]
    assert "group coordinator timer 'bad' failed" in caplog.text
