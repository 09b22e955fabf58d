"""SASL listeners with real clients against a real broker process: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and
OAUTHBEARER (unsecured tokens) over SASL_PLAINTEXT and SASL_SSL; refusals with Kafka's codes and messages,
another client served meanwhile; re-authentication (KIP-368) keeping a long consumer going."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from compat_tests.harness import BrokerProcess
from compat_tests.security import MECHANISMS, OAUTH_JAAS, PLAIN_JAAS
from compat_tests.ports import free_port
from compat_tests.security import round_trip as _round_trip
from trafka.broker.security.credentials import ScramCredentialStore, from_password


def _sasl_broker(tmp_path, protocol: str = "SASL_PLAINTEXT", **more: object):
    """A broker with a PLAINTEXT listener (the one its harness reaches) and a SASL listener whose SCRAM
    users (bob) are written into the data directory before it starts."""
    data_dir = tmp_path / "broker"
    data_dir.mkdir(parents=True)
    store = ScramCredentialStore.load(data_dir)
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        store.set("bob", mechanism, from_password(mechanism, "bob-secret", 4096))
    plain_port, sasl_port = free_port(), free_port()
    name = protocol.lower()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},{protocol}://127.0.0.1:{sasl_port}",
        f"listener.name.{name}.sasl.enabled.mechanisms": MECHANISMS,
        f"listener.name.{name}.plain.sasl.jaas.config": PLAIN_JAAS,
        f"listener.name.{name}.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
        **more,
    }
    broker = BrokerProcess(data_dir, overrides=overrides)
    broker.start(plain_port)
    return broker, sasl_port


def _client(port: int, mechanism: str, user: str = "", password: str = "", protocol: str = "SASL_PLAINTEXT",
            **more: str) -> dict[str, str]:
    config = {"bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": protocol, "sasl.mechanism": mechanism,
              **more}
    if mechanism == "OAUTHBEARER":
        config.update({"enable.sasl.oauthbearer.unsecure.jwt": "true", "sasl.oauthbearer.config": f"principal={user}"})
    else:
        config.update({"sasl.username": user, "sasl.password": password})
    return config


def _refusal(config: dict[str, str]) -> str:
    """What librdkafka reports when the broker refuses its authentication (its error callback's text)."""
    errors: list[str] = []
    admin = AdminClient({**config, "error_cb": lambda error: errors.append(error.str())})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    admin.poll(1)
    return " | ".join(errors)


@pytest.mark.parametrize("mechanism, user, password", [
    ("PLAIN", "alice", "alice-secret"),
    ("SCRAM-SHA-256", "bob", "bob-secret"),
    ("SCRAM-SHA-512", "bob", "bob-secret"),
    ("OAUTHBEARER", "carol", ""),
])
def test_confluent_kafka_produces_and_consumes_over_sasl(tmp_path, mechanism, user, password):
    broker, port = _sasl_broker(tmp_path)
    try:
        topic = f"sasl-{mechanism.lower()}"
        assert _round_trip(_client(port, mechanism, user, password), topic) == [b"%d" % i for i in range(10)]
    finally:
        broker.stop()


@pytest.mark.parametrize("mechanism, user, password", [
    ("PLAIN", "alice", "alice-secret"),
    ("SCRAM-SHA-256", "bob", "bob-secret"),
    ("SCRAM-SHA-512", "bob", "bob-secret"),
])
def test_kafka_python_produces_and_consumes_over_sasl(tmp_path, mechanism, user, password):
    from kafka import KafkaConsumer, KafkaProducer

    broker, port = _sasl_broker(tmp_path)
    try:
        settings = {"bootstrap_servers": f"127.0.0.1:{port}", "security_protocol": "SASL_PLAINTEXT",
                    "sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}
        producer = KafkaProducer(**settings)
        for i in range(5):
            producer.send("sasl-kafka-python", b"v%d" % i)
        producer.flush(20)
        producer.close()
        consumer = KafkaConsumer("sasl-kafka-python", auto_offset_reset="earliest", consumer_timeout_ms=10_000,
                                 **settings)
        try:
            assert [record.value for record in consumer][:5] == [b"v%d" % i for i in range(5)]
        finally:
            consumer.close()
    finally:
        broker.stop()


def test_scram_over_sasl_ssl(tmp_path):
    from trafka.broker.security.dev_certs import create_dev_certificates

    certs = create_dev_certificates(tmp_path / "certs")
    tls = {f"listener.name.sasl_ssl.{name}": value for name, value in certs.listener_settings().items()}
    broker, port = _sasl_broker(tmp_path, "SASL_SSL", **tls)
    try:
        config = _client(port, "SCRAM-SHA-512", "bob", "bob-secret", protocol="SASL_SSL",
                         **{"ssl.ca.location": str(certs.ca), "bootstrap.servers": f"localhost:{port}"})
        assert _round_trip(config, "sasl-over-tls", 5) == [b"%d" % i for i in range(5)]
    finally:
        broker.stop()


@pytest.mark.parametrize("mechanism, user, password, message", [
    ("PLAIN", "alice", "wrong", "Authentication failed: Invalid username or password"),
    ("SCRAM-SHA-256", "bob", "wrong",
     "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"),
    ("SCRAM-SHA-256", "nobody", "x",
     "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"),
])
def test_a_bad_password_is_refused_with_kafkas_message_and_others_are_served(tmp_path, mechanism, user, password,
                                                                            message):
    broker, port = _sasl_broker(tmp_path)
    try:
        assert message in _refusal(_client(port, mechanism, user, password))
        assert _round_trip(_client(port, "PLAIN", "alice", "alice-secret"), "served-meanwhile", 3) == [
            b"0", b"1", b"2"]
    finally:
        broker.stop()


def test_a_mechanism_not_enabled_is_refused(tmp_path):
    broker, port = _sasl_broker(tmp_path, **{"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    try:
        refusal = _refusal(_client(port, "PLAIN", "alice", "alice-secret"))
        assert "PLAIN" in refusal and "SCRAM-SHA-512" in refusal, refusal
    finally:
        broker.stop()


def test_requests_before_authentication_close_the_connection(tmp_path):
    from compat_tests.wire_client import WireClient
    from trafka.wire.messages import MetadataRequest

    broker, port = _sasl_broker(tmp_path)
    try:
        client = WireClient(f"127.0.0.1:{port}")
        with pytest.raises((EOFError, ConnectionError, OSError)):
            client.request(MetadataRequest(topics=None, allow_auto_topic_creation=False), 12)
    finally:
        broker.stop()


def test_reauthentication_keeps_a_long_consumer_going(tmp_path):
    broker, port = _sasl_broker(tmp_path, **{"connections.max.reauth.ms": "1500"})
    try:
        config = _client(port, "SCRAM-SHA-256", "bob", "bob-secret")
        producer = Producer(config)
        consumer = Consumer({**config, "group.id": "long", "auto.offset.reset": "earliest"})
        consumer.subscribe(["reauthenticated"])
        received = []
        try:
            started = time.monotonic()
            sent = 0
            while time.monotonic() - started < 8:  # several sessions long
                producer.produce("reauthenticated", value=b"%d" % sent)
                producer.poll(0)
                sent += 1
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    received.append(message.value())
            assert producer.flush(20) == 0
            deadline = time.monotonic() + 20
            while len(received) < sent and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    received.append(message.value())
        finally:
            consumer.close()
        assert received == [b"%d" % i for i in range(sent)]
    finally:
        broker.stop()


def test_a_user_created_with_alter_user_scram_credentials_logs_in_at_once(tmp_path):
    from confluent_kafka.admin import (
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    broker, port = _sasl_broker(tmp_path)
    try:
        admin = AdminClient(_client(port, "PLAIN", "admin", "admin-secret"))
        upsert = UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                                              b"dave-secret")
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(10)
        assert _round_trip(_client(port, "SCRAM-SHA-256", "dave", "dave-secret"), "dave-writes", 3) == [
            b"0", b"1", b"2"]
        described = admin.describe_user_scram_credentials(["dave"])["dave"].result(10)
        assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
            (ScramMechanism.SCRAM_SHA_256, 8192)]
        # Kept in the data directory: after a restart dave still logs in.
        broker.stop()
        broker.start(broker.port)
        assert _round_trip(_client(port, "SCRAM-SHA-256", "dave", "dave-secret"), "dave-again", 2) == [b"0", b"1"]
        # Bad requests get Kafka's codes and messages, user by user.
        too_few = UserScramCredentialUpsertion("erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 100), b"x")
        missing = UserScramCredentialDeletion("frank", ScramMechanism.SCRAM_SHA_512)
        futures = admin.alter_user_scram_credentials([too_few, missing])
        with pytest.raises(KafkaException, match="Too few iterations"):
            futures["erin"].result(10)
        with pytest.raises(KafkaException, match="Attempt to delete a user credential that does not exist"):
            futures["frank"].result(10)
        # Deleted, dave no longer logs in; his credential survives nowhere.
        gone = UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_256)
        for future in admin.alter_user_scram_credentials([gone]).values():
            future.result(10)
        assert "invalid credentials" in _refusal(_client(port, "SCRAM-SHA-256", "dave", "dave-secret"))
    finally:
        broker.stop()

