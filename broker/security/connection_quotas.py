"""Connection limits as Apache Kafka's ConnectionQuotas applies them where connections are accepted.

- ``max.connections`` (the whole broker) and ``listener.name.<l>.max.connections`` (one listener): at the limit
  the listener stops accepting: the next connection waits, unanswered, until another one closes. The
  inter-broker listener is not held to the broker-wide limit when there are other listeners (Kafka keeps it
  open for the cluster's own traffic).
- ``max.connection.creation.rate`` (broker-wide, not counting the inter-broker listener) and
  ``listener.name.<l>.max.connection.creation.rate``: beyond the rate, accepting waits until the rate is back
  under it (for at most one quota window).
- ``max.connections.per.ip``, ``max.connections.per.ip.overrides`` (``host:count,...``, host names resolved at
  start): a connection beyond its address's limit is closed at once; the client sees its connection closed
  before any answer.
- the ``connection_creation_rate`` quota of an ``ip`` entity (AlterClientQuotas; ``<default>`` for every
  address without its own): a connection over its address's rate is held unread for the throttle time, then
  closed, and not counted.

Rates are measured as client quotas are (``trafka.broker.security.quotas``: ``quota.window.num`` samples of
``quota.window.size.seconds``). :meth:`ConnectionQuotas.admit` is awaited by the accepting task for each new
connection, and :meth:`ConnectionQuotas.release` called when it closes.
"""
from __future__ import annotations

import enum
import ipaddress
import logging
import socket
from collections.abc import Callable, Mapping

import trio

from trafka.broker.security.quotas import (
    DEFAULT_WINDOW_NUM,
    DEFAULT_WINDOW_SIZE_SECONDS,
    ClientQuotas,
    Rate,
    throttle_time_ms,
)

log = logging.getLogger(__name__)

UNLIMITED = 2**31 - 1


class Verdict(enum.Enum):
    ACCEPT = "accept"
    #: Over ``max.connections.per.ip``: closed at once.
    REJECT = "reject"
    #: Over the address's connection creation rate: closed after the throttle time.
    THROTTLE = "throttle"


def parse_overrides(text: str, resolve: Callable[[str], str] = socket.gethostbyname) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count,...`` by resolved address (ConfigError when malformed)."""
    from trafka.broker.config import ConfigError

    overrides: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        try:
            if not sep or not host:
                raise ValueError
            overrides[resolve(host.strip("[]"))] = int(count)
        except (ValueError, OSError):
            raise ConfigError(f"max.connections.per.ip.overrides: {item!r} is not host:count with a host that "
                              "resolves") from None
    return overrides


class ConnectionQuotas:
    """The broker's connection limits (see the module's docstring)."""

    def __init__(self, properties: Mapping[str, str], listeners: list[str], inter_broker_listener: str | None,
                 client_quotas: ClientQuotas | None = None, *, window_num: int = DEFAULT_WINDOW_NUM,
                 window_size_seconds: int = DEFAULT_WINDOW_SIZE_SECONDS, clock: Callable[[], int] | None = None,
                 resolve: Callable[[str], str] = socket.gethostbyname) -> None:
        from trafka.broker.security.quotas import monotonic_ms

        self.clock = clock or monotonic_ms
        self.window_num = window_num
        self.window_ms = window_size_seconds * 1000
        from trafka.broker.config import broker_setting

        self.max_connections = broker_setting(properties, "max.connections")
        self.max_per_ip = broker_setting(properties, "max.connections.per.ip")
        self.per_ip_overrides = parse_overrides(str(properties.get("max.connections.per.ip.overrides", "")), resolve)
        self.max_rate = broker_setting(properties, "max.connection.creation.rate")
        self.listener_max: dict[str, int] = {}
        self.listener_rate: dict[str, int] = {}
        for name in listeners:
            prefix = f"listener.name.{name.lower()}."
            self.listener_max[name] = broker_setting(properties, "max.connections", key=prefix + "max.connections")
            self.listener_rate[name] = broker_setting(properties, "max.connection.creation.rate",
                                                      key=prefix + "max.connection.creation.rate")
        self.protected = inter_broker_listener if len(listeners) > 1 else None
        self.client_quotas = client_quotas
        self._resolve = resolve
        #: connection_creation_rate by address (None: every other address), ip entities' host names resolved.
        self.ip_rates: dict[str | None, float] = {}
        if client_quotas is not None:
            client_quotas.listeners.append(self._follow_ip_rates)
            self._follow_ip_rates(client_quotas)
        self.total = 0
        self.by_listener: dict[str, int] = dict.fromkeys(listeners, 0)
        self.by_ip: dict[str, int] = {}
        self._broker_rate = Rate(window_num, self.window_ms)
        self._listener_rates = {name: Rate(window_num, self.window_ms) for name in listeners}
        self._ip_rates: dict[str, Rate] = {}
        self._released = trio.Event()
        self.enabled = (self.max_connections < UNLIMITED or self.max_per_ip < UNLIMITED or bool(self.per_ip_overrides)
                        or self.max_rate < UNLIMITED or any(v < UNLIMITED for v in self.listener_max.values())
                        or any(v < UNLIMITED for v in self.listener_rate.values()))

    # -- pure parts ----------------------------------------------------------------------------------------------

    def slot_available(self, listener: str) -> bool:
        if self.by_listener.get(listener, 0) >= self.listener_max.get(listener, UNLIMITED):
            return False
        if listener == self.protected:
            return True
        return self.total < self.max_connections

    def creation_throttle_ms(self, listener: str, now_ms: int) -> int:
        """Record a new connection against the broker's and the listener's creation rates; how long accepting
        must wait (at most one window)."""
        throttle = 0
        if listener != self.protected and self.max_rate < UNLIMITED:
            self._broker_rate.record(1.0, now_ms)
            throttle = throttle_time_ms(self._broker_rate, self.max_rate, now_ms)
        limit = self.listener_rate.get(listener, UNLIMITED)
        if limit < UNLIMITED:
            rate = self._listener_rates[listener]
            rate.record(1.0, now_ms)
            throttle = max(throttle, throttle_time_ms(rate, limit, now_ms))
        return min(throttle, self.window_ms)

    def _follow_ip_rates(self, client_quotas: ClientQuotas) -> None:
        """The ip entities' connection_creation_rate quotas, by address: a host name stands for the address it
        resolves to, as Kafka resolves it (one that does not resolve is left out)."""
        rates: dict[str | None, float] = {}
        for name, rate in client_quotas.ip_connection_rates.items():
            if name is None:
                rates[None] = rate
                continue
            try:
                ipaddress.ip_address(name)
                rates[name] = rate
            except ValueError:
                try:
                    rates[self._resolve(name)] = rate
                except OSError:
                    log.warning("ignoring the connection_creation_rate quota of ip %s: it does not resolve", name)
        self.ip_rates = rates

    def ip_rate(self, address: str) -> float | None:
        rates = self.ip_rates
        if not rates:
            return None
        rate = rates.get(address)
        return rates.get(None) if rate is None else rate

    def ip_throttle_ms(self, listener: str, address: str, now_ms: int) -> int:
        """Record a connection against its address's creation rate quota; over it, the recording is taken back
        (there, and from the broker's and listener's rates) and the throttle time returned."""
        limit = self.ip_rate(address)
        if limit is None:
            return 0
        rate = self._ip_rates.get(address)
        if rate is None:
            rate = self._ip_rates[address] = Rate(self.window_num, self.window_ms)
        rate.record(1.0, now_ms)
        throttle = min(throttle_time_ms(rate, limit, now_ms), self.window_ms)
        if throttle:
            rate.record(-1.0, now_ms)
            if listener != self.protected and self.max_rate < UNLIMITED:
                self._broker_rate.record(-1.0, now_ms)
            if self.listener_rate.get(listener, UNLIMITED) < UNLIMITED:
                self._listener_rates[listener].record(-1.0, now_ms)
        return throttle

    def count(self, listener: str, address: str) -> bool:
        """Count a new connection; False (and not counted) when its address is at its limit already."""
        limit = self.per_ip_overrides.get(address, self.max_per_ip)
        if self.by_ip.get(address, 0) >= limit:
            return False
        self.by_ip[address] = self.by_ip.get(address, 0) + 1
        self.by_listener[listener] = self.by_listener.get(listener, 0) + 1
        self.total += 1
        return True

    def release(self, listener: str, address: str) -> None:
        """A counted connection closed: its slot is free again."""
        left = self.by_ip.get(address, 0) - 1
        if left > 0:
            self.by_ip[address] = left
        else:
            self.by_ip.pop(address, None)
        self.by_listener[listener] = max(self.by_listener.get(listener, 0) - 1, 0)
        self.total = max(self.total - 1, 0)
        released, self._released = self._released, trio.Event()
        released.set()

    # -- at accept ------------------------------------------------------------------------------------------------

    async def admit(self, listener: str, address: str) -> tuple[Verdict, int]:
        """Wait until the connection may be accepted (a free slot, creation rates), then the verdict: ACCEPT
        (counted: :meth:`release` it when it closes), REJECT, or THROTTLE with the ms to hold it before closing."""
        if not self.enabled and self.ip_rate(address) is None:
            self.count(listener, address)
            return Verdict.ACCEPT, 0
        throttle = self.creation_throttle_ms(listener, self.clock())
        if throttle:
            await trio.sleep(throttle / 1000)
        while not self.slot_available(listener):
            await self._released.wait()
        ip_throttle = self.ip_throttle_ms(listener, address, self.clock())
        if ip_throttle:
            return Verdict.THROTTLE, ip_throttle
        if not self.count(listener, address):
            return Verdict.REJECT, 0
        return Verdict.ACCEPT, 0
