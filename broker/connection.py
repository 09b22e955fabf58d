"""One client connection: frames in, handlers, responses out.

Requests on a connection are handled one at a time, in the order they arrived, as Apache Kafka does
(it mutes a connection while one of its requests is in flight); clients that pipeline requests get
their responses back in order. A Produce with acks=0 gets no response. Record data read from the log
leaves through ``os.sendfile``: the response is a list of chunks, and file slices among them go from
the page cache to the socket without passing through Python (slices under ``SENDFILE_MIN`` are read
and sent with the rest of the response, which costs less than the extra system calls).

On a TLS listener (SSL, SASL_SSL) the connection is a TLS transport over the socket
(``trafka.broker.security.tls_transport``), its handshake done first, within ``TLS_HANDSHAKE_TIMEOUT_S``:
a client that does not speak TLS fails fast and alone. Record data cannot leave through sendfile there;
file slices are read in pieces of ``TLS_READ_SIZE`` and encrypted as they go, with no work per record.

On a SASL listener the connection's ``session`` (``trafka.broker.security.authentication``) says which
requests it may make yet: a request it may not make closes the connection, and so does a failed
authentication, once its answer is sent and ``connection.failed.authentication.delay.ms`` has passed.

A request frame over ``DECODE_IN_PLACE_LIMIT`` is decoded in a worker thread, and its response encoded
there too: a client that sends megabytes of arrays (a Metadata request naming a million topics) waits
for them alone, and the event loop goes on serving everyone else meanwhile. Such requests become many
times their size in objects, so the connections of a server take turns with them (``large_requests``,
one at a time): however many clients send them, their memory is one request's. Produce and Fetch, the
data path, do not take turns: a Produce frame is mostly record bytes that stay bytes, and a Fetch may
wait for data.

Client quotas (``trafka.broker.security.quotas``) are enforced here, as Kafka's request channel does it, once
any is set: after a request is handled its size (Produce) and handling time are recorded, the response
carries the throttle time, and the connection is muted for that long (no request of it is read: KIP-219);
a client of a version that does not back off by itself gets its response only after the throttle time.

A malformed frame, an unknown API key or an unsupported version closes only this connection, with a
log line that says why; the broker goes on serving everyone else. A request whose handling fails
unexpectedly is answered as Kafka's request handler answers a failed request, where its response has a
top-level error code: with the code of a Kafka error, otherwise UNKNOWN_SERVER_ERROR; where the response has
no such code, the connection is closed. (A controller out of ZooKeeper's reach answers its writes so at
once; Kafka 3.9's holds them until ZooKeeper is back, past a client's timeout.)
"""
from __future__ import annotations

import errno
import logging
import os
import ssl
import time
from typing import TYPE_CHECKING

import trio

from trafka.broker.faults import Action, top_level_error_response
from trafka.broker.handlers import REGISTRY, CloseConnection, RequestContext
from trafka.broker.handlers.api_versions import api_versions_response, served_versions_on
from trafka.broker.memory import RELEASED_BUFFERS
from trafka.broker.security.quotas import MUTATION_APIS, client_throttles
from trafka.wire.chunks import Chunk, FileSlice
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.connection import NEED_DATA, ProtocolError, Request, ServerConnection, UndecodedRequest, UnsupportedVersion
from trafka.wire.protocol import RESPONSES, ApiKey

if TYPE_CHECKING:
    from trafka.broker.broker import Broker
    from trafka.broker.config import ListenerConfig
    from trafka.broker.security.authentication import ConnectionSession, ListenerSasl
    from trafka.broker.security.tls_transport import TlsTransport

log = logging.getLogger(__name__)

# Byte chunks below this size are gathered into one send; larger ones go out as they are.
GATHER_LIMIT = 64 * 1024
# File slices below this size are read and gathered too: one pread and one send cost less than a
# send, a sendfile and a send (and the client gets the response in one segment, not three).
SENDFILE_MIN = 16 * 1024
# Request frames above this size are decoded, and their responses encoded, in a worker thread.
DECODE_IN_PLACE_LIMIT = 1024 * 1024
# A plaintext connection that receives nothing for this long lets its receive buffer (64 KiB) go until
# its next bytes arrive: an idle connection costs some kilobytes, not a buffer's worth.
IDLE_BUFFER_RELEASE_S = 1.0
# A TLS client has this long to complete its handshake.
TLS_HANDSHAKE_TIMEOUT_S = 10
# Record data read from the log for a TLS connection, per read (and per encrypted send).
TLS_READ_SIZE = 1024 * 1024
_DATA_PATH = frozenset({ApiKey.PRODUCE, ApiKey.FETCH})
#: Fault actions that change how a response travels (broker.faults).
_NETWORK_ACTIONS = frozenset({Action.LATENCY, Action.BANDWIDTH, Action.TRUNCATE})
#: A ``bandwidth`` rule sends a response in this many pieces a second.
BANDWIDTH_STEPS_PER_S = 20


class ServedConnection:
    """One client's connection as the broker serves it: requests read, dispatched to their handlers,
    and answered in order (the client's side of the protocol is :mod:`trafka.wire.client`)."""

    def __init__(
        self,
        stream: trio.SocketStream,
        broker: Broker,
        connection_id: int,
        large_requests: trio.CapacityLimiter | None = None,
        *,
        listener: ListenerConfig | None = None,
        tls_context: ssl.SSLContext | None = None,
        sasl: ListenerSasl | None = None,
    ) -> None:
        self.stream: trio.SocketStream | TlsTransport = stream
        #: The socket under the stream (the TLS layer's, on a TLS listener).
        self.socket = stream.socket
        self.tls_context = tls_context
        self.sasl = sasl
        #: Who the client is, and its authentication under way (set once the TLS handshake is done).
        self.session: ConnectionSession | None = None
        self.broker = broker
        self.connection_id = connection_id
        #: The listener the client came in on.
        self.listener = listener if listener is not None else broker.config.listeners[0]
        try:
            host, port = stream.socket.getpeername()[:2]
            self.peer = f"{host}:{port}"
        except OSError:
            host, self.peer = "?", "?"
        #: Who the client is, as fault rules select connections (broker.faults.Connection).
        self.listener_name = self.listener.name
        self.client_host: str = host
        #: The client id of its last request.
        self.client_id: str | None = None
        self._scope: trio.CancelScope | None = None
        self._reset = False
        self.protocol = ServerConnection(
            max_frame_size=broker.config.socket_request_max_bytes,
            supported=served_versions_on(broker.config, self.listener.name),
            decode_in_place_limit=DECODE_IN_PLACE_LIMIT,
        )
        self.large_requests = large_requests if large_requests is not None else trio.CapacityLimiter(1)
        self._draining = False
        self._receive_scope: trio.CancelScope | None = None

    def drain(self) -> None:
        """Finish the request in hand, answer it, then close: no new requests are read."""
        self._draining = True
        if self._receive_scope is not None:
            self._receive_scope.cancel()

    def reset(self) -> None:
        """Reset the connection now (a fault rule's ``cut``): the client sees it reset, whatever it was doing."""
        self._reset = True
        if self._scope is not None:
            self._scope.cancel()

    async def run(self) -> None:
        try:
            with trio.CancelScope() as self._scope:
                if not self._reset:
                    await self._run()
        finally:
            with trio.CancelScope(shield=True):
                if self._reset:
                    reset_on_close(self.socket)
                await self.stream.aclose()

    async def _run(self) -> None:
        try:
            if self.tls_context is not None and not await self._tls_handshake():
                return
            from trafka.broker.security.authentication import ConnectionSession

            principal = None
            if self.tls_context is not None:  # (the TLS machinery is loaded for TLS listeners only)
                from trafka.broker.security.principal import NoMatchingRule

                try:
                    principal = self._tls_principal()
                except NoMatchingRule as exc:
                    log.info("closing connection %s from %s on listener %s: %s", self.connection_id, self.peer,
                             self.listener.name, exc)
                    return
            self.session = ConnectionSession.for_listener(self.listener, self.sasl, principal)
            await self._serve()
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError) as exc:
            log.debug("connection %s from %s closed: %s", self.connection_id, self.peer, exc)
        except ProtocolError as exc:
            log.warning("closing connection %s from %s: %s", self.connection_id, self.peer, exc)
        except Exception:
            # A bug must cost one connection, never the broker.
            log.exception("closing connection %s from %s after an internal error", self.connection_id, self.peer)

    async def _tls_handshake(self) -> bool:
        """Wrap the connection in TLS and complete the handshake; False (logged) when it fails."""
        from trafka.broker.security.tls_transport import TlsClosed, TlsTransport

        self.stream = TlsTransport(self.stream, self.tls_context)
        with trio.move_on_after(TLS_HANDSHAKE_TIMEOUT_S) as timeout:
            try:
                await self.stream.do_handshake()
            except (ssl.SSLError, TlsClosed, OSError) as exc:
                log.info("connection %s from %s on listener %s: TLS handshake failed: %s", self.connection_id,
                         self.peer, self.listener.name, exc)
                return False
        if timeout.cancelled_caught:
            log.info("connection %s from %s on listener %s: no TLS handshake within %d s", self.connection_id,
                     self.peer, self.listener.name, TLS_HANDSHAKE_TIMEOUT_S)
            return False
        return True

    def _tls_principal(self) -> str | None:
        """The principal of a client that presented a certificate (mutual TLS), by the listener's
        ``ssl.principal.mapping.rules``; None without one."""
        certificate = self.stream.getpeercert(binary_form=True)
        if not certificate:
            return None
        from trafka.broker.security.principal import principal_name

        return principal_name(certificate, self._principal_rules())

    def _principal_rules(self) -> str | None:
        properties = self.broker.config.properties
        own = f"listener.name.{self.listener.name.lower()}.ssl.principal.mapping.rules"
        return properties.get(own, properties.get("ssl.principal.mapping.rules"))

    async def _serve(self) -> None:
        protocol = self.protocol
        # Straight from the socket into the frame's buffer; on TLS, decrypted into it.
        receive_into = self.socket.recv_into if self.tls_context is None else self.stream.receive_into
        session = self.session
        while not self._draining:
            event = protocol.next_raw_frame() if session.raw_tokens else protocol.next_request()
            if isinstance(event, memoryview):
                if not await self._raw_token(event):
                    return
                continue
            if event is NEED_DATA:
                count = -1
                with protocol.receive_buffer() as room, trio.CancelScope() as self._receive_scope:
                    if self.tls_context is None:  # (a TLS stream cannot take back a receive cut short)
                        self._receive_scope.deadline = trio.current_time() + IDLE_BUFFER_RELEASE_S
                    count = await receive_into(room)
                self._receive_scope = None
                if self._draining or not count:
                    return
                if count < 0:  # nothing came for a while: wait for more without a receive buffer
                    if released := protocol.release_buffer():
                        RELEASED_BUFFERS.released(released)
                        with trio.CancelScope() as self._receive_scope:
                            await trio.lowlevel.wait_readable(self.socket)
                        self._receive_scope = None
                    continue
                protocol.received(count)
                continue
            if isinstance(event, UnsupportedVersion):
                await self._unsupported_version(event)
                continue
            if isinstance(event, UndecodedRequest):
                if event.header.api_key in _DATA_PATH:
                    keep_going = await self._handle_large(event)
                else:
                    async with self.large_requests:
                        keep_going = await self._handle_large(event)
            else:
                keep_going = await self._handle(event, in_thread=False)
            if not keep_going:
                return

    def _fault(self, header, request):
        """The fault rule that acts on this request (broker.faults), if one does."""
        def topic_name(topic_id):
            topic = self.broker.topics.by_id(topic_id)
            return topic.name if topic is not None else None

        return self.broker.faults.match(header.api_key, header.client_id, request, topic_name,
                                        listener=self.listener_name, client_host=self.client_host)

    async def _handle_large(self, event: UndecodedRequest) -> bool:
        return await self._handle(await trio.to_thread.run_sync(event.decode), in_thread=True)

    async def _handle(self, event: Request, *, in_thread: bool) -> bool:
        """Run the request's handler and send its response (encoded in a worker thread ``in_thread``);
        False when the connection must close."""
        header, request = event.header, event.body
        refusal = self.session.refusal(header.api_key)
        if refusal is not None:
            log.info("closing connection %s from %s on listener %s: %s", self.connection_id, self.peer,
                     self.listener.name, refusal)
            if self.session.answers_refusal:
                # During the exchange Kafka answers such a request with its error response, then closes.
                refused = top_level_error_response(header.api_key, header.api_version, ErrorCode.ILLEGAL_SASL_STATE)
                await self.send_chunks(self.protocol.send_response(
                    header, refused if refused is not None else RESPONSES[header.api_key]()))
            return False
        handler = REGISTRY.get(header.api_key)
        ctx = RequestContext(broker=self.broker, header=header, peer=self.peer, connection_id=self.connection_id,
                             listener=self.listener.name, session=self.session)
        metrics = self.broker.metrics
        started = time.perf_counter() if metrics is not None else 0.0
        quotas = self.broker.client_quotas
        handling_started = time.perf_counter_ns() if quotas.active else 0
        self.client_id = header.client_id
        fault = self._fault(header, request) if self.broker.faults else None
        if fault is not None and fault.action is not Action.OBSERVE:
            if fault.action is Action.DROP:
                log.info("closing connection %s from %s: fault rule %d drops %s", self.connection_id, self.peer,
                         fault.id, ApiKey(header.api_key).name)
                return False
            if fault.action is Action.DELAY:
                await trio.sleep(fault.delay_ms / 1000)
            elif fault.action is Action.HALF_OPEN:
                log.info("connection %s from %s half-open: fault rule %d answers nothing more", self.connection_id,
                         self.peer, fault.id)
                await self._hold_half_open()
                return False
        try:
            if fault is not None and fault.action is Action.ERROR:
                response = top_level_error_response(header.api_key, header.api_version, fault.error_code)
                if response is None:
                    raise CloseConnection(f"{ApiKey(header.api_key).name} v{header.api_version} has no error code "
                                          "to answer a fault rule with")
            elif quotas.active and header.api_key in MUTATION_APIS and quotas.controller_mutation.enabled:
                response, _ = await quotas.with_mutation_quota(
                    header.api_key, header.api_version, self.session.principal, header.client_id, request,
                    lambda admitted: handler.handle(ctx, admitted), self._partitions_of)
            else:
                response = await handler.handle(ctx, request)
        except CloseConnection as exc:
            log.info("closing connection %s from %s: %s", self.connection_id, self.peer, exc)
            return False
        except Exception as exc:
            # As Kafka does: where the response has a top-level error code, the request is answered with the
            # error's code, or UNKNOWN_SERVER_ERROR (with no message, which could tell a client the broker's
            # internals).
            code = exc.code if isinstance(exc, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
            response = top_level_error_response(header.api_key, header.api_version, code)
            log.exception(
                "%s connection %s from %s: %s v%d request (correlation id %d) failed",
                f"answering {ErrorCode(code).name} on" if response is not None else "closing",
                self.connection_id,
                self.peer,
                ApiKey(header.api_key).name,
                header.api_version,
                header.correlation_id,
            )
            if response is None:
                return False
        throttle_ms = 0
        if quotas.active:
            throttle_ms = quotas.after_request(header.api_key, header.api_version, self.session.principal,
                                               header.client_id, request, response, event.size,
                                               time.perf_counter_ns() - handling_started if handling_started else 0)
            if throttle_ms and response is not None and not client_throttles(header.api_key, header.api_version):
                await trio.sleep(throttle_ms / 1000)  # a client that does not back off itself gets its answer late
                throttle_ms = 0
        if response is not None:
            if in_thread:
                chunks = await trio.to_thread.run_sync(self.protocol.send_response, header, response)
            else:
                chunks = self.protocol.send_response(header, response)
            if fault is not None and fault.action in _NETWORK_ACTIONS:
                if not await self._send_through(fault, header, chunks):
                    return False
            else:
                await self.send_chunks(chunks)
        if throttle_ms:
            await trio.sleep(throttle_ms / 1000)  # muted: no request of this client is read meanwhile (KIP-219)
        if metrics is not None:
            metrics.request(handler.api_key.name, time.perf_counter() - started)
        if self.session.has_failed:
            await self._close_after_failed_authentication()
            return False
        return True

    def _partitions_of(self, api_key: int, item) -> int:
        """How many partitions one topic of a CreateTopics, DeleteTopics or CreatePartitions creates or deletes
        (for the controller mutation quota)."""
        topics = self.broker.topics
        if api_key == ApiKey.CREATE_TOPICS:
            if item.num_partitions > 0:
                return item.num_partitions
            return len(item.assignments) if item.assignments else self.broker.config.num_partitions
        if api_key == ApiKey.DELETE_TOPICS:
            if isinstance(item, str):
                topic = topics.get(item)
            else:
                topic = topics.get(item.name) if item.name else topics.by_id(item.topic_id)
            return len(topic.partitions) if topic is not None else 0
        topic = topics.get(item.name)
        return max(item.count - len(topic.partitions), 0) if topic is not None else 0

    async def _raw_token(self, token: memoryview) -> bool:
        """A SASL token in a bare frame (after SaslHandshake v0): the exchange's answer goes back the same
        way; a failure closes the connection, as Kafka closes it (this framing has no error to send)."""
        from trafka.broker.security.sasl import SaslError

        session = self.session
        exchange = session.exchange
        try:
            answer = exchange.respond(bytes(token))
        except SaslError as exc:
            log.info("connection %s from %s on listener %s: SASL %s authentication failed: %s", self.connection_id,
                     self.peer, self.listener.name, session.mechanism, getattr(exc, "detail", None) or exc)
            session.failed()
            await self._close_after_failed_authentication()
            return False
        if exchange.complete:
            session.authenticated_as(exchange.principal, exchange.session_lifetime_ms)
        await self.stream.send_all(self.protocol.raw_frame(answer))  # an empty one too, as Kafka sends it
        return True

    async def _close_after_failed_authentication(self) -> None:
        delay_ms = self.sasl.failed_authentication_delay_ms if self.sasl is not None else 0
        log.info("closing connection %s from %s on listener %s after a failed authentication", self.connection_id,
                 self.peer, self.listener.name)
        await trio.sleep(delay_ms / 1000)

    async def _unsupported_version(self, event: UnsupportedVersion) -> None:
        header = event.header
        if header.api_key == ApiKey.API_VERSIONS:
            # Kafka answers an ApiVersions it cannot parse with a v0 response listing what it serves,
            # so the client can retry with a version both sides know.
            response = api_versions_response(ErrorCode.UNSUPPORTED_VERSION, self.broker.config, self.listener.name)
            await self.send_chunks(self.protocol.send_response(header, response, version=0))
            return
        raise ProtocolError(
            f"{_api_name(header.api_key)} v{header.api_version} is not supported "
            f"(served: {_version_range(event.supported)})"
        )

    async def _send_through(self, fault, header, chunks: list[Chunk]) -> bool:
        """Send a response as the fault rule's network would (``latency``, ``bandwidth``, ``truncate``); False when
        the connection is reset."""
        if fault.action is Action.LATENCY:
            await trio.sleep(fault.response_delay_s())
            await self.send_chunks(chunks)
            return True
        data = b"".join(chunk.read() if isinstance(chunk, FileSlice) else bytes(chunk) for chunk in chunks)
        if fault.action is Action.TRUNCATE:
            await self.stream.send_all(data[:int(len(data) * fault.fraction)])
            log.info("resetting connection %s from %s: fault rule %d truncated a %s response", self.connection_id,
                     self.peer, fault.id, _api_name(header.api_key))
            self._reset = True
            return False
        piece = max(1, fault.bytes_per_s // BANDWIDTH_STEPS_PER_S)
        for start in range(0, len(data), piece):  # (the first piece goes at once, each next one a step later)
            if start:
                await trio.sleep(piece / fault.bytes_per_s)
            await self.stream.send_all(data[start:start + piece])
        return True

    async def _hold_half_open(self) -> None:
        """Read what the client sends and never answer, until it closes the connection."""
        receive = self.socket.recv_into if self.tls_context is None else self.stream.receive_into
        room = bytearray(64 * 1024)
        while await receive(room):
            pass

    async def send_chunks(self, chunks: list[Chunk]) -> None:
        pending: list[Chunk] = []
        for chunk in chunks:
            if isinstance(chunk, FileSlice) and chunk.size < SENDFILE_MIN:
                try:
                    chunk = chunk.read()
                except EOFError as exc:  # the segment is shorter than the slice we framed
                    raise trio.BrokenResourceError(str(exc)) from exc
            if isinstance(chunk, FileSlice):
                if pending:
                    await self.stream.send_all(b"".join(pending))
                    pending = []
                await self._sendfile(chunk)
            elif len(chunk) >= GATHER_LIMIT:
                if pending:
                    await self.stream.send_all(b"".join(pending))
                    pending = []
                await self.stream.send_all(chunk)
            else:
                pending.append(chunk)
        if pending:
            await self.stream.send_all(b"".join(pending))

    async def _sendfile(self, chunk: FileSlice) -> None:
        if self.tls_context is not None:
            await self._send_slice_over_tls(chunk)
            return
        sock = self.socket
        out_fd = sock.fileno()
        in_fd = chunk.file.fileno()
        position, remaining = chunk.position, chunk.size
        await trio.lowlevel.checkpoint_if_cancelled()
        while remaining:
            try:
                sent = os.sendfile(out_fd, in_fd, position, remaining)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(sock)
                continue
            except OSError as exc:
                if exc.errno in (errno.EPIPE, errno.ECONNRESET):
                    raise trio.BrokenResourceError(str(exc)) from exc
                raise
            if sent == 0:
                # The segment is shorter than the slice we framed: the response cannot be completed.
                raise trio.BrokenResourceError(f"log file ended {remaining} bytes early while sending")
            position += sent
            remaining -= sent


    async def _send_slice_over_tls(self, chunk: FileSlice) -> None:
        """A file slice through the TLS layer: read in large pieces (from the page cache, as sendfile
        would), each encrypted and sent whole."""
        fd = chunk.file.fileno()
        position, remaining = chunk.position, chunk.size
        while remaining:
            data = os.pread(fd, min(remaining, TLS_READ_SIZE), position)
            if not data:
                raise trio.BrokenResourceError(f"log file ended {remaining} bytes early while sending")
            await self.stream.send_all(data)
            position += len(data)
            remaining -= len(data)


def reset_on_close(sock) -> None:
    """Make closing the socket send a reset (SO_LINGER with a zero timeout) rather than a FIN."""
    import socket
    import struct

    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api key {api_key}"


def _version_range(versions: tuple[int, int] | None) -> str:
    return "none" if versions is None else f"v{versions[0]}-{versions[1]}"
