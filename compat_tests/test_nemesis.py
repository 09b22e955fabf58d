"""The cluster under the faults that are not crashes (Jepsen's nemeses; compat_tests.nemesis), on a test network of
its own (trafka.broker.testing.network): ZooKeeper and three brokers each on a host of their own, the clients on
this process's host.

While idempotent acks=all producers (``min.insync.replicas=2``, unclean election off) write to every partition, a
transactional producer commits and aborts transactions, and a read_committed consumer group reads them and commits
its offsets, one fault after another, each healed before the next, and every ISR full again before the next:

- ``test_leaders_and_followers_cut_off``: a leader cut off from its followers but not from ZooKeeper (it keeps the
  leadership, shrinks its ISR to itself and refuses what it cannot replicate, NOT_ENOUGH_REPLICAS), a leader cut
  off from everything (deposed once its session expires; healed, it truncates what it took alone and follows), a
  follower cut off, a minority split off, a leader paused (SIGSTOP) past its session and resumed;
- test_nemesis_links.py: a broker cut off from ZooKeeper only, the controller cut off, a leader whose packets to
  its followers are dropped one way, 30% of the packets between brokers lost at random, the links between brokers
  slowed by 80-120 ms each way.

Then nothing acknowledged is lost, repeated or reordered, the replicas are byte-identical, every committed
transaction is read whole and no aborted one, and the group's committed offsets never went back.
``TRAFKA_NEMESIS_SEED`` replays a run's choices. ``python -m bench --nemesis`` runs the same for longer, beside
Apache Kafka 3.9."""
from __future__ import annotations

from pathlib import Path

from compat_tests import nemesis


def test_leaders_and_followers_cut_off(nemesis_network, tmp_path: Path):
    nemesis.run_briefly(nemesis_network, tmp_path, ["leader-cut-from-followers", "leader-isolated",
                                                    "follower-isolated", "minority", "leader-paused"])
