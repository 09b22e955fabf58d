"""Time on cue: a broker started with a controllable clock, moved forward by the test instead of sleeping, while
real clients meet what that time brings (broker.clock): a consumer group member expired (confluent-kafka sees its
assignment lost and joins again), an open transaction aborted at its timeout (its producer fenced, a read_committed
consumer never sees its records), a topic's old segments deleted by retention.ms, a share record's lock expired.
No wait in these tests sleeps longer than a second at a time."""
from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from trafka.broker.testing import BrokerError, TrafkaBroker
from trafka.wire.messages import DescribeGroupsRequest

WAIT_S = 30


@pytest.fixture(scope="module")
def trafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrafkaBroker]:
    with TrafkaBroker(tmp_path_factory.mktemp("clock") / "data", controllable_clock=True,
                      properties={"offsets.topic.num.partitions": 1}) as broker:
        yield broker


def _until(condition, what: str, step: callable = lambda: time.sleep(0.1)):
    deadline = time.monotonic() + WAIT_S
    while not (result := condition()):
        assert time.monotonic() < deadline, what
        step()
    return result


def _member_ids(trafka: TrafkaBroker, group: str) -> list[str]:
    from compat_tests.wire_client import WireClient

    with WireClient(trafka.bootstrap_servers) as client:
        described = client.request(DescribeGroupsRequest(groups=[group]), 5).groups[0]
    return [member.member_id for member in described.members]


def test_a_member_whose_session_timed_out_loses_its_assignment_and_joins_again(trafka: TrafkaBroker):
    topic = trafka.create_topic("clocked-group")
    events: list[str] = []
    consumer = Consumer({"bootstrap.servers": trafka.bootstrap_servers, "group.id": "clocked",
                         "session.timeout.ms": 30_000, "heartbeat.interval.ms": 1000})
    consumer.subscribe([topic], on_assign=lambda c, parts: events.append("assigned"),
                       on_revoke=lambda c, parts: events.append("revoked"),
                       on_lost=lambda c, parts: events.append("lost"))
    try:
        _until(lambda: "assigned" in events, "the first assignment", lambda: consumer.poll(0.2))
        before = _until(lambda: _member_ids(trafka, "clocked"), "a member")
        trafka.advance(31)  # past session.timeout.ms: the broker expires the member before its next heartbeat
        _until(lambda: events.count("assigned") >= 2, f"the assignment after the expiry: {events}",
               lambda: consumer.poll(0.2))
        assert "lost" in events[events.index("assigned") + 1:], events
        after = _member_ids(trafka, "clocked")
        assert after and after != before  # it joined again as a new member
    finally:
        consumer.close()


def test_an_open_transaction_is_aborted_at_its_timeout(trafka: TrafkaBroker):
    topic = trafka.create_topic("clocked-txn")
    producer = Producer({"bootstrap.servers": trafka.bootstrap_servers, "transactional.id": "clocked-txn",
                         "transaction.timeout.ms": 60_000})
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    producer.produce(topic, value=b"never committed")
    producer.flush(WAIT_S)
    reader = Consumer({"bootstrap.servers": trafka.bootstrap_servers, "group.id": "clocked-txn-reader",
                       "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        partition = TopicPartition(topic, 0)
        # Open: the last stable offset stays at the transaction's first record.
        assert reader.get_watermark_offsets(partition, timeout=10)[1] == 0
        trafka.advance(61)  # past transaction.timeout.ms: the coordinator aborts it and bumps the epoch
        # The abort marker is written: the last stable offset moves past the aborted record and its marker.
        _until(lambda: reader.get_watermark_offsets(partition, timeout=10)[1] == 2, "the abort marker")
        reader.assign([TopicPartition(topic, 0, 0)])
        assert reader.consume(10, 1) == []  # the aborted record is not read
        with pytest.raises(KafkaException) as refused:
            producer.commit_transaction(WAIT_S)
        assert refused.value.args[0].name() in ("_FENCED", "INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED"), refused
    finally:
        reader.close()


def test_old_segments_are_deleted_by_retention_ms(trafka: TrafkaBroker):
    topic = trafka.create_topic("clocked-retention", configs={"retention.ms": 3_600_000, "segment.bytes": 2048})
    producer = Producer({"bootstrap.servers": trafka.bootstrap_servers, "linger.ms": 0})
    for i in range(20):
        producer.produce(topic, value=bytes([i]) * 500)
        producer.flush(WAIT_S)  # one batch each: several segments
    reader = Consumer({"bootstrap.servers": trafka.bootstrap_servers, "group.id": "clocked-retention-reader"})
    try:
        partition = TopicPartition(topic, 0)
        assert reader.get_watermark_offsets(partition, timeout=10) == (0, 20)
        trafka.advance(2 * 3600)  # two hours on: every closed segment is past retention.ms
        low, high = _until(lambda: (lambda w: w if w[0] > 0 else None)(
            reader.get_watermark_offsets(partition, timeout=10)), "the old segments deleted")
        assert high == 20 and low > 0
    finally:
        reader.close()


def test_a_share_records_lock_expires_and_another_consumer_gets_it(trafka: TrafkaBroker):
    import confluent_kafka

    if not hasattr(confluent_kafka, "ShareConsumer"):
        pytest.skip("this confluent-kafka has no ShareConsumer")
    from compat_tests.test_differential_share_fetch import set_group_configs
    from compat_tests.wire_client import WireClient

    topic = trafka.create_topic("clocked-share")
    with WireClient(trafka.bootstrap_servers) as client:
        set_group_configs(client, "clocked-share", share_auto_offset_reset="earliest")
    producer = Producer({"bootstrap.servers": trafka.bootstrap_servers})
    producer.produce(topic, value=b"work")
    producer.flush(WAIT_S)

    def share_consumer(name: str):
        consumer = confluent_kafka.ShareConsumer({"bootstrap.servers": trafka.bootstrap_servers,
                                                  "group.id": "clocked-share", "client.id": name,
                                                  "share.acknowledgement.mode": "explicit"})
        consumer.subscribe([topic])
        return consumer

    def records(consumer) -> list:
        return [(m.offset(), m.delivery_count()) for m in consumer.poll(0.3) if m.error() is None]

    holder, other = share_consumer("holder"), share_consumer("other")
    try:
        assert _until(lambda: records(holder), "the first delivery") == [(0, 1)]  # acquired, never acknowledged
        trafka.advance(31)  # past group.share.record.lock.duration.ms (30 s): the record is available again
        assert _until(lambda: records(other), "the redelivery") == [(0, 2)]
    finally:
        holder.close()
        other.close()


def test_the_clock_from_the_command_line_and_a_broker_with_the_real_clock(trafka: TrafkaBroker, tmp_path):
    before = trafka.now_ms()
    shown = subprocess.run([sys.executable, "-m", "trafka", "control", "--port", str(trafka.control_port), "clock",
                            "advance", "0.5"], capture_output=True, text=True, timeout=30, check=True).stdout
    assert '"controllable": true' in shown and trafka.now_ms() >= before + 500
    with TrafkaBroker(tmp_path / "real") as real:
        with pytest.raises(BrokerError, match="--controllable-clock"):
            real.advance(1)
