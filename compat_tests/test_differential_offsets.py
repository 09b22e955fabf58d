"""The ``offsets.*`` broker settings, trafka beside Apache Kafka 4.4 with the same settings: a small
``offsets.topic.segment.bytes`` lets compaction keep ``__consumer_offsets`` small under 100,000 offset
commits, and ``offsets.retention.minutes`` expires the offsets of a group that commits no more, and the
group with them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.harness import BrokerProcess
from compat_tests.reference import KafkaBroker
from compat_tests.test_differential import create, group_request, side_by_side
from compat_tests.wire_client import WireClient
from trafka.wire.messages import (
    DescribeLogDirsRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)

SETTINGS = {
    "offsets.topic.num.partitions": 1,
    "offsets.topic.segment.bytes": 1024 * 1024,
    "offsets.retention.minutes": 1,
    "offsets.retention.check.interval.ms": 1000,
}
PARTITIONS = 100
COMMITS = 100_000
#: What compaction must bring __consumer_offsets under (Kafka 4.4 keeps it at about 20 KB).
SIZE_LIMIT = 3 * 1024 * 1024
WAIT_S = 150


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, BrokerProcess | KafkaBroker]]:
    with side_by_side(Path(tmp_path_factory.mktemp("offsets")), SETTINGS) as started:
        yield started


def commit(client: WireClient, group_id: str, topic: str, offset: int, partitions: int = PARTITIONS) -> None:
    """One OffsetCommit of ``offset`` for every partition of ``topic``, outside group management."""
    request = OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=-1, member_id="", topics=[
        OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
            OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=p, committed_offset=offset,
                                                             committed_metadata="")
            for p in range(partitions)])])
    response = group_request(client, request, 8)
    assert {p.error_code for t in response.topics for p in t.partitions} == {0}, response


def offsets_topic_size(client: WireClient) -> int:
    request = DescribeLogDirsRequest(topics=[DescribeLogDirsRequest.DescribableLogDirTopic(
        topic="__consumer_offsets", partitions=[0])])
    response = client.request(request, 4)
    return sum(p.partition_size for result in response.results for t in result.topics for p in t.partitions)


def committed(client: WireClient, group_id: str, topic: str) -> list[int]:
    request = OffsetFetchRequest(group_id=group_id, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])])
    return [p.committed_offset for t in group_request(client, request, 7).topics for p in t.partitions]


def listed(client: WireClient, group_id: str) -> bool:
    return group_id in {group.group_id for group in client.request(ListGroupsRequest(), 4).groups}


def wait_on_both(brokers, check, what: str) -> None:
    """Until ``check(client)`` holds on both brokers (they take their time side by side)."""
    clients = {name: WireClient(process.bootstrap) for name, process in brokers.items()}
    try:
        deadline = time.monotonic() + WAIT_S
        pending = set(clients)
        while pending:
            pending = {name for name in pending if not check(clients[name])}
            assert time.monotonic() < deadline, f"{what}: not on {sorted(pending)} within {WAIT_S} s"
            time.sleep(1)
    finally:
        for client in clients.values():
            client.close()


def test_compaction_keeps_a_small_segmented_offsets_topic_small(brokers):
    for process in brokers.values():
        with WireClient(process.bootstrap) as client:
            create(client, "committed", PARTITIONS)
            for offset in range(COMMITS // PARTITIONS):
                commit(client, "busy", "committed", offset)
            assert committed(client, "busy", "committed") == [COMMITS // PARTITIONS - 1]
            # 100,000 records were written: several segments of 1 MiB before any cleaning.
            assert offsets_topic_size(client) > SIZE_LIMIT

    wait_on_both(brokers, lambda client: offsets_topic_size(client) < SIZE_LIMIT, "__consumer_offsets compacted")


def test_offsets_of_a_group_that_commits_no_more_expire_with_the_group(brokers):
    for process in brokers.values():
        with WireClient(process.bootstrap) as client:
            create(client, "expiring", 1)
            commit(client, "idle", "expiring", 7, partitions=1)
            assert committed(client, "idle", "expiring") == [7] and listed(client, "idle")

    # offsets.retention.minutes=1 after the commit, looked at every second: the offsets go, then the group.
    wait_on_both(brokers, lambda client: committed(client, "idle", "expiring") == [-1] and not listed(client, "idle"),
                 "the offsets and the group expired")
