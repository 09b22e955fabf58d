"""The handler registry: which API keys and versions this broker serves, and who serves them.

Each handler module registers its coroutine with :func:`handles`, next to its code, naming the versions
it serves. ApiVersions answers from this registry, so what the broker advertises is exactly what it
has handlers for.
"""
from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trafka.broker.security.acls import client_host
from trafka.broker.security.authentication import ANONYMOUS
from trafka.broker.security.authorizer import (
    CLUSTER_NAME,
    AclOperation,
    AclResourceType,
    operations_bitfield,
    supported_operations,
)
from trafka.wire.protocol import ApiKey

if TYPE_CHECKING:
    from trafka.broker.broker import Broker
    from trafka.broker.security.authentication import ConnectionSession
    from trafka.wire.connection import RequestHeader

#: Every denial, as Kafka's ``kafka.authorizer.logger`` writes it.
audit = logging.getLogger("trafka.authorizer")


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

    @property
    def principal(self) -> str:
        """Who the client is: ``User:<name>`` once authenticated, ``User:ANONYMOUS`` on a plaintext listener."""
        return self.session.principal if self.session is not None else ANONYMOUS

    @property
    def client_host(self) -> str:
        """The client's address, as ACLs name hosts (an IPv6 address as Java writes it)."""
        return client_host(self.peer)

    # -- authorization (trafka.broker.security.authorizer): every check allows when no authorizer is set --

    def authorize(self, operation: AclOperation, resource_type: AclResourceType, name: str, *,
                  log_if_denied: bool = True) -> bool:
        """Whether this request's principal may do ``operation`` on the resource; a denial is logged (unless
        ``log_if_denied`` is off, for checks whose denial is not a refusal) and counted."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        allowed = authorizer.authorize(self.principal, self.client_host, operation, resource_type, name)
        if not allowed and log_if_denied:
            self._denied(operation, resource_type, name)
        return allowed

    def authorize_cluster(self, operation: AclOperation, *, log_if_denied: bool = True) -> bool:
        """:meth:`authorize` on the cluster resource."""
        return self.authorize(operation, AclResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=log_if_denied)

    def cluster_refusal(self, operation: AclOperation) -> str | None:
        """None when the principal may do ``operation`` on the cluster; otherwise Kafka's message refusing the
        request (Kafka's names its internal request object where this names the API)."""
        if self.authorize_cluster(operation):
            return None
        return f"Request {ApiKey(self.header.api_key).name} needs {operation.name} permission."

    def authorized_names(self, operation: AclOperation, resource_type: AclResourceType, names: Iterable[str], *,
                         log_if_denied: bool = True) -> set[str]:
        """Which of ``names`` the principal may do ``operation`` on (each distinct name checked once), as
        Kafka's filterByAuthorized."""
        distinct = set(names)
        if self.broker.authorizer is None:
            return distinct
        return {name for name in distinct
                if self.authorize(operation, resource_type, name, log_if_denied=log_if_denied)}

    def authorize_by_resource_type(self, operation: AclOperation, resource_type: AclResourceType) -> bool:
        """Whether the principal may do ``operation`` on at least one resource of the type (KIP-679)."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        allowed = authorizer.authorize_by_resource_type(self.principal, self.client_host, operation, resource_type)
        if not allowed:
            self._denied(operation, resource_type, None)
        return allowed

    def authorized_operations(self, resource_type: AclResourceType, name: str) -> int:
        """The operations the principal may do on the resource, as the protocol's bitfield (bit n for the
        operation of code n): every operation the resource type supports when there is no authorizer."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return operations_bitfield(supported_operations(resource_type))
        return authorizer.authorized_operations(self.principal, self.client_host, resource_type, name)

    def _denied(self, operation: AclOperation, resource_type: AclResourceType, name: str | None) -> None:
        api = ApiKey(self.header.api_key).name
        audit.info("Principal = %s is Denied operation = %s from host = %s on resource = %s for request = %s",
                   self.principal, operation.name, self.client_host,
                   f"{resource_type.name}:{name}" if name is not None else f"any {resource_type.name}", api)
        metrics = self.broker.metrics
        if metrics is not None:
            metrics.authorization_denied(api, resource_type.name)


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
