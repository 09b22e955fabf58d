"""OAUTHBEARER tokens validated as Kafka's OAuthBearerValidatorCallbackHandler validates them: signed JWTs
(RFC 7519) checked against the keys of a JWKS (RFC 7517), with the claims rules of Kafka's broker validator
(BrokerJwtValidator, built on jose4j's JwtConsumer) and of its ClaimValidationUtils.

Everything here is pure: :func:`validate_token` takes the token, the settings, the keys and the time, and
returns the token's principal, scope and lifetime or raises :class:`InvalidToken` with the reason (for the
broker's log; the client is only told ``{"status":"invalid_token"}``). Where the keys come from (a file read
at start, a URL refreshed in the background) is ``trafka.broker.security.jwks``; the validator sees them
through :class:`VerificationKeys`, which it also tells when a token names a key it does not have.

A token is valid when, in this order:

- it is three non-empty dot-separated sections (Kafka's SerializedJwt), once trimmed;
- its header is JSON with an ``alg`` that is not ``none`` (jose4j's DISALLOW_NONE) and no ``crit``;
- a key of the set fits it, chosen as jose4j's VerificationJwkSelector chooses: the ``kid`` of the header
  when it has one, the key type its ``alg`` needs, ``use`` ``sig`` and ``key_ops`` with ``verify`` when the
  key says them; among several, the one whose ``alg`` is the token's, and for EC the curve of the ``alg``;
  the first of those left. RSA keys of fewer than 2048 bits, and HMAC keys shorter than their hash, are
  refused, as jose4j refuses them. When no key
  fits, the key source is told the ``kid`` (a JWKS URL is then fetched again, see ``jwks``) and the token is
  refused this time;
- its signature verifies with that key (PyJWT);
- its claims are a JSON object where, with ``now`` in whole seconds and the clock skew
  (``sasl.oauthbearer.clock.skew.seconds``, 30 by default):

  - ``aud``, a string or a list of strings, names one of ``sasl.oauthbearer.expected.audience`` (and must
    be there). Kafka 4.4's broker needs that setting unless ``sasl.oauthbearer.allow.unverified.audience``
    is true, and then does not look at ``aud`` at all (without either, jose4j refuses a token that has an
    ``aud``);
  - ``iss`` is ``sasl.oauthbearer.expected.issuer`` (and must be there); unless
    ``sasl.oauthbearer.allow.unverified.issuer`` is true and it is not set, when ``iss``, if present, need
    only be a string;
  - ``exp`` and ``iat`` are numbers (read in whole seconds), ``now - skew < exp``, ``exp`` is not before
    ``iat`` nor ``nbf``, and ``now + skew >= nbf`` when ``nbf`` is there (``iat`` may be in the future);
    ``sub`` and ``jti``, if present, are strings;
  - the sub claim (``sasl.oauthbearer.sub.claim.name``, ``sub``) is a string, not empty nor only
    whitespace: trimmed, it is the principal's name;
  - the scope claim (``sasl.oauthbearer.scope.claim.name``, ``scope``), a string or a list of strings, has
    no empty or blank item and no item twice (anything else there is no scope). A list holding a number, a
    boolean, a list or an object fails Kafka's validator unexpectedly: :class:`UnreadableToken`, and the
    connection is closed without an answer, as Kafka's broker closes it;
  - ``exp`` and ``iat`` are not negative.

The session then lasts until ``exp``.
"""
from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

#: The algorithms a JWS may be signed with, and the key type each needs (jose4j's, without ``none``).
ALGORITHM_KEY_TYPES: Mapping[str, str] = {
    "HS256": "oct", "HS384": "oct", "HS512": "oct",
    "RS256": "RSA", "RS384": "RSA", "RS512": "RSA",
    "PS256": "RSA", "PS384": "RSA", "PS512": "RSA",
    "ES256": "EC", "ES384": "EC", "ES512": "EC",
    "EdDSA": "OKP",
}
#: The curve of each ECDSA algorithm.
EC_CURVES: Mapping[str, str] = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}
#: jose4j's smallest RSA key.
MIN_RSA_KEY_BITS = 2048


class InvalidToken(Exception):
    """A token refused; the reason goes to the broker's log."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class UnreadableToken(InvalidToken):
    """A token Kafka's validator fails on with an unexpected error (a scope list with an item that is not a
    string: a ClassCastException there): Kafka's broker then closes the connection without an answer."""


class JwksError(ValueError):
    """A JWKS document that cannot be read as one."""


# -- keys --------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Jwk:
    """One key of a JWKS, as the selector sees it, with its key object for PyJWT."""
    kty: str
    key: Any
    kid: str | None = None
    alg: str | None = None
    use: str | None = None
    key_ops: tuple[str, ...] | None = None
    crv: str | None = None

    def describe(self) -> str:
        return "{" + ", ".join(f"{name}={value}" for name, value in (
            ("kty", self.kty), ("kid", self.kid), ("alg", self.alg), ("use", self.use), ("crv", self.crv))
            if value is not None) + "}"


def parse_jwks(text: str | bytes) -> tuple[Jwk, ...]:
    """The keys of a JWKS document. A key PyJWT cannot use (an unknown ``kty``, missing members) is left out,
    as jose4j leaves it out; JwksError for a document that is not JSON or has no ``keys`` list."""
    import jwt

    try:
        document = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise JwksError(f"the JWKS is not JSON: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise JwksError("The JSON JWKS content does not include the keys member.")
    keys: list[Jwk] = []
    for member in document["keys"]:
        if not isinstance(member, dict) or not isinstance(member.get("kty"), str):
            continue
        try:
            jwk = jwt.PyJWK(member)
        except (jwt.PyJWTError, ValueError, TypeError, KeyError):
            continue
        ops = member.get("key_ops")
        keys.append(Jwk(
            kty=member["kty"], key=jwk.key, kid=_text(member.get("kid")), alg=_text(member.get("alg")),
            use=_text(member.get("use")), key_ops=tuple(str(op) for op in ops) if isinstance(ops, list) else None,
            crv=_text(member.get("crv")),
        ))
    return tuple(keys)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def select_key(header: Mapping[str, object], keys: Sequence[Jwk]) -> Jwk | None:
    """The key verifying a JWS with ``header``, chosen as jose4j's VerificationJwkSelector does; None when
    no key fits."""
    alg = header.get("alg")
    kty = ALGORITHM_KEY_TYPES.get(alg) if isinstance(alg, str) else None
    kid = header.get("kid")
    fitting = [key for key in keys
               if (kid is None or key.kid == kid)
               and key.kty == kty
               and (key.use is None or key.use == "sig")
               and (key.key_ops is None or "verify" in key.key_ops)]
    if len(fitting) > 1:
        fitting = [key for key in fitting if key.alg is None or key.alg == alg]
    if len(fitting) > 1 and kty == "EC":
        fitting = [key for key in fitting if key.crv is None or key.crv == EC_CURVES.get(str(alg))]
    return fitting[0] if fitting else None


class VerificationKeys(Protocol):
    """Where the validator finds its keys: the current ones, and a word when a token needs one it lacks.
    ``keys()`` may raise InvalidToken when the keys cannot be had (the token is then refused)."""

    def keys(self) -> Sequence[Jwk]: ...

    def key_missing(self, kid: str | None) -> None: ...


@dataclass(frozen=True)
class StaticKeys:
    """Keys that do not change."""
    jwks: tuple[Jwk, ...]
    location: str = ""

    def keys(self) -> Sequence[Jwk]:
        return self.jwks

    def key_missing(self, kid: str | None) -> None:
        return None


# -- settings ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class OidcValidatorSettings:
    """Kafka's sasl.oauthbearer.* settings of the broker's validator, with its defaults."""
    expected_audience: frozenset[str] = frozenset()
    expected_issuer: str | None = None
    #: sasl.oauthbearer.allow.unverified.audience: without an expected audience, ``aud`` is not checked.
    allow_unverified_audience: bool = False
    clock_skew_seconds: int = 30
    scope_claim_name: str = "scope"
    sub_claim_name: str = "sub"


@dataclass(frozen=True)
class ValidatedToken:
    """A token the validator accepted."""
    value: str
    principal_name: str
    scope: frozenset[str]
    lifetime_ms: int                 # exp, in milliseconds since the epoch
    start_time_ms: int | None        # iat, likewise
    claims: Mapping[str, object]


# -- validation ----------------------------------------------------------------------------------------------------

def _sections(token: str) -> list[str]:
    token = token.strip()
    if not token:
        raise InvalidToken("Empty JWT provided; expected three sections (header, payload, and signature)")
    sections = token.split(".")
    while sections and sections[-1] == "":  # as Java's String.split drops trailing empty strings
        sections.pop()
    if len(sections) != 3:
        raise InvalidToken(f"Malformed JWT provided ({token}); expected three sections (header, payload, and "
                           f"signature), but {len(sections)} sections provided")
    for section, name in zip(sections, ("header", "payload", "signature")):
        if not section.strip():
            raise InvalidToken("Malformed JWT provided; expected at least three sections (header, payload, and "
                               f"signature), but {name} section missing")
    return sections


def _json_object(section: str, what: str) -> dict[str, object]:
    try:
        raw = base64.urlsafe_b64decode(section + "=" * (-len(section) % 4))
        value = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidToken(f"Could not validate the access token: the {what} is not base64url-encoded JSON") \
            from None
    if not isinstance(value, dict):
        raise InvalidToken(f"Could not validate the access token: the {what} is not a JSON object")
    return value


def _seconds(claims: Mapping[str, object], name: str) -> int | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidToken(f"Could not validate the access token: The value of the '{name}' claim is not the "
                           f"expected type ({value!r} is not a number)")
    return int(value)  # jose4j's NumericDate: whole seconds, towards zero


def _string_claim(claims: Mapping[str, object], name: str) -> str | None:
    value = claims.get(name)
    if value is not None and not isinstance(value, str):
        raise InvalidToken(f"Could not validate the access token: The value of the '{name}' claim is not the "
                           f"expected type ({value!r} is not a string)")
    return value


def _claims_valid(claims: Mapping[str, object], settings: OidcValidatorSettings, now_s: int) -> None:
    """jose4j's JwtConsumer as Kafka builds it: audience, issuer, times, sub and jti."""
    fail = "Could not validate the access token: "
    if not settings.expected_audience and settings.allow_unverified_audience:
        pass
    elif "aud" in claims:
        aud = claims["aud"]
        audiences = [aud] if isinstance(aud, str) else aud
        if not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences):
            raise InvalidToken(fail + f"The value of the 'aud' claim is not the expected type ({aud!r})")
        if not settings.expected_audience:
            raise InvalidToken(fail + f"Audience (aud) claim {audiences} present in the JWT but no expected audience "
                               "value(s) were provided to the JWT Consumer.")
        if not any(a in settings.expected_audience for a in audiences):
            raise InvalidToken(fail + f"Audience (aud) claim {audiences} doesn't contain an acceptable identifier. "
                               f"Expected {sorted(settings.expected_audience)} as an aud value.")
    elif settings.expected_audience:
        raise InvalidToken(fail + "No Audience (aud) claim present.")
    iss = _string_claim(claims, "iss")
    if settings.expected_issuer is not None:
        if iss is None:
            raise InvalidToken(fail + "No Issuer (iss) claim present.")
        if iss != settings.expected_issuer:
            raise InvalidToken(fail + f"Issuer (iss) claim value ({iss}) doesn't match expected value of "
                               f"{settings.expected_issuer}")
    exp = _seconds(claims, "exp")
    iat = _seconds(claims, "iat")
    nbf = _seconds(claims, "nbf")
    skew = settings.clock_skew_seconds
    if exp is None:
        raise InvalidToken(fail + "No Expiration Time (exp) claim present.")
    if iat is None:
        raise InvalidToken(fail + "No Issued At (iat) claim present.")
    if now_s - skew >= exp:
        raise InvalidToken(fail + f"The JWT is no longer valid - the evaluation time NumericDate{{{now_s}}} is on or "
                           f"after the Expiration Time (exp=NumericDate{{{exp}}}) claim value (even when providing "
                           f"{skew} seconds of leeway to account for clock skew).")
    for name, value, what in (("iat", iat, "Issued At"), ("nbf", nbf, "Not Before")):
        if value is not None and exp < value:
            raise InvalidToken(fail + f"The Expiration Time (exp=NumericDate{{{exp}}}) claim value cannot be before "
                               f"the {what} ({name}=NumericDate{{{value}}}) claim value.")
    if nbf is not None and now_s + skew < nbf:
        raise InvalidToken(fail + f"The JWT is not yet valid as the evaluation time NumericDate{{{now_s}}} is before "
                           f"the Not Before (nbf=NumericDate{{{nbf}}}) claim time (even when providing {skew} "
                           "seconds of leeway to account for clock skew).")
    _string_claim(claims, "sub")
    _string_claim(claims, "jti")


def _claim_string(name: str, value: str | None) -> str:
    """Kafka's ClaimValidationUtils.validateString: the value trimmed."""
    if value is None:
        raise InvalidToken(f"{name} value must be non-null")
    if not value:
        raise InvalidToken(f"{name} value must be non-empty")
    value = value.strip()
    if not value:
        raise InvalidToken(f"{name} value must not contain only whitespace")
    return value


def _scopes(name: str, raw: object) -> frozenset[str]:
    items = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    scopes: set[str] = set()
    for item in items:
        if item is not None and not isinstance(item, str):
            raise UnreadableToken(f"{name} value holds {item!r}, not a string")
        scope = _claim_string(name, item)
        if scope in scopes:
            raise InvalidToken(f"{name} value must not contain duplicates - {scope} already present")
        scopes.add(scope)
    return frozenset(scopes)


def _verified_payload(token: str, key: Jwk, alg: str) -> bytes:
    import jwt

    if key.kty == "RSA" and getattr(key.key, "key_size", MIN_RSA_KEY_BITS) < MIN_RSA_KEY_BITS:
        raise InvalidToken(f"Could not validate the access token: An RSA key of size {key.key.key_size} bits or "
                           f"larger MUST be used with the all JOSE RSA algorithms (given key was only "
                           f"{key.key.key_size} bits).")
    if key.kty == "oct" and isinstance(key.key, bytes) and len(key.key) * 8 < int(alg[2:]):
        raise InvalidToken(f"Could not validate the access token: A key of the same size as the hash output (i.e. "
                           f"{alg[2:]} bits for {alg}) or larger MUST be used with the HMAC SHA algorithms but this "
                           f"key is only {len(key.key) * 8} bits")
    try:
        decoded = jwt.PyJWS().decode_complete(token, key.key, algorithms=[alg])
    except jwt.InvalidSignatureError:
        raise InvalidToken(f"Could not validate the access token: JWS signature is invalid (key {key.describe()})") \
            from None
    except (jwt.PyJWTError, ValueError, TypeError) as exc:
        raise InvalidToken(f"Could not validate the access token: {exc}") from None
    return decoded["payload"]


def validate_token(token: str, settings: OidcValidatorSettings, keys: VerificationKeys,
                   now_ms: int) -> ValidatedToken:
    """The token checked as the module's docstring says; InvalidToken with the reason otherwise."""
    sections = _sections(token)
    token = ".".join(sections)
    header = _json_object(sections[0], "header")
    alg = header.get("alg")
    if not isinstance(alg, str) or not alg:
        raise InvalidToken("Could not validate the access token: JWS header has no alg")
    if alg == "none":
        raise InvalidToken("Could not validate the access token: 'none' is not a permitted algorithm")
    if alg not in ALGORITHM_KEY_TYPES:
        raise InvalidToken(f"Could not validate the access token: {alg} is an unknown, unsupported or "
                           "unavailable alg algorithm")
    if "crit" in header:
        raise InvalidToken(f"Could not validate the access token: Unrecognized header(s) {header['crit']!r} "
                           "marked as critical")
    available = keys.keys()
    key = select_key(header, available)
    if key is None:
        kid = header.get("kid")
        keys.key_missing(kid if isinstance(kid, str) else None)
        raise InvalidToken(
            "Could not validate the access token: Unable to find a suitable verification key for JWS w/ header "
            f"{json.dumps(header, separators=(',', ':'))} from JWKs "
            f"[{', '.join(k.describe() for k in available)}]")
    payload = _verified_payload(token, key, alg)
    try:
        claims = json.loads(payload.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise InvalidToken("Could not validate the access token: the payload is not JSON") from None
    if not isinstance(claims, dict):
        raise InvalidToken("Could not validate the access token: the payload is not a JSON object")
    _claims_valid(claims, settings, now_ms // 1000)
    sub_raw = claims.get(settings.sub_claim_name)
    if sub_raw is not None and not isinstance(sub_raw, str):
        raise InvalidToken(f"Could not extract the '{settings.sub_claim_name}' claim from the access token")
    scope = _scopes(settings.scope_claim_name, claims.get(settings.scope_claim_name))
    exp = _seconds(claims, "exp")
    iat = _seconds(claims, "iat")
    assert exp is not None and iat is not None
    if exp < 0:
        raise InvalidToken(f'exp value must be non-negative; value given was "{exp * 1000}"')
    principal = _claim_string(settings.sub_claim_name, sub_raw)
    if iat < 0:
        raise InvalidToken(f'iat value must be null or non-negative; value given was "{iat * 1000}"')
    return ValidatedToken(value=token, principal_name=principal, scope=scope, lifetime_ms=exp * 1000,
                          start_time_ms=iat * 1000, claims=claims)


TokenValidator = Callable[[str, int], ValidatedToken]


@dataclass(frozen=True)
class OidcValidator:
    """Kafka's OAuthBearerValidatorCallbackHandler for one listener: its settings and its keys."""
    settings: OidcValidatorSettings
    keys: VerificationKeys

    def validate(self, token: str, now_ms: int) -> ValidatedToken:
        return validate_token(token, self.settings, self.keys, now_ms)
