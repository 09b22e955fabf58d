"""Development certificates: a throwaway CA, a broker certificate and client certificates, as files.

For tests and for a one-step secure start on a developer's machine, never for production: the CA's
private key is written beside its certificate, and every key is written unencrypted (mode 0600).

>>> certs = create_dev_certificates(directory, clients={"alice": "CN=alice,OU=ServiceUsers,O=trafka"})
>>> server_context(certs.listener_settings(client_auth="required"))     # the broker's SSL listener
>>> client_context(certs.client_settings("alice"))                      # alice's side of mutual TLS

Files written into ``directory`` (created if missing, files of the same names replaced):

- ``ca-cert.pem``, ``ca-key.pem``: the CA. ``ca-cert.pem`` is what a client trusts (Kafka's
  ``ssl.truststore.type=PEM`` + ``ssl.truststore.location``; librdkafka's ``ssl.ca.location``).
- for the broker and each client NAME: ``NAME-cert.pem`` (its certificate, then the CA's),
  ``NAME-key.pem`` (its private key, PKCS#8), ``NAME-keystore.pem`` (key then certificates in one file:
  Kafka's ``ssl.keystore.type=PEM`` + ``ssl.keystore.location``) and, when a password is given,
  ``NAME.p12`` (a PKCS12 keystore with that password, alias NAME).

The broker's certificate names every host given as a subject alternative name (DNS names and IP
addresses), its subject is ``CN=<first host>``, and it serves for both TLS server and client
authentication (a broker is a client of other brokers). A client's subject is written as an RFC 4514
string, ``CN=alice,OU=ServiceUsers,O=trafka``, and comes back from a broker exactly so, as the
distinguished name that ``ssl.principal.mapping.rules`` are applied to.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["DevCertificates", "Identity", "create_dev_certificates"]

KeyType = Literal["rsa", "ec"]
_PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey

#: The name of the broker's files; a client may not take it.
BROKER = "broker"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class Identity:
    """One certificate with its private key, as files (see the module's docstring for their content)."""

    name: str
    subject: str
    certificate: Path
    key: Path
    keystore: Path
    pkcs12: Path | None = None


@dataclass(frozen=True)
class DevCertificates:
    """What :func:`create_dev_certificates` wrote, and the ``ssl.*`` settings that use it."""

    directory: Path
    ca: Path
    ca_key: Path
    broker: Identity
    clients: Mapping[str, Identity] = field(default_factory=dict)
    password: str | None = None

    def listener_settings(self, *, client_auth: str = "none", pkcs12: bool = False) -> dict[str, str]:
        """The ``ssl.*`` settings of an SSL listener serving the broker's certificate and trusting
        the CA (which signed every client certificate here). ``pkcs12`` uses the PKCS12 keystore."""
        settings = _keystore_settings(self.broker, self.password, pkcs12)
        settings.update(_truststore_settings(self.ca))
        settings["ssl.client.auth"] = client_auth
        return settings

    def client_settings(self, client: str | None = None, *, pkcs12: bool = False) -> dict[str, str]:
        """The ``ssl.*`` settings of a client trusting the CA; with ``client`` (a client's name, or
        ``"broker"`` for inter-broker connections), also presenting that certificate."""
        settings = _truststore_settings(self.ca)
        if client is not None:
            identity = self.broker if client == BROKER else self.clients.get(client)
            if identity is None:
                raise KeyError(f"no client certificate named {client!r}; there are: "
                               f"{', '.join(sorted(self.clients)) or 'none'}")
            settings.update(_keystore_settings(identity, self.password, pkcs12))
        return settings


def create_dev_certificates(
    directory: str | os.PathLike[str],
    *,
    hosts: Iterable[str] = ("localhost", "127.0.0.1"),
    clients: Mapping[str, str] | None = None,
    password: str | None = None,
    days: int = 365,
    key_type: KeyType = "rsa",
) -> DevCertificates:
    """Write a new CA, a broker certificate for ``hosts`` and one certificate per client into
    ``directory``, and return their paths.

    ``clients`` maps a file name to a subject (RFC 4514, e.g. ``{"alice": "CN=alice,O=trafka"}``);
    ``password`` also writes each identity as a PKCS12 keystore protected by it; ``days`` is how long
    the certificates are valid (from a day ago, for clocks that lag); ``key_type`` is ``"rsa"`` (2048
    bits, what every client accepts) or ``"ec"`` (P-256, faster to make).
    """
    hosts = list(hosts)
    if not hosts:
        raise ValueError("a broker certificate needs at least one host name or IP address")
    clients = dict(clients or {})
    for name in clients:
        if name == BROKER or not _NAME.fullmatch(name):
            raise ValueError(f"client name {name!r}: use letters, digits, '.', '_' or '-' (not {BROKER!r}); "
                             "it names the client's files")
    subjects = {name: _parse_subject(name, subject) for name, subject in clients.items()}
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    validity = (now - datetime.timedelta(days=1), now + datetime.timedelta(days=days))

    ca_key = _new_key(key_type)
    ca_name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "trafka"),
                         x509.NameAttribute(NameOID.COMMON_NAME, "trafka development CA")])
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key(), validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_path = directory / "ca-cert.pem"
    ca_key_path = directory / "ca-key.pem"
    ca_path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_private(ca_key_path, _pkcs8(ca_key))

    def issue(name: str, subject: x509.Name, purposes: list[x509.ObjectIdentifier],
              san: x509.SubjectAlternativeName | None) -> Identity:
        key = _new_key(key_type)
        builder = (
            _builder(subject, ca_name, key.public_key(), validity)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False,
                                         key_encipherment=isinstance(key, rsa.RSAPrivateKey),
                                         data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .add_extension(x509.ExtendedKeyUsage(purposes), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                           critical=False)
        )
        if san is not None:
            builder = builder.add_extension(san, critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        chain = cert.public_bytes(serialization.Encoding.PEM) + ca_cert.public_bytes(serialization.Encoding.PEM)
        identity = Identity(
            name=name,
            subject=subject.rfc4514_string(),
            certificate=directory / f"{name}-cert.pem",
            key=directory / f"{name}-key.pem",
            keystore=directory / f"{name}-keystore.pem",
            pkcs12=directory / f"{name}.p12" if password is not None else None,
        )
        identity.certificate.write_bytes(chain)
        _write_private(identity.key, _pkcs8(key))
        _write_private(identity.keystore, _pkcs8(key) + chain)
        if identity.pkcs12 is not None:
            assert password is not None
            _write_private(identity.pkcs12, pkcs12.serialize_key_and_certificates(
                name.encode(), key, cert, [ca_cert],
                serialization.BestAvailableEncryption(password.encode())))
        return identity

    broker = issue(
        BROKER,
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]),
        [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
        x509.SubjectAlternativeName([_general_name(host) for host in hosts]),
    )
    issued = {name: issue(name, subject, [ExtendedKeyUsageOID.CLIENT_AUTH], None)
              for name, subject in subjects.items()}
    return DevCertificates(directory=directory, ca=ca_path, ca_key=ca_key_path, broker=broker,
                           clients=issued, password=password)


def _parse_subject(name: str, subject: str) -> x509.Name:
    try:
        parsed = x509.Name.from_rfc4514_string(subject)
    except ValueError as e:
        raise ValueError(f"client {name!r}: subject {subject!r} is not an RFC 4514 distinguished name "
                         f"such as 'CN=alice,OU=ServiceUsers,O=trafka' ({e})") from None
    if not len(parsed):
        raise ValueError(f"client {name!r}: the subject is empty")
    return parsed


def _new_key(key_type: KeyType) -> _PrivateKey:
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if key_type == "ec":
        return ec.generate_private_key(ec.SECP256R1())
    raise ValueError(f"key_type={key_type!r}: use 'rsa' or 'ec'")


def _builder(subject: x509.Name, issuer: x509.Name, public_key: object,
             validity: tuple[datetime.datetime, datetime.datetime]) -> x509.CertificateBuilder:
    return (x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(public_key)  # type: ignore[arg-type]
            .serial_number(x509.random_serial_number())
            .not_valid_before(validity[0])
            .not_valid_after(validity[1]))


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _pkcs8(key: _PrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _write_private(path: Path, data: bytes) -> None:
    """Write a file only its owner may read (created so, never widened after the fact)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(data)


def _keystore_settings(identity: Identity, password: str | None, use_pkcs12: bool) -> dict[str, str]:
    if use_pkcs12:
        if identity.pkcs12 is None or password is None:
            raise ValueError("no PKCS12 keystores here: create_dev_certificates(..., password=...) writes them")
        return {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(identity.pkcs12),
                "ssl.keystore.password": password}
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(identity.keystore)}


def _truststore_settings(ca: Path) -> dict[str, str]:
    return {"ssl.truststore.type": "PEM", "ssl.truststore.location": str(ca)}
