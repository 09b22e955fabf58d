"""The share coordinator: Kafka's __share_group_state records byte for byte (taken from the log a Kafka 4.4 broker
wrote for the requests replayed here), batch merging, replay, snapshots, epochs and the coordinator errors, over
real logs in tmp_path on the coordinator runtime (no server, no TCP)."""
from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path

import pytest
import trio

from trafka.broker.partition import Partition
from trafka.broker.share.coordinator import SHARE_STATE_TOPIC, ShareCoordinator, ShareStates, combine_batches
from trafka.broker.share.records import (
    ShareKey,
    ShareSnapshotValue,
    ShareUpdateValue,
    decode_key,
    decode_snapshot_value,
    decode_update_value,
    encode_key,
    encode_snapshot_value,
    encode_update_value,
)
from trafka.broker.share.state import (
    PartitionState,
    StateBatch,
    parse_share_coordinator_key,
    share_coordinator_key,
)
from trafka.broker.topics import Topic
from trafka.storage.config import LogConfig
from trafka.storage.log import Log
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.records import iter_batches

NODE = 1
TOPIC_ID = uuid.UUID("5f897bee-6f0f-44d8-97b3-33978122bf28")
G1 = ShareKey("g1", TOPIC_ID, 0, True)

#: (key, value) of the records a Kafka 4.4 broker wrote to __share_group_state-1 (with
#: share.coordinator.snapshot.update.records.per.snapshot=2) for: initialize g1 (state epoch 0, start 0); writes
#: [(0-9 available, 1), (5-7 acked, 1)] delivery complete count 3; start 5 [(5-12 archived, 2)] count 8; start -1
#: [(20 acked, 1)] count 1 (a snapshot); a read with leader epoch 3; a write with leader epoch 4, start 6; initialize
#: with state epoch 1, start 7; delete; then g2 partition 1: initialize start -1; write start 3 [(3-4 acked, 1)];
#: write start 1 [(1-2 acked, 1)] count 5.
KAFKA_RECORDS = [
    ("0000000267315f897bee6f0f44d897b333978122bf2800000000",
     "00000000000000000000000000000000000000000000000001a21dc57044000001a21dc570440101000400000000"),
    ("0001000267315f897bee6f0f44d897b333978122bf2800000000",
     "0000000000000000000000000000000000000400000000000000000000000000000004000001000000000000000005000000000000000702"
     "000100000000000000000800000000000000090000010001000400000003"),
    ("0001000267315f897bee6f0f44d897b333978122bf2800000000",
     "000000000000000000000000000000000005020000000000000005000000000000000c0400020001000400000008"),
    ("0000000267315f897bee6f0f44d897b333978122bf2800000000",
     "00000000000100000000000000000000000000000005000001a21dc57093000001a21dc57093030000000000000005000000000000000c04"
     "000200000000000000001400000000000000140200010001000400000008"),
    ("0001000267315f897bee6f0f44d897b333978122bf2800000000", "0000000000010000000300000000000000050101000400000008"),
    ("0001000267315f897bee6f0f44d897b333978122bf2800000000", "0000000000010000000300000000000000060100"),
    ("0000000267315f897bee6f0f44d897b333978122bf2800000000",
     "00000000000200000001000000000000000000000007000001a21dc570ab000001a21dc570ab0101000400000000"),
    ("0000000267315f897bee6f0f44d897b333978122bf2800000000", None),
    ("0000000267325f897bee6f0f44d897b333978122bf2800000001",
     "0000000000000000000000000000ffffffffffffffff000001a21dc570c1000001a21dc570c10100"),
    ("0001000267325f897bee6f0f44d897b333978122bf2800000001",
     "00000000000000000000000000000000000302000000000000000300000000000000040200010000"),
    ("0001000267325f897bee6f0f44d897b333978122bf2800000001", "0000000000000000000000000000000000030100"),
]


# ==================================================================================================== records


def test_every_record_kafka_wrote_decodes_and_encodes_to_the_same_bytes():
    for key_hex, value_hex in KAFKA_RECORDS:
        key = decode_key(bytes.fromhex(key_hex))
        assert encode_key(key) == bytes.fromhex(key_hex)
        if value_hex is None:
            continue
        value = bytes.fromhex(value_hex)
        if key.snapshot:
            assert encode_snapshot_value(decode_snapshot_value(value)) == value
        else:
            assert encode_update_value(decode_update_value(value)) == value


def test_record_fields():
    key = decode_key(bytes.fromhex(KAFKA_RECORDS[0][0]))
    assert key == ShareKey("g1", TOPIC_ID, 0, True)
    assert decode_key(bytes.fromhex(KAFKA_RECORDS[1][0])).snapshot is False
    snapshot = decode_snapshot_value(bytes.fromhex(KAFKA_RECORDS[3][1]))
    assert snapshot == ShareSnapshotValue(1, 0, 0, 5, snapshot.create_timestamp, snapshot.create_timestamp,
                                          (StateBatch(5, 12, 4, 2), StateBatch(20, 20, 2, 1)), 8)
    assert decode_update_value(bytes.fromhex(KAFKA_RECORDS[5][1])) == ShareUpdateValue(1, 3, 6, (), -1)
    initialized = decode_snapshot_value(bytes.fromhex(KAFKA_RECORDS[8][1]))
    assert (initialized.start_offset, initialized.delivery_complete_count) == (-1, -1)


def test_a_key_of_another_kind_is_skipped():
    assert decode_key(bytes.fromhex("0005000167")) is None


# ==================================================================================================== batches


@pytest.mark.parametrize(("so_far", "new", "start", "merged"), [
    ([], [(0, 9, 0, 1), (5, 7, 2, 1)], 0, [(0, 4, 0, 1), (5, 7, 2, 1), (8, 9, 0, 1)]),
    ([(0, 4, 0, 1), (5, 7, 2, 1), (8, 9, 0, 1)], [(5, 12, 4, 2)], 5, [(5, 12, 4, 2)]),
    ([(5, 12, 4, 2)], [(20, 20, 2, 1)], 5, [(5, 12, 4, 2), (20, 20, 2, 1)]),
    ([], [(1, 2, 2, 1)], 3, []),
    ([(0, 9, 2, 1)], [(3, 4, 0, 1)], -1, [(0, 9, 2, 1)]),  # the same count: the higher state wins
    ([(0, 9, 0, 1)], [(3, 4, 0, 2)], 2, [(2, 2, 0, 1), (3, 4, 0, 2), (5, 9, 0, 1)]),
    ([(0, 4, 2, 1)], [(5, 9, 2, 1)], 0, [(0, 9, 2, 1)]),  # neighbours alike become one
    ([(0, 4, 2, 1)], [(7, 9, 2, 1)], 0, [(0, 4, 2, 1), (7, 9, 2, 1)]),
])
def test_batches_merge_as_kafka_merges_them(so_far, new, start, merged):
    result = combine_batches([StateBatch(*b) for b in so_far], [StateBatch(*b) for b in new], start)
    assert result == tuple(StateBatch(*b) for b in merged)


def test_many_batches_merge_quickly():
    so_far = [StateBatch(i * 10, i * 10 + 4, 2, 1) for i in range(5000)]
    new = [StateBatch(i * 10 + 5, i * 10 + 9, 2, 1) for i in range(5000)]
    assert combine_batches(so_far, new, 0) == (StateBatch(0, 49_999, 2, 1),)


# ==================================================================================================== replay


def test_replaying_kafkas_records_gives_the_state_kafka_answered():
    states = ShareStates(updates_per_snapshot=2)
    seen = []
    for key_hex, value_hex in KAFKA_RECORDS:
        states.replay(decode_key(bytes.fromhex(key_hex)), None if value_hex is None else bytes.fromhex(value_hex))
        state = states.get(("g1", TOPIC_ID, 0))
        seen.append(None if state is None else (state.state_epoch, state.start_offset, state.batches,
                                                 state.delivery_complete_count))
    assert seen[1] == (0, 0, (StateBatch(0, 4, 0, 1), StateBatch(5, 7, 2, 1), StateBatch(8, 9, 0, 1)), 3)
    assert seen[3] == (0, 5, (StateBatch(5, 12, 4, 2), StateBatch(20, 20, 2, 1)), 8)
    assert seen[5] == (0, 6, (StateBatch(6, 12, 4, 2), StateBatch(20, 20, 2, 1)), -1)
    assert seen[6] == (1, 7, (), 0)
    assert seen[7] is None  # deleted
    g2 = states.get(("g2", TOPIC_ID, 1))
    assert (g2.start_offset, g2.batches, g2.delivery_complete_count) == (3, (StateBatch(3, 4, 2, 1),), -1)


def test_the_records_kafka_wrote_are_the_records_written_for_the_same_requests():
    """The records the coordinator's state makes for Kafka's requests, replayed one by one, are Kafka's bytes
    (timestamps aside)."""
    states = ShareStates(updates_per_snapshot=2)
    g1, g2 = ("g1", TOPIC_ID, 0), ("g2", TOPIC_ID, 1)
    made = []

    def apply(record):
        key, value = record
        made.append((encode_key(key).hex(), None if value is None else value.hex()))
        states.replay(key, value)

    def batches(*b):
        return tuple(StateBatch(*x) for x in b)

    def timestamps_of(index):
        return decode_snapshot_value(bytes.fromhex(KAFKA_RECORDS[index][1])).create_timestamp

    apply(states.initialize_record(g1, 0, 0, now_ms=timestamps_of(0)))
    apply(states.write_record(g1, 0, 0, 0, 3, batches((0, 9, 0, 1), (5, 7, 2, 1)), now_ms=0,
                              update_leader_epoch=False))
    apply(states.write_record(g1, 0, 0, 5, 8, batches((5, 12, 4, 2)), now_ms=0, update_leader_epoch=False))
    apply(states.write_record(g1, 0, 0, -1, 1, batches((20, 20, 2, 1)), now_ms=timestamps_of(3),
                              update_leader_epoch=False))
    current = states.get(g1)
    apply(states.write_record(g1, current.state_epoch, 3, current.start_offset, current.delivery_complete_count, (),
                              now_ms=0, update_leader_epoch=True))
    apply(states.write_record(g1, 0, 4, 6, -1, (), now_ms=0, update_leader_epoch=False))
    apply(states.initialize_record(g1, 1, 7, now_ms=timestamps_of(6)))
    apply((G1, None))
    apply(states.initialize_record(g2, 0, -1, now_ms=timestamps_of(8)))
    apply(states.write_record(g2, 0, 0, 3, -1, batches((3, 4, 2, 1)), now_ms=0, update_leader_epoch=False))
    apply(states.write_record(g2, 0, 0, 1, 5, batches((1, 2, 2, 1)), now_ms=0, update_leader_epoch=False))
    assert made == KAFKA_RECORDS


# ==================================================================================================== keys


def test_the_coordinator_key_and_its_partition():
    assert share_coordinator_key("g1", TOPIC_ID, 0) == "g1:X4l77m8PRNiXszOXgSK_KA:0"
    key = "g1:X4l77m8PRNiXszOXgSK_KA:0"
    assert parse_share_coordinator_key(key) == key
    assert parse_share_coordinator_key("g1:X4l77m8PRNiXszOXgSK_KA:+00") == key
    assert parse_share_coordinator_key("a:b:X4l77m8PRNiXszOXgSK_KA:1") == "a:b:X4l77m8PRNiXszOXgSK_KA:1"
    assert parse_share_coordinator_key("g:X4l77m8PRNiXszOXgSK_KA:1:") == "g:X4l77m8PRNiXszOXgSK_KA:1"
    for refused in ("bad", "g:x:1", "", ":X4l77m8PRNiXszOXgSK_KA:1", "g:X4l77m8PRNiXszOXgSK_KA:abc",
                    "g:X4l77m8PRNiXszOXgSK_KA", "g:X4l77m8PRNiXszOXgSK_KAx:0", "g:X4l77m8PRNiXszOXgSK_KA: 1"):
        assert parse_share_coordinator_key(refused) is None, refused


# ==================================================================================================== the coordinator


class Topics:
    """The broker's topics as the coordinator sees them, over real logs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.topics: dict[str, Topic] = {}

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    async def create(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     configs: Mapping[str, str | None] | None = None) -> Topic:
        if name in self.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS)
        topic_id = uuid.uuid4()
        partitions = [Partition(name, topic_id, index, Log.create(self.root / f"{name}-{index}", LogConfig(),
                                                                    now_ms=0), NODE)
                      for index in range(num_partitions)]
        topic = Topic(name, topic_id, dict(configs or {}), LogConfig(), partitions)
        self.topics[name] = topic
        return topic


SETTINGS = {"share.coordinator.state.topic.num.partitions": "3",
            "share.coordinator.snapshot.update.records.per.snapshot": "2"}


def coordinator(topics: Topics) -> ShareCoordinator:
    return ShareCoordinator(SETTINGS, topics, single_node=True,
                            topic_partitions=lambda topic_id: 2 if topic_id == TOPIC_ID else None)


def written(topics: Topics) -> list[tuple[bool, bytes | None]]:
    records = []
    for partition in topics.get(SHARE_STATE_TOPIC).partitions:
        data = partition.log.read(partition.log.log_start_offset, 1 << 20,
                                  max_offset=partition.log.log_end_offset).records
        if data is not None:
            for batch in iter_batches(data.read()):
                records += [(decode_key(r.key).snapshot, r.value) for r in batch.records()]
    return records


async def test_state_is_written_read_and_loaded_again(tmp_path, nursery):
    topics = Topics(tmp_path)
    first = coordinator(topics)
    await nursery.start(first.run)
    await first.ensure_topic()
    assert len(topics.get(SHARE_STATE_TOPIC).partitions) == 3
    await first.initialize("g", TOPIC_ID, 0, 0, 0)
    await first.write("g", TOPIC_ID, 0, PartitionState(0, 0, 0, (StateBatch(0, 4, 2, 1),), 5))
    await first.write("g", TOPIC_ID, 0, PartitionState(0, 0, 5, (StateBatch(5, 6, 4, 3),), 2))
    await first.write("g", TOPIC_ID, 0, PartitionState(0, 0, -1, (StateBatch(7, 7, 0, 1),), -1))
    state = await first.read("g", TOPIC_ID, 0, 0)
    assert (state.state_epoch, state.start_offset, state.batches) == (
        0, 5, (StateBatch(5, 6, 4, 3), StateBatch(7, 7, 0, 1)))
    # a snapshot, two updates, then a snapshot again (the third write)
    assert [snapshot for snapshot, _ in written(topics)] == [True, False, False, True]
    summary = await first.read_summary("g", TOPIC_ID, 0, 0)
    assert (summary.start_offset, summary.delivery_complete_count, summary.batches) == (5, 2, ())

    # A new coordinator over the same logs replays them: the same state.
    first.runtime.on_partition_leadership(first.partition_for("g", TOPIC_ID, 0), False)
    with pytest.raises(KafkaError) as refused:
        await first.read("g", TOPIC_ID, 0, 0)
    assert refused.value.code == ErrorCode.NOT_COORDINATOR
    assert refused.value.message == "Unable to read share group state: This is not the correct coordinator."
    second = coordinator(topics)
    await nursery.start(second.run)
    while True:
        try:
            again = await second.read("g", TOPIC_ID, 0, 0)
            break
        except KafkaError as exc:
            assert exc.code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            await trio.sleep(0.01)
    assert again == state


async def test_epochs_and_uninitialized_partitions(tmp_path, nursery):
    topics = Topics(tmp_path)
    shares = coordinator(topics)
    await nursery.start(shares.run)
    await shares.ensure_topic()

    async def error(call) -> tuple[ErrorCode, str]:
        with pytest.raises(KafkaError) as refused:
            await call
        return refused.value.code, refused.value.message

    assert await error(shares.read("g", TOPIC_ID, 0, 0)) == (
        ErrorCode.INVALID_REQUEST, "Read operation on uninitialized share partition not allowed.")
    assert await error(shares.write("g", TOPIC_ID, 0, PartitionState(0, 0, 0))) == (
        ErrorCode.INVALID_REQUEST, "Write operation on uninitialized share partition not allowed.")
    summary = await shares.read_summary("g", TOPIC_ID, 0, 0)
    assert (summary.start_offset, summary.state_epoch, summary.delivery_complete_count) == (-1, 0, -1)
    assert (await error(shares.initialize("g", uuid.uuid4(), 0, 0, 0)))[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert (await error(shares.initialize("g", TOPIC_ID, 2, 0, 0)))[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert await error(shares.initialize("g", TOPIC_ID, -1, 0, 0)) == (
        ErrorCode.INVALID_REQUEST, "The partition id cannot be a negative number.")

    await shares.initialize("g", TOPIC_ID, 0, 1, 10)
    await shares.read("g", TOPIC_ID, 0, 3)  # a newer leader epoch is recorded
    assert (await error(shares.read("g", TOPIC_ID, 0, 2)))[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert (await error(shares.write("g", TOPIC_ID, 0, PartitionState(1, 2, 10))))[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert (await error(shares.write("g", TOPIC_ID, 0, PartitionState(0, 3, 10))))[0] == ErrorCode.FENCED_STATE_EPOCH
    assert (await error(shares.initialize("g", TOPIC_ID, 0, 0, 10)))[0] == ErrorCode.FENCED_STATE_EPOCH
    assert await error(shares.write("g", TOPIC_ID, 0, PartitionState(1, -1, 10))) == (
        ErrorCode.INVALID_REQUEST, "The leader epoch cannot be a negative number.")
    await shares.write("g", TOPIC_ID, 0, PartitionState(1, 3, 12, (StateBatch(12, 12, 2, 1),)))
    assert (await shares.read("g", TOPIC_ID, 0, 3)).start_offset == 12

    await shares.delete("g", TOPIC_ID, 0)
    await shares.delete("g", TOPIC_ID, 0)  # nothing left: still fine
    assert (await error(shares.read("g", TOPIC_ID, 0, 3)))[0] == ErrorCode.INVALID_REQUEST
    assert written(topics)[-1] == (True, None)  # a tombstone of the snapshot key


async def test_records_superseded_by_snapshots_are_pruned_and_cold_partitions_snapshotted(tmp_path, nursery):
    topics = Topics(tmp_path)
    shares = coordinator(topics)
    await nursery.start(shares.run)
    await shares.ensure_topic()
    index = shares.partition_for("g", TOPIC_ID, 0)
    log = topics.get(SHARE_STATE_TOPIC).partitions[index].log
    await shares.initialize("g", TOPIC_ID, 0, 0, 0)  # a snapshot at offset 0
    for offset in range(3):  # two updates, then a snapshot at offset 3
        await shares.write("g", TOPIC_ID, 0, PartitionState(0, 0, -1, (StateBatch(offset, offset, 2, 1),)))
    assert await shares.prune() == 1
    assert log.log_start_offset == 3
    state = await shares.read("g", TOPIC_ID, 0, 0)

    # An idle share partition is snapshotted again once its snapshot is older than the interval; then its
    # update records are superseded too.
    await shares.write("g", TOPIC_ID, 0, PartitionState(0, 0, -1, (StateBatch(3, 3, 2, 1),)))
    state = await shares.read("g", TOPIC_ID, 0, 0)
    assert await shares.snapshot_cold_partitions() == 0  # not cold yet
    later = shares.now_ms() + shares.cold_snapshot_interval_ms
    shares.now_ms = lambda: later
    assert await shares.snapshot_cold_partitions() == 1
    assert written(topics)[-1][0] is True
    assert await shares.snapshot_cold_partitions() == 0  # every share partition snapshotted so already
    assert await shares.prune() == 1
    assert log.log_start_offset == log.log_end_offset - 1

    # What is left loads to the same state.
    shares.runtime.on_partition_leadership(index, False)
    again = coordinator(topics)
    await nursery.start(again.run)
    while True:
        try:
            loaded = await again.read("g", TOPIC_ID, 0, 0)
            break
        except KafkaError as exc:
            assert exc.code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            await trio.sleep(0.01)
    assert (loaded.start_offset, loaded.batches, loaded.state_epoch) == (state.start_offset, state.batches,
                                                                         state.state_epoch)


async def test_the_state_of_a_deleted_topic_goes(tmp_path, nursery):
    topics = Topics(tmp_path)
    existing = {TOPIC_ID}
    shares = ShareCoordinator(SETTINGS, topics, single_node=True,
                              topic_partitions=lambda topic_id: 2 if topic_id in existing else None)
    await nursery.start(shares.run)
    await shares.ensure_topic()
    await shares.initialize("g", TOPIC_ID, 0, 0, 0)
    await shares.initialize("g", TOPIC_ID, 1, 0, 0)
    assert await shares.forget_deleted_topics() == 0
    existing.clear()
    assert await shares.forget_deleted_topics() == 2
    assert [value for _, value in written(topics)].count(None) == 2
    existing.add(TOPIC_ID)  # a topic of that id again: nothing of the old state is left
    with pytest.raises(KafkaError) as refused:
        await shares.read("g", TOPIC_ID, 0, 0)
    assert refused.value.message == "Read operation on uninitialized share partition not allowed."
