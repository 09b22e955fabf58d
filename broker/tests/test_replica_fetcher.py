"""The replica fetcher (broker.replication): its per-partition decisions over real logs in tmp_path and
real record batches, then the Trio task against an in-process broker and against a scripted leader
(which answers what a test needs: errors, partial batches, diverging epochs, dropped connections)."""
from __future__ import annotations

import functools
import logging
import struct
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from trafka.broker.peer import PeerConnection, PeerError
from trafka.broker.replication.fetcher import (
    FetchState,
    FollowedPartition,
    Outcome,
    ReplicaFetcher,
    process_partition_data,
    start_at_leader_start_offset,
    truncate_on_diverging_epoch,
    truncate_to_leader_end_offset,
    whole_batches_size,
)
from trafka.broker.tests.conftest import KafkaClient, RunningBroker
from trafka.broker.tests.test_produce_fetch import create_topic, produce
from trafka.storage.config import LogConfig
from trafka.storage.log import Log
from trafka.wire.connection import NEED_DATA, ServerConnection
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import (
    ApiVersionsResponse,
    DeleteRecordsRequest,
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from trafka.wire.primitives import Message
from trafka.wire.protocol import ApiKey
from trafka.wire.records import Compression, SimpleRecord, build_batch

PartitionData = FetchResponse.PartitionData
TOPIC_ID = uuid.UUID("6c3e1f0a-8d1e-4b8e-9f5a-0d6f1c2b3a49")
WAIT_S = 10


def new_log(tmp_path: Path, topic: str = "t", index: int = 0) -> Log:
    return Log.create(tmp_path / "follower" / f"{topic}-{index}", LogConfig(), topic_id=TOPIC_ID)


def batch(base_offset: int, count: int = 1, *, epoch: int = 0, compression: Compression = Compression.NONE) -> bytes:
    records = [SimpleRecord(b"key", b"value-%d" % (base_offset + i)) for i in range(count)]
    return build_batch(records, base_offset=base_offset, partition_leader_epoch=epoch, compression=compression,
                       base_timestamp=1_700_000_000_000)


def log_with_epochs(tmp_path: Path, epochs: list[int]) -> Log:
    """A follower log with one single-record batch per entry of ``epochs`` (the batch's leader epoch)."""
    log = new_log(tmp_path)
    for offset, epoch in enumerate(epochs):
        log.append_as_follower(batch(offset, epoch=epoch))
    return log


def data(records: bytes = b"", *, high_watermark: int = 0, log_start_offset: int = 0,
         error: ErrorCode = ErrorCode.NONE, diverging: tuple[int, int] | None = None) -> PartitionData:
    partition = PartitionData(partition_index=0, error_code=error, high_watermark=high_watermark,
                              log_start_offset=log_start_offset, records=records)
    if diverging is not None:
        partition.diverging_epoch = FetchResponse.EpochEndOffset(epoch=diverging[0], end_offset=diverging[1])
    return partition


def replica_of(log: Log, epoch: int = 0) -> FollowedPartition:
    return FollowedPartition(log.topic, log.partition, TOPIC_ID, log, epoch)


def segment_bytes(log: Log) -> bytes:
    return b"".join(segment.log_path.read_bytes() for segment in log.segments)


# -- whole batches ---------------------------------------------------------------------------------------

def test_whole_batches_size_stops_before_a_partial_batch() -> None:
    first, second = batch(0, 3), batch(3, 2, compression=Compression.GZIP)
    records = first + second
    assert whole_batches_size(records) == len(records)
    assert whole_batches_size(records + second[:20]) == len(records)
    assert whole_batches_size(records + second[:5]) == len(records)  # not even a batch length
    assert whole_batches_size(memoryview(first + second[:-1])) == len(first)
    assert whole_batches_size(b"") == 0


def test_whole_batches_size_counts_in_a_batch_too_short_to_be_one() -> None:
    bogus = bytearray(batch(0))
    struct.pack_into(">i", bogus, 8, 10)  # batch_length below the header's own size
    assert whole_batches_size(bytes(bogus)) == len(bogus)


# -- appending ---------------------------------------------------------------------------------------------

def test_append_takes_whole_batches_unchanged_and_the_leaders_offsets(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    replica = replica_of(log)
    records = batch(0, 3) + batch(3, 2, compression=Compression.ZSTD, epoch=1) + batch(5, 4, epoch=1)
    outcome = process_partition_data(replica, data(memoryview(records), high_watermark=7), fetch_offset=0)
    assert outcome is Outcome.PROGRESS
    assert log.log_end_offset == 9
    assert log.high_watermark == 7
    assert log.latest_epoch == 1
    assert segment_bytes(log) == records


def test_a_trailing_partial_batch_is_dropped_and_fetched_again(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    replica = replica_of(log)
    whole, cut = batch(0, 2), batch(2, 3)
    assert process_partition_data(replica, data(whole + cut[:-7], high_watermark=5), fetch_offset=0) is Outcome.PROGRESS
    assert log.log_end_offset == 2
    assert log.high_watermark == 2, "the high watermark is bounded by the follower's log end offset"
    assert process_partition_data(replica, data(cut, high_watermark=5), fetch_offset=2) is Outcome.PROGRESS
    assert log.log_end_offset == 5 and log.high_watermark == 5
    assert segment_bytes(log) == whole + cut


def test_only_a_partial_batch_appends_nothing(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    outcome = process_partition_data(replica_of(log), data(batch(0, 4)[:30], high_watermark=4), fetch_offset=0)
    assert outcome is Outcome.PROGRESS
    assert log.log_end_offset == 0 and segment_bytes(log) == b""


def test_the_leaders_log_start_offset_is_followed_up_to_the_high_watermark(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    replica = replica_of(log)
    process_partition_data(replica, data(batch(0, 5), high_watermark=5, log_start_offset=3), fetch_offset=0)
    assert log.log_start_offset == 3
    process_partition_data(replica, data(batch(5, 5), high_watermark=6, log_start_offset=8), fetch_offset=5)
    assert log.log_start_offset == 6, "never past the follower's high watermark"
    process_partition_data(replica, data(high_watermark=10, log_start_offset=8), fetch_offset=10)
    assert (log.log_start_offset, log.high_watermark) == (8, 10)


def test_an_empty_log_restarts_at_a_batch_holding_its_start_offset(tmp_path: Path) -> None:
    """The leader's log start offset (after DeleteRecords) falls inside a batch: the follower, started
    there, is sent the whole batch."""
    log = new_log(tmp_path)
    start_at_leader_start_offset(log, 6)
    records = batch(4, 4) + batch(8, 2)
    outcome = process_partition_data(replica_of(log), data(records, high_watermark=10, log_start_offset=6),
                                     fetch_offset=6)
    assert outcome is Outcome.PROGRESS
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (6, 10, 10)
    assert segment_bytes(log) == records


def test_data_for_an_offset_the_log_has_left_is_dropped(tmp_path: Path) -> None:
    log = log_with_epochs(tmp_path, [0, 0])
    outcome = process_partition_data(replica_of(log), data(batch(1), high_watermark=2), fetch_offset=1)
    assert outcome is Outcome.STALE
    assert log.log_end_offset == 2 and log.high_watermark == 0


def test_corrupt_batches_back_off_and_leave_the_log_as_it_was(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    corrupt = bytearray(batch(0, 3))
    corrupt[-1] ^= 0xFF  # the CRC no longer matches
    outcome = process_partition_data(replica_of(log), data(bytes(corrupt), high_watermark=3), fetch_offset=0)
    assert outcome is Outcome.RETRY
    assert log.log_end_offset == 0 and segment_bytes(log) == b""


def test_a_batch_that_does_not_follow_the_log_fails_the_partition(tmp_path: Path) -> None:
    log = log_with_epochs(tmp_path, [0, 0, 0])
    outcome = process_partition_data(replica_of(log), data(batch(1), high_watermark=3), fetch_offset=3)
    assert outcome is Outcome.FAILED
    assert log.log_end_offset == 3


# -- diverging epochs --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("epochs", "diverging", "expected_end"), [
    # The leader's epoch 0 ends at 3, ours at 5: the smaller.
    ([0, 0, 0, 0, 0, 1, 1, 1, 1, 1], (0, 3), 3),
    # The leader's epoch 0 ends at 7, ours at 5: ours.
    ([0, 0, 0, 0, 0, 1, 1, 1, 1, 1], (0, 7), 5),
    # Our latest epoch ends at our log end offset: the leader's end of it.
    ([0, 0, 0, 0, 0, 1, 1, 1, 1, 1], (1, 8), 8),
    # The leader's epoch 1 is one we never had (ours went 0 then 2): to our end of epoch 0, and the
    # next Fetch, with last fetched epoch 0, finds the rest.
    ([0, 0, 0, 0, 0, 2, 2, 2, 2, 2], (1, 7), 5),
    # Every epoch we know is above the leader's: nothing of ours is from that epoch or before.
    ([3, 3, 3, 3, 3], (2, 2), 0),
    # We know no epochs at all (batches without one): the leader's end offset.
    ([-1, -1, -1, -1, -1], (2, 2), 2),
    # Never past our own log end.
    ([0, 0, 0], (0, 9), 3),
])
def test_truncation_on_a_diverging_epoch(tmp_path: Path, epochs: list[int], diverging: tuple[int, int],
                                         expected_end: int) -> None:
    log = log_with_epochs(tmp_path, epochs)
    log.update_high_watermark(log.log_end_offset)
    outcome = process_partition_data(replica_of(log), data(diverging=diverging, high_watermark=99),
                                     fetch_offset=log.log_end_offset)
    assert outcome is Outcome.TRUNCATED
    assert log.log_end_offset == expected_end
    assert log.high_watermark == expected_end, "not the leader's: that waits for the next response"
    expected_epoch = epochs[expected_end - 1] if expected_end else -1
    assert log.latest_epoch == (expected_epoch if expected_epoch >= 0 else None)


def test_truncation_removes_whole_batches_from_the_diverging_one_on(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    log.append_as_follower(batch(0, 4, epoch=0) + batch(4, 4, epoch=1))
    assert truncate_on_diverging_epoch(log, 1, 6) == 4  # the batch holding offset 6 begins at 4
    assert segment_bytes(log) == batch(0, 4, epoch=0)


def test_an_undefined_diverging_epoch_is_no_divergence(tmp_path: Path) -> None:
    log = log_with_epochs(tmp_path, [0, 0])
    outcome = process_partition_data(replica_of(log), data(diverging=(-1, -1), high_watermark=2), fetch_offset=2)
    assert outcome is Outcome.PROGRESS
    assert log.log_end_offset == 2 and log.high_watermark == 2


# -- out of range ------------------------------------------------------------------------------------------

def test_a_follower_ahead_of_the_leader_truncates_to_its_end(tmp_path: Path) -> None:
    log = log_with_epochs(tmp_path, [0] * 6)
    assert truncate_to_leader_end_offset(log, 4)
    assert log.log_end_offset == 4
    assert not truncate_to_leader_end_offset(log, 4)
    assert not truncate_to_leader_end_offset(log, 9)
    assert log.log_end_offset == 4


def test_a_follower_behind_the_leaders_start_starts_again_there(tmp_path: Path) -> None:
    log = log_with_epochs(tmp_path, [0] * 3)
    assert not start_at_leader_start_offset(log, 2), "within the leader's log: keep it"
    assert start_at_leader_start_offset(log, 50)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (50, 50, 50)
    assert segment_bytes(log) == b""
    assert log.latest_epoch is None


def test_error_codes_map_to_outcomes(tmp_path: Path) -> None:
    log = log_with_epochs(tmp_path, [0])
    replica = replica_of(log)
    expected = {
        ErrorCode.OFFSET_OUT_OF_RANGE: Outcome.OUT_OF_RANGE,
        ErrorCode.FENCED_LEADER_EPOCH: Outcome.FENCED,
        ErrorCode.UNKNOWN_LEADER_EPOCH: Outcome.RETRY,
        ErrorCode.NOT_LEADER_OR_FOLLOWER: Outcome.RETRY,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: Outcome.RETRY,
        ErrorCode.UNKNOWN_TOPIC_ID: Outcome.RETRY,
        ErrorCode.KAFKA_STORAGE_ERROR: Outcome.RETRY,
        ErrorCode.UNKNOWN_SERVER_ERROR: Outcome.RETRY,
    }
    for code, outcome in expected.items():
        assert process_partition_data(replica, data(batch(1), error=code), fetch_offset=1) is outcome, code.name
    assert log.log_end_offset == 1, "an error's records are never appended"


# -- the task against an in-process broker -----------------------------------------------------------------

async def wait_until(condition: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
    with trio.fail_after(timeout_s):
        while not condition():
            await trio.sleep(0.01)


class Follower:
    """A fetcher from the in-process broker, run in the test's nursery, with its follower logs."""

    def __init__(self, running: RunningBroker, tmp_path: Path, **settings: int) -> None:
        self.running = running
        self.tmp_path = tmp_path
        node_id = running.broker.config.node_id
        # A single broker accepts a replica fetch only from a replica of the partition: itself.
        self.progress: list[FollowedPartition] = []
        self.fetcher = ReplicaFetcher(node_id, node_id, (running.host, running.port), backoff_ms=50,
                                      max_wait_ms=200, on_progress=self.progress.append, **settings)

    def follow(self, topic: str, index: int = 0) -> FollowedPartition:
        partition = self.running.broker.topics.partition(topic, index)
        log = Log.create(self.tmp_path / "follower" / f"{topic}-{index}", LogConfig(), topic_id=partition.topic_id)
        replica = FollowedPartition(topic, index, partition.topic_id, log, partition.leader_epoch)
        self.fetcher.add_partition(replica)
        return replica

    def leader_log(self, topic: str, index: int = 0) -> Log:
        return self.running.broker.topics.partition(topic, index).log

    async def caught_up(self, replica: FollowedPartition) -> None:
        leader = self.leader_log(replica.topic, replica.index)
        await wait_until(lambda: replica.log.log_end_offset == leader.log_end_offset
                         and replica.log.high_watermark == leader.high_watermark)
        assert segment_bytes(replica.log) == segment_bytes(leader)


@pytest.fixture
async def follower(broker: RunningBroker, tmp_path: Path, nursery: trio.Nursery) -> Follower:
    running = Follower(broker, tmp_path)
    nursery.start_soon(running.fetcher.run)
    return running


async def test_a_follower_copies_the_leaders_batches_byte_for_byte(client: KafkaClient, follower: Follower) -> None:
    await create_topic(client, "copied", partitions=2)
    codecs = [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
    for i, codec in enumerate(codecs):
        await produce(client, "copied", batch(0, 3 + i, compression=codec), partition=i % 2)
    replicas = [follower.follow("copied", 0), follower.follow("copied", 1)]
    for replica in replicas:
        await follower.caught_up(replica)
    assert follower.fetcher.fetch_version == FetchRequest.MAX_VERSION
    assert set(follower.progress) == set(replicas)
    # Long polling: new batches arrive without another request being asked for.
    await produce(client, "copied", batch(0, 7), partition=1)
    await follower.caught_up(replicas[1])


async def test_fetch_versions_below_13_name_topics(broker: RunningBroker, client: KafkaClient, tmp_path: Path,
                                                   nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    original = PeerConnection.api_versions

    def fetch_12(self: PeerConnection, key: int, minimum: int | None = None) -> int:
        return 12 if key == ApiKey.FETCH else original(self, key, minimum=minimum)

    monkeypatch.setattr(PeerConnection, "api_versions", fetch_12)
    await create_topic(client, "named")
    await produce(client, "named", batch(0, 5))
    follower = Follower(broker, tmp_path)
    nursery.start_soon(follower.fetcher.run)
    replica = follower.follow("named")
    await follower.caught_up(replica)
    assert follower.fetcher.fetch_version == 12


async def test_partitions_come_and_go(client: KafkaClient, follower: Follower) -> None:
    await create_topic(client, "coming", partitions=2)
    await produce(client, "coming", batch(0, 2), partition=0)
    first = follower.follow("coming", 0)
    await follower.caught_up(first)
    assert follower.fetcher.remove_partition("coming", 0) is first
    assert follower.fetcher.remove_partition("coming", 0) is None
    await produce(client, "coming", batch(0, 2), partition=0)
    await produce(client, "coming", batch(0, 3), partition=1)
    second = follower.follow("coming", 1)
    await follower.caught_up(second)
    assert first.log.log_end_offset == 2, "a removed partition is not fetched"
    assert set(follower.fetcher.partitions) == {("coming", 1)}


async def test_a_follower_ahead_of_the_leader_truncates_to_the_leaders_end(client: KafkaClient,
                                                                           follower: Follower) -> None:
    await create_topic(client, "ahead")
    await produce(client, "ahead", batch(0, 4))
    leader = follower.leader_log("ahead")
    partition = follower.running.broker.topics.partition("ahead", 0)
    log = Log.create(follower.tmp_path / "follower" / "ahead-0", LogConfig(), topic_id=partition.topic_id)
    log.append_as_follower(segment_bytes(leader))
    log.append_as_follower(batch(4, 3, epoch=partition.leader_epoch))  # never written by the leader
    follower.fetcher.add_partition(FollowedPartition("ahead", 0, partition.topic_id, log, partition.leader_epoch))
    await wait_until(lambda: log.log_end_offset == 4)
    await produce(client, "ahead", batch(0, 2))
    await wait_until(lambda: log.log_end_offset == 6)
    assert segment_bytes(log) == segment_bytes(leader)


async def test_a_follower_behind_the_leaders_start_starts_at_it(client: KafkaClient, follower: Follower) -> None:
    await create_topic(client, "behind")
    for _ in range(3):
        await produce(client, "behind", batch(0, 4))
    delete = DeleteRecordsRequest(timeout_ms=5000, topics=[DeleteRecordsRequest.DeleteRecordsTopic(
        name="behind", partitions=[DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=6)])])
    deleted = await client.request(delete, 2)
    assert deleted.topics[0].partitions[0].error_code == ErrorCode.NONE
    replica = follower.follow("behind")
    await wait_until(lambda: replica.log.log_end_offset == 12)
    assert replica.log.log_start_offset == 6
    assert replica.log.high_watermark == 12


# -- the task against a scripted leader ----------------------------------------------------------------------

class ScriptedLeader:
    """A broker that serves ApiVersions and answers Fetch and ListOffsets with ``on_fetch`` and
    ``on_list_offsets``; ``drop()`` closes every connection."""

    def __init__(self) -> None:
        self.fetches: list[FetchRequest] = []
        self.list_offsets: list[ListOffsetsRequest] = []
        self.on_fetch: Callable[[FetchRequest], FetchResponse] = lambda request: FetchResponse()
        self.on_list_offsets: Callable[[ListOffsetsRequest], ListOffsetsResponse] = (
            lambda request: ListOffsetsResponse())
        self.fetched = trio.Condition()
        self.port = 0
        self._streams: list[trio.SocketStream] = []
        self.connections = 0

    async def serve(self, nursery: trio.Nursery) -> None:
        listeners = await nursery.start(functools.partial(trio.serve_tcp, self._handle, 0, host="127.0.0.1"))
        self.port = listeners[0].socket.getsockname()[1]

    async def drop(self) -> None:
        for stream in self._streams:
            await trio.aclose_forcefully(stream)
        self._streams = []

    async def wait_fetches(self, count: int) -> None:
        with trio.fail_after(WAIT_S):
            async with self.fetched:
                while len(self.fetches) < count:
                    await self.fetched.wait()

    async def _handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        self._streams.append(stream)
        connection = ServerConnection()
        try:
            while True:
                request = connection.next_request()
                if request is NEED_DATA:
                    chunk = await stream.receive_some(65536)
                    if not chunk:
                        return
                    connection.receive_data(chunk)
                    continue
                response = await self._answer(request.header.api_key, request.body)
                await stream.send_all(b"".join(bytes(c) for c in connection.send_response(request.header, response)))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return

    async def _answer(self, api_key: int, request: Message) -> Message:
        if api_key == ApiKey.API_VERSIONS:
            return ApiVersionsResponse(api_keys=[
                ApiVersionsResponse.ApiVersion(api_key=ApiKey.FETCH, min_version=4, max_version=18),
                ApiVersionsResponse.ApiVersion(api_key=ApiKey.LIST_OFFSETS, min_version=1, max_version=11),
            ])
        if api_key == ApiKey.LIST_OFFSETS:
            self.list_offsets.append(request)
            return self.on_list_offsets(request)
        assert api_key == ApiKey.FETCH
        response = self.on_fetch(request)
        async with self.fetched:
            self.fetches.append(request)
            self.fetched.notify_all()
        if not any(p.records for t in response.responses for p in t.partitions):
            await trio.sleep(min(request.max_wait_ms, 50) / 1000)  # a long poll, shortened
        return response


def fetch_response(request: FetchRequest,
                   answer: Callable[[int, FetchRequest.FetchPartition], PartitionData]) -> FetchResponse:
    return FetchResponse(responses=[
        FetchResponse.FetchableTopicResponse(topic=topic.topic, topic_id=topic.topic_id, partitions=[
            _indexed(answer(p.partition, p), p.partition) for p in topic.partitions
        ]) for topic in request.topics
    ])


def _indexed(partition: PartitionData, index: int) -> PartitionData:
    partition.partition_index = index
    return partition


def fetched_partitions(request: FetchRequest) -> list[int]:
    return [p.partition for t in request.topics for p in t.partitions]


@pytest.fixture
async def leader(nursery: trio.Nursery) -> ScriptedLeader:
    scripted = ScriptedLeader()
    await scripted.serve(nursery)
    return scripted


def scripted_fetcher(leader: ScriptedLeader, **settings: object) -> ReplicaFetcher:
    return ReplicaFetcher(7, 1, ("127.0.0.1", leader.port), **{"backoff_ms": 50, "max_wait_ms": 100, **settings})


def followed(tmp_path: Path, index: int, epoch: int = 5) -> FollowedPartition:
    return FollowedPartition("t", index, TOPIC_ID, new_log(tmp_path, "t", index), epoch)


async def test_the_fetch_request_names_the_follower_and_its_logs(leader: ScriptedLeader, tmp_path: Path,
                                                                 nursery: trio.Nursery) -> None:
    replica = followed(tmp_path, 0, epoch=5)
    replica.log.append_as_follower(batch(0, 3, epoch=4))
    leader.on_fetch = lambda request: fetch_response(request, lambda i, p: data(high_watermark=3))
    fetcher = scripted_fetcher(leader, max_bytes=1000, partition_max_bytes=100, min_bytes=10)
    nursery.start_soon(fetcher.run)
    await trio.sleep(0.05)
    assert leader.connections == 0, "no connection while there is nothing to fetch"
    fetcher.add_partition(replica)
    await leader.wait_fetches(1)
    request = leader.fetches[0]
    assert request.replica_state.replica_id == 7 and request.replica_state.replica_epoch == -1
    assert (request.max_wait_ms, request.min_bytes, request.max_bytes) == (100, 10, 1000)
    assert (request.isolation_level, request.session_id, request.session_epoch) == (0, 0, -1)
    [topic] = request.topics
    assert topic.topic_id == TOPIC_ID
    [partition] = topic.partitions
    assert (partition.partition, partition.fetch_offset, partition.current_leader_epoch, partition.last_fetched_epoch,
            partition.log_start_offset, partition.partition_max_bytes) == (0, 3, 5, 4, 0, 100)


async def test_a_partition_in_error_backs_off_while_the_others_go_on(leader: ScriptedLeader, tmp_path: Path,
                                                                     nursery: trio.Nursery) -> None:
    errors = {1: ErrorCode.NOT_LEADER_OR_FOLLOWER}

    def answer(index: int, partition: FetchRequest.FetchPartition) -> PartitionData:
        if index in errors:
            return data(error=errors[index])
        return data(batch(partition.fetch_offset), high_watermark=partition.fetch_offset + 1)

    leader.on_fetch = lambda request: fetch_response(request, answer)
    fetcher = scripted_fetcher(leader, backoff_ms=300)
    good, bad = followed(tmp_path, 0), followed(tmp_path, 1)
    fetcher.add_partition(good)
    fetcher.add_partition(bad)
    nursery.start_soon(fetcher.run)
    await leader.wait_fetches(3)
    assert fetched_partitions(leader.fetches[0]) == [0, 1]
    assert fetched_partitions(leader.fetches[1]) == [0], "partition 1 backs off"
    assert fetcher.fetch_state("t", 1) is FetchState.DELAYED
    assert good.log.log_end_offset >= 2
    del errors[1]
    await wait_until(lambda: bad.log.log_end_offset > 0)


async def test_a_fenced_partition_waits_for_a_new_leader_epoch(leader: ScriptedLeader, tmp_path: Path,
                                                                nursery: trio.Nursery) -> None:
    def answer(index: int, partition: FetchRequest.FetchPartition) -> PartitionData:
        if partition.current_leader_epoch < 6:
            return data(error=ErrorCode.FENCED_LEADER_EPOCH)
        return data(batch(partition.fetch_offset, epoch=6), high_watermark=partition.fetch_offset + 1)

    leader.on_fetch = lambda request: fetch_response(request, answer)
    fetcher = scripted_fetcher(leader)
    replica = followed(tmp_path, 0, epoch=5)
    fetcher.add_partition(replica)
    nursery.start_soon(fetcher.run)
    await leader.wait_fetches(1)
    await wait_until(lambda: fetcher.fetch_state("t", 0) is FetchState.FENCED)
    await trio.sleep(0.2)
    assert len(leader.fetches) == 1, "fenced: no more fetches (and no polling)"
    replica.leader_epoch = 6
    fetcher.leader_epoch_changed("t", 0)
    await wait_until(lambda: replica.log.log_end_offset >= 2)
    assert leader.fetches[1].topics[0].partitions[0].current_leader_epoch == 6


async def test_a_diverging_epoch_truncates_then_fetching_goes_on(leader: ScriptedLeader, tmp_path: Path,
                                                                 nursery: trio.Nursery) -> None:
    replica = followed(tmp_path, 0, epoch=2)
    replica.log.append_as_follower(batch(0, 2, epoch=0) + batch(2, 2, epoch=1))
    leader_log = batch(0, 2, epoch=0) + batch(2, 3, epoch=2)

    def answer(index: int, partition: FetchRequest.FetchPartition) -> PartitionData:
        if partition.last_fetched_epoch == 1:
            return data(diverging=(0, 2), high_watermark=5)
        if partition.fetch_offset == 2:
            return data(batch(2, 3, epoch=2), high_watermark=5)
        return data(high_watermark=5)

    leader.on_fetch = lambda request: fetch_response(request, answer)
    fetcher = scripted_fetcher(leader)
    fetcher.add_partition(replica)
    nursery.start_soon(fetcher.run)
    await wait_until(lambda: replica.log.log_end_offset == 5 and replica.log.high_watermark == 5)
    assert segment_bytes(replica.log) == leader_log
    assert [p.fetch_offset for r in leader.fetches[:2] for t in r.topics for p in t.partitions] == [4, 2]


async def test_out_of_range_asks_the_leader_as_a_replica(leader: ScriptedLeader, tmp_path: Path,
                                                         nursery: trio.Nursery) -> None:
    replica = followed(tmp_path, 0)
    offsets = {-1: 40, -2: 30}  # the leader's log end and start offsets

    def answer(index: int, partition: FetchRequest.FetchPartition) -> PartitionData:
        if partition.fetch_offset < 30:
            return data(error=ErrorCode.OFFSET_OUT_OF_RANGE)
        return data(batch(partition.fetch_offset), high_watermark=40, log_start_offset=30)

    def list_offsets(request: ListOffsetsRequest) -> ListOffsetsResponse:
        wanted = request.topics[0].partitions[0]
        return ListOffsetsResponse(topics=[ListOffsetsResponse.ListOffsetsTopicResponse(name="t", partitions=[
            ListOffsetsResponse.ListOffsetsPartitionResponse(partition_index=0, offset=offsets[wanted.timestamp]),
        ])])

    leader.on_fetch = lambda request: fetch_response(request, answer)
    leader.on_list_offsets = list_offsets
    fetcher = scripted_fetcher(leader)
    fetcher.add_partition(replica)
    nursery.start_soon(fetcher.run)
    await wait_until(lambda: replica.log.log_end_offset >= 31)
    assert replica.log.log_start_offset == 30
    assert [(r.replica_id, r.topics[0].partitions[0].timestamp, r.topics[0].partitions[0].current_leader_epoch)
            for r in leader.list_offsets] == [(7, -1, 5), (7, -2, 5)]


async def test_data_for_a_partition_removed_during_the_fetch_is_dropped(leader: ScriptedLeader, tmp_path: Path,
                                                                        nursery: trio.Nursery) -> None:
    replica = followed(tmp_path, 0)
    fetcher = scripted_fetcher(leader)

    def answer(index: int, partition: FetchRequest.FetchPartition) -> PartitionData:
        fetcher.remove_partition("t", 0)  # while the request is in flight
        return data(batch(partition.fetch_offset), high_watermark=1)

    leader.on_fetch = lambda request: fetch_response(request, answer)
    fetcher.add_partition(replica)
    nursery.start_soon(fetcher.run)
    await leader.wait_fetches(1)
    await trio.sleep(0.1)
    assert replica.log.log_end_offset == 0
    assert fetcher.partitions == {}


async def test_a_lost_connection_is_retried_and_logged_once(leader: ScriptedLeader, tmp_path: Path,
                                                           nursery: trio.Nursery,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    leader.on_fetch = lambda request: fetch_response(
        request, lambda i, p: data(batch(p.fetch_offset), high_watermark=p.fetch_offset + 1))
    fetcher = scripted_fetcher(leader, backoff_ms=20)
    replica = followed(tmp_path, 0)
    fetcher.add_partition(replica)
    nursery.start_soon(fetcher.run)
    await wait_until(lambda: replica.log.log_end_offset >= 2)
    caplog.set_level(logging.DEBUG, logger="trafka.broker.replication.fetcher")
    await leader.drop()
    await wait_until(lambda: fetcher.connect_count >= 2)
    at = replica.log.log_end_offset
    await wait_until(lambda: replica.log.log_end_offset > at)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "cannot fetch" in r.getMessage()]
    assert len(warnings) == 1


async def test_an_unreachable_leader_is_logged_once_per_outage(tmp_path: Path, nursery: trio.Nursery,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    with trio.socket.socket() as sock:  # a port nothing listens on
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    fetcher = ReplicaFetcher(7, 1, ("127.0.0.1", port), backoff_ms=10)
    fetcher.add_partition(followed(tmp_path, 0))
    caplog.set_level(logging.WARNING, logger="trafka.broker.replication.fetcher")
    with trio.move_on_after(0.3):
        await fetcher.run()
    assert fetcher.connect_count == 0
    assert len([r for r in caplog.records if "cannot fetch" in r.getMessage()]) == 1


async def test_a_peer_connection_rejects_oversized_frames(leader: ScriptedLeader) -> None:
    connection = await PeerConnection.connect("127.0.0.1", leader.port, client_id="test", connect_timeout_s=5)
    assert connection.api_versions(ApiKey.FETCH, minimum=12) == 18
    assert connection.api_versions(ApiKey.LIST_OFFSETS) == 11
    with pytest.raises(PeerError):
        connection.api_versions(ApiKey.METADATA)
    connection.max_frame_bytes = 10
    with pytest.raises(PeerError, match="frame"):
        await connection.request(FetchRequest(), 12)
    assert connection.broken
    with pytest.raises(PeerError, match="broken"):
        await connection.request(FetchRequest(), 12)
    await connection.aclose()


async def test_a_follower_with_an_epoch_the_leader_never_had_truncates(client: KafkaClient,
                                                                       follower: Follower) -> None:
    """The follower's last batch carries an epoch above every one the leader knows (as after an unclean
    election): the leader cannot say where that epoch ends, and answers OFFSET_OUT_OF_RANGE as Kafka's
    does; the follower truncates to the leader's log end offset."""
    await create_topic(client, "unknown-epoch")
    await produce(client, "unknown-epoch", batch(0, 4))
    leader = follower.leader_log("unknown-epoch")
    partition = follower.running.broker.topics.partition("unknown-epoch", 0)
    log = Log.create(follower.tmp_path / "follower" / "unknown-epoch-0", LogConfig(), topic_id=partition.topic_id)
    log.append_as_follower(segment_bytes(leader))
    log.append_as_follower(batch(4, 3, epoch=partition.leader_epoch + 1))
    replica = FollowedPartition("unknown-epoch", 0, partition.topic_id, log, partition.leader_epoch)
    follower.fetcher.add_partition(replica)
    await wait_until(lambda: log.log_end_offset == 4, timeout_s=3)
    await produce(client, "unknown-epoch", batch(0, 2))
    await follower.caught_up(replica)
