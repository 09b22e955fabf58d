"""ListOffsets through each client: earliest, latest, and the first offset at or after a timestamp."""

from __future__ import annotations

import pytest

from compat_tests.clients import CLIENTS, Message, client_names

BASE_TIMESTAMP = 1_600_000_000_000
RECORDS_PER_PARTITION = 10
LIST_OFFSETS_CLIENTS = client_names("list_offsets")


@pytest.fixture(scope="module")
def timestamped_topic(broker):
    """Two partitions of ten records each, with timestamps BASE_TIMESTAMP + 1000 * i (i = 0..9), and one
    empty partition."""
    name = "list-offsets-timestamped"
    producer = CLIENTS["confluent-kafka"](broker.bootstrap)
    producer.create_topic(name, 3)
    producer.produce(name, [Message(key=f"k{i}".encode(), value=f"v{i}".encode(), partition=partition,
                                    timestamp=BASE_TIMESTAMP + 1000 * i)
                            for partition in (0, 1) for i in range(RECORDS_PER_PARTITION)])
    return name


@pytest.mark.parametrize("client", LIST_OFFSETS_CLIENTS)
def test_earliest_and_latest(broker, timestamped_topic, client_for, client):
    watermarks = client_for(client, broker).watermarks(timestamped_topic)

    assert watermarks == {0: (0, RECORDS_PER_PARTITION), 1: (0, RECORDS_PER_PARTITION), 2: (0, 0)}


@pytest.mark.parametrize("client", LIST_OFFSETS_CLIENTS)
def test_offsets_for_times(broker, timestamped_topic, client_for, client):
    adapter = client_for(client, broker)

    assert adapter.offsets_for_time(timestamped_topic, BASE_TIMESTAMP - 5000) == {0: 0, 1: 0, 2: _none(client, 0)}
    assert adapter.offsets_for_time(timestamped_topic, BASE_TIMESTAMP) == {0: 0, 1: 0, 2: _none(client, 0)}
    # Between the records at +3000 and +4000: the first record at or after the timestamp is offset 4.
    assert adapter.offsets_for_time(timestamped_topic, BASE_TIMESTAMP + 3500) == {0: 4, 1: 4, 2: _none(client, 0)}
    assert adapter.offsets_for_time(timestamped_topic, BASE_TIMESTAMP + 9000) == {0: 9, 1: 9, 2: _none(client, 0)}
    # Later than every record: no offset (kafkajs substitutes the latest offset).
    assert adapter.offsets_for_time(timestamped_topic, BASE_TIMESTAMP + 60_000) == {
        0: _none(client, RECORDS_PER_PARTITION), 1: _none(client, RECORDS_PER_PARTITION), 2: _none(client, 0)}


def _none(client: str, latest: int) -> int | None:
    """What `client` reports for "no record at or after that timestamp" in a partition whose latest
    offset is `latest`."""
    return latest if client == "kafkajs" else None


@pytest.mark.parametrize("client", LIST_OFFSETS_CLIENTS)
def test_latest_follows_produce(broker, topic, client_for, client):
    name = topic(partitions=1)
    adapter = client_for(client, broker)
    assert adapter.watermarks(name) == {0: (0, 0)}

    CLIENTS["confluent-kafka"](broker.bootstrap).produce(name, [Message(value=b"one", partition=0)] * 3)

    assert adapter.watermarks(name) == {0: (0, 3)}
