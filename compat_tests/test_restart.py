"""Durability across broker restarts: a clean stop (SIGTERM) keeps everything and new produces continue
the offsets; a crash (SIGKILL) during produce loses no acknowledged record."""

from __future__ import annotations

import pytest

from compat_tests.clients import CLIENTS, ConfluentClient, assert_round_trip, numbered_messages

RECORDS = 30


def test_clean_restart_keeps_topics_records_and_offsets(broker_factory, topic):
    broker = broker_factory()
    name = topic(partitions=3, on=broker, configs={"retention.ms": "7200000"})
    before = numbered_messages(RECORDS, prefix="before", partitions=3)
    delivered = CLIENTS["kafka-python"](broker.bootstrap).produce(name, before)

    assert broker.stop() == 0, "a clean shutdown exits with status 0"
    broker.restart()

    admin = CLIENTS["confluent-kafka"](broker.bootstrap)
    assert admin.partitions(name) == [0, 1, 2]
    assert admin.describe_configs(name)["retention.ms"] == "7200000"
    assert admin.watermarks(name) == {p: (0, RECORDS // 3) for p in range(3)}
    assert_round_trip(before, delivered, CLIENTS["kafka-python"](broker.bootstrap).consume(name, RECORDS))

    after = numbered_messages(RECORDS, prefix="after", partitions=3)
    delivered_after = CLIENTS["kafka-python"](broker.bootstrap).produce(name, after)
    assert sorted(delivered_after) == sorted((p, offset) for p in range(3)
                                             for offset in range(RECORDS // 3, 2 * RECORDS // 3))
    assert_round_trip(before + after, delivered + delivered_after, admin.consume(name, 2 * RECORDS))


def test_second_restart_after_more_produce(broker_factory, topic):
    """Recovery state written by one restart is good for the next one."""
    broker = broker_factory()
    name = topic(partitions=1, on=broker)
    client = CLIENTS["confluent-kafka"]
    produced, delivered = [], []
    for round_number in range(3):
        messages = numbered_messages(10, prefix=f"round{round_number}", partitions=1)
        delivered += client(broker.bootstrap).produce(name, messages)
        produced += messages
        broker.restart()
    assert_round_trip(produced, delivered, client(broker.bootstrap).consume(name, len(produced)))


def test_connected_producer_carries_on_after_a_restart(broker_factory, topic):
    """A producer that stays up while the broker restarts on the same port reconnects and goes on."""
    broker = broker_factory()
    name = topic(partitions=1, on=broker)
    producer = ConfluentClient(broker.bootstrap).producer(**{"reconnect.backoff.max.ms": 200})
    old_port = broker.port
    delivered: list[tuple[int, bytes]] = []

    def produce(prefix: str) -> None:
        for m in numbered_messages(10, prefix=prefix):
            producer.produce(name, key=m.key, value=m.value, partition=0,
                             on_delivery=lambda err, msg: delivered.append((msg.offset(), msg.value()))
                             if err is None else None)
        assert producer.flush(20) == 0

    produce("before")
    broker.restart()
    if broker.port != old_port:
        pytest.skip(f"port {old_port} was taken while the broker restarted")
    produce("after")

    expected = [m.value for prefix in ("before", "after") for m in numbered_messages(10, prefix=prefix)]
    assert delivered == list(enumerate(expected))
    assert [r.value for r in ConfluentClient(broker.bootstrap).consume(name, 20)] == expected


def test_kill_during_produce_loses_no_acknowledged_record(broker_factory, topic):
    broker = broker_factory({"log.flush.interval.messages": 1})
    name = topic(partitions=2, on=broker)
    acknowledged: dict[tuple[int, int], bytes] = {}
    failed = 0

    def on_delivery(err, msg):
        nonlocal failed
        if err is None:
            acknowledged[(msg.partition(), msg.offset())] = msg.value()
        else:
            failed += 1

    producer = ConfluentClient(broker.bootstrap).producer(**{
        "acks": "all", "linger.ms": 2, "message.timeout.ms": 5000, "reconnect.backoff.max.ms": 100})
    sent = 0
    # Keep records in flight and crash the broker once a few hundred have been acknowledged.
    while len(acknowledged) < 400:
        producer.produce(name, value=f"record-{sent}".encode(), partition=sent % 2, on_delivery=on_delivery)
        sent += 1
        producer.poll(0 if sent % 20 else 0.005)
        assert sent < 200_000, f"only {len(acknowledged)} acknowledgements for {sent} records"
    broker.kill()
    producer.purge(in_queue=True, in_flight=True)
    producer.flush(10)
    assert len(acknowledged) + failed == sent

    broker.restart()

    reader = ConfluentClient(broker.bootstrap)
    watermarks = reader.watermarks(name)
    stored = {(r.partition, r.offset): r.value
              for r in reader.consume(name, sum(high - low for low, high in watermarks.values()))}
    missing = {key: value for key, value in acknowledged.items() if stored.get(key) != value}
    assert not missing, (f"{len(missing)} of {len(acknowledged)} acknowledged records lost or changed after the "
                         f"restart (watermarks now {watermarks}), e.g. {sorted(missing.items())[:5]}")
    for partition, (low, high) in watermarks.items():
        assert low == 0 and high >= max(o for p, o in acknowledged if p == partition) + 1
