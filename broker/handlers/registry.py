"""The handler registry: which API keys and versions this broker serves, and who serves them.

Each handler module registers its coroutine with :func:`handles`, next to its code, naming the versions
it serves. ApiVersions answers from this registry, so what the broker advertises is exactly what it
has handlers for.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trafka.wire.protocol import ApiKey

if TYPE_CHECKING:
    from trafka.broker.broker import Broker
    from trafka.broker.security.authentication import ConnectionSession
    from trafka.wire.connection import RequestHeader


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request besides its body."""

    broker: Broker
    header: RequestHeader
    peer: str
    connection_id: int
    #: The name of the listener the request came in on (Metadata answers with its addresses).
    listener: str = "PLAINTEXT"
    #: The connection's authentication (the principal; the SASL exchange under way).
    session: ConnectionSession | None = None

    @property
    def api_version(self) -> int:
        return self.header.api_version


Handler = Callable[[RequestContext, Any], Awaitable[Any]]


class CloseConnection(Exception):
    """Raised by a handler whose request gets no response and whose failure the client must still
    learn of: the connection is closed, with the reason logged (Produce with acks=0, as Kafka does)."""


@dataclass(frozen=True, slots=True)
class RegisteredHandler:
    api_key: ApiKey
    min_version: int
    max_version: int
    # Versions advertised by ApiVersions; wider than the served range only where Kafka does the same
    # (Produce v0-2 are advertised for old librdkafka and rejected when used).
    advertised_min_version: int
    handle: Handler


class Registry:
    def __init__(self) -> None:
        self._handlers: dict[int, RegisteredHandler] = {}

    def register(self, handler: RegisteredHandler) -> None:
        if handler.api_key in self._handlers:
            raise ValueError(f"{handler.api_key.name} has two handlers")
        self._handlers[handler.api_key] = handler

    def get(self, api_key: int) -> RegisteredHandler | None:
        return self._handlers.get(api_key)

    def __iter__(self):
        return iter(sorted(self._handlers.values(), key=lambda h: h.api_key))

    def served_versions(self) -> dict[int, tuple[int, int]]:
        return {h.api_key: (h.min_version, h.max_version) for h in self._handlers.values()}


REGISTRY = Registry()


def handles(
    api_key: ApiKey, min_version: int, max_version: int, *, advertised_min_version: int | None = None
) -> Callable[[Handler], Handler]:
    """Register the decorated coroutine as the handler of ``api_key`` for the given versions."""

    def register(fn: Handler) -> Handler:
        REGISTRY.register(
            RegisteredHandler(
                api_key=api_key,
                min_version=min_version,
                max_version=max_version,
                advertised_min_version=min_version if advertised_min_version is None else advertised_min_version,
                handle=fn,
            )
        )
        return fn

    return register
