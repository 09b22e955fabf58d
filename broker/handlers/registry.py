"""The handler registry: which API keys and versions this broker serves, and who serves them.

Each handler module registers its coroutine with :func:`handles`, next to its code, naming the versions
it serves. ApiVersions answers from this registry, so what the broker advertises is exactly what it
has handlers for.

Handler modules are imported when their API is first requested, so that a broker starts without
loading what it may never serve (the group protocols, the config tables of the admin APIs). Until then
the registry knows each API from its :meth:`Registry.declare`; :func:`handles` checks that a module
registers exactly the versions declared for it.
"""
from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from wire.protocol import ApiKey

if TYPE_CHECKING:
    from broker.broker import Broker
    from wire.connection import RequestHeader


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request besides its body."""

    broker: Broker
    header: RequestHeader
    peer: str
    connection_id: int

    @property
    def api_version(self) -> int:
        return self.header.api_version


Handler = Callable[[RequestContext, Any], Awaitable[Any]]


@dataclass(slots=True)
class RegisteredHandler:
    api_key: ApiKey
    min_version: int
    max_version: int
    # Versions advertised by ApiVersions; wider than the served range only where Kafka does the same
    # (Produce v0-2 are advertised for old librdkafka and rejected when used).
    advertised_min_version: int
    #: The module that registers the coroutine with :func:`handles`.
    module: str
    coroutine: Handler | None = None

    @property
    def handle(self) -> Handler:
        """The handler's coroutine function; its module is imported on first use."""
        return self.coroutine if self.coroutine is not None else self.load()

    def load(self) -> Handler:
        """Import the handler's module, which registers its coroutine with :func:`handles`."""
        importlib.import_module(self.module)
        if self.coroutine is None:
            raise LookupError(f"{self.module} does not register a handler for {self.api_key.name}")
        return self.coroutine


class Registry:
    def __init__(self) -> None:
        self._handlers: dict[int, RegisteredHandler] = {}

    def declare(
        self,
        api_key: ApiKey,
        module: str,
        min_version: int,
        max_version: int,
        *,
        advertised_min_version: int | None = None,
    ) -> None:
        """Name the module that serves ``api_key`` and the versions it serves, without importing it."""
        if api_key in self._handlers:
            raise ValueError(f"{api_key.name} has two handlers")
        self._handlers[api_key] = RegisteredHandler(
            api_key=api_key,
            min_version=min_version,
            max_version=max_version,
            advertised_min_version=min_version if advertised_min_version is None else advertised_min_version,
            module=module,
        )

    def register(
        self,
        api_key: ApiKey,
        min_version: int,
        max_version: int,
        advertised_min_version: int,
        module: str,
        coroutine: Handler,
    ) -> None:
        """Attach a handler module's coroutine to its declaration, which must match it exactly."""
        declared = self._handlers.get(api_key)
        if declared is None:
            raise ValueError(f"{api_key.name} is served by {module} but not declared")
        registered = (module, min_version, max_version, advertised_min_version)
        expected = (declared.module, declared.min_version, declared.max_version, declared.advertised_min_version)
        if registered != expected:
            raise ValueError(
                f"{api_key.name}: {module} registers versions {min_version}-{max_version} "
                f"(advertised from {advertised_min_version}), declared as {expected[1]}-{expected[2]} "
                f"(advertised from {expected[3]}) in {expected[0]}"
            )
        if declared.coroutine is not None and declared.coroutine is not coroutine:
            raise ValueError(f"{api_key.name} has two handlers")
        declared.coroutine = coroutine

    def load_all(self) -> None:
        """Import every handler module now (tests use this to check declarations against modules)."""
        for handler in self._handlers.values():
            handler.load()

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
            api_key,
            min_version,
            max_version,
            min_version if advertised_min_version is None else advertised_min_version,
            fn.__module__,
            fn,
        )
        return fn

    return register
