"""Error paths, one table: each case sends one bad request and checks the exact Kafka error code; then the
same connection must still answer another request, and a real client on another connection must still be
served. The frame size limit (``socket.request.max.bytes``) is checked at its edge: a frame just under it
is served, one just over it closes that connection alone."""

from __future__ import annotations

import time
import uuid

import pytest

from compat_tests.clients import ConfluentClient, Message
from compat_tests.harness import BrokerProcess
from compat_tests.wire_client import WireClient, encode_frame, read_frame
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import ApiVersionsRequest, CreateTopicsRequest, FetchRequest, ProduceRequest
from trafka.wire.records import SimpleRecord, build_batch

MAX_FRAME = 100_000
BATCH = build_batch([SimpleRecord(b"k", b"v")])


@pytest.fixture(scope="module")
def strict_broker(tmp_path_factory: pytest.TempPathFactory):
    process = BrokerProcess(tmp_path_factory.mktemp("errors") / "data", name="errors", overrides={
        "socket.request.max.bytes": MAX_FRAME})
    process.start()
    with WireClient(process.bootstrap) as client:
        topics = [CreateTopicsRequest.CreatableTopic(name=name, num_partitions=2, replication_factor=1,
                                                     assignments=[], configs=[
                                                         CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                                                         for k, v in configs.items()])
                  for name, configs in (("errors", {}), ("small", {"max.message.bytes": "1000",
                                                                      "segment.bytes": "200"}),
                                        ("recent", {"message.timestamp.before.max.ms": "60000"}))]
        response = client.request(CreateTopicsRequest(topics=topics, timeout_ms=10_000), 7)
        assert {t.error_code for t in response.topics} == {0}, response
    yield process
    process.close()


def produce(topic: str, partition: int, records: bytes, *, acks: int = -1, topic_id: uuid.UUID | None = None):
    data = ProduceRequest.TopicProduceData(
        name=topic, topic_id=topic_id or uuid.UUID(int=0),
        partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=records)])
    return ProduceRequest(acks=acks, timeout_ms=10_000, topic_data=[data])


def fetch(topic: str, partition: int, *, offset: int = 0, leader_epoch: int = -1, replica_id: int = -1):
    return FetchRequest(replica_id=replica_id, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, topics=[
        FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20, current_leader_epoch=leader_epoch)])])


def produced(response) -> int:
    return response.responses[0].partition_responses[0].error_code


def fetched(response) -> int:
    return response.responses[0].partitions[0].error_code


CASES = {
    "a partition the topic does not have": (produce("errors", 7, BATCH), 9, produced,
                                            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    "fetch of an unknown topic": (fetch("nowhere", 0), 12, fetched, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    "fetch of an unknown partition": (fetch("errors", 9), 12, fetched, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    "produce v13 to an unknown topic id": (produce("", 0, BATCH, topic_id=uuid.uuid4()), 13, produced,
                                           ErrorCode.UNKNOWN_TOPIC_ID),
    "acks=2": (produce("errors", 0, BATCH, acks=2), 9, produced, ErrorCode.INVALID_REQUIRED_ACKS),
    "no records": (produce("errors", 0, b""), 9, produced, ErrorCode.INVALID_RECORD),
    "fewer bytes than a batch header": (produce("errors", 0, BATCH[:11]), 9, produced, ErrorCode.INVALID_RECORD),
    "a batch cut short": (produce("errors", 0, BATCH[:-3]), 9, produced, ErrorCode.INVALID_RECORD),
    "two batches": (produce("errors", 0, BATCH + BATCH), 9, produced, ErrorCode.INVALID_RECORD),
    "a leader epoch from the future": (fetch("errors", 0, leader_epoch=5), 12, fetched,
                                       ErrorCode.UNKNOWN_LEADER_EPOCH),
    # Versions before the response could name the current leader (v12) are answered without it.
    "a fetch from a broker that holds no replica, v11": (fetch("errors", 0, replica_id=5), 11, fetched,
                                                         ErrorCode.NOT_LEADER_OR_FOLLOWER),
    "a fetch from a broker that holds no replica, v4": (fetch("errors", 0, replica_id=5), 4, fetched,
                                                        ErrorCode.NOT_LEADER_OR_FOLLOWER),
    "a batch over max.message.bytes": (produce("small", 0, build_batch([SimpleRecord(None, bytes(1200))])), 9,
                                       produced, ErrorCode.MESSAGE_TOO_LARGE),
    "a batch over segment.bytes": (produce("small", 1, build_batch([SimpleRecord(None, bytes(150))])), 9,
                                   produced, ErrorCode.RECORD_LIST_TOO_LARGE),
    "a timestamp older than message.timestamp.before.max.ms": (
        produce("recent", 0, build_batch([SimpleRecord(None, b"v", timestamp=int(time.time() * 1000) - 3_600_000)])),
        9, produced, ErrorCode.INVALID_TIMESTAMP),
}


@pytest.mark.parametrize("case", CASES)
def test_each_error_fails_its_request_alone(strict_broker, case):
    request, version, code_of, expected = CASES[case]
    with WireClient(strict_broker.bootstrap) as client:
        assert ErrorCode(code_of(client.request(request, version))) == expected
        # The same connection goes on, and so does everyone else.
        assert client.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"),
                              3).error_code == 0
    assert_served(strict_broker, case)


def assert_served(broker: BrokerProcess, marker: str) -> None:
    """A real client on another connection writes a record and reads that same record back."""
    client = ConfluentClient(broker.bootstrap)
    value = f"after: {marker}".encode()
    [delivery] = client.produce("errors", [Message(value, partition=1)])
    [record] = client.consume("errors", 1, partitions=[1], offset=delivery.offset)
    assert (record.offset, record.value) == (delivery.offset, value)


def _frame_of_size(size: int) -> bytes:
    """A Produce frame of exactly ``size`` bytes after its size prefix (one batch, its value padded)."""
    def frame(padding: int) -> bytes:
        return encode_frame(produce("errors", 1, build_batch([SimpleRecord(None, bytes(padding))])), 9)

    padding = size - (len(frame(0)) - 4)
    for _ in range(10):  # the length varints grow with the padding: close in on the exact size
        built = frame(padding)
        if len(built) - 4 == size:
            return built
        padding -= len(built) - 4 - size
    raise AssertionError(f"no Produce frame of exactly {size} bytes")


def test_frames_at_the_socket_request_max_bytes_edge(strict_broker):
    with WireClient(strict_broker.bootstrap) as client:
        client.sock.sendall(_frame_of_size(MAX_FRAME))
        assert read_frame(client.sock)  # served
    with WireClient(strict_broker.bootstrap) as client:
        client.sock.settimeout(10)
        try:  # closed as soon as the size is read, so the rest of the frame may meet a reset
            client.sock.sendall(_frame_of_size(MAX_FRAME + 1))
            assert client.sock.recv(1) == b""
        except ConnectionResetError:
            pass
    assert "larger than the maximum of 100000 bytes" in strict_broker.log_text()
    assert_served(strict_broker, "a frame over socket.request.max.bytes")
