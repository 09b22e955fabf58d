"""TLS and SASL with every real client: confluent-kafka, kafka-python, aiokafka, kafkajs, Apache Kafka's Java
client and PySpark's Kafka connector, against one broker process serving every kind of listener at once.

The broker (one per module) listens on:

- PLAINTEXT, the harness's (and the helpers' producers');
- SSL (one-way TLS) and MTLS (SSL with ssl.client.auth=required: a client certificate is the identity);
- SASL_PLAINTEXT and SASL_SSL with PLAIN (JAAS users), SCRAM-SHA-256 and SCRAM-SHA-512 (users written into
  the data directory before the start) and OAUTHBEARER (Kafka's unsecured tokens);
- REAUTH, SASL_SSL with connections.max.reauth.ms=2000 (KIP-368: a client re-authenticates or is cut off);
- SCRAM_ONLY, SASL_PLAINTEXT with SCRAM-SHA-512 alone (to refuse the other mechanisms).

confluent-kafka, kafka-python, aiokafka and the Java client produce and consume through a consumer group over
SSL, mutual TLS, and SASL_PLAINTEXT and SASL_SSL with each of the four mechanisms; kafkajs over SSL, mutual TLS, SASL_PLAINTEXT with
PLAIN and both SCRAMs, and SASL_SSL with all four; PySpark's connector writes and reads a batch over SASL_SSL.
The Java client also re-authenticates (KIP-368) without a pause in a long read, and sees each refusal (a bad
password, an unknown user, a mechanism not enabled, a client without TLS on a TLS listener, a TLS client on a
plaintext one, a TLS client that skips SASL) as Kafka's broker makes its client see it, while another client
is served meanwhile; aiokafka and kafkajs report a bad password and a mechanism not enabled with Kafka's code
and message.

A mutual-TLS listener refuses a client without a certificate with the TLS alert, as Kafka's broker does: the Java
client fails at once with SslAuthenticationException.
"""
from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from aiokafka.abc import AbstractTokenProvider
from confluent_kafka import Producer

from compat_tests.clients import ClientError, JavaDriver, Message
from compat_tests.harness import BrokerProcess, wait_until
from compat_tests.ports import free_port
from compat_tests.security import (
    MECHANISMS,
    OAUTH_JAAS,
    PLAIN_JAAS,
    SecureJava,
    SecureKafkajs,
    add_scram_users,
    aiokafka_round_trip,
    java_jaas,
    round_trip,
    unsecured_token,
)
from compat_tests.test_spark import LogCheck, spark_jvm  # noqa: F401  (the module's Spark session)

#: listener name -> (security protocol, settings of its own, under listener.name.<name>.)
LISTENERS = {
    "PLAINTEXT": ("PLAINTEXT", {}),
    "SSL": ("SSL", {"ssl.client.auth": "none"}),
    "MTLS": ("SSL", {"ssl.client.auth": "required"}),
    "SASL_PLAINTEXT": ("SASL_PLAINTEXT", {"sasl.enabled.mechanisms": MECHANISMS}),
    "SASL_SSL": ("SASL_SSL", {"sasl.enabled.mechanisms": MECHANISMS}),
    "REAUTH": ("SASL_SSL", {"sasl.enabled.mechanisms": MECHANISMS, "connections.max.reauth.ms": "2000"}),
    "SCRAM_ONLY": ("SASL_PLAINTEXT", {"sasl.enabled.mechanisms": "SCRAM-SHA-512"}),
}
#: Who logs in with each mechanism: PLAIN users are the JAAS's, SCRAM users the data directory's.
USERS = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("bob", "bob-secret"),
         "SCRAM-SHA-512": ("bob", "bob-secret"), "OAUTHBEARER": ("carol", "")}
ALICE_SUBJECT = "CN=alice,OU=ServiceUsers,O=trafka"

#: (listener, mechanism) of every way in a client can take.
WAYS_IN = [("SSL", None), ("MTLS", None),
           *[(listener, mechanism) for listener in ("SASL_PLAINTEXT", "SASL_SSL")
             for mechanism in MECHANISMS.split(",")]]


def _way_id(way: tuple[str, str | None]) -> str:
    listener, mechanism = way
    return listener if mechanism is None else f"{listener}-{mechanism}"


@dataclass(frozen=True)
class SecureBroker:
    broker: BrokerProcess
    certs: object  # trafka.broker.security.dev_certs.DevCertificates
    ports: dict[str, int]

    def protocol(self, listener: str) -> str:
        return LISTENERS[listener][0]

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def uses_tls(self, listener: str) -> bool:
        return self.protocol(listener) in ("SSL", "SASL_SSL")

    def client_certificate(self, listener: str):
        return self.certs.clients["alice"] if listener == "MTLS" else None


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    from trafka.broker.security.dev_certs import create_dev_certificates

    work = tmp_path_factory.mktemp("secure")
    certs = create_dev_certificates(work / "certs", clients={"alice": ALICE_SUBJECT})
    add_scram_users(work / "data", {"bob": "bob-secret"})
    ports = {name: free_port() for name in LISTENERS}
    overrides: dict[str, str] = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": ",".join(f"{name}:{protocol}" for name, (protocol, _) in LISTENERS.items()),
        "inter.broker.listener.name": "PLAINTEXT",
    }
    for name, (protocol, settings) in LISTENERS.items():
        prefix = f"listener.name.{name.lower()}."
        if protocol in ("SSL", "SASL_SSL"):
            tls = certs.listener_settings(client_auth=settings.get("ssl.client.auth", "none"))
            overrides.update({prefix + key: value for key, value in tls.items()})
        overrides.update({prefix + key: value for key, value in settings.items()})
        if protocol.startswith("SASL_"):
            overrides[prefix + "plain.sasl.jaas.config"] = PLAIN_JAAS
            overrides[prefix + "oauthbearer.sasl.jaas.config"] = OAUTH_JAAS
    broker = BrokerProcess(work / "data", overrides=overrides, name="secure-broker")
    broker.start(ports["PLAINTEXT"])
    yield SecureBroker(broker, certs, ports)
    broker.close()


@pytest.fixture(scope="module")
def broker(secure: SecureBroker) -> BrokerProcess:
    """The module's broker (its PLAINTEXT listener is the harness's bootstrap), for conftest's fixtures."""
    return secure.broker


def _values(count: int, prefix: str) -> list[bytes]:
    return [f"{prefix}-{i}".encode() for i in range(count)]


# --------------------------------------------------------------------------------------- aiokafka


class _UnsecuredTokens(AbstractTokenProvider):
    """aiokafka's OAUTHBEARER token provider: an unsecured JWS for the principal."""

    def __init__(self, principal: str):
        self.principal = principal

    async def token(self) -> str:
        return unsecured_token(self.principal)

    def extensions(self) -> dict[str, str]:
        return {}


def _aiokafka_settings(secure: SecureBroker, listener: str, mechanism: str | None,
                       user: str | None = None, password: str | None = None) -> dict:
    from aiokafka.helpers import create_ssl_context

    settings: dict = {"bootstrap_servers": secure.bootstrap(listener),
                      "security_protocol": secure.protocol(listener)}
    if secure.uses_tls(listener):
        identity = secure.client_certificate(listener)
        settings["ssl_context"] = create_ssl_context(
            cafile=str(secure.certs.ca), certfile=None if identity is None else str(identity.certificate),
            keyfile=None if identity is None else str(identity.key))
    if mechanism is not None:
        default_user, default_password = USERS[mechanism]
        user = default_user if user is None else user
        password = default_password if password is None else password
        settings["sasl_mechanism"] = mechanism
        if mechanism == "OAUTHBEARER":
            settings["sasl_oauth_token_provider"] = _UnsecuredTokens(user)
        else:
            settings.update(sasl_plain_username=user, sasl_plain_password=password)
    return settings


@pytest.mark.parametrize("way", WAYS_IN, ids=_way_id)
def test_aiokafka_produces_and_consumes_in_a_group(secure, topic, way):
    listener, mechanism = way
    name, values = topic(), _values(10, "aiokafka")
    settings = _aiokafka_settings(secure, listener, mechanism)
    assert asyncio.run(asyncio.wait_for(aiokafka_round_trip(settings, name, values), 60)) == values


@pytest.mark.parametrize("listener, mechanism, password, logged", [
    ("SASL_SSL", "SCRAM-SHA-256", "wrong",
     "[Error 58] SaslAuthenticationFailed: Authentication failed during authentication due to invalid credentials "
     "with SASL mechanism SCRAM-SHA-256"),
    ("SASL_PLAINTEXT", "PLAIN", "wrong", "[Error 58] SaslAuthenticationFailed: Authentication failed: Invalid "
                                         "username or password"),
    ("SCRAM_ONLY", "PLAIN", None, "[Error 33] UnsupportedSaslMechanismError"),
], ids=["scram-bad-password", "plain-bad-password", "mechanism-not-enabled"])
def test_aiokafka_refusals_carry_kafkas_code_and_message(secure, caplog, listener, mechanism, password, logged):
    """aiokafka gives up with "Unable to bootstrap" and logs the broker's refusal: its code and message."""
    import aiokafka.errors
    from aiokafka import AIOKafkaProducer

    async def start() -> None:
        producer = AIOKafkaProducer(**_aiokafka_settings(secure, listener, mechanism, password=password))
        try:
            await producer.start()
        finally:
            await producer.stop()

    with caplog.at_level("ERROR", logger="aiokafka"), pytest.raises(aiokafka.errors.KafkaConnectionError):
        asyncio.run(asyncio.wait_for(start(), 30))
    assert any(logged in record.getMessage() for record in caplog.records), caplog.text


# ------------------------------------------------------------------------------- kafka-python, confluent-kafka


def _kafka_python_tokens(principal: str):
    """kafka-python's OAUTHBEARER token provider: an unsecured JWS for the principal."""
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class UnsecuredTokens(AbstractTokenProvider):
        def token(self) -> str:
            return unsecured_token(principal)

    return UnsecuredTokens()


def _kafka_python_settings(secure: SecureBroker, listener: str, mechanism: str | None) -> dict:
    settings: dict = {"bootstrap_servers": secure.bootstrap(listener), "security_protocol": secure.protocol(listener)}
    if secure.uses_tls(listener):
        identity = secure.client_certificate(listener)
        settings["ssl_cafile"] = str(secure.certs.ca)
        if identity is not None:
            settings.update(ssl_certfile=str(identity.certificate), ssl_keyfile=str(identity.key))
    if mechanism is not None:
        user, password = USERS[mechanism]
        settings["sasl_mechanism"] = mechanism
        if mechanism == "OAUTHBEARER":
            settings["sasl_oauth_token_provider"] = _kafka_python_tokens(user)
        else:
            settings.update(sasl_plain_username=user, sasl_plain_password=password)
    return settings


@pytest.mark.parametrize("way", WAYS_IN, ids=_way_id)
def test_kafka_python_produces_and_consumes_in_a_group(secure, topic, way):
    from kafka import KafkaConsumer, KafkaProducer

    listener, mechanism = way
    name, values = topic(), _values(10, "kafka-python")
    settings = _kafka_python_settings(secure, listener, mechanism)
    producer = KafkaProducer(**settings)
    for value in values:
        producer.send(name, value)
    producer.flush(20)
    producer.close()
    consumer = KafkaConsumer(name, group_id=f"{name}-group", auto_offset_reset="earliest", consumer_timeout_ms=10_000,
                             **settings)
    try:
        assert [record.value for record in consumer][:10] == values
    finally:
        consumer.close()


def _confluent_config(secure: SecureBroker, listener: str, mechanism: str | None) -> dict[str, str]:
    config = {"bootstrap.servers": secure.bootstrap(listener), "security.protocol": secure.protocol(listener)}
    if secure.uses_tls(listener):
        identity = secure.client_certificate(listener)
        config["ssl.ca.location"] = str(secure.certs.ca)
        if identity is not None:
            config.update({"ssl.certificate.location": str(identity.certificate), "ssl.key.location": str(identity.key)})
    if mechanism == "OAUTHBEARER":
        config.update({"sasl.mechanism": mechanism, "enable.sasl.oauthbearer.unsecure.jwt": "true",
                       "sasl.oauthbearer.config": f"principal={USERS[mechanism][0]}"})
    elif mechanism is not None:
        user, password = USERS[mechanism]
        config.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    return config


@pytest.mark.parametrize("way", WAYS_IN, ids=_way_id)
def test_confluent_kafka_produces_and_consumes_in_a_group(secure, topic, way):
    listener, mechanism = way
    assert round_trip(_confluent_config(secure, listener, mechanism), topic(), 10) == [b"%d" % i for i in range(10)]


# --------------------------------------------------------------------------------------- kafkajs

KAFKAJS_MECHANISMS = {"PLAIN": "plain", "SCRAM-SHA-256": "scram-sha-256", "SCRAM-SHA-512": "scram-sha-512",
                      "OAUTHBEARER": "oauthbearer"}


def _kafkajs(secure: SecureBroker, listener: str, mechanism: str | None, password: str | None = None,
             **more: object) -> SecureKafkajs:
    security: dict = dict(more)
    if secure.uses_tls(listener):
        identity = secure.client_certificate(listener)
        security["ssl"] = {"ca": str(secure.certs.ca)}
        if identity is not None:
            security["ssl"].update(cert=str(identity.certificate), key=str(identity.key))
    if mechanism is not None:
        user, default_password = USERS[mechanism]
        name = KAFKAJS_MECHANISMS[mechanism]
        security["sasl"] = ({"mechanism": name, "token": unsecured_token(user)} if mechanism == "OAUTHBEARER" else
                            {"mechanism": name, "username": user,
                             "password": default_password if password is None else password})
    return SecureKafkajs(secure.bootstrap(listener), security)


KAFKAJS_WAYS_IN = [("SSL", None), ("MTLS", None),
                   *[("SASL_PLAINTEXT", m) for m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")],
                   *[("SASL_SSL", m) for m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")]]


@pytest.mark.parametrize("way", KAFKAJS_WAYS_IN, ids=_way_id)
def test_kafkajs_produces_and_consumes_in_a_group(secure, topic, way):
    listener, mechanism = way
    client = _kafkajs(secure, listener, mechanism)
    name, values = topic(), _values(10, "kafkajs")
    client.produce(name, [Message(value) for value in values])
    consumed = client.consume(name, len(values), group_id=f"{name}-group")
    assert [record.value for record in consumed] == values


@pytest.mark.parametrize("listener, mechanism, password, name, error, message", [
    ("SASL_PLAINTEXT", "PLAIN", "wrong", "KafkaJSSASLAuthenticationError", None,
     "SASL PLAIN authentication failed: Authentication failed: Invalid username or password"),
    ("SASL_SSL", "SCRAM-SHA-512", "wrong", "KafkaJSSASLAuthenticationError", None,
     "SASL SCRAM SHA512 authentication failed: Authentication failed during authentication due to invalid "
     "credentials with SASL mechanism SCRAM-SHA-512"),
    ("SCRAM_ONLY", "PLAIN", None, "KafkaJSProtocolError", "UNSUPPORTED_SASL_MECHANISM",
     "The broker does not support the requested SASL mechanism"),
], ids=["plain-bad-password", "scram-bad-password", "mechanism-not-enabled"])
def test_kafkajs_refusals_carry_kafkas_message(secure, listener, mechanism, password, name, error, message):
    """kafkajs reports a failed SaslAuthenticate with the broker's message (and no code: kafkajs keeps none for
    it), and a SaslHandshake refusal with its code."""
    client = _kafkajs(secure, listener, mechanism, password=password, retries=0)
    with pytest.raises(ClientError) as refused:
        client.list_topics()
    detail = refused.value.detail.split("; stderr:")[0]
    assert f"'name': '{name}'" in detail and message in detail, detail
    assert refused.value.error == error, detail


# --------------------------------------------------------------------------------------- the Java client


def _java_properties(secure: SecureBroker, listener: str, mechanism: str | None, *, user: str | None = None,
                     password: str | None = None, protocol: str | None = None,
                     certificate: bool = True) -> dict[str, str]:
    """The Java client's properties for ``listener`` (a PEM truststore, alice's PEM keystore on MTLS unless
    ``certificate`` is False, the mechanism's JAAS line), or for a client speaking ``protocol`` there."""
    properties = {"security.protocol": protocol or secure.protocol(listener)}
    if properties["security.protocol"] in ("SSL", "SASL_SSL"):
        identity = "alice" if listener == "MTLS" and certificate else None
        properties.update(secure.certs.client_settings(identity))
    if mechanism is not None:
        default_user, default_password = USERS[mechanism]
        properties["sasl.mechanism"] = mechanism
        properties["sasl.jaas.config"] = java_jaas(mechanism, user or default_user,
                                                   default_password if password is None else password)
    return properties


def _java(secure: SecureBroker, listener: str, mechanism: str | None = None, **options) -> SecureJava:
    return SecureJava(secure.bootstrap(listener), _java_properties(secure, listener, mechanism, **options))


@pytest.mark.parametrize("way", WAYS_IN, ids=_way_id)
def test_java_client_produces_and_consumes_in_a_group(secure, topic, way):
    listener, mechanism = way
    client = _java(secure, listener, mechanism)
    name, values = topic(), _values(20, "java")
    deliveries = client.produce(name, [Message(value) for value in values])
    assert [d.offset for d in deliveries] == list(range(20))
    records = client.call("group_consume", group_id=f"{name}-group", topics=[name], count=len(values))
    assert [base64.b64decode(r["value"]) for r in records] == values
    assert [r["offset"] for r in records] == list(range(20))


def test_java_client_reauthenticates_while_a_group_consumer_reads_on(secure, topic):
    """KIP-368: on a listener whose sessions last 2 s, the producer and the consumer (its fetches to the
    leader, its heartbeats and commits to the coordinator) re-authenticate on their connections and go on:
    every record arrives in order, none waits long, and no connection is cut and made again."""
    client = _java(secure, "REAUTH", "SCRAM-SHA-512")
    name = topic()
    result = client.call("produce_consume_for", timeout=90, topic=name, group_id=f"{name}-group",
                         duration_ms=8000, interval_ms=50)
    sent = result["sent"]
    print({key: value for key, value in result.items() if key != "received"})
    assert sent > 100, result
    assert result["received"] == list(range(sent)), result
    assert result["max_pause_ms"] < 1000, result
    assert result["max_latency_ms"] < 1000, result
    for side in ("producer", "consumer"):
        metrics = result[side]
        assert metrics["successful-reauthentication-total"] >= 3, (side, metrics)
        assert metrics["failed-reauthentication-total"] == 0, (side, metrics)
        assert metrics["connection-close-total"] == 0, (side, metrics)


class _Feeder:
    """Produces a numbered record every 20 ms through confluent-kafka on PLAINTEXT, on a thread, until stopped."""

    def __init__(self, bootstrap: str, topic: str):
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        self.topic = topic
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.producer.produce(self.topic, value=str(self.sent).encode())
            self.producer.poll(0)
            self.sent += 1

    def __enter__(self) -> _Feeder:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self.producer.flush(20) == 0


#: Short timeouts for a client that is refused without an answer (a connection closed under it).
FAIL_FAST = {"max.block.ms": "3000", "request.timeout.ms": "2000", "default.api.timeout.ms": "3000",
             "reconnect.backoff.max.ms": "200"}

#: name -> (listener, how the client differs from the listener's own, (the Java exception's class, the Kafka
#: error it stands for, its message)), as Kafka's broker makes its client report them.
REFUSALS = {
    "plain-bad-password": (
        "SASL_PLAINTEXT", {"mechanism": "PLAIN", "password": "wrong"},
        ("SaslAuthenticationException", "SASL_AUTHENTICATION_FAILED",
         "Authentication failed: Invalid username or password")),
    "scram-512-bad-password": (
        "SASL_SSL", {"mechanism": "SCRAM-SHA-512", "password": "wrong"},
        ("SaslAuthenticationException", "SASL_AUTHENTICATION_FAILED",
         "Authentication failed during authentication due to invalid credentials with SASL mechanism "
         "SCRAM-SHA-512")),
    "scram-256-unknown-user": (
        "SASL_PLAINTEXT", {"mechanism": "SCRAM-SHA-256", "user": "nobody", "password": "x"},
        ("SaslAuthenticationException", "SASL_AUTHENTICATION_FAILED",
         "Authentication failed during authentication due to invalid credentials with SASL mechanism "
         "SCRAM-SHA-256")),
    "mechanism-not-enabled": (
        "SCRAM_ONLY", {"mechanism": "PLAIN"},
        ("UnsupportedSaslMechanismException", "UNSUPPORTED_SASL_MECHANISM",
         "Client SASL mechanism 'PLAIN' not enabled in the server, enabled mechanisms are [SCRAM-SHA-512]")),
    "plaintext-client-on-tls-listener": (
        "SSL", {"protocol": "PLAINTEXT"},
        ("TimeoutException", "REQUEST_TIMED_OUT", "Timed out waiting for a node")),
    "tls-client-on-plaintext-listener": (
        "PLAINTEXT", {"protocol": "SSL"},
        ("TimeoutException", "REQUEST_TIMED_OUT", "Timed out waiting for a node")),
    "tls-client-skipping-sasl": (
        "SASL_SSL", {"protocol": "SSL"},
        ("TimeoutException", "REQUEST_TIMED_OUT", "Timed out waiting for a node")),
}


def _refused(secure: SecureBroker, listener: str, options: dict) -> ClientError:
    """What the Java client (an Admin listing topics) reports when ``listener`` refuses it."""
    options = dict(options)
    client = _java(secure, listener, options.pop("mechanism", None), **options)
    with pytest.raises(ClientError) as refused:
        client.call("list_topics", timeout=30, settings=FAIL_FAST)
    return refused.value


def test_java_client_sees_every_refusal_while_another_client_is_served(secure, topic):
    """Each refusal as the Java client reports it, one after another, while a Java group member on SASL_SSL
    (SCRAM-SHA-256, in a JVM of its own) reads every record a producer keeps writing meanwhile.

    Where the broker only closes the connection (TLS expected and plaintext spoken, or the other way round; a
    request other than ApiVersions or the SASL ones before authentication) Kafka's broker sends no answer
    either: the client retries until it gives up."""
    name = topic()
    member_settings = _java_properties(secure, "SASL_SSL", "SCRAM-SHA-256")
    with JavaDriver() as member_driver:
        member_driver.call("member_start", bootstrap=secure.bootstrap("SASL_SSL"), name="reader",
                           group_id=f"{name}-group", topics=[name], properties=member_settings,
                           settings={"auto.offset.reset": "earliest"})
        seen: dict[str, ClientError] = {}
        with _Feeder(secure.broker.bootstrap, name) as feeder:
            for refusal, (listener, options, _) in REFUSALS.items():
                seen[refusal] = _refused(secure, listener, options)
        sent = feeder.sent
        wait_until(lambda: member_driver.call("member_state", name="reader")["consumed_count"] >= sent,
                   timeout=30, message=lambda: f"the reader to read {sent} records")
        state = member_driver.call("member_stop", name="reader")
    assert state["error"] is None, state
    assert [int(base64.b64decode(v)) for _, _, _, v in state["consumed"]] == list(range(sent))
    mismatches = []
    for refusal, (_, _, (exception, kafka_error, message)) in REFUSALS.items():
        error, reported = seen[refusal], seen[refusal].detail.split("; stderr:")[0]
        if f"list_topics: {exception}: {message}" not in reported or error.error != kafka_error:
            mismatches.append(f"{refusal}: {error.error}: {reported}")
    assert not mismatches, "\n".join(mismatches)


def test_java_client_without_a_certificate_is_refused_at_once_by_mutual_tls(secure):
    """The broker sends the TLS alert of a failed handshake, as Kafka's does: the client fails at once."""
    error = _refused(secure, "MTLS", {"certificate": False})
    reported = error.detail.split("; stderr:")[0]
    assert reported.startswith("list_topics: SslAuthenticationException: "), reported


# --------------------------------------------------------------------------------------- PySpark


def test_spark_writes_and_reads_over_sasl_ssl(spark_jvm, secure, broker, topic):  # noqa: F811
    """The connector's batch writer and reader with Kafka's own option names for SASL_SSL (SCRAM-SHA-512, a PEM
    truststore); the Spark JVM logs no protocol error or retry meanwhile."""
    check = LogCheck(spark_jvm, broker)
    spark = spark_jvm.session
    name = topic()
    options = {f"kafka.{key}": value
               for key, value in _java_properties(secure, "SASL_SSL", "SCRAM-SHA-512").items()}
    options["kafka.bootstrap.servers"] = secure.bootstrap("SASL_SSL")
    rows = [(f"k{i}", f"v{i}") for i in range(10)]
    (spark.createDataFrame(rows, "key string, value string").write.format("kafka").options(**options)
     .option("topic", name).save())
    read = (spark.read.format("kafka").options(**options).option("subscribe", name)
            .option("startingOffsets", "earliest").option("endingOffsets", "latest").load())
    got = sorted((r.key.decode(), r.value.decode(), r.offset) for r in read.collect())
    assert [(k, v) for k, v, _ in got] == sorted(rows)
    assert sorted(offset for _, _, offset in got) == list(range(10))
    problems = check.problems()
    assert not problems, "\n".join(problems[:20])
