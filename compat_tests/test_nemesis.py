"""The cluster under the faults that are not crashes (Jepsen's nemeses), on a test network of its own
(compat_tests.netns): ZooKeeper and three brokers each on a host of their own, the clients on this process's host.

While idempotent acks=all producers (``min.insync.replicas=2``, unclean election off) write to every partition, one
fault after another, each healed before the next:

1. a leader cut off from its followers, not from ZooKeeper nor its clients: it keeps the leadership in ZooKeeper,
   shrinks its ISR to itself and refuses writes it cannot replicate (NOT_ENOUGH_REPLICAS) until healed;
2. a leader cut off from everything: its ZooKeeper session expires, another replica of the ISR leads, and the
   deposed leader, healed, truncates whatever it took alone and follows;
3. a follower cut off from everything: out of the ISR, back once healed;
4. the cluster split into a majority (ZooKeeper, two brokers, the clients) and a minority (one broker);
5. a leader paused (SIGSTOP) past its ZooKeeper session, then resumed: it finds itself deposed.

Then every partition returns to a full ISR, every acknowledged record is read back exactly once in its partition's
order, with no gap, and the replicas are byte-identical. ``TRAFKA_NEMESIS_SEED`` replays a run's choices."""
from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests import netns
from compat_tests.clients import ConfluentClient
from compat_tests.cluster import Writer, check_sequence, replicas_identical, start_cluster, wait
from compat_tests.zookeeper import ZooKeeperServer

why_not = netns.available()
if why_not is not None:
    pytest.skip(f"no test network here: {why_not}", allow_module_level=True)

TOPIC = "nemesis"
PARTITIONS = 3
BROKERS = (1, 2, 3)
#: How long each fault lasts: longer than the ZooKeeper session (6 s) where a leader must be deposed.
FAULT_S = 8.0
RECOVERY_S = 60.0


@pytest.fixture
def network() -> Iterator[netns.TestNetwork]:
    with netns.TestNetwork(["zk", *(f"b{n}" for n in BROKERS)]) as net:
        yield net


def _leaders(cluster) -> dict[int, int]:
    return {partition: leader for partition, (leader, _, _) in cluster.metadata(TOPIC).items()}


def _full_isrs(cluster) -> bool:
    return all(isr == list(BROKERS) and leader in BROKERS for leader, _, isr in cluster.metadata(TOPIC).values())


def test_acknowledged_records_survive_partitions_and_pauses(network: netns.TestNetwork, tmp_path: Path):
    seed = int(os.environ.get("TRAFKA_NEMESIS_SEED", time.time_ns() % 1_000_000))
    chance = random.Random(seed)
    zookeeper = ZooKeeperServer(tmp_path / "zookeeper", host=network.address("zk"),
                                wrap=lambda command: network.command("zk", command)).start()
    cluster = None
    writers: list[Writer] = []
    history: list[str] = [f"seed {seed}"]
    try:
        cluster = start_cluster(zookeeper, tmp_path / "cluster", {"unclean.leader.election.enable": "false"},
                                network=network)
        ConfluentClient(cluster.bootstrap).create_topic(TOPIC, PARTITIONS, replication_factor=3,
                                                        configs={"min.insync.replicas": "2"})
        wait(lambda: _full_isrs(cluster), "full ISRs at first")
        writers = [Writer(cluster.bootstrap, TOPIC, partition, **{"message.timeout.ms": 300_000}).start()
                   for partition in range(PARTITIONS)]
        for writer in writers:
            writer.wait_for(20, "the first acknowledged records")
        brokers = {n: cluster.broker(n) for n in BROKERS}

        def host(node_id: int) -> str:
            return f"b{node_id}"

        def others(node_id: int) -> list[str]:
            return [host(n) for n in BROKERS if n != node_id]

        def recovered(what: str) -> None:
            wait(lambda: _full_isrs(cluster), f"full ISRs after {what} ({'; '.join(history)})", timeout=RECOVERY_S)
            for writer in writers:
                writer.wait_for(10, f"records acknowledged after {what}")

        def run(what: str, make_fault) -> None:
            history.append(what)
            with network.fault(seconds=FAULT_S * 3):  # (healed then at the latest, whatever happens)
                make_fault()
                time.sleep(FAULT_S)
            recovered(what)

        leader = _leaders(cluster)[chance.randrange(PARTITIONS)]
        run(f"leader {leader} cut off from its followers", lambda: network.isolate(host(leader), others(leader)))

        leader = _leaders(cluster)[chance.randrange(PARTITIONS)]
        run(f"leader {leader} cut off from everything", lambda: network.isolate(host(leader)))

        leaders = set(_leaders(cluster).values())
        follower = chance.choice([n for n in BROKERS if n not in leaders] or list(BROKERS))
        run(f"broker {follower} cut off from everything", lambda: network.isolate(host(follower)))

        minority = chance.choice(BROKERS)
        run(f"broker {minority} split from the majority",
            lambda: network.split([host(minority)], ["zk", netns.CLIENT, *others(minority)]))

        leader = _leaders(cluster)[chance.randrange(PARTITIONS)]
        history.append(f"leader {leader} paused")
        netns.pause(brokers[leader].pid)
        try:
            time.sleep(FAULT_S)
        finally:
            netns.resume(brokers[leader].pid)
        recovered(f"leader {leader} paused")
    finally:
        for writer in writers:
            writer.stop()
        try:
            if cluster is not None and writers:
                print("; ".join(history))
                for partition, writer in enumerate(writers):
                    assert not writer.failed, f"partition {partition}: {writer.failed[:3]} ({'; '.join(history)})"
                    records = ConfluentClient(cluster.bootstrap).consume(TOPIC, len(writer.acknowledged),
                                                                         partitions=[partition], timeout=60)
                    check_sequence([int(r.value) for r in records], writer.acknowledged)
                assert wait(lambda: replicas_identical(cluster, TOPIC, PARTITIONS), "byte-identical replicas")
        finally:
            if cluster is not None:
                cluster.close()
            zookeeper.close()
