"""The cluster under the faults that are not crashes (Jepsen's nemeses; compat_tests.nemesis), on a test network of
its own (trafka.broker.testing.network): ZooKeeper and three brokers each on a host of their own, the clients on this process's
host.

While idempotent acks=all producers (``min.insync.replicas=2``, unclean election off) write to every partition, a
transactional producer commits and aborts transactions, and a read_committed consumer group reads them and commits
its offsets, one fault after another, each healed before the next, and every ISR full again before the next:

- ``test_leaders_and_followers_cut_off``: a leader cut off from its followers but not from ZooKeeper (it keeps the
  leadership, shrinks its ISR to itself and refuses what it cannot replicate, NOT_ENOUGH_REPLICAS), a leader cut
  off from everything (deposed once its session expires; healed, it truncates what it took alone and follows), a
  follower cut off, a minority split off, a leader paused (SIGSTOP) past its session and resumed;
- ``test_links_that_fail_in_part``: a broker cut off from ZooKeeper only, the controller cut off, a leader whose
  packets to its followers are dropped one way, 30% of the packets between brokers lost at random, the links
  between brokers slowed by 80-120 ms each way.

Then nothing acknowledged is lost, repeated or reordered, the replicas are byte-identical, every committed
transaction is read whole and no aborted one, and the group's committed offsets never went back.
``TRAFKA_NEMESIS_SEED`` replays a run's choices. ``python -m bench --nemesis`` runs the same for longer, beside
Apache Kafka 3.9."""
from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from trafka.broker.testing import network as netns
from compat_tests import nemesis

why_not = netns.available()
if why_not is not None:
    pytest.skip(f"no test network here: {why_not}", allow_module_level=True)

#: How long each fault lasts: longer than the ZooKeeper session (6 s) where a leader must be deposed.
FAULT_S = 8.0


@pytest.fixture
def network() -> Iterator[netns.TestNetwork]:
    with netns.TestNetwork(nemesis.HOSTS) as net:
        yield net


def _run(network: netns.TestNetwork, directory: Path, nemeses: list[str]) -> None:
    seed = int(os.environ.get("TRAFKA_NEMESIS_SEED", time.time_ns() % 1_000_000))
    chance = random.Random(seed)
    target = nemesis.start("trafka", network, directory)
    workload = None
    history: list[dict[str, object]] = []
    try:
        workload = nemesis.Workload.start(target.bootstrap)
        for name in nemeses:
            nemesis.apply(target, name, chance, FAULT_S, history, workload=workload)
        result = nemesis.verdict(target, workload)
        print(f"seed {seed}:", [event.get("what") for event in history if event["event"] == "fault"], result)
        assert nemesis.clean(result), (f"seed {seed}", result, history)
    finally:
        if workload is not None:
            workload.stop()
        target.close()


def test_leaders_and_followers_cut_off(network: netns.TestNetwork, tmp_path: Path):
    _run(network, tmp_path, ["leader-cut-from-followers", "leader-isolated", "follower-isolated", "minority",
                             "leader-paused"])


def test_links_that_fail_in_part(network: netns.TestNetwork, tmp_path: Path):
    _run(network, tmp_path, ["zookeeper-isolated", "controller-isolated", "one-way", "lossy", "slow-links"])
