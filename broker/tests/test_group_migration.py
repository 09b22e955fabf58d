"""Online migration of groups with members between the classic protocol and the consumer protocol
(KIP-848), driven by hand over TCP against the in-process broker: classic members (JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, OffsetCommit) next to consumer-protocol members
(ConsumerGroupHeartbeat) in one group, as Kafka's group coordinator runs them.
compat_tests/test_groups_migration.py runs real clients through the same steps."""
from __future__ import annotations

import struct

import pytest
import trio

from trafka.broker.groups.migration import decode_assignment, encode_assignment
from trafka.broker.groups.records import (
    ClassicMemberMetadata,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    decode_consumer_group_value,
    encode_consumer_group_value,
)
from trafka.broker.tests.conftest import start_broker
from trafka.broker.tests.test_consumer_groups import FEW_OFFSETS_PARTITIONS, create_topic, partitions_of
from trafka.broker.tests.test_consumer_groups import heartbeat as consumer_heartbeat
from trafka.broker.tests.test_groups import commit, join, join_request, sync, wait_for
from trafka.broker.tests.test_groups import heartbeat as classic_heartbeat
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerProtocolSubscription,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
)

TOPIC = "mig"
PARTITIONS = frozenset(range(6))
CLASSIC_MEMBER = 0
CONSUMER_MEMBER = 1


def subscription(topics: list[str], owned: dict[str, list[int]] | None = None, version: int = 1) -> bytes:
    """A classic consumer's protocol metadata: a ConsumerProtocolSubscription."""
    owned_partitions = [
        ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=ps) for t, ps in (owned or {}).items()
    ]
    body = ConsumerProtocolSubscription(topics=topics, owned_partitions=owned_partitions).encode(version)
    return struct.pack(">h", version) + body


def assigned(synced) -> frozenset[int]:
    assert synced.error_code == ErrorCode.NONE, synced
    return frozenset(decode_assignment(bytes(synced.assignment)).get(TOPIC, ()))


async def classic_group(broker_client, group_id: str, count: int = 2, *, session_timeout_ms: int = 10_000):
    """``count`` classic members that join together and share the topic's partitions; returns their
    JoinGroup responses and assignments (the leader assigns contiguous ranges)."""
    joined = [None] * count

    async def member(i: int) -> None:
        joined[i] = await join(broker_client[i], group_id, metadata=subscription([TOPIC]),
                               session_timeout_ms=session_timeout_ms)

    async with trio.open_nursery() as nursery:
        for i in range(count):
            nursery.start_soon(member, i)
    generations = {j.generation_id for j in joined}
    assert len(generations) == 1 and all(j.error_code == 0 for j in joined), joined
    leader = next(j for j in joined if j.leader == j.member_id)
    per_member = len(PARTITIONS) // count
    plan = {j.member_id: encode_assignment({TOPIC: range(i * per_member, (i + 1) * per_member)}, 1)
            for i, j in enumerate(sorted(joined, key=lambda j: j.member_id))}
    synced: list = [None] * count

    async def sync_member(i: int) -> None:
        j = joined[i]
        synced[i] = await sync(broker_client[i], group_id, j, plan if j is leader else None)

    async with trio.open_nursery() as nursery:
        for i in range(count):
            nursery.start_soon(sync_member, i)
    return joined, [assigned(s) for s in synced]


async def rejoin(client, group_id: str, joined, *, owned: list[int] | None = None, **kwargs):
    """What a classic member does after REBALANCE_IN_PROGRESS: JoinGroup with its member id, then SyncGroup."""
    metadata = subscription([TOPIC], {TOPIC: owned} if owned else None)
    again = await join(client, group_id, member_id=joined.member_id, metadata=metadata, **kwargs)
    assert again.error_code == ErrorCode.NONE, again
    synced = await sync(client, group_id, again)
    return again, assigned(synced)


async def describe(client, group_id: str):
    (group,) = (await client.request(ConsumerGroupDescribeRequest(group_ids=[group_id]), 1)).groups
    return group


async def group_type(client, group_id: str) -> str:
    listed = await client.request(ListGroupsRequest(), 5)
    return {g.group_id: (g.group_type, g.group_state) for g in listed.groups}[group_id]


@pytest.fixture
async def running(broker_factory):
    return await broker_factory(**FEW_OFFSETS_PARTITIONS)


async def clients(running, count: int):
    return [await running.client() for _ in range(count)]


def owned_once(*assignments: frozenset[int]) -> bool:
    return sum(len(a) for a in assignments) == len(PARTITIONS) and frozenset().union(*assignments) == PARTITIONS


# ================================================================================ upgrade and downgrade


async def test_upgrade_then_downgrade_of_a_group_with_members(running):
    a_client, b_client, c_client = await clients(running, 3)
    topic_id = await create_topic(a_client, TOPIC, 6)
    (a, b), (a_parts, b_parts) = await classic_group([a_client, b_client], "g")
    assert a.generation_id == 1 and owned_once(a_parts, b_parts)
    await commit(a_client, "g", {(TOPIC, p): (10 + p, "") for p in a_parts}, generation_id=1, member_id=a.member_id)

    # A consumer-protocol member joins: the classic group becomes a consumer group with all three.
    c = await consumer_heartbeat(c_client, "g", "c", 0, topics=[TOPIC])
    assert c.error_code == ErrorCode.NONE, c.error_message
    assert c.member_epoch == 2 and partitions_of(c) == {}  # its partitions are still held by the classic members
    assert await group_type(c_client, "g") == ("consumer", "Reconciling")
    described = await describe(c_client, "g")
    assert (described.group_epoch, described.assignment_epoch) == (2, 2)
    types = {m.member_id: m.member_type for m in described.members}
    assert types == {a.member_id: CLASSIC_MEMBER, b.member_id: CLASSIC_MEMBER, "c": CONSUMER_MEMBER}
    # DescribeGroups describes classic groups only, as in Kafka.
    classic_view = (await c_client.request(DescribeGroupsRequest(groups=["g"]), 6)).groups[0]
    assert classic_view.error_code == ErrorCode.GROUP_ID_NOT_FOUND

    # The classic members learn of the rebalance from their heartbeats, rejoin and get the assignment
    # the coordinator computed: two partitions each, from what they had.
    assert await classic_heartbeat(a_client, "g", a.member_id, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    assert await classic_heartbeat(b_client, "g", b.member_id, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    a2, a_parts = await rejoin(a_client, "g", a)
    assert (a2.generation_id, a2.protocol_name, a2.leader, a2.members) == (2, "range", "", [])
    b2, b_parts = await rejoin(b_client, "g", b)
    assert len(a_parts) == len(b_parts) == 2
    assert await classic_heartbeat(a_client, "g", a.member_id, 2) == ErrorCode.NONE
    # Released: the consumer-protocol member gets the rest.
    c = await consumer_heartbeat(c_client, "g", "c", 2, owned={})
    c_parts = frozenset(partitions_of(c)[topic_id])
    assert owned_once(a_parts, b_parts, c_parts)
    assert (await describe(c_client, "g")).group_state == "Stable"

    # Classic members commit with their generation (their member epoch); an old one is ILLEGAL_GENERATION.
    ok = await commit(a_client, "g", {(TOPIC, p): (20, "") for p in a_parts}, generation_id=2,
                      member_id=a.member_id, version=7)
    assert set(ok.values()) == {ErrorCode.NONE}
    stale = await commit(a_client, "g", {(TOPIC, 0): (20, "")}, generation_id=1, member_id=a.member_id)
    assert set(stale.values()) == {ErrorCode.ILLEGAL_GENERATION}

    # The consumer-protocol member leaves: only classic members remain, so the group becomes a classic
    # group again and rebalances.
    left = await consumer_heartbeat(c_client, "g", "c", -1)
    assert left.error_code == ErrorCode.NONE
    assert await group_type(c_client, "g") == ("classic", "PreparingRebalance")
    assert await classic_heartbeat(a_client, "g", a.member_id, 2) == ErrorCode.REBALANCE_IN_PROGRESS
    rejoined = [None, None]

    async def member_rejoins(i: int, client, joined) -> None:
        rejoined[i] = await join(client, "g", member_id=joined.member_id, metadata=subscription([TOPIC]))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(member_rejoins, 0, a_client, a)
        nursery.start_soon(member_rejoins, 1, b_client, b)
    assert {j.generation_id for j in rejoined} == {3} and all(j.error_code == 0 for j in rejoined)
    leader = next(j for j in rejoined if j.leader == j.member_id)
    assert sorted(m.member_id for m in leader.members) == sorted([a.member_id, b.member_id])
    plan = {a.member_id: encode_assignment({TOPIC: [0, 1, 2]}, 1),
            b.member_id: encode_assignment({TOPIC: [3, 4, 5]}, 1)}
    synced = [None, None]

    async def member_syncs(i: int, client) -> None:
        synced[i] = await sync(client, "g", rejoined[i], plan if rejoined[i] is leader else None)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(member_syncs, 0, a_client)
        nursery.start_soon(member_syncs, 1, b_client)
    assert owned_once(assigned(synced[0]), assigned(synced[1]))
    assert await group_type(a_client, "g") == ("classic", "Stable")


async def test_a_cooperative_classic_member_keeps_what_it_is_not_asked_to_revoke(running):
    """A classic member that still owns partitions when it rejoins (cooperative rebalancing lists them
    in its subscription) is asked to revoke only those that move, and keeps its generation until it has."""
    a_client, c_client = await clients(running, 2)
    topic_id = await create_topic(a_client, TOPIC, 6)
    (a,), (a_parts,) = await classic_group([a_client], "coop", 1)
    assert a_parts == PARTITIONS
    c = await consumer_heartbeat(c_client, "coop", "c", 0, topics=[TOPIC])
    assert (c.error_code, c.member_epoch) == (0, 2)
    assert await classic_heartbeat(a_client, "coop", a.member_id, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    again, kept = await rejoin(a_client, "coop", a, owned=sorted(PARTITIONS))
    assert again.generation_id == 1 and len(kept) == 3  # still revoking: same generation
    assert await classic_heartbeat(a_client, "coop", a.member_id, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    c = await consumer_heartbeat(c_client, "coop", "c", 2, owned={})
    assert partitions_of(c) in (None, {})  # nothing released yet
    # The member rejoins owning only what it kept: it moves to the new epoch.
    again, still = await rejoin(a_client, "coop", a, owned=sorted(kept))
    assert (again.generation_id, still) == (2, kept)
    c = await consumer_heartbeat(c_client, "coop", "c", 2, owned={})
    assert frozenset(partitions_of(c)[topic_id]) == PARTITIONS - kept


async def test_a_classic_consumer_joins_and_leaves_a_consumer_group(running):
    c_client, d_client = await clients(running, 2)
    topic_id = await create_topic(c_client, TOPIC, 6)
    c = await consumer_heartbeat(c_client, "cg", "c", 0, topics=[TOPIC])
    assert partitions_of(c) == {topic_id: sorted(PARTITIONS)}
    # A classic consumer joins: MEMBER_ID_REQUIRED first, then it is a member at once.
    first = await d_client.request(join_request("cg", metadata=subscription([TOPIC])), 9)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.member_id
    d = await d_client.request(join_request("cg", first.member_id, metadata=subscription([TOPIC])), 9)
    assert (d.error_code, d.generation_id, d.protocol_type, d.protocol_name) == (0, 2, "consumer", "range")
    assert assigned(await sync(d_client, "cg", d)) == frozenset()  # "c" still holds them
    # A classic member must be of the consumer protocol type and use a protocol that every classic
    # member of the group supports.
    wrong_type = await join(d_client, "cg", protocol_type="connect")
    assert wrong_type.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    unshared = await join(d_client, "cg", names=("roundrobin",), metadata=subscription([TOPIC]))
    assert unshared.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # "c" revokes; the classic member is told to rejoin and collects its partitions.
    c = await consumer_heartbeat(c_client, "cg", "c", 1, owned={topic_id: sorted(PARTITIONS)})
    kept = partitions_of(c)[topic_id]
    c = await consumer_heartbeat(c_client, "cg", "c", 1, owned={topic_id: kept})
    assert await classic_heartbeat(d_client, "cg", d.member_id, 2) == ErrorCode.REBALANCE_IN_PROGRESS
    again, d_parts = await rejoin(d_client, "cg", d)
    assert again.generation_id >= 2 and d_parts
    # SyncGroup checks: generation, protocol name, membership.
    assert (await sync(d_client, "cg", again, protocol_name="roundrobin")).error_code == (
        ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    stranger = await sync(d_client, "cg", type(again)(generation_id=again.generation_id, member_id="x",
                                                       protocol_name="range"))
    assert stranger.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert await classic_heartbeat(d_client, "cg", "c", 2) == ErrorCode.UNKNOWN_MEMBER_ID  # not a classic member
    assert await classic_heartbeat(d_client, "cg", d.member_id, 99) == ErrorCode.ILLEGAL_GENERATION
    # LeaveGroup removes the classic member; the group epoch moves and "c" gets everything back.
    epoch = (await describe(c_client, "cg")).group_epoch
    left = await d_client.request(
        LeaveGroupRequest(group_id="cg", members=[LeaveGroupRequest.MemberIdentity(member_id=d.member_id),
                                                  LeaveGroupRequest.MemberIdentity(member_id="c")]),
        5,
    )
    # "c" uses the consumer protocol: it cannot be removed with LeaveGroup.
    assert [(m.member_id, m.error_code) for m in left.members] == [
        (d.member_id, ErrorCode.NONE), ("c", ErrorCode.UNKNOWN_MEMBER_ID)]
    described = await describe(c_client, "cg")
    assert described.group_epoch == epoch + 1 and [m.member_id for m in described.members] == ["c"]
    assert await group_type(c_client, "cg") == ("consumer", "Assigning")
    c = await consumer_heartbeat(c_client, "cg", "c", c.member_epoch, owned={topic_id: kept})
    assert partitions_of(c) == {topic_id: sorted(PARTITIONS)}


async def test_silent_classic_members_of_a_consumer_group_are_fenced(broker_factory):
    running = await broker_factory(**{"group.min.session.timeout.ms": "100"}, **FEW_OFFSETS_PARTITIONS)
    a_client, c_client = await clients(running, 2)
    topic_id = await create_topic(a_client, TOPIC, 6)
    (a,), _ = await classic_group([a_client], "silent", 1, session_timeout_ms=300)
    c = await consumer_heartbeat(c_client, "silent", "c", 0, topics=[TOPIC])
    assert c.error_code == 0

    async def c_owns_everything() -> bool:
        response = await consumer_heartbeat(c_client, "silent", "c", c.member_epoch, owned={})
        return response.error_code == 0 and partitions_of(response) == {topic_id: sorted(PARTITIONS)}

    # The classic member never heartbeats again: its session expires and its partitions are released.
    await wait_for(c_owns_everything, "the silent classic member to be fenced")
    described = await describe(c_client, "silent")
    assert [m.member_id for m in described.members] == ["c"]
    assert await classic_heartbeat(a_client, "silent", a.member_id, 1) == ErrorCode.UNKNOWN_MEMBER_ID


async def test_a_classic_static_member_taking_the_last_consumer_members_place_downgrades_the_group(running):
    s_client, d_client = await clients(running, 2)
    topic_id = await create_topic(s_client, TOPIC, 6)
    s = await consumer_heartbeat(s_client, "static", "s", 0, topics=[TOPIC], instance_id="i")
    d = await join(d_client, "static", metadata=subscription([TOPIC]))
    assert (d.error_code, d.generation_id) == (0, 2)
    s = await consumer_heartbeat(s_client, "static", "s", 1, owned={topic_id: sorted(PARTITIONS)}, instance_id="i")
    s_parts = partitions_of(s)[topic_id]
    await consumer_heartbeat(s_client, "static", "s", 1, owned={topic_id: s_parts}, instance_id="i")
    assert await classic_heartbeat(d_client, "static", d.member_id, 2) == ErrorCode.REBALANCE_IN_PROGRESS
    d, d_parts = await rejoin(d_client, "static", d)
    assert owned_once(frozenset(s_parts), d_parts)
    # The static consumer-protocol member leaves for a moment; it comes back as a classic consumer.
    assert (await consumer_heartbeat(s_client, "static", "s", -2, instance_id="i")).member_epoch == -2
    back = await join(s_client, "static", instance_id="i", metadata=subscription([TOPIC]))
    assert (back.error_code, back.generation_id) == (0, 2)
    # Only classic members remain: the group is a classic group again, without a rebalance, and the
    # returning instance gets the partitions it had.
    assert await group_type(s_client, "static") == ("classic", "Stable")
    assert assigned(await sync(s_client, "static", back)) == frozenset(s_parts)
    assert await classic_heartbeat(d_client, "static", d.member_id, 2) == ErrorCode.NONE
    assert assigned(await sync(d_client, "static", d)) == d_parts


# ================================================================================ refusals


async def test_a_classic_group_that_cannot_be_read_is_not_upgraded(running):
    a_client, c_client = await clients(running, 2)
    await create_topic(a_client, TOPIC, 6)
    # Joined but never synced: the member has no assignment to carry over.
    joined = await join(a_client, "unread", metadata=subscription([TOPIC]))
    assert joined.error_code == 0
    refused = await consumer_heartbeat(c_client, "unread", "c", 0, topics=[TOPIC])
    assert refused.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert await group_type(c_client, "unread") == ("classic", "CompletingRebalance")
    # A classic group of another protocol type is never upgraded.
    connect = await join(a_client, "connect-group", protocol_type="connect")
    await sync(a_client, "connect-group", connect, {connect.member_id: b""})
    refused = await consumer_heartbeat(c_client, "connect-group", "c", 0, topics=[TOPIC])
    assert refused.error_code == ErrorCode.GROUP_ID_NOT_FOUND


async def test_with_migration_disabled_groups_with_members_keep_their_protocol(broker_factory):
    running = await broker_factory(**{"group.consumer.migration.policy": "Disabled"}, **FEW_OFFSETS_PARTITIONS)
    a_client, b_client, c_client = await clients(running, 3)
    topic_id = await create_topic(a_client, TOPIC, 6)
    configs = await a_client.request(
        DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=4, resource_name=str(running.broker.config.node_id),
            configuration_keys=["group.consumer.migration.policy"])]), 4)
    assert [(c.name, c.value) for c in configs.results[0].configs] == [("group.consumer.migration.policy", "disabled")]
    await classic_group([a_client, b_client], "kept")
    refused = await consumer_heartbeat(c_client, "kept", "c", 0, topics=[TOPIC])
    assert refused.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert await group_type(c_client, "kept") == ("classic", "Stable")

    # No downgrade either: a consumer group whose last consumer-protocol member leaves stays one.
    c = await consumer_heartbeat(c_client, "cg", "c", 0, topics=[TOPIC])
    assert partitions_of(c) == {topic_id: sorted(PARTITIONS)}
    d = await join(a_client, "cg", metadata=subscription([TOPIC]))  # classic members may join, as in Kafka
    assert d.error_code == 0
    assert (await consumer_heartbeat(c_client, "cg", "c", -1)).error_code == 0
    assert await group_type(c_client, "cg") == ("consumer", "Assigning")
    assert [m.member_type for m in (await describe(c_client, "cg")).members] == [CLASSIC_MEMBER]


def test_the_migration_policy_is_checked_at_start_up():
    from trafka.broker.config import BrokerConfig, ConfigError

    assert BrokerConfig.from_properties({}).group_consumer_migration_policy == "bidirectional"
    upgrade_only = BrokerConfig.from_properties({"group.consumer.migration.policy": "UPGRADE"})
    assert upgrade_only.group_consumer_migration_policy == "upgrade"
    with pytest.raises(ConfigError):
        BrokerConfig.from_properties({"group.consumer.migration.policy": "sideways"})


# ================================================================================ records and restarts


def test_classic_member_metadata_is_kafkas_tagged_field():
    key = ConsumerGroupMemberMetadataKey("g", "m")
    value = ConsumerGroupMemberMetadataValue(
        None, None, "client", "/127.0.0.1", ["t"], None, 30_000, None,
        ClassicMemberMetadata(10_000, (("range", b"\x00\x01"), ("roundrobin", b"\x00\x02"))),
    )
    encoded = encode_consumer_group_value(value)
    assert decode_consumer_group_value(key, encoded) == value
    # Tag 0, its size, then a nullable struct marked present (1): session timeout, two protocols.
    section = encoded[encoded.index(b"\x00\x00\x75\x30") + 5:]  # past the rebalance timeout and null assignor
    assert section[:4] == bytes([1, 0, len(section) - 3, 1])
    assert section[4:8] == struct.pack(">i", 10_000)
    without = ConsumerGroupMemberMetadataValue(None, None, "c", "/h", [], None, -1, None)
    assert encode_consumer_group_value(without).endswith(b"\x00") and decode_consumer_group_value(
        key, encode_consumer_group_value(without)).classic_member_metadata is None


async def test_a_restart_replays_the_converted_group_both_ways(nursery, tmp_path):
    data_dir = tmp_path / "data"
    first = await start_broker(nursery, data_dir, FEW_OFFSETS_PARTITIONS)
    a_client, b_client, c_client = [await first.client() for _ in range(3)]
    topic_id = await create_topic(a_client, TOPIC, 6)
    (a, b), _ = await classic_group([a_client, b_client], "durable")
    c = await consumer_heartbeat(c_client, "durable", "c", 0, topics=[TOPIC])
    a2, a_parts = await rejoin(a_client, "durable", a)
    b2, b_parts = await rejoin(b_client, "durable", b)
    c = await consumer_heartbeat(c_client, "durable", "c", c.member_epoch, owned={})
    c_parts = frozenset(partitions_of(c)[topic_id])
    assert owned_once(a_parts, b_parts, c_parts)
    before = await describe(c_client, "durable")
    await first.close()

    second = await start_broker(nursery, data_dir, FEW_OFFSETS_PARTITIONS)
    a_client, c_client = await second.client(), await second.client()
    await wait_for(lambda: _coordinator_ready(second), "the coordinator to load")
    after = await describe(c_client, "durable")
    assert _members(after) == _members(before)
    assert (after.group_state, after.group_epoch, after.assignment_epoch) == ("Stable", 2, 2)
    # Every member carries on where it was: the classic ones with their generation and assignment.
    assert await classic_heartbeat(a_client, "durable", a.member_id, 2) == ErrorCode.NONE
    assert assigned(await sync(a_client, "durable", a2)) == a_parts
    c = await consumer_heartbeat(c_client, "durable", "c", 2, owned={topic_id: sorted(c_parts)})
    assert (c.error_code, c.member_epoch, c.assignment) == (0, 2, None)
    # Downgraded, then restarted: a Stable classic group whose members hold their target assignments.
    await consumer_heartbeat(c_client, "durable", "c", -1)
    await second.close()

    third = await start_broker(nursery, data_dir, FEW_OFFSETS_PARTITIONS)
    client = await third.client()
    await wait_for(lambda: _coordinator_ready(third), "the coordinator to load")
    (described,) = (await client.request(DescribeGroupsRequest(groups=["durable"]), 5)).groups
    assert (described.group_state, described.protocol_type, described.protocol_data) == ("Stable", "consumer", "range")
    held = {m.member_id: frozenset(decode_assignment(bytes(m.member_assignment)).get(TOPIC, ()))
            for m in described.members}
    assert held == {a.member_id: a_parts, b.member_id: b_parts}
    assert await classic_heartbeat(client, "durable", a.member_id, 2) == ErrorCode.NONE
    await third.close()


def _members(described) -> dict[str, tuple]:
    return {
        m.member_id: (
            m.member_type, m.member_epoch, sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions)
        )
        for m in described.members
    }


async def _coordinator_ready(running) -> bool:
    return running.broker.group_coordinator().active

