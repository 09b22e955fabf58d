"""File descriptors: a broker started with a low limit (1024, soft and hard) says so at start-up,
refuses topics and partitions that would not fit with POLICY_VIOLATION and a message naming the
limit, creates nothing of a refused request, and goes on serving the partitions it has: producing,
consuming in a group (the first one, whose __consumer_offsets it kept room for), committing
offsets. Each partition holds one descriptor, however many segments it has."""

from __future__ import annotations

import os
import re

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from compat_tests.harness import BrokerProcess, wait_until

LIMIT = 1024
TOPIC_SIZE = 100
TIMEOUT = 30.0


@pytest.fixture(scope="module")
def low_limit_broker(tmp_path_factory: pytest.TempPathFactory):
    # Small segments, so that partitions roll and their older segments are read back.
    process = BrokerProcess(tmp_path_factory.mktemp("descriptors") / "data", name="low-limit",
                            max_open_files=LIMIT, overrides={"log.segment.bytes": 4096})
    process.start()
    yield process
    process.close()


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _create(admin: AdminClient, name: str, partitions: int, **options) -> None:
    admin.create_topics([NewTopic(name, partitions, 1)], request_timeout=TIMEOUT, **options)[name].result(TIMEOUT)


def _refusal(call) -> KafkaError:
    with pytest.raises(KafkaException) as failure:
        call()
    return failure.value.args[0]


def _assert_names_the_limit(error: KafkaError) -> None:
    assert error.code() == KafkaError.POLICY_VIOLATION, error
    message = error.str()
    assert f"limit of {LIMIT} (ulimit -n)" in message, message
    assert "file descriptors" in message and "Raise the limit" in message, message


def _descriptors(broker: BrokerProcess) -> int:
    return len(os.listdir(f"/proc/{broker.pid}/fd"))


def _produce(broker: BrokerProcess, topic: str, partitions: int, per_partition: int) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "batch.num.messages": 5})
    for n in range(per_partition):
        for partition in range(partitions):
            producer.produce(topic, value=b"%d-%d-" % (partition, n) + b"x" * 200, partition=partition)
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0


def _consume_in_group(broker: BrokerProcess, topic: str, group: str, count: int) -> list[tuple[int, int]]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        seen: list[tuple[int, int]] = []

        def read() -> bool:
            for message in consumer.consume(num_messages=count, timeout=0.5):
                assert message.error() is None, message.error()
                seen.append((message.partition(), message.offset()))
            return len(seen) >= count

        wait_until(read, timeout=TIMEOUT, message=lambda: f"{count} records from {topic}, got {len(seen)}")
        consumer.commit(asynchronous=False)
        return seen
    finally:
        consumer.close()


def test_start_up_states_the_limit(low_limit_broker):
    line = next(line for line in low_limit_broker.log_text().splitlines() if "file descriptors: limit" in line)
    assert f"limit {LIMIT} (ulimit -n)" in line
    room = int(re.search(r"room for about (\d+) more partitions", line)[1])
    assert 0 < room < LIMIT


def test_refuses_past_the_limit_and_serves_what_it_has(low_limit_broker):
    broker = low_limit_broker
    admin = _admin(broker)
    _create(admin, "first", 4)
    _produce(broker, "first", 4, 5)

    # Topics until the broker refuses one: the refusal names the limit, nothing of it is made.
    created = []
    while True:
        name = f"filler-{len(created)}"
        try:
            _create(admin, name, TOPIC_SIZE)
        except KafkaException as exc:
            _assert_names_the_limit(exc.args[0])
            break
        created.append(name)
        assert len(created) < LIMIT // TOPIC_SIZE, "the broker never refused"
    assert created, "the broker refused even the first topic"
    topics = admin.list_topics(timeout=TIMEOUT).topics
    assert name not in topics and all(len(topics[t].partitions) == TOPIC_SIZE for t in created)
    assert not any(path.startswith(f"{name}-") for path in os.listdir(broker.data_dir))

    # What Kafka users meet: a huge topic, the same refusal validated only, more partitions.
    _assert_names_the_limit(_refusal(lambda: _create(admin, "huge", 5_000)))
    _assert_names_the_limit(_refusal(lambda: _create(admin, "huge", 5_000, validate_only=True)))
    _assert_names_the_limit(_refusal(
        lambda: admin.create_partitions([NewPartitions("first", 4 + LIMIT)], request_timeout=TIMEOUT)["first"]
        .result(TIMEOUT)))
    assert "huge" not in admin.list_topics(timeout=TIMEOUT).topics

    # The partitions it has keep serving: produce (rolling segments), consume in a group (whose
    # __consumer_offsets the broker kept room for), commit.
    _produce(broker, "first", 4, 100)
    _produce(broker, created[-1], TOPIC_SIZE, 2)
    assert len(_consume_in_group(broker, "first", "late", 420)) == 420
    assert len(_consume_in_group(broker, created[-1], "late", 2 * TOPIC_SIZE)) == 2 * TOPIC_SIZE
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "late"})
    try:
        committed = consumer.committed([TopicPartition("first", p) for p in range(4)], timeout=TIMEOUT)
    finally:
        consumer.close()
    assert sum(tp.offset for tp in committed) == 420

    # One descriptor per partition, whatever their segments: well within the limit.
    topics = admin.list_topics(timeout=TIMEOUT).topics
    assert len(topics["__consumer_offsets"].partitions) == 50
    partitions = sum(len(t.partitions) for t in topics.values())
    assert _descriptors(broker) < LIMIT
    assert partitions <= _descriptors(broker) <= partitions + 300
    assert broker.running
    assert "Too many open files" not in broker.log_text()
