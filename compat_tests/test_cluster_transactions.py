"""Transactions in a replicated cluster: the coordinator of a transactional id is the leader of its
partition of ``__transaction_state`` (replication factor 3, min ISR 2), the partitions of a transaction
are led by other brokers and get their markers through WriteTxnMarkers, and when the coordinator is
killed -9 the next leader of its partition takes over: a transaction decided before the kill is
completed by it, and the producer goes on with new transactions. What a read_committed consumer sees
is checked each time (confluent-kafka)."""
from __future__ import annotations

import time
import uuid
from pathlib import Path

from compat_tests.clients import ConfluentClient
from compat_tests.cluster import start_cluster, wait

SETTINGS = {"transaction.state.log.num.partitions": 3, "auto.leader.rebalance.enable": "false"}


def _producer(bootstrap: str, transactional_id: str):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "transaction.timeout.ms": 60_000, "message.timeout.ms": 60_000})
    producer.init_transactions(60)
    return producer


def _read_committed(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 30.0) -> list[bytes]:
    """Every record a read_committed consumer reads from the start of ``topic``, once it has read
    ``expected`` of them and then nothing more for a second."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                values.append(message.value())
                quiet_until = None
            elif len(values) >= expected:
                quiet_until = quiet_until or time.monotonic() + 1.0
                if time.monotonic() >= quiet_until:
                    break
    finally:
        consumer.close()
    return values


def _coordinator_of(cluster, transactional_id: str) -> int:
    """The coordinator a live broker names in FindCoordinator."""
    from compat_tests.wire_client import WireClient
    from trafka.wire.messages import FindCoordinatorRequest

    for broker in cluster.brokers:
        if broker.running:
            with WireClient(f"{broker.host}:{broker.port}") as client:
                found = client.request(FindCoordinatorRequest(key_type=1, coordinator_keys=[transactional_id]), 4)
            [coordinator] = found.coordinators
            if coordinator.error_code == 0:
                return coordinator.node_id
    raise AssertionError(f"no coordinator for {transactional_id}")


def test_markers_reach_partitions_led_elsewhere_and_the_next_coordinator_takes_over(zookeeper, tmp_path: Path):
    cluster = start_cluster(zookeeper, tmp_path, SETTINGS)
    try:
        ConfluentClient(cluster.bootstrap).create_topic("spread", 3, replication_factor=3)
        leaders = wait(lambda: (lambda m: {p: v[0] for p, v in m.items()}
                                if len(m) == 3 and all(len(v[2]) == 3 for v in m.values()) else None)(
            cluster.metadata("spread")), "three partitions with a full ISR")
        assert len(set(leaders.values())) == 3  # each broker leads one: two of them are not the coordinator

        producer = _producer(cluster.bootstrap, "spreader")
        coordinator = _coordinator_of(cluster, "spreader")
        producer.begin_transaction()
        for i in range(30):
            producer.produce("spread", f"committed-{i}".encode(), partition=i % 3)
        producer.commit_transaction(60)
        producer.begin_transaction()
        for i in range(30):
            producer.produce("spread", f"aborted-{i}".encode(), partition=i % 3)
        producer.flush(30)
        producer.abort_transaction(60)
        # Every partition's markers landed, two of them through WriteTxnMarkers: without its COMMIT a
        # partition's records stay above its last stable offset, and without its ABORT so do later ones.
        values = _read_committed(cluster.bootstrap, "spread", 3, 30)
        assert sorted(values) == sorted(f"committed-{i}".encode() for i in range(30))

        # The coordinator dies with a transaction open; the next leader of its __transaction_state
        # partition coordinates the id, and the producer goes on.
        producer.begin_transaction()
        for i in range(30):
            producer.produce("spread", f"second-{i}".encode(), partition=i % 3)
        producer.flush(30)
        cluster.broker(coordinator).kill()
        new_coordinator = wait(lambda: (lambda c: c if c != coordinator else None)(
            _coordinator_of(cluster, "spreader")), "a new transaction coordinator")
        producer.commit_transaction(60)
        values = _read_committed(cluster.bootstrap, "spread", 3, 60)
        assert sorted(values) == sorted([f"committed-{i}".encode() for i in range(30)]
                                        + [f"second-{i}".encode() for i in range(30)])
        assert new_coordinator != coordinator
        producer.begin_transaction()
        producer.produce("spread", b"third", partition=0)
        producer.commit_transaction(60)
        assert b"third" in _read_committed(cluster.bootstrap, "spread", 3, 61)
    finally:
        cluster.close()
