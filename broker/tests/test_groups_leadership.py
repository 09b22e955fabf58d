"""Group coordination follows the leadership of ``__consumer_offsets`` partitions.

An in-process single node leads every partition; these tests tell its coordinator that it resigned
from, or was elected to, one partition (``GroupCoordinator.on_partition_leadership``, what the replica
manager calls in a cluster) and check what clients see over the wire: NOT_COORDINATOR for the groups of
a partition not led here (others unaffected), parked requests answered, COORDINATOR_LOAD_IN_PROGRESS
while a partition loads, and groups and offsets read back from the log after a new election. Writes
that the partition's ISR has not replicated are answered only once the high watermark covers them.
"""
from __future__ import annotations

import logging

import trio

from trafka.broker.groups.coordinator import GroupCoordinator
from trafka.broker.partition import NO_LEADER
from trafka.broker.tests.test_groups import commit, create_topics, fetch, heartbeat, join, sync, wait_for
from trafka.broker.topics import OFFSETS_TOPIC
from trafka.wire.compression import Compression
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    FindCoordinatorRequest,
    LeaveGroupRequest,
    ListGroupsRequest,
    OffsetDeleteRequest,
)

FOLLOWER = 99  # a replica id no broker has: the partition's ISR waits for it


def groups_in_distinct_partitions(coordinator: GroupCoordinator, count: int, prefix: str = "g") -> list[str]:
    chosen: dict[int, str] = {}
    i = 0
    while len(chosen) < count:
        group_id = f"{prefix}{i}"
        chosen.setdefault(coordinator.partition_for(group_id), group_id)
        i += 1
    return list(chosen.values())


def group_in_partition(coordinator: GroupCoordinator, index: int, prefix: str) -> str:
    i = 0
    while coordinator.partition_for(f"{prefix}{i}") != index:
        i += 1
    return f"{prefix}{i}"


async def describe(client, group_id: str):
    response = await client.request(DescribeGroupsRequest(groups=[group_id]), 5)
    (described,) = response.groups
    return described


async def list_groups(client):
    response = await client.request(ListGroupsRequest(states_filter=[]), 4)
    return response.error_code, {g.group_id: g.group_state for g in response.groups}


async def stable_group(client, group_id: str, assignment: bytes = b"assigned"):
    joined = await join(client, group_id)
    synced = await sync(client, group_id, joined, {joined.member_id: assignment})
    assert synced.error_code == ErrorCode.NONE
    return joined


async def test_resignation_and_re_election_of_one_partition(broker):
    client = await broker.client()
    await create_topics(client, t=2)
    await client.request(FindCoordinatorRequest(key="any", key_type=0), 3)
    coordinator = broker.broker.group_coordinator()
    resigned_group, other = groups_in_distinct_partitions(coordinator, 2)
    index = coordinator.partition_for(resigned_group)

    # A stable group with a committed offset in the partition that moves, another group elsewhere.
    joined = await stable_group(client, resigned_group)
    assert await commit(client, resigned_group, {("t", 0): (42, "kept")}, generation_id=joined.generation_id,
                        member_id=joined.member_id) == {("t", 0): ErrorCode.NONE}
    assert await commit(client, other, {("t", 1): (7, "")}) == {("t", 1): ErrorCode.NONE}

    # A second member parks in JoinGroup: the rebalance waits for the first one to rejoin.
    parked: dict[str, object] = {}

    async def second_member():
        second = await broker.client()
        parked["response"] = await join(second, resigned_group)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(second_member)
        await wait_for(lambda: _preparing(coordinator, resigned_group), "the second member to park")
        coordinator.on_partition_leadership(index, False)
    assert parked["response"].error_code == ErrorCode.NOT_COORDINATOR

    # Every API answers NOT_COORDINATOR for the group of the resigned partition ...
    assert resigned_group not in coordinator.groups and not coordinator.offsets.has_offsets(resigned_group)
    assert await heartbeat(client, resigned_group, joined.member_id, joined.generation_id) == ErrorCode.NOT_COORDINATOR
    assert (await join(client, resigned_group)).error_code == ErrorCode.NOT_COORDINATOR
    assert (await sync(client, resigned_group, joined)).error_code == ErrorCode.NOT_COORDINATOR
    assert await commit(client, resigned_group, {("t", 0): (50, "")}) == {("t", 0): ErrorCode.NOT_COORDINATOR}
    assert await fetch(client, resigned_group, {"t": [0]}) == (ErrorCode.NOT_COORDINATOR, {})
    assert (await describe(client, resigned_group)).error_code == ErrorCode.NOT_COORDINATOR
    left = await client.request(LeaveGroupRequest(group_id=resigned_group, members=[
        LeaveGroupRequest.MemberIdentity(member_id=joined.member_id)]), 4)
    assert left.error_code == ErrorCode.NOT_COORDINATOR
    deleted = await client.request(DeleteGroupsRequest(groups_names=[resigned_group]), 2)
    assert deleted.results[0].error_code == ErrorCode.NOT_COORDINATOR
    offsets_deleted = await client.request(OffsetDeleteRequest(group_id=resigned_group, topics=[]), 0)
    assert offsets_deleted.error_code == ErrorCode.NOT_COORDINATOR
    described = await client.request(ConsumerGroupDescribeRequest(group_ids=[resigned_group]), 0)
    assert described.groups[0].error_code == ErrorCode.NOT_COORDINATOR
    beat = await client.request(ConsumerGroupHeartbeatRequest(
        group_id=resigned_group, member_id="m-1", member_epoch=0, rebalance_timeout_ms=5000,
        subscribed_topic_names=["t"], topic_partitions=[]), 1)
    assert beat.error_code == ErrorCode.NOT_COORDINATOR
    # ... and ListGroups leaves it out; the other group carries on.
    assert await list_groups(client) == (ErrorCode.NONE, {other: "Empty"})
    assert await fetch(client, other, {"t": [1]}) == (ErrorCode.NONE, {("t", 1): (7, "")})
    assert await commit(client, other, {("t", 1): (8, "")}) == {("t", 1): ErrorCode.NONE}

    # Re-elected: while the partition loads its groups get COORDINATOR_LOAD_IN_PROGRESS ...
    async with coordinator.runtime._load_turn:  # holds the load back
        coordinator.on_partition_leadership(index, True)
        assert await heartbeat(client, resigned_group, joined.member_id, 1) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert await fetch(client, resigned_group, {"t": [0]}) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, {})
        assert (await describe(client, resigned_group)).error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert await list_groups(client) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, {other: "Empty"})
        assert await fetch(client, other, {"t": [1]}) == (ErrorCode.NONE, {("t", 1): (8, "")})
        assert not coordinator.active
    # ... then the group and its offsets are back as the log has them: the member carries on.
    await wait_for(lambda: _loaded(coordinator), "the partition to load")
    assert await fetch(client, resigned_group, {"t": [0]}) == (ErrorCode.NONE, {("t", 0): (42, "kept")})
    assert await heartbeat(client, resigned_group, joined.member_id, joined.generation_id) == ErrorCode.NONE
    described = await describe(client, resigned_group)
    assert (described.error_code, described.group_state) == (ErrorCode.NONE, "Stable")
    assert [m.member_id for m in described.members] == [joined.member_id]
    synced = await sync(client, resigned_group, joined)
    assert (synced.error_code, bytes(synced.assignment)) == (ErrorCode.NONE, b"assigned")
    assert await list_groups(client) == (ErrorCode.NONE, {other: "Empty", resigned_group: "Stable"})


async def test_a_parked_sync_is_answered_not_coordinator(broker):
    client, second = await broker.client(), await broker.client()
    coordinator = await _coordinator(broker)
    group_id = "parked-sync"
    results: dict[str, object] = {}

    async def member(name, c):
        results[name] = await join(c, group_id)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(member, "a", client)
        nursery.start_soon(member, "b", second)
    follower = next(r for r in results.values() if not r.members)

    async def follower_sync():
        results["sync"] = await sync(second if follower is results["b"] else client, group_id, follower)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(follower_sync)
        await wait_for(lambda: _sync_parked(coordinator, group_id, follower.member_id), "the follower to park")
        coordinator.on_partition_leadership(coordinator.partition_for(group_id), False)
    assert results["sync"].error_code == ErrorCode.NOT_COORDINATOR
    assert not coordinator.timers.is_scheduled(("heartbeat", group_id, follower.member_id))


async def test_resignation_while_loading_cancels_the_load(broker):
    client = await broker.client()
    await create_topics(client, t=1)
    coordinator = await _coordinator(broker)
    group_id = "loading"
    index = coordinator.partition_for(group_id)
    assert await commit(client, group_id, {("t", 0): (3, "")}) == {("t", 0): ErrorCode.NONE}
    coordinator.on_partition_leadership(index, False)
    async with coordinator.runtime._load_turn:
        coordinator.on_partition_leadership(index, True)
        coordinator.on_partition_leadership(index, True)  # told twice: one load
        assert coordinator.group_error(group_id) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        coordinator.on_partition_leadership(index, False)
        assert coordinator.group_error(group_id) == ErrorCode.NOT_COORDINATOR
    await trio.sleep(0.05)
    assert coordinator.active and group_id not in coordinator.groups
    assert await fetch(client, group_id, {"t": [0]}) == (ErrorCode.NOT_COORDINATOR, {})
    coordinator.on_partition_leadership(index, True)
    await wait_for(lambda: _loaded(coordinator), "the partition to load")
    assert await fetch(client, group_id, {"t": [0]}) == (ErrorCode.NONE, {("t", 0): (3, "")})


async def test_a_new_coordinator_loads_the_partitions_led_here(tmp_path, nursery):
    from trafka.broker.tests.conftest import start_broker

    first = await start_broker(nursery, tmp_path / "data")
    client = await first.client()
    await create_topics(client, t=1)
    assert await commit(client, "restarted", {("t", 0): (11, "")}) == {("t", 0): ErrorCode.NONE}
    await first.close()
    second = await start_broker(nursery, tmp_path / "data")
    coordinator = second.broker.group_coordinator()
    client = await second.client()
    await wait_for(lambda: _loaded(coordinator), "the coordinator to load")
    assert all(coordinator.runtime.is_loaded(i) for i in range(second.broker.config.offsets_topic_num_partitions))
    assert await fetch(client, "restarted", {"t": [0]}) == (ErrorCode.NONE, {("t", 0): (11, "")})
    await second.close()


async def test_find_coordinator_names_the_leader_of_the_groups_partition(broker, client):
    response = await client.request(FindCoordinatorRequest(key_type=0, coordinator_keys=["led", "leaderless"]), 4)
    assert [(c.error_code, c.node_id, c.port) for c in response.coordinators] == [
        (ErrorCode.NONE, broker.broker.node_id, broker.port)] * 2
    coordinator = broker.broker.group_coordinator()
    partition = broker.broker.topics.get(OFFSETS_TOPIC).partitions[coordinator.partition_for("leaderless")]
    partition.leader_id = NO_LEADER
    try:
        response = await client.request(FindCoordinatorRequest(key_type=0, coordinator_keys=["leaderless"]), 4)
        assert response.coordinators[0].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert response.coordinators[0].node_id == -1
    finally:
        partition.leader_id = broker.broker.node_id


async def test_find_coordinator_when_the_offsets_topic_cannot_be_created(broker_factory, caplog):
    broker = await broker_factory(**{"offsets.topic.replication.factor": "3"})
    client = await broker.client()
    with caplog.at_level(logging.ERROR, logger="trafka.broker.groups.coordinator"):
        for _ in range(3):
            response = await client.request(FindCoordinatorRequest(key="g", key_type=0), 3)
            assert (response.error_code, response.node_id) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)
    errors = [r for r in caplog.records if OFFSETS_TOPIC in r.getMessage()]
    assert len(errors) == 1 and "INVALID_REPLICATION_FACTOR" in errors[0].getMessage()


# -- writes wait for replication --------------------------------------------------------------------


def _await_follower(running, group_id: str):
    """Make the group's partition wait for a follower that has not fetched: appends stay above the HW."""
    node = running.broker.node_id
    coordinator = running.broker.group_coordinator()
    partition = running.broker.topics.get(OFFSETS_TOPIC).partitions[coordinator.partition_for(group_id)]
    partition.set_state(node, partition.leader_epoch + 1, [node, FOLLOWER], [node, FOLLOWER])
    return partition


async def test_an_offset_commit_is_answered_once_replicated(broker_factory):
    broker = await broker_factory(**{"offsets.commit.timeout.ms": "300"})
    client = await broker.client()
    await create_topics(client, t=1)
    group_id = "replicated"
    assert await commit(client, group_id, {("t", 0): (1, "")}) == {("t", 0): ErrorCode.NONE}
    partition = _await_follower(broker, group_id)

    # Not replicated within offsets.commit.timeout.ms: REQUEST_TIMED_OUT, as Kafka maps it for commits.
    assert await commit(client, group_id, {("t", 0): (2, "")}) == {("t", 0): ErrorCode.REQUEST_TIMED_OUT}

    # Replicated while the commit waits: acknowledged then.
    answered: dict[str, object] = {}

    async def committing():
        answered["commit"] = await commit(client, group_id, {("t", 0): (3, "")})

    appended_before = partition.log_end_offset
    async with trio.open_nursery() as nursery:
        nursery.start_soon(committing)
        await wait_for(lambda: _appended(partition, appended_before), "the commit to be appended")
        await trio.sleep(0.05)
        assert "commit" not in answered
        partition.read_for_follower(FOLLOWER, partition.log_end_offset, 1024, min_one_batch=False)
    assert answered["commit"] == {("t", 0): ErrorCode.NONE}
    assert partition.high_watermark == partition.log_end_offset
    assert await fetch(client, group_id, {"t": [0]}) == (ErrorCode.NONE, {("t", 0): (3, "")})


async def test_a_group_write_not_replicated_in_time(broker_factory):
    broker = await broker_factory(**{"offsets.commit.timeout.ms": "200", "group.initial.rebalance.delay.ms": "0"})
    client = await broker.client()
    coordinator = await _coordinator(broker)
    group_id = "slow-isr"
    _await_follower(broker, group_id)
    joined = await join(client, group_id)
    assert joined.error_code == ErrorCode.NONE
    # The leader's assignment is written but not replicated: Kafka maps that to REBALANCE_IN_PROGRESS.
    synced = await sync(client, group_id, joined, {joined.member_id: b"x"})
    assert synced.error_code == ErrorCode.REBALANCE_IN_PROGRESS
    deleted = await client.request(DeleteGroupsRequest(groups_names=[group_id]), 2)
    assert deleted.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
    assert group_id in coordinator.runtime._unreplicated


async def test_a_waiting_commit_learns_the_coordinator_moved(broker_factory):
    broker = await broker_factory(**{"offsets.commit.timeout.ms": "5000"})
    client = await broker.client()
    await create_topics(client, t=1)
    group_id = "moving"
    assert await commit(client, group_id, {("t", 0): (1, "")}) == {("t", 0): ErrorCode.NONE}
    coordinator = broker.broker.group_coordinator()
    partition = _await_follower(broker, group_id)
    answered: dict[str, object] = {}

    async def committing():
        answered["commit"] = await commit(client, group_id, {("t", 0): (2, "")})

    with trio.fail_after(3):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(committing)
            await wait_for(lambda: _unreplicated(coordinator, group_id), "the commit to be appended")
            # Another broker leads now: the partition stops leading, then the coordinator resigns.
            partition.set_state(FOLLOWER, partition.leader_epoch + 1, [FOLLOWER], [broker.broker.node_id, FOLLOWER])
            coordinator.on_partition_leadership(coordinator.partition_for(group_id), False)
    assert answered["commit"] == {("t", 0): ErrorCode.NOT_COORDINATOR}


async def _preparing(coordinator, group_id: str) -> bool:
    group = coordinator.groups.get(group_id)
    return group is not None and str(group.state) == "PreparingRebalance"


async def _sync_parked(coordinator, group_id: str, member_id: str) -> bool:
    group = coordinator.groups.get(group_id)
    return group is not None and group.members[member_id].sync_reply is not None


async def _loaded(coordinator) -> bool:
    return coordinator.active


async def _appended(partition, before: int) -> bool:
    return partition.log_end_offset > before


async def _unreplicated(coordinator, group_id: str) -> bool:
    return group_id in coordinator.runtime._unreplicated


async def test_the_offsets_topic_takes_the_offsets_topic_settings(broker_factory):
    # offsets.topic.segment.bytes at its creation, offsets.topic.compression.codec on every write, and a
    # load that reads offsets.load.buffer.size bytes at a time still replays everything.
    broker = await broker_factory(**{"offsets.topic.segment.bytes": "1048576", "offsets.topic.compression.codec": "3",
                                     "offsets.topic.num.partitions": "1", "offsets.load.buffer.size": "100"})
    client = await broker.client()
    await create_topics(client, t=1)
    for offset in range(5):
        assert await commit(client, "g", {("t", 0): (offset, "")}) == {("t", 0): ErrorCode.NONE}

    topic = broker.broker.topics.get(OFFSETS_TOPIC)
    assert topic.log_config.segment_bytes == 1048576
    partition = topic.partitions[0]
    batches = list(partition.log.batches_from(0))
    assert batches and all(batch.compression == Compression.LZ4 for batch in batches)
    coordinator = broker.broker.group_coordinator()
    coordinator.on_partition_leadership(0, False)
    coordinator.on_partition_leadership(0, True)

    async def loaded() -> bool:
        return coordinator.group_error("g") == ErrorCode.NONE

    await wait_for(loaded, "the partition to load")
    assert await fetch(client, "g", {"t": [0]}) == (ErrorCode.NONE, {("t", 0): (4, "")})


async def _coordinator(broker):
    """The group coordinator of a running broker, with ``__consumer_offsets`` in place."""
    coordinator = broker.broker.group_coordinator()
    await coordinator.ensure_offsets_topic()
    return coordinator
