"""Server-side Kafka framing, sans-I/O: bytes in, decoded requests out; responses out as chunks.

Each request is a frame: an int32 size, then that many bytes holding the request header and body.
The transport reads into ``receive_buffer()`` (``recv_into``) and reports the count with ``received``,
or hands over bytes it already has with ``receive_data``; then it drains ``next_request`` until it says
``NEED_DATA``. Clients pipeline requests, so one read may carry several frames or a fraction of one.
Once the size of a large frame is known, the buffer offered for reading is that frame's own, so its
bytes go from the socket to where the request will use them in one copy; that buffer is anonymous
memory, committed as the bytes arrive, so a size prefix alone reserves nothing. Once nothing reads a
large frame any more (no view of its buffer is left), its buffer takes the connection's next large frame,
its pages already in place: a stream of large requests costs no page faults after the first few.
``send_response`` turns a response message into the chunks of one frame, in the order to send them
(a ``FileSlice`` among them is meant for ``os.sendfile``).

A connection made with ``decode_in_place_limit`` leaves the body of a larger frame undecoded: it yields
``UndecodedRequest``, whose ``decode()`` the transport may run wherever it likes (a worker thread), so
that turning megabytes of arrays into objects does not hold up everyone else.

A frame that cannot be a valid request (bad size, truncated header, unknown api key, body that does
not decode) raises ``ProtocolError``: Kafka closes such connections. A known api key at a version
outside the supported range yields ``UnsupportedVersion`` so that the broker can answer ApiVersions
with UNSUPPORTED_VERSION (in ApiVersions v0), as Kafka does, and close the connection otherwise.

Records in a decoded request are writable memoryviews into a buffer that belongs to that request
alone, so the log can patch base offsets in place without copying.
"""
from __future__ import annotations

import collections
import mmap
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from trafka.wire.chunks import Chunk, chunks_size
from trafka.wire.primitives import DecodeError, Message, Writer
from trafka.wire.protocol import (
    REQUESTS,
    RESPONSES,
    RequestHeader,
    decode_request_header,
    encode_response_header,
    response_header_version,
)

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "NEED_DATA",
    "ProtocolError",
    "Request",
    "RequestHeader",
    "ServerConnection",
    "UndecodedRequest",
    "UnsupportedVersion",
]

DEFAULT_MAX_FRAME_SIZE = 104857600  # socket.request.max.bytes

_SIZE = struct.Struct(">i")
_MIN_HEADER_SIZE = 10  # api_key, api_version, correlation_id, client_id length

# A frame at least this large is read into a buffer of its own and handed to its request as it is.
_DETACH_SIZE = 65536
# Room offered for a read when no large frame is being completed (several small frames fit).
_READ_SIZE = 65536

# What the first four bytes look like when the peer does not speak the Kafka protocol.
_FOREIGN_PROTOCOLS = (
    (b"GET ", "an HTTP request"),
    (b"POST", "an HTTP request"),
    (b"PUT ", "an HTTP request"),
    (b"HEAD", "an HTTP request"),
    (b"\x16\x03", "a TLS handshake (a TLS client on a plaintext listener?)"),
)


# Large frames' buffers a connection keeps to read its next large frames into, and the largest kept.
_SPARE_BUFFERS = 2
_SPARE_MAX_SIZE = 16 << 20


def _frame_buffer(size: int) -> mmap.mmap:
    """A writable buffer of at least ``size`` zero bytes for one large frame, from private anonymous memory.

    The operating system commits its pages only as the peer's bytes are written into them, so the
    memory a frame holds is what the peer has sent, never what its size prefix claims: a peer that
    announces a frame of ``max_frame_size`` bytes and stops there costs one page, not the whole size.
    A buffer that may be kept for later frames is sized up to a power of two (address space only), so
    that the next frames, a little larger or smaller, fit in it too.
    """
    capacity = 1 << (size - 1).bit_length() if size <= _SPARE_MAX_SIZE else size
    return mmap.mmap(-1, capacity, flags=mmap.MAP_PRIVATE)


def _unread(buffer: mmap.mmap) -> bool:
    """Whether no view of ``buffer`` is left (nothing reads the frame it held), so that it may be reused.
    An mmap refuses to be resized while views of it exist; resizing it to its own size changes nothing."""
    try:
        buffer.resize(len(buffer))
    except BufferError:
        return False
    except (OSError, SystemError, ValueError):  # e.g. no mremap here: raised only after views were found absent
        return True
    return True


class _Sentinel:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


NEED_DATA: Final = _Sentinel("NEED_DATA")
"""``next_request`` has no complete frame: feed more data with ``receive_data``."""


class ProtocolError(Exception):
    """The peer sent something that is not a valid Kafka request; the connection must be closed."""


@dataclass(slots=True)
class Request:
    header: RequestHeader
    body: Message
    size: int  # of the frame, without its 4-byte size prefix


@dataclass(slots=True)
class UndecodedRequest:
    """A request whose header is decoded and version supported, and whose body is still bytes."""

    header: RequestHeader
    frame: memoryview  # the whole frame, without its 4-byte size prefix
    body_start: int

    def decode(self) -> Request:
        """The request; raises ``ProtocolError`` when the body does not decode."""
        header = self.header
        return Request(header, _decode_body(header, self.frame[self.body_start :]), len(self.frame))


def _decode_body(header: RequestHeader, body: memoryview) -> Message:
    try:
        return REQUESTS[header.api_key].decode(body, header.api_version, exact=False)
    except DecodeError as exc:
        raise ProtocolError(
            f"malformed request (correlation id {header.correlation_id}, "
            f"client id {header.client_id!r}): {exc}"
        ) from None


@dataclass(slots=True)
class UnsupportedVersion:
    """A request for a known API at a version this server does not support (the frame is consumed)."""

    header: RequestHeader
    size: int = 0
    supported: tuple[int, int] | None = None  # the version range served; None: the API is not served


class FrameReceiver:
    """The receiving half of a Kafka connection, either side: size-prefixed frames out of the bytes read.

    A subclass says how large a frame may be (``max_frame_size``, ``_check_size``) and what error a
    truncated frame raises (``_truncated``).
    """

    max_frame_size: int
    #: How a frame is named in the message when the peer closes in its middle.
    _frame_noun = "a frame"

    def __init__(self) -> None:
        self._buffer: bytearray | mmap.mmap = bytearray(_READ_SIZE)
        self._start = 0  # where the next frame begins in _buffer
        self._end = 0  # where the bytes received so far end in _buffer
        self._peer_closed = False
        # The buffers of the last large frames handed out, oldest first: reused once nothing reads them.
        self._spares: collections.deque[mmap.mmap] = collections.deque(maxlen=_SPARE_BUFFERS)

    @property
    def peer_closed(self) -> bool:
        """Whether the peer closed its side (``receive_data(b"")`` or ``received(0)``)."""
        return self._peer_closed

    def receive_buffer(self) -> memoryview:
        """A writable view to read the peer's next bytes into; report how many with ``received``.

        While a large frame is incomplete the view is exactly the rest of that frame, in a buffer that
        will become the frame's; otherwise it offers at least 64 KiB. Release the view (or drop it)
        before asking for the next one.
        """
        buffer, start, end = self._buffer, self._start, self._end
        if start == end and start:
            self._start = self._end = start = end = 0
        pending = end - start
        frame_end = 0
        if pending >= 4:
            (size,) = _SIZE.unpack_from(buffer, start)
            if _DETACH_SIZE <= size <= self.max_frame_size and start + 4 + size > end:
                frame_end = start + 4 + size
        wanted = frame_end if frame_end else end + _READ_SIZE
        if wanted > len(buffer):
            # Move what is pending to the front of a buffer with room for the rest (of the frame).
            if frame_end:
                fresh = self._large_frame_buffer(frame_end - start)
                room = memoryview(fresh)[pending : frame_end - start]
            else:
                fresh = bytearray(pending + _READ_SIZE)
                room = memoryview(fresh)[pending:]
            fresh[:pending] = memoryview(buffer)[start:end]
            self._buffer, self._start, self._end = fresh, 0, pending
            return room
        return memoryview(buffer)[end:wanted] if frame_end else memoryview(buffer)[end:]

    def release_buffer(self) -> int:
        """Let the receive buffer go while nothing is pending (an idle connection need not hold 64 KiB);
        the next ``receive_buffer()`` takes a new one. Returns its size (0: something is pending)."""
        if self._start != self._end:
            return 0
        size = len(self._buffer)
        self._buffer, self._start, self._end = bytearray(), 0, 0
        self._spares.clear()
        return size

    def received(self, count: int) -> None:
        """``count`` bytes were read into the last ``receive_buffer()``; 0 means the peer closed."""
        if self._peer_closed:
            raise RuntimeError("received() after the peer closed the connection")
        if count == 0:
            self._peer_closed = True
        self._end += count

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Feeds bytes read from the peer; ``b""`` means the peer closed its side."""
        if self._peer_closed:
            raise RuntimeError("receive_data() after the peer closed the connection")
        if not data:
            self._peer_closed = True
            return
        data = memoryview(data).cast("B")
        while data:
            with self.receive_buffer() as room:
                count = min(len(room), len(data))
                room[:count] = data[:count]
            self.received(count)
            data = data[count:]

    def _next_frame(self) -> memoryview | _Sentinel:
        """The next whole frame (the bytes after its size), or NEED_DATA. A frame at least
        ``_DETACH_SIZE`` long keeps the buffer it was read into; a smaller one is copied out."""
        buffer = self._buffer
        start = self._start
        available = self._end - start
        if available < 4:
            return self._need_data(available)
        (size,) = _SIZE.unpack_from(buffer, start)
        self._check_size(size, bytes(buffer[start : start + 4]))
        end = start + 4 + size
        if self._end < end:
            return self._need_data(available, size)
        if size >= _DETACH_SIZE:
            # Hand the receive buffer itself to this frame; keep only what follows it.
            frame = memoryview(buffer)[start + 4 : end]
            if isinstance(buffer, mmap.mmap) and len(buffer) <= _SPARE_MAX_SIZE:
                self._spares.append(buffer)
            rest = self._end - end
            self._buffer = bytearray(rest + _READ_SIZE)
            if rest:
                self._buffer[:rest] = buffer[end : self._end]
            self._start, self._end = 0, rest
        else:
            frame = memoryview(buffer[start + 4 : end])
            self._start = end
        return frame

    def _need_data(self, available: int, size: int | None = None) -> _Sentinel:
        if self._peer_closed and available:
            expected = "the 4-byte frame size" if size is None else f"{self._frame_noun} of {size} bytes"
            raise self._truncated(
                f"peer closed the connection in the middle of {expected} ({available} bytes received)"
            )
        return NEED_DATA

    def _check_size(self, size: int, prefix: bytes) -> None:
        """Raise if ``size`` (with the frame's first four bytes) cannot be a frame from this peer."""
        raise NotImplementedError

    def _large_frame_buffer(self, size: int) -> mmap.mmap:
        """A buffer of at least ``size`` bytes for one large frame: a kept one that nothing reads any
        more, or a new one."""
        for spare in self._spares:
            if len(spare) >= size and _unread(spare):
                self._spares.remove(spare)
                return spare
        return _frame_buffer(size)

    def _truncated(self, message: str) -> ProtocolError:
        return ProtocolError(message)


class ServerConnection(FrameReceiver):
    def __init__(
        self,
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        supported: Mapping[int, tuple[int, int]] | None = None,
        decode_in_place_limit: int | None = None,
    ) -> None:
        """``supported`` maps api keys to the (min, max) versions served; by default everything the
        codec knows. Versions beyond the codec's range are never supported. Frames larger than
        ``decode_in_place_limit`` come out as ``UndecodedRequest``; by default every frame is decoded."""
        self.max_frame_size = max_frame_size
        self.decode_in_place_limit = decode_in_place_limit
        self._versions: dict[int, tuple[int, int]] = {}
        for api_key, request in REQUESTS.items():
            if supported is None:
                self._versions[api_key] = (request.MIN_VERSION, request.MAX_VERSION)
            elif api_key in supported:
                low, high = supported[api_key]
                self._versions[api_key] = (max(low, request.MIN_VERSION), min(high, request.MAX_VERSION))
        super().__init__()
        self._error: ProtocolError | None = None
        self._raw = False

    def next_request(self) -> Request | UndecodedRequest | UnsupportedVersion | _Sentinel:
        """The next complete request, ``UndecodedRequest``, ``UnsupportedVersion``, or ``NEED_DATA``.

        Raises ``ProtocolError`` when the data cannot be a valid request; after that the connection
        stays broken and every call raises the same error. After the peer closed, ``NEED_DATA`` means
        that there is nothing more (a partial frame at that point is a ``ProtocolError``).
        """
        if self._error is not None:
            raise self._error
        try:
            return self._next_request()
        except ProtocolError as exc:
            self._error = exc
            raise

    def send_response(
        self, header: RequestHeader, response: Message, version: int | None = None
    ) -> list[Chunk]:
        """The frame of ``response`` to the request with ``header``: size, response header, body.

        ``version`` defaults to the request's; ApiVersions answers an unsupported version in v0.
        In-memory chunks are bytearrays; ``FileSlice`` records stay separate chunks for sendfile.
        """
        if version is None:
            version = header.api_version
        expected = RESPONSES.get(header.api_key)
        if type(response) is not expected:
            raise TypeError(
                f"{type(response).__name__} is not the response to api key {header.api_key} "
                f"({expected.__name__ if expected else 'unknown'})"
            )
        w = Writer()
        w += b"\0\0\0\0"  # the frame size, patched below
        encode_response_header(w, header.correlation_id, response_header_version(header.api_key, version))
        response.encode_into(w, version)
        chunks = w.chunks()
        chunks[0][0:4] = _SIZE.pack(chunks_size(chunks) - 4)  # type: ignore[index]
        return chunks

    def _next_request(self) -> Request | UndecodedRequest | UnsupportedVersion | _Sentinel:
        frame = self._next_frame()
        return frame if frame is NEED_DATA else self._parse(frame)

    def next_raw_frame(self) -> memoryview | _Sentinel:
        """The next frame's bytes as they are, without a request header, or ``NEED_DATA``: a SASL token
        after SaslHandshake v0, Kafka's oldest framing of the exchange."""
        self._raw = True
        try:
            return self._next_frame()
        finally:
            self._raw = False

    @staticmethod
    def raw_frame(data: bytes) -> bytes:
        """``data`` as a bare frame (a SASL token answering one of :meth:`next_raw_frame`)."""
        return _SIZE.pack(len(data)) + data

    def _check_size(self, size: int, prefix: bytes) -> None:
        if size < (0 if self._raw else _MIN_HEADER_SIZE) or size > self.max_frame_size:
            raise ProtocolError(self._bad_size(size, prefix))

    def _bad_size(self, size: int, prefix: bytes) -> str:
        for start, protocol in _FOREIGN_PROTOCOLS:
            if prefix.startswith(start):
                return f"not a Kafka request: the data looks like {protocol}"
        if size < 0:
            return f"invalid frame size {size}: negative"
        if size < _MIN_HEADER_SIZE:
            return f"invalid frame size {size}: too small for a request header ({_MIN_HEADER_SIZE} bytes)"
        return (
            f"frame of {size} bytes is larger than the maximum of {self.max_frame_size} bytes "
            "(socket.request.max.bytes)"
        )

    def _parse(self, frame: memoryview) -> Request | UndecodedRequest | UnsupportedVersion:
        size = len(frame)
        try:
            header, body_start = decode_request_header(frame)
        except DecodeError as exc:
            raise ProtocolError(f"malformed request header: {exc}") from None
        request = REQUESTS.get(header.api_key)
        if request is None:
            raise ProtocolError(
                f"unknown api key {header.api_key} (version {header.api_version}, "
                f"correlation id {header.correlation_id}, client id {header.client_id!r})"
            )
        versions = self._versions.get(header.api_key)
        if versions is None or not versions[0] <= header.api_version <= versions[1]:
            return UnsupportedVersion(header, size, versions)
        assert body_start is not None  # a supported version is within the codec's range
        if self.decode_in_place_limit is not None and size > self.decode_in_place_limit:
            return UndecodedRequest(header, frame, body_start)
        return Request(header, _decode_body(header, frame[body_start:]), size)
