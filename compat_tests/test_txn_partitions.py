"""The partition side of transactions against a real broker process, with the markers written by hand.

Transactional batches are built here (wire.records) for producer ids from InitProducerId, and ended with
WriteTxnMarkers requests as a transaction coordinator sends them. Then: what Fetch answers at both
isolation levels (records, high watermark, last stable offset, aborted transactions), what ListOffsets
answers (latest and timestamps), what DescribeProducers lists, what librdkafka's read_committed and
read_uncommitted consumers return, and that all of it survives a crash of the broker. No transaction
coordinator is involved: these are the partition leader's own answers.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from compat_tests.clients import ConfluentClient
from compat_tests.harness import BrokerProcess
from compat_tests.wire_client import WireClient
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import (
    ApiVersionsRequest,
    CreateTopicsRequest,
    DescribeProducersRequest,
    FetchRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    ProduceRequest,
    WriteTxnMarkersRequest,
)
from trafka.wire.protocol import ApiKey
from trafka.wire.records import SimpleRecord, build_batch, iter_batches

READ_UNCOMMITTED, READ_COMMITTED = 0, 1
W = WriteTxnMarkersRequest


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("txn-partitions") / "data", name="txn-partitions")
    process.start()
    yield process
    process.close()


@pytest.fixture
def client(txn_broker: BrokerProcess) -> Iterator[WireClient]:
    with WireClient(txn_broker.bootstrap) as wire:
        yield wire


def make_topic(client: WireClient, partitions: int = 1) -> str:
    name = f"txn-partitions-{uuid.uuid4().hex[:10]}"
    topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1,
                                               assignments=[], configs=[])
    response = client.request(CreateTopicsRequest(topics=[topic], timeout_ms=10_000), 7)
    assert response.topics[0].error_code == ErrorCode.NONE, response
    return name


class Producer:
    """An idempotent producer id (InitProducerId without a transactional id) writing transactional
    batches by hand, with its sequence numbers."""

    def __init__(self, client: WireClient) -> None:
        response = client.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000), 4)
        assert response.error_code == ErrorCode.NONE, response
        self.client = client
        self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
        self.sequence = 0

    def send(self, topic: str, values: list[bytes], *, partition: int = 0, transactional: bool = True,
             timestamp: int | None = None) -> int:
        records = [SimpleRecord(None, v) if timestamp is None else SimpleRecord(None, v, timestamp=timestamp)
                   for v in values]
        batch = build_batch(records, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                            base_sequence=self.sequence, is_transactional=transactional)
        self.sequence += len(values)
        return produce(self.client, topic, batch, partition)

    def end(self, topic: str, committed: bool, *, partitions: list[int] | None = None, coordinator_epoch: int = 0,
            producer_epoch: int | None = None, version: int = 1) -> list[int]:
        """Write the marker; the error code of each partition."""
        marker = W.WritableTxnMarker(
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch if producer_epoch is None else producer_epoch,
            transaction_result=committed, coordinator_epoch=coordinator_epoch,
            topics=[W.WritableTxnMarkerTopic(name=topic, partition_indexes=partitions or [0])])
        response = self.client.request(W(markers=[marker]), version)
        [result] = response.markers
        assert result.producer_id == self.producer_id
        return [p.error_code for t in result.topics for p in t.partitions]


def produce(client: WireClient, topic: str, batch: bytes, partition: int = 0) -> int:
    data = ProduceRequest.TopicProduceData(name=topic, partition_data=[
        ProduceRequest.PartitionProduceData(index=partition, records=batch)])
    response = client.request(ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[data]), 9)
    answer = response.responses[0].partition_responses[0]
    assert answer.error_code == ErrorCode.NONE, answer
    return answer.base_offset


def fetch(client: WireClient, topic: str, isolation: int, *, offset: int = 0, partition: int = 0):
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=isolation,
                           topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                               partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20)])])
    answer = client.request(request, 12).responses[0].partitions[0]
    assert answer.error_code == ErrorCode.NONE, answer
    return answer


def data(answer) -> list[tuple[int, bytes | None]]:
    """The data records of a fetch answer (control batches left out)."""
    return [(r.offset, r.value) for batch in iter_batches(bytes(answer.records or b"")) if not batch.is_control
            for r in batch.records()]


def markers(answer) -> list[int]:
    return [batch.base_offset for batch in iter_batches(bytes(answer.records or b"")) if batch.is_control]


def aborted(answer) -> list[tuple[int, int]] | None:
    if answer.aborted_transactions is None:
        return None
    return [(t.producer_id, t.first_offset) for t in answer.aborted_transactions]


def list_offset(client: WireClient, topic: str, timestamp: int, isolation: int, version: int = 7) -> tuple[int, int]:
    L = ListOffsetsRequest
    request = L(replica_id=-1, isolation_level=isolation, topics=[L.ListOffsetsTopic(
        name=topic, partitions=[L.ListOffsetsPartition(partition_index=0, timestamp=timestamp)])])
    [answer] = client.request(request, version).topics[0].partitions
    assert answer.error_code == ErrorCode.NONE, answer
    return answer.offset, answer.timestamp


def describe_producers(client: WireClient, topic: str, partitions: list[int] | None = None) -> list:
    R = DescribeProducersRequest
    response = client.request(R(topics=[R.TopicRequest(name=topic, partition_indexes=partitions or [0])]), 0)
    return response.topics[0].partitions


def producer_states(client: WireClient, topic: str) -> dict[int, tuple[int, int, int, int]]:
    """producer id -> (epoch, last sequence, coordinator epoch, current transaction start offset)."""
    [answer] = describe_producers(client, topic)
    assert answer.error_code == ErrorCode.NONE
    return {p.producer_id: (p.producer_epoch, p.last_sequence, p.coordinator_epoch, p.current_txn_start_offset)
            for p in answer.active_producers}


def consume(bootstrap: str, topic: str, isolation: int, *, until: bytes | None, seconds: float = 20.0
            ) -> list[tuple[int, bytes | None]]:
    """librdkafka (confluent-kafka) at `isolation` from the beginning: every record up to the one whose value
    is `until` (within `seconds`), or with `until` None everything it returns within `seconds`."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(ConfluentClient(bootstrap)._config(**{
        "group.id": f"txn-partitions-{uuid.uuid4()}", "enable.auto.commit": False,
        "isolation.level": "read_committed" if isolation == READ_COMMITTED else "read_uncommitted"}))
    seen: list[tuple[int, bytes | None]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=100, timeout=0.2):
                assert not msg.error(), msg.error()
                seen.append((msg.offset(), msg.value()))
                if until is not None and msg.value() == until:
                    return seen
    finally:
        consumer.close()
    assert until is None, f"{until!r} not read in {seconds} s; read {seen}"
    return seen


# ============================================================================================ the tests


def test_write_txn_markers_and_describe_producers_are_advertised(client):
    versions = {v.api_key: (v.min_version, v.max_version)
                for v in client.request(ApiVersionsRequest(), 3).api_keys}
    assert versions[ApiKey.WRITE_TXN_MARKERS] == (1, 2)
    assert versions[ApiKey.DESCRIBE_PRODUCERS] == (0, 0)


def test_commit_and_abort_as_fetch_list_offsets_and_describe_producers_answer(client):
    topic = make_topic(client)
    kept, dropped = Producer(client), Producer(client)
    assert kept.send(topic, [b"kept-1", b"kept-2"]) == 0
    assert dropped.send(topic, [b"dropped"]) == 2
    produce(client, topic, build_batch([SimpleRecord(None, b"plain")]))  # offset 3, after both open transactions

    # Both transactions open: read_committed readers see nothing; the last stable offset is the first
    # open transaction's first offset, at both isolation levels.
    committed = fetch(client, topic, READ_COMMITTED)
    assert (committed.high_watermark, committed.last_stable_offset) == (4, 0)
    assert (data(committed), aborted(committed)) == ([], [])
    uncommitted = fetch(client, topic, READ_UNCOMMITTED)
    assert (uncommitted.high_watermark, uncommitted.last_stable_offset) == (4, 0)
    assert data(uncommitted) == [(0, b"kept-1"), (1, b"kept-2"), (2, b"dropped"), (3, b"plain")]
    assert aborted(uncommitted) is None
    assert list_offset(client, topic, -1, READ_COMMITTED) == (0, -1)
    assert list_offset(client, topic, -1, READ_UNCOMMITTED) == (4, -1)
    assert list_offset(client, topic, -1, READ_UNCOMMITTED, version=1) == (4, -1)  # v1: no isolation level
    assert producer_states(client, topic) == {kept.producer_id: (kept.producer_epoch, 1, -1, 0),
                                              dropped.producer_id: (dropped.producer_epoch, 0, -1, 2)}

    # The commit alone: the aborted-to-be transaction still holds the last stable offset at 2.
    assert kept.end(topic, True, coordinator_epoch=3) == [ErrorCode.NONE]
    committed = fetch(client, topic, READ_COMMITTED)
    assert (committed.high_watermark, committed.last_stable_offset) == (5, 2)
    assert data(committed) == [(0, b"kept-1"), (1, b"kept-2")]
    assert list_offset(client, topic, -1, READ_COMMITTED) == (2, -1)

    assert dropped.end(topic, False, coordinator_epoch=3, version=2) == [ErrorCode.NONE]
    committed = fetch(client, topic, READ_COMMITTED)
    assert (committed.high_watermark, committed.last_stable_offset) == (6, 6)
    # The batches are returned whole; the consumer leaves out the aborted one and the markers.
    assert data(committed) == [(0, b"kept-1"), (1, b"kept-2"), (2, b"dropped"), (3, b"plain")]
    assert markers(committed) == [4, 5]
    assert aborted(committed) == [(dropped.producer_id, 2)]
    uncommitted = fetch(client, topic, READ_UNCOMMITTED)
    assert uncommitted.last_stable_offset == 6 and aborted(uncommitted) is None
    assert list_offset(client, topic, -1, READ_COMMITTED) == (6, -1)
    assert producer_states(client, topic) == {kept.producer_id: (kept.producer_epoch, 1, 3, -1),
                                              dropped.producer_id: (dropped.producer_epoch, 0, 3, -1)}


def test_timestamp_lookups_stop_at_the_last_stable_offset_under_read_committed(client):
    topic = make_topic(client)
    producer = Producer(client)
    produce(client, topic, build_batch([SimpleRecord(None, b"old", timestamp=1_000)]))
    producer.send(topic, [b"open"], timestamp=9_000)
    assert list_offset(client, topic, 500, READ_COMMITTED) == (0, 1_000)
    assert list_offset(client, topic, 5_000, READ_COMMITTED) == (-1, -1)
    assert list_offset(client, topic, 5_000, READ_UNCOMMITTED) == (1, 9_000)
    assert list_offset(client, topic, -3, READ_COMMITTED) == (-1, -1)  # MAX_TIMESTAMP, not stable yet
    assert list_offset(client, topic, -3, READ_UNCOMMITTED) == (1, 9_000)
    assert producer.end(topic, False) == [ErrorCode.NONE]
    assert list_offset(client, topic, 5_000, READ_COMMITTED) == (1, 9_000)


def test_markers_refused_by_the_partition(client):
    topic = make_topic(client, partitions=2)
    producer = Producer(client)
    producer.send(topic, [b"a"])
    assert producer.end(topic, True, partitions=[0, 1, 7], coordinator_epoch=5) == [
        ErrorCode.NONE, ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    producer.send(topic, [b"b"])
    assert producer.end(topic, True, coordinator_epoch=4) == [ErrorCode.TRANSACTION_COORDINATOR_FENCED]
    assert producer.end(topic, True, producer_epoch=producer.producer_epoch - 1, coordinator_epoch=5) == [
        ErrorCode.INVALID_PRODUCER_EPOCH]
    # Transaction version 2 (WriteTxnMarkers v2): the marker must come with a newer producer epoch.
    request = W(markers=[W.WritableTxnMarker(
        producer_id=producer.producer_id, producer_epoch=producer.producer_epoch, transaction_result=True,
        coordinator_epoch=5, transaction_version=2,
        topics=[W.WritableTxnMarkerTopic(name=topic, partition_indexes=[0])])])
    [result] = client.request(request, 2).markers
    assert result.topics[0].partitions[0].error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert fetch(client, topic, READ_COMMITTED).last_stable_offset == 2  # still open
    assert producer.end(topic, True, coordinator_epoch=5) == [ErrorCode.NONE]
    assert fetch(client, topic, READ_COMMITTED).last_stable_offset == 4

    nowhere = client.request(W(markers=[W.WritableTxnMarker(
        producer_id=producer.producer_id, producer_epoch=producer.producer_epoch, transaction_result=False,
        coordinator_epoch=5, topics=[W.WritableTxnMarkerTopic(name="no-such-topic", partition_indexes=[0])])]), 1)
    assert nowhere.markers[0].topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_describe_producers_errors(client):
    topic = make_topic(client)
    assert [p.error_code for p in describe_producers(client, topic, [0, 3])] == [
        ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    assert describe_producers(client, topic)[0].active_producers == []
    assert [p.error_code for p in describe_producers(client, "no-such-topic", [0, 1])] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 2
    assert describe_producers(client, "bad name!")[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_librdkafka_read_committed_skips_aborted_records_and_waits_for_open_transactions(client, txn_broker):
    topic = make_topic(client)
    first, second = Producer(client), Producer(client)
    first.send(topic, [b"committed-1", b"committed-2"])
    first.end(topic, True)
    second.send(topic, [b"aborted-1"])
    first.send(topic, [b"open-then-committed"])  # a new transaction, left open for now
    second.send(topic, [b"aborted-2"])
    second.end(topic, False)
    produce(client, topic, build_batch([SimpleRecord(None, b"plain")]))

    everything = consume(txn_broker.bootstrap, topic, READ_UNCOMMITTED, until=b"plain")
    assert [v for _, v in everything] == [b"committed-1", b"committed-2", b"aborted-1", b"open-then-committed",
                                          b"aborted-2", b"plain"]
    # read_committed stops at the open transaction (offset 4): only the first commit is readable.
    held = consume(txn_broker.bootstrap, topic, READ_COMMITTED, until=None, seconds=2.0)
    assert held == [(0, b"committed-1"), (1, b"committed-2")]
    first.end(topic, True)
    seen = consume(txn_broker.bootstrap, topic, READ_COMMITTED, until=b"plain")
    assert seen == [(0, b"committed-1"), (1, b"committed-2"), (4, b"open-then-committed"), (7, b"plain")]


def test_aborted_transactions_and_the_last_stable_offset_survive_a_crash(tmp_path):
    process = BrokerProcess(tmp_path / "data", name="txn-crash")
    process.start()
    try:
        with WireClient(process.bootstrap) as client:
            topic = make_topic(client)
            done, open_ = Producer(client), Producer(client)
            done.send(topic, [b"gone"])
            done.end(topic, False, coordinator_epoch=2)
            open_.send(topic, [b"pending"])
            produce(client, topic, build_batch([SimpleRecord(None, b"plain")]))
        process.restart(crash=True)
        with WireClient(process.bootstrap) as client:
            committed = fetch(client, topic, READ_COMMITTED)
            assert (committed.high_watermark, committed.last_stable_offset) == (4, 2)
            assert data(committed) == [(0, b"gone")] and aborted(committed) == [(done.producer_id, 0)]
            assert producer_states(client, topic)[open_.producer_id][3] == 2
            open_.client = client
            assert open_.end(topic, True) == [ErrorCode.NONE]
            committed = fetch(client, topic, READ_COMMITTED)
            assert committed.last_stable_offset == 5
            assert data(committed) == [(0, b"gone"), (2, b"pending"), (3, b"plain")]
            assert aborted(committed) == [(done.producer_id, 0)]
    finally:
        process.close()
