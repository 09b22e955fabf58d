"""Share state in a replicated cluster (3 brokers on ZooKeeper): each share partition's state is kept by the leader
of its partition of ``__share_group_state`` (replication factor 3, min ISR 2). AlterShareGroupOffsets and
DescribeShareGroupOffsets at the group's coordinator reach the share coordinators on the other brokers; when the
leader of a state partition is killed -9, the next leader loads the replicated records and answers the same state,
to the share state APIs and to DescribeShareGroupOffsets."""
from __future__ import annotations

import uuid
from pathlib import Path

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
