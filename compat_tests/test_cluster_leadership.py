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


def test_stale_leader_epochs_and_misdirected_produces_after_a_failover(zookeeper, tmp_path: Path):
    """After a failover, a Fetch with the old leader epoch is fenced and a Produce to a follower is
    refused; from Fetch v12 and Produce v10 the answer names the current leader, before that the
    versions cannot carry it and the answer goes without. The connection serves on."""
    from compat_tests.test_error_paths import BATCH, fetch, fetched, produce, produced
    from compat_tests.wire_client import WireClient
    from trafka.wire.errors import ErrorCode
    from trafka.wire.messages import ApiVersionsRequest

    cluster = start_cluster(zookeeper, tmp_path, {"auto.leader.rebalance.enable": "false"})
    try:
        ConfluentClient(cluster.bootstrap).create_topic("moved", 1, replication_factor=3)
        old_leader = wait(lambda: (lambda m: m[0] if m[2] == [1, 2, 3] else None)(cluster.metadata("moved")[0]),
                          "a full ISR")
        cluster.broker(old_leader).kill()
        new_leader = wait(lambda: (lambda m: m[0] if m[0] not in (-1, old_leader) else None)(
            cluster.metadata("moved")[0]), "a new leader")
        follower = next(b for b in cluster.brokers if b.running and b.node_id != new_leader)
        leader = cluster.broker(new_leader)

        with WireClient(f"{leader.host}:{leader.port}") as client:
            for version in (9, 11, 12):  # (a Fetch names its leader epoch from v9, its topic by id from v13)
                response = client.request(fetch("moved", 0, leader_epoch=0), version)
                assert ErrorCode(fetched(response)) == ErrorCode.FENCED_LEADER_EPOCH, version
                current = response.responses[0].partitions[0].current_leader
                if version >= 12:
                    assert current.leader_id == new_leader and current.leader_epoch >= 1, (version, current)
                else:
                    assert (current.leader_id, current.leader_epoch) == (-1, -1), (version, current)
            assert client.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                                  3).error_code == 0
        with WireClient(f"{follower.host}:{follower.port}") as client:
            for version in (3, 9, 10, 12):
                response = client.request(produce("moved", 0, BATCH), version)
                assert ErrorCode(produced(response)) == ErrorCode.NOT_LEADER_OR_FOLLOWER, version
                current = response.responses[0].partition_responses[0].current_leader
                if version >= 10:
                    assert current.leader_id == new_leader and current.leader_epoch >= 1, (version, current)
                else:
                    assert (current.leader_id, current.leader_epoch) == (-1, -1), version
            assert client.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                                  3).error_code == 0
    finally:
        cluster.close()
