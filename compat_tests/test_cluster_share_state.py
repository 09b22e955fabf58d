"""Share state in a replicated cluster (3 brokers on ZooKeeper): each share partition's state is kept by the leader
of its partition of ``__share_group_state`` (replication factor 3, min ISR 2). AlterShareGroupOffsets and
DescribeShareGroupOffsets at the group's coordinator reach the share coordinators on the other brokers; when the
leader of a state partition is killed -9, the next leader loads the replicated records and answers the same state,
to the share state APIs and to DescribeShareGroupOffsets.

Under real share consumers (confluent-kafka's ShareConsumer), the leader of the group's ``__share_group_state``
partition killed -9 mid-stream: no record whose acceptance a consumer saw committed is delivered again, and every
record the producer saw acknowledged is accepted in the end."""
from __future__ import annotations

import threading
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from compat_tests.cluster import start_cluster, wait
from compat_tests.wire_client import WireClient
from trafka.broker.share.state import share_coordinator_key
from trafka.wire.messages import (
    AlterShareGroupOffsetsRequest,
    CreateTopicsRequest,
    DescribeShareGroupOffsetsRequest,
    FindCoordinatorRequest,
    InitializeShareGroupStateRequest,
    MetadataRequest,
    ReadShareGroupStateRequest,
    WriteShareGroupStateRequest,
)

SETTINGS = {"share.coordinator.state.topic.num.partitions": 3, "auto.leader.rebalance.enable": "false",
            "offsets.topic.num.partitions": 1}
TOPIC = "shared"
PARTITIONS = 6
GROUP = "spread-share-group"
Init, W, R = InitializeShareGroupStateRequest, WriteShareGroupStateRequest, ReadShareGroupStateRequest
Describe, Alter = DescribeShareGroupOffsetsRequest, AlterShareGroupOffsetsRequest


def _client(cluster, node_id: int) -> WireClient:
    broker = cluster.broker(node_id)
    return WireClient(f"{broker.host}:{broker.port}")


def _any_client(cluster) -> WireClient:
    return _client(cluster, next(b.node_id for b in cluster.brokers if b.running))


def _coordinator(cluster, key_type: int, key: str) -> int | None:
    """The coordinator a live broker names for ``key`` (None while there is none)."""
    with _any_client(cluster) as client:
        [found] = client.request(FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]), 6).coordinators
    return found.node_id if found.error_code == 0 else None


def _read(cluster, node_id: int, topic_id: uuid.UUID, partition: int):
    with _client(cluster, node_id) as client:
        response = client.request(R(group_id=GROUP, topics=[R.ReadStateData(topic_id=topic_id, partitions=[
            R.PartitionData(partition=partition, leader_epoch=0)])]), 0)
    result = response.results[0].partitions[0]
    return (result.error_code, result.state_epoch, result.start_offset,
            [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in result.state_batches])


def _group_config(cluster, node_id: int, group: str, name: str) -> str | None:
    from trafka.wire.messages import DescribeConfigsRequest

    with _client(cluster, node_id) as client:
        response = client.request(DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=32, resource_name=group, configuration_keys=[name])], include_synonyms=False,
            include_documentation=False), 4)
    return next((config.value for config in response.results[0].configs if config.name == name), None)


def _describe(cluster, node_id: int):
    with _client(cluster, node_id) as client:
        response = client.request(Describe(groups=[Describe.DescribeShareGroupOffsetsRequestGroup(
            group_id=GROUP, topics=[Describe.DescribeShareGroupOffsetsRequestTopic(
                topic_name=TOPIC, partitions=list(range(PARTITIONS)))])]), 1)
    [group] = response.groups
    return group.error_code, [(p.partition_index, p.start_offset, p.error_code) for t in group.topics
                              for p in t.partitions]


def test_share_state_moves_with_the_leadership_of_its_partition(zookeeper, tmp_path: Path):
    cluster = start_cluster(zookeeper, tmp_path, SETTINGS)
    try:
        with _any_client(cluster) as client:
            created = client.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
                name=TOPIC, num_partitions=PARTITIONS, replication_factor=3, assignments=[], configs=[])],
                timeout_ms=30_000), 7)
            assert created.topics[0].error_code == 0, created
            topic_id = client.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                                                      allow_auto_topic_creation=False), 12).topics[0].topic_id
        keys = {p: share_coordinator_key(GROUP, topic_id, p) for p in range(PARTITIONS)}
        coordinators = wait(lambda: (lambda found: found if None not in found.values() else None)(
            {p: _coordinator(cluster, 2, key) for p, key in keys.items()}), "a share coordinator for every key")
        group_coordinator = wait(lambda: _coordinator(cluster, 0, GROUP), "a group coordinator")
        assert len(set(coordinators.values())) > 1  # the keys are spread over the brokers

        # Through the group's coordinator: the share state of every partition initialized at its own offset,
        # on whichever broker coordinates it.
        with _client(cluster, group_coordinator) as client:
            altered = wait(lambda: (lambda r: r if r.error_code == 0 and all(
                p.error_code == 0 for t in r.responses for p in t.partitions) else None)(
                client.request(Alter(group_id=GROUP, topics=[Alter.AlterShareGroupOffsetsRequestTopic(
                    topic_name=TOPIC, partitions=[Alter.AlterShareGroupOffsetsRequestPartition(
                        partition_index=p, start_offset=10 * p) for p in range(PARTITIONS)])]), 0)),
                "the share state of every partition initialized")
        assert altered.responses[0].topic_name == TOPIC
        assert _describe(cluster, group_coordinator) == (0, [(p, 10 * p, 0) for p in range(PARTITIONS)])

        # Straight to the coordinator of one key: a state with batches, then its coordinator killed -9.
        victim_partition = next(p for p, node in coordinators.items() if node != group_coordinator)
        victim = coordinators[victim_partition]
        with _client(cluster, victim) as client:
            written = client.request(W(group_id=GROUP, topics=[W.WriteStateData(topic_id=topic_id, partitions=[
                W.PartitionData(partition=victim_partition, state_epoch=1, leader_epoch=0,
                                start_offset=10 * victim_partition + 2, state_batches=[
                                    W.StateBatch(first_offset=10 * victim_partition + 2,
                                                 last_offset=10 * victim_partition + 4, delivery_state=2,
                                                 delivery_count=1)])])]), 1)
            assert written.results[0].partitions[0].error_code == 0, written
        before = _read(cluster, victim, topic_id, victim_partition)
        assert before[0] == 0 and before[2] == 10 * victim_partition + 2, before
        elsewhere = {p: _read(cluster, node, topic_id, p) for p, node in coordinators.items() if node != victim}

        cluster.broker(victim).kill()
        successor = wait(lambda: (lambda node: node if node not in (None, victim) else None)(
            _coordinator(cluster, 2, keys[victim_partition])), "a new coordinator of the key")
        after = wait(lambda: (lambda r: r if r[0] not in (14, 15, 16) else None)(
            _read(cluster, successor, topic_id, victim_partition)), "the new coordinator loaded")
        assert after == before
        for partition, state in elsewhere.items():
            node = _coordinator(cluster, 2, keys[partition])
            assert _read(cluster, node, topic_id, partition) == state

        # The group's coordinator finds the new coordinator too.
        expected = [(p, 10 * p + (2 if p == victim_partition else 0), 0) for p in range(PARTITIONS)]
        described = wait(lambda: (lambda d: d if d == (0, expected) else None)(_describe(cluster, group_coordinator)),
                         "every start offset described after the failover")
        assert described == (0, expected)
    finally:
        cluster.close()


# -- share consumers through a failover of the share coordinator -----------------------------------------------

WORK_TOPIC = "queue"
WORK_PARTITIONS = 3
RECORDS = 300


class AcceptingConsumer:
    """A ShareConsumer in explicit mode, in a thread of its own: every record it gets is accepted and committed at
    once. Kept: each delivery (value, delivery count, when the poll returned) and, for each record whose partition's
    commit succeeded, the delivery accepted and when the commit returned."""

    def __init__(self, confluent_kafka, bootstrap: str, group: str, name: str) -> None:
        self.consumer = confluent_kafka.ShareConsumer({
            "bootstrap.servers": bootstrap, "group.id": group, "client.id": name,
            "share.acknowledgement.mode": "explicit"})
        self.consumer.subscribe([WORK_TOPIC])
        self.accept = confluent_kafka.AcknowledgeType.ACCEPT
        self.deliveries: list[tuple[bytes, int, float]] = []
        self.accepted: list[tuple[bytes, int, float]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                messages = [m for m in self.consumer.poll(0.3) if m.error() is None]
                returned = time.monotonic()
                for message in messages:
                    self.deliveries.append((message.value(), message.delivery_count(), returned))
                    self.consumer.acknowledge(message, self.accept)
                if not messages:
                    continue
                results = self.consumer.commit_sync(30)
                committed = time.monotonic()
                for message in messages:
                    failure = next((error for tp, error in results.items() if tp.partition == message.partition()),
                                   "no result")
                    if failure is None:
                        self.accepted.append((message.value(), message.delivery_count(), committed))
                    else:
                        self.errors.append(f"{message.partition()}@{message.offset()}: {failure}")
            except Exception as exc:  # a commit that times out or fails as a whole: nothing counted as accepted
                self.errors.append(repr(exc))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self.consumer.close()


def test_share_consumers_lose_nothing_and_repeat_no_accepted_record_when_the_state_leader_is_killed(
        zookeeper, tmp_path: Path):
    from compat_tests.test_differential_share_fetch import set_group_configs

    confluent_kafka = pytest.importorskip("confluent_kafka")
    if not hasattr(confluent_kafka, "ShareConsumer"):
        pytest.skip("this confluent-kafka has no ShareConsumer")
    cluster = start_cluster(zookeeper, tmp_path, {
        "share.coordinator.state.topic.num.partitions": 1, "offsets.topic.num.partitions": 1,
        "auto.leader.rebalance.enable": "false", "group.share.heartbeat.interval.ms": 1000,
        "group.share.min.heartbeat.interval.ms": 1000})
    consumers: list[AcceptingConsumer] = []
    try:
        admin = cluster.admin()
        from confluent_kafka.admin import NewTopic

        admin.create_topics([NewTopic(WORK_TOPIC, WORK_PARTITIONS, 3, config={"min.insync.replicas": "2"})])[
            WORK_TOPIC].result(30)
        group = "failover-share-group"
        with _any_client(cluster) as client:  # every record from the first, however soon the consumers fetch
            set_group_configs(client, group, share_auto_offset_reset="earliest")
        # Every broker learns group configs through ZooKeeper, a moment later: the leader of a partition the group
        # first fetches must know the setting by then, or it starts the partition at its end ("latest").
        for broker in cluster.brokers:
            wait(lambda broker=broker: _group_config(cluster, broker.node_id, group, "share.auto.offset.reset")
                 == "earliest", f"broker {broker.node_id} seeing the group's share.auto.offset.reset")
        consumers = [AcceptingConsumer(confluent_kafka, cluster.bootstrap, group, f"worker{i}") for i in range(2)]
        state_leader = wait(lambda: cluster.metadata("__share_group_state")[0][0] > 0
                            and cluster.metadata("__share_group_state")[0][0],
                            "the share state topic, created when the group first fetches")

        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True,
                                             "acks": "all", "linger.ms": 5, "message.timeout.ms": 60_000})
        produced: list[bytes] = []

        def report(err, msg) -> None:
            if err is None:
                produced.append(msg.value())

        for i in range(RECORDS):  # about 15 s of records, the state leader killed a third of the way in
            producer.produce(WORK_TOPIC, value=b"task-%d" % i, partition=i % WORK_PARTITIONS, on_delivery=report)
            producer.poll(0.05)
            if i == RECORDS // 3:
                wait(lambda: sum(len(c.accepted) for c in consumers) > 0, "records accepted before the kill")
                cluster.broker(state_leader).kill()
        assert producer.flush(60) == 0
        assert len(produced) == RECORDS

        deadline = time.monotonic() + 120
        while missing := set(produced) - {v for c in consumers for v, _, _ in c.accepted}:
            assert time.monotonic() < deadline, (
                f"{len(missing)} acknowledged records never accepted: {sorted(missing)[:10]}; the consumers' "
                f"errors: {[c.errors[-5:] for c in consumers]}")
            time.sleep(0.2)
        time.sleep(2)  # anything delivered again would come now
        for consumer in consumers:
            consumer.close()

        deliveries = defaultdict(list)
        for consumer in consumers:
            for value, count, returned in consumer.deliveries:
                deliveries[value].append((count, returned))
        acceptances = [(value, count, at) for consumer in consumers for value, count, at in consumer.accepted]
        twice = [value for value, n in Counter(value for value, _, _ in acceptances).items() if n > 1]
        assert not twice, f"{len(twice)} records accepted twice: {twice[:10]}"
        # Once accepted, a record is not delivered again: no later poll returns it, no higher delivery count.
        repeated = {value: deliveries[value] for value, count, at in acceptances
                    if any(c > count or returned > at for c, returned in deliveries[value])}
        assert not repeated, f"{len(repeated)} accepted records delivered again: {dict(list(repeated.items())[:5])}"
        assert sum(1 for consumer in consumers if consumer.accepted) == 2
    finally:
        for consumer in consumers:
            consumer._stop.set()
        cluster.close()
