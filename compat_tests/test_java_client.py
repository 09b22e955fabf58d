"""Apache Kafka's Java client (kafka-clients 4.3.0) against a real trafka process, through the JVM driver
in compat_tests/java: the idempotent producer, every codec, consumer groups with both group protocols
(classic and KIP-848's consumer), committed offsets across broker restarts, and the Admin client.

Round trips with keys, values, headers, null keys and values and explicit timestamps on 1 and 8
partitions, Java to every other client and back, topic admin errors, ListOffsets and message.max.bytes
are covered where every client is: the "java" entries of the matrices in test_produce_consume.py,
test_admin.py, test_list_offsets.py and test_message_size.py.

The scenarios with group members run them in a JVM of their own (one per test); the rest share the
session's driver JVM. Members commit synchronously after every poll that returned records, so a group
as a whole must read every message exactly once.
"""
from __future__ import annotations

import base64
import re
import struct
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from compat_tests.clients import (CODECS, JAVA_DIR, ClientError, ConfluentClient, JavaClient, JavaDriver, Message,
                                  assert_round_trip, numbered_messages)
from compat_tests.harness import BrokerProcess, wait_until

REBALANCE_TIMEOUT = 30.0
PROTOCOLS = ["classic", "consumer"]
#: Group settings per protocol. Classic members heartbeat every 500 ms (the client default is 3 s) so that
#: they hear of a rebalance quickly; consumer-protocol members take their intervals from the broker.
MEMBER_SETTINGS = {"classic": {"heartbeat.interval.ms": "500"}, "consumer": {}}
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


@pytest.fixture
def group() -> str:
    return f"java-group-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def java_driver() -> Iterator[JavaDriver]:
    """A JVM of this test's own, for group members."""
    with JavaDriver() as driver:
        yield driver


def test_the_driver_runs_the_pinned_java_client(java_driver):
    pinned = re.search(r"kafka-clients-(\S+)\.jar", (JAVA_DIR / "jars.sha256").read_text())[1]
    assert java_driver.version == pinned == "4.3.0"


# --------------------------------------------------------------------------------------- stored batches


def stored_batches(broker: BrokerProcess, topic: str, partition: int) -> list[dict]:
    """The header fields of the record batches in a partition's log segments, as the broker wrote them."""
    batches = []
    for segment in sorted((broker.data_dir / f"{topic}-{partition}").glob("*.log")):
        data = segment.read_bytes()
        position = 0
        while position + 61 <= len(data):
            base_offset, length = struct.unpack_from(">qi", data, position)
            if length == 0:
                break
            (attributes, last_offset_delta, _, _, producer_id, producer_epoch, base_sequence,
             count) = struct.unpack_from(">hiqqqhii", data, position + 21)
            batches.append({"base_offset": base_offset, "codec": attributes & 7, "records": count,
                            "producer_id": producer_id, "producer_epoch": producer_epoch,
                            "base_sequence": base_sequence, "last_offset_delta": last_offset_delta})
            position += 12 + length
    return batches


# --------------------------------------------------------------------------------------- producer


def test_idempotent_producer_with_acks_all(broker, topic):
    """enable.idempotence (the Java default) with acks=all and five requests in flight: one producer id for
    every batch, sequence numbers that run on from batch to batch in each partition, no duplicates."""
    name = topic(partitions=4)
    messages = numbered_messages(400, prefix="idempotent", size=100, partitions=4)

    deliveries = JavaClient(broker.bootstrap).produce(name, messages, **{
        "enable.idempotence": "true", "acks": "all", "max.in.flight.requests.per.connection": 5,
        "linger.ms": 5, "batch.size": 4096})

    assert_round_trip(messages, deliveries, ConfluentClient(broker.bootstrap).consume(name, len(messages)))
    batches = {p: stored_batches(broker, name, p) for p in range(4)}
    assert {b["producer_id"] for bs in batches.values() for b in bs} != {-1}
    assert len({(b["producer_id"], b["producer_epoch"]) for bs in batches.values() for b in bs}) == 1
    for partition, partition_batches in batches.items():
        assert len(partition_batches) > 1, "the producer was meant to send several batches per partition"
        expected_sequence = 0
        for batch in partition_batches:
            assert batch["base_sequence"] == expected_sequence == batch["base_offset"], (partition, batch)
            expected_sequence += batch["records"]


def test_producer_without_idempotence(broker, topic):
    """enable.idempotence=false with acks=1: plain batches without a producer id."""
    name = topic(partitions=2)
    messages = numbered_messages(20, prefix="plain", partitions=2)

    deliveries = JavaClient(broker.bootstrap).produce(name, messages, **{"enable.idempotence": "false", "acks": "1"})

    assert_round_trip(messages, deliveries, JavaClient(broker.bootstrap).consume(name, len(messages)))
    assert {b["producer_id"] for p in range(2) for b in stored_batches(broker, name, p)} == {-1}


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec(broker, topic, codec):
    """The Java producer's compressed batches are stored as sent (with its codec) and read back by
    librdkafka and by the Java consumer; librdkafka's compressed batches are read by the Java consumer."""
    name = topic(partitions=2)
    messages = numbered_messages(40, prefix=f"java-{codec}", size=3000, partitions=2)
    java, confluent = JavaClient(broker.bootstrap), ConfluentClient(broker.bootstrap)

    deliveries = java.produce(name, messages, compression=codec, **{"linger.ms": 20})

    assert_round_trip(messages, deliveries, confluent.consume(name, len(messages)))
    assert_round_trip(messages, deliveries, java.consume(name, len(messages)))
    batches = [b for p in range(2) for b in stored_batches(broker, name, p)]
    assert {b["codec"] for b in batches} == {CODEC_IDS[codec]}
    assert any(b["records"] > 1 for b in batches), batches

    other = topic(partitions=2)
    messages = numbered_messages(40, prefix=f"librdkafka-{codec}", size=3000, partitions=2)
    deliveries = confluent.produce(other, messages, compression=codec, **{"linger.ms": 20})
    assert_round_trip(messages, deliveries, java.consume(other, len(messages)))


# --------------------------------------------------------------------------------------- groups


def produce(bootstrap: str, topic: str, per_partition: int, partitions: int = 6, tag: str = "") -> set[bytes]:
    messages = [Message(f"{tag}{p}-{i}".encode(), key=f"k{i}".encode(), partition=p)
                for p in range(partitions) for i in range(per_partition)]
    JavaClient(bootstrap).produce(topic, messages)
    return {m.value for m in messages}


class Members:
    """The group members running in one driver JVM, by name."""

    def __init__(self, driver: JavaDriver, broker: BrokerProcess, group: str, topic: str, protocol: str):
        self.driver, self.broker, self.group, self.topic, self.protocol = driver, broker, group, topic, protocol
        self.running: list[str] = []
        self.consumed: dict[str, list[tuple[int, int, bytes]]] = {}

    def start(self, *names: str) -> None:
        for name in names:
            self.driver.call("member_start", bootstrap=self.broker.bootstrap, name=name, group_id=self.group,
                             topics=[self.topic], protocol=self.protocol, settings=MEMBER_SETTINGS[self.protocol])
            self.running.append(name)

    def stop(self, name: str) -> dict:
        state = self.driver.call("member_stop", name=name)
        self.running.remove(name)
        self.consumed[name] = [(partition, offset, base64.b64decode(value))
                               for _, partition, offset, value in state["consumed"]]
        if state["error"]:
            raise AssertionError(f"member {name} failed: {state['error']}")
        return state

    def stop_all(self) -> None:
        for name in list(self.running):
            self.stop(name)

    def states(self) -> dict[str, dict]:
        states = {name: self.driver.call("member_state", name=name) for name in self.running}
        for name, state in states.items():
            if state["error"]:
                raise AssertionError(f"member {name} failed: {state['error']}")
        return states

    def partitions(self, state: dict) -> list[int]:
        return [p for t, p in state["assignment"] if t == self.topic]

    def owned_once(self, partitions: int = 6) -> bool:
        """Every partition owned by exactly one running member, and every running member owning some."""
        states = self.states()
        owned = sorted(p for state in states.values() for p in self.partitions(state))
        return owned == list(range(partitions)) and all(state["assignment"] for state in states.values())

    def consumed_count(self) -> int:
        return sum(s["consumed_count"] for s in self.states().values()) + sum(map(len, self.consumed.values()))

    def wait_for(self, condition: Callable[[], object], what: str, timeout: float = REBALANCE_TIMEOUT) -> None:
        wait_until(condition, timeout=timeout, interval=0.1, message=lambda: f"{what}; members {self.states()}")

    def values(self) -> list[bytes]:
        return [value for records in self.consumed.values() for _, _, value in records]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_group_of_three_reads_each_message_once_and_rebalances_when_one_leaves(
        broker, topic, group, java_driver, protocol):
    name = topic(partitions=6)
    produced = produce(broker.bootstrap, name, 30)
    members = Members(java_driver, broker, group, name, protocol)
    try:
        members.start("a", "b", "c")
        members.wait_for(lambda: members.owned_once() and members.consumed_count() >= len(produced),
                         "every partition owned once and every message consumed")
        more = produce(broker.bootstrap, name, 5, tag="more-")
        members.wait_for(lambda: members.consumed_count() >= len(produced) + len(more), "the second batch")

        before = {n: members.partitions(s) for n, s in members.states().items()}
        members.stop("b")  # a clean close leaves the group
        members.wait_for(lambda: members.owned_once(), "the two survivors to take the leaver's partitions")
        after = {n: members.partitions(s) for n, s in members.states().items()}
        assert sorted(after["a"] + after["c"]) == list(range(6)), after
        assert set(before["b"]) <= set(after["a"] + after["c"]), (before, after)
        last = produce(broker.bootstrap, name, 5, tag="last-")
        members.wait_for(lambda: members.consumed_count() >= len(produced) + len(more) + len(last),
                         "the messages produced after the member left")
    finally:
        members.stop_all()
    values = members.values()
    duplicates = [value for value, n in Counter(values).items() if n > 1]
    assert not duplicates, f"read twice: {duplicates[:10]}"
    assert sorted(values) == sorted(produced | more | last), "messages were skipped"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_commit_restart_and_resume_from_committed_offsets(broker_factory, topic, group, protocol):
    broker = broker_factory()
    name = topic(partitions=3, on=broker)
    java = JavaClient(broker.bootstrap)
    java.produce(name, numbered_messages(30, prefix="resume", partitions=3))

    first = java.call("group_consume", group_id=group, protocol=protocol, topics=[name], count=18,
                      metadata="checkpoint")
    positions: dict[int, int] = {}
    for record in first:
        positions[record["partition"]] = max(positions.get(record["partition"], 0), record["offset"] + 1)

    broker.restart()
    java = JavaClient(broker.bootstrap)
    committed = java.call("list_group_offsets", group_id=group)
    assert {(t, p): (o, m) for t, p, o, m in committed} == {
        (name, p): (offset, "checkpoint") for p, offset in positions.items()}

    rest = java.call("group_consume", group_id=group, protocol=protocol, topics=[name], count=12)
    first_keys = {(r["partition"], r["offset"]) for r in first}
    rest_keys = {(r["partition"], r["offset"]) for r in rest}
    assert not first_keys & rest_keys, "re-delivered after the restart"
    assert first_keys | rest_keys == {(p, o) for p in range(3) for o in range(10)}
    assert {(t, p): o for t, p, o, _ in java.call("list_group_offsets", group_id=group)} == {
        (name, p): 10 for p in range(3)}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_members_carry_on_across_a_broker_restart(broker_factory, topic, group, java_driver, protocol):
    """Two members stay up while the broker restarts on the same port: they reconnect, read what is
    produced afterwards, and nothing is read twice."""
    broker = broker_factory()
    name = topic(partitions=6, on=broker)
    produced = produce(broker.bootstrap, name, 10)
    members = Members(java_driver, broker, group, name, protocol)
    try:
        members.start("a", "b")
        members.wait_for(lambda: members.owned_once() and members.consumed_count() >= len(produced),
                         "every message before the restart")
        before = {n: (s["assignment"], s["revoked"]) for n, s in members.states().items()}
        old_port = broker.port
        broker.restart()
        if broker.port != old_port:
            pytest.skip(f"port {old_port} was taken while the broker restarted")
        more = produce(broker.bootstrap, name, 10, tag="after-restart-")
        members.wait_for(lambda: members.owned_once() and members.consumed_count() >= len(produced) + len(more),
                         "the messages produced after the restart")
        if protocol == "consumer":
            # The group was stored in __consumer_offsets: members heartbeat on at their epochs, nothing is
            # revoked. (A classic member may rejoin: when no broker answered for a while the client
            # re-bootstraps its metadata, sees the topic's partitions "change" and asks for a rebalance.)
            assert {n: (s["assignment"], s["revoked"]) for n, s in members.states().items()} == before
    finally:
        members.stop_all()
    values = members.values()
    assert sorted(values) == sorted(produced | more), "messages were skipped or read twice"


# --------------------------------------------------------------------------------------- admin


def test_admin_topics_configs_and_cluster(broker, topic):
    java = JavaClient(broker.bootstrap)
    name = topic()

    java.create_topic(name, 3, configs={"retention.ms": "3600000", "cleanup.policy": "compact"})
    described = java.call("describe_topic", topic=name)
    assert described["name"] == name and not described["internal"]
    assert [(p["partition"], p["leader"], p["replicas"], p["isr"]) for p in described["partitions"]] == [
        (p, broker.node_id, [broker.node_id], [broker.node_id]) for p in range(3)]

    configs = java.call("describe_configs", name=name)
    assert (configs["retention.ms"]["value"], configs["retention.ms"]["source"]) == (
        "3600000", "DYNAMIC_TOPIC_CONFIG")
    assert configs["cleanup.policy"]["value"] == "compact"
    assert configs["segment.bytes"]["source"] != "DYNAMIC_TOPIC_CONFIG"

    java.create_partitions(name, 5)
    wait_until(lambda: java.partitions(name) == [0, 1, 2, 3, 4], message="five partitions")
    java.delete_topic(name)
    wait_until(lambda: name not in java.list_topics(), message=f"{name} to disappear")
    with pytest.raises(ClientError) as refused:
        java.call("describe_topic", topic=name)
    assert refused.value.error == "UNKNOWN_TOPIC_OR_PARTITION", refused.value

    cluster = java.call("describe_cluster")
    assert cluster["cluster_id"]
    assert cluster["nodes"] == [{"id": broker.node_id, "host": broker.host, "port": broker.port, "rack": None}]
    assert cluster["controller"] == broker.node_id


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_admin_consumer_groups_and_their_offsets(broker, topic, group, java_driver, protocol):
    """List, describe and delete consumer groups and list, alter and delete their offsets with the
    Admin client, around a group of two Java members."""
    name = topic(partitions=4)
    produced = produce(broker.bootstrap, name, 5, partitions=4)
    java = JavaClient(broker.bootstrap)
    members = Members(java_driver, broker, group, name, protocol)
    try:
        members.start("a", "b")
        members.wait_for(lambda: members.owned_once(4) and members.consumed_count() >= len(produced),
                         "every message consumed by a stable group")

        def listed_stable():
            listed = [g for g in java.call("list_groups") if g["group_id"] == group]
            assert len(listed) == 1, listed
            return listed[0] if listed[0]["state"] == "STABLE" else None

        listed = wait_until(listed_stable, message="the group to be listed as stable")
        assert (listed["type"], listed["protocol"]) == (protocol.upper(), "consumer"), listed

        def stable_description():
            description = java.call("describe_groups", groups=[group])[group]
            return description if description["state"] == "STABLE" else None

        description = wait_until(stable_description, message="the group to be described as stable")
        assert description["type"] == protocol.upper()
        assert description["assignor"] == ("uniform" if protocol == "consumer" else "range")
        assert description["coordinator"] == broker.node_id
        assert sorted(m["client_id"] for m in description["members"]) == ["a", "b"]
        assert sorted(p for m in description["members"] for _, p in m["assignment"]) == [0, 1, 2, 3]

        with pytest.raises(ClientError) as refused:
            java.call("delete_groups", groups=[group])
        assert refused.value.error == "NON_EMPTY_GROUP", refused.value
        with pytest.raises(ClientError) as refused:
            java.call("alter_group_offsets", group_id=group, offsets=[[name, 0, 0]])
        assert refused.value.error == "UNKNOWN_MEMBER_ID", refused.value
    finally:
        members.stop_all()
    assert sorted(members.values()) == sorted(produced)

    assert sorted((t, p, o) for t, p, o, _ in java.call("list_group_offsets", group_id=group)) == [
        (name, p, 5) for p in range(4)]
    wait_until(lambda: java.call("describe_groups", groups=[group])[group]["state"] == "EMPTY",
               message="the group to be empty")

    java.call("alter_group_offsets", group_id=group, offsets=[[name, p, 2] for p in range(4)])
    assert sorted((t, p, o) for t, p, o, _ in java.call("list_group_offsets", group_id=group)) == [
        (name, p, 2) for p in range(4)]
    again = java.call("group_consume", group_id=group, protocol=protocol, topics=[name], count=12)
    assert sorted((r["partition"], r["offset"]) for r in again) == [(p, o) for p in range(4) for o in range(2, 5)]

    java.call("delete_group_offsets", group_id=group, topic=name, partitions=[0])
    assert sorted((t, p) for t, p, o, _ in java.call("list_group_offsets", group_id=group) if o is not None) == [
        (name, p) for p in range(1, 4)]

    java.call("delete_groups", groups=[group])
    assert group not in {g["group_id"] for g in java.call("list_groups")}
    with pytest.raises(ClientError) as refused:
        java.call("delete_groups", groups=[group])
    assert refused.value.error == "GROUP_ID_NOT_FOUND", refused.value
