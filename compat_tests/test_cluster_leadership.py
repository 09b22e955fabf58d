"""Leadership on demand in a replicated cluster: a broker that comes back after a crash gets its
preferred partitions back through ElectLeaders (kafka-python's and confluent-kafka's admin clients,
as kafka-leader-election.sh asks), or by itself through the controller's automatic leader rebalance."""

from __future__ import annotations

from pathlib import Path

from compat_tests.clients import ConfluentClient
from compat_tests.cluster import start_cluster, wait


def _crash_and_return(cluster, topic: str) -> tuple[int, int]:
    """Kill partition 0's leader and bring it back once another replica leads; (it, the new leader)."""
    leader = cluster.metadata(topic)[0][0]
    victim = cluster.broker(leader)
    victim.kill()
    new_leader = wait(lambda: (lambda m: m[0] if m[0] not in (-1, leader) else None)(cluster.metadata(topic)[0]),
                      "a new leader")
    victim.start(victim.port)
    wait(lambda: cluster.metadata(topic)[0][2] == [1, 2, 3], "the restarted broker back in the ISR")
    return leader, new_leader


def test_preferred_leader_election_on_demand(zookeeper, tmp_path: Path):
    from confluent_kafka import ElectionType, TopicPartition
    from kafka.admin import KafkaAdminClient

    cluster = start_cluster(zookeeper, tmp_path, {"auto.leader.rebalance.enable": "false"})
    try:
        ConfluentClient(cluster.bootstrap).create_topic("elected", 2, replication_factor=3)
        wait(lambda: len(cluster.metadata("elected")) == 2, "metadata")
        preferred, _ = _crash_and_return(cluster, "elected")
        assert cluster.metadata("elected")[0][0] != preferred  # leadership stays where failover put it

        # Partition 1 has its preferred leader already: nothing to elect there.
        admin = cluster.admin()  # (kept: the future needs its client alive)
        future = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("elected", 0),
                                                              TopicPartition("elected", 1)])
        results = future.result(30)
        assert results[TopicPartition("elected", 0)] is None
        assert results[TopicPartition("elected", 1)].name() == "ELECTION_NOT_NEEDED"
        # Every broker's metadata follows the controller's write (through its ZooKeeper watch) soon after.
        wait(lambda: cluster.metadata("elected")[0][0] == preferred, "the preferred leader in the metadata")

        # An unclean election where every partition has a live leader changes nothing either.
        kafka_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            response = kafka_admin.elect_leaders(1, {"elected": [0, 1]}, raise_errors=False)
        finally:
            kafka_admin.close()
        codes = {p.partition_id: p.error_code for t in response.replica_election_results for p in t.partition_result}
        assert codes == {0: 84, 1: 84}  # ELECTION_NOT_NEEDED
    finally:
        cluster.close()


def test_the_controller_gives_preferred_leaders_their_partitions_back(zookeeper, tmp_path: Path):
    cluster = start_cluster(zookeeper, tmp_path, {"leader.imbalance.check.interval.seconds": 1})
    try:
        ConfluentClient(cluster.bootstrap).create_topic("rebalanced", 3, replication_factor=3)
        layout = wait(lambda: (lambda m: m if len(m) == 3 else None)(cluster.metadata("rebalanced")), "metadata")
        preferred = {p: replicas[0] for p, (_, replicas, _) in layout.items()}
        _crash_and_return(cluster, "rebalanced")
        wait(lambda: {p: leader for p, (leader, _, _) in cluster.metadata("rebalanced").items()} == preferred,
             "every partition led by its preferred replica again")
    finally:
        cluster.close()
