"""The broker's TLS transport (broker.security.tls_transport) against trio's own TLS client, over a real
socket pair: large frames both ways, the peer's close_notify answered, and a failed handshake's alert
reaching the client."""
from __future__ import annotations

import os
import ssl

import pytest
import trio

from trafka.broker.security.dev_certs import create_dev_certificates
from trafka.broker.security.tls import client_context, server_context
from trafka.broker.security.tls_transport import TlsTransport


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return create_dev_certificates(tmp_path_factory.mktemp("certs"), clients={"alice": "CN=alice"}, key_type="ec")


async def _pair(server_settings, client_settings):
    left, right = trio.socket.socketpair()
    server = TlsTransport(trio.SocketStream(left), server_context(server_settings))
    client = trio.SSLStream(trio.SocketStream(right), client_context(client_settings), server_hostname="localhost")
    return server, client


async def test_large_frames_both_ways_and_a_clean_close(certs):
    server, client = await _pair(certs.listener_settings(), certs.client_settings())
    upload, download = os.urandom(3 * 1024 * 1024 + 17), os.urandom(2 * 1024 * 1024 + 5)
    received = bytearray()

    async def serve():
        await server.do_handshake()
        room = bytearray(1 << 20)
        while len(received) < len(upload):
            count = await server.receive_into(memoryview(room))
            received.extend(room[:count])
        await server.send_all(download)
        assert await server.receive_into(memoryview(room)) == 0  # the client's close_notify
        await server.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        await client.send_all(upload)
        got = bytearray()
        while len(got) < len(download):
            got.extend(await client.receive_some(1 << 20))
        await client.aclose()  # sends close_notify; the server's answers it
    assert bytes(received) == upload and bytes(got) == download


async def test_a_failed_handshake_sends_its_alert(certs):
    required = certs.listener_settings(client_auth="required")
    server, client = await _pair(required, certs.client_settings())  # no client certificate

    async def serve():
        with pytest.raises(ssl.SSLError):
            await server.do_handshake()
        await server.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        with pytest.raises(trio.BrokenResourceError) as refused:
            await client.do_handshake()
            await client.receive_some(1)  # TLS 1.3: the refusal arrives after the client's Finished
        assert "CERTIFICATE_REQUIRED" in str(refused.value.__cause__).upper().replace(" ", "_")


async def test_mutual_tls_gives_the_clients_certificate(certs):
    server, client = await _pair(certs.listener_settings(client_auth="required"), certs.client_settings("alice"))

    async def serve():
        await server.do_handshake()
        assert server.getpeercert(binary_form=True)
        await server.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        await client.do_handshake()


async def test_both_sides_of_the_brokers_own_transport(certs):
    """A broker's connection to another (the client's side, checking the host name) against a served one."""
    left, right = trio.socket.socketpair()
    server = TlsTransport(trio.SocketStream(left), server_context(certs.listener_settings(client_auth="required")))
    client = TlsTransport(trio.SocketStream(right), client_context(certs.client_settings("broker")),
                          server_hostname="localhost")
    payload = os.urandom(1024 * 1024 + 3)

    async def serve():
        await server.do_handshake()
        room, got = bytearray(256 * 1024), bytearray()
        while len(got) < len(payload):
            got.extend(room[:await server.receive_into(memoryview(room))])
        await server.send_all(bytes(reversed(got)))
        await server.aclose()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve)
        await client.do_handshake()
        await client.send_all(payload)
        room, back = bytearray(1 << 20), bytearray()
        while len(back) < len(payload):
            count = await client.receive_into(memoryview(room))
            assert count, "closed early"
            back.extend(room[:count])
        assert await client.receive_into(memoryview(room)) == 0  # the server's close_notify
        await client.aclose()
    assert bytes(back) == bytes(reversed(payload))
