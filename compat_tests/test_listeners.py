"""Named listeners: a broker serving several, each client told the addresses of the listener it came in on
(Metadata, FindCoordinator, DescribeCluster), with real clients against a real broker process."""
from __future__ import annotations

import socket

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from compat_tests.harness import BrokerProcess


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_each_client_is_told_the_addresses_of_its_own_listener(tmp_path):
    clients_port, internal_port = _free_port(), _free_port()
    broker = BrokerProcess(tmp_path / "broker", overrides={
        "listeners": f"CLIENTS://127.0.0.1:{clients_port},INTERNAL://127.0.0.1:{internal_port}",
        "advertised.listeners": f"CLIENTS://localhost:{clients_port},INTERNAL://127.0.0.1:{internal_port}",
        "listener.security.protocol.map": "CLIENTS:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
    })
    broker.start(clients_port)
    try:
        seen = {}
        for name, port in (("CLIENTS", clients_port), ("INTERNAL", internal_port)):
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
            metadata = admin.list_topics(timeout=10)
            seen[name] = sorted((b.id, b.host, b.port) for b in metadata.brokers.values())
        assert seen == {"CLIENTS": [(broker.node_id, "localhost", clients_port)],
                        "INTERNAL": [(broker.node_id, "127.0.0.1", internal_port)]}

        # A producer and a consumer group on the second listener: every address they are given is its.
        bootstrap = f"127.0.0.1:{internal_port}"
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(10):
            producer.produce("through-internal", value=b"%d" % i)
        assert producer.flush(15) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "earliest"})
        consumer.subscribe(["through-internal"])
        values = []
        try:
            for _ in range(100):
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    values.append(message.value())
                if len(values) == 10:
                    break
        finally:
            consumer.close()
        assert values == [b"%d" % i for i in range(10)]
    finally:
        broker.stop()
