"""OAUTHBEARER tokens validated against a JWKS as Kafka's OAuthBearerValidatorCallbackHandler does: every claim
rule and refusal, key selection by kid, key type, alg and curve, key rotation of a refreshing JWKS, and the
listener settings that choose the validator."""
from __future__ import annotations

import base64
import json
import time
import warnings

import jwt
import pytest
import trio
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from trafka.broker.config import ConfigError, ListenerConfig
from trafka.broker.security.authentication import listener_sasl, oauthbearer_setting, oidc_validator
from trafka.broker.security.credentials import ScramCredentialStore
from trafka.broker.security.jwks import JwksUnavailable, RefreshingJwks, read_jwks_file
from trafka.broker.security.sasl import IllegalSaslState, SaslAuthenticationError, SaslServerContext, new_exchange
from trafka.broker.security.sasl.oidc import (
    InvalidToken,
    Jwk,
    OidcValidator,
    OidcValidatorSettings,
    StaticKeys,
    parse_jwks,
    select_key,
    validate_token,
)

NOW_S = 1_800_000_000
NOW_MS = NOW_S * 1000 + 123
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
RSA_OTHER = rsa.generate_private_key(public_exponent=65537, key_size=2048)
RSA_SMALL = rsa.generate_private_key(public_exponent=65537, key_size=1024)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
EC_384 = ec.generate_private_key(ec.SECP384R1())


def public_jwk(private, kid: str | None, **members) -> dict:
    algorithm = jwt.algorithms.RSAAlgorithm if isinstance(private, rsa.RSAPrivateKey) else jwt.algorithms.ECAlgorithm
    jwk = json.loads(algorithm.to_jwk(private.public_key()))
    if kid is not None:
        jwk["kid"] = kid
    return {**jwk, **members}


def jwks(*keys: dict) -> str:
    return json.dumps({"keys": list(keys)})


KEYS = StaticKeys(parse_jwks(jwks(public_jwk(RSA_KEY, "rsa-1", alg="RS256", use="sig"),
                                  public_jwk(EC_KEY, "ec-1", alg="ES256"),
                                  public_jwk(RSA_SMALL, "small"))))
SETTINGS = OidcValidatorSettings()


def sign(claims: dict | None = None, *, key=RSA_KEY, alg: str = "RS256", kid: str | None = "rsa-1",
         headers: dict | None = None, drop: tuple[str, ...] = ()) -> str:
    body = {"sub": "alice", "iat": NOW_S - 10, "exp": NOW_S + 3600, **(claims or {})}
    for name in drop:
        body.pop(name)
    with warnings.catch_warnings():  # the 1024-bit key is there to be refused
        warnings.simplefilter("ignore")
        return jwt.api_jws.encode(json.dumps(body).encode(), key, algorithm=alg,
                                  headers={**({"kid": kid} if kid else {}), **(headers or {})})


def b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def refused(token: str, settings: OidcValidatorSettings = SETTINGS, keys=KEYS) -> str:
    with pytest.raises(InvalidToken) as caught:
        validate_token(token, settings, keys, NOW_MS)
    return caught.value.reason


# -- what is accepted --------------------------------------------------------------------------------------------

def test_a_signed_token_gives_the_principal_scope_and_lifetime():
    token = validate_token(sign({"scope": "read write"}), SETTINGS, KEYS, NOW_MS)
    assert token.principal_name == "alice"
    assert token.scope == {"read write"}
    assert token.lifetime_ms == (NOW_S + 3600) * 1000
    assert token.start_time_ms == (NOW_S - 10) * 1000


@pytest.mark.parametrize("claims, settings, principal, scope", [
    ({"scope": ["a", " b "]}, SETTINGS, "alice", {"a", "b"}),
    ({"scope": {"not": "a list"}}, SETTINGS, "alice", set()),
    ({"scope": 7}, SETTINGS, "alice", set()),
    ({"sub": "  bob  "}, SETTINGS, "bob", set()),
    ({"client_id": "svc", "roles": ["x"]}, OidcValidatorSettings(sub_claim_name="client_id", scope_claim_name="roles"),
     "svc", {"x"}),
    ({"aud": "kafka"}, OidcValidatorSettings(expected_audience=frozenset({"kafka", "other"})), "alice", set()),
    ({"aud": ["x", "kafka"]}, OidcValidatorSettings(expected_audience=frozenset({"kafka"})), "alice", set()),
    ({"aud": 7}, OidcValidatorSettings(allow_unverified_audience=True), "alice", set()),
    ({"iss": "https://idp"}, OidcValidatorSettings(expected_issuer="https://idp"), "alice", set()),
    ({"iss": "whoever"}, SETTINGS, "alice", set()),
    ({"exp": NOW_S - 29, "iat": NOW_S - 99}, SETTINGS, "alice", set()),   # within the 30 s of skew
    ({"nbf": NOW_S + 30}, SETTINGS, "alice", set()),
    ({"iat": NOW_S + 3000}, SETTINGS, "alice", set()),                     # iat in the future is not checked
    ({"iat": NOW_S + 3600, "nbf": NOW_S}, SETTINGS, "alice", set()),       # exp may equal iat
    ({"exp": NOW_S + 10.9, "iat": NOW_S - 0.5}, SETTINGS, "alice", set()),  # numbers read in whole seconds
], ids=["scope-list", "scope-object", "scope-number", "sub-trimmed", "claim-names", "aud-string", "aud-list", "aud-unverified",
        "issuer", "issuer-unchecked", "exp-skew", "nbf-skew", "iat-future", "exp-is-iat", "fractions"])
def test_accepted(claims, settings, principal, scope):
    token = validate_token(sign(claims), settings, KEYS, NOW_MS)
    assert (token.principal_name, token.scope) == (principal, scope)


def test_es256_and_a_token_without_kid_take_the_key_of_their_type():
    assert validate_token(sign(key=EC_KEY, alg="ES256", kid="ec-1"), SETTINGS, KEYS, NOW_MS).principal_name == "alice"
    assert validate_token(sign(kid=None), SETTINGS, KEYS, NOW_MS).principal_name == "alice"
    assert validate_token(sign(key=EC_KEY, alg="ES256", kid=None), SETTINGS, KEYS, NOW_MS).principal_name == "alice"


def test_a_key_alg_other_than_the_tokens_is_still_used_when_it_is_the_only_fit():
    assert validate_token(sign(alg="RS512"), SETTINGS, KEYS, NOW_MS).lifetime_ms == (NOW_S + 3600) * 1000


# -- what is refused ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("token, settings, reason", [
    ("", SETTINGS, "Empty JWT provided"),
    ("a.b", SETTINGS, "2 sections provided"),
    ("a..c", SETTINGS, "payload section missing"),
    (f"{b64({'alg': 'none'})}.{b64({'sub': 'alice', 'iat': NOW_S, 'exp': NOW_S + 60})}.", SETTINGS,
     "2 sections provided"),
    (f"{b64({'alg': 'none'})}.{b64({'sub': 'alice', 'iat': NOW_S, 'exp': NOW_S + 60})}.c2ln", SETTINGS,
     "'none' is not a permitted algorithm"),
    ("e30.e30.c2ln", SETTINGS, "no alg"),
    (f"{b64({'alg': 'XX9'})}.e30.c2ln", SETTINGS, "XX9 is an unknown"),
    ("!!!.e30.c2ln", SETTINGS, "not base64url-encoded JSON"),
    (sign(headers={"crit": ["exp"]}), SETTINGS, "marked as critical"),
    (sign(key=RSA_OTHER), SETTINGS, "JWS signature is invalid"),
    (sign(kid="nope"), SETTINGS, "Unable to find a suitable verification key"),
    (sign(key=EC_384, alg="ES384", kid=None), SETTINGS, "Could not validate the access token"),
    (sign(kid="small", key=RSA_SMALL), SETTINGS, "An RSA key of size 1024 bits"),
    (sign(key=EC_KEY, alg="ES256", kid="rsa-1"), SETTINGS, "Unable to find a suitable verification key"),
    (sign(drop=("exp",)), SETTINGS, "No Expiration Time (exp) claim present."),
    (sign(drop=("iat",)), SETTINGS, "No Issued At (iat) claim present."),
    (sign({"exp": NOW_S - 30}), SETTINGS, "is on or after the Expiration Time"),
    (sign({"exp": NOW_S - 100}), OidcValidatorSettings(clock_skew_seconds=100), "on or after the Expiration Time"),
    (sign({"nbf": NOW_S + 31}), SETTINGS, "The JWT is not yet valid"),
    (sign({"iat": NOW_S + 3601}), SETTINGS, "cannot be before the Issued At (iat=NumericDate{1800003601})"),
    (sign({"nbf": NOW_S + 3601}), SETTINGS, "cannot be before the Not Before"),
    (sign({"exp": "tomorrow"}), SETTINGS, "'exp' claim is not the expected type"),
    (sign({"iat": True}), SETTINGS, "'iat' claim is not the expected type"),
    (sign({"aud": "kafka"}), SETTINGS, "no expected audience value(s) were provided"),
    (sign({"aud": "other"}), OidcValidatorSettings(expected_audience=frozenset({"kafka"})),
     "doesn't contain an acceptable identifier"),
    (sign({"aud": 5}), OidcValidatorSettings(expected_audience=frozenset({"kafka"})), "'aud' claim"),
    (sign(), OidcValidatorSettings(expected_audience=frozenset({"kafka"})), "No Audience (aud) claim present."),
    (sign({"iss": "https://evil"}), OidcValidatorSettings(expected_issuer="https://idp"), "doesn't match expected"),
    (sign(), OidcValidatorSettings(expected_issuer="https://idp"), "No Issuer (iss) claim present."),
    (sign({"iss": 1}), SETTINGS, "'iss' claim is not the expected type"),
    (sign(drop=("sub",)), SETTINGS, "sub value must be non-null"),
    (sign({"sub": ""}), SETTINGS, "sub value must be non-empty"),
    (sign({"sub": "   "}), SETTINGS, "sub value must not contain only whitespace"),
    (sign({"sub": 42}), SETTINGS, "'sub' claim is not the expected type"),
    (sign({"uid": 42}), OidcValidatorSettings(sub_claim_name="uid"), "Could not extract the 'uid' claim"),
    (sign({"jti": 42}), SETTINGS, "'jti' claim is not the expected type"),
    (sign({"scope": ["a", "a"]}), SETTINGS, "scope value must not contain duplicates - a already present"),
    (sign({"scope": ["a", " a"]}), SETTINGS, "must not contain duplicates"),
    (sign({"scope": ["a", ""]}), SETTINGS, "scope value must be non-empty"),
    (sign({"scope": " "}), SETTINGS, "scope value must not contain only whitespace"),
    (sign({"scope": [1]}), SETTINGS, "scope value holds 1, not a string"),
    (sign({"exp": -1, "iat": -5}), OidcValidatorSettings(clock_skew_seconds=0), "is on or after the Expiration"),
], ids=["empty", "two-sections", "empty-section", "unsecured", "alg-none-signed", "no-alg", "unknown-alg",
        "bad-base64", "crit", "wrong-key", "unknown-kid", "no-fitting-curve", "small-rsa", "kid-of-other-type",
        "no-exp", "no-iat", "expired", "expired-wide-skew", "not-yet-valid", "exp-before-iat", "exp-before-nbf", "exp-string", "iat-bool",
        "aud-unexpected", "aud-wrong", "aud-type", "aud-missing", "iss-wrong", "iss-missing", "iss-type", "no-sub",
        "sub-empty", "sub-blank", "sub-number", "custom-sub-number", "jti-type", "scope-duplicates",
        "scope-duplicates-after-trim", "scope-empty-item", "scope-blank", "scope-number-item", "negative-exp"])
def test_refused(token, settings, reason):
    assert reason in refused(token, settings)


def test_the_exchange_answers_a_refused_token_as_kafka_does():
    context = SaslServerContext(oauthbearer=OidcValidator(SETTINGS, KEYS), clock_ms=lambda: NOW_MS)
    exchange = new_exchange("OAUTHBEARER", context)
    token = sign({"exp": NOW_S - 600})
    assert exchange.respond(f"n,,\x01auth=Bearer {token}\x01\x01".encode()) == b'{"status":"invalid_token"}'
    with pytest.raises(SaslAuthenticationError) as caught:
        exchange.respond(b"\x01")
    assert caught.value.message == '{"status":"invalid_token"}'
    assert "Expiration Time" in caught.value.detail


def test_a_scope_list_kafka_cannot_read_closes_the_connection_without_an_answer():
    context = SaslServerContext(oauthbearer=OidcValidator(SETTINGS, KEYS), clock_ms=lambda: NOW_MS)
    exchange = new_exchange("OAUTHBEARER", context)
    with pytest.raises(IllegalSaslState):
        exchange.respond(f"n,,\x01auth=Bearer {sign({'scope': ['read', True]})}\x01\x01".encode())


def test_the_exchange_accepts_a_valid_token_until_its_exp():
    context = SaslServerContext(oauthbearer=OidcValidator(SETTINGS, KEYS), clock_ms=lambda: NOW_MS)
    exchange = new_exchange("OAUTHBEARER", context)
    token = sign({"exp": NOW_S + 60})
    assert exchange.respond(f"n,a=alice,\x01auth=Bearer {token}\x01traceId=7\x01\x01".encode()) == b""
    assert exchange.principal == "User:alice"
    assert exchange.session_lifetime_ms == 60_000 - 123
    assert exchange.extensions == {"traceId": "7"}


# -- key selection -------------------------------------------------------------------------------------------------

def _jwk(kty="RSA", kid=None, alg=None, use=None, key_ops=None, crv=None, name="") -> Jwk:
    return Jwk(kty=kty, key=name, kid=kid, alg=alg, use=use, key_ops=key_ops, crv=crv)


@pytest.mark.parametrize("header, keys, chosen", [
    ({"alg": "RS256", "kid": "b"}, [_jwk(kid="a", name="A"), _jwk(kid="b", name="B")], "B"),
    ({"alg": "RS256", "kid": "c"}, [_jwk(kid="a", name="A")], None),
    ({"alg": "RS256"}, [_jwk(kty="EC", name="E"), _jwk(kid="x", name="A"), _jwk(name="B")], "A"),
    ({"alg": "RS256", "kid": "a"}, [_jwk(kid="a", use="enc", name="A"), _jwk(kid="a", name="B")], "B"),
    ({"alg": "RS256", "kid": "a"}, [_jwk(kid="a", key_ops=("sign",), name="A"), _jwk(kid="a", key_ops=("verify",),
                                                                                    name="B")], "B"),
    ({"alg": "RS512"}, [_jwk(alg="RS256", name="A"), _jwk(alg="RS512", name="B")], "B"),
    ({"alg": "RS512"}, [_jwk(alg="RS256", name="A")], "A"),
    ({"alg": "ES384"}, [_jwk(kty="EC", crv="P-256", name="A"), _jwk(kty="EC", crv="P-384", name="B")], "B"),
    ({"alg": "HS256"}, [_jwk(name="A"), _jwk(kty="oct", name="H")], "H"),
], ids=["by-kid", "unknown-kid", "by-type", "use", "key-ops", "alg-among-several", "alg-only-one", "curve", "hmac"])
def test_select_key(header, keys, chosen):
    selected = select_key(header, keys)
    assert (selected.key if selected else None) == chosen


def test_hmac_keys_no_shorter_than_their_hash():
    def oct_jwk(secret: bytes, kid: str) -> dict:
        return {"kty": "oct", "kid": kid, "k": base64.urlsafe_b64encode(secret).rstrip(b"=").decode()}

    keys = StaticKeys(parse_jwks(jwks(oct_jwk(b"k" * 32, "long"), oct_jwk(b"s" * 16, "short"))))
    assert validate_token(sign(key=b"k" * 32, alg="HS256", kid="long"), SETTINGS, keys, NOW_MS).principal_name == "alice"
    assert "256 bits for HS256" in refused(sign(key=b"s" * 16, alg="HS256", kid="short"), keys=keys)
    assert "512 bits for HS512" in refused(sign(key=b"k" * 32, alg="HS512", kid="long"), keys=keys)


def test_jwks_parsing_leaves_out_what_it_cannot_use():
    keys = parse_jwks(jwks(public_jwk(RSA_KEY, "a"), {"kty": "XYZ", "kid": "b"}, {"kty": "RSA", "kid": "c"}, "junk"))
    assert [k.kid for k in keys] == ["a"]
    assert parse_jwks('{"keys": []}') == ()
    for document in ("[]", "{}", "not json", '{"keys": {}}'):
        with pytest.raises(ValueError):
            parse_jwks(document)


# -- the JWKS file and URL -----------------------------------------------------------------------------------------

def test_jwks_file(tmp_path):
    path = tmp_path / "jwks.json"
    path.write_text(jwks(public_jwk(RSA_KEY, "rsa-1")))
    assert [k.kid for k in read_jwks_file(path.as_uri()).keys()] == ["rsa-1"]
    with pytest.raises(JwksUnavailable, match=r"contains a file \(.*missing.json\) that doesn't exist"):
        read_jwks_file((tmp_path / "missing.json").as_uri())
    with pytest.raises(JwksUnavailable, match="references a directory"):
        read_jwks_file(tmp_path.as_uri())
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(JwksUnavailable, match="does not include the keys member"):
        read_jwks_file((tmp_path / "bad.json").as_uri())


def test_a_jwks_file_is_read_again_when_it_changes(tmp_path):
    import os

    path = tmp_path / "jwks.json"
    path.write_text(jwks(public_jwk(RSA_KEY, "rsa-1")))
    keys = read_jwks_file(path.as_uri())
    rotated = sign(key=RSA_OTHER, kid="rsa-2")
    assert "Unable to find a suitable verification key" in refused(rotated, keys=keys)
    path.write_text(jwks(public_jwk(RSA_KEY, "rsa-1"), public_jwk(RSA_OTHER, "rsa-2")))
    os.utime(path, ns=(1, 2_000_000_000))  # a modification time of its own, however coarse the clock
    assert validate_token(rotated, SETTINGS, keys, NOW_MS).principal_name == "alice"
    path.write_text("not json")
    os.utime(path, ns=(1, 3_000_000_000))
    assert "the JWKS file" in refused(rotated, keys=keys)  # refused while the file is broken...
    path.write_text(jwks(public_jwk(RSA_OTHER, "rsa-2")))
    os.utime(path, ns=(1, 4_000_000_000))
    assert validate_token(rotated, SETTINGS, keys, NOW_MS)  # ...and read again once mended
    path.unlink()
    assert "cannot be read" in refused(rotated, keys=keys)


class FakeIdp:
    """The documents a JWKS URL serves, in turn; an exception instance is a failed fetch."""

    def __init__(self, *documents) -> None:
        self.documents = list(documents)
        self.fetches = 0

    async def __call__(self, url: str) -> bytes:
        self.fetches += 1
        document = self.documents[0] if len(self.documents) == 1 else self.documents.pop(0)
        if isinstance(document, Exception):
            raise JwksUnavailable(str(document))
        return document.encode()


async def test_key_rotation_through_an_expedited_refresh():
    clock = [0]
    idp = FakeIdp(jwks(public_jwk(RSA_KEY, "rsa-1")), jwks(public_jwk(RSA_KEY, "rsa-1"), public_jwk(RSA_OTHER, "rsa-2")))
    keys = RefreshingJwks("http://idp/jwks", refresh_ms=3_600_000, fetch=idp, clock_ms=lambda: clock[0])
    await keys.load()
    new_token = sign(key=RSA_OTHER, kid="rsa-2")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(keys.run)
        await trio.testing.wait_all_tasks_blocked()
        assert "Unable to find a suitable verification key" in refused(new_token, keys=keys)  # refused this time
        while keys.refreshes == 0:
            await trio.sleep(0.001)
        assert validate_token(new_token, SETTINGS, keys, NOW_MS).principal_name == "alice"  # picked up
        nursery.cancel_scope.cancel()
    assert idp.fetches == 2


def test_a_missing_kid_asks_for_a_refresh_once_a_minute_and_16_are_remembered():
    clock = [0]
    keys = RefreshingJwks("http://idp/jwks", fetch=FakeIdp("{}"), clock_ms=lambda: clock[0])
    asked = []
    keys._wakeup = type("Wakeup", (), {"set": lambda self: asked.append(clock[0])})()
    keys.key_missing("k")
    keys.key_missing("k")
    keys.key_missing(None)
    keys.key_missing("x" * 1001)
    assert len(asked) == 1
    clock[0] = 60_000
    keys.key_missing("k")
    assert len(asked) == 2
    for i in range(16):
        keys.key_missing(f"other-{i}")
    keys.key_missing("k")  # forgotten: the 16 others pushed it out
    assert len(asked) == 19
    keys.install(jwks(public_jwk(RSA_KEY, "other-15")))
    keys.key_missing("other-15")  # found in the last refresh, so no longer remembered as missing
    assert len(asked) == 20


async def test_a_failed_refresh_retries_with_backoff_then_keeps_the_keys_in_hand(autojump_clock):
    def now() -> int:
        return int(trio.current_time() * 1000)

    idp = FakeIdp(jwks(public_jwk(RSA_KEY, "rsa-1")), *[OSError("down")] * 3, jwks(public_jwk(RSA_OTHER, "rsa-2")))
    keys = RefreshingJwks("http://idp/jwks", retry_backoff_ms=100, retry_backoff_max_ms=10_000,
                          fetch=idp, clock_ms=now)
    await keys.load()
    start = trio.current_time()
    assert await keys.refresh()
    assert [k.kid for k in keys.keys()] == ["rsa-2"]
    assert trio.current_time() - start == pytest.approx(0.1 + 0.2 + 0.4)
    failing = RefreshingJwks("http://idp/jwks", retry_backoff_ms=100, retry_backoff_max_ms=1000,
                             fetch=FakeIdp(OSError("down")), clock_ms=now)
    failing.install(jwks(public_jwk(RSA_KEY, "rsa-1")))
    assert not await failing.refresh()
    assert [k.kid for k in failing.keys()] == ["rsa-1"]


async def test_scheduled_refreshes(autojump_clock):
    idp = FakeIdp(jwks(public_jwk(RSA_KEY, "rsa-1")))
    keys = RefreshingJwks("http://idp/jwks", refresh_ms=1000, fetch=idp,
                          clock_ms=lambda: int(trio.current_time() * 1000))
    await keys.load()
    with trio.move_on_after(3.5):
        await keys.run()
    assert keys.refreshes == 3


# -- settings ------------------------------------------------------------------------------------------------------

VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
UNVERIFIED = {"sasl.oauthbearer.allow.unverified.audience": "true", "sasl.oauthbearer.allow.unverified.issuer": "true"}
LISTENER = ListenerConfig(name="SASL_PLAINTEXT", host="127.0.0.1", port=0, security_protocol="SASL_PLAINTEXT")


def test_settings_precedence():
    properties = {"sasl.oauthbearer.expected.issuer": "broker",
                  "listener.name.sasl_plaintext.sasl.oauthbearer.expected.issuer": "listener",
                  "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.expected.issuer": "mechanism"}
    assert oauthbearer_setting(properties, "SASL_PLAINTEXT", "sasl.oauthbearer.expected.issuer") == "mechanism"
    del properties["listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.expected.issuer"]
    assert oauthbearer_setting(properties, "SASL_PLAINTEXT", "sasl.oauthbearer.expected.issuer") == "listener"
    assert oauthbearer_setting(properties, "OTHER", "sasl.oauthbearer.expected.issuer") == "broker"


def test_the_validator_from_settings(tmp_path):
    path = tmp_path / "jwks.json"
    path.write_text(jwks(public_jwk(RSA_KEY, "rsa-1")))
    prefix = "listener.name.sasl_plaintext.oauthbearer."
    assert oidc_validator({}, "SASL_PLAINTEXT") is None
    validator, refreshers = oidc_validator({
        prefix + "sasl.server.callback.handler.class": VALIDATOR, "sasl.oauthbearer.jwks.endpoint.url": path.as_uri(),
        "sasl.oauthbearer.expected.audience": "kafka, other", "sasl.oauthbearer.clock.skew.seconds": "5",
        "sasl.oauthbearer.allow.unverified.issuer": "true",
        prefix + "sasl.oauthbearer.sub.claim.name": " client_id "}, "SASL_PLAINTEXT")
    assert refreshers == ()
    assert validator.settings == OidcValidatorSettings(frozenset({"kafka", "other"}), None, False, 5, "scope",
                                                       "client_id")
    _, (refresher,) = oidc_validator({
        prefix + "sasl.server.callback.handler.class": VALIDATOR.replace("oauthbearer.", "oauthbearer.secured."),
        prefix + "sasl.oauthbearer.jwks.endpoint.url": "https://idp/jwks", **UNVERIFIED,
        "sasl.oauthbearer.jwks.endpoint.refresh.ms": "60000"}, "SASL_PLAINTEXT")
    assert (refresher.url, refresher.refresh_ms, refresher.retry_backoff_ms) == ("https://idp/jwks", 60000, 100)


@pytest.mark.parametrize("settings, message", [
    ({"sasl.server.callback.handler.class": "com.example.Handler"}, "com.example.Handler: not served"),
    ({"sasl.server.callback.handler.class": VALIDATOR}, 'requires "sasl.oauthbearer.jwks.endpoint.url" to be'),
    ({"sasl.server.callback.handler.class": VALIDATOR, "sasl.oauthbearer.jwks.endpoint.url": "http://idp",
      "sasl.oauthbearer.allow.unverified.issuer": "true"},
     ('requires "sasl.oauthbearer.expected.audience" to be configured so that the token\'s audience ("aud") claim '
      'can be verified, but it was not set. Set "sasl.oauthbearer.expected.audience" to the audience(s) that '
      'identify this cluster, or set "sasl.oauthbearer.allow.unverified.audience" to true')),
    ({"sasl.server.callback.handler.class": VALIDATOR, "sasl.oauthbearer.jwks.endpoint.url": "http://idp",
      "sasl.oauthbearer.expected.audience": "kafka", "sasl.oauthbearer.expected.issuer": " "},
     'requires "sasl.oauthbearer.expected.issuer" to be configured'),
    ({"sasl.server.callback.handler.class": VALIDATOR, "sasl.oauthbearer.jwks.endpoint.url": "http://idp",
      "sasl.oauthbearer.jwt.validator.class": "com.example.Mine", **UNVERIFIED}, "com.example.Mine: not served"),
    ({"sasl.server.callback.handler.class": VALIDATOR, "sasl.oauthbearer.jwks.endpoint.url": "ftp://idp/jwks",
      **UNVERIFIED},
     'invalid protocol (ftp); only "http", "https", and "file"'),
    ({"sasl.server.callback.handler.class": VALIDATOR, "sasl.oauthbearer.jwks.endpoint.url": "file:///nowhere.json",
      **UNVERIFIED},
     "contains a file (/nowhere.json) that doesn't exist"),
    ({"sasl.server.callback.handler.class": VALIDATOR, "sasl.oauthbearer.jwks.endpoint.url": "http://idp",
      "sasl.oauthbearer.jwks.endpoint.refresh.ms": "-1", **UNVERIFIED}, "refresh.ms value must be at least 0"),
    ({"sasl.server.callback.handler.class": VALIDATOR, "sasl.oauthbearer.jwks.endpoint.url": "http://idp",
      "sasl.oauthbearer.sub.claim.name": " ", **UNVERIFIED}, "sasl.oauthbearer.sub.claim.name value must not contain only"),
])
def test_settings_refused(settings, message):
    properties = {f"listener.name.sasl_plaintext.oauthbearer.{k}": v for k, v in settings.items()}
    with pytest.raises(ConfigError) as caught:
        oidc_validator(properties, "SASL_PLAINTEXT")
    assert message in str(caught.value)


def test_a_listener_with_the_validator_or_another_handler(tmp_path):
    path = tmp_path / "jwks.json"
    path.write_text(jwks(public_jwk(RSA_KEY, "rsa-1")))
    store = ScramCredentialStore.load(tmp_path)
    base = {"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "OAUTHBEARER,PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";'}
    sasl = listener_sasl({**base, "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
                          VALIDATOR, "sasl.oauthbearer.jwks.endpoint.url": path.as_uri(), **UNVERIFIED},
                         LISTENER, store)
    assert isinstance(sasl.context.oauthbearer, OidcValidator)
    with pytest.raises(ConfigError, match="plain.sasl.server.callback.handler.class=x.Y: not served"):
        listener_sasl({**base, "listener.name.sasl_plaintext.plain.sasl.server.callback.handler.class": "x.Y"},
                      LISTENER, store)


def test_wall_clock_tokens_made_now_pass():
    now = time.time_ns() // 1_000_000
    assert validate_token(sign({"iat": now // 1000, "exp": now // 1000 + 60}), SETTINGS, KEYS, now)


def test_http_get_retries_as_jose4j_does_and_limits_the_body():
    import http.server
    import threading

    from trafka.broker.security.jwks import HTTP_BODY_LIMIT, http_get

    answers = [500, 503, 200]

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            status = answers.pop(0) if answers else 200
            body = b"x" * (HTTP_BODY_LIMIT + 1) if self.path == "/big" else b'{"keys": []}'
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert http_get(url + "/jwks") == b'{"keys": []}'
        assert answers == []
        with pytest.raises(JwksUnavailable, match="over 524288 bytes"):
            http_get(url + "/big")
    finally:
        server.shutdown()
        server.server_close()
