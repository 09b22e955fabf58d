"""The replica fetcher (broker.replication.fetcher) against a real trafka broker process: records produced
by an unmodified client (confluent-kafka) are copied into a follower log in the test's tmp_path, and the
follower's segment file ends up byte for byte the leader's. The fetcher keeps up as more records arrive
(the leader's long poll wakes it), reconnects when the broker is killed and started again, and repairs
a follower log that runs ahead of the leader's or ends before the leader's log start.

A single broker takes a replica's Fetch only from a replica of the partition, and its only replica is
itself: the fetcher here presents the broker's own node id.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from trafka.broker.peer import PeerConnection
from trafka.broker.replication.fetcher import FollowedPartition, ReplicaFetcher
from compat_tests.clients import ConfluentClient, numbered_messages
from compat_tests.harness import BrokerProcess
from compat_tests.wire_client import WireClient
from trafka.storage.config import LogConfig
from trafka.storage.log import Log
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import (
    DeleteRecordsRequest,
    ListOffsetsRequest,
    ListOffsetsResponse,
    MetadataRequest,
    MetadataResponse,
)
from trafka.wire.protocol import ApiKey
from trafka.wire.records import SimpleRecord, build_batch

WAIT_S = 30.0
FIRST_SEGMENT = "00000000000000000000.log"


async def partition_state(broker: BrokerProcess, topic: str) -> tuple[uuid.UUID, int, int]:
    """The topic's id, and partition 0's leader epoch and log end offset (its high watermark: a single
    broker's ISR is itself), asked over a PeerConnection."""
    connection = await PeerConnection.connect(broker.host, broker.port, client_id="compat-replica",
                                              connect_timeout_s=10)
    try:
        metadata = await connection.request(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                                            allow_auto_topic_creation=False),
                                             connection.api_versions(ApiKey.METADATA, minimum=10))
        assert isinstance(metadata, MetadataResponse)
        [found] = metadata.topics
        assert found.error_code == ErrorCode.NONE
        epoch = found.partitions[0].leader_epoch
        latest = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
            name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
        offsets = await connection.request(latest, connection.api_versions(ApiKey.LIST_OFFSETS, minimum=4))
        assert isinstance(offsets, ListOffsetsResponse)
        return found.topic_id, epoch, offsets.topics[0].partitions[0].offset
    finally:
        await connection.aclose()


def leader_segment(broker: BrokerProcess, topic: str) -> bytes:
    return (broker.data_dir / f"{topic}-0" / FIRST_SEGMENT).read_bytes()


def follower_segment(log: Log) -> bytes:
    return b"".join(segment.log_path.read_bytes() for segment in log.segments)


async def wait_until(condition: Callable[[], bool], what: str) -> None:
    with trio.move_on_after(WAIT_S) as scope:
        while not condition():
            await trio.sleep(0.02)
    assert not scope.cancelled_caught, f"timed out waiting until {what}"


class Follower:
    """A follower log in tmp_path for partition 0 of ``topic``, fed by a ReplicaFetcher from ``broker``."""

    def __init__(self, broker: BrokerProcess, topic: str, tmp_path: Path) -> None:
        self.broker = broker
        self.topic = topic
        self.tmp_path = tmp_path
        self.fetcher = ReplicaFetcher(broker.node_id, broker.node_id, (broker.host, broker.port),
                                      backoff_ms=100, max_wait_ms=500)
        self.replica: FollowedPartition | None = None

    async def start(self, nursery: trio.Nursery, log: Log | None = None) -> FollowedPartition:
        topic_id, epoch, _ = await partition_state(self.broker, self.topic)
        if log is None:
            log = Log.create(self.tmp_path / "follower" / f"{self.topic}-0", LogConfig(), topic_id=topic_id)
        self.replica = FollowedPartition(self.topic, 0, topic_id, log, epoch)
        self.fetcher.add_partition(self.replica)
        await nursery.start(self.fetcher.run)
        return self.replica

    async def caught_up(self) -> None:
        """Until the follower's log ends where the leader's does; then the segment files are equal."""
        assert self.replica is not None
        log = self.replica.log
        _, _, leader_end = await partition_state(self.broker, self.topic)
        await wait_until(lambda: log.log_end_offset == leader_end,
                         f"the follower's log end offset ({log.log_end_offset}) reaches the leader's ({leader_end})")
        await wait_until(lambda: log.high_watermark == leader_end, "the follower takes the leader's high watermark")
        assert follower_segment(log) == leader_segment(self.broker, self.topic)


def produce(broker: BrokerProcess, topic: str, prefix: str, count: int, compression: str = "none") -> None:
    delivered = ConfluentClient(broker.bootstrap).produce(topic, numbered_messages(count, prefix=prefix, partitions=1),
                                                          compression=compression)
    assert all(d.offset is not None for d in delivered)


async def test_a_follower_copies_a_real_brokers_log_and_rides_out_a_crash(broker_factory, topic, tmp_path: Path,
                                                                          nursery: trio.Nursery) -> None:
    broker = broker_factory()
    name = topic(partitions=1, on=broker)
    for round_number, codec in enumerate(["none", "none", "zstd", "none", "gzip"]):
        produce(broker, name, f"before{round_number}", 5 + round_number, codec)
    follower = Follower(broker, name, tmp_path)
    replica = await follower.start(nursery)
    await follower.caught_up()
    assert follower.fetcher.fetch_version is not None and follower.fetcher.fetch_version >= 12
    assert len(replica.log.leader_epoch_cache.entries) == 1

    # More records while the fetcher waits in the leader's long poll.
    for round_number, codec in enumerate(["lz4", "none", "snappy"]):
        await trio.to_thread.run_sync(produce, broker, name, f"during{round_number}", 20, codec)
    await follower.caught_up()

    # kill -9, start again on the same port and data directory: the fetcher reconnects by itself.
    old_port = broker.port
    connections = follower.fetcher.connect_count
    await trio.to_thread.run_sync(lambda: broker.restart(crash=True))
    if broker.port != old_port:
        pytest.skip(f"the broker could not bind port {old_port} again")
    _, epoch, _ = await partition_state(broker, name)
    if epoch != replica.leader_epoch:  # as the replica manager would tell it
        replica.leader_epoch = epoch
        follower.fetcher.leader_epoch_changed(name, 0)
    await trio.to_thread.run_sync(produce, broker, name, "after", 30, "zstd")
    await follower.caught_up()
    assert follower.fetcher.connect_count > connections
    replica.log.close()


async def test_a_follower_ahead_of_the_leader_truncates_to_its_end(broker_factory, topic, tmp_path: Path,
                                                                    nursery: trio.Nursery) -> None:
    broker = broker_factory()
    name = topic(partitions=1, on=broker)
    produce(broker, name, "leader", 10)
    topic_id, epoch, leader_end = await partition_state(broker, name)
    log = Log.create(tmp_path / "follower" / f"{name}-0", LogConfig(), topic_id=topic_id)
    log.append_as_follower(leader_segment(broker, name))
    extra = [SimpleRecord(b"k", b"never on the leader") for _ in range(4)]
    log.append_as_follower(build_batch(extra, base_offset=leader_end, partition_leader_epoch=epoch))
    assert log.log_end_offset == leader_end + 4
    follower = Follower(broker, name, tmp_path)
    await follower.start(nursery, log)
    await follower.caught_up()
    produce(broker, name, "more", 5)
    await follower.caught_up()
    log.close()


async def test_a_follower_behind_the_leaders_log_start_starts_there(broker_factory, topic, tmp_path: Path,
                                                                    nursery: trio.Nursery) -> None:
    broker = broker_factory()
    name = topic(partitions=1, on=broker)
    for round_number in range(4):
        produce(broker, name, f"r{round_number}", 5)
    with WireClient(broker.bootstrap) as client:
        deleted = client.request(DeleteRecordsRequest(timeout_ms=5000, topics=[DeleteRecordsRequest.DeleteRecordsTopic(
            name=name, partitions=[DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=12)])]), 2)
    assert deleted.topics[0].partitions[0].error_code == ErrorCode.NONE
    follower = Follower(broker, name, tmp_path)
    replica = await follower.start(nursery)
    _, _, leader_end = await partition_state(broker, name)
    await wait_until(lambda: replica.log.log_end_offset == leader_end, "the follower catches up")
    assert replica.log.log_start_offset == 12
    assert replica.log.high_watermark == leader_end
    replica.log.close()
