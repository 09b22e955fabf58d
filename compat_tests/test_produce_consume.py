"""Produce and read back with every client: keys, values, headers, null keys and values, explicit
timestamps, 1 and 8 partitions, dense offsets in produce order within a partition, and every
producer/consumer pairing."""

from __future__ import annotations

import pytest

from compat_tests.clients import CLIENTS, assert_round_trip, client_names, sample_messages

ALL_CLIENTS = list(CLIENTS)
CONSUMERS = client_names("consume")


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
                         [(p, c) for p in ALL_CLIENTS for c in CONSUMERS if p != c])
def test_cross_client(broker, topic, client_for, producer, consumer):
    name = topic(partitions=3)
    messages = sample_messages(15, 3, client=producer)

    deliveries = client_for(producer, broker).produce(name, messages)
    consumed = client_for(consumer, broker).consume(name, len(messages))

    assert_round_trip(messages, deliveries, consumed)
