"""A replicated cluster: a real ZooKeeper and three trafka processes, driven by unmodified clients.

Topics with replication factor 3 are produced to with acks=all and consumed by several clients;
every replica ends byte-identical to its leader. A partition leader killed with SIGKILL while an
idempotent producer writes with acks=all costs no acknowledged record and duplicates none; the
killed broker comes back, catches up and rejoins the ISR.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.clients import ConfluentClient, KafkaPythonClient, Message
from compat_tests.cluster import Cluster, Writer, replicas_identical, start_cluster, wait


@pytest.fixture
def cluster(zookeeper, tmp_path: Path) -> Iterator[Cluster]:
    """Three brokers (ids 1, 2, 3) on the module's ZooKeeper, in a chroot of their own."""
    cluster = start_cluster(zookeeper, tmp_path)
    try:
        yield cluster
    finally:
        cluster.close()


def test_brokers_form_one_cluster(cluster: Cluster):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": cluster.brokers[0].bootstrap})
    metadata = admin.list_topics(timeout=10)
    assert sorted(metadata.brokers) == [1, 2, 3]
    assert {(b.host, b.port) for b in metadata.brokers.values()} == {(b.host, b.port) for b in cluster.brokers}
    assert metadata.controller_id in (1, 2, 3)
    assert metadata.cluster_id  # the same id on every broker
    ids = {AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(timeout=10).cluster_id for b in cluster.brokers}
    assert ids == {metadata.cluster_id}


def test_replicated_topic_is_served_by_every_client_and_replicas_end_identical(cluster: Cluster):
    topic = "orders"
    confluent = ConfluentClient(cluster.bootstrap)
    confluent.create_topic(topic, 3, replication_factor=3)
    layout = wait(lambda: cluster.metadata(topic) if len(cluster.metadata(topic)) == 3 else None, "metadata")
    for leader, replicas, isr in layout.values():
        assert sorted(replicas) == [1, 2, 3] and isr == [1, 2, 3] and leader == replicas[0]
    assert len({leader for leader, _, _ in layout.values()}) == 3  # leaders spread over the brokers

    first = [Message(key=f"k{i}".encode(), value=f"confluent-{i}".encode()) for i in range(150)]
    second = [Message(key=f"k{i}".encode(), value=f"kafka-python-{i}".encode()) for i in range(150)]
    confluent.produce(topic, first, compression="lz4", acks="all")
    KafkaPythonClient(cluster.bootstrap).produce(topic, second, acks="all")

    for client in (confluent, KafkaPythonClient(cluster.bootstrap)):
        records = client.consume(topic, 300)
        assert sorted(r.value for r in records) == sorted(m.value for m in first + second)
        for partition in range(3):
            offsets = [r.offset for r in records if r.partition == partition]
            assert offsets == list(range(len(offsets)))
            values = [r.value for r in records if r.partition == partition]
            # Each producer's records keep their order within a partition.
            for prefix in (b"confluent-", b"kafka-python-"):
                numbers = [int(v[len(prefix):]) for v in values if v.startswith(prefix)]
                assert numbers == sorted(numbers)
    wait(lambda: replicas_identical(cluster, topic, 3), "replicas byte-identical to their leaders")


def test_killing_the_leader_loses_no_acknowledged_record(cluster: Cluster):
    topic = "payments"
    ConfluentClient(cluster.bootstrap).create_topic(topic, 1, replication_factor=3,
                                                   configs={"min.insync.replicas": "2"})
    leader, _, isr = wait(lambda: cluster.metadata(topic).get(0), "metadata")
    assert isr == [1, 2, 3]
    writer = Writer(cluster.bootstrap, topic).start()
    try:
        wait(lambda: len(writer.acknowledged) >= 300, "300 acknowledged records")
        victim = cluster.broker(leader)
        victim.kill()
        acknowledged_at_kill = len(writer.acknowledged)
        new_leader = wait(lambda: (lambda m: m[0] if m[0] not in (-1, leader) else None)(
            cluster.metadata(topic)[0]), "a new leader")
        wait(lambda: len(writer.acknowledged) >= acknowledged_at_kill + 300, "300 more acknowledged records")
    finally:
        writer.stop()
    assert not writer.failed
    assert new_leader != leader

    records = ConfluentClient(cluster.bootstrap).consume(topic, len(writer.acknowledged), partitions=[0])
    values = [int(r.value) for r in records]
    assert len(values) == len(set(values)), "duplicates"
    assert values == sorted(values), "out of order"
    assert set(writer.acknowledged) <= set(values), "acknowledged records lost"
    assert values == list(range(len(values))), "a gap"

    victim.start(victim.port)
    wait(lambda: cluster.metadata(topic)[0][2] == [1, 2, 3], "the restarted broker back in the ISR")
    wait(lambda: replicas_identical(cluster, topic, 1), "replicas byte-identical after the restart")
