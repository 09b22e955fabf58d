"""Client quotas on a real broker, most of them beside Apache Kafka 4.4: ``trafka quotas`` describing and
altering quotas of both brokers alike; a Produce over ``producer_byte_rate`` and a Fetch over
``consumer_byte_rate`` answered with a throttle time (the Fetch empty) by both; ``request_percentage`` throttling
every API; quotas kept across a restart of a single node; the throttle time in the Prometheus metrics. In a
three-broker ZooKeeper cluster a quota altered through one broker is followed and enforced by the others within
a second, kept beside the user's SCRAM credentials in Kafka's nodes; a Kafka 3.9 in ZooKeeper mode reads the
quotas trafka wrote, and trafka those Kafka wrote."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
import uuid

from compat_tests.clients import ConfluentClient, Message
from compat_tests.cluster import start_cluster
from compat_tests.harness import BrokerProcess
from compat_tests.ports import free_port
from compat_tests.reference import ZooKeeperModeKafka
from compat_tests.wire_client import WireClient
from trafka.wire.messages import (
    AlterClientQuotasRequest,
    FetchRequest,
    MetadataRequest,
    ProduceRequest,
)
from trafka.wire.records import SimpleRecord, build_batch

A = AlterClientQuotasRequest


def quotas_tool(bootstrap: str, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trafka", "quotas", *arguments, "--bootstrap-server", bootstrap],
                          check=False, capture_output=True, text=True, timeout=60)


def set_quota(bootstrap: str, entity: list[tuple[str, str | None]], key: str, value: float | None) -> None:
    with WireClient(bootstrap) as client:
        response = client.request(A(entries=[A.EntryData(
            entity=[A.EntityData(entity_type=t, entity_name=n) for t, n in entity],
            ops=[A.OpData(key=key, value=value or 0.0, remove=value is None)])]), 1)
    assert response.entries[0].error_code == 0, response.entries[0].error_message


def until(check, timeout: float = 10.0):
    """Kafka applies an alteration a moment after answering it: the first truthy result of ``check``."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.1)


def test_quotas_tool_against_trafka_and_kafka(broker, kafka):
    outputs = {}
    for name, process in (("kafka", kafka), ("trafka", broker)):
        altered = [
            quotas_tool(process.bootstrap, "alter", "--entity-type", "users", "--entity-name", "tool-alice",
                        "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152"),
            quotas_tool(process.bootstrap, "alter", "--entity-type", "users", "--entity-name", "tool-alice",
                        "--entity-type", "clients", "--entity-default", "--add-config", "request_percentage=50"),
            quotas_tool(process.bootstrap, "alter", "--entity-type", "clients", "--entity-name", "tool-app",
                        "--add-config", "producer_byte_rate=1024", "--add-config", "controller_mutation_rate=2.5"),
            quotas_tool(process.bootstrap, "alter", "--entity-type", "ips", "--entity-default",
                        "--add-config", "connection_creation_rate=1000"),
        ]
        assert [r.returncode for r in altered] == [0, 0, 0, 0], [r.stderr for r in altered]
        users = until(lambda b=process.bootstrap: (r := quotas_tool(b, "describe", "--entity-type", "users",
                                                                    "--entity-name", "tool-alice")).stdout and r)
        every = until(lambda b=process.bootstrap: (r := quotas_tool(b, "describe")).stdout.count("\n") >= 4 and r)
        clients = quotas_tool(process.bootstrap, "describe", "--entity-type", "clients")
        refused = quotas_tool(process.bootstrap, "alter", "--entity-type", "users", "--entity-name", "tool-alice",
                              "--add-config", "bogus=1")
        deleted = quotas_tool(process.bootstrap, "alter", "--entity-type", "users", "--entity-name", "tool-alice",
                              "--delete-config", "producer_byte_rate,consumer_byte_rate")
        quotas_tool(process.bootstrap, "alter", "--entity-type", "users", "--entity-name", "tool-alice",
                    "--entity-type", "clients", "--entity-default", "--delete-config", "request_percentage")
        quotas_tool(process.bootstrap, "alter", "--entity-type", "clients", "--entity-name", "tool-app",
                    "--delete-config", "producer_byte_rate,controller_mutation_rate")
        quotas_tool(process.bootstrap, "alter", "--entity-type", "ips", "--entity-default",
                    "--delete-config", "connection_creation_rate")
        outputs[name] = (users.stdout, every.stdout, clients.stdout, refused.returncode, refused.stderr,
                         deleted.returncode)
    assert outputs["trafka"] == outputs["kafka"]
    users, every, clients, code, refusal, _ = outputs["trafka"]
    assert users == ("Quota configs for user-principal 'tool-alice' are consumer_byte_rate=2097152.0, "
                     "producer_byte_rate=1048576.0\n")
    assert "Quota configs for user-principal 'tool-alice', client-id '<default>' are request_percentage=50.0" in every
    assert clients == ("Quota configs for client-id 'tool-app' are controller_mutation_rate=2.5, "
                       "producer_byte_rate=1024.0\n")
    assert code == 1 and "INVALID_REQUEST: Invalid configuration key bogus" in refusal


def _produce(client: WireClient, topic: str) -> object:
    batch = build_batch([SimpleRecord(None, b"x" * 1000)])
    request = ProduceRequest(acks=1, timeout_ms=10_000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    return client.request(request, 9)


def _fetch(client: WireClient, topic: str) -> object:
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                           topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                               partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    return client.request(request, 12)


def test_produce_and_fetch_over_their_quotas_are_throttled_as_by_kafka(broker, kafka):
    seen = {}
    topic = "quota-throttled"
    for name, process in (("kafka", kafka), ("trafka", broker)):
        ConfluentClient(process.bootstrap).produce(topic, [Message(b"y" * 1000)])
        set_quota(process.bootstrap, [("client-id", "slow-producer")], "producer_byte_rate", 10.0)
        set_quota(process.bootstrap, [("client-id", "slow-consumer")], "consumer_byte_rate", 10.0)
        try:
            def produced(bootstrap=process.bootstrap):
                with WireClient(bootstrap, client_id="slow-producer") as client:
                    response = _produce(client, topic)
                return response if response.throttle_time_ms > 0 else None

            def fetched(bootstrap=process.bootstrap):
                with WireClient(bootstrap, client_id="slow-consumer") as client:
                    response = _fetch(client, topic)
                return response if response.throttle_time_ms > 0 else None

            produce, fetch = until(produced), until(fetched)
            # 1 KB or so against 10 B/s over 10 windows: (100 - 10) / 10 * 10 s, the same formula on both.
            seen[name] = (produce.responses[0].partition_responses[0].error_code,
                          round(produce.throttle_time_ms / 1000, -1), fetch.error_code, fetch.responses,
                          round(fetch.throttle_time_ms / 1000, -1))
        finally:
            set_quota(process.bootstrap, [("client-id", "slow-producer")], "producer_byte_rate", None)
            set_quota(process.bootstrap, [("client-id", "slow-consumer")], "consumer_byte_rate", None)
    assert seen["trafka"] == seen["kafka"]
    error, produce_s, fetch_error, responses, fetch_s = seen["trafka"]
    assert error == 0 and fetch_error == 0 and responses == [] and produce_s >= 90 and fetch_s >= 90


def test_request_percentage_throttles_every_api_as_kafka(broker, kafka):
    seen = {}
    topic = "quota-busy"
    for name, process in (("kafka", kafka), ("trafka", broker)):
        ConfluentClient(process.bootstrap).produce(topic, [Message(b"z" * 100)])
        set_quota(process.bootstrap, [("client-id", "busy")], "request_percentage", 0.001)
        try:
            def throttled(bootstrap=process.bootstrap):
                with WireClient(bootstrap, client_id="busy") as client:
                    response = client.request(MetadataRequest(topics=None), 12)
                return response.throttle_time_ms or None

            def fetched(bootstrap=process.bootstrap):
                with WireClient(bootstrap, client_id="busy") as client:
                    response = _fetch(client, topic)
                return response if response.throttle_time_ms else None

            metadata_ms = until(throttled)
            fetch = until(fetched)
            # Throttled, for at most one quota window (Kafka bounds request-time throttling so); a Fetch so
            # throttled is answered empty.
            seen[name] = (metadata_ms is not None and 0 < metadata_ms <= 1000, fetch is not None and fetch.responses)
        finally:
            set_quota(process.bootstrap, [("client-id", "busy")], "request_percentage", None)
    assert seen["trafka"] == seen["kafka"] == (True, []), seen


def test_quotas_kept_across_a_restart_and_throttling_in_the_metrics(broker_factory):
    port = free_port()
    process = broker_factory({"metrics.port": port})
    result = quotas_tool(process.bootstrap, "alter", "--entity-type", "clients", "--entity-name", "kept",
                         "--add-config", "producer_byte_rate=10")
    assert result.returncode == 0, result.stderr
    process.restart()
    described = quotas_tool(process.bootstrap, "describe")
    assert described.stdout == "Quota configs for client-id 'kept' are producer_byte_rate=10.0\n"
    with WireClient(process.bootstrap, client_id="kept") as client:
        assert _produce(client, "kept-topic").throttle_time_ms > 0
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    match = re.search(r'^trafka_throttle_time_seconds_total\{client_id="kept",quota_type="Produce",user=""\} (\S+)$',
                      text, re.MULTILINE)
    assert match and float(match[1]) > 0, text[-2000:]
    assert re.search(r'^trafka_throttled_responses_total\{client_id="kept",quota_type="Produce",user=""\} 1\.0$',
                     text, re.MULTILINE)


# -- in a ZooKeeper cluster --------------------------------------------------------------------------------------

def _zookeeper_nodes(connect: str, paths: list[str]) -> dict[str, object]:
    from kazoo.client import KazooClient

    hosts, _, chroot = connect.partition("/")
    client = KazooClient(hosts=hosts)
    client.start(timeout=10)
    try:
        found: dict[str, object] = {}
        for path in paths:
            data, _ = client.get(f"/{chroot}{path}")
            found[path] = json.loads(data)
        changes = f"/{chroot}/config/changes"
        found["entity_paths"] = sorted(json.loads(client.get(f"{changes}/{child}")[0])["entity_path"]
                                       for child in client.get_children(changes))
        return found
    finally:
        client.stop()
        client.close()


def _described(bootstrap: str) -> str:
    return quotas_tool(bootstrap, "describe").stdout


def test_a_cluster_follows_quotas_altered_on_any_broker(zookeeper, tmp_path):
    cluster = start_cluster(zookeeper, tmp_path)
    try:
        first, second, third = cluster.brokers
        made = subprocess.run([sys.executable, "-m", "trafka", "users", "set", "alice", "--password", "alice-secret",
                               "--bootstrap-server", first.bootstrap], capture_output=True, text=True, timeout=60,
                              check=False)
        assert made.returncode == 0, made.stderr
        set_quota(second.bootstrap, [("user", "alice")], "producer_byte_rate", 1000.0)
        set_quota(first.bootstrap, [("client-id", "cluster-slow")], "producer_byte_rate", 10.0)
        expected = ("Quota configs for client-id 'cluster-slow' are producer_byte_rate=10.0\n"
                    "Quota configs for user-principal 'alice' are producer_byte_rate=1000.0\n")
        # Every broker follows the change within a second, and enforces it.
        for process in (second, third):
            assert until(lambda b=process.bootstrap: _described(b) == expected, timeout=1.0), _described(
                process.bootstrap)
            with WireClient(process.bootstrap, client_id="cluster-slow") as client:
                assert _produce(client, "cluster-quotas").throttle_time_ms > 0
        nodes = _zookeeper_nodes(cluster.connect, ["/config/users/alice", "/config/clients/cluster-slow"])
        alice = nodes["/config/users/alice"]["config"]
        # The user's node holds its SCRAM credentials and its quotas side by side, as Kafka keeps them.
        assert sorted(alice) == ["SCRAM-SHA-256", "SCRAM-SHA-512", "producer_byte_rate"]
        assert alice["producer_byte_rate"] == "1000"
        assert nodes["/config/clients/cluster-slow"] == {"version": 1, "config": {"producer_byte_rate": "10"}}
        assert {"users/alice", "clients/cluster-slow"} <= set(nodes["entity_paths"])
        # Removing the quota keeps the credentials (and the other way round).
        set_quota(third.bootstrap, [("user", "alice")], "producer_byte_rate", None)
        listed = subprocess.run([sys.executable, "-m", "trafka", "users", "list",
                                 "--bootstrap-server", first.bootstrap],
                                capture_output=True, text=True, timeout=60, check=False)
        assert "alice\tSCRAM-SHA-512\t4096" in listed.stdout
        assert sorted(_zookeeper_nodes(cluster.connect, ["/config/users/alice"])["/config/users/alice"]["config"]) == [
            "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert until(lambda: _described(first.bootstrap) == expected.splitlines(keepends=True)[0], timeout=1.0)
        # Announcements are deleted once 15 minutes old (here: as seen 16 minutes from now); the quotas stay.
        from kazoo.client import KazooClient

        from trafka.broker.cluster.quotas import purge_announcements

        hosts, _, chroot = cluster.connect.partition("/")
        client = KazooClient(hosts=f"{hosts}/{chroot}")
        client.start(timeout=10)
        try:
            assert purge_announcements(client, int(time.time() * 1000) + 16 * 60 * 1000) >= 4
            assert client.get_children("/config/changes") == []
        finally:
            client.stop()
            client.close()
        assert _described(third.bootstrap) == expected.splitlines(keepends=True)[0]
    finally:
        cluster.close()


def test_kafka_in_zookeeper_mode_reads_the_quotas_trafka_keeps(zookeeper, tmp_path):
    """The layout checked by Kafka 3.9 itself: quotas a trafka broker wrote are Kafka's on the same ZooKeeper, and
    quotas Kafka wrote are trafka's."""
    connect = f"{zookeeper.connect_string}/quotas-{uuid.uuid4().hex[:8]}"
    trafka = BrokerProcess(tmp_path / "trafka", name="trafka-zk", overrides={"zookeeper.connect": connect,
                                                                             "broker.id": 1})
    trafka.start()
    try:
        set_quota(trafka.bootstrap, [("user", "bob@example.com"), ("client-id", "app 1")], "consumer_byte_rate", 2048.0)
        set_quota(trafka.bootstrap, [("user", None)], "request_percentage", 12.5)
        set_quota(trafka.bootstrap, [("client-id", None)], "producer_byte_rate", 4096.0)
        set_quota(trafka.bootstrap, [("ip", "10.0.0.1")], "connection_creation_rate", 7.0)
        written = _described(trafka.bootstrap)
    finally:
        trafka.close()
    kafka = ZooKeeperModeKafka(tmp_path / "kafka", connect, broker_id=2)
    kafka.start()
    try:
        assert until(lambda: _described(kafka.bootstrap) == written), (_described(kafka.bootstrap), written)
        set_quota(kafka.bootstrap, [("user", "carol")], "controller_mutation_rate", 0.5)
        written_by_kafka = until(lambda: "carol" in (text := _described(kafka.bootstrap)) and text)
    finally:
        kafka.close()
    trafka.start()
    try:
        assert _described(trafka.bootstrap) == written_by_kafka
    finally:
        trafka.close()


def test_a_client_that_ignores_throttle_times_is_held_too(broker_factory):
    """kafka-python does not back off when told a throttle time: the muted connection holds it to its quota."""
    from kafka import KafkaProducer

    process = broker_factory({"quota.window.num": 2})
    set_quota(process.bootstrap, [("client-id", "kafka-python")], "producer_byte_rate", 1048576.0)
    producer = KafkaProducer(bootstrap_servers=process.bootstrap, client_id="kafka-python", linger_ms=5)
    ticks = [0] * 14
    sent = [0]
    start = time.monotonic()

    def acknowledged(_metadata):
        tick = int(time.monotonic() - start)
        if tick < len(ticks):
            ticks[tick] += 1000

    try:
        while time.monotonic() - start < 13:
            if sent[0] - sum(ticks) // 1000 > 1000:  # (kafka-python buffers without bound: 1 MB ahead at most)
                time.sleep(0.001)
                continue
            producer.send("held", b"k" * 1000).add_callback(acknowledged)
            sent[0] += 1
    finally:
        producer.close(timeout=30)
    rate = sum(ticks[3:13]) / 10
    assert 0.8 * 1048576 <= rate <= 1.1 * 1048576, [round(t / 1048576, 2) for t in ticks]
