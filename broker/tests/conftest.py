"""Fixtures for broker tests: a real broker served in-process on a free port, and a minimal Kafka
client that speaks to it over a real TCP socket with the wire codec.

``broker`` starts :func:`trafka.broker.server.serve` in the test's nursery with ``tmp_path`` as its data
directory and yields a :class:`RunningBroker`; ``await running.client()`` opens a connection, and
``await client.request(message, version)`` sends one request and returns the decoded response.
``broker_factory(**properties)`` starts one with Kafka property overrides.
"""
from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio

from trafka.broker.config import BrokerConfig
from trafka.broker.server import Server
from trafka.wire.client import NEED_DATA, ClientConnection, Response
from trafka.wire.primitives import Message

if TYPE_CHECKING:
    from trafka.broker.broker import Broker


class KafkaClient:
    """One connection to the broker. ``request`` sends one request and waits for its response; ``send``
    and ``receive`` split the two, for pipelining, for an acks=0 Produce (which gets no response), and
    with ``protocol.send_raw`` for frames the codec would not encode."""

    def __init__(self, stream: trio.SocketStream, client_id: str = "trafka-tests") -> None:
        self.stream = stream
        self.protocol = ClientConnection(client_id=client_id)

    @property
    def client_id(self) -> str | None:
        """The client id of the requests sent from now on."""
        return self.protocol.client_id

    @client_id.setter
    def client_id(self, value: str | None) -> None:
        self.protocol.client_id = value

    async def request(self, message: Message, version: int) -> Message:
        await self.send(message, version, expect_response=True)
        return (await self.receive()).body

    async def send(self, message: Message, version: int, *, expect_response: bool | None = None) -> None:
        """Send without waiting; a Produce with acks=0 awaits no response unless ``expect_response``."""
        await self.stream.send_all(self.protocol.send_request(message, version, expect_response=expect_response))

    async def receive(self) -> Response:
        """The response to the oldest request sent that awaits one."""
        if not self.protocol.awaiting:
            raise RuntimeError("no request awaits a response")
        while (event := self.protocol.next_response()) is NEED_DATA:
            data = await self.stream.receive_some(65536)
            if not data:
                raise EOFError("the broker closed the connection")
            self.protocol.receive_data(data)
        assert isinstance(event, Response)
        return event

    async def aclose(self) -> None:
        await self.stream.aclose()


@dataclass
class RunningBroker:
    server: Server
    host: str
    port: int
    _clients: list[KafkaClient] = field(default_factory=list)

    @property
    def broker(self) -> Broker:
        """The broker's state (topics, logs, config), for checking what a request changed."""
        return self.server.broker

    async def client(self) -> KafkaClient:
        client = KafkaClient(await trio.open_tcp_stream(self.host, self.port))
        self._clients.append(client)
        return client

    async def close(self) -> None:
        for client in self._clients:
            await client.aclose()
        self.server.request_shutdown()
        await self.server.stopped.wait()


async def start_broker(
    nursery: trio.Nursery, data_dir: Path, properties: dict[str, str] | None = None
) -> RunningBroker:
    """Serve a broker in ``nursery`` on a free port of 127.0.0.1, keeping its data in ``data_dir``."""
    config = BrokerConfig.from_properties(dict(properties or {}))
    config.host = "127.0.0.1"
    config.port = 0
    config.data_dir = data_dir
    server = Server(config)
    addresses = await nursery.start(server.run)
    host, port = addresses[0][:2]
    return RunningBroker(server, host, port)


@pytest.fixture
async def broker_factory(
    nursery: trio.Nursery, tmp_path: Path
) -> AsyncIterator[Callable[..., Awaitable[RunningBroker]]]:
    """``await broker_factory(**{"delete.topic.enable": "false"})``: a broker with property overrides."""
    started: list[RunningBroker] = []

    async def start(properties: dict[str, str] | None = None, **kwargs: str) -> RunningBroker:
        data_dir = tmp_path / f"broker{len(started)}"
        running = await start_broker(nursery, data_dir, {**(properties or {}), **kwargs})
        started.append(running)
        return running

    yield start
    for running in started:
        await running.close()


@pytest.fixture
async def broker(broker_factory: Callable[..., Awaitable[RunningBroker]]) -> RunningBroker:
    """A broker with default settings."""
    return await broker_factory()


@pytest.fixture
async def client(broker: RunningBroker) -> KafkaClient:
    """A connection to ``broker``."""
    return await broker.client()
