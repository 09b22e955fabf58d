"""Client-side Kafka framing, sans-I/O: requests out as frames, bytes in, decoded responses out.

The mirror of ``wire.connection``: ``ClientConnection`` is what a client (an admin tool, a follower's
fetcher, a test) keeps per connection, whatever transport it uses — blocking sockets, Trio streams, a
thread per direction. ``send_request(message, version)`` gives the bytes of one frame: an int32 size,
the request header (v1, or v2 for a flexible version; the client_id is always a classic int16-length
string) and the body. The connection assigns the correlation id itself and remembers which request
awaits a response. A Produce with ``acks=0`` gets no response, so it awaits none; ``expect_response``
says so explicitly for anything else.

The transport reads into ``receive_buffer()`` (``recv_into``) and reports the count with
``received``, or hands over bytes it already has with ``receive_data``; then it drains
``next_response`` until it says ``NEED_DATA``. Responses come back in the order the requests went out
(Kafka answers a connection's requests in order), so several requests may be in flight at once. Each
response must echo the correlation id of the oldest request still awaiting one; it is decoded with
that request's api key and version into a ``Response`` whose ``body`` is the typed response message.
The response header is v0 or v1 by the response's flexible versions, except for ApiVersions, whose
response header is always v0; an ApiVersions answer carrying UNSUPPORTED_VERSION is decoded in v0,
the version a broker answers in when it does not speak the one asked for.

Once the size of a large frame is known, the buffer offered for reading is that frame's own, so a
megabyte of Fetch records goes from the socket to where the response uses it in one copy: decoded
``records`` are memoryviews into that buffer, which belongs to that response alone. The buffer is
taken whole as soon as the size is read (a client trusts its broker up to ``max_frame_size``): the
allocator hands back memory that earlier responses released, which costs less than fresh pages
committed as the bytes arrive (the server connection's way, where the peer is a stranger).

A frame that cannot be the awaited response (negative size, larger than ``max_frame_size``, another
correlation id, no request awaiting one, a body that does not decode, the peer closing in the middle
of it) raises ``MalformedResponse``, a ``wire.connection.ProtocolError``: the connection must be
closed, and every later call raises the same error.

Sending touches the correlation id counter and the queue of awaited requests (a deque, appended to
before the frame is handed out); receiving touches the receive buffer and takes from that queue. So
one thread may send while another receives. ``encode_request`` and ``decode_response`` are the single
frame's halves, for code that frames one request by other means.
"""
from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass

from trafka.wire.connection import NEED_DATA, FrameReceiver, ProtocolError, _Sentinel
from trafka.wire.errors import ErrorCode
from trafka.wire.primitives import INT16, DecodeError, Message, Writer
from trafka.wire.protocol import (
    REQUESTS,
    RESPONSES,
    ApiKey,
    RequestHeader,
    api_key_of,
    decode_response_header,
    encode_request_header,
    response_header_version,
)

__all__ = [
    "DEFAULT_MAX_RESPONSE_SIZE",
    "NEED_DATA",
    "ClientConnection",
    "MalformedResponse",
    "ProtocolError",
    "Response",
    "decode_response",
    "encode_request",
]

#: The largest response frame accepted by default: a broker's socket.request.max.bytes (100 MiB) and
#: some room, since a Fetch response may exceed fetch.max.bytes by one batch per partition.
DEFAULT_MAX_RESPONSE_SIZE = 128 * 1024 * 1024

_SIZE = struct.Struct(">i")
_MAX_CORRELATION_ID = 0x7FFFFFFF


class MalformedResponse(ProtocolError):
    """The peer sent something that is not the response awaited; the connection must be closed."""


@dataclass(slots=True)
class Response:
    correlation_id: int
    api_key: int  # an ApiKey
    api_version: int  # the body's: the request's, or 0 for an ApiVersions UNSUPPORTED_VERSION answer
    body: Message
    size: int  # of the frame, without its 4-byte size prefix


@dataclass(slots=True)
class _Awaited:
    """A request sent whose response has not arrived yet."""

    correlation_id: int
    api_key: int
    api_version: int


def encode_request(
    message: Message, version: int, correlation_id: int, client_id: str | None
) -> bytearray:
    """``message`` at ``version`` as one request frame: size, request header, body.

    Raises ``EncodeError`` when the message does not encode at that version (a field out of range,
    a version the message does not have). File slices among the records are read into the frame.
    """
    api_key = message.API_KEY
    if api_key is None or REQUESTS.get(api_key) is not type(message):
        raise TypeError(f"{type(message).__name__} is not a request")
    w = Writer()
    w += b"\0\0\0\0"  # the frame size, patched below
    encode_request_header(w, RequestHeader(api_key, version, correlation_id, client_id))
    message.encode_into(w, version)
    return _sized(w)


def _encode_raw(api_key: int, version: int, correlation_id: int, client_id: str | None,
                body: bytes | bytearray | memoryview) -> bytearray:
    w = Writer()
    w += b"\0\0\0\0"
    encode_request_header(w, RequestHeader(api_key, version, correlation_id, client_id))
    w += body
    return _sized(w)


def _sized(w: Writer) -> bytearray:
    """The writer's frame with its size filled in; the writer itself unless it holds file slices."""
    frame: bytearray = w
    if w._chunks:  # file slices among the records: read them into the frame
        frame = bytearray(w.to_bytes())
    frame[0:4] = _SIZE.pack(len(frame) - 4)
    return frame


def decode_response(frame: bytes | bytearray | memoryview, api_key: int, api_version: int) -> Response:
    """The response in ``frame`` (without its size prefix) to a request of ``api_key`` at
    ``api_version``, whatever its correlation id. Raises ``DecodeError`` when it does not decode."""
    view = frame if type(frame) is memoryview else memoryview(frame)
    correlation_id, position = decode_response_header(view, response_header_version(api_key, api_version))
    body = view[position:]
    cls = RESPONSES[api_key]
    if api_key == ApiKey.API_VERSIONS and api_version != 0 and _is_unsupported_version(body):
        try:
            return Response(correlation_id, api_key, 0, cls.decode(body, 0), len(view))
        except DecodeError:
            if not cls.MIN_VERSION <= api_version <= cls.MAX_VERSION:
                raise
    return Response(correlation_id, api_key, api_version, cls.decode(body, api_version), len(view))


def _is_unsupported_version(body: memoryview) -> bool:
    # Every ApiVersions response version starts with its int16 error code.
    return len(body) >= 2 and INT16.unpack_from(body)[0] == ErrorCode.UNSUPPORTED_VERSION


class ClientConnection(FrameReceiver):
    """One connection's framing and request bookkeeping; see the module docstring."""

    def __init__(
        self,
        *,
        client_id: str | None = "trafka",
        max_frame_size: int = DEFAULT_MAX_RESPONSE_SIZE,
        first_correlation_id: int = 1,
    ) -> None:
        """``client_id`` goes into every request header (None: a null client id). Correlation ids
        count up from ``first_correlation_id`` and wrap to 0 after 2**31 - 1."""
        if not 0 <= first_correlation_id <= _MAX_CORRELATION_ID:
            raise ValueError(f"correlation id {first_correlation_id} is not a non-negative int32")
        self.client_id = client_id
        self.max_frame_size = max_frame_size
        self._next_correlation_id = first_correlation_id
        self._awaited: deque[_Awaited] = deque()
        super().__init__()
        self._error: MalformedResponse | None = None

    # -- sending -----------------------------------------------------------------------------------

    def send_request(self, message: Message, version: int, *, expect_response: bool | None = None) -> bytearray:
        """The frame of ``message`` at ``version``, to send as it is, under the next correlation id.

        A response is awaited unless ``expect_response`` is False, or it is None (the default) and the
        request is a Produce with ``acks=0``. Raises ``EncodeError`` when the message does not encode
        (nothing is awaited then, and the correlation id is not used).
        """
        api_key = message.API_KEY
        if api_key is None or REQUESTS.get(api_key) is not type(message):
            raise TypeError(f"{type(message).__name__} is not a request")
        if self._error is not None:
            raise self._error
        correlation_id = self._next_correlation_id
        frame = encode_request(message, version, correlation_id, self.client_id)
        if expect_response is None:
            expect_response = not (api_key == ApiKey.PRODUCE and message.acks == 0)  # type: ignore[attr-defined]
        self._sent(correlation_id, api_key, version, expect_response)
        return frame

    def send_raw(
        self, api_key: int, api_version: int, body: bytes | bytearray | memoryview = b"", *,
        expect_response: bool = True,
    ) -> bytearray:
        """A frame with a request header for ``api_key`` at ``api_version`` and ``body`` as it is:
        for a body encoded elsewhere, or one deliberately invalid, or a version the codec does not
        have (to see what a server does with it).

        An awaited response is decoded at ``api_version``, or in v0 for ApiVersions (a server answers
        a version it does not know in v0); a response to another version the codec does not have
        cannot be decoded, so that is refused here (ValueError) unless ``expect_response`` is False.
        """
        key = api_key_of(api_key)
        if key is None:
            raise ValueError(f"unknown api key {api_key}: no request header version for it")
        response = RESPONSES[key]
        if (expect_response and key != ApiKey.API_VERSIONS
                and not response.MIN_VERSION <= api_version <= response.MAX_VERSION):
            raise ValueError(
                f"{response.__name__} has no version {api_version} to decode the response in "
                f"(versions {response.MIN_VERSION}-{response.MAX_VERSION}); send with expect_response=False"
            )
        if self._error is not None:
            raise self._error
        correlation_id = self._next_correlation_id
        frame = _encode_raw(key, api_version, correlation_id, self.client_id, body)
        self._sent(correlation_id, key, api_version, expect_response)
        return frame

    def _sent(self, correlation_id: int, api_key: int, version: int, expect_response: bool) -> None:
        self._next_correlation_id = correlation_id + 1 if correlation_id < _MAX_CORRELATION_ID else 0
        if expect_response:
            self._awaited.append(_Awaited(correlation_id, api_key, version))

    @property
    def awaiting(self) -> int:
        """How many requests sent still await their response."""
        return len(self._awaited)

    @property
    def next_correlation_id(self) -> int:
        """The correlation id the next request will carry."""
        return self._next_correlation_id

    # -- receiving ---------------------------------------------------------------------------------

    def next_response(self) -> Response | _Sentinel:
        """The next complete response, or ``NEED_DATA``.

        Raises ``MalformedResponse`` when the data cannot be the response awaited; after that the
        connection stays broken and every call raises the same error. After the peer closed,
        ``NEED_DATA`` means that nothing more will come (``awaiting`` responses are lost).
        """
        if self._error is not None:
            raise self._error
        try:
            return self._next_response()
        except MalformedResponse as exc:
            self._error = exc
            raise

    def _next_response(self) -> Response | _Sentinel:
        frame = self._next_frame()
        return frame if frame is NEED_DATA else self._parse(frame)

    _frame_noun = "a response frame"

    def _check_size(self, size: int, prefix: bytes) -> None:
        if size < 4:
            raise MalformedResponse(f"invalid response frame size {size}: too small for a response header")
        if size > self.max_frame_size:
            raise MalformedResponse(
                f"response frame of {size} bytes is larger than the maximum of {self.max_frame_size} bytes"
            )

    def _truncated(self, message: str) -> MalformedResponse:
        return MalformedResponse(message)

    def _parse(self, frame: memoryview) -> Response:
        (correlation_id,) = _SIZE.unpack_from(frame)
        if not self._awaited:
            raise MalformedResponse(
                f"a response (correlation id {correlation_id}, {len(frame)} bytes) when no request awaits one"
            )
        awaited = self._awaited[0]
        name = _api_name(awaited.api_key)
        if correlation_id != awaited.correlation_id:
            raise MalformedResponse(
                f"response with correlation id {correlation_id}, expected {awaited.correlation_id} "
                f"(the {name} v{awaited.api_version} request's)"
            )
        self._awaited.popleft()
        try:
            return decode_response(frame, awaited.api_key, awaited.api_version)
        except DecodeError as exc:
            raise MalformedResponse(
                f"malformed {name} v{awaited.api_version} response (correlation id {correlation_id}): {exc}"
            ) from None


def _api_name(api_key: int) -> str:
    key = api_key_of(api_key)
    return f"api key {api_key}" if key is None else key.name

