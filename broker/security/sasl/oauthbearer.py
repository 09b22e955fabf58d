"""SASL/OAUTHBEARER (RFC 7628) as Kafka's OAuthBearerSaslServer serves it, with either of Kafka's validators:
the unsecured-token validator, the broker's default for development
(OAuthBearerUnsecuredValidatorCallbackHandler, here), or the validator of signed tokens against a JWKS
(OAuthBearerValidatorCallbackHandler: ``trafka.broker.security.sasl.oidc``), which the listener chooses with
``listener.name.<l>.oauthbearer.sasl.server.callback.handler.class``.

The client's initial response is ``n,[a=<authzid>],\\x01auth=Bearer <token>\\x01[<key>=<value>\\x01]*\\x01``.
With the unsecured validator, the token is an unsecured JWS (RFC 7515 / 7519): ``<base64 header>.<base64 claims>.`` with
``{"alg":"none"}`` and no signature. It is valid when:

- it has three dot-separated parts, the header's ``alg`` is ``none`` and the signature part is empty;
- ``exp`` is a number (seconds since the epoch, fractions allowed) and now minus the allowable clock skew is
  before it; ``iat``, if present, is a number not after now plus the skew, and before ``exp``;
- the principal claim (``sub`` unless ``unsecuredValidatorPrincipalClaimName`` names another) is a non-blank
  string: the principal is ``User:<its value>``;
- the scope claim (``scope`` unless ``unsecuredValidatorScopeClaimName``), a string or a list of strings,
  holds every element of ``unsecuredValidatorRequiredScope`` (space-separated).

The options of the listener's one OAUTHBEARER JAAS entry set these (:meth:`UnsecuredValidatorOptions.from_jaas`),
with ``unsecuredValidatorAllowableClockSkewMs`` (default 0).

On an invalid token the server does not fail at once: as Kafka, it answers with an error token,
``{"status":"invalid_token"}`` or, for a missing scope, ``{"status":"insufficient_scope", "scope":"[a, b]"}``;
the client acknowledges with a lone ``\\x01`` and the exchange then fails with that JSON as the error
message. The reason is kept in ``failure_detail`` (for the log; the client never sees it).

Other failures:

- a malformed initial response (no ``auth``, a scheme other than Bearer, bad extension names or values): Kafka's
  message for invalid credentials, ``Authentication failed during authentication due to invalid credentials
  with SASL mechanism OAUTHBEARER``;
- an authzid other than the token's principal: ``Authentication failed: Client requested an authorization id
  (<authzid>) that is different from the token's principal name (<principal>)``.

Extensions (keys of letters, values of printable ASCII, space, tab, CR, LF) are all accepted, as the unsecured
validator does, and are in ``extensions`` after success. The session is bounded by the token's expiry:
``credential_expiration_ms`` is ``exp`` in milliseconds and ``session_lifetime_ms`` the time left when the
exchange completed.

Unlike Kafka: base64url (``-``, ``_``, as RFC 7515 encodes) is accepted beside standard base64 (Kafka's decoder
takes standard base64 only, so a token whose claims encode to ``-`` or ``_`` fails there); a header without
``alg`` or that is not a JSON object is an invalid token (Kafka's server fails with an internal error).
"""
from __future__ import annotations

import base64
import binascii
import json
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from trafka.broker.security.jaas import JaasConfigError, JaasEntry
from trafka.broker.security.sasl.exchange import (
    IllegalSaslState,
    Rejected,
    SaslAuthenticationError,
    SaslServerExchange,
)
from trafka.broker.security.sasl.oidc import InvalidToken, OidcValidator, UnreadableToken, ValidatedToken

MECHANISM = "OAUTHBEARER"

PRINCIPAL_CLAIM_NAME_OPTION = "unsecuredValidatorPrincipalClaimName"
SCOPE_CLAIM_NAME_OPTION = "unsecuredValidatorScopeClaimName"
REQUIRED_SCOPE_OPTION = "unsecuredValidatorRequiredScope"
ALLOWABLE_CLOCK_SKEW_MS_OPTION = "unsecuredValidatorAllowableClockSkewMs"

_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7e \t\r\n]+"
_CLIENT_INITIAL_RESPONSE = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,\x01(?P<kvpairs>(?:{_KEY}={_VALUE}\x01)*)\x01")
_AUTH = re.compile(r"(?P<scheme>[A-Za-z0-9_]+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")
_KEY_RE = re.compile(_KEY)
_VALUE_RE = re.compile(_VALUE)
_SCOPE_ITEM = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")
_CONTROL_A = b"\x01"


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def _blank(value: str | None) -> bool:
    return value is None or not value.strip()


@dataclass(frozen=True)
class UnsecuredValidatorOptions:
    principal_claim_name: str = "sub"
    scope_claim_name: str = "scope"
    required_scope: tuple[str, ...] = ()
    allowable_clock_skew_ms: int = 0

    @classmethod
    def from_jaas(cls, options: Mapping[str, str]) -> UnsecuredValidatorOptions:
        """The validator's options from the OAuthBearerLoginModule entry's options. JaasConfigError (a
        ValueError) naming the option for a skew that is not a non-negative integer or an invalid scope item."""
        principal = (options.get(PRINCIPAL_CLAIM_NAME_OPTION) or "").strip()
        scope = (options.get(SCOPE_CLAIM_NAME_OPTION) or "").strip()
        required = (options.get(REQUIRED_SCOPE_OPTION) or "").strip()
        skew_text = (options.get(ALLOWABLE_CLOCK_SKEW_MS_OPTION) or "").strip()
        skew = 0
        if skew_text:
            if not re.fullmatch(r"[+-]?[0-9]+", skew_text) or not -2**31 <= int(skew_text) < 2**31:
                raise JaasConfigError(f"{ALLOWABLE_CLOCK_SKEW_MS_OPTION}: not an integer: {skew_text!r}")
            skew = int(skew_text)
            if skew < 0:
                raise JaasConfigError(
                    f"{ALLOWABLE_CLOCK_SKEW_MS_OPTION}: Allowable clock skew millis must not be negative: {skew_text}")
        items = [item for item in required.split(" ") if item]
        for item in items:
            if not _SCOPE_ITEM.fullmatch(item):
                raise JaasConfigError(f"{REQUIRED_SCOPE_OPTION}: Invalid scope value: {item}")
        return cls(
            principal_claim_name=principal or "sub",
            scope_claim_name=scope or "scope",
            required_scope=tuple(items),
            allowable_clock_skew_ms=skew,
        )

    @classmethod
    def from_jaas_entries(cls, entries: Iterable[JaasEntry]) -> UnsecuredValidatorOptions:
        """As Kafka's validator is configured: from exactly one JAAS entry (whatever its login module)."""
        entries = list(entries)
        if len(entries) != 1:
            raise JaasConfigError(
                f"Must supply exactly 1 non-null JAAS mechanism configuration (size was {len(entries)})")
        return cls.from_jaas(entries[0].options)

    def validate(self, token: str, now_ms: int) -> UnsecuredJws:
        return validate_unsecured_token(token, self, now_ms)


# -- the unsecured JWS --------------------------------------------------------------------------------------------

class IllegalToken(Exception):
    """An invalid token: the reason, and the scope to report for insufficient_scope."""

    def __init__(self, description: str, scope: str | None = None) -> None:
        super().__init__(description)
        self.description = description
        self.scope = scope


def _java_type(value: object) -> str:
    if isinstance(value, str):
        return "String"
    if isinstance(value, list):
        return "ArrayList"
    if isinstance(value, float):
        return "Double"
    if isinstance(value, int):
        return "Integer" if -2**31 <= value < 2**31 else "Long" if -2**63 <= value < 2**63 else "BigInteger"
    return type(value).__name__


def _as_text(value: object) -> str:
    # Jackson's JsonNode.asText for what is not a number or an array.
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return repr(value)
    return ""


def _convert(value: object) -> object:
    # As Kafka's OAuthBearerUnsecuredJws reads claims: numbers stay numbers, arrays become lists of their
    # elements' text, anything else (booleans, null, objects) its text.
    if isinstance(value, list):
        return [_as_text(v) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    return _as_text(value)


def _reject_constant(name: str) -> object:
    raise ValueError(name)


def _decode_part(part: str) -> dict[str, object]:
    text = part.replace("-", "+").replace("_", "/")
    data = text.rstrip("=")
    if not re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", text) or ("=" in text and len(text) % 4) or len(data) % 4 == 1:
        raise IllegalToken("malformed Base64 URL encoded value")
    try:
        raw = base64.b64decode(data + "=" * (-len(data) % 4), validate=True)
    except binascii.Error:
        raise IllegalToken("malformed Base64 URL encoded value") from None
    try:
        node = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError):
        raise IllegalToken("malformed JSON") from None
    if not isinstance(node, dict):
        return {}
    return {key: _convert(value) for key, value in node.items()}


def _number(claims: Mapping[str, object], name: str) -> float | int | None:
    value = claims.get(name)
    if value is None or isinstance(value, (int, float)):
        return value
    raise IllegalToken(f"The '{name}' claim was not of type Number: {_java_type(value)}")


def _java_double(value: float) -> str:
    return f"{float(value):f}"


@dataclass(frozen=True)
class UnsecuredJws:
    """A parsed unsecured token: its claims, principal name, scope and lifetime."""
    value: str
    header: Mapping[str, object]
    claims: Mapping[str, object]
    principal_name: str
    scope: frozenset[str]
    lifetime_ms: int                 # exp, in milliseconds since the epoch
    start_time_ms: int | None        # iat, likewise

    @classmethod
    def parse(cls, token: str, principal_claim_name: str = "sub", scope_claim_name: str = "scope") -> UnsecuredJws:
        """Kafka's OAuthBearerUnsecuredJws: structure, ``alg``, signature, scope, ``exp`` and the principal
        claim; IllegalToken otherwise."""
        if ".." in token:
            raise IllegalToken("Malformed compact serialization contains '..'")
        parts = token.split(".")
        if len(parts) != 3:
            raise IllegalToken(
                "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
        header = _decode_part(parts[0])
        claims = _decode_part(parts[1])
        if "alg" not in header:
            raise IllegalToken("JWS header must have an Algorithm value")
        alg = header["alg"]
        if (alg if isinstance(alg, str) else str(alg)) != "none":
            raise IllegalToken("Unsecured JWS must have 'none' for an algorithm")
        if parts[2]:
            raise IllegalToken("Unsecured JWS must not contain a digital signature")
        scope_value = claims.get(scope_claim_name)
        if isinstance(scope_value, str):
            scope = frozenset() if _blank(scope_value) else frozenset({scope_value.strip()})
        elif scope_value is None or isinstance(scope_value, list):
            scope = frozenset(s.strip() for s in scope_value or () if not _blank(s))
        else:
            raise IllegalToken(f"The '{scope_claim_name}' claim was not of type List: {_java_type(scope_value)}")
        exp = _number(claims, "exp")
        if exp is None:
            raise IllegalToken("No expiration time in JWT")
        principal = claims.get(principal_claim_name)
        if principal is not None and not isinstance(principal, str):
            raise IllegalToken(f"The '{principal_claim_name}' claim was not of type String: {_java_type(principal)}")
        if _blank(principal):
            raise IllegalToken(f"No principal name in JWT claim: {principal_claim_name}")
        assert isinstance(principal, str)
        iat = _number(claims, "iat")
        return cls(
            value=token, header=header, claims=claims, principal_name=principal, scope=scope,
            lifetime_ms=_seconds_to_ms(exp), start_time_ms=None if iat is None else _seconds_to_ms(iat),
        )


def _seconds_to_ms(seconds: float) -> int:
    # Java's Math.round: half up.
    return math.floor(float(seconds) * 1000 + 0.5)


def validate_unsecured_token(token: str, options: UnsecuredValidatorOptions, now_ms: int) -> UnsecuredJws:
    """Kafka's unsecured validator: the token parsed, then ``iat``, ``exp``, their order and the required scope
    checked against ``now_ms``. IllegalToken (with ``scope`` set for a missing scope) otherwise."""
    jws = UnsecuredJws.parse(token, options.principal_claim_name, options.scope_claim_name)
    skew = options.allowable_clock_skew_ms
    iat = _number(jws.claims, "iat")
    if iat is not None and 1000 * float(iat) > now_ms + skew:
        raise IllegalToken(
            f"The Issued At value ({_java_double(iat)} seconds) was after the indicated time ({now_ms} ms) "
            f"plus allowable clock skew ({skew} ms)")
    exp = _number(jws.claims, "exp")
    assert exp is not None
    if now_ms - skew >= 1000 * float(exp):
        raise IllegalToken(
            f"The indicated time ({now_ms} ms) minus allowable clock skew ({skew} ms) was on or after the "
            f"Expiration Time value ({_java_double(exp)} seconds)")
    if iat is not None and float(exp) <= float(iat):
        raise IllegalToken(
            f"The Expiration Time time ({_java_double(exp)} seconds) was not after the Issued At time "
            f"({_java_double(iat)} seconds)")
    for element in options.required_scope:
        if element not in jws.scope:
            required = "[" + ", ".join(options.required_scope) + "]"
            provided = "[" + ", ".join(sorted(jws.scope)) + "]"
            raise IllegalToken(
                f"The provided scope ({provided}) was missing a required scope ({element}).  "
                f"All required scope elements: {required}", scope=required)
    return jws


def error_token(status: str, scope: str | None = None, openid_configuration: str | None = None) -> str:
    """The server's JSON error token, written as Kafka writes it."""
    text = f'{{"status":"{status}"'
    if scope is not None:
        text += f', "scope":"{scope}"'
    if openid_configuration is not None:
        text += f', "openid-configuration":"{openid_configuration}"'
    return text + "}"


# -- the exchange ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ClientInitialResponse:
    token: str
    authorization_id: str
    extensions: Mapping[str, str]


def parse_client_initial_response(token: bytes) -> ClientInitialResponse:
    """Kafka's OAuthBearerClientInitialResponse; Rejected (with Kafka's reason) when malformed."""
    message = token.decode("utf-8", errors="replace")
    m = _CLIENT_INITIAL_RESPONSE.fullmatch(message)
    if m is None:
        raise Rejected("Invalid OAUTHBEARER client first message")
    properties: dict[str, str] = {}
    for pair in m["kvpairs"].split("\x01"):
        if pair:
            key, _, value = pair.partition("=")
            properties[key] = value
    auth = properties.pop("auth", None)
    if auth is None:
        raise Rejected("Invalid OAUTHBEARER client first message: 'auth' not specified")
    for key, value in properties.items():
        if not _KEY_RE.fullmatch(key):
            raise Rejected(f"Extension name {key} is invalid")
        if not _VALUE_RE.fullmatch(value):
            raise Rejected(f"Extension value ({value}) for extension {key} is invalid")
    a = _AUTH.fullmatch(auth)
    if a is None:
        raise Rejected("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if a["scheme"].lower() != "bearer":
        raise Rejected(f"Invalid scheme in OAUTHBEARER client first message: {a['scheme']}")
    return ClientInitialResponse(a["token"], m["authzid"] or "", properties)


def authorization_id_differs_message(authorization_id: str, principal_name: str) -> str:
    return (f"Authentication failed: Client requested an authorization id ({authorization_id}) that is different "
            f"from the token's principal name ({principal_name})")


class OAuthBearerExchange(SaslServerExchange):
    mechanism = MECHANISM

    def __init__(
        self,
        options: UnsecuredValidatorOptions | OidcValidator | None = None,
        *,
        clock_ms: Callable[[], int] = _wall_clock_ms,
        reauthenticating: bool = False,
    ) -> None:
        super().__init__(reauthenticating=reauthenticating)
        self._options = options if options is not None else UnsecuredValidatorOptions()
        self._clock_ms = clock_ms
        self._error: str | None = None
        self.failure_detail: str | None = None
        self.token: UnsecuredJws | ValidatedToken | None = None

    def _evaluate(self, token: bytes) -> bytes:
        if token == _CONTROL_A and self._error is not None:
            raise SaslAuthenticationError(self._error, detail=self.failure_detail)
        self._error = None
        self.failure_detail = None
        response = parse_client_initial_response(token)
        now_ms = self._clock_ms()
        try:
            jws = self._options.validate(response.token, now_ms)
        except IllegalToken as e:
            self._error = error_token("insufficient_scope" if e.scope is not None else "invalid_token", e.scope)
            self.failure_detail = e.description
            return self._error.encode("utf-8")
        except UnreadableToken as e:
            raise IllegalSaslState(f"the token's validation failed unexpectedly: {e.reason}") from None
        except InvalidToken as e:
            self._error = error_token("invalid_token")
            self.failure_detail = e.reason
            return self._error.encode("utf-8")
        if response.authorization_id and response.authorization_id != jws.principal_name:
            raise SaslAuthenticationError(
                authorization_id_differs_message(response.authorization_id, jws.principal_name))
        self.token = jws
        self.extensions = dict(response.extensions)
        self.credential_expiration_ms = jws.lifetime_ms
        self._succeed(jws.principal_name, now_ms)
        return b""
