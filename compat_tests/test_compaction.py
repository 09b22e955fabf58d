"""Log compaction with real clients: a compacted topic reads back as the latest record per key at its
original offset, tombstones disappear after ``delete.retention.ms``, keyless records are refused, a
kill -9 in the middle of a cleaning loses nothing that was not superseded, and committing offsets again
and again keeps ``__consumer_offsets`` bounded.

The broker looks for logs to clean every 50 ms (``log.cleaner.backoff.ms``) and removes replaced
segments at once (``log.segment.delete.delay.ms=0``); topics roll small segments often (``segment.bytes``,
``segment.ms``) and are cleaned as soon as anything is dirty (``min.cleanable.dirty.ratio``). Waiting
for a cleaning means polling the broker's ``cleaner-offset-checkpoint`` until the topic's first dirty
offset reaches the active segment.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from compat_tests.clients import ClientError, ConfluentClient, KafkaPythonClient, Message
from compat_tests.harness import BrokerProcess, wait_until
from trafka.storage.checkpoints import CLEANER_OFFSET_CHECKPOINT, read_offsets_checkpoint

TIMEOUT = 30.0
SEGMENT_MS = 300
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "4096", "segment.ms": str(SEGMENT_MS),
             "min.cleanable.dirty.ratio": "0.01"}
CLEANER = {"log.cleaner.backoff.ms": 50, "log.segment.delete.delay.ms": 0,
           "log.retention.check.interval.ms": 200}


@pytest.fixture(scope="module")
def compacting_broker(tmp_path_factory: pytest.TempPathFactory):
    process = BrokerProcess(tmp_path_factory.mktemp("compaction") / "data", name="compaction", overrides=CLEANER)
    process.start()
    yield process
    process.close()


def _cleaner_offset(broker: BrokerProcess, topic: str, partition: int = 0) -> int:
    try:
        return read_offsets_checkpoint(broker.data_dir / CLEANER_OFFSET_CHECKPOINT).get((topic, partition), -1)
    except (ValueError, OSError):  # being replaced
        return -1


def _roll_and_wait_for_cleaning(broker: BrokerProcess, topic: str, client, *, timeout: float = TIMEOUT) -> int:
    """Produce a sentinel once ``segment.ms`` has passed, so that everything before it leaves the active
    segment, and wait until the cleaner has cleaned up to it. Returns the sentinel's offset."""
    time.sleep(SEGMENT_MS / 1000 + 0.05)
    (delivery,) = client.produce(topic, [Message(b"sentinel", key=b"sentinel", partition=0)])
    wait_until(lambda: _cleaner_offset(broker, topic) >= delivery.offset, timeout=timeout,
               message=lambda: f"the cleaner to reach offset {delivery.offset} of {topic} "
                               f"(at {_cleaner_offset(broker, topic)})")
    return delivery.offset


def _segment_files(broker: BrokerProcess, topic: str, partition: int = 0) -> list[Path]:
    return sorted((broker.data_dir / f"{topic}-{partition}").glob("*.log"))


@pytest.mark.parametrize("client_class", [ConfluentClient, KafkaPythonClient], ids=lambda c: c.name)
def test_a_compacted_topic_reads_back_the_latest_record_per_key_at_its_offset(
    compacting_broker: BrokerProcess, topic, client_class
) -> None:
    name = topic(1, on=compacting_broker, configs=COMPACTED)
    client = client_class(compacting_broker.bootstrap)
    keys, versions = 12, 15
    messages = [Message(f"{k}-{v}".encode() + b"." * 60, key=b"key-%d" % k, headers=(("v", b"%d" % v),),
                        partition=0) for v in range(versions) for k in range(keys)]
    deliveries = client.produce(name, messages, compression="lz4")
    latest = {}
    for message, delivery in zip(messages, deliveries):
        latest[message.key] = (delivery.offset, message.value, message.headers)
    size_before = sum(path.stat().st_size for path in _segment_files(compacting_broker, name))
    sentinel = _roll_and_wait_for_cleaning(compacting_broker, name, client)
    assert sum(path.stat().st_size for path in _segment_files(compacting_broker, name)) < size_before / 2
    expected = sorted([(offset, key, value, headers) for key, (offset, value, headers) in latest.items()]
                      + [(sentinel, b"sentinel", b"sentinel", ())])
    # Both clients read the cleaned log: offsets with gaps, the latest value, headers kept.
    for reader in (ConfluentClient(compacting_broker.bootstrap), KafkaPythonClient(compacting_broker.bootstrap)):
        read = reader.consume(name, len(expected), partitions=[0])
        assert [(r.offset, r.key, r.value, r.headers) for r in read] == expected, reader.name
    # Nothing more comes after the latest records: the log end is unchanged.
    assert client.watermarks(name)[0] == (0, sentinel + 1)


def test_tombstones_delete_their_key_and_disappear_after_delete_retention(
    compacting_broker: BrokerProcess, topic
) -> None:
    name = topic(1, on=compacting_broker, configs={**COMPACTED, "delete.retention.ms": "2000"})
    client = ConfluentClient(compacting_broker.bootstrap)
    client.produce(name, [Message(b"%d" % v, key=k, partition=0) for v in range(5) for k in (b"a", b"b", b"c")])
    (tombstone,) = client.produce(name, [Message(None, key=b"b", partition=0)])
    first_clean = time.monotonic()
    sentinel = _roll_and_wait_for_cleaning(compacting_broker, name, client)
    read = client.consume(name, 4, partitions=[0])
    # Within delete.retention.ms the tombstone is still there, and b's values are gone.
    assert [(r.key, r.value) for r in read] == [(b"a", b"4"), (b"c", b"4"), (b"b", None), (b"sentinel", b"sentinel")]
    assert read[2].offset == tombstone.offset and read[3].offset == sentinel

    # After it, a cleaning drops the tombstone: keep the log dirty until one has.
    def tombstone_gone() -> bool:
        client.produce(name, [Message(b"x", key=b"filler", partition=0)])
        keys = [r.key for r in client.consume(name, 3, partitions=[0])]
        return b"b" not in keys

    wait_until(tombstone_gone, timeout=TIMEOUT, interval=0.3, message="the tombstone to be removed")
    assert time.monotonic() - first_clean >= 2.0


def test_records_without_a_key_are_refused_by_a_compacted_topic(compacting_broker: BrokerProcess, topic) -> None:
    name = topic(2, on=compacting_broker, configs=COMPACTED)
    # confluent-kafka: one request carrying both partitions (linger), the keyless one refused alone.
    producer = Producer({"bootstrap.servers": compacting_broker.bootstrap, "linger.ms": 200})
    results = {}
    producer.produce(name, value=b"keyed", key=b"k", partition=0,
                     on_delivery=lambda err, msg: results.__setitem__(0, (err, msg.offset())))
    producer.produce(name, value=b"keyless", partition=1,
                     on_delivery=lambda err, msg: results.__setitem__(1, (err, msg.offset())))
    assert producer.flush(TIMEOUT) == 0
    assert results[0] == (None, 0)
    error = results[1][0]
    assert error is not None and error.name() == "INVALID_RECORD", error
    # kafka-python reports the same error code.
    with pytest.raises(ClientError) as refused:
        KafkaPythonClient(compacting_broker.bootstrap).produce(name, [Message(b"keyless", partition=1)], retries=0)
    assert refused.value.error == "INVALID_RECORD"
    assert ConfluentClient(compacting_broker.bootstrap).watermarks(name) == {0: (0, 1), 1: (0, 0)}


def test_librdkafka_fails_only_the_keyless_records_of_a_mixed_batch(compacting_broker: BrokerProcess, topic) -> None:
    # One batch of 100 records, every tenth without a key: the response's record errors name the ten, so
    # librdkafka fails them with INVALID_RECORD and the other 90 with _INVALID_DIFFERENT_RECORD.
    name = topic(1, on=compacting_broker, configs=COMPACTED)
    # All 100 in one batch, however slow the machine: sent when the 100th arrives (or at the flush).
    producer = Producer({"bootstrap.servers": compacting_broker.bootstrap, "linger.ms": 10_000, "batch.num.messages": 100,
                         "retries": 0})
    errors: dict[int, str] = {}
    for i in range(100):
        producer.produce(name, value=b"v%d" % i, key=None if i % 10 == 0 else b"k%d" % i, partition=0,
                         on_delivery=lambda err, msg, i=i: errors.__setitem__(i, err.name() if err else None))
    assert producer.flush(TIMEOUT) == 0

    assert {i for i, name in errors.items() if name == "INVALID_RECORD"} == set(range(0, 100, 10))
    assert {i for i, name in errors.items() if name == "_INVALID_DIFFERENT_RECORD"} == set(range(100)) - set(range(0, 100, 10))
    assert ConfluentClient(compacting_broker.bootstrap).watermarks(name) == {0: (0, 0)}


def test_a_kill_during_cleaning_loses_only_superseded_records(broker_factory, topic) -> None:
    # The log is written with the cleaner off, then cleaned (slowly: 4 MB/s) after a restart.
    broker = broker_factory({**CLEANER, "log.cleaner.io.max.bytes.per.second": 4_000_000,
                             "log.cleaner.io.buffer.size": 65536, "log.cleaner.enable": "false"})
    name = topic(1, on=broker, configs={**COMPACTED, "segment.bytes": str(1024 * 1024)})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.size": 65536})
    produced: dict[int, tuple[bytes, bytes]] = {}

    def remember(err, msg) -> None:
        assert err is None, err
        produced[msg.offset()] = (msg.key(), msg.value())

    keys = 1500
    for n in range(8000):
        key = b"key-%d" % (n % keys)
        producer.produce(name, value=b"%d:" % n + os.urandom(600), key=key, partition=0, on_delivery=remember)
        producer.poll(0)
    time.sleep(SEGMENT_MS / 1000 + 0.05)
    producer.produce(name, value=b"sentinel", key=b"sentinel", partition=0, on_delivery=remember)
    assert producer.flush(TIMEOUT) == 0
    log_dir = broker.data_dir / f"{name}-0"
    assert not list(log_dir.glob("*.cleaned"))
    broker.overrides["log.cleaner.enable"] = "true"
    broker.restart()
    wait_until(lambda: list(log_dir.glob("*.cleaned")), timeout=TIMEOUT, interval=0.005,
               message="the cleaner to start writing cleaned segments")
    time.sleep(random.uniform(0, 1.0))  # within the first group, or a later one
    broker.kill()
    broker.restart()
    latest: dict[bytes, tuple[int, bytes]] = {}
    for offset in sorted(produced):
        key, value = produced[offset]
        latest[key] = (offset, value)
    read = _read_from_start(broker, name, expected_keys=len(latest))
    assert [offset for offset, _, _ in read] == sorted({offset for offset, _, _ in read})
    for offset, key, value in read:  # everything read was produced, at that offset
        assert produced[offset] == (key, value), offset
    last_read = {key: (offset, value) for offset, key, value in read}
    assert last_read == latest  # and every key's latest record is there
    # The restarted broker finishes the cleaning.
    wait_until(lambda: _cleaner_offset(broker, name) >= max(produced), timeout=TIMEOUT,
               message="the cleaner to finish after the restart")
    assert len(_read_from_start(broker, name, expected_keys=len(latest))) == len(latest)


def _read_from_start(broker: BrokerProcess, topic: str, *, expected_keys: int) -> list[tuple[int, bytes, bytes]]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"reader-{topic}-{time.monotonic()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        end = wait_until(lambda: consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1],
                         timeout=TIMEOUT, message="the log end offset")
        consumer.assign([TopicPartition(topic, 0, 0)])
        read: list[tuple[int, bytes, bytes]] = []

        def done() -> bool:
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                assert message.error() is None, message.error()
                read.append((message.offset(), message.key(), message.value()))
            return bool(read) and read[-1][0] == end - 1

        wait_until(done, timeout=TIMEOUT, message=lambda: f"records up to offset {end - 1}, read {len(read)}")
        assert len({key for _, key, _ in read}) == expected_keys
        return read
    finally:
        consumer.close()


def test_committing_again_and_again_keeps_consumer_offsets_bounded(broker_factory) -> None:
    broker = broker_factory({**CLEANER, "log.roll.ms": SEGMENT_MS, "log.cleaner.min.cleanable.ratio": 0.01,
                             "offsets.topic.num.partitions": 1})
    ConfluentClient(broker.bootstrap).create_topic("committed-topic", 4)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "committer",
                         "enable.auto.commit": False})
    commits = 20_000
    try:
        for n in range(commits):
            consumer.commit(offsets=[TopicPartition("committed-topic", n % 4, n)], asynchronous=True)
            if n % 500 == 0:
                consumer.poll(0)
        final = [TopicPartition("committed-topic", p, commits - 4 + p) for p in range(4)]
        result = consumer.commit(offsets=final, asynchronous=False)
        assert [(tp.partition, tp.offset, tp.error) for tp in result] == [
            (tp.partition, tp.offset, None) for tp in final]
        log_dir = broker.data_dir / "__consumer_offsets-0"
        written = sum(path.stat().st_size for path in log_dir.glob("*.log*"))
        # Under load, a read-back right after the final commit has (rarely) returned the offsets of a few
        # hundred asynchronous commits earlier: librdkafka may still be sending its backlog of them while
        # the read-back is answered. Their last values are the final ones, so wait for those; an offset
        # the broker lost would never come right.
        wanted = [TopicPartition("committed-topic", p) for p in range(4)]
        wait_until(lambda: [tp.offset for tp in consumer.committed(wanted, timeout=10)]
                   == [commits - 4 + p for p in range(4)], timeout=TIMEOUT,
                   message=lambda: f"the final offsets read back, not {consumer.committed(wanted, timeout=10)}")

        def bounded() -> bool:
            # one more commit rolls the segment once segment.ms has passed, making the rest cleanable
            consumer.commit(offsets=final, asynchronous=False)
            size = sum(path.stat().st_size for path in log_dir.glob("*.log"))
            return size < 64 * 1024

        wait_until(bounded, timeout=TIMEOUT, interval=0.3,
                   message=lambda: f"__consumer_offsets-0 to shrink (written {written} bytes, now "
                                   f"{sum(p.stat().st_size for p in log_dir.glob('*.log'))})")
        # the log end offset shows how many commits were stored: far more than what is kept
        low, high = consumer.get_watermark_offsets(TopicPartition("__consumer_offsets", 0), timeout=10)
        assert high >= commits
    finally:
        consumer.close()
    # the group's offsets survive a restart that replays the compacted log
    broker.restart()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "committer",
                         "enable.auto.commit": False})
    try:
        # Under load, a read-back right after the final commit has (rarely) returned the offsets of a few
        # hundred asynchronous commits earlier: librdkafka may still be sending its backlog of them while
        # the read-back is answered. Their last values are the final ones, so wait for those; an offset
        # the broker lost would never come right.
        wanted = [TopicPartition("committed-topic", p) for p in range(4)]
        wait_until(lambda: [tp.offset for tp in consumer.committed(wanted, timeout=10)]
                   == [commits - 4 + p for p in range(4)], timeout=TIMEOUT,
                   message=lambda: f"the final offsets read back, not {consumer.committed(wanted, timeout=10)}")
    finally:
        consumer.close()
