"""Consumer groups over real TCP with real wire requests: the in-process broker from conftest.py.

The group protocol is driven by hand here (JoinGroup, SyncGroup, Heartbeat ... as a client library
would send them) so each rule can be checked on its own; compat_tests/ runs the real clients.
"""
from __future__ import annotations

import struct

import pytest
import trio

from trafka.broker.coordinator_runtime import java_string_hash, partition_for
from trafka.broker.groups.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)
from trafka.broker.tests.conftest import start_broker
from trafka.broker.topics import OFFSETS_TOPIC
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import (
    CreateTopicsRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

JOIN_VERSION = 9
SUBSCRIPTION = struct.pack(">hi", 0, 1) + struct.pack(">h", 5) + b"topic" + struct.pack(">i", -1)


def protocols(*names: str, metadata: bytes = SUBSCRIPTION) -> list[JoinGroupRequest.JoinGroupRequestProtocol]:
    return [JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=metadata) for n in names or ("range",)]


def join_request(group_id: str, member_id: str = "", *, instance_id: str | None = None, session_timeout_ms: int = 10_000,
                 protocol_type: str = "consumer", names: tuple[str, ...] = ("range",), metadata: bytes = SUBSCRIPTION):
    return JoinGroupRequest(
        group_id=group_id, session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=10_000, member_id=member_id,
        group_instance_id=instance_id, protocol_type=protocol_type, protocols=protocols(*names, metadata=metadata),
    )


async def join(client, group_id: str, **kwargs):
    """JoinGroup with the MEMBER_ID_REQUIRED round trip a v4+ client makes."""
    response = await client.request(join_request(group_id, **kwargs), JOIN_VERSION)
    if response.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        kwargs.pop("member_id", None)
        response = await client.request(join_request(group_id, response.member_id, **kwargs), JOIN_VERSION)
    return response


async def sync(client, group_id: str, joined, assignments: dict[str, bytes] | None = None, version: int = 5,
               protocol_name: str | None = None):
    return await client.request(
        SyncGroupRequest(
            group_id=group_id, generation_id=joined.generation_id, member_id=joined.member_id,
            protocol_type="consumer", protocol_name=protocol_name or joined.protocol_name,
            assignments=[SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                         for m, a in (assignments or {}).items()],
        ),
        version,
    )


async def heartbeat(client, group_id: str, member_id: str, generation_id: int, instance_id: str | None = None) -> int:
    response = await client.request(
        HeartbeatRequest(group_id=group_id, generation_id=generation_id, member_id=member_id,
                         group_instance_id=instance_id),
        4,
    )
    return response.error_code


async def commit(client, group_id: str, offsets: dict[tuple[str, int], tuple[int, str]], *, generation_id: int = -1,
                 member_id: str = "", version: int = 9):
    topics: dict[str, list] = {}
    for (topic, partition), (offset, metadata) in offsets.items():
        topics.setdefault(topic, []).append(
            OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata=metadata
            )
        )
    response = await client.request(
        OffsetCommitRequest(
            group_id=group_id, generation_id_or_member_epoch=generation_id, member_id=member_id,
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()],
        ),
        version,
    )
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


async def fetch(client, group_id: str, topics: dict[str, list[int]] | None = None):
    request_topics = None if topics is None else [
        OffsetFetchRequest.OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in topics.items()
    ]
    response = await client.request(
        OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group_id, topics=request_topics)]),
        8,
    )
    (group,) = response.groups
    return group.error_code, {
        (t.name, p.partition_index): (p.committed_offset, p.metadata) for t in group.topics for p in t.partitions
    }


async def wait_for(condition, what: str, timeout: float = 10.0):
    with trio.fail_after(timeout):
        while not (result := await condition()):
            await trio.sleep(0.02)
    return result


# ------------------------------------------------------------------------------------------------


async def test_find_coordinator_names_this_broker_in_every_version(broker, client):
    for version in range(0, 4):
        response = await client.request(FindCoordinatorRequest(key="g", key_type=0), version)
        assert (response.error_code, response.node_id, response.host, response.port) == (
            0, broker.broker.node_id, broker.host, broker.port)
    response = await client.request(FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]), 4)
    assert [(c.key, c.error_code, c.port) for c in response.coordinators] == [("a", 0, broker.port), ("b", 0, broker.port)]
    # A transactional id's coordinator too (broker.txn): this broker, which leads __transaction_state.
    response = await client.request(FindCoordinatorRequest(key_type=1, coordinator_keys=["txn", ""]), 6)
    assert [(c.key, c.error_code, c.node_id, c.port) for c in response.coordinators] == [
        ("txn", 0, broker.broker.node_id, broker.port), ("", ErrorCode.INVALID_REQUEST, -1, -1)]


async def test_the_coordinator_loads_with_the_first_group_request(broker, client):
    await client.request(MetadataRequest(topics=None), 12)
    assert broker.broker._groups is None  # start-up and plain clients do without the group code
    first = await client.request(join_request("g-first"), JOIN_VERSION)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED  # served at once, not COORDINATOR_NOT_AVAILABLE
    assert broker.broker._groups is not None


async def test_offsets_topic_is_internal_and_compacted(broker, client):
    await client.request(FindCoordinatorRequest(key="g", key_type=0), 3)
    topic = broker.broker.topics.get(OFFSETS_TOPIC)
    assert len(topic.partitions) == broker.broker.config.offsets_topic_num_partitions
    assert topic.configs["cleanup.policy"] == "compact"
    metadata = await client.request(MetadataRequest(topics=None), 12)
    (internal,) = [t for t in metadata.topics if t.name == OFFSETS_TOPIC]
    assert internal.is_internal


async def test_member_id_required_then_one_member_group(client):
    first = await client.request(join_request("g1"), JOIN_VERSION)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.member_id
    joined = await client.request(join_request("g1", first.member_id), JOIN_VERSION)
    assert (joined.error_code, joined.generation_id, joined.leader, joined.protocol_name) == (
        0, 1, first.member_id, "range")
    assert [(m.member_id, bytes(m.metadata)) for m in joined.members] == [(first.member_id, SUBSCRIPTION)]
    synced = await sync(client, "g1", joined, {joined.member_id: b"assignment"})
    assert (synced.error_code, bytes(synced.assignment), synced.protocol_name) == (0, b"assignment", "range")
    assert await heartbeat(client, "g1", joined.member_id, 1) == ErrorCode.NONE


async def test_old_join_versions_get_a_member_id_at_once(client):
    for version in (0, 3):
        response = await client.request(join_request(f"old{version}"), version)
        assert response.error_code == 0 and response.member_id and response.generation_id == 1


async def test_members_joining_together_form_one_generation(broker):
    clients = [await broker.client() for _ in range(3)]
    results = {}

    async def member(i):
        results[i] = await join(clients[i], "together")

    async with trio.open_nursery() as nursery:
        for i in range(3):
            nursery.start_soon(member, i)
    assert {r.generation_id for r in results.values()} == {1}
    (leader,) = [r for r in results.values() if r.members]
    assert {m.member_id for m in leader.members} == {r.member_id for r in results.values()}
    assignments = {r.member_id: r.member_id.encode() for r in results.values()}

    synced = {}

    async def sync_member(i):
        r = results[i]
        synced[i] = await sync(clients[i], "together", r, assignments if r.members else None)

    async with trio.open_nursery() as nursery:
        for i in range(3):
            nursery.start_soon(sync_member, i)
    for i, response in synced.items():
        assert response.error_code == 0
        assert bytes(response.assignment) == results[i].member_id.encode()


async def test_a_new_group_waits_for_members_arriving_one_after_another(broker_factory):
    """Each arrival restarts the quiet window, so members that trickle in still share generation 1."""
    broker = await broker_factory(**{"group.initial.rebalance.delay.ms": "1000"})
    clients = [await broker.client() for _ in range(3)]
    results = {}

    async def member(i):
        # 600 ms apart: each well inside the window the previous one opened (400 ms to spare on a busy
        # machine), and the last one after the first window would have closed.
        await trio.sleep(0.6 * i)
        results[i] = await join(clients[i], "trickle")

    async with trio.open_nursery() as nursery:
        for i in range(3):
            nursery.start_soon(member, i)
    assert [r.generation_id for r in results.values()] == [1, 1, 1]
    (leader,) = [r for r in results.values() if r.members]
    assert len(leader.members) == 3


async def test_without_a_delay_the_first_member_forms_a_generation_alone(broker_factory):
    broker = await broker_factory(**{"group.initial.rebalance.delay.ms": "0"})
    client = await broker.client()
    with trio.fail_after(5):
        joined = await join(client, "alone")
    assert joined.generation_id == 1 and [m.member_id for m in joined.members] == [joined.member_id]


async def test_join_triggers_rebalance_and_existing_member_rejoins(broker):
    a, b = await broker.client(), await broker.client()
    first = await join(a, "rb")
    await sync(a, "rb", first, {first.member_id: b"x"})
    second_join = trio.Event()
    second = {}

    async def join_b():
        second["response"] = await join(b, "rb")
        second_join.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(join_b)
        await wait_for(lambda: _rebalancing(a, first), "the rebalance")
        rejoined = await join(a, "rb", member_id=first.member_id)
        await second_join.wait()
    assert rejoined.generation_id == second["response"].generation_id == 2
    assert rejoined.leader == first.member_id and len(rejoined.members) == 2


async def _rebalancing(client, joined) -> bool:
    return await heartbeat(client, "rb", joined.member_id, joined.generation_id) == ErrorCode.REBALANCE_IN_PROGRESS


async def test_error_codes(broker, client):
    assert (await client.request(join_request(""), JOIN_VERSION)).error_code == ErrorCode.INVALID_GROUP_ID
    too_short = join_request("g", session_timeout_ms=10)
    assert (await client.request(too_short, JOIN_VERSION)).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    joined = await join(client, "errs")
    await sync(client, "errs", joined, {joined.member_id: b""})
    assert await heartbeat(client, "errs", "nobody", joined.generation_id) == ErrorCode.UNKNOWN_MEMBER_ID
    assert await heartbeat(client, "errs", joined.member_id, joined.generation_id + 1) == ErrorCode.ILLEGAL_GENERATION
    assert await heartbeat(client, "no-such-group", "m", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert await heartbeat(client, "", "m", 1) == ErrorCode.INVALID_GROUP_ID
    other = await broker.client()
    wrong_type = await other.request(join_request("errs", protocol_type="connect"), JOIN_VERSION)
    assert wrong_type.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    wrong_name = await sync(client, "errs", joined, protocol_name="roundrobin")
    assert wrong_name.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    stale = await client.request(
        SyncGroupRequest(group_id="errs", generation_id=7, member_id=joined.member_id, assignments=[]), 5)
    assert stale.error_code == ErrorCode.ILLEGAL_GENERATION
    unknown_member_join = await client.request(join_request("errs", "ghost"), JOIN_VERSION)
    assert unknown_member_join.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    # ... and the group still works for its member.
    assert await heartbeat(client, "errs", joined.member_id, joined.generation_id) == ErrorCode.NONE
    # a group id too long for the offsets topic's records
    assert (await client.request(join_request("g" * 40_000), JOIN_VERSION)).error_code == ErrorCode.INVALID_GROUP_ID


async def test_session_expiry_removes_the_member_when_its_session_timeout_runs_out(broker_factory):
    running = await broker_factory(**{"group.min.session.timeout.ms": "50"})
    client = await running.client()
    joined = await join(client, "expiry", session_timeout_ms=1000)
    await sync(client, "expiry", joined, {joined.member_id: b""})
    assert await heartbeat(client, "expiry", joined.member_id, joined.generation_id) == 0
    silent_since = trio.current_time()

    async def members() -> int:  # DescribeGroups looks without heartbeating
        described = await client.request(DescribeGroupsRequest(groups=["expiry"]), 5)
        return len(described.groups[0].members)

    await trio.sleep(0.5)
    assert await members() == 1  # half the session timeout: still a member
    with trio.fail_after(5):
        while await members():
            await trio.sleep(0.02)
    # Gone once the 1 s session timeout ran out, not before, and soon after.
    assert 1.0 <= trio.current_time() - silent_since < 2.0
    assert await heartbeat(client, "expiry", joined.member_id, joined.generation_id) == ErrorCode.UNKNOWN_MEMBER_ID
    described = await client.request(DescribeGroupsRequest(groups=["expiry"]), 5)
    assert described.groups[0].group_state == "Empty"


async def test_static_member_restart_keeps_its_place_and_fences_the_old_one(client):
    joined = await join(client, "static", instance_id="i-1")
    await sync(client, "static", joined, {joined.member_id: b"mine"})
    restarted = await client.request(join_request("static", instance_id="i-1"), JOIN_VERSION)
    assert restarted.error_code == 0 and restarted.member_id != joined.member_id
    assert restarted.generation_id == joined.generation_id  # no rebalance
    assert restarted.skip_assignment  # the leader keeps the assignment it made
    synced = await client.request(
        SyncGroupRequest(group_id="static", generation_id=restarted.generation_id, member_id=restarted.member_id,
                         group_instance_id="i-1", assignments=[]), 5)
    assert (synced.error_code, bytes(synced.assignment)) == (0, b"mine")
    assert await heartbeat(client, "static", joined.member_id, joined.generation_id, "i-1") == ErrorCode.FENCED_INSTANCE_ID
    assert await heartbeat(client, "static", restarted.member_id, restarted.generation_id, "i-1") == ErrorCode.NONE


async def create_topics(client, **partitions: int) -> None:
    """Topics to commit offsets for (commits to topics that do not exist are refused)."""
    topics = [CreateTopicsRequest.CreatableTopic(name=name, num_partitions=count, replication_factor=1)
              for name, count in partitions.items()]
    response = await client.request(CreateTopicsRequest(topics=topics, timeout_ms=5000), 7)
    assert {t.error_code for t in response.topics} == {ErrorCode.NONE}, response


async def test_offsets_commit_fetch_and_generation_checks(client):
    await create_topics(client, t=4)
    assert await commit(client, "simple", {("t", 0): (5, "meta"), ("t", 1): (7, "")}) == {("t", 0): 0, ("t", 1): 0}
    assert await fetch(client, "simple", {"t": [0, 1, 2]}) == (0, {("t", 0): (5, "meta"), ("t", 1): (7, ""), ("t", 2): (-1, "")})
    assert await fetch(client, "simple") == (0, {("t", 0): (5, "meta"), ("t", 1): (7, "")})
    assert await fetch(client, "never") == (0, {})

    joined = await join(client, "members")
    await sync(client, "members", joined, {joined.member_id: b""})
    ok = await commit(client, "members", {("t", 0): (1, "")}, generation_id=joined.generation_id, member_id=joined.member_id)
    assert ok == {("t", 0): 0}
    stale = await commit(client, "members", {("t", 0): (2, "")}, generation_id=joined.generation_id - 1,
                         member_id=joined.member_id)
    assert stale == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    unknown = await commit(client, "members", {("t", 0): (2, "")}, generation_id=joined.generation_id, member_id="x")
    assert unknown == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    outsider = await commit(client, "members", {("t", 0): (2, "")})
    assert outsider == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}  # generation -1 only for empty groups
    assert await commit(client, "gone", {("t", 0): (2, "")}, generation_id=3, member_id="m") == {
        ("t", 0): ErrorCode.GROUP_ID_NOT_FOUND}
    assert await commit(client, "gone", {("t", 0): (2, "")}, generation_id=3, member_id="m", version=8) == {
        ("t", 0): ErrorCode.ILLEGAL_GENERATION}
    too_large = await commit(client, "simple", {("t", 0): (9, "x" * 5000)})
    assert too_large == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    assert await fetch(client, "members", {"t": [0]}) == (0, {("t", 0): (1, "")})


async def test_leave_list_describe_delete(broker, client):
    joined = await join(client, "admin")
    await sync(client, "admin", joined, {joined.member_id: b"a"})
    await commit(client, "admin", {("t", 0): (3, "m")}, generation_id=1, member_id=joined.member_id)
    listed = await client.request(ListGroupsRequest(states_filter=["stable"]), 5)
    assert [(g.group_id, g.group_state, g.group_type, g.protocol_type) for g in listed.groups] == [
        ("admin", "Stable", "classic", "consumer")]
    described = (await client.request(DescribeGroupsRequest(groups=["admin", "missing"]), 6)).groups
    assert (described[0].group_state, described[0].protocol_data, bytes(described[0].members[0].member_assignment)) == (
        "Stable", "range", b"a")
    assert (described[1].group_state, described[1].error_code) == ("Dead", ErrorCode.GROUP_ID_NOT_FOUND)
    deleted = await client.request(DeleteGroupsRequest(groups_names=["admin", "missing"]), 2)
    assert [(r.group_id, r.error_code) for r in deleted.results] == [
        ("admin", ErrorCode.NON_EMPTY_GROUP), ("missing", ErrorCode.GROUP_ID_NOT_FOUND)]

    left = await client.request(
        LeaveGroupRequest(group_id="admin", members=[LeaveGroupRequest.MemberIdentity(member_id=joined.member_id),
                                                     LeaveGroupRequest.MemberIdentity(member_id="ghost")]), 5)
    assert [(m.member_id, m.error_code) for m in left.members] == [
        (joined.member_id, 0), ("ghost", ErrorCode.UNKNOWN_MEMBER_ID)]
    described = (await client.request(DescribeGroupsRequest(groups=["admin"]), 5)).groups
    assert described[0].group_state == "Empty"
    deleted = await client.request(DeleteGroupsRequest(groups_names=["admin"]), 2)
    assert deleted.results[0].error_code == 0
    assert await fetch(client, "admin") == (0, {})
    assert [g.group_id for g in (await client.request(ListGroupsRequest(), 3)).groups] == []


async def test_commits_to_unknown_topics_and_partitions_are_refused_alone(client):
    await create_topics(client, t=2)

    results = await commit(client, "partly", {("t", 1): (5, ""), ("t", 2): (6, ""), ("nowhere", 0): (7, "")})

    assert results == {("t", 1): ErrorCode.NONE, ("t", 2): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       ("nowhere", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert await fetch(client, "partly") == (0, {("t", 1): (5, "")})
    # With nothing left to commit, the group is not asked: no group is created, no group error given.
    assert await commit(client, "never", {("nowhere", 0): (1, "")}, generation_id=3, member_id="m") == {
        ("nowhere", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    described = await client.request(DescribeGroupsRequest(groups=["never"]), 5)
    assert described.groups[0].group_state == "Dead"


async def test_offset_delete(client):
    await create_topics(client, t=1, u=1)
    await commit(client, "od", {("t", 0): (1, ""), ("u", 0): (2, "")})
    response = await client.request(
        OffsetDeleteRequest(group_id="od", topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
            name="t", partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
    assert response.error_code == 0 and response.topics[0].partitions[0].error_code == 0
    assert await fetch(client, "od") == (0, {("u", 0): (2, "")})
    missing = await client.request(OffsetDeleteRequest(group_id="nope", topics=[]), 0)
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND


async def test_offsets_and_groups_survive_a_restart(nursery, tmp_path):
    data_dir = tmp_path / "data"
    first = await start_broker(nursery, data_dir)
    client = await first.client()
    await create_topics(client, t=4)
    joined = await join(client, "durable")
    await sync(client, "durable", joined, {joined.member_id: b"assigned"})
    await commit(client, "durable", {("t", 3): (42, "checkpoint-7")}, generation_id=1, member_id=joined.member_id)
    await commit(client, "simple", {("t", 0): (9, "")})
    await first.close()

    second = await start_broker(nursery, data_dir)
    client = await second.client()
    await wait_for(lambda: _coordinator_ready(second), "the coordinator to load")
    assert await fetch(client, "durable", {"t": [3]}) == (0, {("t", 3): (42, "checkpoint-7")})
    assert await fetch(client, "simple") == (0, {("t", 0): (9, "")})
    # The member's generation is still valid: it carries on without rejoining.
    assert await heartbeat(client, "durable", joined.member_id, 1) == ErrorCode.NONE
    synced = await sync(client, "durable", joined)
    assert bytes(synced.assignment) == b"assigned"
    await second.close()


async def _coordinator_ready(running) -> bool:
    return running.broker.group_coordinator().active


def test_group_partition_follows_java_string_hash_code():
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(Integer.MIN_VALUE) is 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert java_string_hash("héllo😀") == _java_hash_reference("héllo😀")


def _java_hash_reference(text: str) -> int:
    units = struct.unpack(f">{len(text.encode('utf-16-be')) // 2}H", text.encode("utf-16-be"))
    h = 0
    for unit in units:
        h = (h * 31 + unit) % 2**32
    return h - 2**32 if h >= 2**31 else h


@pytest.mark.parametrize("expire", [-1, 1234])
def test_offset_commit_records_round_trip(expire):
    key = OffsetCommitKey("g", "topic", 3)
    assert decode_key(encode_key(key)) == key
    value = OffsetCommitValue(10, 4 if expire < 0 else -1, "meta", 99, expire)
    assert decode_offset_commit_value(encode_offset_commit_value(value)) == value


def test_group_metadata_records_round_trip():
    key = GroupMetadataKey("g")
    assert decode_key(encode_key(key)) == key
    value = GroupMetadataValue("consumer", 3, "range", "m1", 77, [
        MemberMetadata("m1", "i1", "client", "/127.0.0.1", 300, 45, b"sub", b"assign"),
        MemberMetadata("m2", None, "client", "/127.0.0.1", 300, 45, b"", b""),
    ])
    assert decode_group_metadata_value(encode_group_metadata_value(value)) == value
    # Kafka's own encoding of an OffsetCommitKey (version 1): int16 version, group, topic, int32 partition.
    assert encode_key(OffsetCommitKey("g", "t", 1)) == b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x01"
