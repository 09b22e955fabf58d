"""The client's side of SASL PLAIN and SCRAM-SHA-256/512, sans-I/O: what a broker sends when it
authenticates to another broker over a SASL inter-broker listener, and what the tools send to a SASL
listener. Each exchange is ``first()`` (the client's initial token), then ``respond(server_token)`` until
``complete``; a server that cannot be verified (SCRAM's ServerSignature) raises
:class:`SaslClientError`.

SCRAM's PBKDF2 (the salted password) runs in ``respond`` to the server's first message: a caller on an
event loop runs that call in a worker thread.
"""
from __future__ import annotations

import base64
import hmac
import secrets

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
