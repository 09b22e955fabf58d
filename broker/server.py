"""The Trio server: listeners, connections, and an orderly shutdown.

:class:`Server` owns one nursery for its listeners and one for its connections. Shutdown is graceful,
then forceful: listeners close at once, each connection finishes and answers the request in hand but
reads no new one, and whatever is still running when ``shutdown_timeout_s`` has passed is cancelled.
The broker's state (logs, checkpoints) is closed last, after every connection is gone.
Each connection accepted passes the connection limits first (``trafka.broker.security.connection_quotas``):
it may wait to be accepted, or be closed at once, as Kafka's acceptor does.
Once the logs are loaded, one line says the file descriptor limit and about how many more
partitions it allows (``trafka.broker.descriptors``).
"""
from __future__ import annotations

import itertools
import logging
import ssl
from typing import TYPE_CHECKING

import trio

from trafka.broker.broker import Broker
from trafka.broker.config import BrokerConfig, ConfigError, ListenerConfig, listener_settings
from trafka.broker.connection import ServedConnection
from trafka.broker.descriptors import current_budget, map_count_warning
from trafka.broker.security.connection_quotas import ConnectionQuotas, Verdict

if TYPE_CHECKING:
    from trafka.broker.security.authentication import ListenerSasl

log = logging.getLogger(__name__)


class Server:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.broker: Broker | None = None
        self.stopped = trio.Event()
        self._shutdown_requested = trio.Event()
        self._connections: set[ServedConnection] = set()
        self._connection_ids = itertools.count(1)
        self._all_closed = trio.Event()
        self._all_closed.set()
        # Requests over broker.connection.DECODE_IN_PLACE_LIMIT take turns across connections.
        self._large_requests = trio.CapacityLimiter(1)

    def request_shutdown(self) -> None:
        self._shutdown_requested.set()

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Serve until :meth:`request_shutdown`; ``task_status.started`` gets the bound addresses."""
        config = self.config
        try:
            tls_contexts = _tls_contexts(config)
            listeners: list[tuple[ListenerConfig, trio.SocketListener]] = []
            for served in config.listeners:
                try:
                    sockets = await trio.open_tcp_listeners(served.port, host=served.host or None)
                except OSError as exc:
                    for _, bound in listeners:
                        await bound.aclose()
                    raise OSError(f"cannot listen on {served.host}:{served.port} (listener {served.name}): "
                                  f"{exc.strerror}") from exc
                listeners += [(served, socket_listener) for socket_listener in sockets]
            addresses = [socket_listener.socket.getsockname() for _, socket_listener in listeners]
            bound_ports = {served.name: socket_listener.socket.getsockname()[1]
                           for served, socket_listener in reversed(listeners)}
            # The config given stays as it was; the broker's has the ports bound (port 0: the system's choice).
            config = self.config = config.serving_on(bound_ports)
            self.broker = broker = Broker(config)
            broker.faults.open_connections = lambda: self._connections
            self.connection_quotas = _connection_quotas(config, broker)
            try:
                sasl = _sasl_settings(config, broker)
                if any(s.jwks_refreshers for s in sasl.values()):
                    from trafka.broker.security.authentication import fetch_verification_keys

                    await fetch_verification_keys(sasl)
            except (ConfigError, ValueError):
                for _, socket_listener in listeners:
                    await socket_listener.aclose()
                raise
            if config.metrics_port is not None:
                from trafka.broker.metrics import Metrics

                broker.metrics = Metrics(broker.topics, lambda: broker.loaded_groups, lambda: len(self._connections))
                broker.metrics.serve(config.host, config.metrics_port)
                broker.client_quotas.on_throttle = broker.metrics.throttled
            control = None
            if config.control_port is not None:
                from trafka.broker.control import ControlServer

                control = ControlServer(broker, config.control_port)
                self.config = config.serving_on({}, control_port=control.port)
            try:
                await broker.start()
                partitions = sum(len(t.partitions) for t in broker.topics)
                budget = current_budget(partitions)
                log.info("%s", budget.describe())
                maps_warning = map_count_warning(partitions + budget.partitions_left)
                if maps_warning is not None:
                    log.warning("%s", maps_warning)
                async with trio.open_nursery() as connections:
                    await connections.start(broker.run_background)
                    if any(s.jwks_refreshers for s in sasl.values()):
                        from trafka.broker.security.authentication import refresh_verification_keys

                        refresh_verification_keys(sasl, connections)
                    async with trio.open_nursery() as accepting:
                        for served, socket_listener in listeners:
                            accepting.start_soon(self._accept, served, socket_listener, connections,
                                                             tls_contexts.get(served.name), sasl.get(served.name))
                        for served in config.listeners:
                            log.info("listener %s (%s) on %s:%d, advertising %s:%d", served.name,
                                     served.security_protocol, served.host or "*", served.port,
                                     *served.advertised_address)
                        task_status.started(addresses)
                        await self._shutdown_requested.wait()
                        accepting.cancel_scope.cancel()
                    for _, socket_listener in listeners:
                        await socket_listener.aclose()
                    broker.begin_shutdown()
                    for connection in list(self._connections):
                        connection.drain()
                    with trio.move_on_after(config.shutdown_timeout_s) as drained:
                        await self._all_closed.wait()
                    if drained.cancelled_caught:
                        log.warning("cancelling %d connections still busy at shutdown", len(self._connections))
                    connections.cancel_scope.cancel()
            finally:
                with trio.CancelScope(shield=True):
                    await broker.stop()
                if broker.metrics is not None:
                    broker.metrics.close()
                if control is not None:
                    control.close()
            log.info("stopped")
        finally:
            self.stopped.set()

    async def _accept(self, served: ListenerConfig, listener: trio.SocketListener, connections: trio.Nursery,
                      tls_context: ssl.SSLContext | None, sasl: ListenerSasl | None) -> None:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                # Out of file descriptors and the like: say so, back off, keep serving.
                log.error("accept failed on %s: %s", listener.socket.getsockname(), exc)
                await trio.sleep(0.1)
                continue
            address = _peer_address(stream)
            faults = self.broker.faults
            if faults and (rule := faults.refuses(served.name, address)) is not None:
                log.info("refusing the connection from %s on listener %s: fault rule %d", address, served.name,
                         rule.id)
                connections.start_soon(_reset, stream)
                continue
            verdict, hold_ms = await self.connection_quotas.admit(served.name, address)
            if verdict is not Verdict.ACCEPT:
                connections.start_soon(_refuse, stream, served.name, address, verdict, hold_ms)
                continue
            connection = ServedConnection(stream, self.broker, next(self._connection_ids), self._large_requests,
                                          listener=served, tls_context=tls_context, sasl=sasl)
            connections.start_soon(self._run_connection, connection, address)

    async def _run_connection(self, connection: ServedConnection, address: str = "") -> None:
        self._connections.add(connection)
        if self._all_closed.is_set():
            self._all_closed = trio.Event()
        try:
            await connection.run()
        finally:
            self.broker.connection_closed(connection.connection_id)
            self.connection_quotas.release(connection.listener.name, address)
            self._connections.discard(connection)
            if not self._connections:
                self._all_closed.set()


def _connection_quotas(config: BrokerConfig, broker: Broker) -> ConnectionQuotas:
    """The connection limits (broker.security.connection_quotas), measured over the client quotas' windows."""
    quotas = broker.client_quotas
    return ConnectionQuotas(config.properties, [served.name for served in config.listeners],
                            config.inter_broker_listener_name, quotas, window_num=quotas.produce.window_num,
                            window_size_seconds=quotas.produce.window_size_seconds)


def _peer_address(stream: trio.SocketStream) -> str:
    try:
        return stream.socket.getpeername()[0]
    except OSError:
        return "?"


async def _refuse(stream: trio.SocketStream, listener: str, address: str, verdict: Verdict, hold_ms: int) -> None:
    """Close a connection the limits refuse: at once over max.connections.per.ip, after its throttle time over
    its address's connection creation rate (held unread meanwhile), as Kafka does."""
    if verdict is Verdict.REJECT:
        log.info("Rejected connection from %s on listener %s, address already has the configured maximum of "
                 "connections.", address, listener)
    else:
        log.debug("closing the connection from %s in %d ms: over its connection creation rate", address, hold_ms)
        await trio.sleep(hold_ms / 1000)
    with trio.CancelScope(shield=True):
        await stream.aclose()


async def _reset(stream: trio.SocketStream) -> None:
    """Close a new connection with a reset, as a refused connection is (a fault rule's ``refuse``)."""
    from trafka.broker.connection import reset_on_close

    reset_on_close(stream.socket)
    with trio.CancelScope(shield=True):
        await stream.aclose()


def _tls_contexts(config: BrokerConfig) -> dict[str, ssl.SSLContext]:
    """The TLS context of each SSL and SASL_SSL listener, from its ssl.* settings (broker.security.tls);
    settings that cannot make one stop the start, named."""
    contexts: dict[str, ssl.SSLContext] = {}
    for served in config.listeners:
        if served.uses_tls:
            from trafka.broker.security.principal import SslPrincipalMapper
            from trafka.broker.security.tls import TlsConfigError, server_context

            settings = listener_settings(config.properties, served.name, "ssl.")
            if served.uses_sasl and f"listener.name.{served.name.lower()}.ssl.client.auth" not in config.properties:
                settings.pop("ssl.client.auth", None)  # KIP-684: only the listener's own setting counts on SASL_SSL
            try:
                contexts[served.name] = server_context(settings)
                SslPrincipalMapper.from_rules(settings.get("ssl.principal.mapping.rules"))  # refused now, not later
            except TlsConfigError as exc:
                raise ConfigError(f"listener {served.name}: {exc}") from None
    return contexts


def _sasl_settings(config: BrokerConfig, broker: Broker) -> dict[str, ListenerSasl]:
    """The SASL settings of each SASL_PLAINTEXT and SASL_SSL listener (broker.security.authentication)."""
    settings: dict[str, ListenerSasl] = {}
    for served in config.listeners:
        if served.uses_sasl:
            from trafka.broker.security.authentication import listener_sasl

            settings[served.name] = listener_sasl(config.properties, served, broker.scram_credentials())
    return settings


async def serve(config: BrokerConfig, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
    """Run a broker until cancelled. ``await nursery.start(serve, config)`` returns its addresses."""
    await Server(config).run(task_status=task_status)
