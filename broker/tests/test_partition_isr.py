"""The leader's view of its followers (broker.partition): a follower that stops fetching is found lagging
after replica.lag.time.max.ms, and is no candidate to join the ISR again until a fetch shows it caught up,
however far its last fetch had come (a dead broker's ISR membership must not flap)."""
from __future__ import annotations

import uuid
from pathlib import Path

from trafka.broker.partition import Partition
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
