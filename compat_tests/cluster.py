"""What the cluster tests share: three trafka processes on one real ZooKeeper (a chroot of their own),
a look at the cluster as librdkafka sees it, waiting for a condition, replicas compared byte for byte,
and an idempotent acks=all producer that keeps what was acknowledged.
"""
from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from compat_tests.harness import BrokerProcess

TIMEOUT = 60.0

#: Short timeouts, so that a dead broker is noticed in seconds: its ZooKeeper session expires after
#: 6 s, and a follower that stopped fetching leaves the ISR after 4 s.
CLUSTER_SETTINGS: dict[str, object] = {
    "zookeeper.session.timeout.ms": 6000,
    "replica.lag.time.max.ms": 4000,
    "replica.fetch.backoff.ms": 200,
    "offsets.topic.num.partitions": 3,
}


class Cluster:
    def __init__(self, brokers: list[BrokerProcess], connect: str = "") -> None:
        self.brokers = brokers
        #: ``zookeeper.connect`` of the brokers, chroot included.
        self.connect = connect

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{b.host}:{b.port}" for b in self.brokers if b.running)

    def broker(self, node_id: int) -> BrokerProcess:
        return next(b for b in self.brokers if b.node_id == node_id)

    def admin(self):
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap})

    def metadata(self, topic: str):
        """(leader, replicas, isr) of each partition of ``topic``, as librdkafka sees it."""
        found = self.admin().list_topics(topic, timeout=10).topics[topic]
        return {p.id: (p.leader, list(p.replicas), sorted(p.isrs)) for p in found.partitions.values()}

    def partition_errors(self, topic: str) -> dict[int, str | None]:
        """The error of each partition of ``topic`` in a Metadata response (None where there is none)."""
        found = self.admin().list_topics(topic, timeout=10).topics[topic]
        return {p.id: (p.error.name() if p.error is not None else None) for p in found.partitions.values()}

    def controller_id(self) -> int:
        return self.admin().list_topics(timeout=10).controller_id

    def live_broker_ids(self) -> set[int]:
        return set(self.admin().list_topics(timeout=10).brokers)

    def close(self) -> None:
        for broker in self.brokers:
            broker.close()


def start_cluster(zookeeper, directory: Path, overrides: Mapping[str, object] | None = None,
                  node_ids: Iterable[int] = (1, 2, 3), *,
                  broker_overrides: Callable[[int], Mapping[str, object]] | None = None,
                  chroot: str | None = None, network=None) -> Cluster:
    """Brokers ``node_ids`` in a chroot of their own on ``zookeeper`` (``chroot``, or a new one), with
    CLUSTER_SETTINGS, ``overrides`` and each broker's own ``broker_overrides(node_id)``, each started and
    ready (those started are stopped again if one fails). On a test ``network`` (trafka.broker.testing.network), broker
    N runs on its host ``bN``."""
    connect = f"{zookeeper.connect_string}{chroot or f'/trafka-{uuid.uuid4().hex[:8]}'}"

    def placed(node_id: int) -> dict[str, object]:
        if network is None:
            return {}
        host = f"b{node_id}"
        return {"host": network.address(host), "wrap": lambda command: network.command(host, command)}

    brokers = [
        BrokerProcess(directory / f"broker{node_id}", name=f"broker{node_id}", overrides={
            "broker.id": node_id, "zookeeper.connect": connect, **CLUSTER_SETTINGS, **(overrides or {}),
            **(broker_overrides(node_id) if broker_overrides is not None else {}),
        }, **placed(node_id))
        for node_id in node_ids
    ]
    cluster = Cluster(brokers, connect)
    try:
        for broker in brokers:
            broker.start()
        wait_until_registered(cluster)
    except BaseException:
        cluster.close()
        raise
    return cluster


def wait_until_registered(cluster: Cluster) -> None:
    """Wait until every running broker lists every running broker in its Metadata: each learns of the
    others' registrations through its own ZooKeeper watch, a moment after they start, and a request
    (CreateTopics with a replication factor of 3, say) may reach one that does not know them yet."""
    from compat_tests.wire_client import WireClient
    from trafka.wire.messages import MetadataRequest

    running = [b for b in cluster.brokers if b.running]
    expected = {b.node_id for b in running}

    def known(broker: BrokerProcess) -> set[int]:
        with WireClient(f"{broker.host}:{broker.port}") as client:
            return {b.node_id for b in client.request(MetadataRequest(topics=[]), 12).brokers}

    wait(lambda: all(known(b) == expected for b in running), f"every broker to see brokers {sorted(expected)}")


def wait(condition: Callable[[], object], what: str, timeout: float = TIMEOUT) -> object:
    """Look at ``condition`` every 0.1 s until it is truthy and return it; fail naming ``what`` after
    ``timeout`` seconds. An exception counts as not yet (a broker in the middle of a change answers
    with an error)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = condition()
        except Exception as exc:
            result, last = None, exc
        else:
            last = None
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen in {timeout} s (last error: {last!r})")
        time.sleep(0.1)


def segments(broker: BrokerProcess, topic: str, partition: int) -> dict[str, bytes]:
    directory = broker.data_dir / f"{topic}-{partition}"
    return {path.name: path.read_bytes() for path in sorted(directory.glob("*.log"))}


def replicas_identical(cluster: Cluster, topic: str, partitions: int | Iterable[int],
                       brokers: Iterable[BrokerProcess] | None = None) -> bool:
    """Whether every replica (on ``brokers``, default all) of each partition holds the same segments,
    byte for byte."""
    holders = list(cluster.brokers if brokers is None else brokers)
    for partition in (range(partitions) if isinstance(partitions, int) else partitions):
        copies = [segments(broker, topic, partition) for broker in holders]
        if not copies[0] or any(copy != copies[0] for copy in copies[1:]):
            return False
    return True


class Writer:
    """An idempotent acks=all producer writing 0, 1, 2, ... to one partition from a thread, keeping what
    was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, partition: int = 0, **config: object) -> None:
        from confluent_kafka import Producer

        self.topic = topic
        self.partition = partition
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, "message.timeout.ms": 60_000, "retry.backoff.ms": 100, **config})
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
        from confluent_kafka import KafkaException

        sequence = 0
        try:
            while not self._stop.is_set():
                try:
                    self.producer.produce(self.topic, value=str(sequence).encode(), partition=self.partition,
                                          on_delivery=self._report)
                    sequence += 1
                except BufferError:
                    pass
                self.producer.poll(0.002)
            self.producer.flush(60)
        except KafkaException as exc:  # a fatal error (an idempotent producer's sequence lost, say): it stops
            self.failed.append(f"fatal: {exc.args[0]}")

    def start(self) -> Writer:
        self._thread.start()
        return self

    def wait_for(self, more: int, what: str = "", timeout: float = TIMEOUT) -> None:
        """Until ``more`` records more than now are acknowledged."""
        target = len(self.acknowledged) + more
        wait(lambda: len(self.acknowledged) >= target, what or f"{more} more acknowledged records", timeout)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(90)


def check_sequence(values: list[int], acknowledged: Iterable[int]) -> None:
    """What a Writer wrote, as read back from its partition: no duplicate, in order, every acknowledged
    record there, no gap."""
    assert len(values) == len(set(values)), "duplicates"
    assert values == sorted(values), "out of order"
    lost = set(acknowledged) - set(values)
    assert not lost, f"{len(lost)} acknowledged records lost: {sorted(lost)[:20]}"
    assert values == list(range(len(values))), "a gap"
