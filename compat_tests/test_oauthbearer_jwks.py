"""OAUTHBEARER with signed tokens, validated as Kafka's OAuthBearerValidatorCallbackHandler validates them, with
real clients.

One broker (per module) listens on PLAINTEXT (the harness's), on DEV (OAUTHBEARER with Kafka's unsecured tokens)
and on three OAUTHBEARER listeners validating signed tokens:

- FILE, SASL_PLAINTEXT, whose keys are a JWKS file, read at start and again when it changes;
- URL, SASL_PLAINTEXT, whose keys are the JWKS URL of an identity provider the test serves on loopback,
  refreshed in the background;
- TLS, SASL_SSL, with the same JWKS URL.

Every listener expects the audience ``kafka`` and the issuer of the test's identity provider (set once for the
whole broker, the keys' location per listener: Kafka's precedence). The provider signs with an RSA key (RS256)
and an EC key (ES256), and answers client-credentials grants at its token endpoint.

confluent-kafka (with an ``oauth_cb`` signing tokens, and with librdkafka's own OIDC login against the token
endpoint), kafka-python, aiokafka, kafkajs and the Java client (Kafka's OAuthBearerLoginCallbackHandler against
the token endpoint) produce and consume in a group. Refused tokens (expired, not yet valid, signed by a key not
in the set, another audience or issuer, no ``sub``, ``alg`` ``none``, a key the broker has yet to fetch) are
each reported by kafka-python as SASL_AUTHENTICATION_FAILED with ``{"status":"invalid_token"}``, while a
confluent-kafka producer on another listener goes on being served; a key the provider starts using is picked
up once a token names it.

trafka's own tools log in with ``--command-config`` files as Kafka's tools take them: Kafka's unsecured login
(``unsecuredLoginStringClaim_sub``) on DEV, and OAuthBearerLoginCallbackHandler's client credentials at the
provider's token endpoint on URL and TLS.
"""
from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiokafka.abc import AbstractTokenProvider
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from compat_tests.clients import JavaDriver, KafkajsClient, Message
from compat_tests.harness import BrokerProcess
from compat_tests.ports import free_port
from compat_tests.security import (
    OAUTH_JAAS,
    IdentityProvider,
    aiokafka_round_trip,
    jwk_of,
    jwks_json,
    round_trip,
    signed_token,
)

VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
ISSUER = "https://idp.trafka.test"
AUDIENCE = "kafka"
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
NEXT_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)   # the provider's next key
STRANGER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # nobody's
JWKS = jwks_json(jwk_of(RSA_KEY, "rsa-1", "RS256"), jwk_of(EC_KEY, "ec-1", "ES256"))
CLIENT_ID, CLIENT_SECRET = "orders-app", "orders-secret"
LISTENERS = {"FILE": "SASL_PLAINTEXT", "URL": "SASL_PLAINTEXT", "TLS": "SASL_SSL"}
#: And a listener with Kafka's unsecured validator (no handler class), for the tools' unsecured login.
DEV_LISTENER = "DEV"


def token(key=RSA_KEY, kid: str | None = "rsa-1", alg: str = "RS256", **claims) -> str:
    """A token every listener accepts, but for what ``claims`` change."""
    return signed_token(key, kid, alg, **{"aud": AUDIENCE, "iss": ISSUER, "scope": "kafka", **claims})


@dataclass
class OidcBroker:
    broker: BrokerProcess
    idp: IdentityProvider
    certs: object
    ports: dict[str, int]
    jwks_file: Path

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def protocol(self, listener: str) -> str:
        return LISTENERS.get(listener, "SASL_PLAINTEXT")


@pytest.fixture(scope="module")
def oidc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcBroker]:
    from trafka.broker.security.dev_certs import create_dev_certificates

    work = tmp_path_factory.mktemp("oidc")
    idp = IdentityProvider(JWKS, lambda client_id, scope: token(subject=client_id, scope=scope or "kafka"),
                           {CLIENT_ID: CLIENT_SECRET})
    jwks_file = work / "jwks.json"
    jwks_file.write_text(JWKS)
    certs = create_dev_certificates(work / "certs")
    ports = {"PLAINTEXT": free_port(), DEV_LISTENER: free_port(), **{name: free_port() for name in LISTENERS}}
    overrides: dict[str, str] = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": ",".join(
            ["PLAINTEXT:PLAINTEXT", f"{DEV_LISTENER}:SASL_PLAINTEXT",
             *(f"{name}:{protocol}" for name, protocol in LISTENERS.items())]),
        "listener.name.dev.sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.dev.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
        "inter.broker.listener.name": "PLAINTEXT",
        # For every listener (Kafka reads them broker-wide unless a listener has its own).
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "sasl.oauthbearer.jwks.endpoint.refresh.ms": "600000",
        # Per listener and mechanism, and per listener.
        "listener.name.file.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": jwks_file.as_uri(),
        "listener.name.url.sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
        "listener.name.tls.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
    }
    for name in LISTENERS:
        prefix = f"listener.name.{name.lower()}."
        overrides.update({prefix + "sasl.enabled.mechanisms": "OAUTHBEARER",
                          prefix + "oauthbearer.sasl.jaas.config": OAUTH_JAAS,
                          prefix + "oauthbearer.sasl.server.callback.handler.class": VALIDATOR})
    overrides.update({"listener.name.tls." + key: value for key, value in certs.listener_settings().items()})
    broker = BrokerProcess(work / "data", overrides=overrides, name="oidc-broker")
    broker.start(ports["PLAINTEXT"])
    yield OidcBroker(broker, idp, certs, ports, jwks_file)
    broker.close()
    idp.close()


@pytest.fixture(scope="module")
def broker(oidc: OidcBroker) -> BrokerProcess:
    """The module's broker (its PLAINTEXT listener is the harness's bootstrap), for conftest's fixtures."""
    return oidc.broker


def _values(count: int, prefix: str) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(count)]


# --------------------------------------------------------------------------------------- confluent-kafka


def _confluent(oidc: OidcBroker, listener: str, **more: object) -> dict:
    config: dict = {"bootstrap.servers": oidc.bootstrap(listener), "security.protocol": oidc.protocol(listener),
                    "sasl.mechanism": "OAUTHBEARER", **more}
    if listener == "TLS":
        config["ssl.ca.location"] = str(oidc.certs.ca)
    return config


def _oauth_cb(make=token):
    def oauth_cb(_config: str) -> tuple[str, float]:
        return make(), time.time() + 3600
    return oauth_cb


@pytest.mark.parametrize("listener", LISTENERS)
@pytest.mark.parametrize("signer", ["RS256", "ES256"])
def test_confluent_kafka_with_signed_tokens(oidc, topic, listener, signer):
    make = (lambda: token()) if signer == "RS256" else (lambda: token(EC_KEY, "ec-1", "ES256"))
    config = _confluent(oidc, listener, oauth_cb=_oauth_cb(make))
    assert round_trip(config, topic(), 10) == [b"%d" % i for i in range(10)]


@pytest.mark.parametrize("listener", ["URL", "TLS"])
def test_confluent_kafka_with_librdkafkas_oidc_login(oidc, topic, listener):
    """librdkafka fetches its token from the provider's token endpoint (client credentials) itself."""
    asked = len(oidc.idp.token_requests)
    config = _confluent(oidc, listener, **{
        "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": CLIENT_ID,
        "sasl.oauthbearer.client.secret": CLIENT_SECRET, "sasl.oauthbearer.token.endpoint.url": oidc.idp.token_url,
        "sasl.oauthbearer.scope": "kafka"})
    assert round_trip(config, topic(), 10) == [b"%d" % i for i in range(10)]
    assert len(oidc.idp.token_requests) > asked


# --------------------------------------------------------------------------------------- kafka-python, aiokafka


def _kafka_python_settings(oidc: OidcBroker, listener: str, make=token) -> dict:
    from kafka.net.sasl.oauth import AbstractTokenProvider as KafkaPythonTokenProvider

    class Tokens(KafkaPythonTokenProvider):
        def token(self) -> str:
            return make()

    settings = {"bootstrap_servers": oidc.bootstrap(listener), "security_protocol": oidc.protocol(listener),
                "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": Tokens()}
    if listener == "TLS":
        settings["ssl_cafile"] = str(oidc.certs.ca)
    return settings


@pytest.mark.parametrize("listener", LISTENERS)
def test_kafka_python_produces_and_consumes_in_a_group(oidc, topic, listener):
    from kafka import KafkaConsumer, KafkaProducer

    name, values = topic(), _values(10, "kafka-python")
    settings = _kafka_python_settings(oidc, listener)
    producer = KafkaProducer(**settings)
    for value in values:
        producer.send(name, value)
    producer.flush(20)
    producer.close()
    consumer = KafkaConsumer(name, group_id=f"{name}-group", auto_offset_reset="earliest", consumer_timeout_ms=10_000,
                             **settings)
    received: list[bytes] = []
    try:
        for record in consumer:
            received.append(record.value)
            if len(received) == len(values):
                break
    finally:
        consumer.close()
    assert received == values


class _AiokafkaTokens(AbstractTokenProvider):
    def __init__(self, make=token) -> None:
        self.make = make

    async def token(self) -> str:
        return self.make()


def _aiokafka_settings(oidc: OidcBroker, listener: str, make=token) -> dict:
    from aiokafka.helpers import create_ssl_context

    settings: dict = {"bootstrap_servers": oidc.bootstrap(listener), "security_protocol": oidc.protocol(listener),
                      "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider": _AiokafkaTokens(make)}
    if listener == "TLS":
        settings["ssl_context"] = create_ssl_context(cafile=str(oidc.certs.ca))
    return settings


@pytest.mark.parametrize("listener", LISTENERS)
def test_aiokafka_produces_and_consumes_in_a_group(oidc, topic, listener):
    name, values = topic(), _values(10, "aiokafka")
    settings = _aiokafka_settings(oidc, listener)
    assert asyncio.run(asyncio.wait_for(aiokafka_round_trip(settings, name, values), 60)) == values


# --------------------------------------------------------------------------------------- kafkajs


class _Kafkajs(KafkajsClient):
    def __init__(self, bootstrap: str, security: dict):
        super().__init__(bootstrap)
        self.security = security

    def call(self, op, timeout=60.0, **arguments):
        return super().call(op, timeout, **self.security, **arguments)


@pytest.mark.parametrize("listener", LISTENERS)
def test_kafkajs_produces_and_consumes_in_a_group(oidc, topic, listener):
    security: dict = {"sasl": {"mechanism": "oauthbearer", "token": token()}}
    if listener == "TLS":
        security["ssl"] = {"ca": str(oidc.certs.ca)}
    client = _Kafkajs(oidc.bootstrap(listener), security)
    name, values = topic(), _values(10, "kafkajs")
    client.produce(name, [Message(value) for value in values])
    consumed = client.consume(name, len(values), group_id=f"{name}-group")
    assert [record.value for record in consumed] == values


# --------------------------------------------------------------------------------------- the Java client


@pytest.fixture(scope="module")
def java_oidc_driver(oidc: OidcBroker) -> Iterator[JavaDriver]:
    """A Java driver JVM of its own that may reach the provider's token endpoint: Kafka 4's clients need the URL
    in the system property org.apache.kafka.sasl.oauthbearer.allowed.urls, and jose4j (which Kafka's login
    handler parses tokens with) on the classpath."""
    from compat_tests import clients
    from compat_tests.reference import LIB

    jose4j = next(LIB.glob("jose4j-*.jar"), None)
    if jose4j is None:
        pytest.skip("jose4j is not among the reference's jars: run compat_tests/setup.sh")
    original_classpath, original_options = clients.java_classpath, os.environ.get("JAVA_TOOL_OPTIONS")
    clients.java_classpath = lambda: f"{original_classpath()}{os.pathsep}{jose4j}"
    os.environ["JAVA_TOOL_OPTIONS"] = f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={oidc.idp.token_url}"
    try:
        driver = JavaDriver()
    finally:
        clients.java_classpath = original_classpath
        if original_options is None:
            os.environ.pop("JAVA_TOOL_OPTIONS", None)
        else:
            os.environ["JAVA_TOOL_OPTIONS"] = original_options
    yield driver
    driver.close()


@pytest.mark.parametrize("listener", LISTENERS)
def test_java_client_logs_in_at_the_token_endpoint(oidc, java_oidc_driver, topic, listener):
    """Kafka's OAuthBearerLoginCallbackHandler gets a token from the provider (client credentials); the broker
    validates it."""
    properties = {
        "security.protocol": oidc.protocol(listener), "sasl.mechanism": "OAUTHBEARER",
        "sasl.login.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        "sasl.oauthbearer.token.endpoint.url": oidc.idp.token_url,
        "sasl.jaas.config": ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                             f'clientId="{CLIENT_ID}" clientSecret="{CLIENT_SECRET}" scope="kafka";'),
    }
    if listener == "TLS":
        properties.update(oidc.certs.client_settings())
    name, values = topic(), _values(10, "java")
    bootstrap = oidc.bootstrap(listener)
    deliveries = java_oidc_driver.call("produce", bootstrap=bootstrap, properties=properties, topic=name,
                                       messages=[{"value": base64.b64encode(v).decode()} for v in values])
    assert [d["offset"] for d in deliveries] == list(range(10))
    records = java_oidc_driver.call("group_consume", bootstrap=bootstrap, properties=properties,
                                    group_id=f"{name}-group", topics=[name], count=len(values))
    assert [base64.b64decode(r["value"]) for r in records] == values


# --------------------------------------------------------------------------------------- refusals


def _unsecured(**claims) -> str:
    def part(data: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()
    now = int(time.time())
    return f"{part({'alg': 'none'})}.{part({'sub': 'alice', 'iat': now, 'exp': now + 600, **claims})}."


REFUSED_TOKENS = {
    "expired": lambda: token(lifetime_s=-120),
    "not-yet-valid": lambda: token(nbf=int(time.time()) + 600),
    "signed-by-another-key": lambda: token(STRANGER_KEY, "rsa-1"),
    "unknown-kid": lambda: token(STRANGER_KEY, "stranger"),
    "another-audience": lambda: token(aud="billing"),
    "no-audience": lambda: token(aud=None),
    "another-issuer": lambda: token(iss="https://evil.example"),
    "no-sub": lambda: token(subject=None),
    "alg-none": lambda: _unsecured(aud=AUDIENCE, iss=ISSUER),
}


class _Feeder:
    """A confluent-kafka producer with signed tokens on one listener, producing a numbered record every 20 ms on a
    thread until stopped."""

    def __init__(self, config: dict, topic: str):
        from confluent_kafka import Producer

        self.producer = Producer({**config, "linger.ms": 0})
        self.topic = topic
        self.sent = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        def delivered(error, _message) -> None:
            if error is not None:
                self.errors.append(str(error))

        while not self._stop.wait(0.02):
            self.producer.produce(self.topic, value=str(self.sent).encode(), on_delivery=delivered)
            self.producer.poll(0)
            self.sent += 1

    def __enter__(self) -> _Feeder:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self.producer.flush(20) == 0


REFUSAL = '[Error 58] SaslAuthenticationFailedError: SaslAuthenticationFailedError: {"status":"invalid_token"}'


def test_refused_tokens_while_another_client_is_served(oidc, topic):
    """Each bad token, on the file-keyed or the URL-keyed listener, is refused as Kafka refuses it, while a producer
    with a good token on the TLS listener keeps writing; every record it sent is there afterwards."""
    name = topic()
    with _Errors() as handler, _Feeder(_confluent(oidc, "TLS", oauth_cb=_oauth_cb()), name) as feeder:
        seen: dict[str, list[str]] = {}
        for number, (refusal, make) in enumerate(REFUSED_TOKENS.items()):
            listener = ("FILE", "URL")[number % 2]
            seen[f"{refusal}@{listener}"] = _refuse(oidc, listener, make, handler)
    sent = feeder.sent
    assert sent > 0 and not feeder.errors, feeder.errors
    missing = {case: messages for case, messages in seen.items() if not any(REFUSAL in m for m in messages)}
    assert not missing, missing
    config = {"bootstrap.servers": oidc.broker.bootstrap, "group.id": f"{name}-check", "auto.offset.reset": "earliest"}
    assert _count(config, name, sent) == sent
    log = oidc.broker.log_text()  # the reasons are the broker's log's, not the client's
    for reason in ("Expiration Time", "not yet valid", "JWS signature is invalid", "Audience (aud) claim",
                   "No Audience (aud) claim present", "Issuer (iss) claim value", "sub value must be non-null",
                   "Malformed JWT provided", "Unable to find a suitable verification key"):
        assert reason in log, reason


class _Errors(logging.Handler):
    """What kafka-python logs at ERROR (the broker's refusal, with its code and message)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def __enter__(self) -> _Errors:
        logging.getLogger("kafka").addHandler(self)
        return self

    def __exit__(self, *exc_info) -> None:
        logging.getLogger("kafka").removeHandler(self)


def _refuse(oidc: OidcBroker, listener: str, make, handler: _Errors) -> list[str]:
    """What kafka-python logs when the broker refuses its token (it gives up bootstrapping a second later)."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    handler.messages.clear()
    with pytest.raises(KafkaError):
        KafkaAdminClient(**_kafka_python_settings(oidc, listener, make), bootstrap_timeout_ms=1000).close()
    return list(handler.messages)


def _count(config: dict, topic: str, expected: int) -> int:
    from confluent_kafka import Consumer

    consumer = Consumer(config)
    consumer.subscribe([topic])
    seen = 0
    try:
        deadline = time.monotonic() + 30
        while seen < expected and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                seen += 1
    finally:
        consumer.close()
    return seen


def test_a_key_the_provider_starts_using_is_picked_up(oidc, topic):
    """The provider adds a key and signs with it: the first token naming it is refused (the broker has yet to
    fetch it) and makes the broker fetch the JWKS at once; kafka-python's next try a moment later is accepted. The
    file-keyed listener refuses it until the key is written into its file too."""
    with _Errors() as handler:
        fetches = oidc.idp.jwks_fetches
        oidc.idp.jwks = jwks_json(jwk_of(RSA_KEY, "rsa-1", "RS256"), jwk_of(EC_KEY, "ec-1", "ES256"),
                                  jwk_of(NEXT_KEY, "rsa-2", "RS256"))

        def rotated() -> str:
            return token(NEXT_KEY, "rsa-2")

        from kafka import KafkaAdminClient

        handler.messages.clear()
        admin = KafkaAdminClient(**_kafka_python_settings(oidc, "URL", rotated), bootstrap_timeout_ms=10_000)
        admin.list_topics()
        admin.close()
        assert any(REFUSAL in m for m in handler.messages), handler.messages  # the first try, refused
        assert oidc.idp.jwks_fetches > fetches
        name, values = topic(), _values(5, "rotated")
        assert asyncio.run(asyncio.wait_for(
            aiokafka_round_trip(_aiokafka_settings(oidc, "URL", rotated), name, values), 60)) == values
        assert any(REFUSAL in m for m in _refuse(oidc, "FILE", rotated, handler))
        oidc.jwks_file.write_text(oidc.idp.jwks)
        os.utime(oidc.jwks_file, (time.time() + 5, time.time() + 5))  # a modification time of its own
        name, values = topic(), _values(5, "rotated-file")
        assert asyncio.run(asyncio.wait_for(
            aiokafka_round_trip(_aiokafka_settings(oidc, "FILE", rotated), name, values), 60)) == values


@pytest.mark.parametrize("missing", ["jwks-file", "audience"])
def test_what_stops_the_start(tmp_path, missing):
    """A JWKS file that is not there, or (as Kafka 4.4 asks) no expected audience nor leave to skip it."""
    broker = BrokerProcess(tmp_path / "data", name="broken-oidc", overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{free_port()}",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "sasl.oauthbearer.expected.audience": AUDIENCE, "sasl.oauthbearer.expected.issuer": ISSUER,
        "sasl.oauthbearer.jwks.endpoint.url": (tmp_path / "nowhere.json").as_uri()})
    if missing == "audience":
        broker.overrides.pop("sasl.oauthbearer.expected.audience")
        (tmp_path / "nowhere.json").write_text(JWKS)
    with pytest.raises(RuntimeError) as failed:
        broker.start()
    broker.close()
    expected = ("that doesn't exist" if missing == "jwks-file" else
                'requires "sasl.oauthbearer.expected.audience" to be configured')
    assert expected in str(failed.value) + broker.log_text()


# --------------------------------------------------------------------------------------- trafka's tools


def _tool(*arguments: str, config: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trafka", *arguments, "--command-config", str(config)],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)


def _command_config(oidc: OidcBroker, listener: str, path: Path, *, secret: str = CLIENT_SECRET) -> Path:
    from trafka.broker.tools.client_security import escape_property

    lines = {"bootstrap.servers": oidc.bootstrap(listener), "security.protocol": oidc.protocol(listener),
             "sasl.mechanism": "OAUTHBEARER"}
    if listener == DEV_LISTENER:
        lines["sasl.jaas.config"] = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                                     'unsecuredLoginStringClaim_sub="alice";')
    else:
        lines.update({
            "sasl.login.callback.handler.class":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
            "sasl.oauthbearer.token.endpoint.url": oidc.idp.token_url,
            "sasl.jaas.config": ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                                 f'clientId="{CLIENT_ID}" clientSecret="{secret}" scope="kafka";')})
    if listener == "TLS":
        lines.update(oidc.certs.client_settings())
    path.write_text("".join(f"{key}={escape_property(value)}\n" for key, value in lines.items()))
    return path


@pytest.mark.parametrize("listener", [DEV_LISTENER, "URL", "TLS"])
def test_trafkas_tools_log_in_with_oauthbearer(oidc, topic, tmp_path, listener):
    config = _command_config(oidc, listener, tmp_path / "client.properties")
    name, user = topic(), f"user-{listener.lower()}"
    created = _tool("topics", "create", name, "--partitions", "2", config=config)
    assert (created.returncode, created.stdout) == (0, f"Created topic {name} with 2 partition(s).\n"), created
    assert name in _tool("topics", "list", config=config).stdout.split()
    added = _tool("users", "set", user, "--password", "s3cret", config=config)
    assert added.returncode == 0, added
    listed = _tool("users", "list", user, config=config)
    assert listed.returncode == 0 and user in listed.stdout, listed


def test_trafkas_tools_report_a_refused_login(oidc, tmp_path):
    """The token endpoint refuses a wrong client secret; the broker refuses an expired token (from a file)."""
    refused = _tool("topics", "list", config=_command_config(oidc, "URL", tmp_path / "wrong.properties",
                                                             secret="wrong"))
    assert refused.returncode == 2 and "answered 401" in refused.stderr, refused
    token_file = tmp_path / "token"
    token_file.write_text(token(lifetime_s=-120))
    config = tmp_path / "expired.properties"
    config.write_text(_command_config(oidc, "URL", config).read_text().replace(
        oidc.idp.token_url, token_file.as_uri()))
    expired = _tool("topics", "list", config=config)
    assert expired.returncode == 1, expired
    assert 'SASL_AUTHENTICATION_FAILED' in expired.stderr and '{"status":"invalid_token"}' in expired.stderr, expired


def test_sessions_end_with_the_token_and_clients_log_in_again(oidc, topic):
    """A token lives 4 s: the broker bounds each session by its exp (KIP-368) and ends it then; confluent-kafka,
    fetching a fresh token through its oauth_cb, logs in again (on the same connection, or a new one once the
    broker closed the old) and goes on producing: nothing is lost, nothing fails."""
    from confluent_kafka import Producer

    issued: list[float] = []

    def short_lived(_config: str) -> tuple[str, float]:
        issued.append(time.time())
        return token(lifetime_s=4), time.time() + 4

    name = topic()
    producer = Producer(_confluent(oidc, "URL", oauth_cb=short_lived, **{"linger.ms": 0}))
    errors: list[str] = []
    sent = 0
    deadline = time.monotonic() + 9
    while time.monotonic() < deadline:
        producer.produce(name, value=b"%d" % sent,
                         on_delivery=lambda error, _m: errors.append(str(error)) if error else None)
        sent += 1
        producer.poll(0.05)
    assert producer.flush(20) == 0
    assert not errors, errors
    assert len(issued) >= 3, issued  # a fresh token before each session ended
    config = {"bootstrap.servers": oidc.broker.bootstrap, "group.id": f"{name}-check", "auto.offset.reset": "earliest"}
    assert _count(config, name, sent) == sent
