"""Transactional offset commits (TxnOffsetCommit; KIP-98, KIP-447) against the in-process broker.

TxnOffsetCommit requests are written by hand and sent over TCP; the end of a transaction is what the
WriteTxnMarkers code does on ``__consumer_offsets``: a COMMIT or ABORT control batch appended to the
group's partition, then ``GroupCoordinator.complete_transaction``. compat_tests/test_txn_offsets.py
does the same against a broker process with a real WriteTxnMarkers request and real clients.
"""
from __future__ import annotations

import dataclasses

import pytest
import trio

from trafka.broker.groups.offsets import OffsetAndMetadata, OffsetStore
from trafka.broker.groups.records import OffsetCommitKey, decode_key, decode_offset_commit_value
from trafka.broker.tests.conftest import start_broker
from trafka.broker.tests.test_consumer_groups import heartbeat as consumer_heartbeat
from trafka.broker.tests.test_groups import commit, create_topics, join, sync, wait_for
from trafka.broker.topics import OFFSETS_TOPIC
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import (
    DeleteGroupsRequest,
    DescribeGroupsRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    TxnOffsetCommitRequest,
)
from trafka.wire.records import iter_batches

TOPIC = "txn-t"
PID, EPOCH = 4000, 0
FEW_PARTITIONS = {"offsets.topic.num.partitions": "3"}


async def txn_commit(client, group_id: str, offsets: dict[tuple[str, int], int | tuple[int, str]], *,
                     producer_id: int = PID, producer_epoch: int = EPOCH, version: int = 3, generation_id: int = -1,
                     member_id: str = "", instance_id: str | None = None) -> dict[tuple[str, int], int]:
    topics: dict[str, list] = {}
    for (topic, partition), value in offsets.items():
        offset, metadata = value if isinstance(value, tuple) else (value, "")
        topics.setdefault(topic, []).append(TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_leader_epoch=7, committed_metadata=metadata))
    response = await client.request(TxnOffsetCommitRequest(
        transactional_id="", group_id=group_id, producer_id=producer_id, producer_epoch=producer_epoch,
        generation_id=generation_id, member_id=member_id, group_instance_id=instance_id,
        topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()],
    ), version)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


async def fetch(client, group_id: str, topics: dict[str, list[int]] | None = None, *, stable: bool = False,
                version: int = 8) -> tuple[int, dict[tuple[str, int], tuple[int, int]]]:
    """(group error, {(topic, partition): (offset, error)}) of an OffsetFetch."""
    if version >= 8:
        request_topics = None if topics is None else [
            OffsetFetchRequest.OffsetFetchRequestTopics(name=t, partition_indexes=ps) for t, ps in topics.items()]
        response = await client.request(OffsetFetchRequest(
            groups=[OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group_id, topics=request_topics)],
            require_stable=stable), version)
        (group,) = response.groups
        error, response_topics = group.error_code, group.topics
    else:
        request_topics = None if topics is None else [
            OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in topics.items()]
        response = await client.request(OffsetFetchRequest(group_id=group_id, topics=request_topics,
                                                           require_stable=stable), version)
        error, response_topics = response.error_code, response.topics
    return error, {(t.name, p.partition_index): (p.committed_offset, p.error_code)
                   for t in response_topics for p in t.partitions}


async def committed(client, group_id: str, partition: int = 0, *, stable: bool = False) -> tuple[int, int]:
    error, offsets = await fetch(client, group_id, {TOPIC: [partition]}, stable=stable)
    assert error == ErrorCode.NONE
    return offsets[(TOPIC, partition)]


def offsets_partition(running, group_id: str):
    coordinator = running.broker.group_coordinator()
    return running.broker.topics.get(OFFSETS_TOPIC).partitions[coordinator.partition_for(group_id)]


def end_transaction(running, group_id: str, committed: bool, *, producer_id: int = PID,
                    producer_epoch: int = EPOCH) -> None:
    """What WriteTxnMarkers does on the group's partition of __consumer_offsets."""
    partition = offsets_partition(running, group_id)
    partition.append_marker(producer_id, producer_epoch, 0, committed)
    running.broker.group_coordinator().complete_transaction(partition.index, producer_id, committed)


@pytest.fixture
async def running(broker_factory):
    running = await broker_factory(**FEW_PARTITIONS)
    client = await running.client()
    await create_topics(client, **{TOPIC: 4})
    return running


@pytest.fixture
async def client(running):
    return await running.client()


# ---------------------------------------------------------------------------------------------- commit/abort

async def test_a_commit_marker_makes_the_pending_offsets_committed(running, client):
    assert await commit(client, "g", {(TOPIC, 0): (5, "")}) == {(TOPIC, 0): 0}
    assert await txn_commit(client, "g", {(TOPIC, 0): (10, "in-txn"), (TOPIC, 1): 11}) == {(TOPIC, 0): 0, (TOPIC, 1): 0}
    # Pending: the committed offsets as before, or UNSTABLE_OFFSET_COMMIT when stable ones are required.
    assert await fetch(client, "g", {TOPIC: [0, 1, 2]}) == (0, {
        (TOPIC, 0): (5, 0), (TOPIC, 1): (-1, 0), (TOPIC, 2): (-1, 0)})
    assert await fetch(client, "g", {TOPIC: [0, 1, 2]}, stable=True) == (0, {
        (TOPIC, 0): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT), (TOPIC, 1): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT),
        (TOPIC, 2): (-1, 0)})
    # Every committed partition: only those committed are listed, the pending ones unstable.
    assert await fetch(client, "g", None, stable=True) == (0, {(TOPIC, 0): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)})
    assert await fetch(client, "g", None) == (0, {(TOPIC, 0): (5, 0)})

    end_transaction(running, "g", committed=True)
    for stable in (False, True):
        assert await fetch(client, "g", {TOPIC: [0, 1]}, stable=stable) == (
            0, {(TOPIC, 0): (10, 0), (TOPIC, 1): (11, 0)})
    offsets = running.broker.group_coordinator().offsets
    assert (offsets.get("g", TOPIC, 0).metadata, offsets.get("g", TOPIC, 0).leader_epoch) == ("in-txn", 7)


async def test_an_abort_marker_drops_them_and_leaves_the_committed_offsets(running, client):
    await commit(client, "g", {(TOPIC, 0): (5, "")})
    assert await txn_commit(client, "g", {(TOPIC, 0): 10, (TOPIC, 1): 11}) == {(TOPIC, 0): 0, (TOPIC, 1): 0}
    end_transaction(running, "g", committed=False)
    for stable in (False, True):
        assert await fetch(client, "g", {TOPIC: [0, 1]}, stable=stable) == (
            0, {(TOPIC, 0): (5, 0), (TOPIC, 1): (-1, 0)})
    assert not running.broker.group_coordinator().offsets.has_open_transactions("g")


async def test_the_batch_is_the_producers_transactional_batch(running, client):
    await txn_commit(client, "g", {(TOPIC, 2): (42, "m")}, producer_id=PID, producer_epoch=3)
    partition = offsets_partition(running, "g")
    data = partition.log.read(0, 1 << 20, max_offset=partition.log.log_end_offset, min_one_batch=True).records.read()
    (batch,) = [b for b in iter_batches(data) if b.producer_id == PID]
    assert batch.is_transactional and not batch.is_control
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (PID, 3, 0)
    (record,) = batch.records()
    assert decode_key(record.key) == OffsetCommitKey("g", TOPIC, 2)
    value = decode_offset_commit_value(record.value)
    assert (value.offset, value.leader_epoch, value.metadata, value.expire_timestamp) == (42, 7, "m", -1)


async def test_a_later_plain_commit_wins_over_the_transaction_it_followed(running, client):
    await txn_commit(client, "g", {(TOPIC, 0): 10, (TOPIC, 1): 10})
    await commit(client, "g", {(TOPIC, 0): (20, "")})  # written after the transactional one
    end_transaction(running, "g", committed=True)
    assert await fetch(client, "g", {TOPIC: [0, 1]}) == (0, {(TOPIC, 0): (20, 0), (TOPIC, 1): (10, 0)})


async def test_a_transaction_wins_over_a_plain_commit_written_before_it(running, client):
    await commit(client, "g", {(TOPIC, 0): (20, "")})
    await txn_commit(client, "g", {(TOPIC, 0): 10})
    end_transaction(running, "g", committed=True)
    assert await committed(client, "g") == (10, 0)


async def test_producers_and_groups_are_kept_apart(running, client):
    coordinator = running.broker.group_coordinator()
    # Two groups in different partitions of __consumer_offsets: a marker completes its partition's.
    a, b = "group-a", next(f"group-b{i}" for i in range(100)
                           if coordinator.partition_for(f"group-b{i}") != coordinator.partition_for("group-a"))
    await txn_commit(client, a, {(TOPIC, 0): 1})
    await txn_commit(client, b, {(TOPIC, 0): 2})
    await txn_commit(client, a, {(TOPIC, 1): 3}, producer_id=PID + 1)
    end_transaction(running, a, committed=True)
    assert await committed(client, a) == (1, 0)
    assert await committed(client, b, stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    assert await fetch(client, a, {TOPIC: [1]}, stable=True) == (
        0, {(TOPIC, 1): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)})
    end_transaction(running, a, committed=False, producer_id=PID + 1)
    end_transaction(running, b, committed=True)
    assert await fetch(client, a, {TOPIC: [0, 1]}, stable=True) == (0, {(TOPIC, 0): (1, 0), (TOPIC, 1): (-1, 0)})
    assert await committed(client, b, stable=True) == (2, 0)


async def test_a_marker_completes_only_the_transaction_it_ends(running, client):
    # WriteTxnMarkers tells the coordinator once the marker is replicated: should the producer have
    # written its next transaction's offsets meanwhile, those stay pending for their own marker.
    await txn_commit(client, "g", {(TOPIC, 0): 10})
    partition = offsets_partition(running, "g")
    partition.append_marker(PID, EPOCH, 0, True)
    await txn_commit(client, "g", {(TOPIC, 0): 20, (TOPIC, 1): 21})
    running.broker.group_coordinator().complete_transaction(partition.index, PID, True)
    assert await fetch(client, "g", {TOPIC: [0, 1]}) == (0, {(TOPIC, 0): (10, 0), (TOPIC, 1): (-1, 0)})
    assert await fetch(client, "g", {TOPIC: [0, 1]}, stable=True) == (0, {
        (TOPIC, 0): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT), (TOPIC, 1): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)})
    end_transaction(running, "g", committed=False)
    assert await fetch(client, "g", {TOPIC: [0, 1]}, stable=True) == (0, {(TOPIC, 0): (10, 0), (TOPIC, 1): (-1, 0)})


async def test_require_stable_is_a_partition_error_before_v8_too(running, client):
    await commit(client, "g", {(TOPIC, 0): (5, "")})
    await txn_commit(client, "g", {(TOPIC, 0): 10})
    assert await fetch(client, "g", {TOPIC: [0, 1]}, stable=True, version=7) == (0, {
        (TOPIC, 0): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT), (TOPIC, 1): (-1, 0)})
    # v6 has no require_stable: the committed offset.
    assert await fetch(client, "g", {TOPIC: [0]}, version=6) == (0, {(TOPIC, 0): (5, 0)})


# ---------------------------------------------------------------------------------------------- validation

async def test_validation(running, client):
    # A group that does not exist: created by generation -1 (as a simple group), ILLEGAL_GENERATION otherwise.
    assert await txn_commit(client, "new", {(TOPIC, 0): 1}, generation_id=2, member_id="m") == {
        (TOPIC, 0): ErrorCode.ILLEGAL_GENERATION}
    assert "new" not in running.broker.group_coordinator().groups
    assert await txn_commit(client, "new", {(TOPIC, 0): 1}) == {(TOPIC, 0): 0}
    described = await client.request(DescribeGroupsRequest(groups=["new"]), 5)
    assert (described.groups[0].error_code, described.groups[0].group_state) == (0, "Empty")

    # Unknown topics and partitions alone; metadata too large for its partition.
    assert await txn_commit(client, "new", {("nowhere", 0): 1, (TOPIC, 9): 1, (TOPIC, 1): (2, "x" * 5000),
                                            (TOPIC, 2): 3}) == {
        ("nowhere", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, (TOPIC, 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        (TOPIC, 1): ErrorCode.OFFSET_METADATA_TOO_LARGE, (TOPIC, 2): 0}
    assert await txn_commit(client, "", {(TOPIC, 0): 1}) == {(TOPIC, 0): ErrorCode.INVALID_GROUP_ID}
    assert await txn_commit(client, "", {("nowhere", 0): 1}) == {("nowhere", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}

    # KIP-447 (v3+): the member's generation, id and instance id are checked as OffsetCommit's.
    joined = await join(client, "members", instance_id="i-1")
    await sync(client, "members", joined, {joined.member_id: b""})
    member = dict(generation_id=joined.generation_id, member_id=joined.member_id, instance_id="i-1")
    assert await txn_commit(client, "members", {(TOPIC, 0): 1}, **member) == {(TOPIC, 0): 0}
    assert await txn_commit(client, "members", {(TOPIC, 0): 1}, **{**member, "generation_id": 9}) == {
        (TOPIC, 0): ErrorCode.ILLEGAL_GENERATION}
    assert await txn_commit(client, "members", {(TOPIC, 0): 1}, **{**member, "member_id": "x"}) == {
        (TOPIC, 0): ErrorCode.FENCED_INSTANCE_ID}
    dynamic = {**member, "instance_id": None, "member_id": "x"}
    assert await txn_commit(client, "members", {(TOPIC, 0): 1}, **dynamic) == {(TOPIC, 0): ErrorCode.UNKNOWN_MEMBER_ID}
    assert await txn_commit(client, "members", {(TOPIC, 0): 1}, **{**member, "instance_id": "i-2"}) == {
        (TOPIC, 0): ErrorCode.UNKNOWN_MEMBER_ID}
    # Without a member (v3 with defaults, and v0-2 which cannot name one), a group with members accepts them.
    assert await txn_commit(client, "members", {(TOPIC, 0): 1}) == {(TOPIC, 0): 0}
    assert await txn_commit(client, "members", {(TOPIC, 0): 1}, version=0) == {(TOPIC, 0): 0}
    # OffsetCommit would refuse that one.
    assert await commit(client, "members", {(TOPIC, 0): (1, "")}) == {(TOPIC, 0): ErrorCode.UNKNOWN_MEMBER_ID}


async def test_validation_in_a_consumer_group(running, client):
    # A consumer-protocol (KIP-848) member commits with its member epoch as the generation; any version.
    joined = await consumer_heartbeat(client, "cg", "member-1", 0, topics=[TOPIC])
    assert (joined.error_code, joined.member_epoch) == (0, 1)
    member = dict(generation_id=1, member_id="member-1")
    assert await txn_commit(client, "cg", {(TOPIC, 0): 1}, **member) == {(TOPIC, 0): 0}
    # A stale epoch is ILLEGAL_GENERATION here (OffsetCommit says STALE_MEMBER_EPOCH).
    assert await txn_commit(client, "cg", {(TOPIC, 0): 1}, **{**member, "generation_id": 0}) == {
        (TOPIC, 0): ErrorCode.ILLEGAL_GENERATION}
    assert await txn_commit(client, "cg", {(TOPIC, 0): 1}, **{**member, "member_id": "x"}) == {
        (TOPIC, 0): ErrorCode.UNKNOWN_MEMBER_ID}
    # Without a member, only while the group has none.
    assert await txn_commit(client, "cg", {(TOPIC, 0): 1}, version=2) == {(TOPIC, 0): ErrorCode.UNKNOWN_MEMBER_ID}


async def test_a_fenced_producer_epoch_is_refused(running, client):
    assert await txn_commit(client, "g", {(TOPIC, 0): 1}, producer_epoch=2) == {(TOPIC, 0): 0}
    end_transaction(running, "g", committed=False, producer_epoch=2)
    assert await txn_commit(client, "g", {(TOPIC, 0): 2}, producer_epoch=1) == {
        (TOPIC, 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    assert not running.broker.group_coordinator().offsets.has_open_transactions("g")
    assert await txn_commit(client, "g", {(TOPIC, 0): 3}, producer_epoch=2) == {(TOPIC, 0): 0}
    assert await txn_commit(client, "g", {(TOPIC, 0): 4}, producer_epoch=2) == {(TOPIC, 0): 0}  # no sequence check
    end_transaction(running, "g", committed=True, producer_epoch=2)
    assert await committed(client, "g", stable=True) == (4, 0)


async def test_successive_transactions_of_a_producer_commit_any_partitions(running, client):
    # Kafka writes every transactional offset batch at sequence 0 and appends it as a coordinator
    # write, whose sequence the log does not check: one producer epoch commits 1, then 2 partitions.
    for n, offsets in enumerate(({(TOPIC, 0): 1}, {(TOPIC, 0): 2, (TOPIC, 1): 2}, {(TOPIC, 2): 3})):
        assert await txn_commit(client, "g", offsets) == dict.fromkeys(offsets, ErrorCode.NONE), n
        end_transaction(running, "g", committed=True)
    assert await fetch(client, "g", {TOPIC: [0, 1, 2]}, stable=True) == (0, {
        (TOPIC, 0): (2, 0), (TOPIC, 1): (2, 0), (TOPIC, 2): (3, 0)})


async def test_the_coordinator_errors(running, client):
    coordinator = running.broker.group_coordinator()
    assert await txn_commit(client, "g", {(TOPIC, 0): 1}) == {(TOPIC, 0): 0}  # __consumer_offsets is created
    coordinator.on_partition_leadership(coordinator.partition_for("g"), False)
    assert await txn_commit(client, "g", {(TOPIC, 0): 1}) == {(TOPIC, 0): ErrorCode.NOT_COORDINATOR}
    # Leading it again, the partition loads (here: its load is held back); versions before 2 get
    # COORDINATOR_NOT_AVAILABLE for COORDINATOR_LOAD_IN_PROGRESS, as from Kafka.
    nursery, coordinator.runtime._nursery = coordinator.runtime._nursery, None
    coordinator.on_partition_leadership(coordinator.partition_for("g"), True)
    coordinator.runtime._nursery = nursery
    for version, error in ((1, ErrorCode.COORDINATOR_NOT_AVAILABLE), (2, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)):
        assert await txn_commit(client, "g", {(TOPIC, 0): 1}, version=version) == {(TOPIC, 0): error}
    coordinator.stop()
    assert await txn_commit(client, "g", {(TOPIC, 0): 1}) == {(TOPIC, 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}


# ---------------------------------------------------------------------------------------------- replay

async def test_replay_after_a_restart(nursery, tmp_path):
    data_dir = tmp_path / "data"
    first = await start_broker(nursery, data_dir, FEW_PARTITIONS)
    client = await first.client()
    await create_topics(client, **{TOPIC: 4})
    await commit(client, "g", {(TOPIC, 0): (1, ""), (TOPIC, 1): (1, ""), (TOPIC, 2): (1, ""), (TOPIC, 3): (1, "")})
    await txn_commit(client, "g", {(TOPIC, 0): 10, (TOPIC, 1): 10}, producer_id=1)  # committed
    await commit(client, "g", {(TOPIC, 1): (20, "")})  # after it: wins at the commit
    end_transaction(first, "g", committed=True, producer_id=1)
    await txn_commit(client, "g", {(TOPIC, 2): 30}, producer_id=2)  # aborted
    end_transaction(first, "g", committed=False, producer_id=2)
    await txn_commit(client, "g", {(TOPIC, 3): 40}, producer_id=3)  # still open at the end of the log
    await txn_commit(client, "other", {(TOPIC, 0): 50}, producer_id=3)  # a group created by it
    expected = {(TOPIC, 0): (10, 0), (TOPIC, 1): (20, 0), (TOPIC, 2): (1, 0), (TOPIC, 3): (1, 0)}
    assert await fetch(client, "g", {TOPIC: [0, 1, 2, 3]}) == (0, expected)
    await first.close()

    second = await start_broker(nursery, data_dir, FEW_PARTITIONS)
    client = await second.client()
    await wait_for(lambda: _loaded(second), "the coordinator to load")
    assert await fetch(client, "g", {TOPIC: [0, 1, 2, 3]}) == (0, expected)
    assert await fetch(client, "g", {TOPIC: [0, 1, 2, 3]}, stable=True) == (0, {
        **expected, (TOPIC, 3): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)})
    assert await committed(client, "other", stable=True) == (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    assert "other" in second.broker.group_coordinator().groups
    # The open transaction goes on after the restart: its marker commits what it wrote before.
    end_transaction(second, "g", committed=True, producer_id=3)
    end_transaction(second, "other", committed=True, producer_id=3)
    assert await fetch(client, "g", {TOPIC: [3]}, stable=True) == (0, {(TOPIC, 3): (40, 0)})
    assert await committed(client, "other", stable=True) == (50, 0)
    await second.close()

    # And the markers written after the restart are replayed as well.
    third = await start_broker(nursery, data_dir, FEW_PARTITIONS)
    client = await third.client()
    await wait_for(lambda: _loaded(third), "the coordinator to load")
    assert await fetch(client, "g", {TOPIC: [0, 1, 2, 3]}, stable=True) == (0, {**expected, (TOPIC, 3): (40, 0)})
    assert await committed(client, "other", stable=True) == (50, 0)
    await third.close()


async def test_a_marker_appended_while_the_partition_loads_is_replayed(running, client, monkeypatch):
    coordinator = running.broker.group_coordinator()
    await txn_commit(client, "g", {(TOPIC, 0): 10})
    for i in range(20):
        await commit(client, "g", {(TOPIC, 1): (i, "")})
    index = coordinator.partition_for("g")
    # Leadership lost and won again: the partition loads in the coordinator's task, one batch at a
    # time here. The marker is appended half-way: complete_transaction leaves it to the load, which
    # must read on to the log end as it is then.
    monkeypatch.setattr(coordinator.runtime, "topic", dataclasses.replace(coordinator.runtime.topic, load_buffer_bytes=1))
    coordinator.on_partition_leadership(index, False)
    coordinator.on_partition_leadership(index, True)
    for _ in range(10):
        await trio.sleep(0)
    assert coordinator.group_error("g") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert coordinator.offsets.has_pending("g", TOPIC, 0)  # replayed so far
    end_transaction(running, "g", committed=True)
    await wait_for(lambda: _loaded(running), "the partition to load")
    assert await fetch(client, "g", {TOPIC: [0, 1]}, stable=True) == (0, {(TOPIC, 0): (10, 0), (TOPIC, 1): (19, 0)})


async def _loaded(running) -> bool:
    return running.broker.group_coordinator().active


# ---------------------------------------------------------------------------------------------- deletion, expiry

async def test_pending_offsets_do_not_expire_and_keep_their_group(running, client):
    coordinator = running.broker.group_coordinator()
    await commit(client, "g", {(TOPIC, 0): (5, ""), (TOPIC, 1): (5, "")})
    await txn_commit(client, "g", {(TOPIC, 0): 10})
    await txn_commit(client, "pending-only", {(TOPIC, 0): 10})
    retention_ms = coordinator.config.offsets_retention_minutes * 60_000
    now = coordinator.now_ms() + retention_ms + 60_000
    coordinator.now_ms = lambda: now  # type: ignore[method-assign]
    coordinator.expire_offsets()
    # (TOPIC, 1) expired; (TOPIC, 0) has a pending offset: kept, and so is the group. The group with
    # only a pending offset is not deleted either.
    assert coordinator.offsets.partitions("g") == [(TOPIC, 0)]
    assert {"g", "pending-only"} <= set(coordinator.groups)
    end_transaction(running, "g", committed=True)
    end_transaction(running, "pending-only", committed=True)
    assert await committed(client, "g", stable=True) == (10, 0)
    assert await committed(client, "pending-only", stable=True) == (10, 0)


async def test_delete_groups_deletes_pending_offsets_too(running, client):
    await commit(client, "g", {(TOPIC, 0): (5, "")})
    await txn_commit(client, "g", {(TOPIC, 0): 10, (TOPIC, 1): 11})
    deleted = await client.request(DeleteGroupsRequest(groups_names=["g"]), 2)
    assert deleted.results[0].error_code == ErrorCode.NONE
    assert await fetch(client, "g", {TOPIC: [0, 1]}, stable=True) == (0, {(TOPIC, 0): (-1, 0), (TOPIC, 1): (-1, 0)})
    end_transaction(running, "g", committed=True)  # nothing left to commit
    assert await fetch(client, "g", {TOPIC: [0, 1]}, stable=True) == (0, {(TOPIC, 0): (-1, 0), (TOPIC, 1): (-1, 0)})
    assert "g" not in running.broker.group_coordinator().groups


async def test_offset_delete_of_a_pending_partition(running, client):
    await txn_commit(client, "g", {(TOPIC, 0): 10, (TOPIC, 1): 11})
    response = await client.request(OffsetDeleteRequest(group_id="g", topics=[
        OffsetDeleteRequest.OffsetDeleteRequestTopic(name=TOPIC, partitions=[
            OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
    assert response.error_code == 0
    assert await fetch(client, "g", {TOPIC: [0, 1]}, stable=True) == (0, {
        (TOPIC, 0): (-1, 0), (TOPIC, 1): (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)})
    end_transaction(running, "g", committed=True)
    assert await fetch(client, "g", {TOPIC: [0, 1]}, stable=True) == (0, {(TOPIC, 0): (-1, 0), (TOPIC, 1): (11, 0)})


# ---------------------------------------------------------------------------------------------- the store alone

def _value(offset: int, record_offset: int) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, -1, "", 0, record_offset=record_offset)


def test_store_tombstones_drop_pending_offsets_and_markers_close_every_group():
    store = OffsetStore()
    store.put_pending(7, "a", "t", 0, _value(1, 10))
    store.put_pending(7, "b", "t", 0, _value(2, 11))
    assert store.has_pending("a", "t", 0) and store.pending_groups(7) == ["a", "b"]
    store.remove("a", "t", 0)  # tombstones (OffsetDelete, DeleteGroups): the transactions stay open
    store.remove("b", "t", 0)
    assert not store.has_pending("a", "t", 0) and store.has_open_transactions("a")
    assert store.complete(7, ["a"], True) == []  # the marker of a's partition of __consumer_offsets
    assert not store.has_open_transactions("a") and store.has_open_transactions("b")
    assert store.complete(7, ["b"], True) == []  # then b's
    assert not store.has_open_transactions("b") and list(store.groups()) == []


def test_store_a_marker_ends_only_what_was_written_before_the_producers_next_transaction():
    store = OffsetStore()
    store.put("g", "t", 0, _value(5, 1))
    store.put_pending(7, "g", "t", 0, _value(10, 2))
    store.put_pending(7, "g", "t", 0, _value(11, 3))  # the same transaction: replaces
    store.put_pending(7, "g", "t", 0, _value(20, 6), transaction_start=6)  # the next one, marker at 5 not applied
    store.put_pending(7, "g", "t", 1, _value(21, 7), transaction_start=6)
    store.put_pending(7, "g", "t", 0, _value(22, 8), transaction_start=6)  # the next one again: replaces 20
    assert store.complete(7, ["g"], True, before=6) == [("g", "t", 0)]
    assert store.get("g", "t", 0) == _value(11, 3)
    assert store.get_pending(7, "g", "t", 0) == _value(22, 8) and store.has_pending("g", "t", 1)
    assert store.complete(7, ["g"], False) == []
    assert store.get("g", "t", 0) == _value(11, 3) and not store.has_open_transactions("g")
