"""A plain synchronous Kafka client for single requests, built on trafka's wire codec (generated from Apache
Kafka's message specs): it sends exactly the request a test constructs and returns the decoded response,
against trafka or Apache Kafka alike. For what no client library lets a test send (counts no admin client
would, a request's every field) and for comparing two brokers field by field. The framing is
``wire.client``'s; ``encode_frame``, ``read_frame`` and ``decode_response`` are for tests that drive a
socket themselves (a frame of an exact size, a request whose response they time)."""

from __future__ import annotations

import socket
import struct

from trafka.wire import client as wire_client
from trafka.wire.client import NEED_DATA, ClientConnection, Response
from trafka.wire.primitives import Message

_SIZE = struct.Struct(">i")


def encode_frame(message: Message, version: int, correlation_id: int = 1, client_id: str = "compat-wire") -> bytes:
    """``message`` as a size-prefixed request frame."""
    return bytes(wire_client.encode_request(message, version, correlation_id, client_id))


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
    """The correlation id and the response in a response frame (without its size)."""
    response = wire_client.decode_response(frame, api_key, version)
    return response.correlation_id, response.body


class WireClient:
    """One connection; each request waits for its response."""

    def __init__(self, bootstrap: str, *, client_id: str = "compat-wire", timeout: float = 30.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.protocol = ClientConnection(client_id=client_id)

    def request(self, message: Message, version: int) -> Message:
        self.sock.sendall(self.protocol.send_request(message, version, expect_response=True))
        return self._receive().body

    def _receive(self) -> Response:
        protocol = self.protocol
        while (event := protocol.next_response()) is NEED_DATA:
            with protocol.receive_buffer() as room:
                count = self.sock.recv_into(room)
            if not count:
                raise ConnectionError(f"the broker closed the connection ({protocol.awaiting} responses awaited)")
            protocol.received(count)
        assert isinstance(event, Response)
        return event

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
