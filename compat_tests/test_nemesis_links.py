"""The cluster under links that fail in part (compat_tests.nemesis, on a test network of its own; test_nemesis.py
says what runs beside and what is checked): a broker cut off from ZooKeeper only, the controller cut off, a leader
whose packets to its followers are dropped one way, 30% of the packets between brokers lost at random, the links
between brokers slowed by 80-120 ms each way. A module of its own, so that it runs beside test_nemesis.py."""
from __future__ import annotations

from pathlib import Path

from compat_tests import nemesis


def test_links_that_fail_in_part(nemesis_network, tmp_path: Path):
    nemesis.run_briefly(nemesis_network, tmp_path, ["zookeeper-isolated", "controller-isolated", "one-way", "lossy",
                                                    "slow-links"])
