"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the server side, as Kafka's ScramSaslServer.

Two rounds::

    client-first  n,[a=<authzid>],n=<saslname>,r=<client nonce>[,<ext>=<value>]*
    server-first  r=<client nonce><server nonce>,s=<base64 salt>,i=<iterations>
    client-final  c=<base64 gs2 header>,r=<nonce>[,<ext>=<value>]*,p=<base64 ClientProof>
    server-final  v=<base64 ServerSignature>

- Channel binding is not supported: the gs2 header's flag must be ``n`` (a client offering ``y`` or
  ``p`` fails as a malformed message), and the final message's ``c`` must be that header (``biws``).
- The user name is the saslname with ``=2C`` and ``=3D`` decoded to ``,`` and ``=``; its credential comes from
  the credential store (a :class:`~trafka.broker.security.credentials.ScramCredential` per user and
  mechanism, never the password). An authzid must be the user name.
- Extensions: ``tokenauth=true`` (case-insensitive, as Java's Boolean.parseBoolean) makes the name a
  delegation token's id: the credential is the token's, the principal its owner's, and the token's expiry
  bounds the session. Other extensions are accepted and ignored, as Kafka does.
- The final message's nonce must be the server-first nonce; the ClientProof is checked by recomputing the
  StoredKey (H(ClientProof XOR ClientSignature)) and comparing it with the stored one in constant time.
  The AuthMessage is built from the messages as the client sent them.

What the client is told: ``Authentication failed: Client requested an authorization id that is different
from username`` for a foreign authzid (once the user is known); every other failure — unknown user or
token, wrong password, malformed message, bad nonce or channel binding, a credential with fewer iterations
than the mechanism's minimum — gets Kafka's message for invalid credentials, ``Authentication failed during
authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256``, with the reason in the
error's ``detail``. As with Kafka, an unknown user fails on the first message and a wrong password on the
final one.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable

from trafka.broker.security.credentials import (
    HASHES,
    MIN_ITERATIONS,
    DelegationTokenCredential,
    ScramCredential,
)
from trafka.broker.security.sasl.exchange import Rejected, SaslAuthenticationError, SaslServerExchange

MECHANISMS = tuple(HASHES)
TOKEN_AUTH = "tokenauth"
SUPPORTED_EXTENSIONS = frozenset({TOKEN_AUTH})

AUTHORIZATION_ID_DIFFERS = "Authentication failed: Client requested an authorization id that is different from username"

CredentialLookup = Callable[[str, str], "ScramCredential | None"]                 # (user, mechanism)
TokenLookup = Callable[[str, str], "DelegationTokenCredential | None"]           # (token id, mechanism)

# RFC 5802's grammar as Kafka's ScramMessages writes it (Java's [a&&[^b]] spelled out).
_VALUE_SAFE = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]"          # \x01-\x7f but ',' and '='
_SASLNAME = rf"(?:{_VALUE_SAFE}|=2C|=3D)+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"                        # \x01-\x7f but ','
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"                    # \x21-\x7e but ','
_BASE64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)(?:m={_VALUE},)?"
    rf"(?P<bare>n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))")
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_BASE64})")


def username(saslname: str) -> str:
    """RFC 5802's saslname decoded: ``=2C`` is ``,`` and ``=3D`` is ``=``."""
    return re.sub(r"=2C|=3D", lambda m: "," if m.group() == "=2C" else "=", saslname)


def saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out or "0"


def random_nonce() -> str:
    """A server nonce as Kafka makes one: 130 random bits in base 36."""
    return _base36(secrets.randbits(130))


def _parse_extensions(text: str) -> dict[str, str]:
    extensions = {}
    for pair in text.split(",")[1:]:
        key, _, value = pair.partition("=")
        extensions[key] = value
    return extensions


class ScramExchange(SaslServerExchange):
    def __init__(
        self,
        mechanism: str,
        credentials: CredentialLookup,
        *,
        delegation_tokens: TokenLookup | None = None,
        nonce: Callable[[], str] = random_nonce,
        clock_ms: Callable[[], int] | None = None,
        reauthenticating: bool = False,
    ) -> None:
        if mechanism not in HASHES:
            raise ValueError(f"Not a SCRAM mechanism: {mechanism!r}")
        super().__init__(reauthenticating=reauthenticating)
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self._credentials = credentials
        self._delegation_tokens = delegation_tokens
        self._nonce = nonce
        self._clock_ms = clock_ms
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._full_nonce = ""
        self._name = ""

    def _evaluate(self, token: bytes) -> bytes:
        if self._credential is None:
            return self._first(token)
        try:
            return self._final(token)
        finally:
            self._credential = None

    def _first(self, token: bytes) -> bytes:
        message = token.decode("utf-8", errors="replace")
        m = _CLIENT_FIRST.fullmatch(message)
        if m is None:
            raise Rejected(f"Invalid SCRAM client first message format: {message!r}")
        extensions = _parse_extensions(m["extensions"])
        name = username(m["saslname"])
        if extensions.get(TOKEN_AUTH, "").lower() == "true":
            token_credential = self._delegation_tokens(name, self.mechanism) if self._delegation_tokens else None
            if token_credential is None:
                raise Rejected(f"Token Authentication failed: Invalid tokenId : {name}")
            credential = token_credential.credential
            self._name = token_credential.owner
            self.credential_expiration_ms = token_credential.expiry_timestamp_ms
            self.token_authenticated = True
        else:
            credential = self._credentials(name, self.mechanism)
            self._name = name
            if credential is None:
                raise Rejected("Authentication failed: Invalid user credentials")
        authzid = m["authzid"]
        if authzid is not None and username(authzid) != name:
            raise SaslAuthenticationError(AUTHORIZATION_ID_DIFFERS)
        if credential.iterations < MIN_ITERATIONS:
            raise Rejected(
                f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS} for {self.mechanism}")
        self.extensions = {k: v for k, v in extensions.items() if k in SUPPORTED_EXTENSIONS}
        self._gs2_header = m["gs2"]
        self._client_first_bare = m["bare"]
        self._full_nonce = m["nonce"] + self._nonce()
        salt = base64.b64encode(credential.salt).decode("ascii")
        self._server_first = f"r={self._full_nonce},s={salt},i={credential.iterations}"
        self._credential = credential
        return self._server_first.encode("utf-8")

    def _final(self, token: bytes) -> bytes:
        credential = self._credential
        assert credential is not None
        message = token.decode("utf-8", errors="replace")
        m = _CLIENT_FINAL.fullmatch(message)
        if m is None:
            raise Rejected(f"Invalid SCRAM client final message format: {message!r}")
        if m["nonce"] != self._full_nonce:
            raise Rejected("Invalid client nonce in the final client message.")
        channel = base64.b64decode(m["channel"])
        if channel not in (self._gs2_header.encode("utf-8"), b"n,,"):
            raise Rejected("Invalid channel binding in the final client message: channel binding is not supported")
        try:
            proof = base64.b64decode(m["proof"], validate=True)
        except binascii.Error:
            raise Rejected("Invalid client proof") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{m['without_proof']}".encode("utf-8")
        client_signature = hmac.new(credential.stored_key, auth_message, self._hash).digest()
        if len(proof) != len(client_signature):
            raise Rejected("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(), credential.stored_key):
            raise Rejected("Invalid client credentials")
        server_signature = hmac.new(credential.server_key, auth_message, self._hash).digest()
        expiring = self._clock_ms is not None and self.credential_expiration_ms is not None
        self._succeed(self._name, self._clock_ms() if expiring else None)
        return b"v=" + base64.b64encode(server_signature)
