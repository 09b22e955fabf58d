"""The coordinator runtime and its two users against partitions in memory (real logs in tmp_path, no
server, no TCP): leadership, loading, the coordinator errors, both write styles, and the group and
transaction coordinators on top."""
from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path

import pytest
import trio
import trio.testing

from trafka.broker.config import BrokerConfig
from trafka.broker.coordinator_runtime import CoordinatorRuntime, InternalTopic
from trafka.broker.groups.coordinator import CommitRequestOffset, GroupCoordinator
from trafka.broker.partition import Partition
from trafka.broker.topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, Topic
from trafka.broker.txn.coordinator import TransactionCoordinator
from trafka.broker.txn.markers import write_markers
from trafka.broker.txn.state import TransactionState
from trafka.storage.config import LogConfig
from trafka.storage.log import Log
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.records import RecordBatch, build_batch

NODE = 1
FOLLOWER = 2


class Topics:
    """The broker's topics as the coordinators see them: lookups and creation, over real logs."""

    def __init__(self, root: Path, *, replicas: list[int] | None = None) -> None:
        self.root = root
        self.replicas = replicas
        self.topics: dict[str, Topic] = {}

    def get(self, name: str) -> Topic | None:
        return self.topics.get(name)

    async def create(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
                     configs: Mapping[str, str | None] | None = None) -> Topic:
        if name in self.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS)
        topic_id = uuid.uuid4()
        partitions = []
        for index in range(num_partitions):
            log = Log.create(self.root / f"{name}-{index}", LogConfig(), now_ms=0)
            if self.replicas is None:
                partitions.append(Partition(name, topic_id, index, log, NODE))
            else:
                partition = Partition(name, topic_id, index, log, NODE, replicas=self.replicas)
                partition.set_state(NODE, 1, self.replicas, self.replicas, now_ms=0)
                partitions.append(partition)
        topic = Topic(name, topic_id, dict(configs or {}), LogConfig(), partitions)
        self.topics[name] = topic
        return topic


class Shard:
    """A coordinator's state that only records what the runtime told it."""

    def __init__(self) -> None:
        self.replayed: list[tuple[int, bytes | None]] = []
        self.loaded_partitions: list[int] = []
        self.unloaded_partitions: list[int] = []

    def replay(self, index: int, batch: RecordBatch, log_start_offset: int) -> int:
        records = [r for r in batch.records() if r.offset >= log_start_offset]
        self.replayed += [(index, r.value) for r in records]
        return len(records)

    def loaded(self, index: int) -> None:
        self.loaded_partitions.append(index)

    def unloaded(self, index: int) -> int:
        self.unloaded_partitions.append(index)
        return 0


def internal_topic(partitions: int = 3, *, write_timeout_s: float = 5.0) -> InternalTopic:
    return InternalTopic(name="__state", partitions=partitions, replication_factor=1, configs={}, settings="",
                         key_name="key", users="tests", load_buffer_bytes=64, write_timeout_s=write_timeout_s)


def batch_of(*values: bytes) -> bytearray:
    return bytearray(build_batch([(b"k", v) for v in values]))


def replicate(partition: Partition) -> None:
    """The follower fetches up to the leader's log end: the high watermark follows."""
    partition.read_for_follower(FOLLOWER, partition.log_end_offset, 1 << 20, min_one_batch=False)


def config(**properties: str) -> BrokerConfig:
    return BrokerConfig.from_properties(properties)


# -- the runtime ---------------------------------------------------------------------------------


async def test_a_partition_led_at_start_loads_in_the_runtimes_task_then_serves(tmp_path):
    topics = Topics(tmp_path)
    topic = await topics.create("__state", 3)
    for i in range(5):
        topic.partitions[1].append(batch_of(b"v%d" % i))
    shard = Shard()
    runtime = CoordinatorRuntime(internal_topic(), shard, topics, single_node=False)
    runtime.lead_existing()
    assert runtime.error(1) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and runtime.loading
    assert runtime.error(0) == ErrorCode.NONE  # an empty log has nothing to replay
    async with trio.open_nursery() as nursery:
        await nursery.start(runtime.run)
        await trio.testing.wait_all_tasks_blocked()
        assert runtime.error(1) == ErrorCode.NONE and not runtime.loading
        assert shard.replayed == [(1, b"v%d" % i) for i in range(5)]
        assert sorted(shard.loaded_partitions) == [0, 1, 2]
        runtime.stop()
        assert runtime.error(1) == ErrorCode.COORDINATOR_NOT_AVAILABLE
        nursery.cancel_scope.cancel()


async def test_resignation_cancels_a_load_and_the_keys_are_not_coordinated_here(tmp_path):
    topics = Topics(tmp_path)
    topic = await topics.create("__state", 1)
    for i in range(50):
        topic.partitions[0].append(batch_of(b"v%d" % i))
    shard = Shard()
    runtime = CoordinatorRuntime(internal_topic(1), shard, topics, single_node=False)
    async with trio.open_nursery() as nursery:
        await nursery.start(runtime.run)
        runtime.on_partition_leadership(0, True)
        runtime.on_partition_leadership(0, True)  # told twice: one load
        await trio.sleep(0)
        runtime.on_partition_leadership(0, False)
        await trio.testing.wait_all_tasks_blocked()
        assert runtime.error(0) == ErrorCode.NOT_COORDINATOR and not runtime.loading
        assert len(shard.replayed) < 50 and shard.loaded_partitions == []
        assert shard.unloaded_partitions == [0, 0]  # before the load, and on resignation
        nursery.cancel_scope.cancel()


async def test_a_single_node_creates_the_topic_on_demand_and_leads_every_partition(tmp_path):
    topics = Topics(tmp_path)
    runtime = CoordinatorRuntime(internal_topic(4), Shard(), topics, single_node=True)
    assert runtime.error(runtime.partition_for("k")) == ErrorCode.NONE  # nothing there yet: nothing to refuse
    assert runtime.coordinator_id("k") is None
    with pytest.raises(KafkaError) as refused:
        runtime.append("k", batch_of(b"x"))
    assert refused.value.code == ErrorCode.COORDINATOR_NOT_AVAILABLE
    await runtime.ensure_topic()
    await runtime.ensure_topic()  # once
    assert len(topics.get("__state").partitions) == 4
    assert all(runtime.is_loaded(i) for i in range(4)) and runtime.coordinator_id("k") == NODE
    assert runtime.append("k", batch_of(b"x")).first_offset == 0
    assert await runtime.await_written("k") == ErrorCode.NONE


async def test_apply_on_append_waits_for_replication_within_the_write_timeout(tmp_path):
    topics = Topics(tmp_path, replicas=[NODE, FOLLOWER])
    topic = await topics.create("__state", 1)
    runtime = CoordinatorRuntime(internal_topic(1, write_timeout_s=0.05), Shard(), topics, single_node=False)
    runtime.lead_existing()
    runtime.append("k", batch_of(b"x"))
    assert await runtime.await_written("k") == ErrorCode.REQUEST_TIMED_OUT
    assert await runtime.await_written("other") == ErrorCode.NONE  # nothing of its own pending
    replicate(topic.partitions[0])
    assert await runtime.await_written("k") == ErrorCode.NONE


async def test_apply_once_replicated_answers_as_a_coordinator_does(tmp_path):
    topics = Topics(tmp_path, replicas=[NODE, FOLLOWER])
    partition = (await topics.create("__state", 1)).partitions[0]
    runtime = CoordinatorRuntime(internal_topic(1), Shard(), topics, single_node=False)
    runtime.lead_existing()
    answers: list[ErrorCode] = []

    async def write(value: bytes) -> None:
        answers.append(await runtime.write("k", batch_of(value)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write, b"a")
        await trio.testing.wait_all_tasks_blocked()
        assert answers == []  # not replicated yet
        replicate(partition)
    assert answers == [ErrorCode.NONE]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(write, b"b")
        await trio.testing.wait_all_tasks_blocked()
        partition.set_state(FOLLOWER, 2, [NODE, FOLLOWER], [NODE, FOLLOWER], now_ms=0)  # leadership moves
    assert answers[-1] == ErrorCode.NOT_COORDINATOR
    timing_out = CoordinatorRuntime(internal_topic(1, write_timeout_s=0.01), Shard(), topics, single_node=False)
    partition.set_state(NODE, 3, [NODE, FOLLOWER], [NODE, FOLLOWER], now_ms=0)
    assert await timing_out.write("k", batch_of(b"c")) == ErrorCode.COORDINATOR_NOT_AVAILABLE


# -- its users -----------------------------------------------------------------------------------


async def test_the_group_coordinator_commits_and_replays_offsets_without_a_server(tmp_path):
    topics = Topics(tmp_path)
    groups = GroupCoordinator(config(), topics, single_node=True)
    await groups.ensure_offsets_topic()
    committed = groups.commit_offsets(group_id="g", member_id="", group_instance_id=None, generation_id=-1,
                                      retention_ms=-1, offsets=[CommitRequestOffset("t", 0, 42, -1, "m")],
                                      api_version=8)
    assert committed == {("t", 0): ErrorCode.NONE}
    assert await groups.await_written("g") == ErrorCode.NONE
    # A new coordinator over the same partitions replays them.
    again = GroupCoordinator(config(), topics, single_node=True)
    index = again.partition_for("g")
    assert again.group_error("g") == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    async with trio.open_nursery() as nursery:
        await nursery.start(again.run)
        await trio.testing.wait_all_tasks_blocked()
        assert again.runtime.is_loaded(index)
        [fetched] = again.fetch_offsets("g", [("t", [0])])
        assert (fetched.offset, fetched.metadata) == (42, "m")
        again.on_partition_leadership(index, False)
        assert again.group_error("g") == ErrorCode.NOT_COORDINATOR and "g" not in again.groups
        nursery.cancel_scope.cancel()


def _transaction_coordinator(topics: Topics, markers) -> TransactionCoordinator:
    """A single node's transaction coordinator over ``topics``, writing markers with ``markers``."""
    next_id = iter(range(1000, 2000))

    class ProducerIds:
        async def next_producer_id(self) -> int:
            return next(next_id)

    async def offsets_partition_for(group_id: str) -> int:
        raise AssertionError("no AddOffsetsToTxn here")

    return TransactionCoordinator(
        config(), topics, node_id=NODE, single_node=True, producer_ids=ProducerIds(),
        offsets_partition_for=offsets_partition_for, write_markers=markers, send_markers=None)


async def _commit_one_record(coordinator: TransactionCoordinator, orders: Topic) -> tuple[int, int]:
    """Transactional id ``tx`` initialised, one record written to orders-0 and the commit asked for (it is then
    completed in the coordinator's own time): the producer id and epoch."""
    await coordinator.ensure_topic()
    error, producer_id, epoch = await coordinator.init_producer_id("tx", 60_000)
    assert (error, producer_id, epoch) == (ErrorCode.NONE, 1000, 0)
    assert await coordinator.add_partitions("tx", producer_id, epoch, [("orders", 0)]) == {
        ("orders", 0): ErrorCode.NONE}
    orders.partitions[0].append(bytearray(build_batch([(None, b"x")], producer_id=producer_id,
                                                      producer_epoch=epoch, base_sequence=0,
                                                      is_transactional=True)))
    assert await coordinator.end_transaction("tx", producer_id, epoch, committed=True) == ErrorCode.NONE
    return producer_id, epoch


async def test_the_transaction_coordinator_runs_a_transaction_without_a_server(tmp_path):
    topics = Topics(tmp_path)
    orders = await topics.create("orders", 1)

    async def local_markers(markers):
        return await write_markers(topics, markers)

    coordinator = _transaction_coordinator(topics, local_markers)
    async with trio.open_nursery() as nursery:
        await nursery.start(coordinator.run)
        producer_id, epoch = await _commit_one_record(coordinator, orders)
        await trio.testing.wait_all_tasks_blocked()
        assert coordinator.describe("tx").state is TransactionState.COMPLETE_COMMIT
        assert orders.partitions[0].last_stable_offset == orders.partitions[0].log_end_offset == 2  # the marker
        # Its state is in __transaction_state: a coordinator that loads it knows the id.
        index = coordinator.partition_for("tx")
        coordinator.on_partition_leadership(index, False)
        with pytest.raises(KafkaError) as moved:
            coordinator.describe("tx")
        assert moved.value.code == ErrorCode.NOT_COORDINATOR
        coordinator.on_partition_leadership(index, True)
        await trio.testing.wait_all_tasks_blocked()
        assert coordinator.describe("tx").producer_id == producer_id
        assert topics.get(TRANSACTION_STATE_TOPIC) is not None and topics.get(OFFSETS_TOPIC) is None
        nursery.cancel_scope.cancel()


async def test_a_transaction_decided_before_a_new_leader_epoch_of_the_same_leader_is_still_completed(tmp_path):
    # The controller takes a replica out of __transaction_state's ISR and bumps the leader epoch; this broker
    # still leads it, keeps it loaded, and must still finish the transactions it had decided.
    topics = Topics(tmp_path)
    orders = await topics.create("orders", 1)
    calls = []

    async def local_markers(markers):
        calls.append(markers)
        if len(calls) == 1:  # the first attempt fails, and meanwhile the leader epoch moves on
            state = topics.get(TRANSACTION_STATE_TOPIC).partitions[coordinator.partition_for("tx")]
            state.set_state(NODE, state.leader_epoch + 1, [NODE], [NODE])
            coordinator.on_partition_leadership(state.index, True)
            return {key: ErrorCode.NOT_ENOUGH_REPLICAS for marker in markers for key in marker.partitions}
        return await write_markers(topics, markers)

    coordinator = _transaction_coordinator(topics, local_markers)
    async with trio.open_nursery() as nursery:
        await nursery.start(coordinator.run)
        await _commit_one_record(coordinator, orders)
        with trio.fail_after(5):
            while coordinator.describe("tx").state is not TransactionState.COMPLETE_COMMIT:
                await trio.sleep(0.05)
        assert len(calls) == 2 and orders.partitions[0].last_stable_offset == 2  # the marker, on the retry
        nursery.cancel_scope.cancel()
