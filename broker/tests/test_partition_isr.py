"""The leader's view of its followers (broker.partition, broker.replication.manager): a follower that stops
fetching is found lagging after replica.lag.time.max.ms, and is no candidate to join the ISR again until a fetch
shows it caught up, however far its last fetch had come (a dead broker's ISR membership must not flap); a caught-up
follower joins once its broker is registered, and the leader's log says what it waits for."""
from __future__ import annotations

import dataclasses
import logging
import uuid
from pathlib import Path

import trio

from trafka.broker.cluster import BrokerRegistration, PartitionState
from trafka.broker.config import BrokerConfig
from trafka.broker.partition import Partition
from trafka.broker.replication.manager import ReplicaManager
from trafka.storage import clock
from trafka.storage.config import LogConfig
from trafka.storage.log import Log
from trafka.wire.records import SimpleRecord, build_batch

MAX_LAG_MS = 4_000


def _leader(tmp_path: Path) -> Partition:
    log = Log.create(tmp_path / "orders-0", LogConfig(), now_ms=0)
    partition = Partition("orders", uuid.uuid4(), 0, log, 1, replicas=[1, 2, 3])
    partition.set_state(1, 1, [1, 2, 3], [1, 2, 3], now_ms=0)
    return partition


def _fetch(partition: Partition, replica: int, now_ms: int) -> None:
    partition.read_for_follower(replica, partition.log_end_offset, 1 << 20, min_one_batch=True, now_ms=now_ms)


def test_a_follower_that_stopped_fetching_leaves_the_isr_and_does_not_join_it_again(tmp_path):
    partition = _leader(tmp_path)
    partition.append(bytearray(build_batch([SimpleRecord(b"key", b"value")])))
    _fetch(partition, 2, 100)
    _fetch(partition, 3, 100)
    assert partition.high_watermark == 1

    # Follower 3 dies, having fetched all there was; follower 2 goes on fetching.
    _fetch(partition, 2, 5_000)
    assert partition.lagging_replicas(MAX_LAG_MS, 5_000) == [3]
    partition.set_state(1, 1, [1, 2], [1, 2, 3], now_ms=5_000)  # the ISR shrunk
    assert partition.isr_candidates(MAX_LAG_MS, 5_000) == []
    assert partition.isr_candidates(MAX_LAG_MS, 60_000) == []

    # Back, it fetches and is caught up: it may join.
    _fetch(partition, 3, 61_000)
    assert partition.isr_candidates(MAX_LAG_MS, 61_000) == [3]


class _States:
    """The coordination as the replica manager sees it, kept in memory: live brokers and partition states,
    with version-checked writes."""

    def __init__(self, brokers: list[int], state: PartitionState) -> None:
        self.brokers = {node: BrokerRegistration(node, "127.0.0.1", 9000 + node) for node in brokers}
        self.partition_states = {("orders", 0): state}

    async def update_partition_state(self, topic: str, partition: int, state: PartitionState) -> PartitionState:
        current = self.partition_states[(topic, partition)]
        assert state.version == current.version
        written = dataclasses.replace(state, version=current.version + 1)
        self.partition_states[(topic, partition)] = written
        return written


async def _until(condition, timeout_s: float = 5.0) -> None:
    with trio.fail_after(timeout_s):
        while not condition():
            await trio.sleep(0.01)


async def test_a_caught_up_follower_waits_for_its_registration_to_join_the_isr_and_a_long_wait_is_logged(
        tmp_path, caplog, autojump_clock):
    log = Log.create(tmp_path / "orders-0", LogConfig(), now_ms=0)
    partition = Partition("orders", uuid.uuid4(), 0, log, 1, replicas=[1, 2, 3])
    states = _States([1, 2], PartitionState(1, 1, (1, 2), 0, version=0))
    manager = ReplicaManager(BrokerConfig(node_id=1), states)
    caplog.set_level(logging.INFO, logger="trafka.broker.replication.manager")

    def waits() -> list[str]:
        return [r.getMessage() for r in caplog.records if "not registered as live" in r.getMessage()]

    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        manager.apply_state(partition, states.partition_states[("orders", 0)], [1, 2, 3])
        partition.append(bytearray(build_batch([SimpleRecord(b"key", b"value")])))
        _fetch(partition, 2, clock.now_ms())
        # Follower 3 is caught up and fetches every half second, but its broker's registration is not seen.
        for _ in range(3):
            _fetch(partition, 3, clock.now_ms())
            await trio.sleep(0.5)
        assert states.partition_states[("orders", 0)].isr == (1, 2)
        assert waits() == []  # a moment's wait (a watch late) is not logged
        for _ in range(22):
            _fetch(partition, 3, clock.now_ms())
            await trio.sleep(0.5)
        assert states.partition_states[("orders", 0)].isr == (1, 2)
        assert len(waits()) == 2  # after 2 s, and again 10 s later
        assert waits()[0].startswith("follower 3 of orders-0 has caught up but is not registered as live: it joins "
                                     "the ISR once its registration is seen (for ")

        states.brokers[3] = BrokerRegistration(3, "127.0.0.1", 9003)
        _fetch(partition, 3, clock.now_ms())
        await _until(lambda: states.partition_states[("orders", 0)].isr == (1, 2, 3))
        nursery.cancel_scope.cancel()
