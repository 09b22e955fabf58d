"""An asynchronous connection from this broker to another one (Kafka's NetworkClient, as a follower's
fetcher and other broker-to-broker senders use it).

``PeerConnection.connect`` opens a TCP stream and exchanges ApiVersions once; ``api_versions`` then
answers which version of an API both sides speak (the highest common one). ``request`` sends one
request and returns its decoded response: requests go one at a time (a lock queues concurrent
callers), each under a fresh correlation id that the response must echo, and the response header
version follows from the api key and version (ApiVersions' is always v0).

Every failure surfaces as ``PeerError``: refused or timed-out connections, a stream that closes or
breaks, a frame whose size is negative or above ``max_frame_bytes``, a response that does not decode
or answers another request. After a failure the connection is unusable (``broken``), as it is after
a request was cancelled or timed out between sending and receiving: its response could still
arrive and would be taken for the next request's.
"""
from __future__ import annotations

import itertools
import struct

import trio

from trafka.wire.messages import ApiVersionsRequest, ApiVersionsResponse
from trafka.wire.primitives import DecodeError, EncodeError, Message, Writer
from trafka.wire.protocol import (
    RESPONSES,
    ApiKey,
    RequestHeader,
    decode_response_header,
    encode_request_header,
    response_header_version,
)
from trafka.wire.errors import ErrorCode

__all__ = ["PeerConnection", "PeerError", "API_VERSIONS_VERSION", "DEFAULT_MAX_FRAME_BYTES"]

_SIZE = struct.Struct(">i")
#: ApiVersions v3 (flexible, carries the client's software name): every broker since Kafka 2.4 serves it.
API_VERSIONS_VERSION = 3
#: The largest response frame accepted: Kafka's socket.request.max.bytes (100 MiB) and some room.
DEFAULT_MAX_FRAME_BYTES = 128 * 1024 * 1024
_RECEIVE_CHUNK = 256 * 1024
SOFTWARE_NAME = "trafka"
SOFTWARE_VERSION = "0"


class PeerError(Exception):
    """The peer could not be reached, the connection broke, or it sent something malformed."""


class PeerConnection:
    """One connection to a broker; see the module docstring. Create with :meth:`connect`."""

    def __init__(self, stream: trio.abc.Stream, address: str, *, client_id: str,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self.stream = stream
        self.address = address
        self.client_id = client_id
        self.max_frame_bytes = max_frame_bytes
        #: The broker's version range of each API it serves, from the ApiVersions exchange.
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self.broken = False
        self._correlation_ids = itertools.count(1)
        self._lock = trio.StrictFIFOLock()
        self._buffer = bytearray()

    def __repr__(self) -> str:
        return f"PeerConnection({self.address})"

    @classmethod
    async def connect(cls, host: str, port: int, *, client_id: str, connect_timeout_s: float,
                      max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> PeerConnection:
        """Connect and learn the broker's API versions, both within ``connect_timeout_s``."""
        address = f"{host}:{port}"
        try:
            with trio.fail_after(connect_timeout_s):
                stream = await trio.open_tcp_stream(host, port)
        except trio.TooSlowError:
            raise PeerError(f"{address}: no connection within {connect_timeout_s} s") from None
        except OSError as exc:
            raise PeerError(f"{address}: cannot connect: {exc.strerror or exc}") from None
        connection = cls(stream, address, client_id=client_id, max_frame_bytes=max_frame_bytes)
        try:
            await connection._exchange_api_versions(connect_timeout_s)
        except BaseException:
            await connection.aclose()
            raise
        return connection

    async def _exchange_api_versions(self, timeout_s: float) -> None:
        request = ApiVersionsRequest(client_software_name=SOFTWARE_NAME, client_software_version=SOFTWARE_VERSION)
        response = await self.request(request, API_VERSIONS_VERSION, timeout_s=timeout_s)
        assert isinstance(response, ApiVersionsResponse)
        if response.error_code != ErrorCode.NONE:
            raise PeerError(f"{self.address}: ApiVersions v{API_VERSIONS_VERSION} failed: "
                            f"{_error_name(response.error_code)}")
        self.broker_versions = {v.api_key: (v.min_version, v.max_version) for v in response.api_keys}

    def api_versions(self, api_key: int, *, minimum: int | None = None) -> int:
        """The highest version of ``api_key`` both this codec and the broker speak, at least
        ``minimum`` (default: the codec's lowest). ``PeerError`` when there is none."""
        ours = RESPONSES[api_key]
        lowest = max(ours.MIN_VERSION, minimum if minimum is not None else ours.MIN_VERSION)
        theirs = self.broker_versions.get(api_key)
        name = _api_name(api_key)
        if theirs is None:
            raise PeerError(f"{self.address} does not serve {name}")
        version = min(ours.MAX_VERSION, theirs[1])
        if version < max(lowest, theirs[0]):
            raise PeerError(
                f"{self.address} serves {name} versions {theirs[0]}-{theirs[1]}, "
                f"this broker needs one of {lowest}-{ours.MAX_VERSION}"
            )
        return version

    async def request(self, message: Message, version: int, *, timeout_s: float | None = None) -> Message:
        """Send ``message`` at ``version`` and return the decoded response (within ``timeout_s``)."""
        async with self._lock:
            if self.broken:
                raise PeerError(f"{self.address}: the connection is broken")
            api_key = message.API_KEY
            assert api_key is not None
            correlation_id = next(self._correlation_ids)
            frame = self._encode(message, version, correlation_id)
            completed = False
            try:
                with trio.fail_after(timeout_s if timeout_s is not None else float("inf")):
                    await self.stream.send_all(frame)
                    response_frame = await self._receive_frame()
                completed = True
            except trio.TooSlowError:
                raise PeerError(f"{self.address}: no response to {_api_name(api_key)} within {timeout_s} s") from None
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                raise PeerError(f"{self.address}: connection lost: {exc}") from None
            finally:
                if not completed:
                    self.broken = True
            return self._decode(response_frame, api_key, version, correlation_id)

    def _encode(self, message: Message, version: int, correlation_id: int) -> bytes:
        writer = Writer()
        encode_request_header(writer, RequestHeader(message.API_KEY, version, correlation_id, self.client_id))
        try:
            message.encode_into(writer, version)
        except EncodeError as exc:  # a bug in the caller, not the peer: say so plainly
            raise ValueError(f"cannot send to {self.address}: {exc}") from exc
        body = writer.to_bytes()
        return _SIZE.pack(len(body)) + body

    def _decode(self, frame: bytearray, api_key: int, version: int, correlation_id: int) -> Message:
        view = memoryview(frame)
        try:
            received, position = decode_response_header(view, response_header_version(api_key, version))
            if received != correlation_id:
                raise DecodeError(f"correlation id {received}, expected {correlation_id}")
            return RESPONSES[api_key].decode(view[position:], version)
        except DecodeError as exc:
            self.broken = True
            raise PeerError(f"{self.address}: malformed {_api_name(api_key)} v{version} response: {exc}") from None

    async def _receive_frame(self) -> bytearray:
        size = _SIZE.unpack(await self._receive_exactly(4))[0]
        if size < 0 or size > self.max_frame_bytes:
            raise PeerError(f"{self.address}: response frame of {size} bytes (at most {self.max_frame_bytes})")
        return await self._receive_exactly(size)

    async def _receive_exactly(self, count: int) -> bytearray:
        buffer = self._buffer
        while len(buffer) < count:
            data = await self.stream.receive_some(_RECEIVE_CHUNK)
            if not data:
                raise PeerError(f"{self.address} closed the connection")
            buffer += data
        if len(buffer) == count:
            self._buffer = bytearray()
            return buffer
        taken = buffer[:count]
        del buffer[:count]
        return taken

    async def aclose(self) -> None:
        """Close the stream (at once, also when cancelled)."""
        self.broken = True
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(self.stream)


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api {api_key}"


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"
