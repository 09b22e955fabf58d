"""Committed offsets with real clients: durability across broker restarts, commit metadata, and the
admin clients' group operations (list, describe, delete groups; list and alter group offsets)."""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata

from compat_tests.clients import ConfluentClient, Message
from compat_tests.harness import wait_until

TIMEOUT = 30.0


def _group() -> str:
    return f"group-{uuid.uuid4().hex[:8]}"


def _produce(bootstrap: str, topic: str, count: int, partitions: int, start: int = 0) -> None:
    ConfluentClient(bootstrap).produce(
        topic, [Message(f"m{i}".encode(), partition=i % partitions) for i in range(start, start + count)]
    )


def _confluent_consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": 6000})


def _read(consumer: Consumer, count: int) -> list:
    got = []
    deadline = time.monotonic() + TIMEOUT
    while len(got) < count and time.monotonic() < deadline:
        for message in consumer.consume(count - len(got), 0.5):
            assert message.error() is None, message.error()
            got.append(message)
    return got


def test_commit_restart_resume_with_metadata_confluent(broker_factory, topic):
    broker = broker_factory()
    name = topic(partitions=3, on=broker)
    group = _group()
    _produce(broker.bootstrap, name, 30, 3)
    consumer = _confluent_consumer(broker.bootstrap, group)
    consumer.subscribe([name])
    first = _read(consumer, 18)
    assert len(first) == 18
    positions = {}
    for message in first:
        positions[message.partition()] = message.offset() + 1
    consumer.commit(offsets=[TopicPartition(name, p, o, metadata=f"meta-{p}") for p, o in positions.items()],
                    asynchronous=False)
    consumer.close()

    broker.restart()
    consumer = _confluent_consumer(broker.bootstrap, group)
    committed = consumer.committed([TopicPartition(name, p) for p in range(3)], timeout=TIMEOUT)
    assert {tp.partition: (tp.offset, tp.metadata) for tp in committed} == {
        p: (positions.get(p, -1001), f"meta-{p}" if p in positions else None) for p in range(3)}
    consumer.subscribe([name])
    rest = _read(consumer, 12)
    consumer.close()
    first_keys = {(m.partition(), m.offset()) for m in first}
    rest_keys = {(m.partition(), m.offset()) for m in rest}
    assert not first_keys & rest_keys, "re-delivered after the restart"
    assert sorted(m.value() for m in first + rest) == sorted(f"m{i}".encode() for i in range(30))


def test_committed_offsets_survive_a_crash_kafka_python(broker_factory, topic):
    broker = broker_factory()
    name = topic(partitions=2, on=broker)
    group = _group()
    _produce(broker.bootstrap, name, 20, 2)
    consumer = KafkaConsumer(name, bootstrap_servers=broker.bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False)
    seen = []
    deadline = time.monotonic() + TIMEOUT
    while len(seen) < 10 and time.monotonic() < deadline:
        for records in consumer.poll(500, max_records=10 - len(seen)).values():
            seen.extend(records)
    assert len(seen) == 10, f"read {len(seen)} of the 10 records wanted before committing"
    consumer.commit()
    expected = {p: consumer.committed(KafkaTopicPartition(name, p)) for p in range(2)}
    consumer.close()
    broker.restart(crash=True)  # SIGKILL: acknowledged commits are already in the log
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group, enable_auto_commit=False)
    after = {p: consumer.committed(KafkaTopicPartition(name, p)) for p in range(2)}
    consumer.close()
    assert after == expected and sum(o or 0 for o in after.values()) == 10


def test_admin_group_operations_kafka_python(broker, topic):
    name = topic(partitions=2)
    group = _group()
    _produce(broker.bootstrap, name, 4, 2)
    consumer = KafkaConsumer(name, bootstrap_servers=broker.bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False)
    wait_until(lambda: consumer.poll(200) or consumer.assignment(), timeout=TIMEOUT, message="an assignment")
    consumer.commit({KafkaTopicPartition(name, 0): OffsetAndMetadata(1, "first", -1)})
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        listed = {g["group_id"]: g for g in admin.list_groups()}
        assert (listed[group]["protocol_type"], listed[group]["group_state"]) == ("consumer", "Stable")
        described = admin.describe_groups([group])[group]
        assert described["group_state"] == "Stable" and len(described["members"]) == 1
        assert described["members"][0]["member_assignment"]["assigned_partitions"][0]["partitions"] == [0, 1]
        offsets = admin.list_group_offsets(group)[group]
        assert (offsets[KafkaTopicPartition(name, 0)].offset, offsets[KafkaTopicPartition(name, 0)].metadata) == (
            1, "first")
        assert admin.delete_groups([group]) == {group: "NonEmptyGroupError"}
        consumer.close()
        wait_until(lambda: admin.describe_groups([group])[group]["group_state"] == "Empty", timeout=TIMEOUT,
                   message="the group to be empty")
        admin.alter_group_offsets(group, {KafkaTopicPartition(name, 1): OffsetAndMetadata(2, "set", -1)})
        offsets = admin.list_group_offsets(group)[group]
        assert {tp.partition: o.offset for tp, o in offsets.items()} == {0: 1, 1: 2}
        assert admin.delete_groups([group]) == {group: "OK"}
        assert group not in [g["group_id"] for g in admin.list_groups()]
    finally:
        admin.close()


def test_admin_group_operations_confluent(broker, topic):
    name = topic(partitions=2)
    group = _group()
    _produce(broker.bootstrap, name, 4, 2)
    consumer = _confluent_consumer(broker.bootstrap, group)
    consumer.subscribe([name])
    _read(consumer, 4)
    consumer.commit(offsets=[TopicPartition(name, 0, 2, metadata="meta")], asynchronous=False)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    listed = admin.list_consumer_groups(request_timeout=TIMEOUT).result()
    assert group in {g.group_id for g in listed.valid}
    described = admin.describe_consumer_groups([group], request_timeout=TIMEOUT)[group].result()
    assert str(described.state).endswith("STABLE") and len(described.members) == 1
    assert {tp.partition for tp in described.members[0].assignment.topic_partitions} == {0, 1}

    request = [ConsumerGroupTopicPartitions(group, [TopicPartition(name, 0), TopicPartition(name, 1)])]
    offsets = admin.list_consumer_group_offsets(request, request_timeout=TIMEOUT)[group].result()
    assert {tp.partition: (tp.offset, tp.metadata) for tp in offsets.topic_partitions}[0] == (2, "meta")

    with pytest.raises(Exception, match="NON_EMPTY_GROUP|not empty"):
        admin.delete_consumer_groups([group], request_timeout=TIMEOUT)[group].result()
    consumer.close()
    altered = [ConsumerGroupTopicPartitions(group, [TopicPartition(name, 1, 3)])]
    admin.alter_consumer_group_offsets(altered, request_timeout=TIMEOUT)[group].result()
    offsets = admin.list_consumer_group_offsets(request, request_timeout=TIMEOUT)[group].result()
    assert {tp.partition: tp.offset for tp in offsets.topic_partitions} == {0: 2, 1: 3}
    admin.delete_consumer_groups([group], request_timeout=TIMEOUT)[group].result()
    listed = admin.list_consumer_groups(request_timeout=TIMEOUT).result()
    assert group not in {g.group_id for g in listed.valid}
