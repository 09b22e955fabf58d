"""The transaction coordinator's own state across time and restarts, seen through the wire: an idle
transactional id expires (a tombstone, so it stays gone after a restart), a live one keeps its producer
id and epoch across a kill -9 (the next InitProducerId bumps the epoch it had), and a transaction left
open by a producer that never comes back is aborted at its timeout after the restart too."""
from __future__ import annotations

import time
from pathlib import Path

from compat_tests.harness import BrokerProcess
from compat_tests.wire_client import WireClient
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import (
    AddPartitionsToTxnRequest,
    CreateTopicsRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
)

SETTINGS = {
    "transaction.state.log.num.partitions": 2,
    "transactional.id.expiration.ms": 3000,
    "transaction.remove.expired.transaction.cleanup.interval.ms": 200,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 200,
}
NOT_READY = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
             ErrorCode.NOT_COORDINATOR, ErrorCode.CONCURRENT_TRANSACTIONS}


def _until(send, code_of, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while True:
        response = send()
        if ErrorCode(code_of(response)) not in NOT_READY or time.monotonic() > deadline:
            return response
        time.sleep(0.05)


def _init(client: WireClient, txn: str, timeout_ms: int = 60_000):
    _until(lambda: client.request(FindCoordinatorRequest(key_type=1, coordinator_keys=[txn]), 4),
           lambda r: r.coordinators[0].error_code)
    response = _until(lambda: client.request(InitProducerIdRequest(
        transactional_id=txn, transaction_timeout_ms=timeout_ms, producer_id=-1, producer_epoch=-1), 4),
        lambda r: r.error_code)
    assert response.error_code == 0, response
    return response.producer_id, response.producer_epoch


def _describe(client: WireClient, txn: str):
    [state] = _until(lambda: client.request(DescribeTransactionsRequest(transactional_ids=[txn]), 0),
                     lambda r: r.transaction_states[0].error_code).transaction_states
    return state


def _add(client: WireClient, txn: str, pid: int, epoch: int, topic: str) -> int:
    request = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=[0])])
    response = _until(lambda: client.request(request, 3),
                      lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)
    return response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


def test_ids_expire_survive_restarts_and_open_transactions_time_out(tmp_path: Path):
    broker = BrokerProcess(tmp_path / "data", name="txn-coordinator", overrides=SETTINGS).start()
    try:
        with WireClient(broker.bootstrap) as client:
            client.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
                name="data", num_partitions=1, replication_factor=1, assignments=[], configs=[])],
                timeout_ms=10_000), 7)
            # One id that keeps working (a transaction every 300 ms), one left idle, one left open.
            busy_pid, busy_epoch = _init(client, "busy")
            _init(client, "idle")
            open_pid, open_epoch = _init(client, "open", timeout_ms=1_000)
            assert _add(client, "open", open_pid, open_epoch, "data") == 0
            aborted = None
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                assert _add(client, "busy", busy_pid, busy_epoch, "data") == 0
                assert client.request(EndTxnRequest(transactional_id="busy", producer_id=busy_pid,
                                                    producer_epoch=busy_epoch, committed=True), 3).error_code == 0
                _until(lambda: client.request(DescribeTransactionsRequest(transactional_ids=["busy"]), 0),
                       lambda r: 51 if r.transaction_states[0].transaction_state != "CompleteCommit" else 0)
                if aborted is None:
                    opened = _describe(client, "open")
                    if opened.transaction_state == "CompleteAbort":  # past its 1 s timeout
                        aborted = opened
                        fenced = client.request(EndTxnRequest(transactional_id="open", producer_id=open_pid,
                                                              producer_epoch=open_epoch, committed=True), 3)
                if ErrorCode(_describe(client, "idle").error_code) == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                    break
                time.sleep(0.3)
            assert ErrorCode(_describe(client, "idle").error_code) == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
            assert _describe(client, "busy").transaction_state == "CompleteCommit"  # kept alive by its use
            # The one left open was aborted at its timeout, its producer fenced by the epoch bump.
            assert aborted is not None and aborted.producer_epoch == open_epoch + 1
            assert ErrorCode(fenced.error_code) == ErrorCode.PRODUCER_FENCED
            # A new open transaction, then a kill -9.
            assert _add(client, "busy", busy_pid, busy_epoch, "data") == 0
        assert "transactional id idle expired" in broker.log_text()
        broker.restart(crash=True)
        with WireClient(broker.bootstrap) as client:
            assert ErrorCode(_describe(client, "idle").error_code) == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
            busy = _describe(client, "busy")
            assert (busy.transaction_state, busy.producer_id, busy.producer_epoch) == ("Ongoing", busy_pid, busy_epoch)
            assert busy.topics[0].topic == "data" and busy.transaction_timeout_ms == 60_000
            # The id's next producer continues from the epoch it had: the open transaction is aborted first.
            pid, epoch = _init(client, "busy")
            assert (pid, epoch) == (busy_pid, busy_epoch + 2)  # one bump fenced the open transaction, one is ours
            assert _describe(client, "busy").transaction_state == "Empty"
    finally:
        broker.close()
