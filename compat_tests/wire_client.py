"""A plain synchronous Kafka client for single requests, built on trafka's wire codec (generated from Apache
Kafka's message specs): it sends exactly the request a test constructs and returns the decoded response,
against trafka or Apache Kafka alike. For what no client library lets a test send (counts no admin client
would, a request's every field) and for comparing two brokers field by field."""

from __future__ import annotations

import itertools
import socket
import struct

from trafka.wire.primitives import Message, Writer
from trafka.wire.protocol import RequestHeader, decode_response_header, encode_request_header, response_header_version
from trafka.wire.messages import RESPONSES

_SIZE = struct.Struct(">i")


def encode_frame(message: Message, version: int, correlation_id: int = 1, client_id: str = "compat-wire") -> bytes:
    """``message`` as a size-prefixed request frame."""
    writer = Writer()
    encode_request_header(writer, RequestHeader(message.API_KEY, version, correlation_id, client_id))
    message.encode_into(writer, version)
    return _SIZE.pack(len(writer)) + writer.to_bytes()


def read_frame(sock: socket.socket) -> bytes:
    """One size-prefixed frame from ``sock``, without its size."""
    (size,) = _SIZE.unpack(_read_exactly(sock, 4))
    return _read_exactly(sock, size)


def _read_exactly(sock: socket.socket, count: int) -> bytes:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(min(count - len(data), 1 << 20))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(data)} of {count} bytes")
        data += chunk
    return bytes(data)


def decode_response(frame: bytes, api_key: int, version: int) -> tuple[int, Message]:
    """The correlation id and the response in a response frame."""
    correlation_id, position = decode_response_header(memoryview(frame), response_header_version(api_key, version))
    return correlation_id, RESPONSES[api_key].decode(memoryview(frame)[position:], version)


class WireClient:
    """One connection; each request waits for its response."""

    def __init__(self, bootstrap: str, *, client_id: str = "compat-wire", timeout: float = 30.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.client_id = client_id
        self._correlation_ids = itertools.count(1)

    def request(self, message: Message, version: int) -> Message:
        correlation_id = next(self._correlation_ids)
        self.sock.sendall(encode_frame(message, version, correlation_id, self.client_id))
        received_id, response = decode_response(read_frame(self.sock), message.API_KEY, version)
        assert received_id == correlation_id, f"correlation id {received_id}, expected {correlation_id}"
        return response

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
