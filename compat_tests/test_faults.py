"""Fault rules as test authors use them: from ``TrafkaBroker``, over the control endpoint and with
``trafka control``, while real clients (kafka-python, confluent-kafka) meet the faults and recover."""
from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer
from kafka import KafkaProducer

from trafka.broker.testing import BrokerError, TrafkaBroker


@pytest.fixture(scope="module")
def trafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrafkaBroker]:
    with TrafkaBroker(tmp_path_factory.mktemp("faults") / "data") as broker:
        yield broker


@pytest.fixture(autouse=True)
def no_rules_left(trafka: TrafkaBroker) -> Iterator[None]:
    yield
    trafka.clear_faults()


def test_a_producer_retries_through_not_leader_and_the_record_is_stored_once(trafka: TrafkaBroker):
    topic = trafka.create_topic("retried", partitions=2)
    rule = trafka.add_fault("error", api="produce", topic=topic, partition=0, error="NOT_LEADER_OR_FOLLOWER",
                            count=2)
    producer = KafkaProducer(bootstrap_servers=trafka.bootstrap_servers, retries=5, retry_backoff_ms=20)
    try:
        first = producer.send(topic, b"after two refusals", partition=0).get(timeout=30)
        other = producer.send(topic, b"never refused", partition=1).get(timeout=30)
    finally:
        producer.close()

    assert trafka.wait_for_hits(rule["id"], 2, timeout=10)["remaining"] == 0
    assert (first.offset, other.offset) == (0, 0)  # stored once: the refused attempts appended nothing
    consumer = Consumer({"bootstrap.servers": trafka.bootstrap_servers, "group.id": "faults-check",
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        seen = []
        while len(seen) < 2:
            message = consumer.poll(10)
            assert message is not None, f"only {seen} arrived"
            assert message.error() is None, message.error()
            seen.append((message.partition(), message.offset(), message.value()))
    finally:
        consumer.close()
    assert sorted(seen) == [(0, 0, b"after two refusals"), (1, 0, b"never refused")]


def test_a_consumer_reconnects_after_its_fetch_connection_is_dropped(trafka: TrafkaBroker):
    topic = trafka.create_topic("dropped")
    producer = KafkaProducer(bootstrap_servers=trafka.bootstrap_servers)
    producer.send(topic, b"still here").get(timeout=30)
    producer.close()
    rule = trafka.add_fault("drop", api="fetch", topic=topic, count=1)

    consumer = Consumer({"bootstrap.servers": trafka.bootstrap_servers, "group.id": "dropped",
                         "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        message = None
        for _ in range(30):
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                break
    finally:
        consumer.close()

    assert message is not None and message.value() == b"still here"
    assert trafka.faults()[0]["hits"] == 1 and rule["id"] == trafka.faults()[0]["id"]


def test_the_control_endpoint_answers_in_json(trafka: TrafkaBroker):
    base = f"http://127.0.0.1:{trafka.control_port}"

    def call(method: str, path: str, body: object = None) -> tuple[int, dict]:
        request = urllib.request.Request(base + path, method=method,
                                         data=json.dumps(body).encode() if body is not None else None)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as exc:
            return exc.code, json.load(exc)

    status, rule = call("POST", "/faults", {"action": "observe", "api": 3})
    assert (status, rule["api"], rule["hits"]) == (201, ["METADATA"], 0)
    assert call("POST", "/faults", {"action": "error", "api": "produce", "error": "NOPE"})[0] == 400
    assert call("GET", f"/faults/{rule['id']}?hits=1&timeout_ms=100") == (
        408, {"error": f"rule {rule['id']} was hit 0 times of 1 in 100 ms", "rule": rule})
    assert call("GET", "/faults/999")[0] == 404
    assert call("GET", "/elsewhere")[0] == 404
    assert call("GET", "/groups/nobody") == (404, {"error": "no group 'nobody'"})
    assert call("GET", "/partitions/nothing/0") == (404, {"error": "no partition nothing-0"})
    assert call("DELETE", f"/faults/{rule['id']}") == (200, {"removed": rule["id"]})
    with pytest.raises(BrokerError, match="delay_ms"):
        trafka.add_fault("delay", api="metadata")


def test_trafka_control_on_the_command_line(trafka: TrafkaBroker):
    def control(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "trafka", "control", "--port", str(trafka.control_port),
                               "faults", *args], capture_output=True, text=True, timeout=60)

    added = control("add", '{"action": "observe", "api": "api_versions"}')
    rule = json.loads(added.stdout)
    KafkaProducer(bootstrap_servers=trafka.bootstrap_servers).close()  # asks ApiVersions at least once
    waited = control("wait", str(rule["id"]), "--hits", "1", "--timeout", "10")
    listed = control("list")
    refused = control("add", '{"action": "sing"}')

    assert added.returncode == 0 and rule["action"] == "observe"
    assert waited.returncode == 0 and json.loads(waited.stdout)["hits"] >= 1
    assert [json.loads(line)["id"] for line in listed.stdout.splitlines()] == [rule["id"]]
    assert refused.returncode == 1 and "action 'sing'" in refused.stderr


def test_waiting_for_a_group_and_an_end_offset_instead_of_sleeping(trafka: TrafkaBroker):
    topic = trafka.create_topic("waited", partitions=2)
    consumers = [Consumer({"bootstrap.servers": trafka.bootstrap_servers, "group.id": "waited-group",
                           "auto.offset.reset": "earliest"}) for _ in range(2)]
    try:
        for consumer in consumers:
            consumer.subscribe([topic])
            consumer.poll(0.1)
        with pytest.raises(BrokerError, match="no group 'waited-group' state Dead in 200 ms"):
            trafka.wait_for_group("waited-group", state="Dead", timeout=0.2)
        for _ in range(100):  # the members join while they poll; the broker says when the group is whole
            for consumer in consumers:
                consumer.poll(0.1)
            try:
                group = trafka.wait_for_group("waited-group", members=2, timeout=0.2)
                break
            except BrokerError:
                continue
        else:
            raise AssertionError("the group never became Stable with 2 members")
        assert (group["state"], group["members"]) == ("Stable", 2)

        producer = KafkaProducer(bootstrap_servers=trafka.bootstrap_servers)
        for value in (b"a", b"b", b"c"):
            producer.send(topic, value, partition=1)
        producer.flush()
        producer.close()
        offsets = trafka.wait_for_end_offset(topic, 1, 3, timeout=10)
        assert (offsets["log_end_offset"], offsets["high_watermark"]) == (3, 3)
    finally:
        for consumer in consumers:
            consumer.close()
