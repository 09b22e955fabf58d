"""Retention with real clients: segments past a topic's ``retention.ms`` or beyond its
``retention.bytes`` are deleted by the broker on its own, the log start offset that clients see
moves past them, a consumer reading from the earliest offset starts there, and the segments' files
leave the disk; a topic that is only compacted keeps everything.

The broker checks every 200 ms (``log.retention.check.interval.ms``) and removes files at once
(``log.segment.delete.delay.ms=0``), so that the tests wait for seconds, not minutes.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from compat_tests.clients import ConfluentClient, KafkaPythonClient
from compat_tests.harness import BrokerProcess, wait_until

TIMEOUT = 30.0
SEGMENT = {"segment.bytes": "2048"}


@pytest.fixture(scope="module")
def retaining_broker(tmp_path_factory: pytest.TempPathFactory):
    process = BrokerProcess(tmp_path_factory.mktemp("retention") / "data", name="retention", overrides={
        "log.retention.check.interval.ms": 200, "log.segment.delete.delay.ms": 0})
    process.start()
    yield process
    process.close()


def _produce(broker: BrokerProcess, topic: str, count: int, *, timestamp_ms: int, tag: str) -> None:
    # One record a batch, so that the small segments hold several.
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    failed = []
    for n in range(count):
        # A key of its own: compacted topics refuse records without one, and keep every distinct key.
        producer.produce(topic, key=f"{tag}-{n}".encode(), value=f"{tag}-{n}".encode() + b"x" * 200, partition=0,
                         timestamp=timestamp_ms,
                         on_delivery=lambda error, _: error is not None and failed.append(error))
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0 and not failed, failed


def _read_all(broker: BrokerProcess, topic: str, expected: int) -> list[tuple[int, bytes]]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"reader-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])  # offset 0 is gone: the consumer resets to the earliest
        read: list[tuple[int, bytes]] = []

        def done() -> bool:
            for message in consumer.consume(num_messages=100, timeout=0.5):
                assert message.error() is None, message.error()
                read.append((message.offset(), message.value()))
            return len(read) >= expected

        wait_until(done, timeout=TIMEOUT, message=lambda: f"{expected} records of {topic}, read {len(read)}")
        return read
    finally:
        consumer.close()


def _settled_log_start(admin: ConfluentClient, topic: str) -> tuple[int, int]:
    """The partition's watermarks once retention has moved its start and left it: a pass may come while the
    records still arrive, and a later one delete more, so the start must hold over several passes."""
    seen: list[tuple[int, int]] = []

    def settled() -> tuple[int, int] | None:
        seen.append(admin.watermarks(topic)[0])
        last = seen[-5:]
        time.sleep(0.2)
        return last[0] if len(last) == 5 and last[0][0] > 0 and len(set(last)) == 1 else None

    return wait_until(settled, timeout=TIMEOUT, message=lambda: f"the log start of {topic} to settle: {seen[-5:]}")


def _segment_files(broker: BrokerProcess, topic: str) -> list[str]:
    return sorted(path.name for path in (broker.data_dir / f"{topic}-0").glob("*.log*"))


def test_records_past_retention_ms_are_deleted(retaining_broker, topic):
    name = topic(partitions=1, on=retaining_broker, configs={"retention.ms": "60000", **SEGMENT})
    now_ms = int(time.time() * 1000)
    _produce(retaining_broker, name, 40, timestamp_ms=now_ms - 3_600_000, tag="old")  # an hour old
    _produce(retaining_broker, name, 10, timestamp_ms=now_ms, tag="new")
    admin = ConfluentClient(retaining_broker.bootstrap)

    low, high = _settled_log_start(admin, name)

    assert high == 50 and 0 < low <= 40
    read = _read_all(retaining_broker, name, 50 - low)
    assert read[0][0] == low and [value[:5] for _, value in read[-10:]] == [b"new-%d" % n for n in range(10)]
    assert all(value.startswith(b"old-") for _, value in read[:40 - low])
    # The deleted segments' files are gone; kafka-python sees the same log start.
    wait_until(lambda: not any(n.endswith(".deleted") for n in _segment_files(retaining_broker, name)),
               timeout=TIMEOUT, message="the deleted segments' files to be removed")
    assert KafkaPythonClient(retaining_broker.bootstrap).watermarks(name)[0] == (low, 50)


def test_records_beyond_retention_bytes_are_deleted(retaining_broker, topic):
    name = topic(partitions=1, on=retaining_broker, configs={"retention.bytes": "4096", **SEGMENT})
    _produce(retaining_broker, name, 100, timestamp_ms=int(time.time() * 1000), tag="r")
    admin = ConfluentClient(retaining_broker.bootstrap)

    def kept() -> int:
        return sum(p.stat().st_size for p in (retaining_broker.data_dir / f"{name}-0").glob("*.log"))

    # A pass may come while the records still arrive (seen on a loaded machine: one pass deleted records 0-13,
    # or 0-34, while the rest were on their way); a later one brings the log within the bound.
    wait_until(lambda: kept() < 4096 + 2048 + 400, timeout=TIMEOUT, message="the log within retention.bytes")
    low, high = _settled_log_start(admin, name)
    assert high == 100 and kept() >= 4096, kept()
    read = _read_all(retaining_broker, name, 100 - low)
    assert [offset for offset, _ in read] == list(range(low, 100))


def test_a_compacted_topic_keeps_what_retention_would_delete(retaining_broker, topic):
    name = topic(partitions=1, on=retaining_broker,
                 configs={"retention.ms": "1000", "cleanup.policy": "compact", **SEGMENT})
    _produce(retaining_broker, name, 40, timestamp_ms=int(time.time() * 1000) - 3_600_000, tag="kept")
    time.sleep(1.5)  # several retention checks

    assert ConfluentClient(retaining_broker.bootstrap).watermarks(name)[0] == (0, 40)
