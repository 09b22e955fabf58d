"""Fixtures for broker tests: a real broker served in-process on a free port, and a minimal Kafka
client that speaks to it over a real TCP socket with the wire codec.

``broker`` starts :func:`trafka.broker.server.serve` in the test's nursery with ``tmp_path`` as its data
directory and yields a :class:`RunningBroker`; ``await running.client()`` opens a connection, and
``await client.request(message, version)`` sends one request and returns the decoded response.
``broker_factory(**properties)`` starts one with Kafka property overrides.
"""
from __future__ import annotations

import itertools
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import trio

from trafka.broker.config import BrokerConfig
from trafka.broker.server import Server
from trafka.wire.primitives import Message, Writer
from trafka.wire.protocol import (
    RESPONSES,
    RequestHeader,
    decode_response_header,
    encode_request_header,
    response_header_version,
)

if TYPE_CHECKING:
    from trafka.broker.broker import Broker

_SIZE = struct.Struct(">i")


class KafkaClient:
    """One connection to the broker; requests go one at a time and each waits for its response."""

    def __init__(self, stream: trio.SocketStream, client_id: str = "trafka-tests") -> None:
        self.stream = stream
        self.client_id = client_id
        self._correlation_ids = itertools.count(1)
        self._buffer = bytearray()

    async def request(self, message: Message, version: int) -> Message:
        api_key = message.API_KEY
        correlation_id = next(self._correlation_ids)
        writer = Writer()
        encode_request_header(writer, RequestHeader(api_key, version, correlation_id, self.client_id))
        message.encode_into(writer, version)
        body = writer.to_bytes()
        await self.stream.send_all(_SIZE.pack(len(body)) + body)
        frame = await self._receive_frame()
        received_id, position = decode_response_header(memoryview(frame), response_header_version(api_key, version))
        assert received_id == correlation_id, f"correlation id {received_id}, expected {correlation_id}"
        return RESPONSES[api_key].decode(memoryview(frame)[position:], version)

    async def _receive_frame(self) -> bytes:
        while True:
            if len(self._buffer) >= 4:
                (size,) = _SIZE.unpack_from(self._buffer)
                if len(self._buffer) >= 4 + size:
                    frame = bytes(self._buffer[4 : 4 + size])
                    del self._buffer[: 4 + size]
                    return frame
            data = await self.stream.receive_some(65536)
            if not data:
                raise EOFError("the broker closed the connection")
            self._buffer += data

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
