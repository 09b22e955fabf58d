"""Network faults on cue (broker.faults: latency, bandwidth, truncate, half_open, refuse, cut), as a test suite
uses them through ``TrafkaBroker``: each with two real clients, one the rule selects, which meets the fault and
recovers as it would on a real network, and one it does not select, which goes on as if nothing happened.

Durations are checked from below only (a response held 400 ms cannot come sooner); what a client outside the
selection sees is checked by the rule's hit count, which its requests never move."""
from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer

from trafka.broker.testing import BrokerError, TrafkaBroker

WAIT_S = 30


@pytest.fixture(scope="module")
def trafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrafkaBroker]:
    with TrafkaBroker(tmp_path_factory.mktemp("network-faults") / "data") as broker:
        yield broker


@pytest.fixture(autouse=True)
def no_rules_left(trafka: TrafkaBroker) -> Iterator[None]:
    yield
    trafka.clear_faults()


def _producer(trafka: TrafkaBroker, name: str, **config: object) -> Producer:
    return Producer({"bootstrap.servers": trafka.bootstrap_servers, "client.id": name, "linger.ms": 0, **config})


def _produce(producer: Producer, topic: str, values: list[bytes]) -> list[int]:
    """The offsets the broker acknowledged for ``values``."""
    offsets, errors = [], []

    def report(err, msg) -> None:
        (errors.append(err) if err is not None else offsets.append(msg.offset()))

    for value in values:
        producer.produce(topic, value=value, on_delivery=report)
    assert producer.flush(WAIT_S) == 0 and not errors, errors
    return offsets


def _consume(trafka: TrafkaBroker, name: str, topic: str, count: int, **config: object) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": trafka.bootstrap_servers, "client.id": name, "group.id": name,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **config})
    try:
        consumer.subscribe([topic])
        values: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(values) < count:
            assert time.monotonic() < deadline, f"{name}: {len(values)} of {count} records"
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
        return values
    finally:
        consumer.close()


def _hits(trafka: TrafkaBroker, rule: dict[str, object]) -> int:
    return next(r["hits"] for r in trafka.faults() if r["id"] == rule["id"])


def test_latency_holds_the_selected_clients_responses(trafka: TrafkaBroker):
    topic = trafka.create_topic("latency")
    rule = trafka.add_fault("latency", api="produce", client_id="far-away", latency_ms=400, jitter_ms=100)
    slow, near = _producer(trafka, "far-away"), _producer(trafka, "next-door")
    started = time.monotonic()
    assert _produce(slow, topic, [b"from afar"]) == [0]
    assert time.monotonic() - started >= 0.4
    hits = _hits(trafka, rule)
    assert hits >= 1
    assert _produce(near, topic, [b"from next door"]) == [1]
    assert _hits(trafka, rule) == hits  # the other producer's requests are not held


def test_bandwidth_caps_the_rate_of_the_selected_clients_responses(trafka: TrafkaBroker):
    topic = trafka.create_topic("bandwidth")
    values = [bytes([i]) * 10_000 for i in range(20)]  # 200 KB
    _produce(_producer(trafka, "filler", **{"linger.ms": 50}), topic, values)
    rule = trafka.add_fault("bandwidth", api="fetch", client_id="thin-pipe", bytes_per_s=100_000)
    started = time.monotonic()
    assert _consume(trafka, "thin-pipe", topic, len(values)) == values
    assert time.monotonic() - started >= 1.5  # 200 KB at 100 KB/s, the first piece at once
    hits = _hits(trafka, rule)
    assert hits >= 1
    assert _consume(trafka, "fat-pipe", topic, len(values)) == values
    assert _hits(trafka, rule) == hits


def test_a_truncated_produce_response_is_retried_and_the_record_stored_once(trafka: TrafkaBroker):
    """The connection is reset half-way through the answer: the idempotent producer sends the batch again, and
    the broker, which had stored it, knows it for a duplicate."""
    topic = trafka.create_topic("truncated")
    rule = trafka.add_fault("truncate", api="produce", client_id="torn", fraction=0.5, count=1)
    torn = _producer(trafka, "torn", **{"enable.idempotence": True})
    assert _produce(torn, topic, [b"once"]) == [0]
    assert trafka.wait_for_hits(rule["id"], 1)["remaining"] == 0
    other = KafkaProducer(bootstrap_servers=trafka.bootstrap_servers, client_id="whole")
    try:
        assert other.send(topic, b"whole").get(timeout=WAIT_S).offset == 1
    finally:
        other.close()
    assert _consume(trafka, "truncated-check", topic, 2) == [b"once", b"whole"]
    assert _hits(trafka, rule) == 1


def test_a_half_open_connection_is_given_up_by_its_client_which_reads_on_over_a_new_one(trafka: TrafkaBroker):
    topic = trafka.create_topic("half-open")
    _produce(_producer(trafka, "filler"), topic, [b"a", b"b"])
    rule = trafka.add_fault("half_open", api="fetch", client_id="stranded", count=1)
    started = time.monotonic()
    # librdkafka gives up on a request unanswered for socket.timeout.ms, closes the connection and opens another.
    assert _consume(trafka, "stranded", topic, 2, **{"socket.timeout.ms": 2000}) == [b"a", b"b"]
    assert time.monotonic() - started >= 2.0
    assert _hits(trafka, rule) == 1
    reader = KafkaConsumer(topic, bootstrap_servers=trafka.bootstrap_servers, client_id="unaffected",
                           auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    try:
        assert [m.value for _, m in zip(range(2), reader, strict=False)] == [b"a", b"b"]
    finally:
        reader.close()
    assert _hits(trafka, rule) == 1


def test_refused_connections_for_a_time_while_open_ones_carry_on(trafka: TrafkaBroker):
    topic = trafka.create_topic("refused")
    connected = _producer(trafka, "already-connected")
    assert _produce(connected, topic, [b"before"]) == [0]
    rule = trafka.add_fault("refuse", duration_ms=2000)
    refused_at = time.monotonic()
    newcomer = _producer(trafka, "newcomer", **{"reconnect.backoff.ms": 100, "reconnect.backoff.max.ms": 200})
    newcomer.produce(topic, value=b"later")
    assert _produce(connected, topic, [b"during"]) == [1]  # its connection was open before the rule
    assert trafka.wait_for_hits(rule["id"], 1)["hits"] >= 1
    assert newcomer.flush(WAIT_S) == 0  # once the rule's two seconds are over
    assert time.monotonic() - refused_at >= 2.0
    assert sorted(_consume(trafka, "refused-check", topic, 3)) == [b"before", b"during", b"later"]


def test_cut_resets_the_selected_clients_connections_and_they_reconnect(trafka: TrafkaBroker):
    topic = trafka.create_topic("cut")
    cut, kept = _producer(trafka, "cut-off"), _producer(trafka, "kept-on")
    assert _produce(cut, topic, [b"c1"]) == [0]
    assert _produce(kept, topic, [b"k1"]) == [1]
    rule = trafka.add_fault("cut", client_id="cut-off")
    assert rule["hits"] >= 1 and rule["remaining"] is None  # each of its connections (bootstrap and broker)
    assert trafka.faults()[0]["hits"] == rule["hits"]  # it acted once, when it was added
    assert _produce(cut, topic, [b"c2"]) == [2]  # over a new connection
    assert _produce(kept, topic, [b"k2"]) == [3]


@pytest.mark.parametrize(("rule", "message"), [
    ({"action": "refuse", "client_id": "x"}, "a new connection has no client id yet"),
    ({"action": "cut", "api": "produce"}, "not by api"),
    ({"action": "latency"}, "latency_ms"),
    ({"action": "bandwidth", "bytes_per_s": 0}, "bytes_per_s"),
    ({"action": "truncate", "fraction": 1.5}, "fraction"),
    ({"action": "observe", "duration_ms": 0}, "duration_ms"),
])
def test_network_rules_that_cannot_be_made(trafka: TrafkaBroker, rule, message):
    with pytest.raises(BrokerError, match=message):
        trafka.add_fault(rule.pop("action"), **rule)
