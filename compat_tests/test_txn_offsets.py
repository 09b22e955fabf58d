"""Transactional offset commits (TxnOffsetCommit; KIP-98, KIP-447) against a real broker process.

The transaction is driven by hand, as a transaction coordinator would drive it: a producer id from
InitProducerId (no transactional id), TxnOffsetCommit with it, then a COMMIT or ABORT marker written to
the group's partition of ``__consumer_offsets`` with WriteTxnMarkers. OffsetFetch shows the offsets
with and without ``require_stable``, and real consumers (kafka-python, confluent-kafka) read the
committed offsets: with ``isolation.level=read_committed`` they ask for stable offsets and wait out the
open transaction; with read_uncommitted they get the offsets committed before it.
"""
from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import KafkaTimeoutError

from trafka.broker.coordinator_runtime import partition_for
from compat_tests.harness import BrokerProcess, wait_until
from compat_tests.wire_client import WireClient
from trafka.storage.checkpoints import CLEANER_OFFSET_CHECKPOINT, read_offsets_checkpoint
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import (
    FindCoordinatorRequest,
    InitProducerIdRequest,
    MetadataRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)
from trafka.wire.records import iter_batches

OFFSETS_TOPIC = "__consumer_offsets"
TIMEOUT = 30.0
#: librdkafka's "no committed offset".
CONFLUENT_NO_OFFSET = -1001


def _group() -> str:
    return f"txn-group-{uuid.uuid4().hex[:8]}"


class Txn:
    """One producer id and the requests a transaction coordinator would send for it."""

    def __init__(self, client: WireClient, producer: tuple[int, int] | None = None) -> None:
        self.client = client
        if producer is None:
            response = client.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000), 4)
            assert response.error_code == ErrorCode.NONE, response
            producer = response.producer_id, response.producer_epoch
        self.producer_id, self.producer_epoch = producer

    def commit_offsets(self, group: str, offsets: dict[tuple[str, int], int], *, version: int = 3,
                       ) -> dict[tuple[str, int], int]:
        topics: dict[str, list] = {}
        for (name, partition), offset in offsets.items():
            topics.setdefault(name, []).append(TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata=f"txn-{offset}"))
        response = self.client.request(TxnOffsetCommitRequest(
            transactional_id="", group_id=group, producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=ps)
                    for t, ps in topics.items()]), version)
        return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}

    def end(self, group: str, committed: bool) -> None:
        """The marker, on the group's partition of __consumer_offsets."""
        partition = offsets_partition(self.client, group)
        response = self.client.request(WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=self.producer_id, producer_epoch=self.producer_epoch, transaction_result=committed,
            coordinator_epoch=0, topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(
                name=OFFSETS_TOPIC, partition_indexes=[partition])])]), 1)
        codes = [p.error_code for m in response.markers for t in m.topics for p in t.partitions]
        assert codes == [ErrorCode.NONE], response


def offsets_partition(client: WireClient, group: str) -> int:
    """Kafka's group-to-partition mapping over the partitions __consumer_offsets has."""
    metadata = client.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=OFFSETS_TOPIC)]), 9)
    (topic,) = metadata.topics
    assert topic.error_code == ErrorCode.NONE, topic
    return partition_for(group, len(topic.partitions))


def find_coordinator(client: WireClient, group: str) -> None:
    """FindCoordinator, as a client asks before committing (it creates __consumer_offsets)."""
    def found() -> bool:
        response = client.request(FindCoordinatorRequest(key=group, key_type=0), 2)
        return response.error_code == ErrorCode.NONE
    wait_until(found, timeout=TIMEOUT, message="a coordinator")


def commit(client: WireClient, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """A plain OffsetCommit outside group management."""
    topics: dict[str, list] = {}
    for (name, partition), offset in offsets.items():
        topics.setdefault(name, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_metadata="plain"))
    response = client.request(OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, member_id="",
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()]), 8)
    assert {p.error_code for t in response.topics for p in t.partitions} == {ErrorCode.NONE}, response


def fetch(client: WireClient, group: str, name: str, partitions: list[int], *, stable: bool,
          version: int = 8) -> dict[int, tuple[int, int]]:
    """{partition: (committed offset, error)} of an OffsetFetch; the group error must be NONE (after a
    restart, once the coordinator has loaded)."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        if version >= 8:
            response = client.request(OffsetFetchRequest(require_stable=stable, groups=[
                OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=[
                    OffsetFetchRequest.OffsetFetchRequestTopics(name=name, partition_indexes=partitions)])]), version)
            (result,) = response.groups
        else:
            result = client.request(OffsetFetchRequest(group_id=group, require_stable=stable, topics=[
                OffsetFetchRequest.OffsetFetchRequestTopic(name=name, partition_indexes=partitions)]), version)
        if result.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert result.error_code == ErrorCode.NONE, result
    return {p.partition_index: (p.committed_offset, p.error_code) for t in result.topics for p in t.partitions}


UNSTABLE = (-1, ErrorCode.UNSTABLE_OFFSET_COMMIT)


def kafka_python_committed(bootstrap: str, group: str, name: str, partitions: int, *, read_committed: bool,
                           timeout_ms: int = 20_000) -> dict[int, int | None]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             isolation_level="read_committed" if read_committed else "read_uncommitted")
    try:
        return {p: consumer.committed(KafkaTopicPartition(name, p), timeout_ms=timeout_ms) for p in range(partitions)}
    finally:
        consumer.close()


def confluent_committed(bootstrap: str, group: str, name: str, partitions: int, *, read_committed: bool,
                        timeout: float = 20.0) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": "read_committed" if read_committed else "read_uncommitted"})
    try:
        found = consumer.committed([ConfluentTopicPartition(name, p) for p in range(partitions)], timeout=timeout)
        return {tp.partition: tp.offset for tp in found}
    finally:
        consumer.close()


# ------------------------------------------------------------------------------------------------------------


def test_offsets_count_once_the_transaction_commits(broker, topic):
    name, group = topic(partitions=2), _group()
    with WireClient(broker.bootstrap) as client:
        find_coordinator(client, group)
        commit(client, group, {(name, 0): 3})
        txn = Txn(client)
        assert txn.commit_offsets(group, {(name, 0): 7, (name, 1): 9}) == {(name, 0): 0, (name, 1): 0}

        assert fetch(client, group, name, [0, 1], stable=False) == {0: (3, 0), 1: (-1, 0)}
        assert fetch(client, group, name, [0, 1], stable=True) == {0: UNSTABLE, 1: UNSTABLE}
        assert fetch(client, group, name, [0, 1], stable=True, version=7) == {0: UNSTABLE, 1: UNSTABLE}
        # Real consumers: read_uncommitted sees the offsets committed before the transaction;
        # read_committed asks for stable offsets and keeps retrying until its timeout.
        assert kafka_python_committed(broker.bootstrap, group, name, 2, read_committed=False) == {0: 3, 1: None}
        assert confluent_committed(broker.bootstrap, group, name, 2, read_committed=False) == {
            0: 3, 1: CONFLUENT_NO_OFFSET}
        with pytest.raises(KafkaTimeoutError):
            kafka_python_committed(broker.bootstrap, group, name, 2, read_committed=True, timeout_ms=1500)
        with pytest.raises(KafkaException):
            confluent_committed(broker.bootstrap, group, name, 2, read_committed=True, timeout=1.5)

        txn.end(group, committed=True)
        for stable in (False, True):
            assert fetch(client, group, name, [0, 1], stable=stable) == {0: (7, 0), 1: (9, 0)}
    for read_committed in (False, True):
        assert kafka_python_committed(broker.bootstrap, group, name, 2, read_committed=read_committed) == {0: 7, 1: 9}
        assert confluent_committed(broker.bootstrap, group, name, 2, read_committed=read_committed) == {0: 7, 1: 9}


def test_an_aborted_transaction_leaves_the_committed_offsets(broker, topic):
    name, group = topic(partitions=2), _group()
    with WireClient(broker.bootstrap) as client:
        find_coordinator(client, group)
        commit(client, group, {(name, 0): 3})
        txn = Txn(client)
        assert txn.commit_offsets(group, {(name, 0): 7, (name, 1): 9}, version=5) == {(name, 0): 0, (name, 1): 0}
        txn.end(group, committed=False)
        for stable in (False, True):
            assert fetch(client, group, name, [0, 1], stable=stable) == {0: (3, 0), 1: (-1, 0)}
    assert kafka_python_committed(broker.bootstrap, group, name, 2, read_committed=True) == {0: 3, 1: None}
    assert confluent_committed(broker.bootstrap, group, name, 2, read_committed=True) == {0: 3, 1: CONFLUENT_NO_OFFSET}


def test_a_plain_commit_after_the_transactional_one_wins(broker, topic):
    name, group = topic(partitions=1), _group()
    with WireClient(broker.bootstrap) as client:
        find_coordinator(client, group)
        txn = Txn(client)
        assert txn.commit_offsets(group, {(name, 0): 7}) == {(name, 0): 0}
        commit(client, group, {(name, 0): 12})
        txn.end(group, committed=True)
        assert fetch(client, group, name, [0], stable=True) == {0: (12, 0)}


def test_a_read_committed_consumer_waits_for_the_marker(broker, topic):
    name, group = topic(partitions=1), _group()
    with WireClient(broker.bootstrap) as client:
        find_coordinator(client, group)
        txn = Txn(client)
        assert txn.commit_offsets(group, {(name, 0): 5}) == {(name, 0): 0}
        answers: dict[str, object] = {}

        def ask() -> None:
            answers["offsets"] = confluent_committed(broker.bootstrap, group, name, 1, read_committed=True, timeout=25)
            answers["at"] = time.monotonic()

        asking = threading.Thread(target=ask)
        asking.start()
        time.sleep(2.0)  # librdkafka retries UNSTABLE_OFFSET_COMMIT meanwhile
        assert "offsets" not in answers
        ended = time.monotonic()
        txn.end(group, committed=True)
        asking.join(TIMEOUT)
    assert answers["offsets"] == {0: 5}
    assert answers["at"] >= ended


def test_pending_and_committed_offsets_survive_restarts(broker_factory, topic):
    broker: BrokerProcess = broker_factory()
    name, group = topic(partitions=3, on=broker), _group()
    with WireClient(broker.bootstrap) as client:
        find_coordinator(client, group)
        commit(client, group, {(name, 0): 1, (name, 1): 1, (name, 2): 1})
        committed_txn, aborted_txn, open_txn = Txn(client), Txn(client), Txn(client)
        assert committed_txn.commit_offsets(group, {(name, 0): 10}) == {(name, 0): 0}
        committed_txn.end(group, committed=True)
        assert aborted_txn.commit_offsets(group, {(name, 1): 20}) == {(name, 1): 0}
        aborted_txn.end(group, committed=False)
        assert open_txn.commit_offsets(group, {(name, 2): 30}) == {(name, 2): 0}
        open_producer = (open_txn.producer_id, open_txn.producer_epoch)

    broker.restart()
    with WireClient(broker.bootstrap) as client:
        find_coordinator(client, group)
        assert fetch(client, group, name, [0, 1, 2], stable=False) == {0: (10, 0), 1: (1, 0), 2: (1, 0)}
        # The transaction open when the broker stopped is still open.
        assert fetch(client, group, name, [0, 1, 2], stable=True) == {0: (10, 0), 1: (1, 0), 2: UNSTABLE}
        assert kafka_python_committed(broker.bootstrap, group, name, 3, read_committed=False) == {0: 10, 1: 1, 2: 1}
        Txn(client, open_producer).end(group, committed=True)
        assert fetch(client, group, name, [0, 1, 2], stable=True) == {0: (10, 0), 1: (1, 0), 2: (30, 0)}

    broker.restart(crash=True)
    assert kafka_python_committed(broker.bootstrap, group, name, 3, read_committed=True) == {0: 10, 1: 1, 2: 30}
    assert confluent_committed(broker.bootstrap, group, name, 3, read_committed=True) == {0: 10, 1: 1, 2: 30}


def _cleaner_offset(broker: BrokerProcess, name: str, partition: int = 0) -> int:
    try:
        return read_offsets_checkpoint(broker.data_dir / CLEANER_OFFSET_CHECKPOINT).get((name, partition), -1)
    except (ValueError, OSError):  # being replaced
        return -1


def _batches(log_dir: Path) -> list:
    batches = []
    for path in sorted(log_dir.glob("*.log")):
        batches += [(b.producer_id, b.is_control, b.record_count) for b in iter_batches(path.read_bytes())]
    return batches


def test_compacting_consumer_offsets_keeps_what_the_transactions_left(broker_factory, topic):
    """The cleaner works on the transactional batches and markers as on any compacted log: superseded and
    aborted records go, the markers stay; replaying what is left gives the offsets live operation gave."""
    roll_ms = 300
    broker: BrokerProcess = broker_factory({
        "log.cleaner.backoff.ms": 50, "log.segment.delete.delay.ms": 0, "log.roll.ms": roll_ms,
        "log.cleaner.min.cleanable.ratio": 0.01, "offsets.topic.num.partitions": 1})
    name, group = topic(partitions=4, on=broker), _group()
    log_dir = broker.data_dir / f"{OFFSETS_TOPIC}-0"
    with WireClient(broker.bootstrap) as client:
        find_coordinator(client, group)
        commit(client, group, {(name, 0): 1, (name, 1): 1, (name, 2): 1})
        superseded, aborted, committed = Txn(client), Txn(client), Txn(client)
        assert superseded.commit_offsets(group, {(name, 0): 10}) == {(name, 0): 0}
        commit(client, group, {(name, 0): 20})  # after the transactional commit: it wins
        superseded.end(group, committed=True)
        assert aborted.commit_offsets(group, {(name, 1): 30}) == {(name, 1): 0}
        aborted.end(group, committed=False)
        assert committed.commit_offsets(group, {(name, 2): 40}) == {(name, 2): 0}
        committed.end(group, committed=True)
        for n in range(50):
            commit(client, group, {(name, 3): n})
        written = 3 + 2 + 1 + 2 + 2 + 50  # records and markers: offsets 0-59
        expected = {0: (20, 0), 1: (1, 0), 2: (40, 0), 3: (49, 0)}
        assert fetch(client, group, name, [0, 1, 2, 3], stable=True) == expected
        producers = {superseded.producer_id, aborted.producer_id, committed.producer_id}
        assert [b for b in _batches(log_dir) if b[0] in producers and not b[1]] == [
            (superseded.producer_id, False, 1), (aborted.producer_id, False, 1), (committed.producer_id, False, 1)]

        def cleaned() -> bool:
            time.sleep(roll_ms / 1000 + 0.05)
            commit(client, group, {(name, 3): 49})  # rolls the segment: what is before it becomes cleanable
            return _cleaner_offset(broker, OFFSETS_TOPIC) >= written

        wait_until(cleaned, timeout=TIMEOUT, interval=0.1, message="the cleaner to clean __consumer_offsets-0")
        batches = _batches(log_dir)
        # The superseded and the aborted transactional records are gone (their batches emptied or removed),
        # the committed one stays, and so do the three markers.
        kept = [(pid, count) for pid, control, count in batches if pid in producers and not control and count]
        assert kept == [(committed.producer_id, 1)]
        assert sorted(pid for pid, control, _ in batches if control) == sorted(producers)
    broker.restart()
    with WireClient(broker.bootstrap) as client:
        find_coordinator(client, group)
        assert fetch(client, group, name, [0, 1, 2, 3], stable=True) == expected
