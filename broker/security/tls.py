"""TLS for SSL and SASL_SSL listeners and for the broker's own client side, from Kafka's ``ssl.*`` settings.

:func:`server_context` and :func:`client_context` take one flat mapping keyed by the plain ``ssl.*``
names (the caller resolves ``listener.name.<listener>.ssl.*`` over ``ssl.*``), read every file they
need, check everything, and return a ready :class:`ssl.SSLContext` for :class:`trio.SSLStream`. They are
called once at start (or at a reconfiguration), never per connection. Anything missing or wrong raises
:class:`TlsConfigError`, whose message names the setting; a missing setting takes Kafka's default.

=========================================  ====================================================================
setting (Kafka's default)                  what it does here
=========================================  ====================================================================
``ssl.keystore.type`` (JKS)                ``PEM`` or ``PKCS12``. ``JKS``, a Java-only format, is refused with
                                           the keytool command that converts it, except that a file typed JKS
                                           that holds PKCS12 is read as PKCS12, as Java does.
``ssl.keystore.location``                  The key store file: PEM (the private key and the certificate chain,
                                           in any order) or PKCS12.
``ssl.keystore.password``                  The PKCS12 store's password; refused with PEM, as Kafka does.
``ssl.key.password``                       Decrypts an encrypted PEM private key (PKCS#8, or OpenSSL's
                                           traditional format). Ignored for PKCS12, whose key has the store's
                                           password (keytool makes no other kind).
``ssl.keystore.certificate.chain``,        Inline PEM (KIP-651) instead of a file, with ``ssl.keystore.type=PEM``.
``ssl.keystore.key``                       Line breaks may be spaces, as a properties file gives them.
``ssl.truststore.type`` (JKS)              As ``ssl.keystore.type``.
``ssl.truststore.location``                The certificates to trust: a PEM file or a PKCS12 store.
``ssl.truststore.password``                The PKCS12 truststore's password (optional, as in Kafka, where the
                                           store's certificates are not encrypted); refused with PEM.
``ssl.truststore.certificates``            Inline PEM certificates to trust, with ``ssl.truststore.type=PEM``.
                                           Without any truststore the system's certificate authorities are
                                           trusted, as Java trusts its cacerts.
``ssl.client.auth`` (none)                 Server: ``none``, ``requested`` (a certificate is asked for and,
                                           when given, verified) or ``required`` (a client without one is
                                           refused in the handshake).
``ssl.enabled.protocols``                  ``TLSv1.2`` and/or ``TLSv1.3``. TLSv1.1 and older are insecure and
(TLSv1.2,TLSv1.3)                          left out with a warning, as current Java disables them; a list of
                                           nothing else is refused.
``ssl.protocol`` (TLSv1.3)                 ``TLSv1.3``, ``TLSv1.2``, ``TLS`` or ``SSL``. On the client side it
                                           caps the version (``TLSv1.2``: never TLS 1.3), as Kafka documents;
                                           a server serves every enabled protocol.
``ssl.cipher.suites`` (the defaults)       IANA/Java names (``TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384``, also
                                           ``SSL_``-prefixed ones) or OpenSSL names (``ECDHE-RSA-AES256-GCM-
                                           SHA384``). Python cannot choose TLS 1.3 suites one by one, so the
                                           three TLS 1.3 suites are listed all or none (none: TLS 1.3 is not
                                           used, as in Java). Unknown names are refused.
``ssl.endpoint.identification.algorithm``  Client: ``https`` checks the server's host name against its
(https)                                    certificate; empty does not (the chain is always verified).
``ssl.engine.factory.class``               Refused when set: trafka builds TLS from these settings only.
=========================================  ====================================================================

Key material held in memory (inline PEM, PKCS12, a decrypted key) reaches OpenSSL through a private
temporary directory that is removed at once; the private key is written there encrypted with a
one-time password, never in the clear.
"""
from __future__ import annotations

import base64
import functools
import logging
import os
import re
import secrets
import shlex
import ssl
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

__all__ = ["SETTINGS", "TlsConfigError", "client_context", "server_context"]

log = logging.getLogger(__name__)


class TlsConfigError(ValueError):
    """An ``ssl.*`` setting is missing or wrong; the message names it (the broker refuses to start)."""


#: The settings :func:`server_context` and :func:`client_context` read (``ssl.client.auth`` only the
#: first, ``ssl.endpoint.identification.algorithm`` only the second).
SETTINGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
    "ssl.client.auth", "ssl.enabled.protocols", "ssl.protocol", "ssl.cipher.suites",
    "ssl.endpoint.identification.algorithm", "ssl.engine.factory.class",
})

DEFAULT_STORE_TYPE = "JKS"
DEFAULT_ENABLED_PROTOCOLS = ("TLSv1.2", "TLSv1.3")
DEFAULT_PROTOCOL = "TLSv1.3"
DEFAULT_CLIENT_AUTH = "none"
DEFAULT_ENDPOINT_IDENTIFICATION_ALGORITHM = "https"


def server_context(settings: Mapping[str, str]) -> ssl.SSLContext:
    """The TLS context of an SSL or SASL_SSL listener: its key store (required), its truststore and
    ``ssl.client.auth``, its protocols and cipher suites."""
    _refuse_engine_factory(settings)
    lowest, highest = _protocol_range(settings, client=False)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE | ssl.OP_NO_RENEGOTIATION
    lowest, highest = _apply_cipher_suites(context, settings, lowest, highest)
    context.minimum_version, context.maximum_version = lowest, highest
    key = _keystore(settings)
    if key is None:
        raise TlsConfigError(
            "an SSL listener needs a key store: set ssl.keystore.location (with ssl.keystore.type=PEM, or "
            "PKCS12 and ssl.keystore.password), or ssl.keystore.certificate.chain and ssl.keystore.key "
            "(with ssl.keystore.type=PEM)")
    _use_key(context, key)
    verify_mode = _client_auth(settings)
    trusted = _truststore(settings)
    if trusted is not None:
        _trust(context, trusted)
    elif verify_mode != ssl.CERT_NONE:
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    context.verify_mode = verify_mode
    return context


def client_context(settings: Mapping[str, str]) -> ssl.SSLContext:
    """The TLS context of the broker's own connections to other brokers: the truststore (or the
    system's authorities), an optional key store for mutual TLS, the host name check, protocols and
    cipher suites. Pass the peer's host name to :class:`trio.SSLStream` as ``server_hostname``."""
    _refuse_engine_factory(settings)
    lowest, highest = _protocol_range(settings, client=True)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
    lowest, highest = _apply_cipher_suites(context, settings, lowest, highest)
    context.minimum_version, context.maximum_version = lowest, highest
    context.check_hostname = _check_hostname(settings)
    context.verify_mode = ssl.CERT_REQUIRED
    trusted = _truststore(settings)
    if trusted is not None:
        _trust(context, trusted)
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    key = _keystore(settings)
    if key is not None:
        _use_key(context, key)
    return context


# -- plain settings -----------------------------------------------------------------------------------

def _value(settings: Mapping[str, str], name: str) -> str | None:
    """A setting's value, trimmed as Kafka trims it; absent or empty is None."""
    raw = settings.get(name)
    if raw is None:
        return None
    value = str(raw).strip()
    return value or None


def _list(settings: Mapping[str, str], name: str) -> list[str]:
    """A Kafka LIST setting: comma-separated, each item trimmed, empty items dropped."""
    value = _value(settings, name)
    return [item.strip() for item in value.split(",") if item.strip()] if value else []


def _refuse_engine_factory(settings: Mapping[str, str]) -> None:
    value = _value(settings, "ssl.engine.factory.class")
    if value is not None and value != "org.apache.kafka.common.security.ssl.DefaultSslEngineFactory":
        raise TlsConfigError(f"ssl.engine.factory.class={value}: trafka cannot load a Java class; it builds TLS "
                             "from the ssl.* settings (remove this setting)")


_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def _client_auth(settings: Mapping[str, str]) -> ssl.VerifyMode:
    value = _value(settings, "ssl.client.auth") or DEFAULT_CLIENT_AUTH
    mode = _CLIENT_AUTH.get(value.lower())
    if mode is None:
        raise TlsConfigError(f"ssl.client.auth={value}: expected one of required, requested, none")
    return mode


def _check_hostname(settings: Mapping[str, str]) -> bool:
    name = "ssl.endpoint.identification.algorithm"
    if settings.get(name) is None:
        return True  # Kafka's default, https
    value = _value(settings, name)
    if value is None:
        return False  # set, and empty
    if value.lower() == "https":
        return True
    raise TlsConfigError(f"{name}={value}: use https (the default: check the server's host name against its "
                         "certificate) or an empty value (do not check it)")


# -- protocols ------------------------------------------------------------------------------------------

_VERSIONS = {"tlsv1.2": ssl.TLSVersion.TLSv1_2, "tlsv1.3": ssl.TLSVersion.TLSv1_3}
_OLD_VERSIONS = {"tlsv1", "tlsv1.1", "sslv3", "sslv2", "sslv2hello"}
_VERSION_NAMES = {ssl.TLSVersion.TLSv1_2: "TLSv1.2", ssl.TLSVersion.TLSv1_3: "TLSv1.3"}
_PROTOCOL_CAPS: dict[str, ssl.TLSVersion | None] = {
    "tls": None, "ssl": None, "tlsv1.3": ssl.TLSVersion.TLSv1_3, "tlsv1.2": ssl.TLSVersion.TLSv1_2,
    "tlsv1.1": ssl.TLSVersion.TLSv1_1, "tlsv1": ssl.TLSVersion.TLSv1, "sslv3": ssl.TLSVersion.SSLv3,
}


def _protocol_range(settings: Mapping[str, str], *, client: bool) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    """The lowest and highest TLS version from ``ssl.enabled.protocols`` and, on a client, ``ssl.protocol``."""
    names = _list(settings, "ssl.enabled.protocols") or list(DEFAULT_ENABLED_PROTOCOLS)
    shown = ",".join(names)
    enabled: set[ssl.TLSVersion] = set()
    old: list[str] = []
    for name in names:
        if name.lower() in _VERSIONS:
            enabled.add(_VERSIONS[name.lower()])
        elif name.lower() in _OLD_VERSIONS:
            old.append(name)
        else:
            raise TlsConfigError(f"ssl.enabled.protocols={shown}: unknown protocol {name!r}; "
                                 "use TLSv1.2 and/or TLSv1.3")
    if not enabled:
        raise TlsConfigError(f"ssl.enabled.protocols={shown}: TLSv1.1 and older are insecure and not served "
                             "(current Java and OpenSSL disable them too); enable TLSv1.2 and/or TLSv1.3")
    if old:
        log.warning("ssl.enabled.protocols=%s: %s left out (insecure; current Java disables them too)",
                    shown, ", ".join(old))
    lowest, highest = min(enabled), max(enabled)
    protocol = _value(settings, "ssl.protocol") or DEFAULT_PROTOCOL
    if protocol.lower() not in _PROTOCOL_CAPS:
        raise TlsConfigError(f"ssl.protocol={protocol}: unknown protocol; use TLSv1.3 (the default), TLSv1.2 "
                             "or TLS")
    cap = _PROTOCOL_CAPS[protocol.lower()]
    if client and cap is not None and cap < highest:
        if cap < lowest:
            raise TlsConfigError(f"ssl.protocol={protocol} allows none of ssl.enabled.protocols={shown}: a "
                                 "client would use at most " + protocol)
        highest = cap
    return lowest, highest


# -- cipher suites --------------------------------------------------------------------------------------

# IANA name (as Java and Kafka users write it) and OpenSSL name of every TLS 1.2 cipher suite OpenSSL
# implements with certificate authentication and encryption (no PSK, SRP, anonymous or NULL suites).
_TLS12_SUITES = """
    TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384        ECDHE-ECDSA-AES256-GCM-SHA384
    TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384          ECDHE-RSA-AES256-GCM-SHA384
    TLS_DHE_DSS_WITH_AES_256_GCM_SHA384            DHE-DSS-AES256-GCM-SHA384
    TLS_DHE_RSA_WITH_AES_256_GCM_SHA384            DHE-RSA-AES256-GCM-SHA384
    TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256  ECDHE-ECDSA-CHACHA20-POLY1305
    TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256    ECDHE-RSA-CHACHA20-POLY1305
    TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256      DHE-RSA-CHACHA20-POLY1305
    TLS_ECDHE_ECDSA_WITH_AES_256_CCM_8             ECDHE-ECDSA-AES256-CCM8
    TLS_ECDHE_ECDSA_WITH_AES_256_CCM               ECDHE-ECDSA-AES256-CCM
    TLS_DHE_RSA_WITH_AES_256_CCM_8                 DHE-RSA-AES256-CCM8
    TLS_DHE_RSA_WITH_AES_256_CCM                   DHE-RSA-AES256-CCM
    TLS_ECDHE_ECDSA_WITH_ARIA_256_GCM_SHA384       ECDHE-ECDSA-ARIA256-GCM-SHA384
    TLS_ECDHE_RSA_WITH_ARIA_256_GCM_SHA384         ECDHE-ARIA256-GCM-SHA384
    TLS_DHE_DSS_WITH_ARIA_256_GCM_SHA384           DHE-DSS-ARIA256-GCM-SHA384
    TLS_DHE_RSA_WITH_ARIA_256_GCM_SHA384           DHE-RSA-ARIA256-GCM-SHA384
    TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256        ECDHE-ECDSA-AES128-GCM-SHA256
    TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256          ECDHE-RSA-AES128-GCM-SHA256
    TLS_DHE_DSS_WITH_AES_128_GCM_SHA256            DHE-DSS-AES128-GCM-SHA256
    TLS_DHE_RSA_WITH_AES_128_GCM_SHA256            DHE-RSA-AES128-GCM-SHA256
    TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8             ECDHE-ECDSA-AES128-CCM8
    TLS_ECDHE_ECDSA_WITH_AES_128_CCM               ECDHE-ECDSA-AES128-CCM
    TLS_DHE_RSA_WITH_AES_128_CCM_8                 DHE-RSA-AES128-CCM8
    TLS_DHE_RSA_WITH_AES_128_CCM                   DHE-RSA-AES128-CCM
    TLS_ECDHE_ECDSA_WITH_ARIA_128_GCM_SHA256       ECDHE-ECDSA-ARIA128-GCM-SHA256
    TLS_ECDHE_RSA_WITH_ARIA_128_GCM_SHA256         ECDHE-ARIA128-GCM-SHA256
    TLS_DHE_DSS_WITH_ARIA_128_GCM_SHA256           DHE-DSS-ARIA128-GCM-SHA256
    TLS_DHE_RSA_WITH_ARIA_128_GCM_SHA256           DHE-RSA-ARIA128-GCM-SHA256
    TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384        ECDHE-ECDSA-AES256-SHA384
    TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384          ECDHE-RSA-AES256-SHA384
    TLS_DHE_RSA_WITH_AES_256_CBC_SHA256            DHE-RSA-AES256-SHA256
    TLS_DHE_DSS_WITH_AES_256_CBC_SHA256            DHE-DSS-AES256-SHA256
    TLS_ECDHE_ECDSA_WITH_CAMELLIA_256_CBC_SHA384   ECDHE-ECDSA-CAMELLIA256-SHA384
    TLS_ECDHE_RSA_WITH_CAMELLIA_256_CBC_SHA384     ECDHE-RSA-CAMELLIA256-SHA384
    TLS_DHE_RSA_WITH_CAMELLIA_256_CBC_SHA256       DHE-RSA-CAMELLIA256-SHA256
    TLS_DHE_DSS_WITH_CAMELLIA_256_CBC_SHA256       DHE-DSS-CAMELLIA256-SHA256
    TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256        ECDHE-ECDSA-AES128-SHA256
    TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256          ECDHE-RSA-AES128-SHA256
    TLS_DHE_RSA_WITH_AES_128_CBC_SHA256            DHE-RSA-AES128-SHA256
    TLS_DHE_DSS_WITH_AES_128_CBC_SHA256            DHE-DSS-AES128-SHA256
    TLS_ECDHE_ECDSA_WITH_CAMELLIA_128_CBC_SHA256   ECDHE-ECDSA-CAMELLIA128-SHA256
    TLS_ECDHE_RSA_WITH_CAMELLIA_128_CBC_SHA256     ECDHE-RSA-CAMELLIA128-SHA256
    TLS_DHE_RSA_WITH_CAMELLIA_128_CBC_SHA256       DHE-RSA-CAMELLIA128-SHA256
    TLS_DHE_DSS_WITH_CAMELLIA_128_CBC_SHA256       DHE-DSS-CAMELLIA128-SHA256
    TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA           ECDHE-ECDSA-AES256-SHA
    TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA             ECDHE-RSA-AES256-SHA
    TLS_DHE_RSA_WITH_AES_256_CBC_SHA               DHE-RSA-AES256-SHA
    TLS_DHE_DSS_WITH_AES_256_CBC_SHA               DHE-DSS-AES256-SHA
    TLS_DHE_RSA_WITH_CAMELLIA_256_CBC_SHA          DHE-RSA-CAMELLIA256-SHA
    TLS_DHE_DSS_WITH_CAMELLIA_256_CBC_SHA          DHE-DSS-CAMELLIA256-SHA
    TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA           ECDHE-ECDSA-AES128-SHA
    TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA             ECDHE-RSA-AES128-SHA
    TLS_DHE_RSA_WITH_AES_128_CBC_SHA               DHE-RSA-AES128-SHA
    TLS_DHE_DSS_WITH_AES_128_CBC_SHA               DHE-DSS-AES128-SHA
    TLS_DHE_RSA_WITH_CAMELLIA_128_CBC_SHA          DHE-RSA-CAMELLIA128-SHA
    TLS_DHE_DSS_WITH_CAMELLIA_128_CBC_SHA          DHE-DSS-CAMELLIA128-SHA
    TLS_RSA_WITH_AES_256_GCM_SHA384                AES256-GCM-SHA384
    TLS_RSA_WITH_AES_256_CCM_8                     AES256-CCM8
    TLS_RSA_WITH_AES_256_CCM                       AES256-CCM
    TLS_RSA_WITH_ARIA_256_GCM_SHA384               ARIA256-GCM-SHA384
    TLS_RSA_WITH_AES_128_GCM_SHA256                AES128-GCM-SHA256
    TLS_RSA_WITH_AES_128_CCM_8                     AES128-CCM8
    TLS_RSA_WITH_AES_128_CCM                       AES128-CCM
    TLS_RSA_WITH_ARIA_128_GCM_SHA256               ARIA128-GCM-SHA256
    TLS_RSA_WITH_AES_256_CBC_SHA256                AES256-SHA256
    TLS_RSA_WITH_CAMELLIA_256_CBC_SHA256           CAMELLIA256-SHA256
    TLS_RSA_WITH_AES_128_CBC_SHA256                AES128-SHA256
    TLS_RSA_WITH_CAMELLIA_128_CBC_SHA256           CAMELLIA128-SHA256
    TLS_RSA_WITH_AES_256_CBC_SHA                   AES256-SHA
    TLS_RSA_WITH_CAMELLIA_256_CBC_SHA              CAMELLIA256-SHA
    TLS_RSA_WITH_AES_128_CBC_SHA                   AES128-SHA
    TLS_RSA_WITH_CAMELLIA_128_CBC_SHA              CAMELLIA128-SHA
"""
_IANA_TO_OPENSSL = dict(line.split() for line in _TLS12_SUITES.strip().splitlines())
_OPENSSL_NAMES = frozenset(_IANA_TO_OPENSSL.values())
#: OpenSSL's TLS 1.3 suites enabled by default, the ones Python's ssl module can neither add to nor take from.
_TLS13_SUITES = frozenset({"TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_GCM_SHA256"})
_TLS13_OTHER = frozenset({"TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256"})
_SIGNALLING = frozenset({"TLS_EMPTY_RENEGOTIATION_INFO_SCSV", "TLS_FALLBACK_SCSV"})
_UNSERVED = re.compile(
    r"_anon_|_WITH_NULL_|_PSK_|_SRP_|_KRB5_|EXPORT|_RC4_|_DES_|_3DES_|_IDEA_|_SEED_|^TLS_ECDH_|^TLS_DH_")


def _suites(settings: Mapping[str, str]) -> tuple[list[str], bool] | None:
    """``ssl.cipher.suites`` as OpenSSL's TLS 1.2 names and whether TLS 1.3's suites are listed;
    None when the setting is empty (OpenSSL's and Python's secure defaults)."""
    names = _list(settings, "ssl.cipher.suites")
    if not names:
        return None
    shown = ",".join(names)
    tls12: list[str] = []
    tls13: set[str] = set()
    scratch = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    available13 = {c["name"] for c in scratch.get_ciphers() if c["protocol"] == "TLSv1.3"}
    for name in names:
        if name in _SIGNALLING:
            continue
        if name in _TLS13_SUITES:
            if name not in available13:
                raise TlsConfigError(f"ssl.cipher.suites: {name} is not available in this OpenSSL")
            tls13.add(name)
            continue
        if name in _TLS13_OTHER:
            raise TlsConfigError(f"ssl.cipher.suites: {name} is not served (OpenSSL leaves it off and Python "
                                 "cannot turn it on); TLS 1.3 uses " + ", ".join(sorted(_TLS13_SUITES)))
        iana = "TLS_" + name[4:] if name.startswith("SSL_") else name
        openssl = _IANA_TO_OPENSSL.get(iana) or (name if name in _OPENSSL_NAMES else None)
        if openssl is None:
            if _UNSERVED.search(iana):
                raise TlsConfigError(f"ssl.cipher.suites: {name} is not served: trafka leaves out anonymous, "
                                     "NULL, PSK, SRP, static Diffie-Hellman and legacy (RC4, DES, 3DES, "
                                     "EXPORT) suites, none of which current Java enables either")
            raise TlsConfigError(f"ssl.cipher.suites: unknown cipher suite {name!r}; write IANA names such as "
                                 "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 or OpenSSL names such as "
                                 "ECDHE-RSA-AES256-GCM-SHA384")
        try:
            scratch.set_ciphers(openssl)
        except ssl.SSLError:
            raise TlsConfigError(f"ssl.cipher.suites: {name} ({openssl}) is not enabled in this OpenSSL "
                                 "(its build or security level leaves it out)") from None
        if openssl not in tls12:
            tls12.append(openssl)
    if tls13 and tls13 != _TLS13_SUITES:
        raise TlsConfigError(
            f"ssl.cipher.suites={shown}: TLS 1.3 suites cannot be chosen one by one here (Python's ssl module "
            f"has no control for them): list all of {', '.join(sorted(_TLS13_SUITES))}, or none of them "
            "(then TLS 1.3 is not used)")
    if not tls12 and not tls13:
        raise TlsConfigError(f"ssl.cipher.suites={shown}: names no cipher suite")
    return tls12, bool(tls13)


def _apply_cipher_suites(context: ssl.SSLContext, settings: Mapping[str, str], lowest: ssl.TLSVersion,
                         highest: ssl.TLSVersion) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    """Restrict the context to ``ssl.cipher.suites`` and return the versions those suites leave usable:
    TLS 1.2 needs a TLS 1.2 suite listed, TLS 1.3 its suites."""
    suites = _suites(settings)
    if suites is None:
        return lowest, highest
    tls12, tls13 = suites
    usable = [v for v in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3) if lowest <= v <= highest
              and (tls12 if v == ssl.TLSVersion.TLSv1_2 else tls13)]
    if not usable:
        enabled = ",".join(_VERSION_NAMES[v] for v in _VERSION_NAMES if lowest <= v <= highest)
        raise TlsConfigError(f"ssl.cipher.suites={','.join(_list(settings, 'ssl.cipher.suites'))}: none of "
                             f"these suites works with the enabled protocols ({enabled}); no handshake "
                             "could succeed")
    if tls12:
        context.set_ciphers(":".join(tls12))
        if any(name.startswith("DHE-") for name in tls12) and context.protocol == ssl.PROTOCOL_TLS_SERVER:
            _load_dh_group(context)
    return min(usable), max(usable)


def _load_dh_group(context: ssl.SSLContext) -> None:
    """Give a server the finite-field group ffdhe2048 (RFC 7919, the group Java uses) for DHE suites:
    Python's ssl module leaves OpenSSL without one, and a DHE suite then fails every handshake."""
    with tempfile.TemporaryDirectory(prefix="trafka-tls-") as directory:
        path = os.path.join(directory, "ffdhe2048.pem")
        with open(path, "wb") as f:
            f.write(_ffdhe2048_pem())
        context.load_dh_params(path)


def _der(tag: int, content: bytes) -> bytes:
    size = len(content)
    length = bytes([size]) if size < 128 else bytes([0x80 | ((size.bit_length() + 7) // 8)]) + size.to_bytes(
        (size.bit_length() + 7) // 8, "big")
    return bytes([tag]) + length + content


def _der_integer(value: int) -> bytes:
    return _der(0x02, value.to_bytes(value.bit_length() // 8 + 1, "big"))


def _ffdhe2048_prime() -> int:
    """RFC 7919's ffdhe2048 prime: 2^2048 - 2^1984 + (floor(2^1918 * e) + 560316) * 2^64 - 1."""
    guard = 96
    scale = 1 << (1918 + guard)
    total, term, k = 0, scale, 0
    while term:  # e = sum of 1/k!, each term truncated far below the guard bits
        total += term
        k += 1
        term //= k
    return 2**2048 - 2**1984 + ((total >> guard) + 560316) * 2**64 - 1


@functools.cache
def _ffdhe2048_pem() -> bytes:
    """The group as OpenSSL's PEM "DH PARAMETERS" (PKCS #3: the prime and the generator 2)."""
    return (b"-----BEGIN DH PARAMETERS-----\n"
            + base64.encodebytes(_der(0x30, _der_integer(_ffdhe2048_prime()) + _der_integer(2)))
            + b"-----END DH PARAMETERS-----\n")


# -- key stores and truststores -----------------------------------------------------------------------

@dataclass(frozen=True)
class _Key:
    """A private key and its certificate chain (the key's certificate first), and where they came from."""

    key: object
    chain: list[x509.Certificate]
    source: str


def _keystore(settings: Mapping[str, str]) -> _Key | None:
    """The key store from the settings, with Kafka's rules on which settings go together."""
    store_type = (_value(settings, "ssl.keystore.type") or DEFAULT_STORE_TYPE).upper()
    location = _value(settings, "ssl.keystore.location")
    password = _value(settings, "ssl.keystore.password")
    key_password = _value(settings, "ssl.key.password")
    inline_key = _value(settings, "ssl.keystore.key")
    inline_chain = _value(settings, "ssl.keystore.certificate.chain")
    if inline_key is not None:
        if store_type != "PEM":
            raise TlsConfigError(f"ssl.keystore.key is only for ssl.keystore.type=PEM, but ssl.keystore.type is "
                                 f"{store_type}")
        if inline_chain is None:
            raise TlsConfigError("ssl.keystore.key is set, but ssl.keystore.certificate.chain is not")
        if location is not None:
            raise TlsConfigError("ssl.keystore.location and ssl.keystore.key are both set: give the key store "
                                 "as a file or inline, not both")
        if password is not None:
            raise TlsConfigError("ssl.keystore.password cannot be used with ssl.keystore.type=PEM; only "
                                 "ssl.key.password may be set (for an encrypted private key)")
        key = _pem_private_key(inline_key, key_password, "ssl.keystore.key")
        chain = _pem_certificates(inline_chain, "ssl.keystore.certificate.chain")
        return _matched(key, chain, "ssl.keystore.key")
    if inline_chain is not None:
        raise TlsConfigError("ssl.keystore.certificate.chain is set, but ssl.keystore.key is not")
    if location is None:
        if password is not None:
            raise TlsConfigError("ssl.keystore.password is set, but ssl.keystore.location is not")
        return None
    source = f"ssl.keystore.location={location}"
    if store_type == "PEM":
        if password is not None:
            raise TlsConfigError("ssl.keystore.password cannot be used with ssl.keystore.type=PEM; only "
                                 "ssl.key.password may be set (for an encrypted private key)")
        text = _pem_text(_read(location, "keystore"), source, "keystore")
        key = _pem_private_key(text, key_password, source)
        return _matched(key, _pem_certificates(text, source), source)
    if password is None:
        raise TlsConfigError(f"{source} is set, but ssl.keystore.password is not")
    data = _read(location, "keystore")
    _check_binary_store(data, store_type, location, "keystore")
    try:
        loaded = pkcs12.load_pkcs12(data, password.encode())
    except ValueError:
        raise TlsConfigError(f"{source}: could not read it as PKCS12 with ssl.keystore.password (a wrong "
                             "password, or not a PKCS12 file)") from None
    if loaded.key is None or loaded.cert is None:
        raise TlsConfigError(f"{source}: the PKCS12 key store holds no private key with its certificate")
    chain = [loaded.cert.certificate] + [c.certificate for c in loaded.additional_certs]
    return _matched(loaded.key, chain, source)


def _truststore(settings: Mapping[str, str]) -> list[x509.Certificate] | None:
    """The certificates to trust, or None for the system's certificate authorities."""
    store_type = (_value(settings, "ssl.truststore.type") or DEFAULT_STORE_TYPE).upper()
    location = _value(settings, "ssl.truststore.location")
    password = _value(settings, "ssl.truststore.password")
    inline = _value(settings, "ssl.truststore.certificates")
    if inline is not None:
        if store_type != "PEM":
            raise TlsConfigError(f"ssl.truststore.certificates is only for ssl.truststore.type=PEM, but "
                                 f"ssl.truststore.type is {store_type}")
        if location is not None:
            raise TlsConfigError("ssl.truststore.location and ssl.truststore.certificates are both set: give "
                                 "the trusted certificates as a file or inline, not both")
        if password is not None:
            raise TlsConfigError("ssl.truststore.password cannot be used with ssl.truststore.type=PEM")
        return _pem_certificates(inline, "ssl.truststore.certificates")
    if location is None:
        if password is not None:
            raise TlsConfigError("ssl.truststore.password is set, but ssl.truststore.location is not")
        return None
    source = f"ssl.truststore.location={location}"
    if store_type == "PEM":
        if password is not None:
            raise TlsConfigError("ssl.truststore.password cannot be used with ssl.truststore.type=PEM")
        return _pem_certificates(_pem_text(_read(location, "truststore"), source, "truststore"), source)
    data = _read(location, "truststore")
    _check_binary_store(data, store_type, location, "truststore")
    try:
        loaded = pkcs12.load_pkcs12(data, password.encode() if password is not None else None)
    except ValueError:
        if password is None:
            raise TlsConfigError(f"{source}: could not read it as PKCS12 without a password; set "
                                 "ssl.truststore.password (or the file is not PKCS12)") from None
        raise TlsConfigError(f"{source}: could not read it as PKCS12 with ssl.truststore.password (a wrong "
                             "password, or not a PKCS12 file)") from None
    certificates = ([loaded.cert.certificate] if loaded.cert is not None else []) + [
        c.certificate for c in loaded.additional_certs]
    if not certificates:
        raise TlsConfigError(f"{source}: the PKCS12 truststore holds no certificate")
    return certificates


def _read(location: str, store: str) -> bytes:
    try:
        with open(location, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise TlsConfigError(f"ssl.{store}.location={location}: no such file") from None
    except OSError as e:
        raise TlsConfigError(f"ssl.{store}.location={location}: cannot read it ({e.strerror})") from None


def _kind(data: bytes) -> str:
    """What a store file holds, by its first bytes."""
    if data[:4] == b"\xfe\xed\xfe\xed":
        return "JKS"
    if data[:4] == b"\xce\xce\xce\xce":
        return "JCEKS"
    if data.lstrip()[:10] == b"-----BEGIN" or b"-----BEGIN " in data[:4096]:
        return "PEM"
    if data[:1] == b"\x30":
        return "PKCS12"
    return "unknown"


def _check_binary_store(data: bytes, store_type: str, location: str, store: str) -> None:
    """Accept a PKCS12 file typed PKCS12 or JKS (Java reads PKCS12 under either name); refuse the rest
    with what to do instead."""
    kind = _kind(data)
    if store_type not in ("PKCS12", "JKS"):
        raise TlsConfigError(f"ssl.{store}.type={store_type}: trafka reads PEM and PKCS12 {store}s; use "
                             f"ssl.{store}.type=PKCS12 or PEM")
    if kind == "PKCS12":
        return
    if kind in ("JKS", "JCEKS"):
        stem = os.path.splitext(location)[0]
        target = stem + ".p12" if not os.path.exists(stem + ".p12") else stem + ".converted.p12"
        default = f" (ssl.{store}.type=JKS is Kafka's default)" if store_type == "JKS" else ""
        command = (f"keytool -importkeystore -srckeystore {shlex.quote(location)} -srcstoretype {kind} "
                   f"-destkeystore {shlex.quote(target)} -deststoretype PKCS12")
        raise TlsConfigError(
            f"ssl.{store}.location={location} is a {kind} {store}{default}, a Java-only format trafka does not "
            f"read. Convert it once to PKCS12, which Apache Kafka reads too: `{command}`, then set "
            f"ssl.{store}.type=PKCS12 and ssl.{store}.location={target}; or use PEM files "
            f"(ssl.{store}.type=PEM)")
    if kind == "PEM":
        raise TlsConfigError(f"ssl.{store}.location={location} holds PEM, but ssl.{store}.type is {store_type}: "
                             f"set ssl.{store}.type=PEM")
    raise TlsConfigError(f"ssl.{store}.location={location}: not a PKCS12 {store} (ssl.{store}.type="
                         f"{store_type})")


def _pem_text(data: bytes, source: str, store: str) -> str:
    kind = _kind(data)
    if kind in ("PKCS12", "JKS", "JCEKS"):
        hint = f"set ssl.{store}.type=PKCS12" if kind == "PKCS12" else "convert it to PEM or PKCS12"
        raise TlsConfigError(f"{source} is a {kind} file, but ssl.{store}.type is PEM: {hint}")
    try:
        return data.decode("ascii")
    except UnicodeDecodeError:
        raise TlsConfigError(f"{source}: not a PEM file (it is not text)") from None


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+?)-----(.*?)-----END \1-----", re.S)


def _pem_blocks(text: str, source: str) -> list[tuple[str, bytes]]:
    """Each PEM block as (label, canonical PEM). Line breaks may have become spaces (a value on one
    line of a properties file); OpenSSL's encryption headers are kept when lines are intact."""
    blocks = []
    for match in _PEM_BLOCK.finditer(text):
        label, body = match.group(1), match.group(2)
        headers = ""
        lines = body.strip().splitlines()
        if lines and ":" in lines[0]:
            while lines and ":" in lines[0]:
                headers += lines.pop(0).strip() + "\n"
            headers += "\n"
        encoded = "".join("".join(lines).split())
        try:
            base64.b64decode(encoded, validate=True)
        except ValueError:
            raise TlsConfigError(f"{source}: the {label} block is not valid base64") from None
        wrapped = "\n".join(encoded[i:i + 64] for i in range(0, len(encoded), 64))
        blocks.append((label, f"-----BEGIN {label}-----\n{headers}{wrapped}\n-----END {label}-----\n".encode()))
    return blocks


def _pem_certificates(text: str, source: str) -> list[x509.Certificate]:
    blocks = [pem for label, pem in _pem_blocks(text, source) if label == "CERTIFICATE"]
    if not blocks:
        raise TlsConfigError(f"{source}: no certificate found (expected '-----BEGIN CERTIFICATE-----' blocks)")
    certificates = []
    for number, pem in enumerate(blocks, 1):
        try:
            certificates.append(x509.load_pem_x509_certificate(pem))
        except ValueError:
            raise TlsConfigError(f"{source}: certificate {number} is not a valid X.509 certificate") from None
    return certificates


def _pem_private_key(text: str, password: str | None, source: str) -> object:
    blocks = [pem for label, pem in _pem_blocks(text, source) if label.endswith("PRIVATE KEY")]
    if not blocks:
        raise TlsConfigError(f"{source}: no private key found (expected a '-----BEGIN PRIVATE KEY-----' or "
                             "'-----BEGIN ENCRYPTED PRIVATE KEY-----' block)")
    if len(blocks) > 1:
        raise TlsConfigError(f"{source}: expected one private key, but found {len(blocks)}")
    try:
        return serialization.load_pem_private_key(blocks[0], password.encode() if password is not None else None)
    except TypeError:
        if password is None:
            raise TlsConfigError(f"{source}: the private key is encrypted; set ssl.key.password") from None
        raise TlsConfigError(f"{source}: ssl.key.password is set, but the private key is not encrypted "
                             "(remove ssl.key.password, or encrypt the key)") from None
    except UnsupportedAlgorithm:
        raise TlsConfigError(f"{source}: the private key's algorithm or encryption is not supported") from None
    except ValueError:
        if password is not None:
            raise TlsConfigError(f"{source}: ssl.key.password does not decrypt the private key") from None
        raise TlsConfigError(f"{source}: the private key could not be read") from None


def _public(key: object) -> bytes:
    return key.public_bytes(serialization.Encoding.DER,  # type: ignore[attr-defined]
                            serialization.PublicFormat.SubjectPublicKeyInfo)


def _matched(key: object, chain: list[x509.Certificate], source: str) -> _Key:
    """The key with its chain, the key's own certificate first; refused when no certificate is the key's."""
    public = _public(key.public_key())  # type: ignore[attr-defined]
    for index, certificate in enumerate(chain):
        if _public(certificate.public_key()) == public:
            ordered = [certificate] + chain[:index] + chain[index + 1:]
            return _Key(key, ordered, source)
    raise TlsConfigError(f"{source}: no certificate in the chain belongs to the private key")


def _use_key(context: ssl.SSLContext, key: _Key) -> None:
    """Give OpenSSL the key and chain: through a private temporary directory removed at once, the key
    encrypted there with a one-time password."""
    leaf = key.chain[0]
    if leaf.not_valid_after_utc.timestamp() < time.time():
        log.warning("%s: the certificate %s expired on %s", key.source, leaf.subject.rfc4514_string(),
                    leaf.not_valid_after_utc.isoformat())
    one_time = secrets.token_urlsafe(32).encode()
    key_pem = key.key.private_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(one_time))
    chain_pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in key.chain)
    with tempfile.TemporaryDirectory(prefix="trafka-tls-") as directory:
        key_path = os.path.join(directory, "key.pem")
        chain_path = os.path.join(directory, "chain.pem")
        for path, data in ((key_path, key_pem), (chain_path, chain_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        try:
            context.load_cert_chain(chain_path, key_path, password=one_time)
        except ssl.SSLError as e:
            raise TlsConfigError(
                f"{key.source}: OpenSSL refused the key or its certificate ({e.reason or e})") from None


def _trust(context: ssl.SSLContext, certificates: list[x509.Certificate]) -> None:
    context.load_verify_locations(cadata=b"".join(c.public_bytes(serialization.Encoding.DER) for c in certificates))
