"""OAUTHBEARER with signed tokens side by side: Apache Kafka 4.4 and trafka, each with Kafka's
OAuthBearerValidatorCallbackHandler on two SASL_PLAINTEXT listeners keyed by the same JWKS file — STRICT
(expected audience and issuer, a custom clock skew) and LOOSE (Kafka's defaults, with audience and issuer left
unverified, which Kafka 4.4 asks to be said outright) — are sent the same tokens,
byte for byte, and what a client sees is compared: whether the exchange succeeds (and the session is bounded
by the token), or the server's error token and then SASL_AUTHENTICATION_FAILED with its message."""
from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from compat_tests.harness import BrokerProcess
from compat_tests.reference import KafkaBroker
from compat_tests.ports import free_port
from compat_tests.security import OAUTH_JAAS, jwk_of, jwks_json
from compat_tests.wire_client import WireClient
from trafka.wire.messages import MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest

VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
ISSUER = "https://idp.example"
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
SMALL_KEY = rsa.generate_private_key(public_exponent=65537, key_size=1024)
STRANGER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
HMAC_KEY, SHORT_HMAC_KEY = b"h" * 48, b"s" * 16
ED_KEY = ed25519.Ed25519PrivateKey.generate()


def _oct(key: bytes, kid: str) -> dict:
    return {"kty": "oct", "kid": kid, "k": base64.urlsafe_b64encode(key).rstrip(b"=").decode()}


JWKS = jwks_json(jwk_of(RSA_KEY, "rsa-1", "RS256"), jwk_of(EC_KEY, "ec-1", "ES256"),
                 jwk_of(SMALL_KEY, "small", "RS256"), _oct(HMAC_KEY, "hmac"), _oct(SHORT_HMAC_KEY, "short-hmac"),
                 jwk_of(ED_KEY, "ed-1", "EdDSA"))
LISTENERS = ("STRICT", "LOOSE")


def _settings(jwks_url: str) -> dict[str, str]:
    settings = {"sasl.oauthbearer.jwks.endpoint.url": jwks_url,
                "listener.name.strict.oauthbearer.sasl.oauthbearer.expected.audience": "kafka,other",
                "listener.name.strict.oauthbearer.sasl.oauthbearer.expected.issuer": ISSUER,
                "listener.name.strict.sasl.oauthbearer.clock.skew.seconds": "5",
                "listener.name.loose.oauthbearer.sasl.oauthbearer.allow.unverified.audience": "true",
                "listener.name.loose.sasl.oauthbearer.allow.unverified.issuer": "true"}
    for name in LISTENERS:
        prefix = f"listener.name.{name.lower()}."
        settings.update({prefix + "sasl.enabled.mechanisms": "OAUTHBEARER",
                         prefix + "oauthbearer.sasl.jaas.config": OAUTH_JAAS,
                         prefix + "oauthbearer.sasl.server.callback.handler.class": VALIDATOR})
    return settings


@pytest.fixture(scope="module")
def jwks_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The JWKS file both brokers read."""
    path = Path(tmp_path_factory.mktemp("differential-oauthbearer-keys")) / "jwks.json"
    path.write_text(JWKS)
    return path


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory, jwks_file: Path
            ) -> Iterator[dict[str, tuple[object, dict[str, int]]]]:
    """Kafka and trafka with the STRICT and LOOSE listeners: by name, the process and the listeners' ports."""
    root = Path(tmp_path_factory.mktemp("differential-oauthbearer"))
    url = jwks_file.as_uri()
    settings = _settings(url)
    kafka = KafkaBroker(root / "kafka", overrides=settings, listeners={name: "SASL_PLAINTEXT" for name in LISTENERS},
                        jvm_options=[f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={url}"])
    ports = {name: free_port() for name in LISTENERS}
    trafka = BrokerProcess(root / "trafka", name="trafka", overrides={
        **settings, "listeners": ",".join(["PLAINTEXT://127.0.0.1:0",
                                           *(f"{name}://127.0.0.1:{port}" for name, port in ports.items())]),
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT," + ",".join(f"{n}:SASL_PLAINTEXT" for n in LISTENERS)})
    try:
        kafka.start()
        trafka.start()
        yield {"kafka": (kafka, dict(kafka.ports)), "trafka": (trafka, ports)}
    finally:
        trafka.close()
        kafka.close()


def _part(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def _claims(**claims: object) -> dict:
    now = int(time.time())
    body = {"sub": "alice", "iat": now, "exp": now + 600, "aud": "kafka", "iss": ISSUER, "scope": "read write",
            **claims}
    return {name: value for name, value in body.items() if value is not None}


def _raw(header: dict, claims: dict, key=RSA_KEY, alg: str = "RS256") -> str:
    """A JWS signed over exactly ``header`` and ``claims`` (PyJWT signs; the parts are written here)."""
    import jwt

    signing_input = f"{_part(header)}.{_part(claims)}".encode()
    signature = jwt.get_algorithm_by_name(alg).sign(signing_input, key)
    return f"{signing_input.decode()}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"


def tok(key=RSA_KEY, kid: str | None = "rsa-1", alg: str = "RS256", **claims: object) -> str:
    header = {"alg": alg, "typ": "JWT", **({"kid": kid} if kid is not None else {})}
    return _raw(header, _claims(**claims), key, alg)


#: name -> a token maker (tokens are made at the test's start, the same bytes go to both brokers).
TOKENS: dict[str, Callable[[], str]] = {
    "valid-rs256": lambda: tok(),
    "valid-es256": lambda: tok(EC_KEY, "ec-1", "ES256"),
    "valid-ps256": lambda: tok(alg="PS256"),
    "valid-eddsa": lambda: tok(ED_KEY, "ed-1", "EdDSA"),
    "valid-rs512-with-an-rs256-key": lambda: tok(alg="RS512"),
    "no-kid": lambda: tok(kid=None),
    "no-kid-es256": lambda: tok(EC_KEY, None, "ES256"),
    "no-kid-rs512-two-rs256-keys": lambda: tok(kid=None, alg="RS512"),
    "no-kid-small-key-first-fit": lambda: tok(SMALL_KEY, None),
    "unknown-kid": lambda: tok(kid="rsa-9"),
    "wrong-key": lambda: tok(STRANGER_KEY),
    "ec-token-with-an-rsa-kid": lambda: tok(EC_KEY, "rsa-1", "ES256"),
    "small-rsa-key": lambda: tok(SMALL_KEY, "small"),
    "expired": lambda: tok(exp=int(time.time()) - 60),
    "expired-within-skew": lambda: tok(iat=int(time.time()) - 60, exp=int(time.time()) - 2),
    "exp-before-iat": lambda: tok(exp=int(time.time()) - 2),
    "exp-before-nbf": lambda: tok(nbf=int(time.time()) + 700),
    "not-yet-valid": lambda: tok(nbf=int(time.time()) + 120),
    "nbf-within-skew": lambda: tok(nbf=int(time.time()) + 2),
    "iat-in-the-future": lambda: tok(iat=int(time.time()) + 3600),
    "fractional-times": lambda: tok(iat=time.time(), exp=time.time() + 600.5),
    "no-exp": lambda: tok(exp=None),
    "no-iat": lambda: tok(iat=None),
    "exp-a-string": lambda: tok(exp="tomorrow"),
    "negative-iat": lambda: tok(iat=-5),
    "other-audience": lambda: tok(aud="billing"),
    "audience-list": lambda: tok(aud=["billing", "other"]),
    "no-audience": lambda: tok(aud=None),
    "other-issuer": lambda: tok(iss="https://evil.example"),
    "no-issuer": lambda: tok(iss=None),
    "issuer-a-number": lambda: tok(iss=7),
    "no-sub": lambda: tok(sub=None),
    "blank-sub": lambda: tok(sub="  "),
    "empty-sub": lambda: tok(sub=""),
    "padded-sub": lambda: tok(sub=" alice "),
    "sub-a-number": lambda: tok(sub=42),
    "scope-list": lambda: tok(scope=["read", "write"]),
    "scope-duplicates": lambda: tok(scope=["read", "read"]),
    "scope-blank-item": lambda: tok(scope=["read", " "]),
    "scope-object": lambda: tok(scope={"a": 1}),
    "scope-a-number": lambda: tok(scope=5),
    "scope-with-a-number": lambda: tok(scope=["read", 5]),
    "scope-with-null": lambda: tok(scope=["read", None]),
    "audience-a-number": lambda: tok(aud=5),
    "custom-claim-types": lambda: tok(roles=["x"], client_id=5, active=True),
    "jti-a-number": lambda: tok(jti=5),
    "alg-none-unsigned": lambda: f"{_part({'alg': 'none'})}.{_part(_claims())}.",
    "alg-none-with-a-signature": lambda: f"{_part({'alg': 'none'})}.{_part(_claims())}.c2lnbmF0dXJl",
    "hs256-naming-an-rsa-key": lambda: _raw({"alg": "HS256", "kid": "rsa-1"}, _claims(), b"k" * 32, "HS256"),
    "hs256": lambda: _raw({"alg": "HS256", "kid": "hmac"}, _claims(), HMAC_KEY, "HS256"),
    "hs384": lambda: _raw({"alg": "HS384", "kid": "hmac"}, _claims(), HMAC_KEY, "HS384"),
    "hs512-with-a-key-too-short": lambda: _raw({"alg": "HS512", "kid": "hmac"}, _claims(), HMAC_KEY, "HS512"),
    "hs256-with-a-short-key": lambda: _raw({"alg": "HS256", "kid": "short-hmac"}, _claims(), SHORT_HMAC_KEY,
                                           "HS256"),
    "hs256-wrong-secret": lambda: _raw({"alg": "HS256", "kid": "hmac"}, _claims(), b"x" * 48, "HS256"),
    "two-parts": lambda: f"{_part({'alg': 'RS256'})}.{_part(_claims())}",
    "garbage": lambda: "not-a-token",
    "tampered-claims": lambda: ".".join([tok().split(".")[0], _part(_claims(sub="mallory")), tok().split(".")[2]]),
    "critical-header": lambda: _raw({"alg": "RS256", "kid": "rsa-1", "crit": ["exp"]}, _claims()),
}


def _exchange(client: WireClient, token: str, authzid: str = "", extensions: str = "") -> tuple:
    handshake = client.request(SaslHandshakeRequest(mechanism="OAUTHBEARER"), 1)
    try:
        first = client.request(SaslAuthenticateRequest(
            auth_bytes=f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{extensions}\x01".encode()),
            2)
    except ConnectionError:
        return handshake.error_code, "closed without an answer"
    seen: tuple = (handshake.error_code, first.error_code, first.error_message, bytes(first.auth_bytes))
    if first.error_code == 0 and bytes(first.auth_bytes):
        second = client.request(SaslAuthenticateRequest(auth_bytes=b"\x01"), 2)
        return (*seen, second.error_code, second.error_message)
    if first.error_code == 0:
        lifetime = first.session_lifetime_ms
        try:
            served = bool(client.request(MetadataRequest(topics=[]), 12).brokers)
        except ConnectionError:
            served = False  # a session already over (a token expired within the clock skew)
        return (*seen, "session", "none" if lifetime == 0 else "bounded by exp" if 0 < lifetime <= 600_500 else
                "ended" if lifetime < 0 else lifetime, "served", served)
    return seen


def _on_both(brokers, listener: str, token: str, authzid: str = "", extensions: str = "") -> dict[str, tuple]:
    observed = {}
    for name, (_process, ports) in brokers.items():
        with WireClient(f"127.0.0.1:{ports[listener]}") as client:
            observed[name] = _exchange(client, token, authzid, extensions)
    return observed


@pytest.mark.parametrize("listener", LISTENERS)
@pytest.mark.parametrize("case", TOKENS)
def test_the_same_token_on_both(brokers, listener, case):
    token = TOKENS[case]()
    observed = _on_both(brokers, listener, token)
    assert observed["trafka"] == observed["kafka"], observed


@pytest.mark.parametrize("authzid", ["alice", "bob"])
def test_an_authorization_id(brokers, authzid):
    observed = _on_both(brokers, "STRICT", tok(), authzid)
    assert observed["trafka"] == observed["kafka"], observed


@pytest.mark.parametrize("extensions", ["traceId=abc\x01", "a=1\x01b=two words\x01"])
def test_sasl_extensions_are_accepted(brokers, extensions):
    observed = _on_both(brokers, "LOOSE", tok(), extensions=extensions)
    assert observed["trafka"] == observed["kafka"], observed


NEW_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def test_a_jwks_file_rewritten_while_the_brokers_run(brokers, jwks_file):
    """Kafka 4.4 reads its JWKS file again when its modification time changes: a key added to the file is taken
    up, a file that cannot be parsed fails the tokens while it lasts, and the file mended serves again. (The last
    test of the module: it changes the file the others read.)"""
    import os

    def rewrite(text: str, seconds: int) -> None:
        jwks_file.write_text(text)
        os.utime(jwks_file, (seconds, seconds))  # a modification time of its own, whatever the clock's grain

    now = int(time.time())
    seen = {}
    try:
        rewrite(jwks_json(*json.loads(JWKS)["keys"], jwk_of(NEW_KEY, "rsa-new", "RS256")), now + 10)
        seen["added"] = _on_both(brokers, "STRICT", tok(NEW_KEY, "rsa-new"))
        rewrite("{not json", now + 20)
        seen["broken"] = _on_both(brokers, "STRICT", tok())
        rewrite(JWKS, now + 30)
        seen["mended"] = _on_both(brokers, "STRICT", tok())
        seen["removed-again"] = _on_both(brokers, "STRICT", tok(NEW_KEY, "rsa-new"))
    finally:
        rewrite(JWKS, now + 40)
    for step, observed in seen.items():
        assert observed["trafka"] == observed["kafka"], (step, observed)
