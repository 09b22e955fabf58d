"""A small synchronous Kafka client for the command-line tools: one request at a time, over trafka's own wire
codec, to any Kafka-compatible broker.

It bootstraps from ``host:port`` (or the first reachable of ``host:port,host:port``), learns the cluster from
Metadata, and sends each request where it belongs: partition requests to the partition's leader, group
requests to the group's coordinator. Versions are ones every broker since Kafka 2.8 serves, trafka and
Apache Kafka 4 alike.

With a :class:`~trafka.broker.tools.client_security.ClientSecurity` (``--command-config``) each connection
speaks its listener's security protocol: TLS first (SSL, SASL_SSL; the ``ssl`` module over the blocking
socket), then SaslHandshake v1 and SaslAuthenticate v2 carrying the mechanism's exchange
(trafka.broker.security.sasl.client), as Kafka's clients do. A session whose lifetime the broker bounds
(KIP-368, ``connections.max.reauth.ms``) is authenticated again on the same connection before it ends.
"""
from __future__ import annotations

import socket
import time
from types import TracebackType
from typing import TYPE_CHECKING

from trafka.wire.client import NEED_DATA, ClientConnection, ProtocolError, Response
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import FindCoordinatorRequest, MetadataRequest, MetadataResponse
from trafka.wire.primitives import Message

if TYPE_CHECKING:
    from trafka.broker.tools.client_security import ClientSecurity

CLIENT_ID = "trafka-cli"
METADATA_VERSION = 10
FIND_COORDINATOR_VERSION = 3
SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 2
#: Re-authenticate once this share of a session's lifetime has passed (Kafka's clients: 85 % to 95 %).
REAUTHENTICATE_AT = 0.85


class ClientError(RuntimeError):
    """The broker could not be reached, or answered with an error (the message names it)."""


def check(code: int, what: str, message: str | None = None) -> None:
    """Raise ClientError for a Kafka error code other than NONE, naming the error."""
    if code != ErrorCode.NONE:
        try:
            name = ErrorCode(code).name
        except ValueError:
            name = f"error {code}"
        raise ClientError(f"{what}: {name}" + (f": {message}" if message else ""))


class Connection:
    def __init__(self, host: str, port: int, timeout: float, security: ClientSecurity | None = None) -> None:
        self.address = f"{host}:{port}"
        self._security = security
        self._reauthenticate_at: float | None = None
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise ClientError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None
        self._protocol = ClientConnection(client_id=CLIENT_ID)
        try:
            if security is not None and security.uses_tls:
                self._start_tls(host, security)
            if security is not None and security.uses_sasl:
                self._authenticate()
        except BaseException:
            self.sock.close()
            raise

    def request(self, message: Message, version: int) -> Message:
        if self._reauthenticate_at is not None and time.monotonic() >= self._reauthenticate_at:
            self._authenticate()
        return self._call(message, version)

    def _call(self, message: Message, version: int) -> Message:
        try:
            self.sock.sendall(self._protocol.send_request(message, version, expect_response=True))
            return self._receive().body
        except OSError as exc:
            raise ClientError(f"{self.address}: {exc.strerror or exc}{self._hint()}") from None
        except ProtocolError as exc:
            raise ClientError(f"{self.address}: {exc}{self._hint()}") from None

    def _receive(self) -> Response:
        protocol = self._protocol
        while (event := protocol.next_response()) is NEED_DATA:
            with protocol.receive_buffer() as room:
                count = self.sock.recv_into(room)
            if not count:
                raise ClientError(f"{self.address} closed the connection{self._hint()}")
            protocol.received(count)
        assert isinstance(event, Response)
        return event

    def _hint(self) -> str:
        """What a connection closed at once most likely means: security settings that do not match the
        listener's (Kafka's brokers close such connections without a word)."""
        if self._security is None or self._security.protocol == "PLAINTEXT":
            return (" (is it a listener with SSL or SASL? then give the client's settings with --command-config "
                    "FILE: security.protocol, sasl.mechanism, sasl.jaas.config, ssl.truststore.location)")
        return f" (is the listener {self._security.protocol}, as {self._security.source} says?)"

    def _start_tls(self, host: str, security: ClientSecurity) -> None:
        import ssl

        context = security.ssl_context()
        try:
            self.sock = context.wrap_socket(self.sock, server_hostname=host)
        except ssl.SSLCertVerificationError as exc:
            raise ClientError(f"{self.address}: the broker's certificate is not trusted: {exc.verify_message} "
                              f"(ssl.truststore.location names the CA to trust; "
                              f"ssl.endpoint.identification.algorithm= turns off the host name check)") from None
        except (ssl.SSLError, OSError) as exc:
            reason = getattr(exc, "reason", None) or exc.strerror or exc
            raise ClientError(f"{self.address}: the TLS handshake failed: {reason} (is the listener SSL or "
                              f"SASL_SSL, as security.protocol={security.protocol} says?)") from None

    def _authenticate(self) -> None:
        """SaslHandshake, then SaslAuthenticate until the mechanism's exchange is complete."""
        from trafka.broker.security.sasl.client import SaslClientError
        from trafka.wire.messages import SaslAuthenticateRequest, SaslHandshakeRequest

        security = self._security
        assert security is not None
        exchange = security.sasl_exchange()
        who = f"authenticating as {security.principal}"
        handshake = self._call(SaslHandshakeRequest(mechanism=security.mechanism), SASL_HANDSHAKE_VERSION)
        if handshake.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
            raise ClientError(f"{self.address}: {who}: UNSUPPORTED_SASL_MECHANISM: the listener enables "
                              f"{', '.join(handshake.mechanisms) or 'no mechanism'}, not {security.mechanism}")
        check(handshake.error_code, f"{self.address}: {who}")
        token = exchange.first()
        lifetime_ms = 0
        while True:
            response = self._call(SaslAuthenticateRequest(auth_bytes=token), SASL_AUTHENTICATE_VERSION)
            check(response.error_code, f"{self.address}: {who}", response.error_message)
            lifetime_ms = response.session_lifetime_ms
            try:
                token = exchange.respond(bytes(response.auth_bytes))
            except (SaslClientError, ValueError) as exc:  # (ValueError: a server message that does not parse)
                raise ClientError(f"{self.address}: {who}: {exc}") from None
            if exchange.complete:
                break
        self._reauthenticate_at = (time.monotonic() + lifetime_ms * REAUTHENTICATE_AT / 1000
                                   if lifetime_ms > 0 else None)

    def close(self) -> None:
        self.sock.close()


class AdminClient:
    """Connections to a cluster's brokers, opened as requests need them."""

    def __init__(self, bootstrap: str, *, timeout: float = 30.0, security: ClientSecurity | None = None) -> None:
        addresses = []
        for item in bootstrap.split(","):
            host, _, port = item.strip().rpartition(":")
            if not host or not port.isdigit():
                raise ClientError(f"--bootstrap-server {bootstrap!r}: expected host:port")
            addresses.append((host.strip("[]"), int(port)))
        self.timeout = timeout
        self.security = security
        failure: ClientError | None = None
        for host, port in addresses:
            try:
                self._bootstrap = Connection(host, port, timeout, security)
                break
            except ClientError as exc:
                failure = exc
        else:
            assert failure is not None
            raise failure
        self._brokers: dict[int, tuple[str, int]] = {}
        self._connections: dict[int, Connection] = {}

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._bootstrap.close()
        for connection in self._connections.values():
            connection.close()

    def request(self, message: Message, version: int, *, node_id: int | None = None) -> Message:
        """Send to the bootstrap broker, or to broker ``node_id``."""
        return self._connection(node_id).request(message, version)

    def metadata(self, topics: list[str] | None = None, *, auto_create: bool = False) -> MetadataResponse:
        """Metadata of ``topics`` (every topic when None); missing topics are created only with
        ``auto_create``, and only where the broker creates topics on first use."""
        wanted = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=name) for name in topics]
        response = self.request(MetadataRequest(topics=wanted, allow_auto_topic_creation=auto_create), METADATA_VERSION)
        assert isinstance(response, MetadataResponse)
        self._brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        return response

    def coordinator(self, group_id: str) -> int:
        """The node id of ``group_id``'s coordinator."""
        response = self.request(FindCoordinatorRequest(key=group_id, key_type=0), FIND_COORDINATOR_VERSION)
        check(response.error_code, f"finding the coordinator of group {group_id}", response.error_message)
        self._brokers[response.node_id] = (response.host, response.port)
        return response.node_id

    def _connection(self, node_id: int | None) -> Connection:
        if node_id is None:
            return self._bootstrap
        if node_id not in self._connections:
            if node_id not in self._brokers:
                self.metadata([])
            if node_id not in self._brokers:
                raise ClientError(f"broker {node_id} is not in the cluster's metadata")
            host, port = self._brokers[node_id]
            self._connections[node_id] = Connection(host, port, self.timeout, self.security)
        return self._connections[node_id]
