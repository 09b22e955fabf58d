"""ClientConnection: requests framed for the server connection, responses matched and decoded, errors."""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trafka.wire.chunks import join_chunks
from trafka.wire.client import (
    DEFAULT_MAX_RESPONSE_SIZE,
    NEED_DATA,
    ClientConnection,
    MalformedResponse,
    ProtocolError,
    Response,
    decode_response,
    encode_request,
)
from trafka.wire.connection import Request, ServerConnection, UnsupportedVersion
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import (
    REQUESTS,
    RESPONSES,
    ApiKey,
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from trafka.wire.primitives import EncodeError, Message
from trafka.wire.protocol import RequestHeader
from trafka.wire.tests.test_messages import struct_strategy

METADATA = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="events")])
API_VERSIONS = ApiVersionsRequest(client_software_name="trafka-tests", client_software_version="1.0")


def produce(records: bytes = b"\x01" * 70, acks: int = -1) -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=1500, topic_data=[ProduceRequest.TopicProduceData(
        name="events", partition_data=[ProduceRequest.PartitionProduceData(index=2, records=records)])])


def fetch_response(records: bytes) -> FetchResponse:
    return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="events", partitions=[
        FetchResponse.PartitionData(partition_index=0, high_watermark=7, records=records)])])


def serve(server: ServerConnection, data: bytes, answer) -> bytes:
    """The server side: decode every request in ``data`` and encode ``answer(request)`` for each one
    that gets an answer (``answer`` returns None for those that do not)."""
    server.receive_data(data)
    out = []
    while (request := server.next_request()) is not NEED_DATA:
        assert isinstance(request, Request)
        response = answer(request)
        if response is not None:
            out.append(join_chunks(server.send_response(request.header, response)))
    return b"".join(out)


def drain(client: ClientConnection) -> list[Response]:
    responses = []
    while (response := client.next_response()) is not NEED_DATA:
        responses.append(response)
    return responses


def response_frame(correlation_id: int, body: Message, version: int, header_version: int = 0) -> bytes:
    """A response frame built without the client (for what a server must not send)."""
    header = struct.pack(">i", correlation_id) + (b"\0" if header_version else b"")
    payload = header + body.encode(version)
    return struct.pack(">i", len(payload)) + payload


def test_a_request_and_its_response_round_trip_through_the_server_connection() -> None:
    client, server = ClientConnection(client_id="producer-1"), ServerConnection()
    frame = client.send_request(produce(), 9)
    assert client.awaiting == 1
    seen: list[Request] = []

    def answer(request: Request) -> Message:
        seen.append(request)
        return ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name="events")])

    client.receive_data(serve(server, bytes(frame), answer))
    (request,) = seen
    assert request.header == RequestHeader(ApiKey.PRODUCE, 9, 1, "producer-1")
    assert request.body == produce()
    response = client.next_response()
    assert isinstance(response, Response)
    assert (response.correlation_id, response.api_key, response.api_version) == (1, ApiKey.PRODUCE, 9)
    assert response.body == ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name="events")])
    assert client.next_response() is NEED_DATA
    assert client.awaiting == 0


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_request_and_response_at_any_version_round_trip(data: st.DataObject) -> None:
    api_key = data.draw(st.sampled_from(sorted(REQUESTS)))
    request_cls, response_cls = REQUESTS[api_key], RESPONSES[api_key]
    version = data.draw(st.integers(request_cls.MIN_VERSION, request_cls.MAX_VERSION))
    request = data.draw(struct_strategy(request_cls, request_cls, version))
    response = data.draw(struct_strategy(response_cls, response_cls, version))
    client_id = data.draw(st.none() | st.text(max_size=20))
    first = data.draw(st.integers(0, 2**31 - 1))
    client, server = ClientConnection(client_id=client_id, first_correlation_id=first), ServerConnection()
    frame = client.send_request(request, version, expect_response=True)
    answered = serve(server, bytes(frame), lambda decoded: response)
    # The header the server decoded is the one the client meant: v1 or v2, the client_id never compact.
    assert (client.awaiting, client.next_correlation_id) == (1, (first + 1) % 2**31)
    client.receive_data(answered)
    decoded = client.next_response()
    assert isinstance(decoded, Response)
    assert (decoded.correlation_id, decoded.api_version) == (first, version)
    assert decoded.body == response
    assert client.awaiting == 0


def test_the_server_decodes_the_header_the_client_wrote() -> None:
    for client_id in ("c", "", None, "ü" * 3):
        for version in (0, 3, 4):  # request header v1, then v2 (flexible ApiVersions)
            client, server = ClientConnection(client_id=client_id, first_correlation_id=77), ServerConnection()
            server.receive_data(client.send_request(ApiVersionsRequest(), version))
            request = server.next_request()
            assert isinstance(request, Request)
            assert request.header == RequestHeader(ApiKey.API_VERSIONS, version, 77, client_id)


def test_the_client_id_is_a_classic_string_in_a_flexible_header() -> None:
    frame = ClientConnection(client_id="abc").send_request(MetadataRequest(), 12)
    # size, api key 3, version 12, correlation id 1, int16 length 3, "abc", no tagged fields, body
    assert frame[4:18] == struct.pack(">hhih", 3, 12, 1, 3) + b"abc" + b"\0"
    assert frame[18:] == MetadataRequest().encode(12)


def test_pipelined_responses_come_back_in_order() -> None:
    client, server = ClientConnection(), ServerConnection()
    requests = [(API_VERSIONS, 3), (METADATA, 12), (produce(), 9), (produce(), 7), (METADATA, 4)]
    frames = b"".join(client.send_request(message, version) for message, version in requests)
    assert client.awaiting == 5

    def answer(request: Request) -> Message:
        return RESPONSES[request.header.api_key](throttle_time_ms=request.header.correlation_id)

    responses = drain_after(client, serve(server, frames, answer))
    assert [(r.correlation_id, r.api_key, r.api_version) for r in responses] == [
        (1, ApiKey.API_VERSIONS, 3), (2, ApiKey.METADATA, 12), (3, ApiKey.PRODUCE, 9),
        (4, ApiKey.PRODUCE, 7), (5, ApiKey.METADATA, 4)]
    assert [r.body.throttle_time_ms for r in responses] == [1, 2, 3, 4, 5]
    assert client.awaiting == 0


def drain_after(client: ClientConnection, data: bytes) -> list[Response]:
    client.receive_data(data)
    return drain(client)


def pipeline(client: ClientConnection) -> bytes:
    """Three requests sent on ``client`` and the server's responses to them, as bytes."""
    server = ServerConnection()
    frames = b"".join([client.send_request(METADATA, 12), client.send_request(API_VERSIONS, 3),
                       client.send_request(produce(), 9)])

    def answer(request: Request) -> Message:
        if request.header.api_key == ApiKey.METADATA:
            return MetadataResponse(topics=[MetadataResponse.MetadataResponseTopic(name="events")])
        if request.header.api_key == ApiKey.API_VERSIONS:
            return ApiVersionsResponse(api_keys=[ApiVersionsResponse.ApiVersion(api_key=0, max_version=9)])
        return ProduceResponse(throttle_time_ms=5)

    return serve(server, frames, answer)


def check_pipeline(responses: list[Response]) -> None:
    assert [r.correlation_id for r in responses] == [1, 2, 3]
    assert responses[0].body.topics[0].name == "events"
    assert responses[1].body.api_keys[0].max_version == 9
    assert responses[2].body.throttle_time_ms == 5


def test_responses_byte_by_byte() -> None:
    client = ClientConnection()
    data = pipeline(client)
    responses = []
    for byte in data:
        client.receive_data(bytes([byte]))
        responses += drain(client)
    check_pipeline(responses)


def test_responses_split_at_every_byte() -> None:
    data = pipeline(ClientConnection())
    for split in range(len(data) + 1):
        client = ClientConnection()
        pipeline(client)  # the same requests await their responses
        responses = []
        for part in (data[:split], data[split:]):
            if part:
                responses += drain_after(client, part)
        check_pipeline(responses)


def read_like_a_socket(client: ClientConnection, data: bytes, most: int) -> tuple[list[Response], list[int]]:
    """Feed ``data`` through receive_buffer/received, at most ``most`` bytes per read, draining
    between reads as a transport does; returns the responses and the size of every buffer offered."""
    offered, position, responses = [], 0, []
    while position < len(data):
        responses += drain(client)
        with client.receive_buffer() as room:
            offered.append(len(room))
            count = min(len(room), most, len(data) - position)
            room[:count] = data[position : position + count]
        client.received(count)
        position += count
    return responses + drain(client), offered


def test_reads_of_any_size_reassemble_pipelined_responses() -> None:
    for most in (1, 7, 1000, 1 << 20):
        client = ClientConnection()
        data = pipeline(client)
        responses, _ = read_like_a_socket(client, data, most)
        check_pipeline(responses)


def test_large_fetch_records_are_read_into_the_responses_own_buffer() -> None:
    records = bytes(range(256)) * 1000
    client, server = ClientConnection(), ServerConnection()
    frames = b"".join([client.send_request(METADATA, 12), client.send_request(FetchRequest(), 12),
                       client.send_request(METADATA, 12)])

    def answer(request: Request) -> Message:
        if request.header.api_key == ApiKey.FETCH:
            return fetch_response(records)
        return MetadataResponse(cluster_id=str(request.header.correlation_id))

    data = serve(server, frames, answer)
    (first_size,) = struct.unpack_from(">i", data)
    head = data[: 4 + first_size + 100]  # the first response and the start of the Fetch response
    responses, offered = read_like_a_socket(client, head, most=len(head))
    assert [r.correlation_id for r in responses] == [1]
    assert offered[0] >= 65536
    (fetch_size,) = struct.unpack_from(">i", data, 4 + first_size)
    # The size is known: the next buffer offered is exactly the rest of the Fetch frame.
    rest_of_fetch = data[len(head) : 4 + first_size + 4 + fetch_size]
    with client.receive_buffer() as room:
        assert len(room) == len(rest_of_fetch)
        room[:] = rest_of_fetch
    client.received(len(rest_of_fetch))
    (fetched,) = drain(client)
    received = fetched.body.responses[0].partitions[0].records
    assert isinstance(received, memoryview) and received == records
    assert len(received.obj) >= fetch_size + 4  # the response owns a buffer that holds its frame
    rest = data[4 + first_size + 4 + fetch_size :]
    (last,) = drain_after(client, rest)  # the buffer is still usable after the detached frame
    assert (last.correlation_id, last.body.cluster_id) == (3, "3")


def test_a_large_frame_followed_by_a_pipelined_tail_in_one_read() -> None:
    client, server = ClientConnection(), ServerConnection()
    frames = client.send_request(FetchRequest(), 12) + client.send_request(METADATA, 12)
    big = fetch_response(bytes(200_000))

    def answer(request: Request) -> Message:
        return big if request.header.api_key == ApiKey.FETCH else MetadataResponse(cluster_id="tail")

    responses = drain_after(client, serve(server, bytes(frames), answer))
    assert [r.body for r in responses] == [big, MetadataResponse(cluster_id="tail")]


def test_a_response_larger_than_the_maximum_is_refused_and_the_error_sticks() -> None:
    client = ClientConnection(max_frame_size=100)
    client.send_request(FetchRequest(), 12)
    client.receive_data(struct.pack(">i", 101))
    with pytest.raises(MalformedResponse, match="response frame of 101 bytes is larger than the maximum of 100"):
        client.next_response()
    with pytest.raises(MalformedResponse, match="larger than the maximum"):
        client.next_response()
    with pytest.raises(MalformedResponse):
        client.send_request(METADATA, 12)
    assert issubclass(MalformedResponse, ProtocolError)
    assert ClientConnection().max_frame_size == DEFAULT_MAX_RESPONSE_SIZE


def test_an_oversized_size_prefix_reserves_no_buffer_of_that_size() -> None:
    client = ClientConnection(max_frame_size=1 << 20)
    client.send_request(FetchRequest(), 12)
    client.receive_data(struct.pack(">i", 1 << 30))
    with client.receive_buffer() as room:
        assert len(room) < 1 << 20
    with pytest.raises(MalformedResponse):
        client.next_response()


@pytest.mark.parametrize("size", [-1, 0, 3])
def test_a_frame_too_small_for_a_response_header_is_refused(size: int) -> None:
    client = ClientConnection()
    client.send_request(METADATA, 12)
    client.receive_data(struct.pack(">i", size) + bytes(8))
    with pytest.raises(MalformedResponse, match=f"invalid response frame size {size}"):
        client.next_response()


def test_a_correlation_id_mismatch_is_an_error() -> None:
    client = ClientConnection(first_correlation_id=10)
    client.send_request(METADATA, 12)
    client.send_request(METADATA, 12)
    client.receive_data(response_frame(11, MetadataResponse(), 12, header_version=1))
    with pytest.raises(MalformedResponse, match=r"correlation id 11, expected 10 \(the METADATA v12 request's\)"):
        client.next_response()


def test_a_response_nobody_awaits_is_an_error() -> None:
    client = ClientConnection()
    assert client.next_response() is NEED_DATA
    client.receive_data(response_frame(1, MetadataResponse(), 12, header_version=1))
    with pytest.raises(MalformedResponse, match="no request awaits one"):
        client.next_response()


def test_a_body_that_does_not_decode_is_an_error_naming_the_request() -> None:
    client = ClientConnection()
    client.send_request(METADATA, 12)
    client.receive_data(struct.pack(">ii", 5, 1) + b"\0")  # the header and no body
    with pytest.raises(MalformedResponse, match=r"malformed METADATA v12 response \(correlation id 1\)"):
        client.next_response()


def test_the_peer_closing_in_the_middle_of_a_frame_is_an_error() -> None:
    client = ClientConnection()
    client.send_request(METADATA, 12)
    client.receive_data(response_frame(1, MetadataResponse(), 12, header_version=1)[:-1])
    assert client.next_response() is NEED_DATA
    client.receive_data(b"")
    assert client.peer_closed
    with pytest.raises(MalformedResponse, match="peer closed the connection in the middle of a response frame"):
        client.next_response()


def test_the_peer_closing_between_frames_leaves_the_awaited_responses_unanswered() -> None:
    client = ClientConnection()
    client.send_request(METADATA, 12)
    client.received(0)
    assert client.peer_closed and client.awaiting == 1
    assert client.next_response() is NEED_DATA
    with pytest.raises(RuntimeError):
        client.receive_data(b"x")


def test_the_api_versions_response_header_is_always_v0() -> None:
    client, server = ClientConnection(), ServerConnection()
    frame = client.send_request(API_VERSIONS, 3)  # a flexible version: request header v2
    body = ApiVersionsResponse(api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)])
    data = serve(server, bytes(frame), lambda request: body)
    # size, correlation id, then the body at once: no tagged fields in the header
    assert data[4:8] == struct.pack(">i", 1)
    assert data[8:] == body.encode(3)
    assert drain_after(client, data)[0].body == body
    # Any other flexible response has header v1: a tagged-fields byte after the correlation id.
    client = ClientConnection()
    frame = client.send_request(METADATA, 12)
    data = serve(ServerConnection(), bytes(frame), lambda request: MetadataResponse())
    assert data[8:] == b"\0" + MetadataResponse().encode(12)
    assert drain_after(client, data)[0].body == MetadataResponse()


def test_an_api_versions_request_the_server_does_not_speak_is_answered_in_v0() -> None:
    client = ClientConnection(first_correlation_id=7)
    server = ServerConnection(supported={ApiKey.API_VERSIONS: (0, 3)})
    keys = [ApiVersionsResponse.ApiVersion(api_key=k, max_version=9) for k in (0, 18)]
    for version, body in ((4, b""), (99, b"\x01\x02")):
        server.receive_data(client.send_raw(ApiKey.API_VERSIONS, version, body))
        unsupported = server.next_request()
        assert isinstance(unsupported, UnsupportedVersion)
        assert unsupported.header.correlation_id == client.next_correlation_id - 1
        answer = ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=keys)
        client.receive_data(join_chunks(server.send_response(unsupported.header, answer, version=0)))
        response = client.next_response()
        assert isinstance(response, Response)
        assert response.api_version == 0
        assert response.body == answer


def test_raw_requests_carry_their_body_as_it_is() -> None:
    client = ClientConnection(client_id="old")
    frame = client.send_raw(ApiKey.PRODUCE, 2, bytes(16), expect_response=False)
    assert frame == struct.pack(">ihhih", len(frame) - 4, 0, 2, 1, 3) + b"old" + bytes(16)
    assert client.awaiting == 0
    with pytest.raises(ValueError, match="no version 99 to decode the response in"):
        client.send_raw(ApiKey.PRODUCE, 99, bytes(16))
    with pytest.raises(ValueError, match="unknown api key 999"):
        client.send_raw(999, 0)
    assert client.next_correlation_id == 2


def test_an_acks_zero_produce_awaits_no_response() -> None:
    client, server = ClientConnection(), ServerConnection()
    frames = client.send_request(produce(acks=0), 9) + client.send_request(METADATA, 12)
    assert client.awaiting == 1

    def answer(request: Request) -> Message | None:
        return None if request.header.api_key == ApiKey.PRODUCE else MetadataResponse(cluster_id="x")

    (response,) = drain_after(client, serve(server, bytes(frames), answer))
    assert (response.correlation_id, response.body.cluster_id) == (2, "x")
    # Told to, the client awaits a response to anything (and none to anything else).
    client.send_request(produce(acks=0), 9, expect_response=True)
    client.send_request(METADATA, 12, expect_response=False)
    assert client.awaiting == 1


def test_a_request_that_does_not_encode_uses_no_correlation_id() -> None:
    client = ClientConnection()
    with pytest.raises(EncodeError):
        client.send_request(METADATA, 99)
    with pytest.raises(EncodeError):
        client.send_request(ProduceRequest(acks=2**20), 9)
    assert (client.awaiting, client.next_correlation_id) == (0, 1)
    with pytest.raises(TypeError):
        client.send_request(MetadataResponse(), 12)


def test_correlation_ids_wrap_to_zero_after_the_largest_int32() -> None:
    client = ClientConnection(first_correlation_id=2**31 - 1)
    server = ServerConnection()
    frames = client.send_request(METADATA, 12) + client.send_request(METADATA, 12)
    responses = drain_after(client, serve(server, bytes(frames), lambda request: MetadataResponse()))
    assert [r.correlation_id for r in responses] == [2**31 - 1, 0]
    with pytest.raises(ValueError):
        ClientConnection(first_correlation_id=-1)


def test_single_frame_helpers() -> None:
    frame = encode_request(METADATA, 12, 5, "tool")
    server = ServerConnection()
    server.receive_data(frame)
    request = server.next_request()
    assert isinstance(request, Request)
    assert request.header == RequestHeader(ApiKey.METADATA, 12, 5, "tool")
    answer = bytes(join_chunks(server.send_response(request.header, MetadataResponse(cluster_id="c"))))
    response = decode_response(answer[4:], ApiKey.METADATA, 12)
    assert (response.correlation_id, response.body.cluster_id, response.size) == (5, "c", len(answer) - 4)


def test_an_unsupported_version_answer_in_the_version_asked_for_decodes_too() -> None:
    client = ClientConnection()
    client.send_request(API_VERSIONS, 3)
    answer = ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, throttle_time_ms=1,
                                 api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, max_version=3)])
    (response,) = drain_after(client, response_frame(1, answer, 3))
    assert (response.api_version, response.body) == (3, answer)
