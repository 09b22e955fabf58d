"""Share groups (KIP-932): the simple assignor and the group's state transitions as pure functions, the
ShareGroup* records, and ShareGroupHeartbeat/ShareGroupDescribe driven over TCP against the in-process broker
(joins, leaves, expiries, assignments, epochs and errors as Kafka 4.4 gives them)."""
from __future__ import annotations

import uuid

import pytest
import trio

from trafka.broker.groups.records import decode_key
from trafka.broker.groups.share import (
    IllegalTransition,
    ShareGroup,
    ShareGroupMember,
    ShareGroupState,
    simple_assign,
)
from trafka.broker.groups.share_records import (
    ShareGroupCurrentMemberAssignmentKey,
    ShareGroupCurrentMemberAssignmentValue,
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
    ShareGroupTargetAssignmentMemberKey,
    ShareGroupTargetAssignmentMemberValue,
    ShareGroupTargetAssignmentMetadataKey,
    ShareGroupTargetAssignmentMetadataValue,
    TopicInfo,
    TopicPartitionsInfo,
    decode_share_group_value,
    encode_share_group_key,
    encode_share_group_value,
)
from trafka.broker.tests.conftest import start_broker
from trafka.broker.tests.test_consumer_groups import create_topic
from trafka.broker.tests.test_groups import wait_for
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import (
    ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    ShareGroupDescribeRequest,
    ShareGroupHeartbeatRequest,
)

T = uuid.UUID(int=1)
U = uuid.UUID(int=2)


def fs(*partitions: int) -> frozenset[int]:
    return frozenset(partitions)


# ============================================================================ the simple assignor

ASSIGNOR_CASES = [
    # (name, subscriptions, assignable partitions, previous target, -> target)
    ("one member takes every partition", {"a": {T}}, {T: fs(0, 1, 2, 3)}, {},
     {"a": {T: fs(0, 1, 2, 3)}}),
    ("more members than partitions share them", {"a": {T}, "b": {T}, "c": {T}}, {T: fs(0)}, {},
     {"a": {T: fs(0)}, "b": {T: fs(0)}, "c": {T: fs(0)}}),
    ("only initialized partitions are assigned", {"a": {T}}, {}, {}, {"a": {}}),
    ("each topic among its subscribers", {"a": {T}, "b": {T, U}}, {T: fs(0, 1), U: fs(0)}, {},
     {"a": {T: fs(0)}, "b": {T: fs(1), U: fs(0)}}),
    ("a member keeps its partition when another leaves", {"a": {T}}, {T: fs(0, 1)},
     {"a": {T: fs(1)}, "gone": {T: fs(0)}}, {"a": {T: fs(0, 1)}}),
]


@pytest.mark.parametrize("subscriptions, assignable, previous, expected", [c[1:] for c in ASSIGNOR_CASES],
                         ids=[c[0] for c in ASSIGNOR_CASES])
def test_simple_assignor(subscriptions, assignable, previous, expected):
    target = simple_assign({m: frozenset(t) for m, t in subscriptions.items()}, assignable, previous)
    assert target == expected


def test_the_simple_assignor_makes_kafkas_choices():
    # What Kafka 4.4 answered: member-one held the four partitions of this topic; member-two joined.
    topic = uuid.UUID("ca3475e1-7f1c-4c44-a51d-91926223ab40")
    target = simple_assign({"member-one": frozenset({topic}), "member-two": frozenset({topic})},
                           {topic: fs(0, 1, 2, 3)}, {"member-one": {topic: fs(0, 1, 2, 3)}})
    assert target == {"member-one": {topic: fs(0, 3)}, "member-two": {topic: fs(1, 2)}}


@pytest.mark.parametrize("members, partitions", [(2, 4), (3, 4), (4, 2), (5, 2), (7, 3), (3, 1), (16, 40)])
def test_the_simple_assignor_shares_every_partition_alike_and_balances_the_members(members, partitions):
    names = [f"member-{i}" for i in range(members)]
    everything = {T: frozenset(range(partitions)), U: frozenset(range(partitions))}
    target = simple_assign({m: frozenset({T, U}) for m in names}, everything, {})
    sharing = -(-members // (2 * partitions))
    holders = {(t, p): sum(1 for a in target.values() if p in a.get(t, ())) for t in (T, U) for p in range(partitions)}
    assert set(holders.values()) == {sharing}
    sizes = [sum(len(ps) for ps in a.values()) for a in target.values()]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == sharing * 2 * partitions
    # Stable: the same group computed again from its target keeps it.
    assert simple_assign({m: frozenset({T, U}) for m in names}, everything, target) == target


# ============================================================================ states

TRANSITION_CASES = [
    ("a member joins an empty group", ShareGroupState.EMPTY, ["a"], [], ShareGroupState.STABLE),
    ("the last member leaves", ShareGroupState.STABLE, ["a"], ["a"], ShareGroupState.EMPTY),
    ("one of two leaves", ShareGroupState.STABLE, ["a", "b"], ["a"], ShareGroupState.STABLE),
]


@pytest.mark.parametrize("start, joins, leaves, expected", [c[1:] for c in TRANSITION_CASES],
                         ids=[c[0] for c in TRANSITION_CASES])
def test_group_states_follow_membership(start, joins, leaves, expected):
    group = ShareGroup("g")
    for member_id in joins:
        group.update_member(ShareGroupMember(member_id))
    for member_id in leaves:
        group.remove_member(member_id)
    assert group.state is expected


def test_a_dead_group_stays_dead():
    group = ShareGroup("g")
    group.transition_to(ShareGroupState.DEAD)
    with pytest.raises(IllegalTransition):
        group.transition_to(ShareGroupState.STABLE)


# ============================================================================ records

RECORDS = [
    (ShareGroupMemberMetadataKey("g", "m"), ShareGroupMemberMetadataValue("rack", "client", "/1.2.3.4", ["t", "u"])),
    (ShareGroupMemberMetadataKey("g", "m"), ShareGroupMemberMetadataValue(None, "client", "/1.2.3.4", [])),
    (ShareGroupMetadataKey("g"), ShareGroupMetadataValue(7, -1234567890123)),
    (ShareGroupTargetAssignmentMetadataKey("g"), ShareGroupTargetAssignmentMetadataValue(6)),
    (ShareGroupTargetAssignmentMemberKey("g", "m"), ShareGroupTargetAssignmentMemberValue({T: fs(0, 2), U: fs(1)})),
    (ShareGroupCurrentMemberAssignmentKey("g", "m"), ShareGroupCurrentMemberAssignmentValue(6, 4, 0, {T: fs(3)})),
    (ShareGroupStatePartitionMetadataKey("g"), ShareGroupStatePartitionMetadataValue(
        [TopicPartitionsInfo(T, "t", fs(2), 99)], [TopicPartitionsInfo(U, "u", fs(0, 1), 5)], [TopicInfo(T, "x")])),
]


@pytest.mark.parametrize("key, value", RECORDS, ids=[type(v).__name__ for _, v in RECORDS])
def test_share_group_records_round_trip(key, value):
    encoded_key = encode_share_group_key(key)
    decoded = decode_key(encoded_key)
    assert decoded == key
    assert decode_share_group_value(decoded, encode_share_group_value(value)) == value


def test_keys_carry_kafkas_record_types():
    assert [encode_share_group_key(k)[:2] for k, _ in RECORDS[1:]] == [
        b"\x00\x0a", b"\x00\x0b", b"\x00\x0c", b"\x00\x0d", b"\x00\x0e", b"\x00\x0f"]


# ============================================================================ over the wire

# A small __consumer_offsets; targets computed at the heartbeat that needs them (see the interval's own test).
FEW_OFFSETS_PARTITIONS = {"offsets.topic.num.partitions": "3", "group.share.assignment.interval.ms": "0"}


@pytest.fixture
async def running(broker_factory):
    return await broker_factory(**FEW_OFFSETS_PARTITIONS)


@pytest.fixture
async def client(running):
    return await running.client()


async def heartbeat(client, group_id: str, member_id: str, epoch: int, topics: list[str] | None = None, **fields):
    request = ShareGroupHeartbeatRequest(group_id=group_id, member_id=member_id, member_epoch=epoch,
                                         subscribed_topic_names=topics, **fields)
    return await client.request(request, 1)


def partitions_of(response) -> dict[uuid.UUID, list[int]] | None:
    if response.assignment is None:
        return None
    return {tp.topic_id: sorted(tp.partitions) for tp in response.assignment.topic_partitions}


async def joined_with_partitions(client, group_id: str, member_id: str, topics: list[str]):
    """Join, then heartbeat until the partitions' share state is initialized and assigned."""
    response = await heartbeat(client, group_id, member_id, 0, topics)
    assert response.error_code == 0, response
    first = response

    async def assigned():
        nonlocal response
        response = await heartbeat(client, group_id, member_id, response.member_epoch)
        assert response.error_code == 0, response
        return response if response.assignment is not None and response.assignment.topic_partitions else None

    return first, await wait_for(assigned, "the partitions to be assigned")


async def test_a_member_joins_and_gets_its_partitions_once_their_share_state_is_initialized(client):
    topic_id = await create_topic(client, "sg-join", 4)
    first, assigned = await joined_with_partitions(client, "sg-join", "member-1", ["sg-join"])
    # As in Kafka 4.4: the first member of a new group joins at epoch 2, with nothing assigned yet; once the
    # share state is initialized, the next heartbeat moves to epoch 3 with every partition.
    assert (first.member_id, first.member_epoch, partitions_of(first)) == ("member-1", 2, {})
    assert first.heartbeat_interval_ms == 5000
    assert (assigned.member_epoch, partitions_of(assigned)) == (3, {topic_id: [0, 1, 2, 3]})
    again = await heartbeat(client, "sg-join", "member-1", 3)
    assert (again.error_code, again.member_epoch, again.assignment) == (0, 3, None)


async def test_members_split_the_partitions_and_take_them_back_when_one_leaves(client):
    topic_id = await create_topic(client, "sg-split", 4)
    _, a = await joined_with_partitions(client, "sg-split", "a", ["sg-split"])
    b = await heartbeat(client, "sg-split", "b", 0, ["sg-split"])
    assert b.member_epoch == a.member_epoch + 1 and len(partitions_of(b)[topic_id]) == 2
    a = await heartbeat(client, "sg-split", "a", a.member_epoch)
    assert a.member_epoch == b.member_epoch
    assert sorted(partitions_of(a)[topic_id] + partitions_of(b)[topic_id]) == [0, 1, 2, 3]
    left = await heartbeat(client, "sg-split", "b", -1)
    assert (left.error_code, left.member_id, left.member_epoch, left.heartbeat_interval_ms) == (0, "b", -1, 0)
    a = await heartbeat(client, "sg-split", "a", a.member_epoch)
    assert (a.member_epoch, partitions_of(a)) == (b.member_epoch + 1, {topic_id: [0, 1, 2, 3]})


async def test_more_members_than_partitions_share_them(client):
    topic_id = await create_topic(client, "sg-shared", 1)
    await joined_with_partitions(client, "sg-shared", "a", ["sg-shared"])
    for member_id in ("b", "c"):
        response = await heartbeat(client, "sg-shared", member_id, 0, ["sg-shared"])
        assert partitions_of(response) == {topic_id: [0]}


HEARTBEAT_ERRORS = [
    # (name, group, member, epoch, topics, extra fields, -> error code, message)
    ("empty member id", "g", "", 0, ["t"], {}, ErrorCode.INVALID_REQUEST, None),
    ("member id longer than 36", "g", "x" * 37, 0, ["t"], {}, ErrorCode.INVALID_REQUEST, None),
    ("empty group id", "", "m", 0, ["t"], {}, ErrorCode.INVALID_REQUEST, "GroupId can't be empty."),
    ("empty rack", "g", "m", 0, ["t"], {"rack_id": ""}, ErrorCode.INVALID_REQUEST, "RackId can't be empty."),
    ("join without a subscription", "g", "m", 0, None, {}, ErrorCode.INVALID_REQUEST,
     "SubscribedTopicNames must be set in first request."),
    ("join with an empty subscription", "g", "m", 0, [], {}, ErrorCode.INVALID_REQUEST,
     "SubscribedTopicNames must be set in first request."),
    ("epoch -2", "g", "m", -2, None, {}, ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid."),
    ("a heartbeat to a group that is not there", "nowhere", "m", 3, None, {}, ErrorCode.GROUP_ID_NOT_FOUND,
     "Share group nowhere not found."),
    ("leaving a group that is not there", "nowhere", "m", -1, None, {}, ErrorCode.GROUP_ID_NOT_FOUND,
     "Group nowhere not found."),
]


@pytest.mark.parametrize("group_id, member_id, epoch, topics, fields, error, message",
                         [c[1:] for c in HEARTBEAT_ERRORS], ids=[c[0] for c in HEARTBEAT_ERRORS])
async def test_bad_heartbeats_get_kafkas_errors(client, group_id, member_id, epoch, topics, fields, error, message):
    response = await heartbeat(client, group_id, member_id, epoch, topics, **fields)
    assert (response.error_code, response.error_message, response.member_id) == (error, message, None)


async def test_member_epochs_are_checked_as_kafka_checks_them(client):
    await create_topic(client, "sg-epochs", 1)
    joined = await heartbeat(client, "sg-epochs", "m", 0, ["sg-epochs"])
    assert joined.member_epoch == 2
    greater = await heartbeat(client, "sg-epochs", "m", 7)
    assert greater.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert greater.error_message.startswith("The share group member has a greater member epoch (7) than the one "
                                            "known by the group coordinator (2).")
    smaller = await heartbeat(client, "sg-epochs", "m", 1)
    assert smaller.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert "and it does not match the previous member epoch (0)" in smaller.error_message
    # Its previous epoch is accepted (a lost response), and a known member may join again.
    assert (await heartbeat(client, "sg-epochs", "m", 0, ["sg-epochs"])).error_code == 0
    unknown = await heartbeat(client, "sg-epochs", "other", 2)
    assert (unknown.error_code, unknown.error_message) == (
        ErrorCode.UNKNOWN_MEMBER_ID, "Member other is not a member of group sg-epochs.")
    gone = await heartbeat(client, "sg-epochs", "other", -1)
    assert gone.error_code == ErrorCode.UNKNOWN_MEMBER_ID


async def test_share_and_consumer_groups_do_not_mix(client):
    await create_topic(client, "sg-mix", 1)
    assert (await heartbeat(client, "sg-mix-share", "m", 0, ["sg-mix"])).error_code == 0
    consumer = await client.request(ConsumerGroupHeartbeatRequest(
        group_id="sg-mix-share", member_id="c", member_epoch=0, rebalance_timeout_ms=30_000,
        subscribed_topic_names=["sg-mix"], topic_partitions=[]), 1)
    assert (consumer.error_code, consumer.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND, "Group sg-mix-share is not a consumer group.")
    await client.request(ConsumerGroupHeartbeatRequest(
        group_id="sg-mix-consumer", member_id="c", member_epoch=0, rebalance_timeout_ms=30_000,
        subscribed_topic_names=["sg-mix"], topic_partitions=[]), 1)
    share = await heartbeat(client, "sg-mix-consumer", "m", 0, ["sg-mix"])
    assert (share.error_code, share.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND, "Group sg-mix-consumer is not a share group.")


async def test_the_group_size_is_limited(broker_factory):
    running = await broker_factory(**FEW_OFFSETS_PARTITIONS, **{"group.share.max.size": "2"})
    client = await running.client()
    for member_id in ("a", "b"):
        assert (await heartbeat(client, "sg-full", member_id, 0, ["t"])).error_code == 0
    full = await heartbeat(client, "sg-full", "c", 0, ["t"])
    assert (full.error_code, full.error_message) == (
        ErrorCode.GROUP_MAX_SIZE_REACHED, "The share group has reached its maximum capacity of 2 members.")


async def test_describe_list_and_delete(client):
    topic_id = await create_topic(client, "sg-admin", 2)
    _, assigned = await joined_with_partitions(client, "sg-admin", "m", ["sg-admin"])
    described = await client.request(ShareGroupDescribeRequest(group_ids=["nope", "sg-admin", ""],
                                                               include_authorized_operations=True), 1)
    empty, missing, group = described.groups
    assert (empty.group_id, empty.error_code) == ("", ErrorCode.INVALID_GROUP_ID)
    assert (missing.error_code, missing.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group nope not found.")
    assert (group.group_state, group.group_epoch, group.assignment_epoch, group.assignor_name) == (
        "Stable", assigned.member_epoch, assigned.member_epoch, "simple")
    assert group.authorized_operations > 0
    (member,) = group.members
    assert (member.member_id, member.member_epoch, member.subscribed_topic_names) == ("m", assigned.member_epoch,
                                                                                      ["sg-admin"])
    assert member.client_host.startswith("/")
    assert [(tp.topic_id, tp.topic_name, tp.partitions) for tp in member.assignment.topic_partitions] == [
        (topic_id, "sg-admin", [0, 1])]

    listed = await client.request(ListGroupsRequest(types_filter=["share"]), 5)
    assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups] == [
        ("sg-admin", "share", "Stable", "share")]
    classic = await client.request(DescribeGroupsRequest(groups=["sg-admin"]), 5)
    assert (classic.groups[0].error_code, classic.groups[0].group_state) == (0, "Dead")
    refused = await client.request(DeleteGroupsRequest(groups_names=["sg-admin"]), 2)
    assert refused.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
    fetched = await client.request(OffsetFetchRequest(group_id="sg-admin", topics=None), 7)
    assert (fetched.error_code, fetched.topics) == (0, [])
    committed = await client.request(OffsetCommitRequest(
        group_id="sg-admin", generation_id_or_member_epoch=-1, member_id="", topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(name="sg-admin", partitions=[
                OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]), 8)
    assert committed.topics[0].partitions[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND

    assert (await heartbeat(client, "sg-admin", "m", -1)).error_code == 0
    listed = await client.request(ListGroupsRequest(types_filter=["share"]), 5)
    assert [(g.group_id, g.group_state) for g in listed.groups] == [("sg-admin", "Empty")]
    deleted = await client.request(DeleteGroupsRequest(groups_names=["sg-admin"]), 2)
    assert deleted.results[0].error_code == 0
    assert (await client.request(ListGroupsRequest(types_filter=["share"]), 5)).groups == []


async def test_silent_members_are_removed(broker_factory):
    running = await broker_factory(**FEW_OFFSETS_PARTITIONS, **{
        "group.share.min.session.timeout.ms": "100", "group.share.session.timeout.ms": "300",
        "group.share.min.heartbeat.interval.ms": "50", "group.share.heartbeat.interval.ms": "100"})
    client = await running.client()
    left: list[tuple[str, str]] = []
    running.broker.group_coordinator().on_share_member_left(lambda g, m: left.append((g, m)))
    await heartbeat(client, "sg-silent", "m", 0, ["t"])

    async def empty():
        listed = await client.request(ListGroupsRequest(types_filter=["share"]), 5)
        return [g.group_state for g in listed.groups] == ["Empty"]

    await wait_for(empty, "the silent member's session to expire")
    assert left == [("sg-silent", "m")]


async def test_the_group_survives_a_restart(nursery, tmp_path):
    data_dir = tmp_path / "data"
    first = await start_broker(nursery, data_dir, FEW_OFFSETS_PARTITIONS)
    client = await first.client()
    topic_id = await create_topic(client, "sg-durable", 3)
    _, a = await joined_with_partitions(client, "sg-durable", "a", ["sg-durable"])
    b = await heartbeat(client, "sg-durable", "b", 0, ["sg-durable"])
    a = await heartbeat(client, "sg-durable", "a", a.member_epoch)
    await first.close()

    second = await start_broker(nursery, data_dir, FEW_OFFSETS_PARTITIONS)
    client = await second.client()
    await wait_for(lambda: _coordinator_ready(second), "the coordinator to load")
    group = second.broker.group_coordinator().share_group("sg-durable")
    assert group is not None and group.state is ShareGroupState.STABLE
    assert group.initialized_partitions() == {topic_id: frozenset({0, 1, 2})}
    described = (await client.request(ShareGroupDescribeRequest(group_ids=["sg-durable"]), 1)).groups[0]
    assert (described.group_epoch, described.assignment_epoch) == (b.member_epoch, b.member_epoch)
    again = await heartbeat(client, "sg-durable", "a", a.member_epoch)
    assert (again.error_code, again.member_epoch, again.assignment) == (0, a.member_epoch, None)
    await second.close()


async def _coordinator_ready(running) -> bool:
    await trio.sleep(0)
    return running.broker.group_coordinator().active


# ============================================================================ group configs

async def describe_group_configs(client, group_id: str, keys=None) -> dict[str, tuple[str, int]]:
    from trafka.wire.messages import DescribeConfigsRequest as D

    response = await client.request(D(resources=[D.DescribeConfigsResource(
        resource_type=32, resource_name=group_id, configuration_keys=keys)], include_synonyms=True), 4)
    (result,) = response.results
    assert result.error_code == 0, result
    return {c.name: (c.value, c.config_source) for c in result.configs}


async def alter_group_configs(client, group_id: str, *operations, validate_only: bool = False):
    from trafka.wire.messages import IncrementalAlterConfigsRequest as I

    response = await client.request(I(resources=[I.AlterConfigsResource(
        resource_type=32, resource_name=group_id, configs=[
            I.AlterableConfig(name=name, config_operation=op, value=value) for name, op, value in operations])],
        validate_only=validate_only), 1)
    return [(r.error_code, r.error_message) for r in response.responses]


GROUP_CONFIG_ERRORS = [
    ("share.session.timeout.ms", "1000", "share.session.timeout.ms must be in the range 45000 to 60000 inclusive."),
    ("share.record.lock.duration.ms", "abc",
     "Invalid value abc for configuration share.record.lock.duration.ms: Not a number of type INT"),
    ("share.delivery.count.limit", "1",
     "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"),
    ("share.isolation.level", "x",
     "Invalid value x for configuration share.isolation.level: String must be one of: read_committed, "
     "read_uncommitted"),
    ("share.nope", "1", "Unknown group config name: share.nope"),
]


@pytest.mark.parametrize("name, value, message", GROUP_CONFIG_ERRORS,
                         ids=[c[0] + "=" + c[1] for c in GROUP_CONFIG_ERRORS])
async def test_bad_group_configs_are_refused(client, name, value, message):
    assert await alter_group_configs(client, "sg-bad-config", (name, 0, value)) == [(ErrorCode.INVALID_CONFIG, message)]


async def test_group_configs_are_kept_and_used(nursery, tmp_path):
    data_dir = tmp_path / "data"
    first = await start_broker(nursery, data_dir, FEW_OFFSETS_PARTITIONS)
    client = await first.client()
    described = await describe_group_configs(client, "sg-configured")
    assert described["share.heartbeat.interval.ms"] == ("5000", 5)
    assert described["share.auto.offset.reset"] == ("latest", 5)
    assert await alter_group_configs(client, "sg-configured", ("share.heartbeat.interval.ms", 0, "7000"),
                                     ("share.auto.offset.reset", 0, "earliest")) == [(0, None)]
    joined = await heartbeat(client, "sg-configured", "m", 0, ["t"])
    assert joined.heartbeat_interval_ms == 7000
    config = first.broker.group_coordinator().share_group_config("sg-configured")
    assert (config["share.heartbeat.interval.ms"], config["share.auto.offset.reset"]) == (7000, "earliest")
    assert config["share.record.lock.duration.ms"] == 30_000
    await first.close()

    second = await start_broker(nursery, data_dir, FEW_OFFSETS_PARTITIONS)
    client = await second.client()
    described = await describe_group_configs(client, "sg-configured", ["share.heartbeat.interval.ms"])
    assert described == {"share.heartbeat.interval.ms": ("7000", 8)}
    assert await alter_group_configs(client, "sg-configured", ("share.heartbeat.interval.ms", 1, None)) == [(0, None)]
    described = await describe_group_configs(client, "sg-configured", ["share.heartbeat.interval.ms"])
    assert described == {"share.heartbeat.interval.ms": ("5000", 5)}
    await second.close()


async def test_partitions_added_to_a_subscribed_topic_are_initialized_and_assigned(client):
    from trafka.wire.messages import CreatePartitionsRequest

    topic_id = await create_topic(client, "sg-grow", 1)
    _, assigned = await joined_with_partitions(client, "sg-grow", "m", ["sg-grow"])
    assert partitions_of(assigned) == {topic_id: [0]}
    grown = await client.request(CreatePartitionsRequest(topics=[CreatePartitionsRequest.CreatePartitionsTopic(
        name="sg-grow", count=2, assignments=None)], timeout_ms=5000, validate_only=False), 3)
    assert grown.results[0].error_code == 0
    response = assigned

    async def both():
        nonlocal response
        response = await heartbeat(client, "sg-grow", "m", response.member_epoch)
        return response.assignment is not None and partitions_of(response) == {topic_id: [0, 1]}

    await wait_for(both, "the new partition to be assigned")
    assert response.member_epoch > assigned.member_epoch


async def test_a_deleted_topic_leaves_the_assignment_and_the_share_state(running, client):
    from trafka.wire.messages import DeleteTopicsRequest

    topic_id = await create_topic(client, "sg-gone", 2)
    _, assigned = await joined_with_partitions(client, "sg-gone", "m", ["sg-gone"])
    assert partitions_of(assigned) == {topic_id: [0, 1]}
    deleted = await client.request(DeleteTopicsRequest(topic_names=["sg-gone"], timeout_ms=5000), 4)
    assert deleted.responses[0].error_code == 0
    response = await heartbeat(client, "sg-gone", "m", assigned.member_epoch)
    assert (response.error_code, partitions_of(response)) == (0, {})
    assert response.member_epoch > assigned.member_epoch
    group = running.broker.group_coordinator().share_group("sg-gone")

    async def forgotten():
        await trio.sleep(0)
        return not group.initialized and not group.deleting and not group.initializing

    await wait_for(forgotten, "the deleted topic's share state to be forgotten")


async def test_share_groups_are_counted_in_the_metrics_by_state(running, client):
    from trafka.broker.metrics import _StateCollector

    await heartbeat(client, "sg-metrics", "m", 0, ["t"])
    coordinator = running.broker.group_coordinator()
    families = {f.name: f for f in _StateCollector(running.broker.topics, lambda: coordinator, lambda: 0).collect()}
    groups = [(s.labels, s.value) for s in families["trafka_groups"].samples]
    assert ({"type": "share", "state": "Stable"}, 1) in groups
    members = [(s.labels, s.value) for s in families["trafka_group_members"].samples]
    assert ({"group": "sg-metrics"}, 1) in members


async def test_the_group_moves_with_the_leadership_of_its_offsets_partition(running, client):
    from trafka.broker.tests.test_groups_leadership import _loaded

    topic_id = await create_topic(client, "sg-moving", 2)
    _, assigned = await joined_with_partitions(client, "sg-moving", "m", ["sg-moving"])
    coordinator = running.broker.group_coordinator()
    index = coordinator.partition_for("sg-moving")

    coordinator.on_partition_leadership(index, False)
    assert coordinator.share_group("sg-moving") is None
    beat = await heartbeat(client, "sg-moving", "m", assigned.member_epoch)
    assert beat.error_code == ErrorCode.NOT_COORDINATOR
    described = await client.request(ShareGroupDescribeRequest(group_ids=["sg-moving"]), 1)
    assert described.groups[0].error_code == ErrorCode.NOT_COORDINATOR

    async with coordinator.runtime._load_turn:  # holds the load back
        coordinator.on_partition_leadership(index, True)
        beat = await heartbeat(client, "sg-moving", "m", assigned.member_epoch)
        assert beat.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    await wait_for(lambda: _loaded(coordinator), "the partition to load")
    group = coordinator.share_group("sg-moving")
    assert (group.group_epoch, group.assignment_epoch) == (assigned.member_epoch, assigned.member_epoch)
    assert group.initialized_partitions() == {topic_id: frozenset({0, 1})}
    beat = await heartbeat(client, "sg-moving", "m", assigned.member_epoch)
    assert (beat.error_code, beat.member_epoch, beat.assignment) == (0, assigned.member_epoch, None)


def test_subscribed_topic_names_keep_kafkas_order():
    from trafka.broker.groups.share import java_set_order

    # As Kafka 4.4 describes them (a Java HashSet of the names asked for).
    assert java_set_order(["sd-one", "sd-later"]) == ("sd-later", "sd-one")
    assert java_set_order(["s3t", "nosuch2", "s3t"]) == ("s3t", "nosuch2")


async def test_an_empty_share_group_does_not_expire(broker_factory):
    running = await broker_factory(**FEW_OFFSETS_PARTITIONS, **{"offsets.retention.minutes": "1",
                                                                "offsets.retention.check.interval.ms": "50"})
    client = await running.client()
    await heartbeat(client, "sg-kept", "m", 0, ["t"])
    assert (await heartbeat(client, "sg-kept", "m", -1)).error_code == 0
    await trio.sleep(0.3)  # several expiry checks, as Kafka 4.4 keeps an empty share group
    listed = await client.request(ListGroupsRequest(types_filter=["share"]), 5)
    assert [(g.group_id, g.group_state) for g in listed.groups] == [("sg-kept", "Empty")]


SETTINGS_REFUSED = [
    ({"group.share.heartbeat.interval.ms": "50000", "group.share.max.heartbeat.interval.ms": "60000",
      "group.share.session.timeout.ms": "45000"},
     "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms"),
    ({"group.share.session.timeout.ms": "70000"},
     "group.share.session.timeout.ms must be less than or equal to group.share.max.session.timeout.ms"),
    ({"group.share.min.heartbeat.interval.ms": "6000"},
     "group.share.heartbeat.interval.ms must be greater than or equal to group.share.min.heartbeat.interval.ms"),
]


@pytest.mark.parametrize("settings, message", SETTINGS_REFUSED, ids=[m for _, m in SETTINGS_REFUSED])
def test_share_settings_that_contradict_each_other_are_refused(settings, message):
    from trafka.broker.config import ConfigError
    from trafka.broker.groups.share import check_share_settings

    with pytest.raises(ConfigError) as refused:
        check_share_settings(settings)
    assert str(refused.value) == message


async def test_members_joining_within_the_assignment_interval_wait_for_the_next_target(broker_factory):
    running = await broker_factory(**{"offsets.topic.num.partitions": "3",
                                      "group.share.assignment.interval.ms": "500"})
    client = await running.client()
    topic_id = await create_topic(client, "sg-interval", 2)
    _, a = await joined_with_partitions(client, "sg-interval", "a", ["sg-interval"])
    b = await heartbeat(client, "sg-interval", "b", 0, ["sg-interval"])
    # As on Kafka 4.4: the group epoch moved, but the target is not computed again within the interval.
    assert (b.error_code, b.member_epoch, partitions_of(b)) == (0, a.member_epoch, {})
    described = (await client.request(ShareGroupDescribeRequest(group_ids=["sg-interval"]), 1)).groups[0]
    assert (described.group_epoch, described.assignment_epoch) == (a.member_epoch + 1, a.member_epoch)
    await trio.sleep(0.6)
    b = await heartbeat(client, "sg-interval", "b", b.member_epoch)
    assert (b.member_epoch, len(partitions_of(b)[topic_id])) == (a.member_epoch + 1, 1)
