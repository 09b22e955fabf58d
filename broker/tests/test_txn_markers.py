"""The partition side of transactions: markers appended by the leader (broker.partition,
broker.txn.markers), the last stable offset and the aborted transactions read_committed consumers get
(Fetch, ListOffsets), read_committed long polls woken by the last stable offset alone, the producers a
partition knows (DescribeProducers) and the WriteTxnMarkers handler, against real logs in tmp_path and an
in-process broker."""
from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio
import trio.testing

from trafka.broker.handlers import describe_producers, write_txn_markers  # noqa: F401  (registers the handlers)
from trafka.broker.partition import DataWaiter, Partition
from trafka.broker.tests.conftest import KafkaClient, RunningBroker
from trafka.broker.tests.test_produce_fetch import create_topic, produce
from trafka.broker.topics import OFFSETS_TOPIC, Topic
from trafka.broker.txn.markers import TxnMarker, write_markers
from trafka.storage.config import LogConfig
from trafka.storage.log import Log
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import (
    DescribeProducersRequest,
    FetchRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    WriteTxnMarkersRequest,
)
from trafka.wire.records import ControlRecordType, SimpleRecord, build_batch, build_control_batch, iter_batches

PID, EPOCH = 4000, 3


def txn_batch(values_: list[bytes], *, sequence: int = 0, pid: int = PID, epoch: int = EPOCH,
              timestamp: int | None = None) -> bytearray:
    records = [SimpleRecord(None, v, timestamp=timestamp) if timestamp is not None else SimpleRecord(None, v)
               for v in values_]
    return bytearray(build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                                 is_transactional=True))


def plain_batch(value: bytes, timestamp: int | None = None) -> bytearray:
    record = SimpleRecord(None, value, timestamp=timestamp) if timestamp is not None else SimpleRecord(None, value)
    return bytearray(build_batch([record]))


def leader(tmp_path: Path, name: str = "orders-0", *, replicas: list[int] | None = None) -> Partition:
    log = Log.create(tmp_path / name, LogConfig(), now_ms=0)
    topic, index = name.rsplit("-", 1)
    if replicas is None:
        return Partition(topic, uuid.uuid4(), int(index), log, 1)
    partition = Partition(topic, uuid.uuid4(), int(index), log, 1, replicas=replicas)
    partition.set_state(1, 1, replicas, replicas, now_ms=0)
    return partition


def read_all(partition: Partition, offset: int = 0, *, read_committed: bool):
    info = partition.read(offset, 1 << 20, min_one_batch=True, read_committed=read_committed)
    return (b"" if info.records is None else info.records.read()), info


def values(records) -> list[tuple[int, bytes | None]]:
    """The data records' offsets and values (control batches left out, as a consumer leaves them)."""
    return [(r.offset, r.value) for batch in iter_batches(bytes(records or b"")) if not batch.is_control
            for r in batch.records()]


def control_types(data: bytes) -> list[tuple[int, bool]]:
    return [(batch.base_offset, batch.is_control) for batch in iter_batches(data)]


# -- Partition.append_marker and the last stable offset -------------------------------------------------------


def test_an_open_transaction_holds_the_last_stable_offset_until_its_commit_marker(tmp_path):
    partition = leader(tmp_path)
    partition.append(plain_batch(b"before"))
    partition.append(txn_batch([b"t1", b"t2"]))
    partition.append(plain_batch(b"after"))
    assert (partition.high_watermark, partition.last_stable_offset) == (4, 1)
    data, info = read_all(partition, read_committed=True)
    assert values(data) == [(0, b"before")]
    assert info.aborted_transactions == []

    marker = partition.append_marker(PID, EPOCH, 7, True)
    assert (marker.first_offset, marker.last_offset) == (4, 4)
    assert partition.high_watermark == partition.last_stable_offset == partition.log_end_offset == 5
    data, info = read_all(partition, read_committed=True)
    assert values(data) == [(0, b"before"), (1, b"t1"), (2, b"t2"), (3, b"after")]
    assert control_types(data)[-1] == (4, True)
    assert info.aborted_transactions == []
    entry = partition.log.producer_state.last_entry(PID)
    assert (entry.coordinator_epoch, entry.current_txn_first_offset) == (7, None)


def test_an_abort_marker_makes_the_transaction_an_aborted_one_for_read_committed_readers(tmp_path):
    partition = leader(tmp_path)
    partition.append(txn_batch([b"gone"]))
    partition.append_marker(PID, EPOCH, 0, False)
    data, info = read_all(partition, read_committed=True)
    assert [(t.producer_id, t.first_offset) for t in info.aborted_transactions] == [(PID, 0)]
    data, info = read_all(partition, read_committed=False)
    assert values(data) == [(0, b"gone")]
    assert info.aborted_transactions is None
    (control,) = [b for b in iter_batches(data) if b.is_control]
    (record,) = list(control.records())
    assert record.key[2:4] == int(ControlRecordType.ABORT).to_bytes(2, "big")


def test_a_marker_from_an_older_coordinator_epoch_is_fenced_and_nothing_is_written(tmp_path):
    partition = leader(tmp_path)
    partition.append(txn_batch([b"a"]))
    partition.append_marker(PID, EPOCH, 5, True)
    partition.append(txn_batch([b"b"], sequence=1))
    with pytest.raises(KafkaError) as raised:
        partition.append_marker(PID, EPOCH, 4, False)
    assert raised.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert partition.log_end_offset == 3
    assert partition.last_stable_offset == 2  # still open


def test_a_marker_from_an_older_producer_epoch_is_refused(tmp_path):
    partition = leader(tmp_path)
    partition.append(txn_batch([b"a"]))
    with pytest.raises(KafkaError) as raised:
        partition.append_marker(PID, EPOCH - 1, 0, True)
    assert raised.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert partition.log_end_offset == 1


def test_a_transaction_version_2_marker_needs_a_newer_epoch_unless_it_repeats_the_last(tmp_path):
    partition = leader(tmp_path)
    partition.append(txn_batch([b"a"]))
    with pytest.raises(KafkaError) as raised:
        partition.append_marker(PID, EPOCH, 0, True, transaction_version=2)
    assert raised.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    partition.append_marker(PID, EPOCH, 0, True)  # legacy: the same epoch closes it
    partition.append_marker(PID, EPOCH, 0, True, transaction_version=2)  # a retry once closed
    partition.append(txn_batch([b"b"], sequence=1))
    partition.append_marker(PID, EPOCH + 1, 0, True, transaction_version=2)
    assert partition.last_stable_offset == partition.log_end_offset == 5


def test_only_the_leader_appends_markers(tmp_path):
    partition = leader(tmp_path, replicas=[1, 2])
    partition.set_state(2, 2, [1, 2], [1, 2], now_ms=0)
    with pytest.raises(KafkaError) as raised:
        partition.append_marker(PID, EPOCH, 0, True)
    assert raised.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_with_followers_the_last_stable_offset_moves_once_the_marker_is_replicated(tmp_path):
    partition = leader(tmp_path, replicas=[1, 2])
    partition.append(txn_batch([b"a", b"b"]))
    partition.read_for_follower(2, 2, 1 << 20, min_one_batch=True, now_ms=1)
    assert (partition.high_watermark, partition.last_stable_offset) == (2, 0)
    partition.append_marker(PID, EPOCH, 0, True)
    assert (partition.high_watermark, partition.last_stable_offset) == (2, 0)
    partition.read_for_follower(2, 3, 1 << 20, min_one_batch=True, now_ms=2)
    assert partition.high_watermark == partition.last_stable_offset == 3


def test_a_new_leader_of_a_reloaded_log_does_not_hold_back_transactions_completed_below_its_high_watermark(
        tmp_path):
    # A log not closed cleanly: loading replays the committed transaction, whose marker is below the
    # checkpointed high watermark. The high watermark need not move when this broker becomes leader.
    log = Log.create(tmp_path / "orders-0", LogConfig(), now_ms=0)
    log.append(txn_batch([b"a"]), leader_epoch=0)
    log.append(bytearray(build_batch([SimpleRecord(None, None)])), leader_epoch=0)
    first = Partition("orders", uuid.uuid4(), 0, log, 1)
    first.append_marker(PID, EPOCH, 0, True)
    log.flush()
    reloaded = Log.open(tmp_path / "orders-0", LogConfig(), high_watermark=log.log_end_offset,
                        recovery_point=0, had_clean_shutdown=False)
    assert reloaded.producer_state.first_unstable_offset() == 0  # replayed, awaiting the high watermark
    partition = Partition("orders", uuid.uuid4(), 0, reloaded, 1, replicas=[1, 2])
    partition.set_state(1, 1, [1, 2], [1, 2], now_ms=0)
    assert partition.high_watermark == 3
    assert partition.last_stable_offset == 3


# -- waiters ------------------------------------------------------------------------------------------------


def test_read_committed_waiters_are_woken_by_the_last_stable_offset_only(tmp_path):
    partition = leader(tmp_path)
    uncommitted, committed = DataWaiter(1), DataWaiter(1)
    partition.add_waiter(uncommitted)
    partition.add_waiter(committed, read_committed=True)
    partition.append(txn_batch([b"held back"]))
    assert uncommitted.event.is_set()
    assert not committed.event.is_set()
    partition.append(plain_batch(b"after the open transaction"))
    assert not committed.event.is_set()
    partition.append_marker(PID, EPOCH, 0, False)
    assert committed.event.is_set()
    assert committed.accumulated == partition.log.active_segment.size  # all three batches
    partition.remove_waiter(committed)
    later = DataWaiter(1)
    partition.add_waiter(later, read_committed=True)
    partition.append(plain_batch(b"plain"))  # no transaction open: stable at once
    assert later.event.is_set()


def test_with_followers_read_committed_waiters_wait_for_the_replicated_marker(tmp_path):
    partition = leader(tmp_path, replicas=[1, 2])
    committed = DataWaiter(1)
    partition.add_waiter(committed, read_committed=True)
    partition.append(txn_batch([b"a"]))
    partition.read_for_follower(2, 1, 1 << 20, min_one_batch=True, now_ms=1)
    partition.append_marker(PID, EPOCH, 0, True)
    assert not committed.event.is_set()
    partition.read_for_follower(2, 2, 1 << 20, min_one_batch=True, now_ms=2)
    assert committed.event.is_set()


def test_a_new_leadership_wakes_read_committed_waiters_for_the_transactions_it_inherited(tmp_path):
    partition = leader(tmp_path, replicas=[1, 2])
    partition.append(txn_batch([b"a"]))
    partition.set_state(1, 2, [1], [1, 2], now_ms=0)  # re-elected: a new epoch, the ISR is this broker
    marker_size = len(build_control_batch(ControlRecordType.COMMIT, PID, EPOCH, 0))
    committed = DataWaiter(marker_size + 1)  # more than the marker: the inherited batch must count
    partition.add_waiter(committed, read_committed=True)
    partition.append_marker(PID, EPOCH, 0, True)
    assert committed.event.is_set()


# -- write_markers ------------------------------------------------------------------------------------------


class Topics:
    """The topic lookup write_markers is given: real topics over partitions made here."""

    def __init__(self, topics: dict[str, list[Partition]], *, min_insync_replicas: int = 1) -> None:
        self._topics = {name: Topic(name, uuid.uuid4(), {}, LogConfig(min_insync_replicas=min_insync_replicas),
                                    partitions) for name, partitions in topics.items()}

    def get(self, name: str) -> Topic | None:
        return self._topics.get(name)


async def test_write_markers_answers_each_partition(tmp_path):
    led = leader(tmp_path, "orders-0")
    led.append(txn_batch([b"a"]))
    follower = leader(tmp_path, "orders-1", replicas=[1, 2])
    follower.set_state(2, 1, [1, 2], [1, 2], now_ms=0)
    elsewhere = Partition("orders", uuid.uuid4(), 2, None, 1, replicas=[2, 3])
    broker = Topics({"orders": [led, follower, elsewhere]})
    marker = TxnMarker(PID, EPOCH, 0, True, [("orders", 0), ("orders", 1), ("orders", 2), ("orders", 3),
                                             ("nowhere", 0)])
    results = await write_markers(broker, [marker])
    assert results == {
        ("orders", 0): ErrorCode.NONE,
        ("orders", 1): ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ("orders", 2): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("orders", 3): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("nowhere", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert led.last_stable_offset == led.log_end_offset == 2
    fenced = await write_markers(broker, [TxnMarker(PID, EPOCH, -1, False, [("orders", 0)])])
    assert fenced == {("orders", 0): ErrorCode.TRANSACTION_COORDINATOR_FENCED}
    assert led.log_end_offset == 2


async def test_write_markers_refuses_a_partition_below_min_insync_replicas(tmp_path):
    partition = leader(tmp_path, replicas=[1, 2])
    partition.set_state(1, 1, [1], [1, 2], now_ms=0)
    broker = Topics({"orders": [partition]}, min_insync_replicas=2)
    assert await write_markers(broker, [TxnMarker(PID, EPOCH, 0, True, [("orders", 0)])]) == {
        ("orders", 0): ErrorCode.NOT_ENOUGH_REPLICAS}
    assert partition.log_end_offset == 0


async def test_write_markers_waits_until_the_marker_is_replicated(tmp_path):
    partition = leader(tmp_path, replicas=[1, 2])
    partition.append(txn_batch([b"a"]))
    broker = Topics({"orders": [partition]})
    results = {}

    async def write():
        results.update(await write_markers(broker, [TxnMarker(PID, EPOCH, 0, True, [("orders", 0)])]))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write)
        await trio.testing.wait_all_tasks_blocked()
        assert partition.log_end_offset == 2 and not results
        partition.read_for_follower(2, 1, 1 << 20, min_one_batch=True)
        await trio.testing.wait_all_tasks_blocked()
        assert not results  # the marker itself is not replicated yet
        partition.read_for_follower(2, 2, 1 << 20, min_one_batch=True)
    assert results == {("orders", 0): ErrorCode.NONE}


async def test_write_markers_times_out_or_loses_the_leadership(tmp_path):
    partition = leader(tmp_path, replicas=[1, 2])
    partition.append(txn_batch([b"a"]))
    broker = Topics({"orders": [partition]})
    marker = TxnMarker(PID, EPOCH, 0, True, [("orders", 0)])
    assert await write_markers(broker, [marker], timeout_s=0.05) == {("orders", 0): ErrorCode.REQUEST_TIMED_OUT}
    results = {}

    async def write():
        results.update(await write_markers(broker, [marker._replace(committed=False)]))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write)
        await trio.testing.wait_all_tasks_blocked()
        partition.set_state(2, 2, [1, 2], [1, 2], now_ms=0)
    assert results == {("orders", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER}


async def test_each_replicated_marker_is_reported(tmp_path):
    offsets = [leader(tmp_path, f"{OFFSETS_TOPIC}-{i}") for i in range(2)]
    replicated = []
    topics = Topics({OFFSETS_TOPIC: offsets, "orders": [leader(tmp_path, "orders-0")]})

    def on_replicated(partition, marker):
        replicated.append((partition, marker.producer_id, marker.committed))

    await write_markers(topics, [TxnMarker(PID, EPOCH, 5, True, [(OFFSETS_TOPIC, 1), ("orders", 0)])],
                        on_replicated=on_replicated)
    assert replicated == [((OFFSETS_TOPIC, 1), PID, True), (("orders", 0), PID, True)]
    results = await write_markers(topics, [TxnMarker(PID, EPOCH, 3, False, [(OFFSETS_TOPIC, 0), (OFFSETS_TOPIC, 1)])],
                                  on_replicated=on_replicated)
    assert results[(OFFSETS_TOPIC, 1)] == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert replicated[2:] == [((OFFSETS_TOPIC, 0), PID, False)]


# -- the handlers, through an in-process broker ------------------------------------------------------------


async def init_producer(client: KafkaClient) -> tuple[int, int]:
    response = await client.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000), 4)
    assert response.error_code == ErrorCode.NONE
    return response.producer_id, response.producer_epoch


def markers_request(*markers: tuple[int, int, bool, dict[str, list[int]]], coordinator_epoch: int = 0,
                    transaction_version: int = 0) -> WriteTxnMarkersRequest:
    W = WriteTxnMarkersRequest
    return W(markers=[
        W.WritableTxnMarker(producer_id=pid, producer_epoch=epoch, transaction_result=committed,
                            coordinator_epoch=coordinator_epoch, transaction_version=transaction_version,
                            topics=[W.WritableTxnMarkerTopic(name=name, partition_indexes=indexes)
                                    for name, indexes in topics.items()])
        for pid, epoch, committed, topics in markers
    ])


def marker_codes(response) -> list[tuple[int, str, int, int]]:
    return [(m.producer_id, t.name, p.partition_index, p.error_code)
            for m in response.markers for t in m.topics for p in t.partitions]


def fetch_request(topic: str, offset: int, *, isolation_level: int, max_wait_ms: int = 0,
                  partition: int = 0) -> FetchRequest:
    return FetchRequest(max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=isolation_level,
                        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                            partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20)])])


async def fetch(client: KafkaClient, topic: str, offset: int = 0, **kwargs):
    response = await client.request(fetch_request(topic, offset, **kwargs), 12)
    return response.responses[0].partitions[0]


async def list_offset(client: KafkaClient, topic: str, timestamp: int, isolation_level: int) -> tuple[int, int]:
    L = ListOffsetsRequest
    response = await client.request(L(replica_id=-1, isolation_level=isolation_level, topics=[L.ListOffsetsTopic(
        name=topic, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])]), 7)
    found = response.topics[0].partitions[0]
    assert found.error_code == ErrorCode.NONE
    return found.offset, found.timestamp


async def test_write_txn_markers_commits_and_aborts_what_fetch_and_list_offsets_then_show(
        client: KafkaClient, broker: RunningBroker):
    await create_topic(client, "ledger")
    pid, epoch = await init_producer(client)
    other, other_epoch = await init_producer(client)
    await produce(client, "ledger", bytes(txn_batch([b"kept"], pid=pid, epoch=epoch)))
    await produce(client, "ledger", bytes(txn_batch([b"dropped"], pid=other, epoch=other_epoch)))
    committed = await fetch(client, "ledger", isolation_level=1)
    assert (committed.high_watermark, committed.last_stable_offset) == (2, 0)
    assert values(committed.records) == [] and committed.aborted_transactions == []
    uncommitted = await fetch(client, "ledger", isolation_level=0)
    assert uncommitted.last_stable_offset == 0 and uncommitted.aborted_transactions is None
    assert await list_offset(client, "ledger", -1, 1) == (0, -1)
    assert await list_offset(client, "ledger", -1, 0) == (2, -1)

    # Both markers in one request, each its own result, in request order.
    response = await client.request(markers_request((pid, epoch, True, {"ledger": [0]}),
                                                    (other, other_epoch, False, {"ledger": [0], "nowhere": [1]})), 1)
    assert marker_codes(response) == [(pid, "ledger", 0, 0), (other, "ledger", 0, 0),
                                      (other, "nowhere", 1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    committed = await fetch(client, "ledger", isolation_level=1)
    assert committed.high_watermark == committed.last_stable_offset == 4
    assert values(committed.records) == [(0, b"kept"), (1, b"dropped")]  # the consumer drops the aborted one
    assert [(t.producer_id, t.first_offset) for t in committed.aborted_transactions] == [(other, 1)]
    assert await list_offset(client, "ledger", -1, 1) == (4, -1)

    stale = await client.request(markers_request((pid, epoch, True, {"ledger": [0]}), coordinator_epoch=-3), 2)
    assert marker_codes(stale) == [(pid, "ledger", 0, ErrorCode.TRANSACTION_COORDINATOR_FENCED)]


async def test_timestamp_lookups_under_read_committed_stop_at_the_last_stable_offset(client: KafkaClient):
    await create_topic(client, "stamped")
    pid, epoch = await init_producer(client)
    await produce(client, "stamped", bytes(plain_batch(b"old", timestamp=1_000)))
    await produce(client, "stamped", bytes(txn_batch([b"open"], pid=pid, epoch=epoch, timestamp=5_000)))
    assert await list_offset(client, "stamped", 0, 1) == (0, 1_000)
    assert await list_offset(client, "stamped", 2_000, 1) == (-1, -1)
    assert await list_offset(client, "stamped", 2_000, 0) == (1, 5_000)
    assert await list_offset(client, "stamped", -3, 1) == (-1, -1)  # the largest timestamp is not stable
    assert await list_offset(client, "stamped", -3, 0) == (1, 5_000)
    await client.request(markers_request((pid, epoch, True, {"stamped": [0]})), 1)
    assert await list_offset(client, "stamped", 2_000, 1) == (1, 5_000)
    assert (await list_offset(client, "stamped", -3, 1))[0] == 2  # the marker, stamped with the time it was written


async def test_a_read_committed_long_poll_waits_out_data_held_back_and_wakes_on_the_marker(
        client: KafkaClient, broker: RunningBroker):
    await create_topic(client, "held")
    producer = await broker.client()
    pid, epoch = await init_producer(producer)
    await produce(producer, "held", bytes(txn_batch([b"first"], pid=pid, epoch=epoch)))
    result = {}

    async def long_poll():
        result["partition"] = await fetch(client, "held", 0, isolation_level=1, max_wait_ms=60_000)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(long_poll)
            await trio.testing.wait_all_tasks_blocked()
            await produce(producer, "held", bytes(txn_batch([b"second"], sequence=1, pid=pid, epoch=epoch)))
            await produce(producer, "held", bytes(plain_batch(b"plain, after it")))
            await trio.sleep(0.2)
            assert not result  # nothing below the last stable offset: the fetch goes on waiting
            await producer.request(markers_request((pid, epoch, True, {"held": [0]})), 1)
    partition = result["partition"]
    assert values(partition.records)[:3] == [(0, b"first"), (1, b"second"), (2, b"plain, after it")]
    assert partition.last_stable_offset == 4


async def test_describe_producers_lists_each_partitions_producers(client: KafkaClient):
    await create_topic(client, "described", partitions=2)
    pid, epoch = await init_producer(client)
    idempotent, idempotent_epoch = await init_producer(client)
    await produce(client, "described", bytes(txn_batch([b"a", b"b"], pid=pid, epoch=epoch)))
    await produce(client, "described", build_batch([SimpleRecord(None, b"c")], producer_id=idempotent,
                                                   producer_epoch=idempotent_epoch, base_sequence=0))
    R = DescribeProducersRequest
    response = await client.request(R(topics=[R.TopicRequest(name="described", partition_indexes=[0, 1, 2]),
                                              R.TopicRequest(name="nowhere", partition_indexes=[0]),
                                              R.TopicRequest(name="bad/name", partition_indexes=[0])]), 0)
    described, nowhere, bad = response.topics
    first, second, third = described.partitions
    assert first.error_code == ErrorCode.NONE
    producers = {p.producer_id: p for p in first.active_producers}
    assert sorted(producers) == sorted([pid, idempotent])
    txn = producers[pid]
    assert (txn.producer_epoch, txn.last_sequence, txn.coordinator_epoch, txn.current_txn_start_offset) == (
        epoch, 1, -1, 0)
    assert txn.last_timestamp > 0
    assert (producers[idempotent].last_sequence, producers[idempotent].current_txn_start_offset) == (0, -1)
    assert (second.error_code, second.active_producers) == (ErrorCode.NONE, [])
    assert third.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert nowhere.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert bad.partitions[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION

    await client.request(markers_request((pid, epoch, False, {"described": [0]}), coordinator_epoch=9), 1)
    response = await client.request(R(topics=[R.TopicRequest(name="described", partition_indexes=[0])]), 0)
    txn = {p.producer_id: p for p in response.topics[0].partitions[0].active_producers}[pid]
    assert (txn.coordinator_epoch, txn.current_txn_start_offset) == (9, -1)
