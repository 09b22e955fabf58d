"""The consumer group protocol (KIP-848): reconciliation and assignors as pure functions, the
ConsumerGroup* records, and ConsumerGroupHeartbeat/ConsumerGroupDescribe driven by hand over TCP
against the in-process broker from conftest.py (compat_tests/ runs librdkafka against it)."""
from __future__ import annotations

import uuid

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from trafka.broker.groups.assignors import MemberSpec, RangeAssignor, UniformAssignor
from trafka.broker.groups.consumer import ConsumerGroupMember, MemberState, TopicMetadata, compile_topic_regex, reconcile
from trafka.broker.groups.records import (
    ConsumerGroupCurrentMemberAssignmentKey,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataKey,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberKey,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataKey,
    ConsumerGroupTargetAssignmentMetadataValue,
    SubscribedTopicMetadata,
    decode_consumer_group_value,
    decode_key,
    encode_consumer_group_key,
    encode_consumer_group_value,
)
from trafka.broker.tests.conftest import start_broker
from trafka.broker.tests.test_groups import commit, fetch, join, wait_for
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    CreateTopicsRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    ListGroupsRequest,
    MetadataRequest,
    OffsetCommitRequest,
)

T = uuid.UUID(int=1)  # topic ids for the pure-function tests
U = uuid.UUID(int=2)


def assignment(**partitions: list[int]) -> dict[uuid.UUID, frozenset[int]]:
    ids = {"t": T, "u": U}
    return {ids[name]: frozenset(ps) for name, ps in partitions.items() if ps}


# ============================================================================ reconciliation

HELD_BY_OTHERS = {(T, 3): 4}


def partition_epoch(topic_id, partition):
    return HELD_BY_OTHERS.get((topic_id, partition), -1)


RECONCILIATION_CASES = [
    # (name, member state, member epoch, assigned, pending revocation, owned (None: not reported),
    #  target, -> state, epoch, previous epoch, assigned, pending revocation)
    ("up to date", MemberState.STABLE, 5, assignment(t=[0, 1]), {}, None,
     assignment(t=[0, 1]), MemberState.STABLE, 5, 4, assignment(t=[0, 1]), {}),
    ("new free partitions are assigned at once", MemberState.STABLE, 4, assignment(t=[0]), {}, assignment(t=[0]),
     assignment(t=[0, 1], u=[0]), MemberState.STABLE, 5, 4, assignment(t=[0, 1], u=[0]), {}),
    ("a partition still held elsewhere waits", MemberState.STABLE, 4, assignment(t=[0]), {}, assignment(t=[0]),
     assignment(t=[0, 3]), MemberState.UNRELEASED_PARTITIONS, 5, 4, assignment(t=[0]), {}),
    ("partitions that moved are revoked first, at the same epoch", MemberState.STABLE, 4, assignment(t=[0, 1, 2]),
     {}, assignment(t=[0, 1, 2]), assignment(t=[0], u=[0]),
     MemberState.UNREVOKED_PARTITIONS, 4, 4, assignment(t=[0]), assignment(t=[1, 2])),
    ("unknown ownership counts as still owned", MemberState.STABLE, 4, assignment(t=[0, 1]), {}, None,
     assignment(t=[0]), MemberState.UNREVOKED_PARTITIONS, 4, 4, assignment(t=[0]), assignment(t=[1])),
    ("already let go: straight to the target", MemberState.STABLE, 4, assignment(t=[0, 1]), {}, assignment(t=[0]),
     assignment(t=[0]), MemberState.STABLE, 5, 4, assignment(t=[0]), {}),
    ("still revoking: nothing moves", MemberState.UNREVOKED_PARTITIONS, 4, assignment(t=[0]), assignment(t=[1]),
     assignment(t=[0, 1]), assignment(t=[0], u=[1]),
     MemberState.UNREVOKED_PARTITIONS, 4, 3, assignment(t=[0]), assignment(t=[1])),
    ("revocation done: the new partitions follow", MemberState.UNREVOKED_PARTITIONS, 4, assignment(t=[0]),
     assignment(t=[1]), assignment(t=[0]), assignment(t=[0], u=[1]),
     MemberState.STABLE, 5, 4, assignment(t=[0], u=[1]), {}),
    ("waiting for a release that came", MemberState.UNRELEASED_PARTITIONS, 5, assignment(t=[0]), {},
     assignment(t=[0]), assignment(t=[0, 1]), MemberState.STABLE, 5, 5, assignment(t=[0, 1]), {}),
    ("still waiting", MemberState.UNRELEASED_PARTITIONS, 5, assignment(t=[0]), {}, assignment(t=[0]),
     assignment(t=[0, 3]), MemberState.UNRELEASED_PARTITIONS, 5, 5, assignment(t=[0]), {}),
]


@pytest.mark.parametrize(
    "state, epoch, assigned, pending, owned, target, new_state, new_epoch, previous, new_assigned, new_pending",
    [case[1:] for case in RECONCILIATION_CASES],
    ids=[case[0] for case in RECONCILIATION_CASES],
)
def test_reconciliation(state, epoch, assigned, pending, owned, target, new_state, new_epoch, previous, new_assigned,
                        new_pending):
    member = ConsumerGroupMember("m", member_epoch=epoch, previous_member_epoch=epoch - 1, state=state,
                                 assigned_partitions=assigned, partitions_pending_revocation=pending)
    result = reconcile(member, 5, target, partition_epoch, owned)
    assert (result.state, result.member_epoch, result.previous_member_epoch) == (new_state, new_epoch, previous)
    assert (result.assigned_partitions, result.partitions_pending_revocation) == (new_assigned, new_pending)


def test_a_member_in_an_unknown_state_must_give_up_everything():
    member = ConsumerGroupMember("m", member_epoch=3, state=MemberState.UNKNOWN, assigned_partitions=assignment(t=[0]))
    with pytest.raises(KafkaError) as raised:
        reconcile(member, 5, assignment(t=[0]), partition_epoch, assignment(t=[0]))
    assert raised.value.code == ErrorCode.FENCED_MEMBER_EPOCH
    restarted = reconcile(member, 5, assignment(t=[0]), partition_epoch, {})
    assert (restarted.state, restarted.member_epoch) == (MemberState.STABLE, 5)


def test_regex_subscriptions_use_re2_syntax_on_whole_names():
    assert compile_topic_regex("^topic.*").fullmatch("topic-1")
    assert not compile_topic_regex("topic").fullmatch("topic-1")
    assert compile_topic_regex(r"orders\z").fullmatch("orders")
    for unsupported in ("(?=a)b", r"(a)\1", "a++", "(?<!x)y", "(?P<n>a)(?P=n)"):
        with pytest.raises(KafkaError) as raised:
            compile_topic_regex(unsupported)
        assert raised.value.code == ErrorCode.INVALID_REGULAR_EXPRESSION
    with pytest.raises(KafkaError) as raised:
        compile_topic_regex("(unbalanced")
    assert raised.value.message == "SubscribedTopicRegex '(unbalanced' is invalid: missing ): (unbalanced."


def test_a_regex_that_backtracks_exponentially_elsewhere_matches_in_linear_time():
    # A backtracking engine takes 2**249 steps for this pattern on a 249-character topic name.
    regex = compile_topic_regex("(a|aa)*b")
    assert regex.fullmatch("a" * 249) is None
    assert compile_topic_regex("(a|aa)*").fullmatch("a" * 249)


# ============================================================================ assignors

TOPICS = {T: TopicMetadata(T, "t", 6), U: TopicMetadata(U, "u", 3)}


def spec(member_id: str, topics=(T,), owned=None, instance_id=None) -> MemberSpec:
    return MemberSpec(member_id, instance_id, None, frozenset(topics), owned or {})


def flatten(result) -> list[tuple[uuid.UUID, int, str]]:
    return sorted((t, p, m) for m, a in result.items() for t, ps in a.items() for p in ps)


def test_uniform_assignor_balances_and_keeps_what_it_can():
    assignor = UniformAssignor()
    first = assignor.assign({"a": spec("a")}, {T: TOPICS[T]})
    assert first == {"a": assignment(t=[0, 1, 2, 3, 4, 5])}
    second = assignor.assign({"a": spec("a", owned=first["a"]), "b": spec("b")}, {T: TOPICS[T]})
    assert len(second["a"][T]) == len(second["b"][T]) == 3
    assert second["a"][T] < first["a"][T], "the first member keeps half of what it had"
    third = assignor.assign(
        {"a": spec("a", owned=second["a"]), "b": spec("b", owned=second["b"]), "c": spec("c")}, {T: TOPICS[T]}
    )
    assert [len(third[m][T]) for m in "abc"] == [2, 2, 2]
    assert third["a"][T] < second["a"][T] and third["b"][T] < second["b"][T]


def test_uniform_assignor_with_different_subscriptions():
    assignor = UniformAssignor()
    result = assignor.assign({"a": spec("a", (T, U)), "b": spec("b", (T,)), "c": spec("c", (U,))}, TOPICS)
    owners = flatten(result)
    assert len(owners) == 9 and len({(t, p) for t, p, _ in owners}) == 9
    assert all(t in {"a": {T, U}, "b": {T}, "c": {U}}[m] for t, _, m in owners)
    counts = sorted(sum(len(ps) for ps in result[m].values()) for m in "abc")
    assert counts == [3, 3, 3]


def test_range_assignor_gives_contiguous_ranges_in_member_order():
    result = RangeAssignor().assign(
        {"m2": spec("m2", (T, U)), "m1": spec("m1", (T, U)), "s": spec("s", (T,), instance_id="i")}, TOPICS
    )
    # Static members first (by instance id), then member ids; co-partitioned topics line up.
    assert result["s"] == assignment(t=[0, 1])
    assert result["m1"] == assignment(t=[2, 3], u=[0, 1])
    assert result["m2"] == assignment(t=[4, 5], u=[2])


@settings(max_examples=60, deadline=None)
@given(
    subscriptions=st.lists(st.sampled_from([(T,), (U,), (T, U)]), min_size=1, max_size=6),
    keep=st.booleans(),
    partitions=st.tuples(st.integers(0, 12), st.integers(0, 12)),
)
def test_assignors_assign_every_partition_once_to_a_subscriber(subscriptions, keep, partitions):
    topics = {T: TopicMetadata(T, "t", partitions[0]), U: TopicMetadata(U, "u", partitions[1])}
    members = {f"m{i}": spec(f"m{i}", topics=sub) for i, sub in enumerate(subscriptions)}
    for assignor in (UniformAssignor(), RangeAssignor()):
        result = assignor.assign(members, topics)
        if keep:  # assigning again from the result changes nothing for the sticky assignor
            again = assignor.assign({m: spec(m, s.subscribed_topic_ids, result[m]) for m, s in members.items()}, topics)
            if isinstance(assignor, UniformAssignor):
                assert again == result
        owners = flatten(result)
        wanted = {(t, p) for t in topics for p in range(topics[t].num_partitions)
                  if any(t in s.subscribed_topic_ids for s in members.values())}
        assert [(t, p) for t, p, _ in owners] == sorted(wanted)
        assert all(t in members[m].subscribed_topic_ids for t, _, m in owners)
        if len(set(subscriptions)) == 1 and isinstance(assignor, UniformAssignor):
            counts = [sum(len(ps) for ps in result[m].values()) for m in members]
            assert max(counts) - min(counts) <= 1


# ============================================================================ records


def test_consumer_group_records_round_trip():
    records = [
        (ConsumerGroupMetadataKey("g"), ConsumerGroupMetadataValue(7)),
        (ConsumerGroupPartitionMetadataKey("g"),
         ConsumerGroupPartitionMetadataValue([SubscribedTopicMetadata(T, "t", 6)])),
        (ConsumerGroupMemberMetadataKey("g", "m"),
         ConsumerGroupMemberMetadataValue("i", None, "client", "/127.0.0.1", ["t", "u"], "^t.*", 30000, "uniform")),
        (ConsumerGroupTargetAssignmentMetadataKey("g"), ConsumerGroupTargetAssignmentMetadataValue(7)),
        (ConsumerGroupTargetAssignmentMemberKey("g", "m"),
         ConsumerGroupTargetAssignmentMemberValue(assignment(t=[1, 0]))),
        (ConsumerGroupCurrentMemberAssignmentKey("g", "m"),
         ConsumerGroupCurrentMemberAssignmentValue(7, 6, 1, assignment(t=[0]), assignment(u=[2]))),
    ]
    for key, value in records:
        encoded_key = encode_consumer_group_key(key)
        assert decode_key(encoded_key) == key
        assert decode_consumer_group_value(key, encode_consumer_group_value(value)) == value
    # Kafka's encodings: key version 3 and the group id; value version 0, the epoch, no tagged fields.
    assert encode_consumer_group_key(ConsumerGroupMetadataKey("g")) == b"\x00\x03\x00\x01g"
    assert encode_consumer_group_value(ConsumerGroupMetadataValue(5)) == b"\x00\x00\x00\x00\x00\x05\x00"
    assert encode_consumer_group_key(ConsumerGroupCurrentMemberAssignmentKey("g", "m")) == b"\x00\x08\x00\x01g\x00\x01m"
    assert encode_consumer_group_value(
        ConsumerGroupCurrentMemberAssignmentValue(2, 1, 0, assignment(t=[4]), {})
    ) == (b"\x00\x00" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x01" + b"\x00" + b"\x02" + T.bytes + b"\x02"
          + b"\x00\x00\x00\x04" + b"\x00" + b"\x01" + b"\x00")


# ============================================================================ over the wire

HEARTBEAT_VERSION = 1
Owned = ConsumerGroupHeartbeatRequest.TopicPartitions
# A small __consumer_offsets keeps each test's broker quick to start its coordinator.
FEW_OFFSETS_PARTITIONS = {"offsets.topic.num.partitions": "3"}


@pytest.fixture
async def client(broker_factory):
    running = await broker_factory(**FEW_OFFSETS_PARTITIONS)
    return await running.client()


async def create_topic(client, name: str, partitions: int) -> uuid.UUID:
    await client.request(
        CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions,
                                                                         replication_factor=1)], timeout_ms=5000),
        5,
    )
    metadata = await client.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)]), 12)
    return metadata.topics[0].topic_id


async def heartbeat(client, group_id: str, member_id: str, epoch: int, *, topics: list[str] | None = None,
                    owned: dict[uuid.UUID, list[int]] | None = None, version: int = HEARTBEAT_VERSION, **fields):
    if epoch == 0:
        fields.setdefault("rebalance_timeout_ms", 30_000)
        owned = owned if owned is not None else {}
    request = ConsumerGroupHeartbeatRequest(
        group_id=group_id, member_id=member_id, member_epoch=epoch, subscribed_topic_names=topics,
        topic_partitions=None if owned is None else [Owned(topic_id=t, partitions=ps) for t, ps in owned.items()],
        **fields,
    )
    return await client.request(request, version)


def partitions_of(response) -> dict[uuid.UUID, list[int]] | None:
    if response.assignment is None:
        return None
    return {tp.topic_id: sorted(tp.partitions) for tp in response.assignment.topic_partitions}


async def test_a_joining_member_gets_its_assignment_in_the_join_response(client):
    topic_id = await create_topic(client, "cg-join", 4)
    joined = await heartbeat(client, "cg-join", "member-1", 0, topics=["cg-join"])
    assert (joined.error_code, joined.member_id, joined.member_epoch) == (0, "member-1", 1)
    assert partitions_of(joined) == {topic_id: [0, 1, 2, 3]}
    assert joined.heartbeat_interval_ms > 0
    # A plain heartbeat: nothing changed, so no assignment in the response.
    again = await heartbeat(client, "cg-join", "member-1", 1)
    assert (again.error_code, again.member_epoch, again.assignment) == (0, 1, None)


async def test_v0_lets_the_coordinator_name_the_member(client):
    await create_topic(client, "cg-v0", 1)
    joined = await heartbeat(client, "cg-v0", "", 0, topics=["cg-v0"], version=0)
    assert joined.error_code == 0 and joined.member_id and joined.member_epoch == 1
    rejected = await heartbeat(client, "cg-v0", "", 0, topics=["cg-v0"], version=1)
    assert rejected.error_code == ErrorCode.INVALID_REQUEST


async def test_a_partition_moves_only_after_its_owner_revoked_it(client):
    topic_id = await create_topic(client, "cg-move", 4)
    first = await heartbeat(client, "cg-move", "a", 0, topics=["cg-move"])
    assert partitions_of(first) == {topic_id: [0, 1, 2, 3]}
    second = await heartbeat(client, "cg-move", "b", 0, topics=["cg-move"])
    assert (second.member_epoch, partitions_of(second)) == (2, {})  # everything is still held by "a"
    # "a" learns it must give up two partitions, and stays at its epoch until it does.
    revoke = await heartbeat(client, "cg-move", "a", 1, owned={topic_id: [0, 1, 2, 3]})
    assert revoke.member_epoch == 1
    kept = partitions_of(revoke)[topic_id]
    assert len(kept) == 2
    # "b" still gets nothing while "a" holds them.
    waiting = await heartbeat(client, "cg-move", "b", 2, owned={})
    assert waiting.member_epoch == 2 and partitions_of(waiting) in (None, {})
    done = await heartbeat(client, "cg-move", "a", 1, owned={topic_id: kept})
    assert (done.member_epoch, done.assignment) == (2, None)
    handed_over = await heartbeat(client, "cg-move", "b", 2, owned={})
    assert partitions_of(handed_over) == {topic_id: sorted({0, 1, 2, 3} - set(kept))}
    described = await client.request(ConsumerGroupDescribeRequest(group_ids=["cg-move"]), 0)
    group = described.groups[0]
    assert (group.group_state, group.group_epoch, group.assignment_epoch, group.assignor_name) == (
        "Stable", 2, 2, "uniform")
    assert {m.member_id: sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions)
            for m in group.members} == {"a": kept, "b": sorted({0, 1, 2, 3} - set(kept))}


async def test_a_member_that_lost_a_response_may_come_back_with_its_previous_epoch(client):
    topic_id = await create_topic(client, "cg-lost", 2)
    await heartbeat(client, "cg-lost", "a", 0, topics=["cg-lost"])
    # The join response (epoch 1) was lost: the member retries the join.
    retried = await heartbeat(client, "cg-lost", "a", 0, topics=["cg-lost"])
    assert (retried.error_code, retried.member_epoch, partitions_of(retried)) == (0, 1, {topic_id: [0, 1]})
    ahead = await heartbeat(client, "cg-lost", "a", 7)
    assert ahead.error_code == ErrorCode.FENCED_MEMBER_EPOCH


BAD_HEARTBEATS = [
    ("empty group id", dict(group_id="", member_id="m", member_epoch=0), ErrorCode.INVALID_REQUEST),
    ("join without rebalance timeout", dict(member_id="m", member_epoch=0, subscribed_topic_names=["t"],
                                            topic_partitions=[]), ErrorCode.INVALID_REQUEST),
    ("join with owned partitions", dict(member_id="m", member_epoch=0, rebalance_timeout_ms=1,
                                        subscribed_topic_names=["t"],
                                        topic_partitions=[Owned(topic_id=T, partitions=[0])]),
     ErrorCode.INVALID_REQUEST),
    ("join without subscription", dict(member_id="m", member_epoch=0, rebalance_timeout_ms=1, topic_partitions=[]),
     ErrorCode.INVALID_REQUEST),
    ("invalid epoch", dict(member_id="m", member_epoch=-3), ErrorCode.INVALID_REQUEST),
    ("static leave without instance id", dict(member_id="m", member_epoch=-2), ErrorCode.INVALID_REQUEST),
    ("empty instance id", dict(member_id="m", member_epoch=1, instance_id=""), ErrorCode.INVALID_REQUEST),
    ("unknown assignor", dict(member_id="m", member_epoch=0, rebalance_timeout_ms=1, subscribed_topic_names=["t"],
                              topic_partitions=[], server_assignor="sticky"), ErrorCode.UNSUPPORTED_ASSIGNOR),
    ("bad regex", dict(member_id="m", member_epoch=0, rebalance_timeout_ms=1, subscribed_topic_regex="(",
                       topic_partitions=[]), ErrorCode.INVALID_REGULAR_EXPRESSION),
    ("unknown group", dict(group_id="nobody", member_id="m", member_epoch=3), ErrorCode.GROUP_ID_NOT_FOUND),
    ("unknown member", dict(member_id="stranger", member_epoch=1), ErrorCode.UNKNOWN_MEMBER_ID),
    ("unknown member leaving", dict(member_id="stranger", member_epoch=-1), ErrorCode.UNKNOWN_MEMBER_ID),
    ("epoch from the future", dict(member_id="a", member_epoch=9), ErrorCode.FENCED_MEMBER_EPOCH),
]


@pytest.mark.parametrize("fields, error", [case[1:] for case in BAD_HEARTBEATS], ids=[c[0] for c in BAD_HEARTBEATS])
async def test_bad_heartbeats_get_kafkas_error_codes(client, fields, error):
    await create_topic(client, "cg-bad", 1)
    assert (await heartbeat(client, "cg-bad", "a", 0, topics=["cg-bad"])).error_code == 0
    request = ConsumerGroupHeartbeatRequest(**{"group_id": "cg-bad", **fields})
    response = await client.request(request, HEARTBEAT_VERSION)
    assert response.error_code == error, response.error_message
    # The group keeps working for its member.
    assert (await heartbeat(client, "cg-bad", "a", 1)).error_code == 0


async def test_leaving_static_members_and_the_group_size_limit(broker_factory):
    running = await broker_factory(**{"group.consumer.max.size": "2"}, **FEW_OFFSETS_PARTITIONS)
    client = await running.client()
    topic_id = await create_topic(client, "cg-static", 2)
    a = await heartbeat(client, "cg-static", "a", 0, topics=["cg-static"], instance_id="ia")
    await heartbeat(client, "cg-static", "b", 0, topics=["cg-static"])
    full = await heartbeat(client, "cg-static", "c", 0, topics=["cg-static"])
    assert full.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    # While "a" holds instance "ia", nobody else may take it.
    taken = await heartbeat(client, "cg-static", "a2", 0, topics=["cg-static"], instance_id="ia")
    assert taken.error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    a = await heartbeat(client, "cg-static", "a", a.member_epoch, owned={topic_id: [0, 1]}, instance_id="ia")
    a_partitions = partitions_of(a)
    # "a" leaves for a moment (-2): it keeps its partitions and its place.
    gone = await heartbeat(client, "cg-static", "a", -2, instance_id="ia")
    assert (gone.error_code, gone.member_epoch) == (0, -2)
    back = await heartbeat(client, "cg-static", "a2", 0, topics=["cg-static"], instance_id="ia")
    assert back.error_code == 0 and partitions_of(back) == a_partitions
    fenced = await heartbeat(client, "cg-static", "a", 1, instance_id="ia")
    assert fenced.error_code == ErrorCode.FENCED_INSTANCE_ID
    # A real leave frees the place.
    left = await heartbeat(client, "cg-static", "a2", -1, instance_id="ia")
    assert (left.error_code, left.member_epoch) == (0, -1)
    assert (await heartbeat(client, "cg-static", "c", 0, topics=["cg-static"])).error_code == 0


async def test_offset_commits_are_checked_against_the_member_epoch(client):
    await create_topic(client, "cg-commit", 1)
    joined = await heartbeat(client, "cg-commit", "a", 0, topics=["cg-commit"])

    async def commit_as(epoch: int, member_id: str = "a", version: int = 9) -> int:
        response = await client.request(
            OffsetCommitRequest(
                group_id="cg-commit", generation_id_or_member_epoch=epoch, member_id=member_id,
                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                    name="cg-commit",
                    partitions=[
                        OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=5)
                    ],
                )],
            ),
            version,
        )
        return response.topics[0].partitions[0].error_code

    assert await commit_as(joined.member_epoch) == ErrorCode.NONE
    assert await commit_as(joined.member_epoch + 1) == ErrorCode.STALE_MEMBER_EPOCH
    assert await commit_as(joined.member_epoch, "stranger") == ErrorCode.UNKNOWN_MEMBER_ID
    assert await commit_as(joined.member_epoch, version=8) == ErrorCode.UNSUPPORTED_VERSION
    assert await commit_as(-1, "") == ErrorCode.UNKNOWN_MEMBER_ID  # an admin commit: the group is not empty
    assert await fetch(client, "cg-commit") == (0, {("cg-commit", 0): (5, "")})


async def test_admin_apis_see_consumer_groups(client):
    await create_topic(client, "cg-admin", 2)
    await heartbeat(client, "cg-admin", "a", 0, topics=["cg-admin"])
    listed = await client.request(ListGroupsRequest(types_filter=["consumer"]), 5)
    assert [(g.group_id, g.protocol_type, g.group_state, g.group_type) for g in listed.groups] == [
        ("cg-admin", "consumer", "Stable", "consumer")]
    assert (await client.request(ListGroupsRequest(types_filter=["classic"]), 5)).groups == []
    described = await client.request(DescribeGroupsRequest(groups=["cg-admin"]), 6)
    assert described.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    unknown = await client.request(ConsumerGroupDescribeRequest(group_ids=["nobody", ""]), 1)
    assert [g.error_code for g in unknown.groups] == [ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.INVALID_GROUP_ID]
    # A classic JoinGroup of another protocol type than "consumer" cannot join a consumer group with members.
    joined = await join(client, "cg-admin", protocol_type="connect")
    assert joined.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    deleted = await client.request(DeleteGroupsRequest(groups_names=["cg-admin"]), 2)
    assert deleted.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
    await heartbeat(client, "cg-admin", "a", -1)
    deleted = await client.request(DeleteGroupsRequest(groups_names=["cg-admin"]), 2)
    assert deleted.results[0].error_code == ErrorCode.NONE
    assert (await client.request(ListGroupsRequest(), 5)).groups == []


async def test_empty_groups_change_protocol_and_keep_their_offsets(client):
    await create_topic(client, "cg-convert", 1)
    # Offsets committed outside group management make an empty classic group ...
    await commit(client, "cg-convert", {("cg-convert", 0): (3, "m")})
    joined = await heartbeat(client, "cg-convert", "a", 0, topics=["cg-convert"])
    assert joined.error_code == 0  # ... which becomes a consumer group
    assert await fetch(client, "cg-convert") == (0, {("cg-convert", 0): (3, "m")})
    await heartbeat(client, "cg-convert", "a", -1)
    # An empty consumer group becomes a classic group again on JoinGroup.
    classic = await join(client, "cg-convert")
    assert classic.error_code == 0
    listed = await client.request(ListGroupsRequest(), 5)
    assert [(g.group_id, g.group_type) for g in listed.groups] == [("cg-convert", "classic")]
    assert await fetch(client, "cg-convert") == (0, {("cg-convert", 0): (3, "m")})


async def test_regex_subscriptions_follow_the_topics(client):
    first = await create_topic(client, "rx-1", 1)
    await create_topic(client, "other", 1)
    joined = await heartbeat(client, "cg-rx", "a", 0, subscribed_topic_regex="rx-.*")
    assert partitions_of(joined) == {first: [0]}
    second = await create_topic(client, "rx-2", 2)
    grown = await heartbeat(client, "cg-rx", "a", joined.member_epoch, owned={first: [0]})
    assert grown.member_epoch == joined.member_epoch + 1
    assert partitions_of(grown) == {first: [0], second: [0, 1]}


async def test_silent_members_are_fenced(broker_factory):
    running = await broker_factory(**{"group.consumer.session.timeout.ms": "300"}, **FEW_OFFSETS_PARTITIONS)
    client = await running.client()
    topic_id = await create_topic(client, "cg-expire", 2)
    await heartbeat(client, "cg-expire", "a", 0, topics=["cg-expire"])
    # "b" joins; "a" is asked to revoke but never answers: its rebalance timeout fences it.
    b = await heartbeat(client, "cg-expire", "b", 0, topics=["cg-expire"], rebalance_timeout_ms=200)
    revoke = await heartbeat(client, "cg-expire", "a", 1, owned={topic_id: [0, 1]}, rebalance_timeout_ms=200)
    assert revoke.member_epoch == 1

    async def b_owns_everything() -> bool:
        response = await heartbeat(client, "cg-expire", "b", b.member_epoch, owned={})
        return partitions_of(response) == {topic_id: [0, 1]}

    await wait_for(b_owns_everything, "the revoking member to be fenced")
    assert (await heartbeat(client, "cg-expire", "a", 1)).error_code == ErrorCode.UNKNOWN_MEMBER_ID

    async def empty() -> bool:
        described = await client.request(ConsumerGroupDescribeRequest(group_ids=["cg-expire"]), 0)
        return described.groups[0].group_state == "Empty"

    await wait_for(empty, "the silent member's session to expire")


async def test_the_group_survives_a_restart(nursery, tmp_path):
    data_dir = tmp_path / "data"
    first = await start_broker(nursery, data_dir, FEW_OFFSETS_PARTITIONS)
    client = await first.client()
    topic_id = await create_topic(client, "cg-durable", 4)
    a = await heartbeat(client, "cg-durable", "a", 0, topics=["cg-durable"])
    await heartbeat(client, "cg-durable", "b", 0, topics=["cg-durable"])
    a = await heartbeat(client, "cg-durable", "a", 1, owned={topic_id: [0, 1, 2, 3]})
    kept = partitions_of(a)[topic_id]
    await heartbeat(client, "cg-durable", "a", 1, owned={topic_id: kept})
    await heartbeat(client, "cg-durable", "b", 2, owned={})
    await first.close()

    second = await start_broker(nursery, data_dir, FEW_OFFSETS_PARTITIONS)
    client = await second.client()
    await wait_for(lambda: _coordinator_ready(second), "the coordinator to load")
    described = (await client.request(ConsumerGroupDescribeRequest(group_ids=["cg-durable"]), 0)).groups[0]
    assert (described.group_state, described.group_epoch, described.assignment_epoch) == ("Stable", 2, 2)
    owned = {m.member_id: (m.member_epoch, sorted(p for tp in m.assignment.topic_partitions for p in tp.partitions))
             for m in described.members}
    assert owned == {"a": (2, kept), "b": (2, sorted({0, 1, 2, 3} - set(kept)))}
    # Both carry on at their epochs, with nothing to reconcile.
    for member_id, (epoch, partitions) in owned.items():
        response = await heartbeat(client, "cg-durable", member_id, epoch, owned={topic_id: partitions})
        assert (response.error_code, response.member_epoch, response.assignment) == (0, 2, None)
    await second.close()


async def _coordinator_ready(running) -> bool:
    return running.broker.group_coordinator().active


async def test_heartbeat_interval_is_short_while_the_group_settles(broker_factory):
    running = await broker_factory(**{"group.consumer.heartbeat.interval.ms": "5000"}, **FEW_OFFSETS_PARTITIONS)
    client = await running.client()
    await create_topic(client, "cg-interval", 2)
    joined = await heartbeat(client, "cg-interval", "a", 0, topics=["cg-interval"])
    assert joined.heartbeat_interval_ms < 5000  # the group epoch just moved: others may be joining
    group = running.broker.group_coordinator().groups["cg-interval"]
    group.epoch_changed_at = trio.current_time() - 10  # long settled
    steady = await heartbeat(client, "cg-interval", "a", joined.member_epoch)
    assert steady.heartbeat_interval_ms == 5000
