"""Prometheus metrics (``--metrics-port``) of a broker that real clients use: requests and their time per
API, record bytes in and out per topic, each partition's log, connections, and consumer groups."""

from __future__ import annotations

import re
import urllib.request

from confluent_kafka import Consumer

from compat_tests.clients import ConfluentClient, numbered_messages
from compat_tests.harness import wait_until
from compat_tests.ports import free_port


def _value(text: str, name: str, **labels: str) -> float | None:
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    match = re.search(rf"^{re.escape(name)}{{{re.escape(wanted)}}} (\S+)$" if labels else rf"^{re.escape(name)} (\S+)$",
                      text, re.MULTILINE)
    return float(match[1]) if match else None


def test_metrics_tell_what_clients_did(broker_factory, topic):
    port = free_port()
    broker = broker_factory({"metrics.port": port})
    name = topic(partitions=2, on=broker)
    client = ConfluentClient(broker.bootstrap)
    client.produce(name, numbered_messages(20))
    client.consume(name, 20, partitions=[0, 1], offset=0)

    def scrape() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            return response.read().decode()

    text = scrape()
    assert _value(text, "trafka_requests_total", api="PRODUCE") >= 1
    assert _value(text, "trafka_request_seconds_count", api="FETCH") >= 1
    assert _value(text, "trafka_bytes_in_total", topic=name) > 0
    assert _value(text, "trafka_bytes_out_total", topic=name) > 0
    ends = [_value(text, "trafka_log_end_offset", topic=name, partition=str(p)) for p in (0, 1)]
    assert sum(ends) == 20
    assert _value(text, "trafka_log_size_bytes", topic=name, partition="0") > 0
    assert _value(text, "trafka_connections") >= 0
    # A consumer group, once one exists.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "metered", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([name])
        wait_until(lambda: consumer.poll(0.2) is not None and consumer.assignment(), message="an assignment")
        def grouped() -> str | None:
            scraped = scrape()
            return scraped if _value(scraped, "trafka_group_members", group="metered") == 1 else None

        text = wait_until(grouped, message="the group's member in the metrics")
        assert _value(text, "trafka_groups", state="Stable", type="classic") >= 1
    finally:
        consumer.close()


def test_without_metrics_port_nothing_listens(broker_factory):
    broker = broker_factory()
    assert "Prometheus" not in broker.log_text()


def test_a_cluster_leader_counts_its_under_replicated_partitions(zookeeper, tmp_path):
    from compat_tests.cluster import start_cluster, wait, wait_until_registered

    ports = {node_id: free_port() for node_id in (1, 2, 3)}
    cluster = start_cluster(zookeeper, tmp_path)
    try:
        for broker in cluster.brokers:  # each broker its own metrics port
            broker.stop()
            broker.overrides["metrics.port"] = ports[broker.node_id]
            broker.start(broker.port)
        wait_until_registered(cluster)
        wait(lambda: ConfluentClient(cluster.bootstrap).create_topic("watched", 1, replication_factor=3) or True,
             "the topic created with three replicas")
        leader, replicas, _ = wait(lambda: (lambda m: m if m[2] == [1, 2, 3] else None)(
            cluster.metadata("watched").get(0)), "a full ISR")

        def scraped(node_id: int) -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{ports[node_id]}/metrics", timeout=10) as response:
                return response.read().decode()

        assert _value(scraped(leader), "trafka_under_replicated_partitions") == 0
        assert _value(scraped(leader), "trafka_leader_partitions") >= 1
        follower = next(r for r in replicas if r != leader)
        cluster.broker(follower).kill()
        wait(lambda: _value(scraped(leader), "trafka_under_replicated_partitions") == 1,
             "the leader to count the partition under-replicated")
    finally:
        cluster.close()


def test_authentications_are_counted_per_listener_mechanism_and_outcome(broker_factory):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    port, sasl_port = free_port(), free_port()
    broker = broker_factory({
        "metrics.port": port,
        "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";',
    })
    for password in ("alice-secret", "wrong"):
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                             "sasl.mechanism": "PLAIN", "sasl.username": "alice", "sasl.password": password})
        try:
            admin.list_topics(timeout=3)
        except KafkaException:
            assert password == "wrong"

    def counted() -> str | None:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            text = response.read().decode()
        labels = {"listener": "SASL_PLAINTEXT", "mechanism": "PLAIN"}
        ok = _value(text, "trafka_authentications_total", outcome="succeeded", **labels)
        failed = _value(text, "trafka_authentications_total", outcome="failed", **labels)
        return text if ok and failed else None

    wait_until(counted, message="a successful and a failed PLAIN login counted")
    assert broker.running
