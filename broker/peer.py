"""An asynchronous connection from this broker to another one (Kafka's NetworkClient, as a follower's
fetcher, the transaction marker channel and other broker-to-broker senders use it).

``PeerConnection.connect`` opens a TCP stream (in TLS through the broker's own transport,
``trafka.broker.security.tls_transport``, and authenticated with SASL, when the inter-broker listener asks
for it: ``trafka.broker.security.inter_broker``) and exchanges ApiVersions once;
``api_versions`` then answers which version of an API both sides speak (the highest common one). ``request`` sends one
request and returns its decoded response: requests go one at a time (a lock queues concurrent
callers). The framing is ``wire.client``'s: correlation ids, header versions, matching the response
to its request; bytes are read straight into the buffer the response will use, so a Fetch
response's records reach the log with one copy from the socket.

Every failure surfaces as ``PeerError``: refused or timed-out connections, a stream that closes or
breaks, a frame whose size is negative or above ``max_frame_bytes``, a response that does not decode
or answers another request. After a failure the connection is unusable (``broken``), as it is after
a request was cancelled or timed out between sending and receiving: its response could still
arrive and would be taken for the next request's.
"""
from __future__ import annotations

import ssl
from typing import TYPE_CHECKING

import trio

from trafka.wire.client import NEED_DATA, ClientConnection, ProtocolError, Response
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from trafka.wire.primitives import EncodeError, Message
from trafka.wire.protocol import RESPONSES, ApiKey

if TYPE_CHECKING:
    from trafka.broker.security.inter_broker import PeerSecurity

__all__ = ["PeerConnection", "PeerError", "API_VERSIONS_VERSION", "DEFAULT_MAX_FRAME_BYTES"]

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
        self._protocol = ClientConnection(client_id=client_id, max_frame_size=max_frame_bytes)
        #: The broker's version range of each API it serves, from the ApiVersions exchange.
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self.broken = False
        self._lock = trio.StrictFIFOLock()
        # A socket, or the broker's TLS transport, is read straight into the protocol's buffer; any other
        # stream through receive_some.
        if isinstance(stream, trio.SocketStream):
            self._receive_into = stream.socket.recv_into
        else:
            self._receive_into = getattr(stream, "receive_into", None)

    def __repr__(self) -> str:
        return f"PeerConnection({self.address})"

    @property
    def max_frame_bytes(self) -> int:
        """The largest response frame accepted."""
        return self._protocol.max_frame_size

    @max_frame_bytes.setter
    def max_frame_bytes(self, value: int) -> None:
        self._protocol.max_frame_size = value

    @classmethod
    async def connect(cls, host: str, port: int, *, client_id: str, connect_timeout_s: float,
                      max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                      security: PeerSecurity | None = None) -> PeerConnection:
        """Connect (with TLS and SASL as ``security`` says), and learn the broker's API versions, all
        within ``connect_timeout_s``."""
        address = f"{host}:{port}"
        try:
            with trio.fail_after(connect_timeout_s):
                stream: trio.abc.Stream = await trio.open_tcp_stream(host, port)
                if security is not None and security.tls is not None:
                    from trafka.broker.security.tls_transport import TlsClosed, TlsTransport

                    stream = TlsTransport(stream, security.tls, server_hostname=host)
                    try:
                        await stream.do_handshake()
                    except (ssl.SSLError, TlsClosed) as exc:
                        await stream.aclose()
                        raise PeerError(f"{address}: TLS handshake failed: {exc}") from None
        except trio.TooSlowError:
            raise PeerError(f"{address}: no connection within {connect_timeout_s} s") from None
        except OSError as exc:
            raise PeerError(f"{address}: cannot connect: {exc.strerror or exc}") from None
        connection = cls(stream, address, client_id=client_id, max_frame_bytes=max_frame_bytes)
        try:
            await connection._exchange_api_versions(connect_timeout_s)
            if security is not None and security.sasl_mechanism is not None:
                await connection._authenticate(security, connect_timeout_s)
        except BaseException:
            await connection.aclose()
            raise
        return connection

    async def _authenticate(self, security: PeerSecurity, timeout_s: float) -> None:
        """SaslHandshake, then SaslAuthenticate until the exchange completes (PeerError if refused)."""
        from trafka.broker.security.sasl.client import SaslClientError, client_exchange

        mechanism = security.sasl_mechanism
        handshake = await self.request(SaslHandshakeRequest(mechanism=mechanism), 1, timeout_s=timeout_s)
        assert isinstance(handshake, SaslHandshakeResponse)
        if handshake.error_code != ErrorCode.NONE:
            raise PeerError(f"{self.address}: SASL mechanism {mechanism} refused "
                            f"({_error_name(handshake.error_code)}; enabled: {', '.join(handshake.mechanisms)})")
        exchange = client_exchange(mechanism, security.username, security.password)
        token = exchange.first()
        version = self.api_versions(ApiKey.SASL_AUTHENTICATE)
        while True:
            response = await self.request(SaslAuthenticateRequest(auth_bytes=token), version, timeout_s=timeout_s)
            assert isinstance(response, SaslAuthenticateResponse)
            if response.error_code != ErrorCode.NONE:
                raise PeerError(f"{self.address}: SASL {mechanism} authentication as {security.username} failed: "
                                f"{_error_name(response.error_code)} {response.error_message or ''}".rstrip())
            try:
                # SCRAM's PBKDF2 runs in the answer to the server's first message: off the event loop.
                token = await trio.to_thread.run_sync(exchange.respond, bytes(response.auth_bytes))
            except SaslClientError as exc:
                raise PeerError(f"{self.address}: SASL {mechanism}: {exc}") from None
            if exchange.complete:
                return

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
        """Send ``message`` at ``version`` and return the decoded response (within ``timeout_s``).

        Every request awaits its response here, so an acks=0 Produce (which gets none) is not for it."""
        async with self._lock:
            if self.broken:
                raise PeerError(f"{self.address}: the connection is broken")
            api_key = message.API_KEY
            assert api_key is not None
            try:
                frame = self._protocol.send_request(message, version, expect_response=True)
            except EncodeError as exc:  # a bug in the caller, not the peer: say so plainly
                raise ValueError(f"cannot send to {self.address}: {exc}") from exc
            completed = False
            try:
                with trio.fail_after(timeout_s if timeout_s is not None else float("inf")):
                    await self.stream.send_all(frame)
                    response = await self._receive()
                completed = True
            except trio.TooSlowError:
                raise PeerError(f"{self.address}: no response to {_api_name(api_key)} within {timeout_s} s") from None
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                raise PeerError(f"{self.address}: connection lost: {exc}") from None
            except ProtocolError as exc:
                raise PeerError(f"{self.address}: {exc}") from None
            finally:
                if not completed:
                    self.broken = True
            return response.body

    async def _receive(self) -> Response:
        protocol = self._protocol
        receive_into = self._receive_into
        while (event := protocol.next_response()) is NEED_DATA:
            if receive_into is not None:
                with protocol.receive_buffer() as room:
                    count = await receive_into(room)
                if not count:
                    raise PeerError(f"{self.address} closed the connection")
                protocol.received(count)
            else:
                data = await self.stream.receive_some(_RECEIVE_CHUNK)
                if not data:
                    raise PeerError(f"{self.address} closed the connection")
                protocol.receive_data(data)
        assert isinstance(event, Response)
        return event

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
