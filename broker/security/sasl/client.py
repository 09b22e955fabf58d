"""The client's side of SASL PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER, sans-I/O: what a broker sends when it
authenticates to another broker over a SASL inter-broker listener (PLAIN, SCRAM), and what the tools send to a
SASL listener. OAUTHBEARER's client is handed its token (:func:`unsecured_login_token` makes Kafka's unsecured
one; the tools fetch a signed one from a token endpoint). Each exchange is ``first()`` (the client's initial token), then ``respond(server_token)`` until
``complete``; a server that cannot be verified (SCRAM's ServerSignature) raises
:class:`SaslClientError`.

SCRAM's PBKDF2 (the salted password) runs in ``respond`` to the server's first message: a caller on an
event loop runs that call in a worker thread.
"""
from __future__ import annotations

import base64
import hmac
import json
import re
import secrets
from collections.abc import Mapping

from trafka.broker.security.credentials import (
    MIN_ITERATIONS,
    client_key,
    hash_name,
    salted_password,
    server_key,
    stored_key,
)
from trafka.broker.security.sasl.scram import saslname


class SaslClientError(Exception):
    """The server's answer cannot be accepted (or the exchange is used out of turn)."""


class PlainClient:
    """RFC 4616: one token, ``\\0user\\0password`` (no authorization id)."""

    mechanism = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._token = b"\0" + username.encode() + b"\0" + password.encode()
        self.complete = False

    def first(self) -> bytes:
        return self._token

    def respond(self, token: bytes) -> bytes:
        self.complete = True  # the server's answer to PLAIN is empty: success is SaslAuthenticate's code
        return b""


class ScramClient:
    """RFC 5802 / 7677 as Kafka speaks it: no channel binding (``n,,``), the user name escaped."""

    def __init__(self, mechanism: str, username: str, password: str, *, nonce: str | None = None) -> None:
        hash_name(mechanism)  # ValueError for anything but SCRAM-SHA-256/512
        self.mechanism = mechanism
        self._password = password
        self._nonce = nonce if nonce is not None else base64.b64encode(secrets.token_bytes(24)).decode()
        self._first_bare = f"n={saslname(username)},r={self._nonce}"
        self._expected_signature: bytes | None = None
        self.complete = False

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def respond(self, token: bytes) -> bytes:
        if self._expected_signature is None:
            return self._final(token.decode())
        attributes = _attributes(token.decode())
        if "e" in attributes:
            raise SaslClientError(f"the server refused the proof: {attributes['e']}")
        if not hmac.compare_digest(base64.b64decode(attributes.get("v", "")), self._expected_signature):
            raise SaslClientError("the server's signature does not match: it does not know this credential")
        self.complete = True
        return b""

    def _final(self, server_first: str) -> bytes:
        attributes = _attributes(server_first)
        nonce, salt, iterations = attributes.get("r", ""), attributes.get("s"), attributes.get("i")
        if not nonce.startswith(self._nonce) or salt is None or iterations is None or not iterations.isdigit():
            raise SaslClientError(f"not a SCRAM server-first message: {server_first!r}")
        if int(iterations) < MIN_ITERATIONS:  # as Kafka's client: a server asking for less is not believed
            raise SaslClientError(f"Requested iterations {iterations} is less than the minimum {MIN_ITERATIONS} "
                                  f"for {self.mechanism}")
        salted = salted_password(self.mechanism, self._password, base64.b64decode(salt), int(iterations))
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{server_first},{without_proof}".encode()
        key = client_key(self.mechanism, salted)
        signature = hmac.new(stored_key(self.mechanism, key), auth_message, hash_name(self.mechanism)).digest()
        proof = bytes(a ^ b for a, b in zip(key, signature))
        self._expected_signature = hmac.new(server_key(self.mechanism, salted), auth_message,
                                            hash_name(self.mechanism)).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


class OAuthBearerClient:
    """RFC 7628 as Kafka's OAuthBearerSaslClient speaks it: ``n,[a=<authzid>],^Aauth=Bearer <token>^A[<key>=<value>^A]*^A``.
    An empty answer is success; a server's error token (``{"status":"invalid_token"}``) is acknowledged with a
    lone ``^A``, after which the server fails the exchange (SASL_AUTHENTICATION_FAILED, that JSON as message)."""

    mechanism = "OAUTHBEARER"

    def __init__(self, token: str, *, extensions: Mapping[str, str] | None = None, authorization_id: str = "") -> None:
        pairs = "".join(f"{key}={value}\x01" for key, value in (extensions or {}).items())
        authzid = f"a={authorization_id}" if authorization_id else ""
        self._first = f"n,{authzid},\x01auth=Bearer {token}\x01{pairs}\x01".encode()
        self.complete = False
        #: The server's error token, once it sent one.
        self.error: str | None = None

    def first(self) -> bytes:
        return self._first

    def respond(self, token: bytes) -> bytes:
        if not token:
            self.complete = True
            return b""
        if self.error is not None:
            raise SaslClientError(f"the server answered again after its error {self.error}")
        self.error = token.decode("utf-8", errors="replace")
        return b"\x01"


_UNSECURED_OPTION = re.compile(r"unsecuredLogin(String|Number|List)Claim_(.+)")
_EXTENSION_OPTION = "unsecuredLoginExtension_"


def unsecured_login_token(options: Mapping[str, str], now_ms: int) -> tuple[str, dict[str, str]]:
    """Kafka's unsecured OAUTHBEARER login (OAuthBearerUnsecuredLoginCallbackHandler) from the JAAS options of
    OAuthBearerLoginModule: the token (``{"alg":"none"}``, no signature) and the SASL extensions.

    ``unsecuredLoginStringClaim_<name>``, ``unsecuredLoginNumberClaim_<name>`` and
    ``unsecuredLoginListClaim_<name>`` (its first character separates the items) are the claims; the principal
    claim (``unsecuredLoginPrincipalClaimName``, ``sub``) must be among the string claims; ``iat`` is now and
    ``exp`` ``unsecuredLoginLifetimeSeconds`` (3600) later, in seconds; ``unsecuredLoginExtension_<name>`` are
    the extensions. ValueError naming the option otherwise."""
    claims: dict[str, object] = {}
    extensions: dict[str, str] = {}
    for option, value in options.items():
        if option.startswith(_EXTENSION_OPTION):
            extensions[option[len(_EXTENSION_OPTION):]] = value
            continue
        m = _UNSECURED_OPTION.fullmatch(option)
        if m is None:
            continue
        kind, name = m.groups()
        if name in ("iat", "exp"):
            raise ValueError(f"{option}: the {name} claim is set by the login itself")
        if kind == "String":
            claims[name] = value
        elif kind == "Number":
            try:
                claims[name] = json.loads(value) if re.fullmatch(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?", value) \
                    else float("nan")
            except ValueError:
                claims[name] = float("nan")
            if claims[name] != claims[name]:
                raise ValueError(f"{option}: not a number: {value!r}")
        else:
            claims[name] = [item for item in value[1:].split(value[0])] if value else []
    principal_claim = (options.get("unsecuredLoginPrincipalClaimName") or "sub").strip()
    if not isinstance(claims.get(principal_claim), str) or not str(claims[principal_claim]).strip():
        raise ValueError(f"unsecuredLoginStringClaim_{principal_claim} is needed: the token's principal "
                         f"(unsecuredLoginPrincipalClaimName, {principal_claim})")
    lifetime = (options.get("unsecuredLoginLifetimeSeconds") or "3600").strip()
    if not lifetime.isdigit():
        raise ValueError(f"unsecuredLoginLifetimeSeconds: not a whole number of seconds: {lifetime!r}")
    issued_at = now_ms / 1000
    body = {"iat": issued_at, "exp": round(issued_at + int(lifetime), 3), **claims}

    def part(data: Mapping[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'none'})}.{part(body)}.", extensions


def client_exchange(mechanism: str, username: str, password: str) -> PlainClient | ScramClient:
    """The client's exchange for ``mechanism`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)."""
    if mechanism == "PLAIN":
        return PlainClient(username, password)
    if mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        return ScramClient(mechanism, username, password)
    raise ValueError(f"SASL mechanism {mechanism} has no client here (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")


def _attributes(message: str) -> dict[str, str]:
    attributes = {}
    for part in message.split(","):
        name, sep, value = part.partition("=")
        if sep:
            attributes.setdefault(name, value)
    return attributes
