"""A TLS connection of the broker's, served (a client's) or opened (to another broker): Python's ``ssl`` (an
``SSLObject`` over memory BIOs) on a Trio socket, built for whole frames rather than single records.

A socket read (up to ``READ_SIZE``) is fed to OpenSSL at once, and every TLS record it completes is
decrypted straight into the caller's buffer (the request frame's own, for a large Produce) in one tight
loop, with no await between records; writes encrypt a whole chunk (1 MiB of record data, say) in one call
and send the ciphertext as one. ``trio.SSLStream`` takes one TLS record (16 KiB) per trip through its
locks and awaits, which left a broker receiving 1 MiB produce requests over TLS at a third of its
plaintext rate.

A failed handshake sends OpenSSL's alert before the error is raised, as Kafka's broker does, so that a
client refused (without the certificate a listener requires, say) learns why at once.
"""
from __future__ import annotations

import contextlib
import ssl

import trio

#: Bytes read from the socket at a time (several TLS records).
READ_SIZE = 256 * 1024


class TlsClosed(Exception):
    """The peer closed the connection during the TLS handshake."""


class TlsTransport:
    """One TLS connection over ``stream``'s socket (see the module's docstring): the server's side, or with
    ``server_hostname`` the client's (the name its certificate is checked against, where the context checks
    host names)."""

    def __init__(self, stream: trio.SocketStream, context: ssl.SSLContext, *,
                 server_hostname: str | None = None) -> None:
        self.transport_stream = stream
        self._socket = stream.socket
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        client = server_hostname is not None
        self._ssl = context.wrap_bio(self._incoming, self._outgoing, server_side=not client,
                                     server_hostname=server_hostname if client else None)
        self._buffer = bytearray(READ_SIZE)
        self._peer_closed = False

    async def do_handshake(self) -> None:
        """Complete the handshake; ``ssl.SSLError`` (after its alert is sent) or :class:`TlsClosed`."""
        while True:
            try:
                self._ssl.do_handshake()
            except ssl.SSLWantReadError:
                await self._flush()
                if not await self._fill():
                    raise TlsClosed("the peer closed the connection during the TLS handshake") from None
                continue
            except ssl.SSLError:
                await self._flush(best_effort=True)
                raise
            await self._flush()
            return

    def getpeercert(self, binary_form: bool = False):
        return self._ssl.getpeercert(binary_form)

    async def receive_into(self, room: memoryview) -> int:
        """Decrypt what the peer sent into ``room``: every record already here, else wait for more. 0 when
        the peer closed."""
        size = len(room)
        filled = 0
        while True:
            if self._peer_closed:
                return filled
            try:
                while filled < size:
                    count = self._ssl.read(size - filled, room[filled:])
                    if not count:  # the peer's close_notify
                        self._peer_closed = True
                        return filled
                    filled += count
            except ssl.SSLWantReadError:
                pass
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                self._peer_closed = True
                return filled
            except ssl.SSLError as exc:
                raise trio.BrokenResourceError(f"TLS: {exc}") from exc
            if self._outgoing.pending:  # post-handshake messages (a KeyUpdate's answer)
                await self._flush()
            if filled:
                return filled
            if not await self._fill():
                return 0

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        """Encrypt ``data`` and send it whole."""
        view = memoryview(data)
        try:
            while view:
                written = self._ssl.write(view)
                view = view[written:]
        except ssl.SSLError as exc:
            raise trio.BrokenResourceError(f"TLS: {exc}") from exc
        await self._flush()

    async def _fill(self) -> bool:
        """Feed OpenSSL one socket read; False when the peer closed."""
        count = await self._socket.recv_into(self._buffer)
        if not count:
            self._incoming.write_eof()
            return False
        self._incoming.write(memoryview(self._buffer)[:count])
        return True

    async def _flush(self, *, best_effort: bool = False) -> None:
        data = self._outgoing.read()
        if not data:
            return
        try:
            with trio.move_on_after(1) if best_effort else contextlib.nullcontext():
                await self.transport_stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            if not best_effort:
                raise

    async def aclose(self) -> None:
        """Send TLS's close_notify (clients such as asyncio's wait for it before they let go), then close."""
        with trio.CancelScope(shield=True):
            try:
                self._ssl.unwrap()
            except (ssl.SSLError, ValueError):
                pass  # (the peer's close_notify is not waited for)
            await self._flush(best_effort=True)
            await self.transport_stream.aclose()

