"""A small synchronous Kafka client for the command-line tools: one request at a time, over trafka's own wire
codec, to any Kafka-compatible broker.

It bootstraps from ``host:port``, learns the cluster from Metadata, and sends each request where it
belongs: partition requests to the partition's leader, group requests to the group's coordinator.
Versions are ones every broker since Kafka 2.8 serves, trafka and Apache Kafka 4 alike.
"""
from __future__ import annotations

import socket
from types import TracebackType

from trafka.wire.client import NEED_DATA, ClientConnection, ProtocolError, Response
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import FindCoordinatorRequest, MetadataRequest, MetadataResponse
from trafka.wire.primitives import Message

CLIENT_ID = "trafka-cli"
METADATA_VERSION = 10
FIND_COORDINATOR_VERSION = 3


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
    def __init__(self, host: str, port: int, timeout: float) -> None:
        try:
            self.sock = socket.create_connection((host, port), timeout=timeout)
        except OSError as exc:
            raise ClientError(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None
        self.address = f"{host}:{port}"
        self._protocol = ClientConnection(client_id=CLIENT_ID)

    def request(self, message: Message, version: int) -> Message:
        try:
            self.sock.sendall(self._protocol.send_request(message, version, expect_response=True))
            return self._receive().body
        except OSError as exc:
            raise ClientError(f"{self.address}: {exc.strerror or exc}") from None
        except ProtocolError as exc:
            raise ClientError(f"{self.address}: {exc}") from None

    def _receive(self) -> Response:
        protocol = self._protocol
        while (event := protocol.next_response()) is NEED_DATA:
            with protocol.receive_buffer() as room:
                count = self.sock.recv_into(room)
            if not count:
                raise ClientError(f"{self.address} closed the connection")
            protocol.received(count)
        assert isinstance(event, Response)
        return event

    def close(self) -> None:
        self.sock.close()


class AdminClient:
    """Connections to a cluster's brokers, opened as requests need them."""

    def __init__(self, bootstrap: str, *, timeout: float = 30.0) -> None:
        host, _, port = bootstrap.rpartition(":")
        if not host or not port.isdigit():
            raise ClientError(f"--bootstrap-server {bootstrap!r}: expected host:port")
        self.timeout = timeout
        self._bootstrap = Connection(host.strip("[]"), int(port), timeout)
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
            self._connections[node_id] = Connection(host, port, self.timeout)
        return self._connections[node_id]
