"""A minute of crashes: brokers of a three-broker cluster killed -9 at random every few seconds and
restarted a moment later, while an idempotent acks=all producer writes to each partition. Once the last
broker is back, every partition returns to a full ISR within a bounded time, and nothing acknowledged
is lost. ``TRAFKA_CHAOS_SEED`` replays a run (each run prints its seed and kills)."""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

from compat_tests.clients import ConfluentClient
from compat_tests.cluster import Writer, check_sequence, start_cluster, wait
from compat_tests.harness import BrokerProcess, BrokerStartError

CHAOS_S = 60.0
KILL_EVERY_S = 5.0
#: A follower that has caught up is back in the ISR within this, as with Kafka (replica.lag.time.max.ms
#: is 4 s here); the wait begins once the last restarted broker serves.
FULL_ISR_WITHIN_S = 20.0
PARTITIONS = 3


def restart(broker: BrokerProcess) -> None:
    """Start ``broker`` again on its port. Within ZooKeeper's session timeout of the kill its old
    registration is still there, and the broker refuses to start (as Kafka's does): it is tried again."""
    deadline = time.monotonic() + 30
    while True:
        try:
            broker.start(broker.port)
            return
        except BrokerStartError:
            assert time.monotonic() < deadline, broker.log_tail()
            time.sleep(0.5)


def test_a_minute_of_kill_9_ends_in_full_isrs_and_loses_nothing(zookeeper, tmp_path: Path):
    seed = int(os.environ.get("TRAFKA_CHAOS_SEED", time.time_ns() % 1_000_000))
    chance = random.Random(seed)
    cluster = start_cluster(zookeeper, tmp_path / "cluster")
    try:
        topic = "chaos"
        ConfluentClient(cluster.bootstrap).create_topic(topic, PARTITIONS, replication_factor=3,
                                                        configs={"min.insync.replicas": "2"})
        wait(lambda: all(isr == [1, 2, 3] for _, _, isr in cluster.metadata(topic).values()), "full ISRs at first")
        writers = [Writer(cluster.bootstrap, topic, partition, **{"message.timeout.ms": 300_000}).start()
                   for partition in range(PARTITIONS)]
        kills = []
        try:
            ends = time.monotonic() + CHAOS_S
            while time.monotonic() < ends:
                time.sleep(KILL_EVERY_S - 2.5)
                victim = chance.choice(cluster.brokers)
                victim.kill()
                kills.append(victim.node_id)
                time.sleep(chance.uniform(2.0, 3.0))
                restart(victim)
            restarted = time.monotonic()
            wait(lambda: all(isr == [1, 2, 3] for _, _, isr in cluster.metadata(topic).values()),
                 f"full ISRs after the kills {kills} (seed {seed})", timeout=FULL_ISR_WITHIN_S)
            print(f"seed {seed}: kills {kills}; full ISRs {time.monotonic() - restarted:.1f} s after the last restart")
            for writer in writers:
                writer.wait_for(50, "50 more acknowledged records after the chaos")
        finally:
            for writer in writers:
                writer.stop()
        for partition, writer in enumerate(writers):
            records = ConfluentClient(cluster.bootstrap).consume(topic, len(writer.acknowledged),
                                                                 partitions=[partition], timeout=60)
            check_sequence([int(r.value) for r in records], writer.acknowledged)
    finally:
        cluster.close()
