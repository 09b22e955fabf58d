"""A replicated cluster: a real ZooKeeper and three trafka processes, driven by unmodified clients.

Topics with replication factor 3 are produced to with acks=all and consumed by several clients;
every replica ends byte-identical to its leader. A partition leader killed with SIGKILL while an
idempotent producer writes with acks=all costs no acknowledged record and duplicates none; the
killed broker comes back, catches up and rejoins the ISR.
"""
from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from compat_tests.clients import ConfluentClient, KafkaPythonClient, Message
from compat_tests.harness import BrokerProcess

TIMEOUT = 60.0


class Cluster:
    def __init__(self, brokers: list[BrokerProcess]) -> None:
        self.brokers = brokers

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{b.host}:{b.port}" for b in self.brokers if b.running)

    def broker(self, node_id: int) -> BrokerProcess:
        return next(b for b in self.brokers if b.node_id == node_id)

    def metadata(self, topic: str):
        """(leader, replicas, isr) of each partition of ``topic``, as librdkafka sees it."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        found = admin.list_topics(topic, timeout=10).topics[topic]
        return {p.id: (p.leader, list(p.replicas), sorted(p.isrs)) for p in found.partitions.values()}


@pytest.fixture
def cluster(zookeeper, tmp_path: Path) -> Iterator[Cluster]:
    chroot = f"/trafka-{uuid.uuid4().hex[:8]}"
    brokers = [
        BrokerProcess(tmp_path / f"broker{node_id}", name=f"broker{node_id}", overrides={
            "broker.id": node_id,
            "zookeeper.connect": f"{zookeeper.connect_string}{chroot}",
            "zookeeper.session.timeout.ms": 6000,
            "replica.lag.time.max.ms": 4000,
            "replica.fetch.backoff.ms": 200,
            "offsets.topic.num.partitions": 3,
        })
        for node_id in (1, 2, 3)
    ]
    try:
        for broker in brokers:
            broker.start()
        yield Cluster(brokers)
    finally:
        for broker in brokers:
            broker.close()


def _wait(condition: Callable[[], object], what: str, timeout: float = TIMEOUT) -> object:
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = condition()
        except Exception as exc:  # a broker in the middle of a change answers with an error: look again
            result, last = None, exc
        else:
            last = None
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen in {timeout} s (last error: {last!r})")
        time.sleep(0.1)


def _segments(broker: BrokerProcess, topic: str, partition: int) -> dict[str, bytes]:
    directory = broker.data_dir / f"{topic}-{partition}"
    return {path.name: path.read_bytes() for path in sorted(directory.glob("*.log"))}


def _replicas_identical(cluster: Cluster, topic: str, partitions: int) -> bool:
    for partition in range(partitions):
        copies = [_segments(broker, topic, partition) for broker in cluster.brokers]
        if not copies[0] or any(copy != copies[0] for copy in copies[1:]):
            return False
    return True


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
    layout = _wait(lambda: cluster.metadata(topic) if len(cluster.metadata(topic)) == 3 else None, "metadata")
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
    _wait(lambda: _replicas_identical(cluster, topic, 3), "replicas byte-identical to their leaders")


class _Writer:
    """An idempotent acks=all producer writing 0, 1, 2, ... to one partition from a thread, keeping what
    was acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, "message.timeout.ms": 60_000, "retry.backoff.ms": 100})
        self.acknowledged: list[int] = []
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _report(self, err, msg) -> None:
        if err is not None:
            self.failed.append(str(err))
        else:
            self.acknowledged.append(int(msg.value()))

    def _run(self) -> None:
        sequence = 0
        while not self._stop.is_set():
            try:
                self.producer.produce(self.topic, value=str(sequence).encode(), partition=0, on_delivery=self._report)
                sequence += 1
            except BufferError:
                pass
            self.producer.poll(0.002)
        self.producer.flush(60)

    def start(self) -> _Writer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(90)


def test_killing_the_leader_loses_no_acknowledged_record(cluster: Cluster):
    topic = "payments"
    ConfluentClient(cluster.bootstrap).create_topic(topic, 1, replication_factor=3,
                                                   configs={"min.insync.replicas": "2"})
    leader, _, isr = _wait(lambda: cluster.metadata(topic).get(0), "metadata")
    assert isr == [1, 2, 3]
    writer = _Writer(cluster.bootstrap, topic).start()
    try:
        _wait(lambda: len(writer.acknowledged) >= 300, "300 acknowledged records")
        victim = cluster.broker(leader)
        victim.kill()
        acknowledged_at_kill = len(writer.acknowledged)
        new_leader = _wait(lambda: (lambda m: m[0] if m[0] not in (-1, leader) else None)(
            cluster.metadata(topic)[0]), "a new leader")
        _wait(lambda: len(writer.acknowledged) >= acknowledged_at_kill + 300, "300 more acknowledged records")
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
    _wait(lambda: cluster.metadata(topic)[0][2] == [1, 2, 3], "the restarted broker back in the ISR")
    _wait(lambda: _replicas_identical(cluster, topic, 1), "replicas byte-identical after the restart")
