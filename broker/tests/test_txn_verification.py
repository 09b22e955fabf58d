"""Transaction verification on Produce (KIP-890 part 1; broker.txn.verification, the Produce handler,
the verification guard in storage.producer_state and the batching peer channel), against the in-process
broker with its own transaction coordinator."""
from __future__ import annotations

import uuid

import pytest
import trio

from trafka.broker.config import BrokerConfig
from trafka.broker.tests.test_produce_fetch import create_topic
from trafka.broker.txn import verification
from trafka.broker.txn.channel import PeerChannel
from trafka.storage.producer_state import ProducerStateManager
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ProduceRequest,
)
from trafka.wire.records import SimpleRecord, build_batch

TOPIC = "verified"
NOT_READY = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
             ErrorCode.CONCURRENT_TRANSACTIONS}
FEW = {"transaction.state.log.num.partitions": "2"}


def txn_batch(pid: int, epoch: int, sequence: int = 0, value: bytes = b"v") -> bytes:
    return build_batch([SimpleRecord(None, value)], producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                       is_transactional=True)


async def _ready(send, code_of, timeout: float = 10.0):
    with trio.fail_after(timeout):
        while True:
            response = await send()
            if code_of(response) not in NOT_READY:
                return response
            await trio.sleep(0.05)


async def init(client, txn: str) -> tuple[int, int]:
    await client.request(FindCoordinatorRequest(key_type=1, coordinator_keys=[txn]), 4)
    response = await _ready(lambda: client.request(InitProducerIdRequest(
        transactional_id=txn, transaction_timeout_ms=60_000), 4), lambda r: r.error_code)
    assert response.error_code == ErrorCode.NONE
    return response.producer_id, response.producer_epoch


async def add(client, txn: str, pid: int, epoch: int, partitions: list[int]) -> None:
    response = await _ready(lambda: client.request(AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=TOPIC, partitions=partitions)]),
        3), lambda r: max(p.partition_error_code for t in r.results_by_topic_v3_and_below
                          for p in t.results_by_partition))
    assert {p.partition_error_code for t in response.results_by_topic_v3_and_below
            for p in t.results_by_partition} == {ErrorCode.NONE}


async def end(client, txn: str, pid: int, epoch: int, committed: bool) -> None:
    response = await _ready(lambda: client.request(EndTxnRequest(
        transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=committed), 3), lambda r: r.error_code)
    assert response.error_code == ErrorCode.NONE


async def produce(client, txn: str | None, batches: dict[int, bytes], version: int = 9):
    response = await client.request(ProduceRequest(transactional_id=txn, acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=TOPIC, partition_data=[
            ProduceRequest.PartitionProduceData(index=i, records=b) for i, b in batches.items()])]), version)
    return {p.index: p for p in response.responses[0].partition_responses}


def log_end(running, index: int = 0) -> int:
    return running.broker.topics.get(TOPIC).partitions[index].log_end_offset


async def test_an_unadded_partition_is_refused_by_code_per_version_and_nothing_is_stored(broker_factory):
    running = await broker_factory(FEW)
    client = await running.client()
    await create_topic(client, TOPIC, 2)
    txn = f"t-{uuid.uuid4().hex[:6]}"
    pid, epoch = await init(client, txn)
    for version, code in ((3, ErrorCode.INVALID_TXN_STATE), (10, ErrorCode.INVALID_TXN_STATE),
                          (11, ErrorCode.TRANSACTION_ABORTABLE), (12, ErrorCode.TRANSACTION_ABORTABLE)):
        result = (await produce(client, txn, {0: txn_batch(pid, epoch)}, version))[0]
        assert (result.error_code, result.base_offset) == (code, -1), version
    assert log_end(running) == 0
    # Added: the same write goes in; the partition left out of the transaction is still refused and
    # the rest of the request served.
    await add(client, txn, pid, epoch, [0])
    results = await produce(client, txn, {0: txn_batch(pid, epoch), 1: txn_batch(pid, epoch)})
    assert (results[0].error_code, results[0].base_offset) == (ErrorCode.NONE, 0)
    assert results[1].error_code == ErrorCode.INVALID_TXN_STATE
    assert (log_end(running, 0), log_end(running, 1)) == (1, 0)
    # The transaction is open in the partition now: the next batch is not verified again.
    asked = []
    real = verification.verify

    async def counting(*args):
        asked.append(args)
        return await real(*args)

    verification.verify = counting
    try:
        result = (await produce(client, txn, {0: txn_batch(pid, epoch, 1)}))[0]
    finally:
        verification.verify = real
    assert (result.error_code, asked) == (ErrorCode.NONE, [])


async def test_a_late_write_after_the_abort_is_refused_and_does_not_hold_the_lso(broker_factory):
    running = await broker_factory(FEW)
    client = await running.client()
    await create_topic(client, TOPIC, 1)
    txn = f"t-{uuid.uuid4().hex[:6]}"
    pid, epoch = await init(client, txn)
    await add(client, txn, pid, epoch, [0])
    assert (await produce(client, txn, {0: txn_batch(pid, epoch)}))[0].error_code == ErrorCode.NONE
    await end(client, txn, pid, epoch, committed=False)
    partition = running.broker.topics.get(TOPIC).partitions[0]
    with trio.fail_after(10):
        while partition.log_end_offset < 2:  # the abort marker
            await trio.sleep(0.02)
    result = (await produce(client, txn, {0: txn_batch(pid, epoch, 1)}))[0]
    assert result.error_code == ErrorCode.INVALID_TXN_STATE
    assert partition.log_end_offset == partition.last_stable_offset == 2


async def test_a_fenced_or_unknown_producer_is_refused_with_kafkas_codes(broker_factory):
    running = await broker_factory(FEW)
    client = await running.client()
    await create_topic(client, TOPIC, 1)
    txn = f"t-{uuid.uuid4().hex[:6]}"
    pid, epoch = await init(client, txn)
    await init(client, txn)  # bumps the epoch: the first is fenced
    assert (await produce(client, txn, {0: txn_batch(pid, epoch)}))[0].error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert (await produce(client, txn, {0: txn_batch(pid + 77, 0)}))[0].error_code == \
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert log_end(running) == 0


async def test_plain_and_idempotent_produce_and_a_disabled_check_go_through(broker_factory):
    running = await broker_factory({**FEW, "transaction.partition.verification.enable": "false"})
    assert running.broker.config.transaction_partition_verification_enable is False
    client = await running.client()
    await create_topic(client, TOPIC, 1)
    txn = f"t-{uuid.uuid4().hex[:6]}"
    pid, epoch = await init(client, txn)
    assert (await produce(client, txn, {0: txn_batch(pid, epoch)}))[0].error_code == ErrorCode.NONE
    assert (await produce(client, None, {0: build_batch([SimpleRecord(None, b"x")])}))[0].error_code == ErrorCode.NONE


async def test_a_marker_between_verification_and_append_makes_the_append_refused(broker_factory, monkeypatch):
    """The guard: the coordinator confirmed the partition, then the abort marker landed before the
    append (as it may while a remote coordinator's answer is awaited): nothing is appended."""
    running = await broker_factory(FEW)
    client = await running.client()
    await create_topic(client, TOPIC, 1)
    partition = running.broker.topics.get(TOPIC).partitions[0]
    pid, epoch = 9000, 0

    async def confirmed_then_aborted(coordinator, peers, node_id, txn, producer_id, producer_epoch, partitions):
        partition.append_marker(producer_id, producer_epoch, 0, False)
        await trio.sleep(0)
        return dict.fromkeys(partitions, ErrorCode.NONE)

    monkeypatch.setattr(verification, "verify", confirmed_then_aborted)
    result = (await produce(client, "zombie", {0: txn_batch(pid, epoch)}))[0]
    assert (result.error_code, result.error_message) == (ErrorCode.INVALID_TXN_STATE,
                                                         verification.APPEND_NOT_VERIFIED_MESSAGE)
    assert partition.log_end_offset == partition.last_stable_offset == 1  # the marker alone

    async def confirmed(coordinator, peers, node_id, txn, producer_id, producer_epoch, partitions):
        await trio.sleep(0)
        return dict.fromkeys(partitions, ErrorCode.NONE)

    monkeypatch.setattr(verification, "verify", confirmed)
    assert (await produce(client, "zombie", {0: txn_batch(pid, epoch)}))[0].error_code == ErrorCode.NONE


async def test_transactional_batches_of_two_producers_in_one_request_are_refused(broker_factory):
    running = await broker_factory(FEW)
    client = await running.client()
    await create_topic(client, TOPIC, 2)
    results = await produce(client, "two", {0: txn_batch(1, 0), 1: txn_batch(2, 0)})
    assert {r.error_code for r in results.values()} == {ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    assert log_end(running, 0) == log_end(running, 1) == 0


def test_the_guard_falls_with_any_transactional_append_of_its_producer(tmp_path):
    state = ProducerStateManager(tmp_path)
    guard = state.start_verification(5)
    assert state.start_verification(5) is guard and state.verified(5, guard)
    assert not state.verified(6, guard)
    batch = bytearray(txn_batch(5, 0))
    from trafka.wire.records import RecordBatch
    state.begin_append()
    state.record(RecordBatch(batch), 0, 0)
    state.commit_append()
    assert not state.verified(5, guard)
    assert state.has_ongoing_transaction(5, 0) and not state.has_ongoing_transaction(5, 1)
    other = state.start_verification(7)
    state.remove_expired(other.created_ms + state.max_producer_id_expiration_ms)
    assert state.verified(7, other)
    state.remove_expired(other.created_ms + state.max_producer_id_expiration_ms + 1)
    assert not state.verified(7, other)
    third = state.start_verification(8)
    state.drop_verification(third)
    assert not state.verified(8, third)


@pytest.mark.parametrize(("code", "version", "expected"), [
    (ErrorCode.INVALID_TXN_STATE, 10, ErrorCode.INVALID_TXN_STATE),
    (ErrorCode.TRANSACTION_ABORTABLE, 10, ErrorCode.INVALID_TXN_STATE),
    (ErrorCode.INVALID_TXN_STATE, 11, ErrorCode.TRANSACTION_ABORTABLE),
    (ErrorCode.PRODUCER_FENCED, 9, ErrorCode.INVALID_PRODUCER_EPOCH),
    (ErrorCode.NOT_COORDINATOR, 9, ErrorCode.NOT_ENOUGH_REPLICAS),
    (ErrorCode.NETWORK_EXCEPTION, 11, ErrorCode.NOT_ENOUGH_REPLICAS),
    (ErrorCode.CONCURRENT_TRANSACTIONS, 9, ErrorCode.NOT_ENOUGH_REPLICAS),
    (ErrorCode.INVALID_PRODUCER_ID_MAPPING, 9, ErrorCode.INVALID_PRODUCER_ID_MAPPING),
])
def test_coordinator_errors_become_kafkas_produce_errors(code, version, expected):
    assert verification.produce_error(code, version)[0] == expected


def test_the_property_is_parsed_and_described():
    assert BrokerConfig.from_properties({}).transaction_partition_verification_enable is True
    config = BrokerConfig.from_properties({"transaction.partition.verification.enable": "false"})
    assert config.transaction_partition_verification_enable is False
    from trafka.storage.config_defs import BROKER_CONFIG_DEFS
    assert BROKER_CONFIG_DEFS["transaction.partition.verification.enable"].field == \
        "transaction_partition_verification_enable"


class _FakeConnection:
    broken = False

    def __init__(self) -> None:
        self.requests: list[AddPartitionsToTxnRequest] = []
        self.release = trio.Event()

    def api_versions(self, api_key: int, *, minimum: int | None = None) -> int:
        return 5

    async def request(self, message, version, *, timeout_s=None):
        self.requests.append(message)
        await self.release.wait()
        R = AddPartitionsToTxnResponse
        return R(error_code=0, results_by_transaction=[R.AddPartitionsToTxnResult(
            transactional_id=t.transactional_id, topic_results=[R.AddPartitionsToTxnTopicResult(
                name=topic.name, results_by_partition=[R.AddPartitionsToTxnPartitionResult(
                    partition_index=p, partition_error_code=ErrorCode.NONE if p == 0 else ErrorCode.INVALID_TXN_STATE)
                    for p in topic.partitions]) for topic in t.topics]) for t in message.transactions])


async def test_verifications_for_one_coordinator_are_batched():
    channel = PeerChannel(lambda: {})
    connection = _FakeConnection()

    async def connect(broker_id, purpose):
        return connection

    channel._connection = connect
    results = {}

    async def ask(txn, partitions):
        results[txn] = await channel.verify(2, txn, 1, 0, partitions)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, "a", [(TOPIC, 0)])
        await trio.sleep(0.01)  # "a" is in flight; the next three wait and go together
        nursery.start_soon(ask, "b", [(TOPIC, 0), (TOPIC, 1)])
        nursery.start_soon(ask, "c", [(TOPIC, 1)])
        nursery.start_soon(ask, "b2", [(TOPIC, 0)])
        await trio.sleep(0.01)
        connection.release.set()
    batches = [sorted(t.transactional_id for t in r.transactions) for r in connection.requests]
    assert batches == [["a"], ["b", "b2", "c"]]
    assert all(t.verify_only for r in connection.requests for t in r.transactions)
    assert results == {"a": {(TOPIC, 0): ErrorCode.NONE},
                       "b": {(TOPIC, 0): ErrorCode.NONE, (TOPIC, 1): ErrorCode.INVALID_TXN_STATE},
                       "c": {(TOPIC, 1): ErrorCode.INVALID_TXN_STATE}, "b2": {(TOPIC, 0): ErrorCode.NONE}}


async def test_an_unreachable_coordinator_is_network_exception_for_each_partition():
    channel = PeerChannel(lambda: {})  # no live brokers
    assert await channel.verify(3, "x", 1, 0, [(TOPIC, 0)]) == {(TOPIC, 0): ErrorCode.NETWORK_EXCEPTION}


async def test_a_second_verification_for_the_same_id_goes_in_the_next_request():
    channel = PeerChannel(lambda: {})
    connection = _FakeConnection()

    async def connect(broker_id, purpose):
        return connection

    channel._connection = connect
    async with trio.open_nursery() as nursery:
        nursery.start_soon(channel.verify, 2, "a", 1, 0, [(TOPIC, 0)])
        await trio.sleep(0.01)
        nursery.start_soon(channel.verify, 2, "b", 1, 0, [(TOPIC, 0)])
        nursery.start_soon(channel.verify, 2, "b", 1, 0, [(TOPIC, 1)])
        await trio.sleep(0.01)
        connection.release.set()
    assert [[t.transactional_id for t in r.transactions] for r in connection.requests] == [["a"], ["b"], ["b"]]
