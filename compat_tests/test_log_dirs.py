"""DescribeLogDirs with real clients: kafka-python's ``KafkaAdminClient.describe_log_dirs()`` (what
``kafka-log-dirs.sh --describe`` asks) against a real broker process: the one log directory by its absolute
path, each partition's size equal to its segment files on disk, growing as records are produced, only the
asked-for partitions, unknown topics left out, the volume's total and usable bytes; and the same answer
from Apache Kafka for the same batches.

(confluent-kafka's admin client has no DescribeLogDirs.)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.admin import KafkaAdminClient

from compat_tests.harness import BrokerProcess, wait_until
from compat_tests.test_differential import create
from compat_tests.wire_client import WireClient
from trafka.wire.messages import ProduceRequest
from trafka.wire.records import SimpleRecord, build_batch

TIMEOUT = 30.0


def describe(bootstrap: str, topic_partitions=None) -> list[dict]:
    """The log dirs of the only broker, as kafka-python hands them back (a list of result dicts)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        (answer,) = admin.describe_log_dirs(topic_partitions)
    finally:
        admin.close()
    return answer["log_dirs"]


def sizes(log_dirs: list[dict]) -> dict[tuple[str, int], int]:
    (log_dir,) = log_dirs
    return {(topic["name"], partition["partition_index"]): partition["partition_size"]
            for topic in log_dir["topics"] for partition in topic["partitions"]}


def on_disk(data_dir: Path, topic: str, partitions: int) -> dict[tuple[str, int], int]:
    return {(topic, p): sum(path.stat().st_size for path in (data_dir / f"{topic}-{p}").glob("*.log"))
            for p in range(partitions)}


def produce(bootstrap: str, topic: str, partition: int, count: int, size: int = 1000) -> None:
    client = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "none"})
    failed: list[object] = []
    for n in range(count):
        client.produce(topic, key=f"k{n}".encode(), value=os.urandom(size), partition=partition,
                       on_delivery=lambda error, _: error is not None and failed.append(error))
        client.poll(0)
    assert client.flush(TIMEOUT) == 0 and not failed, failed


def test_sizes_match_the_segment_files_and_grow(broker, topic):
    first, second = topic(partitions=3), topic(partitions=2)
    produce(broker.bootstrap, first, 0, 50)
    produce(broker.bootstrap, first, 2, 10)
    produce(broker.bootstrap, second, 1, 5, size=100)

    (log_dir,) = described = describe(broker.bootstrap)

    assert log_dir["error_code"] == 0
    assert log_dir["log_dir"] == os.path.abspath(broker.data_dir)
    expected = {**on_disk(broker.data_dir, first, 3), **on_disk(broker.data_dir, second, 2)}
    got = sizes(described)
    assert {key: got[key] for key in expected} == expected
    assert expected[(first, 0)] > 50_000 and expected[(first, 1)] == 0 and expected[(second, 1)] > 500
    for topic_ in log_dir["topics"]:
        for partition in topic_["partitions"]:
            assert (partition["offset_lag"], partition["is_future_key"]) == (0, False)
    # kafka-python asks v4 and up: the volume's space, as statvfs gives it.
    stats = os.statvfs(broker.data_dir)
    assert log_dir["total_bytes"] == stats.f_blocks * stats.f_frsize
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]

    before = got[(first, 0)]
    produce(broker.bootstrap, first, 0, 20)
    grown = sizes(describe(broker.bootstrap, {first: [0]}))

    assert grown == on_disk(broker.data_dir, first, 1)
    assert grown[(first, 0)] > before + 20_000


def test_only_the_partitions_asked_for_and_unknown_ones_left_out(broker, topic):
    first, second = topic(partitions=3), topic(partitions=2)
    produce(broker.bootstrap, second, 0, 3)

    by_partition = sizes(describe(broker.bootstrap, {first: [1, 7], second: [0], "no-such-topic": [0]}))
    whole_topic = sizes(describe(broker.bootstrap, [second]))  # kafka-python asks for each of its partitions

    assert set(by_partition) == {(first, 1), (second, 0)}
    assert by_partition[(second, 0)] == on_disk(broker.data_dir, second, 1)[(second, 0)] > 0
    assert whole_topic == on_disk(broker.data_dir, second, 2)
    assert describe(broker.bootstrap, {"no-such-topic": [0]})[0]["topics"] == []


def test_all_topics_include_the_offsets_topic(broker, topic):
    name = topic(partitions=1)
    produce(broker.bootstrap, name, 0, 1)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "log-dirs", "enable.auto.commit": False})
    try:  # a commit creates __consumer_offsets
        consumer.commit(offsets=[TopicPartition(name, 0, 1)], asynchronous=False)
    finally:
        consumer.close()

    listed = sizes(describe(broker.bootstrap))

    assert (name, 0) in listed and ("__consumer_offsets", 0) in listed
    held = {path.name for path in broker.data_dir.iterdir() if path.is_dir() and "-" in path.name}
    assert {f"{t}-{p}" for t, p in listed} == held


# -------------------------------------------------------------------------- the same as Apache Kafka


BATCHES = [build_batch([SimpleRecord(f"k{n}".encode(), bytes(300 + n), timestamp=1_700_000_000_000 + n)
                        for n in range(count)]) for count in (1, 7, 30)]


@pytest.mark.parametrize("target", ["trafka", "kafka"])
def test_the_same_answer_as_kafka(target, request):
    process: BrokerProcess = request.getfixturevalue("broker" if target == "trafka" else "kafka")
    first, second = f"log-dirs-same-a-{target}", f"log-dirs-same-b-{target}"
    with WireClient(process.bootstrap) as client:
        create(client, first, 2, existing_ok=False)
        create(client, second, 1, existing_ok=False)
        for partition, batch in [(0, BATCHES[0]), (0, BATCHES[1]), (1, BATCHES[2])]:
            response = client.request(ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[
                ProduceRequest.TopicProduceData(name=first, partition_data=[
                    ProduceRequest.PartitionProduceData(index=partition, records=batch)])]), 9)
            assert response.responses[0].partition_responses[0].error_code == 0, response

    def answer():
        (log_dir,) = describe(process.bootstrap, {first: [0, 1, 2], second: [0], "log-dirs-unknown": [0]})
        topics = sorted((t["name"].removesuffix(target), sorted(
            (p["partition_index"], p["partition_size"], p["offset_lag"], p["is_future_key"])
            for p in t["partitions"])) for t in log_dir["topics"])
        return log_dir["error_code"], log_dir["log_dir"] == os.path.abspath(process.data_dir), topics

    observed = wait_until(answer, timeout=TIMEOUT)
    expected = (0, True, [("log-dirs-same-a-", [(0, len(BATCHES[0]) + len(BATCHES[1]), 0, False),
                                                (1, len(BATCHES[2]), 0, False)]),
                          ("log-dirs-same-b-", [(0, 0, 0, False)])])
    assert observed == expected
