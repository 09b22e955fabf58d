"""Transaction verification on Produce (KIP-890 part 1, ``transaction.partition.verification.enable``)
against real broker processes, transactional requests and batches written by hand (wire client):

- a transactional write to a partition the producer did not add to its transaction is refused, nothing
  stored, with the code Apache Kafka gives per Produce version (differential, against Kafka 4.4); once
  added, the same write goes in;
- after the transaction aborted, a late write at the old epoch is refused and does not hold the last
  stable offset back; with the property set to false it goes through (and would hang the partition);
- in a 3-broker cluster where the coordinator is another broker (AddPartitionsToTxn verify_only over the
  peer channel): a real confluent-kafka transactional producer works end to end, and a hand-built
  unverified write to a partition led by a non-coordinator broker is refused.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.harness import BrokerProcess
from compat_tests.test_differential import assert_same, create, on_both, side_by_side
from compat_tests.test_differential_transactions import until_ready
from compat_tests.wire_client import WireClient
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    ProduceRequest,
)
from trafka.wire.records import SimpleRecord, build_batch

SETTINGS = {"num.partitions": 1, "transaction.state.log.num.partitions": 2}
#: Produce versions where Kafka's answer could change: the oldest served, the last before
#: TRANSACTION_ABORTABLE (10) and the first with it (11, the last one transaction-version-1 clients use).
#: From v12 (transaction version 2) Kafka 4.4 adds the partition to the transaction itself and the write
#: goes in; trafka offers transaction version 1 only, where that would open the very hole verification
#: closes (the epoch is not bumped when a transaction ends), so it keeps verifying: TRANSACTION_ABORTABLE.
VERSIONS = (3, 9, 10, 11)
LATEST, EARLIEST = -1, -2


def init(client: WireClient, txn: str) -> tuple[int, int]:
    until_ready(lambda: client.request(FindCoordinatorRequest(key_type=1, coordinator_keys=[txn]), 4),
                 lambda r: r.coordinators[0].error_code)
    response = until_ready(lambda: client.request(InitProducerIdRequest(
        transactional_id=txn, transaction_timeout_ms=60_000), 4), lambda r: r.error_code)
    assert response.error_code == 0, response
    return response.producer_id, response.producer_epoch


def add(client: WireClient, txn: str, pid: int, epoch: int, topic: str, partitions: list[int]) -> list[int]:
    response = until_ready(lambda: client.request(AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=partitions)]),
        3), lambda r: max(p.partition_error_code for t in r.results_by_topic_v3_and_below
                          for p in t.results_by_partition))
    return [p.partition_error_code for t in response.results_by_topic_v3_and_below for p in t.results_by_partition]


def end(client: WireClient, txn: str, pid: int, epoch: int, committed: bool) -> int:
    return until_ready(lambda: client.request(EndTxnRequest(
        transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=committed), 3),
        lambda r: r.error_code).error_code


def txn_batch(pid: int, epoch: int, sequence: int, value: bytes = b"v") -> bytes:
    return build_batch([SimpleRecord(None, value)], producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                       is_transactional=True)


def produce(client: WireClient, txn: str | None, topic: str, partition: int, records: bytes,
            version: int = 9) -> tuple[int, int]:
    response = client.request(ProduceRequest(transactional_id=txn, acks=-1, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=records)])]), version)
    result = response.responses[0].partition_responses[0]
    return result.error_code, result.base_offset


def offsets(client: WireClient, topic: str, partition: int = 0) -> tuple[int, int]:
    """(log end offset, last stable offset) as ListOffsets gives them at both isolation levels."""
    found = []
    for isolation in (0, 1):
        response = client.request(ListOffsetsRequest(replica_id=-1, isolation_level=isolation, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
                partition_index=partition, current_leader_epoch=-1, timestamp=LATEST)])]), 5)
        found.append(response.topics[0].partitions[0].offset)
    return found[0], found[1]


# ------------------------------------------------------------------------------- against Apache Kafka


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    with side_by_side(Path(tmp_path_factory.mktemp("txn-verification")), SETTINGS) as started:
        yield started


def test_an_unadded_partition_is_refused_with_kafkas_code_per_version(brokers):
    def converse(client: WireClient) -> list[object]:
        topic = f"verify-{uuid.uuid4().hex[:6]}"
        txn = f"verify-{uuid.uuid4().hex[:6]}"
        create(client, topic)
        pid, epoch = init(client, txn)
        seen: list[object] = []
        for version in VERSIONS:
            seen.append((f"unadded v{version}", produce(client, txn, topic, 0, txn_batch(pid, epoch, 0), version)))
        seen.append(("nothing stored", offsets(client, topic)))
        seen.append(("add", add(client, txn, pid, epoch, topic, [0])))
        seen.append(("added", produce(client, txn, topic, 0, txn_batch(pid, epoch, 0))))
        seen.append(("next", produce(client, txn, topic, 0, txn_batch(pid, epoch, 1))))
        seen.append(("open", offsets(client, topic)))
        seen.append(("abort", end(client, txn, pid, epoch, committed=False)))
        deadline = time.monotonic() + 10
        while offsets(client, topic) != (3, 3) and time.monotonic() < deadline:
            time.sleep(0.05)  # the abort marker is written after EndTxn is answered
        seen.append(("aborted", offsets(client, topic)))
        for version in (9, 11):
            seen.append((f"late v{version}", produce(client, txn, topic, 0, txn_batch(pid, epoch, 2), version)))
        seen.append(("late write not held", offsets(client, topic)))
        return seen

    observed = on_both(brokers, converse)
    assert_same(observed)
    seen = dict((step[0], step[1:]) for step in observed["trafka"])
    assert seen["unadded v9"] == ((ErrorCode.INVALID_TXN_STATE, -1),)
    assert seen["unadded v11"] == ((ErrorCode.TRANSACTION_ABORTABLE, -1),)
    assert seen["nothing stored"] == ((0, 0),)


# ------------------------------------------------------------------------------- one trafka broker


def test_the_property_set_to_false_lets_an_unverified_write_through(tmp_path: Path):
    process = BrokerProcess(tmp_path / "data", name="no-verification",
                            overrides={**SETTINGS, "transaction.partition.verification.enable": "false"})
    process.start()
    try:
        with WireClient(process.bootstrap) as client:
            topic = "unverified"
            create(client, topic)
            txn = "lax"
            pid, epoch = init(client, txn)
            assert produce(client, txn, topic, 0, txn_batch(pid, epoch, 0)) == (ErrorCode.NONE, 0)
            # ...and, never added to a transaction, it holds the last stable offset back: the hang
            # that verification prevents.
            assert offsets(client, topic) == (1, 0)
    finally:
        process.close()


# ------------------------------------------------------------------------------- a cluster


def test_a_remote_coordinator_verifies_in_a_cluster(zookeeper, tmp_path: Path):
    from compat_tests.clients import ConfluentClient
    from compat_tests.cluster import start_cluster, wait
    from compat_tests.test_cluster_transactions import _coordinator_of, _producer, _read_committed

    cluster = start_cluster(zookeeper, tmp_path, {"transaction.state.log.num.partitions": 3,
                                                  "auto.leader.rebalance.enable": "false"})
    try:
        ConfluentClient(cluster.bootstrap).create_topic("checked", 3, replication_factor=3)
        leaders = wait(lambda: (lambda m: {p: v[0] for p, v in m.items()}
                                if len(m) == 3 and all(len(v[2]) == 3 for v in m.values()) else None)(
            cluster.metadata("checked")), "three partitions with a full ISR")

        # A real producer: its writes to the partitions led by the two other brokers are verified
        # with the coordinator over the peer channel, and go in.
        producer = _producer(cluster.bootstrap, "checked-producer")
        coordinator = _coordinator_of(cluster, "checked-producer")
        assert coordinator in leaders.values()
        producer.begin_transaction()
        for i in range(30):
            producer.produce("checked", f"committed-{i}".encode(), partition=i % 3)
        producer.commit_transaction(60)
        assert sorted(_read_committed(cluster.bootstrap, "checked", 3, 30)) == sorted(
            f"committed-{i}".encode() for i in range(30))

        # A hand-built write to a partition led by another broker, never added: refused there.
        txn = f"zombie-{uuid.uuid4().hex[:6]}"
        coordinator = _coordinator_of(cluster, txn)
        at_coordinator = cluster.broker(coordinator)
        with WireClient(f"{at_coordinator.host}:{at_coordinator.port}") as client:
            pid, epoch = init(client, txn)
        partition = next(p for p, leader in leaders.items() if leader != coordinator)
        leader = cluster.broker(leaders[partition])
        with WireClient(f"{leader.host}:{leader.port}") as client:
            before = offsets(client, "checked", partition)
            for version, code in ((9, ErrorCode.INVALID_TXN_STATE), (11, ErrorCode.TRANSACTION_ABORTABLE)):
                assert produce(client, txn, "checked", partition, txn_batch(pid, epoch, 0), version) == (code, -1)
            assert offsets(client, "checked", partition) == before
        # Added through the coordinator, the same write goes in at the remote leader.
        with WireClient(f"{at_coordinator.host}:{at_coordinator.port}") as client:
            assert add(client, txn, pid, epoch, "checked", [partition]) == [0]
        with WireClient(f"{leader.host}:{leader.port}") as client:
            assert produce(client, txn, "checked", partition, txn_batch(pid, epoch, 0)) == (ErrorCode.NONE, before[0])
    finally:
        cluster.close()
