"""Bad input on the wire: the broker answers or drops the offending connection, and keeps serving everyone
else.

Requests here are built by hand with struct (request header v1, non-flexible versions) so that the
tests can also build what no codec would: truncated frames, absurd sizes, unknown API keys, corrupted
CRCs. After each case a fresh connection must still get an ApiVersions answer and a real client must
still work.
"""

from __future__ import annotations

import socket
import struct
import time

import crc32c
import pytest

from compat_tests.clients import CLIENTS, assert_round_trip, numbered_messages

API_VERSIONS = 18
METADATA = 3
PRODUCE = 0
UNSUPPORTED_VERSION = 35
CORRUPT_MESSAGE = 2
CLOSE_TIMEOUT = 10.0


# --------------------------------------------------------------------------------------- raw protocol


def _string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def request(api_key: int, api_version: int, correlation_id: int, body: bytes = b"",
            client_id: str | None = "compat-raw") -> bytes:
    """A size-prefixed request with header v1 (api_key, api_version, correlation_id, client_id)."""
    payload = struct.pack(">hhi", api_key, api_version, correlation_id) + _string(client_id) + body
    return struct.pack(">i", len(payload)) + payload


def connect(broker) -> socket.socket:
    sock = socket.create_connection((broker.host, broker.port), timeout=CLOSE_TIMEOUT)
    sock.settimeout(CLOSE_TIMEOUT)
    return sock


def read_exactly(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(data)} of {size} bytes")
        data += chunk
    return bytes(data)


def read_response(sock: socket.socket) -> tuple[int, bytes]:
    """(correlation_id, body) of one response with header v0."""
    (size,) = struct.unpack(">i", read_exactly(sock, 4))
    frame = read_exactly(sock, size)
    return struct.unpack(">i", frame[:4])[0], frame[4:]


def assert_closed_by_broker(sock: socket.socket) -> None:
    """The broker closes the connection (FIN or RST) without sending anything."""
    deadline = time.monotonic() + CLOSE_TIMEOUT
    received = b""
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return
        except TimeoutError:
            break
        if not chunk:
            assert received == b"", f"broker answered {received[:200]!r} before closing"
            return
        received += chunk
    raise AssertionError(f"broker kept the connection open for {CLOSE_TIMEOUT} s (received {received[:200]!r})")


def parse_api_versions_v0(body: bytes) -> tuple[int, dict[int, tuple[int, int]]]:
    error_code, count = struct.unpack_from(">hi", body)
    apis = {}
    for index in range(count):
        api_key, min_version, max_version = struct.unpack_from(">hhh", body, 6 + 6 * index)
        apis[api_key] = (min_version, max_version)
    return error_code, apis


def assert_serving(broker) -> None:
    """The broker process is alive and answers ApiVersions and a real client on new connections."""
    assert broker.running, f"broker exited with {broker.returncode}"
    with connect(broker) as sock:
        sock.sendall(request(API_VERSIONS, 0, 7))
        correlation_id, body = read_response(sock)
        error_code, apis = parse_api_versions_v0(body)
        assert (correlation_id, error_code) == (7, 0)
        assert PRODUCE in apis and METADATA in apis
    client = CLIENTS["confluent-kafka"](broker.bootstrap)
    name = f"serving-{time.monotonic_ns()}"
    produced = numbered_messages(3)
    deliveries = client.produce(name, produced)
    assert_round_trip(produced, deliveries, client.consume(name, 3))


def record_batch(values: list[bytes], *, base_timestamp: int = 1_700_000_000_000) -> bytearray:
    """A magic v2 record batch (no compression, no producer id) with one record per value."""
    records = b""
    for delta, value in enumerate(values):
        body = (bytes([0])                      # attributes
                + _varint(0)                    # timestamp delta
                + _varint(delta)                # offset delta
                + _varint(-1)                   # null key
                + _varint(len(value)) + value
                + _varint(0))                   # no headers
        records += _varint(len(body)) + body
    after_crc = struct.pack(">hiqqqhii", 0, len(values) - 1, base_timestamp, base_timestamp, -1, -1, -1,
                            len(values)) + records
    header_after_length = struct.pack(">ibI", -1, 2, crc32c.crc32c(after_crc))
    batch = struct.pack(">qi", 0, len(header_after_length) + len(after_crc)) + header_after_length + after_crc
    return bytearray(batch)


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def produce_v3(topic: str, partition: int, records: bytes) -> bytes:
    body = (_string(None) + struct.pack(">hi", -1, 10_000)            # transactional_id, acks, timeout_ms
            + struct.pack(">i", 1) + _string(topic)
            + struct.pack(">ii", 1, partition) + struct.pack(">i", len(records)) + records)
    return body


def parse_produce_v3_error(body: bytes) -> int:
    """The error code of the only partition in a Produce v3 response."""
    (topics,) = struct.unpack_from(">i", body)
    (name_length,) = struct.unpack_from(">h", body, 4)
    position = 6 + name_length
    partitions, _index, error_code = struct.unpack_from(">iih", body, position)
    assert (topics, partitions) == (1, 1)
    return error_code


# --------------------------------------------------------------------------------------- tests


def test_api_versions_v0_baseline(broker):
    assert_serving(broker)


def test_truncated_frame_then_close(broker):
    with connect(broker) as sock:
        frame = request(API_VERSIONS, 0, 1)
        sock.sendall(frame[:len(frame) - 3])  # the size promises 3 more bytes that never come
    assert_serving(broker)


def test_truncated_size_prefix_then_close(broker):
    with connect(broker) as sock:
        sock.sendall(b"\x00\x00")
    assert_serving(broker)


def test_frame_smaller_than_a_request_header(broker):
    with connect(broker) as sock:
        sock.sendall(struct.pack(">i", 3) + b"\x00\x12\x00")
        assert_closed_by_broker(sock)
    assert_serving(broker)


@pytest.mark.parametrize("size", [2**31 - 1, 200 * 1024 * 1024, -1, -(2**31)], ids=["max-int", "200MiB", "-1", "min-int"])
def test_absurd_frame_size(broker, size):
    with connect(broker) as sock:
        sock.sendall(struct.pack(">i", size) + b"\x00\x12\x00\x00\x00\x00\x00\x01")
        assert_closed_by_broker(sock)
    assert_serving(broker)


def test_garbage_bytes(broker):
    with connect(broker) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")  # reads as a 1.2 GB frame size
        assert_closed_by_broker(sock)
    assert_serving(broker)


def test_garbage_inside_a_plausible_frame(broker):
    garbage = bytes((i * 37 + 11) % 256 for i in range(64))
    with connect(broker) as sock:
        sock.sendall(struct.pack(">i", len(garbage)) + garbage)
        assert_closed_by_broker(sock)
    assert_serving(broker)


def test_unknown_api_key(broker):
    with connect(broker) as sock:
        sock.sendall(request(9999, 0, 5))
        assert_closed_by_broker(sock)
    assert_serving(broker)


def test_api_versions_with_unsupported_version(broker):
    """ApiVersions v99 gets a v0 answer: UNSUPPORTED_VERSION and the supported APIs, so the client can
    retry with a version the broker has; the connection stays usable."""
    with connect(broker) as sock:
        sock.sendall(request(API_VERSIONS, 99, 42))
        correlation_id, body = read_response(sock)
        error_code, apis = parse_api_versions_v0(body)
        assert (correlation_id, error_code) == (42, UNSUPPORTED_VERSION)
        assert apis[API_VERSIONS][0] == 0 and apis[API_VERSIONS][1] >= 3, apis
        assert PRODUCE in apis and METADATA in apis, apis

        sock.sendall(request(API_VERSIONS, 0, 43))
        correlation_id, body = read_response(sock)
        assert (correlation_id, parse_api_versions_v0(body)[0]) == (43, 0)
    assert_serving(broker)


def test_other_api_with_unsupported_version_closes_connection(broker):
    with connect(broker) as sock:
        sock.sendall(request(METADATA, 99, 6, body=struct.pack(">i", 0)))
        assert_closed_by_broker(sock)
    assert_serving(broker)


def test_body_that_does_not_decode(broker):
    """Metadata v1 promising 1000 topic names and carrying none."""
    with connect(broker) as sock:
        sock.sendall(request(METADATA, 1, 8, body=struct.pack(">i", 1000)))
        assert_closed_by_broker(sock)
    assert_serving(broker)


def test_corrupted_crc_is_refused_and_nothing_is_stored(broker, topic):
    name = topic(partitions=1)
    client = CLIENTS["confluent-kafka"](broker.bootstrap)
    client.produce(name, numbered_messages(3, partitions=1))
    assert client.watermarks(name) == {0: (0, 3)}

    batch = record_batch([b"first", b"second"])
    batch[-1] ^= 0xFF  # flip the last byte of the last record: the CRC no longer matches
    with connect(broker) as sock:
        sock.sendall(request(PRODUCE, 3, 11, produce_v3(name, 0, bytes(batch))))
        correlation_id, body = read_response(sock)
        assert correlation_id == 11
        assert parse_produce_v3_error(body) == CORRUPT_MESSAGE

        # The same batch with its CRC intact is accepted on the same connection.
        sock.sendall(request(PRODUCE, 3, 12, produce_v3(name, 0, bytes(record_batch([b"first", b"second"])))))
        correlation_id, body = read_response(sock)
        assert (correlation_id, parse_produce_v3_error(body)) == (12, 0)

    assert client.watermarks(name) == {0: (0, 5)}
    consumed = client.consume(name, 5)
    assert [r.value for r in consumed] == [m.value for m in numbered_messages(3)] + [b"first", b"second"]
    assert_serving(broker)


def test_connections_survive_each_other(broker, topic):
    """A connection dropped for a malformed frame does not disturb another one mid-conversation."""
    name = topic(partitions=1)
    with connect(broker) as healthy, connect(broker) as doomed:
        healthy.sendall(request(API_VERSIONS, 0, 1))
        assert read_response(healthy)[0] == 1
        doomed.sendall(struct.pack(">i", -5))
        assert_closed_by_broker(doomed)
        healthy.sendall(request(PRODUCE, 3, 2, produce_v3(name, 0, bytes(record_batch([b"survivor"])))))
        correlation_id, body = read_response(healthy)
        assert (correlation_id, parse_produce_v3_error(body)) == (2, 0)
    assert [r.value for r in CLIENTS["kcat"](broker.bootstrap).consume(name, 1)] == [b"survivor"]
