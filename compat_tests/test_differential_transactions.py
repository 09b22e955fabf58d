"""The transaction coordinator's answers compared with Apache Kafka's, request by request: one scripted
conversation of InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions and
ListTransactions, with the mistakes a producer can make (a fenced epoch, an unknown producer id, a
commit after an abort, a timeout above the maximum, an unknown partition, an empty transaction's end),
each at old and new versions where the error code differs by version. Producer ids differ between the
brokers, so answers are compared by code and by the epoch they give."""
from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.harness import BrokerProcess
from compat_tests.reference import KafkaBroker
from compat_tests.test_differential import assert_same, on_both, side_by_side
from compat_tests.wire_client import WireClient
from trafka.broker.txn.records import decode_key, decode_value
from trafka.wire.messages import (
    FetchRequest,
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    CreateTopicsRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListTransactionsRequest,
)
from trafka.wire.records import iter_batches

SETTINGS = {"num.partitions": 1, "transaction.max.timeout.ms": 120_000, "transaction.state.log.num.partitions": 2}
NOT_READY = {14, 15, 16, 51}  # coordinator loading / not available / not coordinator, CONCURRENT_TRANSACTIONS


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, BrokerProcess | KafkaBroker]]:
    with side_by_side(Path(tmp_path_factory.mktemp("txn-differential")), SETTINGS) as started:
        yield started


def until_ready(send, code_of, timeout: float = 30.0):
    """Send until the answer is not a coordinator-not-ready one (the first lookup creates the topic)."""
    deadline = time.monotonic() + timeout
    while True:
        response = send()
        if code_of(response) not in NOT_READY or time.monotonic() > deadline:
            return response
        time.sleep(0.1)


def _partitions(txn: str, pid: int, epoch: int, topics: dict[str, list[int]], version: int = 3):
    return AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=p)
                             for t, p in topics.items()])


def _codes(response) -> list[tuple[str, int, int]]:
    return sorted((t.name, p.partition_index, p.partition_error_code)
                  for t in response.results_by_topic_v3_and_below for p in t.results_by_partition)


def _state_log(client: WireClient, txn: str, first_epoch: int) -> list[tuple]:
    """The records of ``txn`` in its partition of ``__transaction_state``, decoded: per record the state,
    epoch (from the first), timeout and partitions (the group's partition of ``__consumer_offsets`` by
    topic only: the partition counts differ). Kafka 4.4 writes the value's flexible version 1, trafka
    version 0 (as Kafka 3 does for clients of transaction version 1); both decode to the same records."""
    found = []
    for partition in range(SETTINGS["transaction.state.log.num.partitions"]):
        deadline = time.monotonic() + 10
        while True:  # the completion is written after EndTxn is answered: wait until the log settles
            response = client.request(FetchRequest(
                replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, topics=[
                    FetchRequest.FetchTopic(topic="__transaction_state", partitions=[FetchRequest.FetchPartition(
                        partition=partition, fetch_offset=0, partition_max_bytes=1 << 20,
                        current_leader_epoch=-1, log_start_offset=-1)])]), 11)
            data = response.responses[0].partitions[0]
            records = [r for batch in iter_batches(bytes(data.records or b"")) if not batch.is_control
                       for r in batch.records() if decode_key(r.key) == txn]
            if not records or decode_value(records[-1].value).state.display_name != "PrepareAbort" \
                    or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        for record in records:
            value = decode_value(record.value)
            found.append((value.state.display_name, value.producer_epoch - first_epoch,
                          value.timeout_ms, sorted({(t, p if t != "__consumer_offsets" else 0)
                                                   for t, p in value.partitions})))
    return found


def test_the_coordinators_answers_match_kafkas(brokers):
    txn = f"diff-{uuid.uuid4().hex[:6]}"

    def converse(client: WireClient) -> list[object]:
        seen: list[object] = []
        topic = CreateTopicsRequest.CreatableTopic(name="txn-data", num_partitions=2, replication_factor=1,
                                                   assignments=[], configs=[])
        other = CreateTopicsRequest.CreatableTopic(name="txn-other", num_partitions=1, replication_factor=1,
                                                   assignments=[], configs=[])
        client.request(CreateTopicsRequest(topics=[topic, other], timeout_ms=10_000), 7)
        found = until_ready(lambda: client.request(FindCoordinatorRequest(key_type=1, coordinator_keys=[txn]), 4),
                             lambda r: r.coordinators[0].error_code)
        seen.append(("find", found.coordinators[0].error_code))
        init = lambda version, **kw: client.request(InitProducerIdRequest(  # noqa: E731
            transactional_id=txn, transaction_timeout_ms=kw.get("timeout", 60_000),
            producer_id=kw.get("pid", -1), producer_epoch=kw.get("epoch", -1)), version)
        seen.append(("timeout too long", init(4, timeout=120_001).error_code))
        first = until_ready(lambda: init(4), lambda r: r.error_code)
        pid, epoch = first.producer_id, first.producer_epoch
        seen.append(("init", first.error_code, epoch))
        # An empty transaction cannot end; a producer id that is not the id's is refused.
        seen.append(("end empty", client.request(EndTxnRequest(transactional_id=txn, producer_id=pid,
                                                               producer_epoch=epoch, committed=True), 3).error_code))
        seen.append(("wrong pid", _codes(client.request(_partitions(txn, pid + 1000, epoch, {"txn-data": [0]}), 3))))
        seen.append(("unknown partition", _codes(client.request(
            _partitions(txn, pid, epoch, {"txn-data": [0, 7], "nowhere": [0]}), 3))))
        seen.append(("add", _codes(until_ready(
            lambda: client.request(_partitions(txn, pid, epoch, {"txn-data": [0, 1]}), 3),
            lambda r: max(p.partition_error_code for t in r.results_by_topic_v3_and_below
                          for p in t.results_by_partition)))))
        seen.append(("add again", _codes(client.request(_partitions(txn, pid, epoch, {"txn-data": [1]}), 3))))
        # A partition leader's verification (v4, verify_only): in the transaction or not; nothing is added.
        verify = client.request(AddPartitionsToTxnRequest(transactions=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
                transactional_id=txn, producer_id=pid, producer_epoch=epoch, verify_only=True,
                topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="txn-data", partitions=[1]),
                        AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="txn-other", partitions=[0])])]), 4)
        seen.append(("verify", verify.error_code, sorted(
            (r.transactional_id, t.name, p.partition_index, p.partition_error_code)
            for r in verify.results_by_transaction for t in r.topic_results for p in t.results_by_partition)))
        offsets = client.request(AddOffsetsToTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                                        group_id="txn-group"), 3)
        seen.append(("add offsets", offsets.error_code))
        described = client.request(DescribeTransactionsRequest(transactional_ids=[txn, "never-seen"]), 0)
        seen.append(("describe", sorted(
            (s.transactional_id, s.error_code, s.transaction_state, s.transaction_timeout_ms, s.producer_epoch,
             (s.producer_id, s.transaction_start_time_ms) if s.error_code else None,
             sorted((t.topic, sorted(t.partitions)) for t in s.topics if t.topic != "__consumer_offsets"))
            for s in described.transaction_states)))
        listed = client.request(ListTransactionsRequest(state_filters=["Ongoing", "Bogus"], producer_id_filters=[],
                                                        duration_filter=-1), 1)
        seen.append(("list", listed.error_code, listed.unknown_state_filters,
                     [(s.transactional_id, s.transaction_state) for s in listed.transaction_states
                      if s.transactional_id == txn]))
        seen.append(("abort", client.request(EndTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                                           committed=False), 3).error_code))
        done = until_ready(lambda: client.request(EndTxnRequest(transactional_id=txn, producer_id=pid,
                                                                 producer_epoch=epoch, committed=False), 3),
                            lambda r: r.error_code)
        seen.append(("abort again", done.error_code))
        seen.append(("commit after abort", client.request(EndTxnRequest(
            transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=True), 3).error_code))
        # A new InitProducerId bumps the epoch; the old epoch is fenced, by code per version.
        second = until_ready(lambda: init(4), lambda r: r.error_code)
        seen.append(("bump", second.error_code, second.producer_id == pid, second.producer_epoch - epoch))
        for version in (1, 2):
            response = client.request(_partitions(txn, pid, epoch, {"txn-data": [0]}), version)
            seen.append((f"fenced add v{version}", _codes(response)))
        for version in (1, 2):
            response = client.request(EndTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                                    committed=True), version)
            seen.append((f"fenced end v{version}", response.error_code))
        for version in (1, 2):
            response = client.request(AddOffsetsToTxnRequest(transactional_id=txn, producer_id=pid,
                                                             producer_epoch=epoch, group_id="g"), version)
            seen.append((f"fenced offsets v{version}", response.error_code))
        # KIP-360: the producer names its id and epoch: the current ones bump, an old epoch is fenced
        # (INVALID_PRODUCER_EPOCH before v4), another producer id is unknown.
        seen.append(("kip-360 fenced v3", init(3, pid=pid, epoch=epoch).error_code))
        seen.append(("kip-360 fenced v4", init(4, pid=pid, epoch=epoch).error_code))
        seen.append(("kip-360 other id", init(4, pid=pid + 1000, epoch=0).error_code))
        third = init(4, pid=pid, epoch=second.producer_epoch)
        seen.append(("kip-360 bump", third.error_code, third.producer_epoch - second.producer_epoch))
        # What the coordinator wrote to __transaction_state, read back with trafka's decoder: the same
        # records, change for change, on both.
        seen.append(("log", _state_log(client, txn, epoch)))
        return seen

    assert_same(on_both(brokers, converse))
