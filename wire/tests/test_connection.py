"""ServerConnection: framing, header decoding, errors, and response frames."""
from __future__ import annotations

import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trafka.wire.chunks import FileSlice, join_chunks
from trafka.wire.connection import DEFAULT_MAX_FRAME_SIZE, NEED_DATA, ProtocolError, Request, ServerConnection, UndecodedRequest, UnsupportedVersion
from trafka.wire.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
)
from trafka.wire.primitives import Message, Writer
from trafka.wire.protocol import ApiKey, RequestHeader, decode_response_header, encode_request_header


def frame(
    api_key: int, version: int, correlation_id: int, body: Message | bytes, client_id: str | None = "test"
) -> bytes:
    w = Writer()
    encode_request_header(w, RequestHeader(api_key, version, correlation_id, client_id))
    if isinstance(body, Message):
        body.encode_into(w, version)
    else:
        w += body
    return struct.pack(">i", len(w)) + bytes(w)


def raw_frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def drain(conn: ServerConnection) -> list[Request | UnsupportedVersion]:
    events = []
    while (event := conn.next_request()) is not NEED_DATA:
        events.append(event)
    return events


PRODUCE = ProduceRequest(
    acks=-1,
    timeout_ms=1500,
    topic_data=[
        ProduceRequest.TopicProduceData(
            name="events",
            partition_data=[ProduceRequest.PartitionProduceData(index=2, records=b"\x01" * 70)],
        )
    ],
)
METADATA = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="events")])
API_VERSIONS = ApiVersionsRequest(client_software_name="trafka-tests", client_software_version="1.0")

PIPELINE = [
    (ApiKey.API_VERSIONS, 3, API_VERSIONS),
    (ApiKey.METADATA, 12, METADATA),
    (ApiKey.PRODUCE, 9, PRODUCE),
    (ApiKey.PRODUCE, 7, PRODUCE),
]


def pipeline_bytes() -> bytes:
    return b"".join(frame(key, version, i, body) for i, (key, version, body) in enumerate(PIPELINE))


def check_pipeline(events: list) -> None:
    assert len(events) == len(PIPELINE)
    for i, (event, (key, version, body)) in enumerate(zip(events, PIPELINE)):
        assert isinstance(event, Request)
        assert event.header == RequestHeader(key, version, i, "test")
        assert event.body == body


def test_single_request() -> None:
    conn = ServerConnection()
    data = frame(ApiKey.PRODUCE, 9, 42, PRODUCE, client_id="producer-1")
    conn.receive_data(data)
    request = conn.next_request()
    assert isinstance(request, Request)
    assert request.header == RequestHeader(ApiKey.PRODUCE, 9, 42, "producer-1")
    assert request.header.api_key is ApiKey.PRODUCE
    assert request.size == len(data) - 4
    assert request.body == PRODUCE
    assert conn.next_request() is NEED_DATA


def test_null_client_id() -> None:
    conn = ServerConnection()
    conn.receive_data(frame(ApiKey.METADATA, 4, 1, METADATA, client_id=None))
    request = conn.next_request()
    assert isinstance(request, Request)
    assert request.header.client_id is None


def test_pipelined_frames_split_at_every_byte() -> None:
    data = pipeline_bytes()
    for split in range(len(data) + 1):
        conn = ServerConnection()
        events = []
        for part in (data[:split], data[split:]):
            if part:  # b"" would mean that the peer closed
                conn.receive_data(part)
                events += drain(conn)
        check_pipeline(events)


def test_pipelined_frames_byte_by_byte() -> None:
    conn = ServerConnection()
    events = []
    for byte in pipeline_bytes():
        conn.receive_data(bytes([byte]))
        events += drain(conn)
    check_pipeline(events)


def test_many_small_frames_in_one_read() -> None:
    one = frame(ApiKey.API_VERSIONS, 3, 0, API_VERSIONS)
    conn = ServerConnection()
    conn.receive_data(one * 1000 + one[:7])
    assert len(drain(conn)) == 1000
    conn.receive_data(one[7:])
    assert len(drain(conn)) == 1


def test_large_frame_with_pipelined_tail() -> None:
    big = ProduceRequest(
        acks=1,
        timeout_ms=100,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="big",
                partition_data=[ProduceRequest.PartitionProduceData(index=0, records=bytes(200_000))],
            )
        ],
    )
    data = frame(ApiKey.PRODUCE, 9, 1, big) + frame(ApiKey.METADATA, 12, 2, METADATA)
    conn = ServerConnection()
    for i in range(0, len(data), 65536):
        conn.receive_data(data[i : i + 65536])
    first, second = drain(conn)
    assert first.body == big
    assert second.body == METADATA
    conn.receive_data(frame(ApiKey.METADATA, 12, 3, METADATA))  # the buffer is still usable
    assert drain(conn)[0].header.correlation_id == 3


def read_like_a_socket(conn: ServerConnection, data: bytes, most: int) -> tuple[list, list[int]]:
    """Feed ``data`` through receive_buffer/received, at most ``most`` bytes per read, draining requests
    between reads as a transport does; returns the requests and the size of every buffer offered."""
    offered, position, events = [], 0, []
    while position < len(data):
        events += drain(conn)
        with conn.receive_buffer() as room:
            offered.append(len(room))
            count = min(len(room), most, len(data) - position)
            room[:count] = data[position : position + count]
        conn.received(count)
        position += count
    return events + drain(conn), offered


def test_a_large_frame_is_read_into_its_own_buffer_in_one_copy() -> None:
    records = bytes(range(256)) * 1000
    big = ProduceRequest(
        acks=1, timeout_ms=100,
        topic_data=[ProduceRequest.TopicProduceData(
            name="big", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)])],
    )
    head = frame(ApiKey.METADATA, 12, 1, METADATA)
    body = frame(ApiKey.PRODUCE, 9, 2, big)
    conn = ServerConnection()
    events, offered = read_like_a_socket(conn, head + body[:100], most=len(head) + 100)
    assert [e.header.correlation_id for e in events] == [1]
    # The size is known: the next buffer offered is exactly the rest of the frame.
    with conn.receive_buffer() as room:
        assert len(room) == len(body) - 100
        room[:] = body[100:]
    conn.received(len(body) - 100)
    (request,) = drain(conn)
    received = request.body.topic_data[0].partition_data[0].records
    assert received == records
    assert len(received.obj) >= len(body)  # the request owns a buffer that holds its frame (and prefix)
    assert offered[0] >= 65536
    conn.receive_data(frame(ApiKey.METADATA, 12, 3, METADATA))
    assert drain(conn)[0].header.correlation_id == 3


def test_reads_of_any_size_reassemble_pipelined_frames() -> None:
    data = pipeline_bytes() * 50
    for most in (1, 7, 1000, 1 << 20):
        events, _ = read_like_a_socket(ServerConnection(), data, most)
        check_pipeline(events[:4])
        assert len(events) == 4 * 50


def test_an_idle_connection_lets_its_receive_buffer_go_but_never_pending_bytes() -> None:
    conn = ServerConnection()
    data = pipeline_bytes()
    conn.receive_data(data[:7])  # a frame begun
    assert conn.release_buffer() == 0
    conn.receive_data(data[7:])
    events = []
    while (event := conn.next_request()) is not NEED_DATA:
        events.append(event)
    check_pipeline(events)
    assert conn.release_buffer() >= 65536  # nothing pending: the buffer goes
    assert conn.release_buffer() == 0
    conn.receive_data(data)  # and a new one comes with the next bytes
    events = []
    while (event := conn.next_request()) is not NEED_DATA:
        events.append(event)
    check_pipeline(events)


def test_received_zero_means_the_peer_closed() -> None:
    conn = ServerConnection()
    with conn.receive_buffer():
        pass
    conn.received(0)
    assert conn.peer_closed and conn.next_request() is NEED_DATA


def test_records_are_writable_and_owned_by_their_request() -> None:
    conn = ServerConnection()
    conn.receive_data(frame(ApiKey.PRODUCE, 9, 1, PRODUCE) + frame(ApiKey.PRODUCE, 9, 2, PRODUCE))
    first, second = drain(conn)
    records = first.body.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and not records.readonly
    records[0:8] = bytes(8)  # e.g. the log assigning a base offset
    assert second.body.topic_data[0].partition_data[0].records == b"\x01" * 70
    conn.receive_data(frame(ApiKey.PRODUCE, 9, 3, PRODUCE))  # does not disturb the first request
    assert drain(conn)[0].body == PRODUCE
    assert records[0:8] == bytes(8)


def test_oversize_frame() -> None:
    conn = ServerConnection(max_frame_size=1000)
    conn.receive_data(struct.pack(">i", 1001))
    with pytest.raises(ProtocolError, match="frame of 1001 bytes is larger than the maximum of 1000 bytes"):
        conn.next_request()


def test_default_max_frame_size_is_socket_request_max_bytes() -> None:
    conn = ServerConnection()
    conn.receive_data(struct.pack(">i", 104857600 + 1))
    with pytest.raises(ProtocolError, match="larger than the maximum of 104857600"):
        conn.next_request()


def test_negative_size() -> None:
    conn = ServerConnection()
    conn.receive_data(struct.pack(">i", -5) + b"junk")
    with pytest.raises(ProtocolError, match="invalid frame size -5: negative"):
        conn.next_request()


def test_frame_too_small_for_a_header() -> None:
    conn = ServerConnection()
    conn.receive_data(raw_frame(b"\x00\x12\x00\x03\x00\x00"))
    with pytest.raises(ProtocolError, match="invalid frame size 6: too small for a request header"):
        conn.next_request()


def test_truncated_header() -> None:
    # client_id claims 50 bytes, the frame holds 3
    conn = ServerConnection()
    conn.receive_data(raw_frame(struct.pack(">hhih", 18, 3, 7, 50) + b"abc"))
    with pytest.raises(ProtocolError, match="client_id of 50 bytes runs past the end of the frame"):
        conn.next_request()


def test_truncated_header_tagged_fields() -> None:
    conn = ServerConnection()
    conn.receive_data(raw_frame(struct.pack(">hhih", 18, 3, 7, 0)))  # v2 header without tagged fields
    with pytest.raises(ProtocolError, match="malformed request header"):
        conn.next_request()


def test_unknown_api_key() -> None:
    conn = ServerConnection()
    conn.receive_data(raw_frame(struct.pack(">hhih", 9999, 0, 5, -1)))
    with pytest.raises(ProtocolError, match="unknown api key 9999 .*correlation id 5"):
        conn.next_request()


def test_unsupported_api_versions_version_carries_the_header() -> None:
    conn = ServerConnection()
    # A future ApiVersions version: the body is not decoded, the frame is consumed.
    conn.receive_data(raw_frame(struct.pack(">hhih", 18, 99, 11, 3) + b"cli" + b"\x00future body"))
    conn.receive_data(frame(ApiKey.API_VERSIONS, 0, 12, ApiVersionsRequest()))
    event = conn.next_request()
    assert isinstance(event, UnsupportedVersion)
    assert event.header == RequestHeader(ApiKey.API_VERSIONS, 99, 11, "cli")
    assert event.supported == (0, 4)
    following = conn.next_request()
    assert isinstance(following, Request) and following.header.correlation_id == 12


def test_unsupported_version_by_configuration() -> None:
    conn = ServerConnection(supported={ApiKey.API_VERSIONS: (0, 3), ApiKey.PRODUCE: (3, 8)})
    conn.receive_data(frame(ApiKey.PRODUCE, 9, 1, PRODUCE))
    conn.receive_data(frame(ApiKey.METADATA, 12, 2, METADATA))
    conn.receive_data(frame(ApiKey.API_VERSIONS, 4, 3, API_VERSIONS))
    produce, metadata, api_versions = drain(conn)
    assert isinstance(produce, UnsupportedVersion) and produce.supported == (3, 8)
    assert isinstance(metadata, UnsupportedVersion) and metadata.supported is None
    assert isinstance(api_versions, UnsupportedVersion) and api_versions.header.correlation_id == 3


def test_body_that_does_not_decode() -> None:
    conn = ServerConnection()
    data = frame(ApiKey.PRODUCE, 9, 8, PRODUCE)
    conn.receive_data(data[:-20] + b"\x7f" * 20)  # same frame size, garbage at the end
    with pytest.raises(ProtocolError, match=r"malformed request \(correlation id 8, client id 'test'\)"):
        conn.next_request()


def test_trailing_bytes_after_a_request_body_are_ignored() -> None:
    # As in Apache Kafka: some clients append bytes that their version does not define.
    conn = ServerConnection()
    conn.receive_data(frame(ApiKey.METADATA, 13, 4, METADATA.encode(13) + b"\x00"))
    request = conn.next_request()
    assert isinstance(request, Request) and request.body == METADATA


def test_protocol_error_is_sticky() -> None:
    conn = ServerConnection()
    conn.receive_data(struct.pack(">i", -1))
    with pytest.raises(ProtocolError) as first:
        conn.next_request()
    conn.receive_data(frame(ApiKey.METADATA, 12, 2, METADATA))
    with pytest.raises(ProtocolError) as second:
        conn.next_request()
    assert second.value is first.value


def test_http_request_is_recognised() -> None:
    conn = ServerConnection()
    conn.receive_data(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
    with pytest.raises(ProtocolError, match="looks like an HTTP request"):
        conn.next_request()


def test_tls_handshake_is_recognised() -> None:
    conn = ServerConnection()
    conn.receive_data(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    with pytest.raises(ProtocolError, match="TLS handshake"):
        conn.next_request()


def test_peer_closed_between_frames() -> None:
    conn = ServerConnection()
    conn.receive_data(frame(ApiKey.METADATA, 12, 2, METADATA))
    conn.receive_data(b"")
    assert conn.peer_closed
    assert isinstance(conn.next_request(), Request)
    assert conn.next_request() is NEED_DATA
    with pytest.raises(RuntimeError):
        conn.receive_data(b"more")


def test_peer_closed_in_the_middle_of_a_frame() -> None:
    conn = ServerConnection()
    conn.receive_data(frame(ApiKey.METADATA, 12, 2, METADATA)[:-1])
    assert conn.next_request() is NEED_DATA
    conn.receive_data(b"")
    with pytest.raises(ProtocolError, match="peer closed the connection in the middle of a frame"):
        conn.next_request()


def test_peer_closed_in_the_middle_of_the_size() -> None:
    conn = ServerConnection()
    conn.receive_data(b"\x00\x00")
    conn.receive_data(b"")
    with pytest.raises(ProtocolError, match="middle of the 4-byte frame size"):
        conn.next_request()


# -- responses -------------------------------------------------------------------------------


def parse_response(
    chunks: list, response_cls: type[Message], version: int, header_version: int
) -> tuple[int, Message]:
    data = join_chunks(chunks)
    (size,) = struct.unpack_from(">i", data)
    assert size == len(data) - 4
    correlation_id, body_start = decode_response_header(memoryview(data)[4:], header_version)
    return correlation_id, response_cls.decode(data[4 + body_start :], version)


def test_response_frame_flexible_version_uses_header_v1() -> None:
    conn = ServerConnection()
    header = RequestHeader(ApiKey.METADATA, 12, 77, "c")
    response = MetadataResponse(cluster_id="trafka", controller_id=1)
    chunks = conn.send_response(header, response)
    assert join_chunks(chunks)[4:9] == b"\x00\x00\x00\x4d\x00"  # correlation id, empty tagged fields
    assert parse_response(chunks, MetadataResponse, 12, 1) == (77, response)


def test_response_frame_non_flexible_version_uses_header_v0() -> None:
    conn = ServerConnection()
    header = RequestHeader(ApiKey.METADATA, 8, 5, "c")
    response = MetadataResponse(cluster_id="trafka")
    assert parse_response(conn.send_response(header, response), MetadataResponse, 8, 0) == (5, response)


def test_api_versions_response_always_uses_header_v0() -> None:
    conn = ServerConnection()
    response = ApiVersionsResponse(
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)]
    )
    chunks = conn.send_response(RequestHeader(ApiKey.API_VERSIONS, 3, 9, "c"), response)
    assert parse_response(chunks, ApiVersionsResponse, 3, 0) == (9, response)


def test_api_versions_fallback_to_v0_for_unsupported_version() -> None:
    conn = ServerConnection()
    conn.receive_data(raw_frame(struct.pack(">hhih", 18, 99, 4, -1) + b"\x00"))
    event = conn.next_request()
    assert isinstance(event, UnsupportedVersion)
    response = ApiVersionsResponse(
        error_code=35, api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)]
    )
    chunks = conn.send_response(event.header, response, version=0)
    assert parse_response(chunks, ApiVersionsResponse, 0, 0) == (4, response)


def test_fetch_response_keeps_file_slices_as_chunks(tmp_path) -> None:
    payload = bytes(range(256)) * 4
    with open(tmp_path / "segment.log", "w+b") as file:
        file.write(b"ignored" + payload)
        file.flush()
        response = FetchResponse(
            responses=[
                FetchResponse.FetchableTopicResponse(
                    topic="events",
                    partitions=[
                        FetchResponse.PartitionData(
                            partition_index=0,
                            high_watermark=10,
                            records=FileSlice(file, 7, len(payload)),
                        ),
                        FetchResponse.PartitionData(partition_index=1, records=b"in memory"),
                    ],
                )
            ]
        )
        chunks = ServerConnection().send_response(RequestHeader(ApiKey.FETCH, 12, 3, "c"), response)
        assert [type(c) for c in chunks] == [bytearray, FileSlice, bytearray]
        correlation_id, decoded = parse_response(chunks, FetchResponse, 12, 1)
    assert correlation_id == 3
    partitions = decoded.responses[0].partitions
    assert partitions[0].records == payload
    assert partitions[1].records == b"in memory"


def test_response_type_must_match_the_request() -> None:
    with pytest.raises(TypeError, match="MetadataResponse is not the response to api key"):
        ServerConnection().send_response(RequestHeader(ApiKey.PRODUCE, 9, 1, "c"), MetadataResponse())


def test_frames_over_the_decode_in_place_limit_come_out_undecoded():
    names = [MetadataRequest.MetadataRequestTopic(name=f"topic-{i}") for i in range(100)]
    big = MetadataRequest(topics=names, allow_auto_topic_creation=False)
    conn = ServerConnection(decode_in_place_limit=200)
    conn.receive_data(frame(ApiKey.METADATA, 12, 7, METADATA) + frame(ApiKey.METADATA, 12, 8, big))

    small, undecoded = drain(conn)

    assert isinstance(small, Request) and small.body == METADATA
    assert isinstance(undecoded, UndecodedRequest)
    assert (undecoded.header.correlation_id, undecoded.header.api_version) == (8, 12)
    request = undecoded.decode()
    assert request.body == big
    assert request.size == len(frame(ApiKey.METADATA, 12, 8, big)) - 4


def test_an_undecoded_request_that_does_not_decode_is_a_protocol_error():
    body = bytearray(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t" * 300)]).encode(12))
    conn = ServerConnection(decode_in_place_limit=100)
    conn.receive_data(frame(ApiKey.METADATA, 12, 9, bytes(body[:-20])))

    (undecoded,) = drain(conn)

    with pytest.raises(ProtocolError, match="malformed request .correlation id 9"):
        undecoded.decode()


def _resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc to read the resident set size")
def test_a_size_prefix_alone_commits_no_memory() -> None:
    # Peers that announce frames of the maximum size and send nothing more must not cost that size each.
    connections = [ServerConnection() for _ in range(8)]
    before = _resident_bytes()
    views = []
    for conn in connections:
        conn.receive_data(struct.pack(">i", DEFAULT_MAX_FRAME_SIZE) + b"\0\x03\0\x0c")
        view = conn.receive_buffer()
        assert len(view) == DEFAULT_MAX_FRAME_SIZE - 4
        views.append(view)
    assert _resident_bytes() - before < 16 * 1024 * 1024
    for view in views:
        view.release()


def test_a_large_frame_arriving_in_pieces_decodes_from_its_own_buffer() -> None:
    records = bytes(range(256)) * 2000
    big = ProduceRequest(
        acks=1, timeout_ms=100,
        topic_data=[ProduceRequest.TopicProduceData(
            name="big", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)])],
    )
    data = frame(ApiKey.PRODUCE, 9, 5, big)
    (request,), _ = read_like_a_socket(ServerConnection(), data, most=4096)
    received = request.body.topic_data[0].partition_data[0].records
    assert received == records
    received[0:1] = b"\xff"  # writable in place, as the log patches base offsets
    assert received[0] == 0xFF


def _produce_frame(correlation_id: int, records: bytes) -> bytes:
    return frame(ApiKey.PRODUCE, 9, correlation_id, ProduceRequest(
        acks=1, timeout_ms=100,
        topic_data=[ProduceRequest.TopicProduceData(
            name="big", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)])],
    ))


def test_a_large_frames_buffer_takes_a_later_frame_only_once_nothing_reads_it() -> None:
    conn = ServerConnection()
    first_records, second_records = bytes(range(256)) * 1000, bytes(reversed(range(256))) * 900
    (first,), _ = read_like_a_socket(conn, _produce_frame(1, first_records), most=4096)
    held = first.body.topic_data[0].partition_data[0].records
    # While the first request's records are read, the next large frame (it would fit) gets a buffer of its own.
    (second,), _ = read_like_a_socket(conn, _produce_frame(2, second_records), most=4096)
    kept = second.body.topic_data[0].partition_data[0].records
    assert held.obj is not kept.obj
    assert bytes(held) == first_records and bytes(kept) == second_records
    first_buffer = held.obj
    del first, held
    # Nothing reads the first frame any more: its buffer (pages in place) takes the third.
    (third,), _ = read_like_a_socket(conn, _produce_frame(3, first_records[::-1]), most=4096)
    records = third.body.topic_data[0].partition_data[0].records
    assert records.obj is first_buffer and bytes(records) == first_records[::-1]
    assert bytes(kept) == second_records  # the frame still read is untouched


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames=st.lists(st.tuples(st.sampled_from([100, 65_000, 70_000, 100_000, 130_000, 250_000]), st.booleans()),
                      min_size=1, max_size=12),
       most=st.sampled_from([4096, 65536, 1 << 20]))
def test_reused_buffers_never_touch_a_frame_still_read(frames: list[tuple[int, bool]], most: int) -> None:
    # Requests of all sizes, some kept (their records still read) and some dropped, arrive in reads of
    # any size: every kept request's records stay as they arrived, however many frames came after.
    conn = ServerConnection()
    kept: list[tuple[memoryview, bytes]] = []
    for number, (size, keep) in enumerate(frames):
        records = bytes([number % 251]) * size
        (request,), _ = read_like_a_socket(conn, _produce_frame(number, records), most=most)
        received = request.body.topic_data[0].partition_data[0].records
        assert received == records
        if keep:
            kept.append((received, records))
        del request, received
    for received, records in kept:
        assert received == records
