"""OffsetFetch v9+ names the member that reads: member_id and member_epoch, checked as Kafka's group
coordinator checks them. Requests are written by hand and sent over TCP to the in-process broker
from conftest.py; compat_tests/ runs real clients (confluent-kafka's consumer protocol sends both)."""
from __future__ import annotations

import uuid

import pytest

from trafka.broker.tests.test_consumer_groups import FEW_OFFSETS_PARTITIONS, create_topic
from trafka.broker.tests.test_consumer_groups import heartbeat as consumer_heartbeat
from trafka.broker.tests.test_groups import commit, join, sync
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import OffsetCommitRequest, OffsetFetchRequest

TOPIC = "of-topic"
Group = OffsetFetchRequest.OffsetFetchRequestGroup
Topics = OffsetFetchRequest.OffsetFetchRequestTopics

# "all": every committed partition (a null topic list); "listed": the partitions named.
ALL = None
LISTED = {TOPIC: [0, 1]}


@pytest.fixture
async def running(broker_factory):
    return await broker_factory(**FEW_OFFSETS_PARTITIONS)


def group_entry(group_id: str, member_id: str | None, member_epoch: int, topics: dict[str, list[int]] | None,
                topic_ids: dict[str, uuid.UUID] | None = None) -> Group:
    request_topics = None
    if topics is not None:
        if topic_ids is None:
            request_topics = [Topics(name=t, partition_indexes=ps) for t, ps in topics.items()]
        else:
            request_topics = [Topics(topic_id=topic_ids[t], partition_indexes=ps) for t, ps in topics.items()]
    return Group(group_id=group_id, member_id=member_id, member_epoch=member_epoch, topics=request_topics)


def result(group) -> tuple[int, dict[tuple[str | uuid.UUID, int], int]]:
    return group.error_code, {
        (t.name or t.topic_id, p.partition_index): p.committed_offset for t in group.topics for p in t.partitions
    }


async def fetch_as(client, group_id: str, member_id: str | None, member_epoch: int,
                   topics: dict[str, list[int]] | None = LISTED, *, version: int = 9):
    """One group's OffsetFetch: its error code and its offsets by (topic, partition)."""
    response = await client.request(
        OffsetFetchRequest(groups=[group_entry(group_id, member_id, member_epoch, topics)]), version
    )
    (group,) = response.groups
    assert group.group_id == group_id
    return result(group)


async def commit_as(client, group_id: str, member_id: str, epoch: int, offsets: dict[int, int]) -> None:
    response = await client.request(
        OffsetCommitRequest(
            group_id=group_id, generation_id_or_member_epoch=epoch, member_id=member_id,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                name=TOPIC,
                partitions=[OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=p, committed_offset=o)
                            for p, o in offsets.items()],
            )],
        ),
        9,
    )
    assert all(p.error_code == ErrorCode.NONE for t in response.topics for p in t.partitions), response


async def consumer_group(client, group_id: str = "of-cg"):
    """A consumer group with one consumer-protocol member "a" that committed 10 and 20."""
    topic_id = await create_topic(client, TOPIC, 2)
    joined = await consumer_heartbeat(client, group_id, "a", 0, topics=[TOPIC])
    assert (joined.error_code, joined.member_epoch) == (ErrorCode.NONE, 1)
    await commit_as(client, group_id, "a", joined.member_epoch, {0: 10, 1: 20})
    return topic_id, joined


COMMITTED = {(TOPIC, 0): 10, (TOPIC, 1): 20}

# (case, member id, member epoch, error) against a consumer group whose member "a" is at epoch 1.
CONSUMER_GROUP_CASES = [
    ("the member at its epoch", "a", 1, ErrorCode.NONE),
    ("an admin client: no member id, epoch -1", None, -1, ErrorCode.NONE),
    ("an epoch ahead of the member's", "a", 2, ErrorCode.STALE_MEMBER_EPOCH),
    ("an epoch behind the member's", "a", 0, ErrorCode.STALE_MEMBER_EPOCH),
    ("the member's id with epoch -1", "a", -1, ErrorCode.STALE_MEMBER_EPOCH),
    ("a member id the group does not have", "stranger", 1, ErrorCode.UNKNOWN_MEMBER_ID),
    ("an empty member id", "", 1, ErrorCode.UNKNOWN_MEMBER_ID),
    ("an empty member id with epoch -1", "", -1, ErrorCode.UNKNOWN_MEMBER_ID),
    ("an epoch without a member id", None, 1, ErrorCode.UNKNOWN_MEMBER_ID),
]


@pytest.mark.parametrize("topics", [LISTED, ALL], ids=["listed partitions", "all partitions"])
@pytest.mark.parametrize("member_id, member_epoch, error", [c[1:] for c in CONSUMER_GROUP_CASES],
                         ids=[c[0] for c in CONSUMER_GROUP_CASES])
async def test_a_consumer_group_checks_who_reads_its_offsets(running, member_id, member_epoch, error, topics):
    client = await running.client()
    await consumer_group(client)
    expected = (ErrorCode.NONE, COMMITTED) if error == ErrorCode.NONE else (error, {})
    assert await fetch_as(client, "of-cg", member_id, member_epoch, topics) == expected
    # The group and its member are unaffected.
    assert await fetch_as(client, "of-cg", "a", 1, topics) == (ErrorCode.NONE, COMMITTED)
    assert (await consumer_heartbeat(client, "of-cg", "a", 1)).error_code == ErrorCode.NONE


async def test_an_epoch_is_stale_once_the_member_moves_on(running):
    client = await running.client()
    topic_id, _ = await consumer_group(client)
    other = await running.client()
    b = await consumer_heartbeat(other, "of-cg", "b", 0, topics=[TOPIC])
    assert b.member_epoch == 2
    # "a" gives up a partition for "b" and reaches the new epoch.
    revoking = await consumer_heartbeat(client, "of-cg", "a", 1, owned={topic_id: [0, 1]})
    kept = [p for tp in revoking.assignment.topic_partitions for p in tp.partitions]
    moved_on = await consumer_heartbeat(client, "of-cg", "a", 1, owned={topic_id: kept})
    assert moved_on.member_epoch == 2
    assert await fetch_as(client, "of-cg", "a", 1) == (ErrorCode.STALE_MEMBER_EPOCH, {})
    assert await fetch_as(client, "of-cg", "a", 2) == (ErrorCode.NONE, COMMITTED)
    assert await fetch_as(other, "of-cg", "b", 2) == (ErrorCode.NONE, COMMITTED)
    # Once "a" leaves, its id is unknown; the empty group still answers admin reads.
    assert (await consumer_heartbeat(client, "of-cg", "a", -1)).error_code == ErrorCode.NONE
    assert await fetch_as(client, "of-cg", "a", 2) == (ErrorCode.UNKNOWN_MEMBER_ID, {})
    assert (await consumer_heartbeat(other, "of-cg", "b", -1)).error_code == ErrorCode.NONE
    assert await fetch_as(client, "of-cg", "b", 2) == (ErrorCode.UNKNOWN_MEMBER_ID, {})
    assert await fetch_as(client, "of-cg", None, -1) == (ErrorCode.NONE, COMMITTED)


async def test_a_classic_member_of_a_consumer_group_reads_with_its_generation(running):
    client = await running.client()
    await consumer_group(client)
    classic_client = await running.client()
    d = await join(classic_client, "of-cg")
    assert d.error_code == ErrorCode.NONE and d.generation_id == 2
    assert (await sync(classic_client, "of-cg", d)).error_code == ErrorCode.NONE
    assert await fetch_as(classic_client, "of-cg", d.member_id, d.generation_id) == (ErrorCode.NONE, COMMITTED)
    # A classic member's epoch is its generation: a wrong one is ILLEGAL_GENERATION, not STALE_MEMBER_EPOCH.
    assert await fetch_as(classic_client, "of-cg", d.member_id, d.generation_id + 3) == (
        ErrorCode.ILLEGAL_GENERATION, {})
    assert await fetch_as(classic_client, "of-cg", d.member_id, -1, ALL) == (ErrorCode.ILLEGAL_GENERATION, {})
    # What a classic consumer actually sends (no member id, epoch -1) is always accepted.
    assert await fetch_as(classic_client, "of-cg", None, -1) == (ErrorCode.NONE, COMMITTED)


async def test_a_classic_group_does_not_check_the_member_fields(running):
    client = await running.client()
    await create_topic(client, TOPIC, 2)
    joined = await join(client, "of-classic")
    assert (await sync(client, "of-classic", joined, {joined.member_id: b""})).error_code == ErrorCode.NONE
    await commit(client, "of-classic", {(TOPIC, 0): (10, ""), (TOPIC, 1): (20, "")},
                 generation_id=joined.generation_id, member_id=joined.member_id)
    for member_id, member_epoch in [(joined.member_id, joined.generation_id), ("stranger", 42), ("", 7),
                                    (None, 3), (joined.member_id, -1)]:
        for topics in (LISTED, ALL):
            assert await fetch_as(client, "of-classic", member_id, member_epoch, topics) == (
                ErrorCode.NONE, COMMITTED), (member_id, member_epoch, topics)


async def test_an_unknown_group_has_no_offsets_whoever_asks(running):
    client = await running.client()
    await create_topic(client, TOPIC, 2)
    for member_id, member_epoch in [("stranger", 5), (None, -1), ("", 0)]:
        assert await fetch_as(client, "of-nobody", member_id, member_epoch) == (
            ErrorCode.NONE, {(TOPIC, 0): -1, (TOPIC, 1): -1})
        assert await fetch_as(client, "of-nobody", member_id, member_epoch, ALL) == (ErrorCode.NONE, {})


async def test_each_group_of_a_batched_request_gets_its_own_error(running):
    client = await running.client()
    await consumer_group(client, "of-cg")
    await commit(client, "of-simple", {(TOPIC, 0): (7, "")})
    groups = [
        group_entry("of-cg", "a", 5, LISTED),
        group_entry("of-simple", "a", 5, ALL),
        group_entry("of-cg", "stranger", 1, ALL),
        group_entry("of-cg", "a", 1, ALL),
    ]
    response = await client.request(OffsetFetchRequest(groups=groups), 9)
    assert [(g.group_id, *result(g)) for g in response.groups] == [
        ("of-cg", ErrorCode.STALE_MEMBER_EPOCH, {}),
        ("of-simple", ErrorCode.NONE, {(TOPIC, 0): 7}),
        ("of-cg", ErrorCode.UNKNOWN_MEMBER_ID, {}),
        ("of-cg", ErrorCode.NONE, COMMITTED),
    ]
    assert response.error_code == ErrorCode.NONE


async def test_v10_checks_the_member_as_well(running):
    client = await running.client()
    topic_id, _ = await consumer_group(client)
    ids = {TOPIC: topic_id}
    by_id = {(topic_id, 0): 10, (topic_id, 1): 20}

    async def fetch_v10(member_id, member_epoch, topics):
        response = await client.request(
            OffsetFetchRequest(groups=[group_entry("of-cg", member_id, member_epoch, topics, ids)]), 10
        )
        return result(response.groups[0])

    for topics in (LISTED, ALL):
        assert await fetch_v10("a", 1, topics) == (ErrorCode.NONE, by_id)
        assert await fetch_v10("a", 4, topics) == (ErrorCode.STALE_MEMBER_EPOCH, {})
        assert await fetch_v10("x", 1, topics) == (ErrorCode.UNKNOWN_MEMBER_ID, {})
        assert await fetch_v10(None, -1, topics) == (ErrorCode.NONE, by_id)


@pytest.mark.parametrize("version", [1, 2, 5, 7, 8])
async def test_versions_without_member_fields_read_a_consumer_group_freely(running, version):
    client = await running.client()
    await consumer_group(client)
    if version >= 8:
        response = await client.request(OffsetFetchRequest(groups=[Group(group_id="of-cg", topics=[
            Topics(name=TOPIC, partition_indexes=[0, 1])])]), version)
        assert result(response.groups[0]) == (ErrorCode.NONE, COMMITTED)
        return
    response = await client.request(
        OffsetFetchRequest(group_id="of-cg", topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0, 1])]),
        version,
    )
    assert response.error_code == ErrorCode.NONE
    assert {(t.name, p.partition_index): (p.committed_offset, p.error_code)
            for t in response.topics for p in t.partitions} == {(TOPIC, 0): (10, 0), (TOPIC, 1): (20, 0)}
