"""Apache Kafka's own price of replication, measured beside trafka's by ``bench --cluster``.

Apache Kafka 3.9 (the last release with ZooKeeper mode, which trafka's cluster speaks too) as one broker
and as three brokers, each registered in a ZooKeeper of their own, each JVM with the full bench's
options (``bench.brokers.kafka_jvm_options``: 1 GB heap, G1). The three take the settings trafka's
cluster is given (``ClusterPlan.broker_overrides``) and Kafka's defaults for the rest. Their produce
runs take turns with trafka's, so that the two ratios (three brokers with acks=all against one with
acks=1) come from the same minutes of the same machine.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bench import brokers

TOPIC_TIMEOUT_S = 60.0
VERSION = "3.9 (ZooKeeper mode)"


class KafkaReference:
    """One Kafka broker and a cluster of ``size`` Kafka brokers, on one ZooKeeper, in one temp dir."""

    def __init__(self, overrides: Mapping[str, str], min_insync_replicas: int, size: int = 3) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="bench-kafka-cluster-"))
        self.overrides = dict(overrides)
        self.min_insync_replicas = min_insync_replicas
        self.size = size
        self.single: Any = None
        self.nodes: list[Any] = []
        self.zookeeper: Any = None

    def start(self) -> KafkaReference:
        from compat_tests import reference
        from compat_tests.zookeeper import ZooKeeperServer

        self.zookeeper = ZooKeeperServer(self.root / "zookeeper" / "data", name="kafka-zookeeper").start()
        connect = self.zookeeper.connect_string
        options = brokers.kafka_jvm_options()
        self.single = _broker(reference, self.root / "single", f"{connect}/single", 1, "kafka-single", {}, options)
        for node_id in range(1, self.size + 1):
            self.nodes.append(_broker(reference, self.root / f"broker{node_id}", f"{connect}/cluster", node_id,
                                      f"kafka{node_id}", {"offsets.topic.replication.factor": str(self.size),
                                                          **self.overrides}, options))
        return self

    def close(self) -> None:
        for broker in [self.single, *self.nodes]:
            if broker is not None:
                try:
                    broker.stop()
                except Exception:  # noqa: BLE001 - the rest must stop too
                    broker.kill()
        if self.zookeeper is not None:
            self.zookeeper.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def single_bootstrap(self) -> str:
        return self.single.bootstrap

    @property
    def cluster_bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    @property
    def cluster_pids(self) -> list[int]:
        return [node.pid for node in self.nodes]

    def create_topics(self, topic: str, partitions: int) -> None:
        """``topic`` on the single broker (replication factor 1) and on the cluster (replication factor
        ``size``), each waited for until every partition has a leader and, in the cluster, a full ISR."""
        _create(self.single_bootstrap, topic, partitions, 1, {})
        _create(self.cluster_bootstrap, topic, partitions, self.size,
                {"min.insync.replicas": str(self.min_insync_replicas)})

    def delete_topics(self, topic: str, delete: Callable[[Any, str], None]) -> None:
        from confluent_kafka.admin import AdminClient

        for bootstrap in (self.single_bootstrap, self.cluster_bootstrap):
            delete(AdminClient({"bootstrap.servers": bootstrap, "log_level": 3}), topic)


def _broker(reference: Any, data_dir: Path, zookeeper: str, node_id: int, name: str, overrides: dict[str, str],
            options: tuple[str, ...]) -> Any:
    return reference.ZooKeeperModeKafka(data_dir, zookeeper, broker_id=node_id, name=name, overrides=overrides,
                                        java_options=options).start()


def _create(bootstrap: str, topic: str, partitions: int, replication_factor: int, config: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    futures = admin.create_topics([NewTopic(topic, partitions, replication_factor, config=config)],
                                  operation_timeout=TOPIC_TIMEOUT_S, request_timeout=TOPIC_TIMEOUT_S)
    for future in futures.values():
        future.result(timeout=TOPIC_TIMEOUT_S)
    deadline = time.monotonic() + TOPIC_TIMEOUT_S
    while time.monotonic() < deadline:
        described = admin.list_topics(topic, timeout=10).topics.get(topic)
        if described is not None and described.error is None and len(described.partitions) == partitions and all(
                p.leader >= 0 and len(p.isrs) == replication_factor for p in described.partitions.values()):
            return
        time.sleep(0.1)
    raise RuntimeError(f"Kafka at {bootstrap}: topic {topic} has no leader or full ISR after {TOPIC_TIMEOUT_S:.0f} s")
