"""Share consumers (KIP-932) with unmodified clients on a real trafka process: Apache Kafka's KafkaShareConsumer
(through the Java driver) and confluent-kafka's ShareConsumer (librdkafka) read a topic as a queue.

Several consumers of one group share a partition's records, each delivered once when all accept; a released record
comes back with a higher delivery count; a rejected one is archived; records whose lock expires (their consumer
went quiet) go to another consumer, as do those of a consumer killed -9 (its connection closed); a record released
past group.share.delivery.count.limit is archived; a broker restart keeps the group's progress; a share group and a
consumer group read the same topic independently; a read_committed group (share.isolation.level) never delivers
aborted transactions' records.
"""

from __future__ import annotations

import base64
import os
import signal
import time
from collections.abc import Iterator

import pytest

from compat_tests.clients import JavaDriver, shared_java_driver
from compat_tests.harness import BrokerProcess
from compat_tests.test_differential import create
from compat_tests.wire_client import WireClient
from trafka.wire.messages import ShareGroupDescribeRequest

confluent_kafka = pytest.importorskip("confluent_kafka")
if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("this confluent-kafka has no ShareConsumer", allow_module_level=True)

LOCK_MS = 4000  # (long enough for a loaded machine to hand every fetched record to its consumer)
DELIVERY_LIMIT = 3
SETTINGS = {"offsets.topic.num.partitions": 1, "group.share.heartbeat.interval.ms": 1000,
            "group.share.min.heartbeat.interval.ms": 1000,
            "group.share.record.lock.duration.ms": LOCK_MS, "group.share.delivery.count.limit": DELIVERY_LIMIT}
WAIT_S = 30


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("share-consumers") / "data", overrides=SETTINGS,
                            name="share-consumers")
    process.start()
    yield process
    process.close()


def java_driver() -> JavaDriver:
    try:
        return shared_java_driver()
    except Exception as exc:  # no java, no driver jars
        pytest.skip(f"the Java driver cannot run here: {exc}")


# -- the clients ------------------------------------------------------------------------------------------

class Record(tuple):
    """(partition, offset, delivery count, value)."""

    @property
    def offset(self) -> int:
        return self[1]

    @property
    def delivery_count(self) -> int:
        return self[2]


class LibrdkafkaShare:
    """confluent-kafka's ShareConsumer; ``explicit``: records are acknowledged one by one, then committed."""

    def __init__(self, broker: BrokerProcess, group: str, name: str, topic: str, *, explicit: bool = False):
        config = {"bootstrap.servers": broker.bootstrap, "group.id": group, "client.id": name}
        if explicit:
            config["share.acknowledgement.mode"] = "explicit"
        self.name = name
        self.consumer = confluent_kafka.ShareConsumer(config)
        self.consumer.subscribe([topic])
        self._last: list = []

    def poll(self, timeout_s: float = 0.3, ack: str | None = None) -> list[Record]:
        messages = [m for m in self.consumer.poll(timeout_s) if m.error() is None]
        if ack is not None:
            kind = getattr(confluent_kafka.AcknowledgeType, ack.upper())
            for message in messages:
                self.consumer.acknowledge(message, kind)
            if messages:
                self.consumer.commit_sync()
        return [Record((m.partition(), m.offset(), m.delivery_count(), m.value())) for m in messages]

    def close(self) -> None:
        self.consumer.close()


class JavaShare:
    """Apache Kafka's KafkaShareConsumer in the Java driver (its own JVM when ``driver`` is given)."""

    def __init__(self, broker: BrokerProcess, group: str, name: str, topic: str, *, explicit: bool = False,
                 driver: JavaDriver | None = None):
        self.driver = driver or java_driver()
        self.broker, self.name = broker, name
        settings = {"share.acknowledgement.mode": "explicit"} if explicit else {}
        self.driver.call("share_open", bootstrap=broker.bootstrap, name=name, group_id=group, topics=[topic],
                         settings=settings)

    def poll(self, timeout_s: float = 0.3, ack: str | None = None) -> list[Record]:
        records = self.driver.call("share_poll", bootstrap=self.broker.bootstrap, name=self.name,
                                   timeout_ms=int(timeout_s * 1000), ack=ack, commit=ack is not None)
        return [Record((r["partition"], r["offset"], r["delivery_count"], base64.b64decode(r["value"])))
                for r in records]

    def close(self) -> None:
        self.driver.call("share_close", bootstrap=self.broker.bootstrap, name=self.name)


def produce(broker: BrokerProcess, topic: str, values: list[bytes]) -> None:
    """``values`` appended as one batch: a consumer's ShareFetch waiting for records is woken by the append and
    acquires them all at once (records appended one by one could come to it one fetch apart)."""
    # (a long linger keeps them in one batch however busy the machine is; flush() sends at once regardless)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5000})
    for value in values:
        producer.produce(topic, value=value)
    producer.flush(10)


def joined(broker: BrokerProcess, group: str, consumers, partitions: int = 1) -> None:
    """Poll the consumers until each is a member with an assignment (records produced from then on are theirs)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        for consumer in consumers:
            assert not consumer.poll(0.2), "records before any were produced"
        with WireClient(broker.bootstrap) as client:
            described = client.request(ShareGroupDescribeRequest(group_ids=[group]), 1).groups[0]
        assigned = {m.client_id for m in described.members
                    if sum(len(tp.partitions) for tp in m.assignment.topic_partitions) > 0}
        if described.error_code == 0 and assigned >= {c.name for c in consumers}:
            return
        assert time.monotonic() < deadline, f"the consumers did not join: {described}"


def poll_until(consumer, predicate, what: str, timeout_s: float = WAIT_S, ack: str | None = None) -> list[Record]:
    deadline = time.monotonic() + timeout_s
    got: list[Record] = []
    while not predicate(got):
        assert time.monotonic() < deadline, f"{what}: got {got}"
        got += consumer.poll(0.5, ack=ack)
    return got


def new_topic(broker: BrokerProcess, name: str) -> str:
    with WireClient(broker.bootstrap) as client:
        create(client, name, 1)
    return name


# -- the tests ----------------------------------------------------------------------------------------------

def test_consumers_of_a_group_share_one_partition_each_record_once(share_broker):
    topic = new_topic(share_broker, "share-once")
    consumers = [LibrdkafkaShare(share_broker, "g-once", "rd1", topic), LibrdkafkaShare(share_broker, "g-once",
                                                                                         "rd2", topic),
                 JavaShare(share_broker, "g-once", "java1", topic)]
    try:
        joined(share_broker, "g-once", consumers)
        seen: dict[str, list[Record]] = {c.name: [] for c in consumers}
        deadline = time.monotonic() + WAIT_S
        for round_ in range(6):  # records arrive while every consumer polls (each fetching in the background)
            produce(share_broker, topic, [b"r%d-%d" % (round_, i) for i in range(10)])
            for consumer in consumers:
                seen[consumer.name] += consumer.poll(0.2)
        while sum(map(len, seen.values())) < 60:
            assert time.monotonic() < deadline, seen
            for consumer in consumers:
                seen[consumer.name] += consumer.poll(0.2)
        for consumer in consumers:  # their acknowledgements go out; nothing is left to deliver
            assert consumer.poll(0.5) == []
        delivered = sorted((r.offset, r.delivery_count) for got in seen.values() for r in got)
        assert delivered == [(offset, 1) for offset in range(60)]
        assert sum(1 for got in seen.values() if got) >= 2, {name: len(got) for name, got in seen.items()}
    finally:
        for consumer in consumers:
            consumer.close()


@pytest.mark.parametrize("client", ["librdkafka", "java"])
def test_release_redelivers_with_a_higher_delivery_count_and_reject_archives(share_broker, client):
    topic = new_topic(share_broker, f"share-release-{client}")
    group = f"g-release-{client}"
    kind = LibrdkafkaShare if client == "librdkafka" else JavaShare
    consumer = kind(share_broker, group, f"{client}-releaser", topic, explicit=True)
    try:
        joined(share_broker, group, [consumer])
        produce(share_broker, topic, [b"a", b"b", b"c"])
        first = poll_until(consumer, lambda got: len(got) >= 3, "first delivery", ack="release")
        assert [(r.offset, r.delivery_count) for r in first] == [(0, 1), (1, 1), (2, 1)]
        second = poll_until(consumer, lambda got: len(got) >= 3, "redelivery", ack="reject")
        assert [(r.offset, r.delivery_count, r[3]) for r in second] == [(0, 2, b"a"), (1, 2, b"b"), (2, 2, b"c")]
        # rejected: archived, never delivered again; the next record comes instead
        produce(share_broker, topic, [b"d"])
        third = poll_until(consumer, lambda got: len(got) >= 1, "after the rejection", ack="accept")
        assert [(r.offset, r.delivery_count) for r in third] == [(3, 1)]
    finally:
        consumer.close()


def test_an_expired_lock_redelivers_to_another_member_and_the_delivery_limit_archives(share_broker):
    topic = new_topic(share_broker, "share-expiry")
    try:
        own_jvm = JavaDriver()
    except Exception as exc:
        pytest.skip(f"the Java driver cannot run here: {exc}")
    other = None
    try:
        quiet = JavaShare(share_broker, "g-expiry", "quiet", topic, explicit=True, driver=own_jvm)
        joined(share_broker, "g-expiry", [quiet])
        produce(share_broker, topic, [b"x"])
        got = poll_until(quiet, lambda got: got, "the first delivery")  # acquired, never acknowledged
        assert [(r.offset, r.delivery_count) for r in got] == [(0, 1)]
        os.kill(own_jvm.process.pid, signal.SIGSTOP)  # frozen: still a member (its session lasts), fetching nothing
        started = time.monotonic()
        other = LibrdkafkaShare(share_broker, "g-expiry", "other", topic, explicit=True)
        again = poll_until(other, lambda got: got, "the redelivery after the lock expired", ack="release")
        assert time.monotonic() - started >= LOCK_MS / 1000 - 0.5
        assert [(r.offset, r.delivery_count) for r in again] == [(0, 2)]
        last = poll_until(other, lambda got: got, "the third delivery", ack="release")
        assert [(r.offset, r.delivery_count) for r in last] == [(0, DELIVERY_LIMIT)]
        # released after its last delivery: archived; the next record is delivered instead
        produce(share_broker, topic, [b"y"])
        after = poll_until(other, lambda got: got, "after the delivery limit", ack="accept")
        assert [(r.offset, r.delivery_count) for r in after] == [(1, 1)]
    finally:
        own_jvm.kill()
        if other is not None:
            other.close()


def test_a_consumer_killed_has_its_records_redelivered(share_broker):
    """Its connection closes with it: its share session ends and its records are released (as Kafka 4.4 does),
    so another consumer gets them again."""
    topic = new_topic(share_broker, "share-killed")
    try:
        own_jvm = JavaDriver()
    except Exception as exc:
        pytest.skip(f"the Java driver cannot run here: {exc}")
    survivor = None
    try:
        victim = JavaShare(share_broker, "g-killed", "victim", topic, explicit=True, driver=own_jvm)
        joined(share_broker, "g-killed", [victim])
        produce(share_broker, topic, [b"k%d" % i for i in range(5)])
        got = poll_until(victim, lambda got: len(got) >= 5, "the victim's records")
        assert [r.offset for r in got] == [0, 1, 2, 3, 4]
        own_jvm.kill()  # kill -9: no acknowledgement, no leaving
        survivor = LibrdkafkaShare(share_broker, "g-killed", "survivor", topic)
        again = poll_until(survivor, lambda got: len(got) >= 5, "the victim's records, redelivered")
        assert sorted((r.offset, r.delivery_count) for r in again) == [(o, 2) for o in range(5)]
    finally:
        own_jvm.kill()
        if survivor is not None:
            survivor.close()


def test_a_share_group_and_a_consumer_group_read_the_same_topic_independently(share_broker):
    topic = new_topic(share_broker, "share-and-classic")
    share = LibrdkafkaShare(share_broker, "g-share-side", "share-side", topic)
    classic = confluent_kafka.Consumer({"bootstrap.servers": share_broker.bootstrap, "group.id": "g-classic-side",
                                        "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        joined(share_broker, "g-share-side", [share])
        produce(share_broker, topic, [b"s%d" % i for i in range(10)])
        shared = poll_until(share, lambda got: len(got) >= 10, "the share group's records")
        classic.subscribe([topic])
        read = []
        deadline = time.monotonic() + WAIT_S
        while len(read) < 10 and time.monotonic() < deadline:
            message = classic.poll(0.5)
            if message is not None and message.error() is None:
                read.append(message.offset())
        assert sorted(r.offset for r in shared) == read == list(range(10))
    finally:
        classic.close()
        share.close()


def test_a_broker_restart_keeps_the_groups_progress(share_broker):
    topic = new_topic(share_broker, "share-restart")
    consumer = LibrdkafkaShare(share_broker, "g-restart", "before", topic, explicit=True)
    try:
        joined(share_broker, "g-restart", [consumer])
        produce(share_broker, topic, [b"p%d" % i for i in range(4)])
        got = poll_until(consumer, lambda got: len(got) >= 4, "before the restart", ack="accept")
        assert [r.offset for r in got] == [0, 1, 2, 3]
        produce(share_broker, topic, [b"p4", b"p5"])
        got = poll_until(consumer, lambda got: len(got) >= 2, "released before the restart", ack="release")
        assert [(r.offset, r.delivery_count) for r in got] == [(4, 1), (5, 1)]
    finally:
        consumer.close()
    share_broker.restart()
    after = LibrdkafkaShare(share_broker, "g-restart", "after", topic, explicit=True)
    try:
        got = poll_until(after, lambda got: len(got) >= 2, "after the restart", ack="accept")
        assert [(r.offset, r.delivery_count) for r in got] == [(4, 2), (5, 2)]
    finally:
        after.close()


def test_a_read_committed_group_skips_aborted_transactions(share_broker):
    from compat_tests.test_differential_share_fetch import set_group_configs

    topic = new_topic(share_broker, "share-txn")
    with WireClient(share_broker.bootstrap) as client:
        set_group_configs(client, "g-txn", share_isolation_level="read_committed",
                          share_auto_offset_reset="earliest")
    producer = confluent_kafka.Producer({"bootstrap.servers": share_broker.bootstrap, "transactional.id": "share-txn"})
    producer.init_transactions(10)
    for values, commit in (([b"aborted-1", b"aborted-2"], False), ([b"committed-1", b"committed-2"], True)):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value=value)
        producer.flush(10)
        if commit:
            producer.commit_transaction(10)
        else:
            producer.abort_transaction(10)
    produce(share_broker, topic, [b"plain"])
    consumers = [LibrdkafkaShare(share_broker, "g-txn", "rd-txn", topic), JavaShare(share_broker, "g-txn",
                                                                                   "java-txn", topic)]
    try:
        seen: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(seen) < 3:
            assert time.monotonic() < deadline, seen
            for consumer in consumers:
                seen += [r[3] for r in consumer.poll(0.3)]
        for consumer in consumers:
            seen += [r[3] for r in consumer.poll(0.5)]
        assert sorted(seen) == [b"committed-1", b"committed-2", b"plain"]
    finally:
        for consumer in consumers:
            consumer.close()


def test_share_consumers_on_a_cluster_keep_their_progress_when_a_leader_dies(zookeeper, tmp_path):
    """Three brokers: the partitions' leaders keep their share partitions, their state written to the share
    coordinators on whichever brokers lead the keys; a leader killed -9, the new leader loads the state: what was
    accepted (acknowledgements committed synchronously: an acknowledgement in flight when its broker dies is lost,
    and its records come again, as on Kafka) is not delivered again, what comes next is delivered once."""
    from compat_tests.cluster import start_cluster, wait
    from trafka.wire.messages import CreateTopicsRequest, FindCoordinatorRequest, MetadataRequest

    cluster = start_cluster(zookeeper, tmp_path, {**SETTINGS, "auto.leader.rebalance.enable": "false",
                                                  "share.coordinator.state.topic.num.partitions": 3})
    consumers = []
    try:
        first = next(b for b in cluster.brokers if b.running)
        bootstrap = ",".join(f"{b.host}:{b.port}" for b in cluster.brokers)
        with WireClient(f"{first.host}:{first.port}") as client:
            created = client.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
                name="share-cluster", num_partitions=3, replication_factor=3, assignments=[], configs=[])],
                timeout_ms=30_000), 7)
            assert created.topics[0].error_code == 0, created

        def leaders() -> dict[int, int]:
            live = next(b for b in cluster.brokers if b.running)
            with WireClient(f"{live.host}:{live.port}") as client:
                topic = client.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
                    name="share-cluster")], allow_auto_topic_creation=False), 12).topics[0]
            return {p.partition_index: p.leader_id for p in topic.partitions}

        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})

        def produce_values(values):
            for value in values:
                producer.produce("share-cluster", value=value, partition=int(value.split(b"-")[1]) % 3)
            assert producer.flush(30) == 0

        class Clustered(LibrdkafkaShare):  # acknowledging explicitly, each poll's records committed synchronously
            def __init__(self, name):
                self.name = name
                self.consumer = confluent_kafka.ShareConsumer({
                    "bootstrap.servers": bootstrap, "group.id": "g-cluster", "client.id": name,
                    "share.acknowledgement.mode": "explicit"})
                self.consumer.subscribe(["share-cluster"])

        consumers = [Clustered("c1"), Clustered("c2")]

        def assigned() -> bool:
            for consumer in consumers:
                assert not consumer.poll(0.2, ack="accept")
            live = next(b for b in cluster.brokers if b.running)
            with WireClient(f"{live.host}:{live.port}") as client:
                found = client.request(FindCoordinatorRequest(key_type=0, coordinator_keys=["g-cluster"]),
                                       4).coordinators[0]
            coordinator = cluster.broker(found.node_id)
            with WireClient(f"{coordinator.host}:{coordinator.port}") as client:
                group = client.request(ShareGroupDescribeRequest(group_ids=["g-cluster"]), 1).groups[0]
            partitions = {p for m in group.members for tp in m.assignment.topic_partitions for p in tp.partitions}
            return len(group.members) == 2 and partitions == {0, 1, 2}

        wait(assigned, "both consumers assigned")
        deadline = time.monotonic() + 3  # their first fetches start each share partition at the end of its log
        while time.monotonic() < deadline:
            for consumer in consumers:
                assert not consumer.poll(0.2, ack="accept")
        produce_values([b"v-%d" % i for i in range(30)])
        seen: list[bytes] = []

        def consume_until(count: int) -> None:
            deadline = time.monotonic() + 60
            while len(seen) < count:
                assert time.monotonic() < deadline, sorted(seen)
                for consumer in consumers:
                    seen.extend(r[3] for r in consumer.poll(0.3, ack="accept"))
            for consumer in consumers:
                seen.extend(r[3] for r in consumer.poll(0.5, ack="accept"))

        consume_until(30)
        assert sorted(seen) == sorted(b"v-%d" % i for i in range(30))
        victim = leaders()[0]
        cluster.broker(victim).kill()
        wait(lambda: all(leader not in (victim, -1) for leader in leaders().values()), "new leaders")
        produce_values([b"v-%d" % i for i in range(30, 60)])
        consume_until(60)
        assert sorted(seen) == sorted(b"v-%d" % i for i in range(60)), "a record delivered twice or lost"
    finally:
        for consumer in consumers:
            try:
                consumer.close()
            except Exception:
                pass
        cluster.close()


def test_the_java_consumer_in_record_limit_mode_gets_max_poll_records(share_broker):
    """share.acquire.mode=record_limit (ShareFetch v2): exactly max.poll.records records a poll, though one log
    batch holds them all."""
    topic = new_topic(share_broker, "share-record-limit")
    with WireClient(share_broker.bootstrap) as client:
        from compat_tests.test_differential_share_fetch import set_group_configs

        set_group_configs(client, "g-record-limit", share_auto_offset_reset="earliest")
    produce(share_broker, topic, [b"l%d" % i for i in range(10)])
    driver = java_driver()
    driver.call("share_open", bootstrap=share_broker.bootstrap, name="limited", group_id="g-record-limit",
                topics=[topic], settings={"share.acknowledgement.mode": "explicit",
                                          "share.acquire.mode": "record_limit", "max.poll.records": 3})
    try:
        polls = []
        while sum(map(len, polls)) < 10:
            assert len(polls) < 10, polls
            records = driver.call("share_poll", bootstrap=share_broker.bootstrap, name="limited", timeout_ms=5000,
                                  ack="accept", commit=True)
            polls.append([(r["offset"], r["delivery_count"]) for r in records])
        assert polls == [[(0, 1), (1, 1), (2, 1)], [(3, 1), (4, 1), (5, 1)], [(6, 1), (7, 1), (8, 1)], [(9, 1)]]
    finally:
        driver.call("share_close", bootstrap=share_broker.bootstrap, name="limited")
