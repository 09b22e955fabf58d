"""Produce and read back with every client: keys, values, headers, null keys and values, explicit
timestamps, 1 and 8 partitions, dense offsets in produce order within a partition, and every
producer/consumer pairing."""

from __future__ import annotations

import pytest

from compat_tests.clients import CLIENTS, assert_round_trip, numbered_messages, sample_messages

ALL_CLIENTS = list(CLIENTS)


@pytest.mark.parametrize("partitions", [1, 8])
@pytest.mark.parametrize("client", ALL_CLIENTS)
def test_round_trip(broker, topic, client_for, client, partitions):
    name = topic(partitions=partitions)
    adapter = client_for(client, broker)
    messages = sample_messages(4 * partitions + 12, partitions, client=client)

    deliveries = adapter.produce(name, messages)
    consumed = adapter.consume(name, len(messages))

    assert_round_trip(messages, deliveries, consumed)


@pytest.mark.parametrize(("producer", "consumer"),
                         [(p, c) for p in ALL_CLIENTS for c in ALL_CLIENTS if p != c])
def test_cross_client(broker, topic, client_for, producer, consumer):
    name = topic(partitions=3)
    messages = sample_messages(15, 3, client=producer)

    deliveries = client_for(producer, broker).produce(name, messages)
    consumed = client_for(consumer, broker).consume(name, len(messages))

    assert_round_trip(messages, deliveries, consumed)


@pytest.mark.parametrize(("producer", "settings"), [
    ("confluent-kafka", {"acks": 0}),
    ("confluent-kafka", {"acks": 1}),
    ("confluent-kafka", {"enable.idempotence": True}),
    ("kafkajs", {"idempotent": True}),
], ids=["acks=0", "acks=1", "idempotent", "kafkajs-idempotent"])
def test_producer_settings(broker, topic, client_for, producer, settings):
    """acks=0 (no response at all), acks=1 and idempotent producers (InitProducerId, sequence numbers)."""
    name = topic(partitions=2)
    messages = sample_messages(20, 2, client=producer)

    deliveries = client_for(producer, broker).produce(name, messages, **settings)
    consumed = CLIENTS["kafka-python"](broker.bootstrap).consume(name, len(messages))

    assert_round_trip(messages, deliveries, consumed)


@pytest.fixture(scope="module")
def many_batches_topic(broker):
    """3000 records in two partitions, produced in batches of at most 100 records."""
    name = "many-batches"
    producer = CLIENTS["confluent-kafka"](broker.bootstrap)
    producer.create_topic(name, 2)
    messages = numbered_messages(3000, prefix="bulk", size=200, partitions=2)
    deliveries = producer.produce(name, messages, **{"batch.num.messages": 100, "linger.ms": 20})
    return name, messages, deliveries


@pytest.mark.parametrize("consumer", ALL_CLIENTS)
def test_thousands_of_records_in_many_batches(broker, many_batches_topic, client_for, consumer):
    """Consumers page through many fetches of many batches and stop nowhere in between."""
    name, messages, deliveries = many_batches_topic

    consumed = client_for(consumer, broker).consume(name, len(messages), timeout=60)

    assert_round_trip(messages, deliveries, consumed)


@pytest.mark.parametrize("consumer", [c for c in ALL_CLIENTS if c != "kafkajs"])
def test_consume_from_inside_a_compressed_batch(broker, topic, client_for, consumer):
    """A fetch from an offset in the middle of a compressed batch gets the whole batch; the client skips
    the records before its position and sees exactly the records from that offset on."""
    name = topic(partitions=1)
    messages = numbered_messages(50, prefix="inside", partitions=1)
    CLIENTS["confluent-kafka"](broker.bootstrap).produce(name, messages, compression="lz4", **{"linger.ms": 50})

    consumed = client_for(consumer, broker).consume(name, 30, offset=20)

    assert [(r.offset, r.key, r.value) for r in consumed] == [
        (offset, m.key, m.value) for offset, m in enumerate(messages) if offset >= 20]
