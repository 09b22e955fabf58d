"""TLS contexts from Kafka's ssl.* settings (broker/security/tls.py) and the development certificates
(broker/security/dev_certs.py), proven by real handshakes between a server context and a client
context over trio.testing.memory_stream_pair and trio.SSLStream: PEM files, inline PEM, PKCS12, encrypted
keys, client authentication, protocol limits, cipher names; and every refusal's message."""
from __future__ import annotations

import logging
import os
import shutil
import ssl
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
import trio.testing
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from trafka.broker.security.dev_certs import DevCertificates, create_dev_certificates
from trafka.broker.security.principal import ANONYMOUS, principal_name
from trafka.broker.security.tls import TlsConfigError, client_context, server_context

PASSWORD = "changeit"  # keytool wants six characters or more
ALICE = "CN=alice,OU=ServiceUsers,O=trafka"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> DevCertificates:
    return create_dev_certificates(tmp_path_factory.mktemp("certs"), password=PASSWORD,
                                   clients={"alice": ALICE, "bob": "CN=bob,O=trafka"})


@pytest.fixture(scope="module")
def strangers(tmp_path_factory: pytest.TempPathFactory) -> DevCertificates:
    """Certificates from another CA, which ``certs`` does not trust."""
    return create_dev_certificates(tmp_path_factory.mktemp("strangers"), key_type="ec",
                                   clients={"mallory": "CN=mallory"})


@dataclass
class Side:
    version: str | None = None
    cipher: str | None = None
    peer: bytes | None = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


async def handshake(server: ssl.SSLContext, client: ssl.SSLContext, hostname: str = "localhost") -> tuple[Side, Side]:
    """Both ends of one TLS connection; the server sends a few bytes that the client must read (in TLS
    1.3 a server refuses a client's certificate only after the client has finished its handshake)."""
    server_transport, client_transport = trio.testing.memory_stream_pair()
    server_stream = trio.SSLStream(server_transport, server, server_side=True)
    client_stream = trio.SSLStream(client_transport, client, server_hostname=hostname)
    server_side, client_side = Side(), Side()

    async def serve() -> None:
        try:
            await server_stream.do_handshake()
            server_side.version, server_side.cipher = server_stream.version(), server_stream.cipher()[0]
            server_side.peer = server_stream.getpeercert(binary_form=True)
            await server_stream.send_all(b"ping")
        except trio.BrokenResourceError as e:
            server_side.error = e.__cause__ or e
            await server_transport.aclose()

    async def connect() -> None:
        try:
            await client_stream.do_handshake()
            assert await client_stream.receive_some(4) == b"ping"
            client_side.version, client_side.cipher = client_stream.version(), client_stream.cipher()[0]
        except trio.BrokenResourceError as e:
            client_side.error = e.__cause__ or e
            await client_transport.aclose()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve)
            nursery.start_soon(connect)
    return server_side, client_side


def refused(settings: dict[str, str], *, server: bool = True) -> str:
    with pytest.raises(TlsConfigError) as caught:
        (server_context if server else client_context)(settings)
    return str(caught.value)


# -- key stores and truststores -------------------------------------------------------------------------

async def test_pem_files(certs: DevCertificates) -> None:
    server, client = await handshake(server_context(certs.listener_settings()), client_context(certs.client_settings()))
    assert server.ok and client.ok
    assert server.version == client.version == "TLSv1.3"
    assert server.peer is None and principal_name(server.peer) == ANONYMOUS


async def test_pem_key_after_the_certificates_and_chain_out_of_order(certs: DevCertificates, tmp_path: Path) -> None:
    leaf, ca = _pem_certificates(certs.broker.certificate)
    keystore = tmp_path / "broker.pem"
    keystore.write_bytes(ca + leaf + certs.broker.key.read_bytes())
    settings = certs.listener_settings() | {"ssl.keystore.location": str(keystore)}
    server, client = await handshake(server_context(settings), client_context(certs.client_settings()))
    assert server.ok and client.ok


async def test_inline_pem(certs: DevCertificates) -> None:
    settings = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": certs.broker.certificate.read_text(),
        "ssl.keystore.key": certs.broker.key.read_text(),
    }
    client_settings = {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": certs.ca.read_text()}
    server, client = await handshake(server_context(settings), client_context(client_settings))
    assert server.ok and client.ok


async def test_inline_pem_on_one_line(certs: DevCertificates) -> None:
    """A properties value continued with backslashes arrives without its line breaks."""
    def one_line(path: Path) -> str:
        return " ".join(path.read_text().split())
    settings = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": one_line(certs.broker.certificate),
        "ssl.keystore.key": one_line(certs.broker.key),
    }
    client_settings = {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": one_line(certs.ca)}
    server, client = await handshake(server_context(settings), client_context(client_settings))
    assert server.ok and client.ok


async def test_pkcs12_keystore_and_truststore(certs: DevCertificates, tmp_path: Path) -> None:
    ca = x509.load_pem_x509_certificate(certs.ca.read_bytes())
    protected = tmp_path / "trust.p12"
    protected.write_bytes(pkcs12.serialize_key_and_certificates(
        None, None, None, [ca], serialization.BestAvailableEncryption(PASSWORD.encode())))
    open_store = tmp_path / "trust-open.p12"
    open_store.write_bytes(pkcs12.serialize_key_and_certificates(None, None, None, [ca], serialization.NoEncryption()))
    server_settings = certs.listener_settings(pkcs12=True)
    for client_settings in (
        {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(protected),
         "ssl.truststore.password": PASSWORD},
        # Kafka reads a truststore without its password (no integrity check), when its certificates allow.
        {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(open_store)},
    ):
        server, client = await handshake(server_context(server_settings), client_context(client_settings))
        assert server.ok and client.ok


async def test_a_pkcs12_file_typed_jks_is_read_as_java_reads_it(certs: DevCertificates) -> None:
    settings = certs.listener_settings(pkcs12=True)
    del settings["ssl.keystore.type"]  # Kafka's default, JKS
    server, client = await handshake(server_context(settings), client_context(certs.client_settings()))
    assert server.ok and client.ok


@pytest.mark.parametrize("key_format", ["pkcs8", "traditional"])
async def test_encrypted_private_key(certs: DevCertificates, tmp_path: Path, key_format: str) -> None:
    key = serialization.load_pem_private_key(certs.broker.key.read_bytes(), None)
    fmt = (serialization.PrivateFormat.PKCS8 if key_format == "pkcs8"
           else serialization.PrivateFormat.TraditionalOpenSSL)
    encrypted = key.private_bytes(serialization.Encoding.PEM, fmt,
                                  serialization.BestAvailableEncryption(b"key secret"))
    keystore = tmp_path / "broker.pem"
    keystore.write_bytes(encrypted + certs.broker.certificate.read_bytes())
    settings = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore), "ssl.key.password": "key secret"}
    server, client = await handshake(server_context(settings), client_context(certs.client_settings()))
    assert server.ok and client.ok

    inline = {"ssl.keystore.type": "PEM", "ssl.keystore.key": encrypted.decode(),
              "ssl.keystore.certificate.chain": certs.broker.certificate.read_text(), "ssl.key.password": "key secret"}
    server_context(inline)
    assert "the private key is encrypted; set ssl.key.password" in refused(settings | {"ssl.key.password": ""})
    assert "ssl.key.password does not decrypt the private key" in refused(settings | {"ssl.key.password": "wrong"})
    plain = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker.keystore),
             "ssl.key.password": "key secret"}
    assert "ssl.key.password is set, but the private key is not encrypted" in refused(plain)


@pytest.mark.skipif(shutil.which("keytool") is None, reason="keytool (a JDK) is not installed")
async def test_stores_made_by_keytool(certs: DevCertificates, tmp_path: Path) -> None:
    """A truststore made by Java's keytool is read; a JKS key store is refused with a keytool command
    that, run as given, makes a key store that is read."""
    def keytool(*args: str) -> None:
        subprocess.run(["keytool", *args], check=True, capture_output=True, timeout=120)

    truststore = tmp_path / "truststore.p12"
    keytool("-importcert", "-noprompt", "-alias", "ca", "-file", str(certs.ca), "-keystore", str(truststore),
            "-storetype", "PKCS12", "-storepass", PASSWORD)
    jks = tmp_path / "broker.jks"
    assert certs.broker.pkcs12 is not None
    keytool("-importkeystore", "-srckeystore", str(certs.broker.pkcs12), "-srcstoretype", "PKCS12",
            "-srcstorepass", PASSWORD, "-destkeystore", str(jks), "-deststoretype", "JKS", "-deststorepass", PASSWORD)

    message = refused({"ssl.keystore.location": str(jks), "ssl.keystore.password": PASSWORD})
    command = message.split("`")[1].split()
    assert command[0] == "keytool"
    keytool(*command[1:], "-srcstorepass", PASSWORD, "-deststorepass", PASSWORD)
    converted = tmp_path / "broker.p12"
    assert f"ssl.keystore.location={converted}" in message

    server_settings = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(converted),
                       "ssl.keystore.password": PASSWORD}
    client_settings = {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(truststore),
                       "ssl.truststore.password": PASSWORD}
    server, client = await handshake(server_context(server_settings), client_context(client_settings))
    assert server.ok and client.ok


# -- client authentication ------------------------------------------------------------------------------

async def test_client_auth_none_asks_for_no_certificate(certs: DevCertificates) -> None:
    server, client = await handshake(server_context(certs.listener_settings(client_auth="none")),
                                     client_context(certs.client_settings("alice")))
    assert server.ok and client.ok
    assert principal_name(server.peer) == ANONYMOUS


async def test_client_auth_requested(certs: DevCertificates) -> None:
    listener = server_context(certs.listener_settings(client_auth="requested"))
    server, client = await handshake(listener, client_context(certs.client_settings()))
    assert server.ok and client.ok
    assert principal_name(server.peer) == ANONYMOUS

    server, client = await handshake(listener, client_context(certs.client_settings("alice")))
    assert server.ok and client.ok
    assert principal_name(server.peer) == f"User:{ALICE}"


async def test_client_auth_required(certs: DevCertificates, strangers: DevCertificates) -> None:
    listener = server_context(certs.listener_settings(client_auth="required"))
    server, client = await handshake(listener, client_context(certs.client_settings()))
    assert not server.ok and not client.ok, "a client without a certificate is refused"

    server, client = await handshake(listener, client_context(certs.client_settings("bob")))
    assert server.ok and client.ok
    assert principal_name(server.peer, "RULE:^CN=([^,]*),.*$/$1/U") == "User:BOB"

    stranger = certs.client_settings() | {
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(strangers.clients["mallory"].keystore)}
    server, client = await handshake(listener, client_context(stranger))
    assert not server.ok and not client.ok, "a certificate from an untrusted CA is refused"
    assert "certificate verify failed" in str(server.error)


async def test_client_auth_requested_still_verifies_a_given_certificate(
        certs: DevCertificates, strangers: DevCertificates) -> None:
    stranger = certs.client_settings() | {
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(strangers.clients["mallory"].keystore)}
    server, client = await handshake(server_context(certs.listener_settings(client_auth="requested")),
                                     client_context(stranger))
    assert not server.ok and not client.ok


async def test_inter_broker_mutual_tls_with_the_broker_certificate(certs: DevCertificates) -> None:
    server, client = await handshake(server_context(certs.listener_settings(client_auth="required")),
                                     client_context(certs.client_settings("broker")))
    assert server.ok and client.ok
    assert principal_name(server.peer) == "User:CN=localhost"


def test_client_auth_values(certs: DevCertificates) -> None:
    assert server_context(certs.listener_settings(client_auth="REQUIRED")).verify_mode == ssl.CERT_REQUIRED
    assert server_context(certs.listener_settings(client_auth="requested")).verify_mode == ssl.CERT_OPTIONAL
    assert server_context(certs.listener_settings(client_auth="none")).verify_mode == ssl.CERT_NONE
    settings = certs.listener_settings()
    del settings["ssl.client.auth"]
    assert server_context(settings).verify_mode == ssl.CERT_NONE
    assert refused(certs.listener_settings(client_auth="want")) == (
        "ssl.client.auth=want: expected one of required, requested, none")


# -- host name check ----------------------------------------------------------------------------------

async def test_endpoint_identification(certs: DevCertificates) -> None:
    listener = server_context(certs.listener_settings())
    for hostname in ("localhost", "127.0.0.1"):
        server, client = await handshake(listener, client_context(certs.client_settings()), hostname)
        assert server.ok and client.ok, hostname

    server, client = await handshake(listener, client_context(certs.client_settings()), "broker.example")
    assert not client.ok and "Hostname mismatch" in str(client.error)

    unchecked = certs.client_settings() | {"ssl.endpoint.identification.algorithm": ""}
    server, client = await handshake(listener, client_context(unchecked), "broker.example")
    assert server.ok and client.ok

    assert "ssl.endpoint.identification.algorithm=ldaps: use https" in refused(
        certs.client_settings() | {"ssl.endpoint.identification.algorithm": "ldaps"}, server=False)


async def test_the_chain_is_verified_even_without_the_host_name_check(
        certs: DevCertificates, strangers: DevCertificates) -> None:
    unchecked = strangers.client_settings() | {"ssl.endpoint.identification.algorithm": ""}
    server, client = await handshake(server_context(certs.listener_settings()), client_context(unchecked))
    assert not client.ok and "certificate verify failed" in str(client.error)


# -- protocols --------------------------------------------------------------------------------------------

async def test_enabled_protocols(certs: DevCertificates) -> None:
    tls12 = server_context(certs.listener_settings() | {"ssl.enabled.protocols": "TLSv1.2"})
    server, client = await handshake(tls12, client_context(certs.client_settings()))
    assert server.ok and client.version == "TLSv1.2"

    tls13_client = client_context(certs.client_settings() | {"ssl.enabled.protocols": "TLSv1.3"})
    server, client = await handshake(tls12, tls13_client)
    assert not server.ok and not client.ok


async def test_ssl_protocol_caps_the_client(certs: DevCertificates) -> None:
    capped = client_context(certs.client_settings() | {"ssl.protocol": "TLSv1.2"})
    server, client = await handshake(server_context(certs.listener_settings()), capped)
    assert server.ok and client.version == "TLSv1.2"

    tls13 = server_context(certs.listener_settings() | {"ssl.enabled.protocols": "TLSv1.3"})
    server, client = await handshake(tls13, capped)
    assert not server.ok and not client.ok

    # A server serves every enabled protocol, whatever its ssl.protocol (as Java's server engines do).
    server_capped = server_context(certs.listener_settings() | {"ssl.protocol": "TLSv1.2"})
    server, client = await handshake(server_capped, client_context(certs.client_settings()))
    assert server.version == "TLSv1.3"


def test_protocol_settings_refused(certs: DevCertificates, caplog: pytest.LogCaptureFixture) -> None:
    listener = certs.listener_settings()
    assert refused(listener | {"ssl.enabled.protocols": "TLSv1.4"}) == (
        "ssl.enabled.protocols=TLSv1.4: unknown protocol 'TLSv1.4'; use TLSv1.2 and/or TLSv1.3")
    assert "TLSv1.1 and older are insecure and not served" in refused(
        listener | {"ssl.enabled.protocols": "TLSv1.1, TLSv1"})
    assert "ssl.protocol=DTLS: unknown protocol" in refused(listener | {"ssl.protocol": "DTLS"})
    assert "ssl.protocol=TLSv1.2 allows none of ssl.enabled.protocols=TLSv1.3" in refused(
        certs.client_settings() | {"ssl.protocol": "TLSv1.2", "ssl.enabled.protocols": "TLSv1.3"}, server=False)

    with caplog.at_level(logging.WARNING, logger="trafka.broker.security.tls"):
        context = server_context(listener | {"ssl.enabled.protocols": "TLSv1.2,TLSv1.1,TLSv1"})
    assert context.minimum_version == context.maximum_version == ssl.TLSVersion.TLSv1_2
    assert "TLSv1.1, TLSv1 left out" in caplog.text


# -- cipher suites ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",  # IANA, as Java and Kafka users write it
    "ECDHE-RSA-AES256-GCM-SHA384",  # OpenSSL's name
])
async def test_cipher_suite_names(certs: DevCertificates, name: str) -> None:
    listener = server_context(certs.listener_settings() | {"ssl.cipher.suites": name})
    server, client = await handshake(listener, client_context(certs.client_settings()))
    assert server.ok and client.ok
    assert server.cipher == "ECDHE-RSA-AES256-GCM-SHA384"
    assert server.version == "TLSv1.2", "no TLS 1.3 suite listed: TLS 1.3 is not used, as in Java"


async def test_java_ssl_prefixed_names_and_dhe_suites(certs: DevCertificates) -> None:
    for name, expected in (("SSL_DHE_RSA_WITH_AES_128_GCM_SHA256", "DHE-RSA-AES128-GCM-SHA256"),
                           ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "ECDHE-RSA-AES128-SHA256")):
        listener = server_context(certs.listener_settings() | {"ssl.cipher.suites": name})
        server, client = await handshake(listener, client_context(certs.client_settings()))
        assert server.ok and client.ok, name
        assert server.cipher == expected


async def test_tls13_suites_listed_together(certs: DevCertificates) -> None:
    suites = ("TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384,TLS_CHACHA20_POLY1305_SHA256,"
              "TLS_EMPTY_RENEGOTIATION_INFO_SCSV")
    listener = server_context(certs.listener_settings() | {"ssl.cipher.suites": suites})
    server, client = await handshake(listener, client_context(certs.client_settings()))
    assert server.version == "TLSv1.3"
    assert listener.minimum_version == ssl.TLSVersion.TLSv1_3, "no TLS 1.2 suite listed: TLS 1.2 is not used"


async def test_no_shared_cipher_suite(certs: DevCertificates) -> None:
    listener = server_context(
        certs.listener_settings() | {"ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"})
    other = client_context(certs.client_settings() | {"ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"})
    server, client = await handshake(listener, other)
    assert not server.ok and not client.ok


def test_cipher_suites_refused(certs: DevCertificates) -> None:
    listener = certs.listener_settings()
    assert "unknown cipher suite 'TLS_FOO_WITH_BAR'" in refused(listener | {"ssl.cipher.suites": "TLS_FOO_WITH_BAR"})
    assert "unknown cipher suite 'HIGH'" in refused(listener | {"ssl.cipher.suites": "HIGH"})
    assert "TLS_ECDH_anon_WITH_AES_128_CBC_SHA is not served" in refused(
        listener | {"ssl.cipher.suites": "TLS_ECDH_anon_WITH_AES_128_CBC_SHA"})
    assert "SSL_RSA_WITH_3DES_EDE_CBC_SHA is not served" in refused(
        listener | {"ssl.cipher.suites": "SSL_RSA_WITH_3DES_EDE_CBC_SHA"})
    assert "TLS 1.3 suites cannot be chosen one by one" in refused(
        listener | {"ssl.cipher.suites": "TLS_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"})
    assert "TLS_AES_128_CCM_SHA256 is not served" in refused(listener | {"ssl.cipher.suites": "TLS_AES_128_CCM_SHA256"})
    assert "none of these suites works with the enabled protocols (TLSv1.2)" in refused(listener | {
        "ssl.cipher.suites": "TLS_AES_256_GCM_SHA384,TLS_CHACHA20_POLY1305_SHA256,TLS_AES_128_GCM_SHA256",
        "ssl.enabled.protocols": "TLSv1.2"})


def test_every_openssl_suite_has_its_iana_name() -> None:
    """The name table covers every TLS 1.2 suite this OpenSSL offers with certificates and encryption."""
    from trafka.broker.security import tls
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.set_ciphers("ALL:COMPLEMENTOFALL:@SECLEVEL=0")
    offered = {c["name"] for c in context.get_ciphers() if c["protocol"] != "TLSv1.3"
               and c["auth"] not in ("auth-null", "auth-psk", "auth-srp") and c["symmetric"] is not None
               and "PSK" not in c["name"] and "SRP" not in c["name"]}
    assert offered <= set(tls._IANA_TO_OPENSSL.values())
    assert tls._IANA_TO_OPENSSL["TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"] == "ECDHE-ECDSA-CHACHA20-POLY1305"


# -- what is refused, and how it is said -----------------------------------------------------------------

def test_keystore_settings_refused(certs: DevCertificates, tmp_path: Path) -> None:
    pem_file = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker.keystore)}
    inline = {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": certs.broker.certificate.read_text(),
              "ssl.keystore.key": certs.broker.key.read_text()}
    p12 = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(certs.broker.pkcs12),
           "ssl.keystore.password": PASSWORD}
    cases = [
        ({}, "an SSL listener needs a key store: set ssl.keystore.location"),
        (pem_file | {"ssl.keystore.password": "x"}, "ssl.keystore.password cannot be used with ssl.keystore.type=PEM"),
        (inline | {"ssl.keystore.type": "PKCS12"},
         "ssl.keystore.key is only for ssl.keystore.type=PEM, but ssl.keystore.type is PKCS12"),
        ({k: v for k, v in inline.items() if k != "ssl.keystore.certificate.chain"},
         "ssl.keystore.key is set, but ssl.keystore.certificate.chain is not"),
        ({k: v for k, v in inline.items() if k != "ssl.keystore.key"},
         "ssl.keystore.certificate.chain is set, but ssl.keystore.key is not"),
        (inline | {"ssl.keystore.location": str(certs.broker.keystore)},
         "ssl.keystore.location and ssl.keystore.key are both set"),
        (inline | {"ssl.keystore.password": "x"}, "ssl.keystore.password cannot be used with ssl.keystore.type=PEM"),
        ({"ssl.keystore.password": "x"}, "ssl.keystore.password is set, but ssl.keystore.location is not"),
        ({k: v for k, v in p12.items() if k != "ssl.keystore.password"},
         f"ssl.keystore.location={certs.broker.pkcs12} is set, but ssl.keystore.password is not"),
        (p12 | {"ssl.keystore.password": "wrong"}, "could not read it as PKCS12 with ssl.keystore.password"),
        (p12 | {"ssl.keystore.location": str(tmp_path / "missing.p12")}, "missing.p12: no such file"),
        (p12 | {"ssl.keystore.location": str(certs.broker.keystore)},
         "holds PEM, but ssl.keystore.type is PKCS12: set ssl.keystore.type=PEM"),
        (pem_file | {"ssl.keystore.location": str(certs.broker.pkcs12)},
         "is a PKCS12 file, but ssl.keystore.type is PEM: set ssl.keystore.type=PKCS12"),
        (p12 | {"ssl.keystore.type": "JCEKS"}, "ssl.keystore.type=JCEKS: trafka reads PEM and PKCS12 keystores"),
        (pem_file | {"ssl.keystore.location": str(certs.broker.certificate)}, "no private key found"),
        (pem_file | {"ssl.keystore.location": str(certs.broker.key)}, "no certificate found"),
        (inline | {"ssl.keystore.key": certs.clients["alice"].key.read_text()},
         "ssl.keystore.key: no certificate in the chain belongs to the private key"),
        (inline | {"ssl.keystore.key": certs.broker.key.read_text() * 2}, "expected one private key, but found 2"),
        (pem_file | {"ssl.engine.factory.class": "com.example.Factory"},
         "ssl.engine.factory.class=com.example.Factory: trafka cannot load a Java class"),
    ]
    for settings, expected in cases:
        assert expected in refused(settings), expected
    # A key store's content is never echoed into a message.
    assert "PRIVATE KEY" not in refused(inline | {"ssl.keystore.key": certs.clients["alice"].key.read_text()})


def test_jks_refused_with_the_way_out(certs: DevCertificates, tmp_path: Path) -> None:
    jks = tmp_path / "server.keystore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02" + bytes(64))
    message = refused({"ssl.keystore.location": str(jks), "ssl.keystore.password": PASSWORD})
    assert message.startswith(f"ssl.keystore.location={jks} is a JKS keystore (ssl.keystore.type=JKS is Kafka's "
                              "default), a Java-only format trafka does not read.")
    target = tmp_path / "server.keystore.p12"
    assert (f"`keytool -importkeystore -srckeystore {jks} -srcstoretype JKS -destkeystore {target} "
            "-deststoretype PKCS12`") in message
    assert f"set ssl.keystore.type=PKCS12 and ssl.keystore.location={target}; or use PEM files" in message

    truststore = certs.client_settings() | {"ssl.truststore.type": "JKS", "ssl.truststore.location": str(jks)}
    assert "is a JKS truststore" in refused(truststore, server=False)


def test_truststore_settings_refused(certs: DevCertificates, tmp_path: Path) -> None:
    listener = certs.listener_settings()
    cases = [
        (listener | {"ssl.truststore.password": "x"},
         "ssl.truststore.password cannot be used with ssl.truststore.type=PEM"),
        (listener | {"ssl.truststore.certificates": certs.ca.read_text()},
         "ssl.truststore.location and ssl.truststore.certificates are both set"),
        ({k: v for k, v in listener.items() if k != "ssl.truststore.location"}
         | {"ssl.truststore.type": "PKCS12", "ssl.truststore.certificates": certs.ca.read_text()},
         "ssl.truststore.certificates is only for ssl.truststore.type=PEM, but ssl.truststore.type is PKCS12"),
        ({k: v for k, v in listener.items() if k != "ssl.truststore.location"} | {"ssl.truststore.password": "x"},
         "ssl.truststore.password is set, but ssl.truststore.location is not"),
        (listener | {"ssl.truststore.location": str(certs.broker.key)}, "no certificate found"),
        (listener | {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": str(certs.broker.pkcs12),
                     "ssl.truststore.password": "wrong"}, "could not read it as PKCS12 with ssl.truststore.password"),
    ]
    for settings, expected in cases:
        assert expected in refused(settings), expected


def test_without_a_truststore_the_system_authorities_are_trusted(certs: DevCertificates) -> None:
    settings = certs.listener_settings(client_auth="required")
    del settings["ssl.truststore.location"]
    assert server_context(settings).verify_mode == ssl.CERT_REQUIRED
    client = client_context({})
    assert client.check_hostname and client.verify_mode == ssl.CERT_REQUIRED


def test_no_files_are_left_behind(certs: DevCertificates, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    server_context(certs.listener_settings(pkcs12=True) | {"ssl.cipher.suites": "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256"})
    client_context(certs.client_settings("alice"))
    refused({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.broker.keystore),
             "ssl.keystore.key": "x"})
    assert list(scratch.iterdir()) == []


# -- development certificates -----------------------------------------------------------------------------

def test_dev_certificates(certs: DevCertificates) -> None:
    assert certs.broker.subject == "CN=localhost"
    assert certs.clients["alice"].subject == ALICE
    broker = x509.load_pem_x509_certificate(certs.broker.certificate.read_bytes())
    names = broker.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    for identity in (certs.broker, *certs.clients.values()):
        for private in (identity.key, identity.keystore, identity.pkcs12):
            assert private is not None
            assert stat.S_IMODE(os.stat(private).st_mode) == 0o600, private
    assert stat.S_IMODE(os.stat(certs.ca_key).st_mode) == 0o600
    with pytest.raises(KeyError, match="no client certificate named 'carol'; there are: alice, bob"):
        certs.client_settings("carol")


def test_dev_certificates_for_other_hosts(tmp_path: Path) -> None:
    made = create_dev_certificates(tmp_path, hosts=["kafka-1.internal", "10.0.0.7", "::1"], key_type="ec")
    broker = x509.load_pem_x509_certificate(made.broker.certificate.read_bytes())
    names = broker.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["kafka-1.internal"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["10.0.0.7", "::1"]
    assert made.broker.pkcs12 is None
    with pytest.raises(ValueError, match="no PKCS12 keystores here"):
        made.listener_settings(pkcs12=True)
    with pytest.raises(ValueError, match="is not an RFC 4514 distinguished name"):
        create_dev_certificates(tmp_path, clients={"x": "not a name"})
    with pytest.raises(ValueError, match="client name 'broker'"):
        create_dev_certificates(tmp_path, clients={"broker": "CN=x"})


def _pem_certificates(path: Path) -> list[bytes]:
    return [c.public_bytes(serialization.Encoding.PEM) for c in x509.load_pem_x509_certificates(path.read_bytes())]


@pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl command is not installed")
def test_dhe_suites_get_rfc7919_ffdhe2048() -> None:
    from trafka.broker.security import tls
    shown = subprocess.run(["openssl", "dhparam", "-noout", "-text"], input=tls._ffdhe2048_pem(),
                           capture_output=True, check=True, timeout=60)
    assert b"GROUP: ffdhe2048" in shown.stdout
