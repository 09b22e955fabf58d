"""Every compression codec, produced by one client and consumed by another.

The broker keeps compressed batches as the producer sent them, so a consumer only sees the data if the
broker stored and served the batch intact (and, where it looks inside, decompressed it correctly).
"""

from __future__ import annotations

import pytest

from compat_tests.clients import CODECS, assert_round_trip, numbered_messages, supports_codec

#: Each producer's batches are read by a different client (librdkafka <-> the Python clients <-> kcat).
PAIRS = [
    ("kafka-python", "confluent-kafka"),
    ("confluent-kafka", "kcat"),
    ("kcat", "aiokafka"),
    ("aiokafka", "kafka-python"),
    ("confluent-kafka", "aiokafka"),
    ("kcat", "kafka-python"),
]


def _pairs():
    for codec in CODECS:
        for producer, consumer in PAIRS:
            reason = supports_codec(producer, codec) or supports_codec(consumer, codec)
            marks = [pytest.mark.skip(reason=reason)] if reason else []
            yield pytest.param(codec, producer, consumer, id=f"{codec}-{producer}-to-{consumer}", marks=marks)
    # kafkajs ships only gzip: both directions.
    yield pytest.param("gzip", "kafkajs", "confluent-kafka", id="gzip-kafkajs-to-confluent-kafka")
    yield pytest.param("gzip", "kcat", "kafkajs", id="gzip-kcat-to-kafkajs")


@pytest.mark.parametrize(("codec", "producer", "consumer"), list(_pairs()))
def test_compressed_round_trip(broker, topic, client_for, codec, producer, consumer):
    name = topic(partitions=2)
    # Compressible values, a few kilobytes each, several records per batch where the client batches.
    messages = numbered_messages(40, prefix=codec, size=3000, partitions=2)

    deliveries = client_for(producer, broker).produce(name, messages, compression=codec)
    consumed = client_for(consumer, broker).consume(name, len(messages))

    assert_round_trip(messages, deliveries, consumed)
