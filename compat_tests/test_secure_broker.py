"""A secure development broker as its users meet it: ``trafka --secure`` and the settings it prints, used as
pasted; the testing API's secure broker (``trafka_secure``, ``TrafkaBroker(secure=True)``) with confluent-kafka,
kafka-python, aiokafka and the Java client; the tools' ``--command-config`` over SASL_SSL and mutual TLS; and
the tools' SASL client (PLAIN, SCRAM-SHA-256/512) logging in to Apache Kafka 4.4 with users ``trafka users``
made there."""
from __future__ import annotations

import asyncio
import os
import queue
import re
import stat
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from compat_tests.harness import SOURCE_ROOT, BrokerProcess, wait_until
from compat_tests.reference import (
    HOST,
    KafkaBroker,
    ReferenceUnavailable,
    ZooKeeperModeKafka,
    format_storage,
    java_command,
    jars_present,
    write_properties,
)
from compat_tests.ports import free_port
from compat_tests.security import round_trip
from trafka.broker.testing import BrokerError, TrafkaBroker
from trafka.broker.tools.processes import terminate

ROOT = Path(__file__).resolve().parent.parent
READY_TIMEOUT = 30.0


def trafka(*arguments: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trafka", *arguments], input=stdin, capture_output=True, text=True,
                          timeout=60, cwd=SOURCE_ROOT)


def _round_trip(producer_config: dict[str, str], consumer_config: dict[str, str], topic: str,
                count: int = 5) -> list[bytes]:
    return round_trip(producer_config, topic, count, consumer_config=consumer_config)


# -- trafka --secure ---------------------------------------------------------------------------------------------


class SecureCommand:
    """``python -m trafka --secure ...`` with its standard output read line by line."""

    def __init__(self, workdir: Path, *arguments: str) -> None:
        self.log_path = workdir / "broker.stderr.log"
        workdir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "a") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "trafka", "--secure", "--port", "0", *arguments],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, text=True, cwd=SOURCE_ROOT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def output(self) -> list[str]:
        """What it printed up to the end of the client settings (the Java client's truststore line)."""
        lines: list[str] = []
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no client settings within {READY_TIMEOUT} s: {lines}\n{self.log()}") from None
            if line is None:
                raise AssertionError(f"trafka --secure exited with {self.process.wait()}: {lines}\n{self.log()}")
            lines.append(line)
            if line.startswith("    ssl.truststore.location="):
                return lines

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        terminate(self.process, 20)


def pasted(lines: list[str], heading: str) -> dict[str, str]:
    """The indented ``key=value`` lines after the line starting with ``heading``, as a user pastes them."""
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    settings = {}
    for line in lines[start + 1:]:
        if not line.startswith("    "):
            break
        key, _, value = line.strip().partition("=")
        settings[key] = value
    return settings


def test_one_step_secure_start_prints_settings_that_work_as_pasted(tmp_path):
    command = SecureCommand(tmp_path, "--data-dir", str(tmp_path / "data"), "--user", "alice:alice-secret",
                            "--user", "bob:bob-secret")
    try:
        lines = command.output()
        ready = re.fullmatch(r"trafka ready: bootstrap=127\.0\.0\.1:(\d+) node_id=1 data_dir=(\S+) "
                             r"security_protocol=SASL_SSL", lines[0])
        assert ready, lines[0]
        port, security_dir = int(ready[1]), (tmp_path / "data" / "dev-security").absolute()
        librdkafka = pasted(lines, "Client settings for alice, librdkafka's names")
        assert librdkafka == {
            "bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": "alice-secret",
            "ssl.ca.location": str(security_dir / "ca-cert.pem")}
        java = pasted(lines, "The Java client's names")
        assert java == {
            "bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                'username="alice" password="alice-secret";',
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(security_dir / "ca-cert.pem")}
        # confluent-kafka with the settings as printed; bob (from his file) reads what alice wrote.
        bob = dict(line.split("=", 1) for line in (security_dir / "bob-librdkafka.properties").read_text()
                   .splitlines() if not line.startswith("#"))
        assert _round_trip(librdkafka, bob, "pasted") == [b"%d" % i for i in range(5)]
        # Every mechanism logs in.
        for mechanism in ("PLAIN", "SCRAM-SHA-256"):
            assert _round_trip({**librdkafka, "sasl.mechanism": mechanism}, librdkafka, f"by-{mechanism}", 2) == [
                b"0", b"1"]
        # The files hold passwords: their owner's alone.
        for name in ("alice.properties", "alice-librdkafka.properties", "bob.properties", "ca-key.pem"):
            assert stat.S_IMODE((security_dir / name).stat().st_mode) == 0o600, name
        # Nothing but SASL_SSL: a client without its settings is turned away, and told why it might be.
        plain = trafka("topics", "list", "--bootstrap-server", f"127.0.0.1:{port}")
        assert plain.returncode == 1 and "closed the connection (is it a listener with SSL or SASL?" in plain.stderr
        # The data directory holds no partition of that name: the broker does not warn about it.
        assert "dev-security" not in command.log()
    finally:
        command.stop()


def test_the_generated_admin_password_and_the_ca_survive_a_restart(tmp_path):
    data_dir = tmp_path / "data"
    first = SecureCommand(tmp_path, "--data-dir", str(data_dir))
    try:
        lines = first.output()
        settings = pasted(lines, "Client settings for admin")
        assert lines[2].startswith("Users: admin (password generated, kept in "), lines[2]
        assert len(settings["sasl.password"]) >= 16
        ca = Path(settings["ssl.ca.location"]).read_bytes()
    finally:
        first.stop()
    again = SecureCommand(tmp_path, "--data-dir", str(data_dir))
    try:
        settings_again = pasted(again.output(), "Client settings for admin")
        assert settings_again["sasl.password"] == settings["sasl.password"]
        assert Path(settings_again["ssl.ca.location"]).read_bytes() == ca  # clients keep trusting it
        listed = trafka("topics", "list", "--command-config", str(data_dir / "dev-security" / "admin.properties"))
        assert listed.returncode == 0, listed
    finally:
        again.stop()


@pytest.mark.parametrize("arguments, message", [
    (["--secure", "--override", "listeners=PLAINTEXT://127.0.0.1:0"],
     "trafka: --secure chooses the listener itself (one SASL_SSL listener on --host/--port) and makes a one-node "
     "broker: leave out listeners\n"),
    (["--user", "alice:secret"], "trafka: --user makes a user of a --secure broker: give --secure too\n"),
    (["--secure", "--user", "alice"], "trafka: --user alice:...: expected NAME:PASSWORD, both non-empty\n"),
])
def test_secure_start_refusals(tmp_path, arguments, message):
    result = trafka(*arguments, "--port", "0", "--data-dir", str(tmp_path / "data"))
    assert (result.returncode, result.stderr[-len(message):]) == (2, message), result.stderr


def test_secure_with_ephemeral_keeps_nothing(tmp_path):
    command = SecureCommand(tmp_path, "--ephemeral")
    try:
        ca = Path(pasted(command.output(), "Client settings for admin")["ssl.ca.location"])
        assert ca.exists()
    finally:
        command.stop()
    assert not ca.exists() and not ca.parent.parent.exists()


# -- the tools over SASL_SSL and mutual TLS (--command-config) ------------------------------------------------


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory):
    with TrafkaBroker(tmp_path_factory.mktemp("secure") / "data", secure=True,
                      users={"alice": "alice-secret", "bob": "bob-secret"}) as broker:
        yield broker


def test_every_tool_over_sasl_ssl_with_command_config(secure_broker):
    config = str(secure_broker.properties_file("alice"))
    topic = f"cli-secure-{uuid.uuid4().hex[:8]}"
    created = trafka("topics", "create", topic, "--partitions", "2", "--command-config", config)
    assert (created.returncode, created.stdout) == (0, f"Created topic {topic} with 2 partition(s).\n"), created
    assert topic in trafka("topics", "list", "--command-config", config).stdout.split()
    assert "PartitionCount: 2" in trafka("topics", "describe", topic, "--command-config", config).stdout
    produced = trafka("produce", topic, "--partition", "1", "--keys", "--command-config", config, stdin="k\tv\n")
    assert produced.returncode == 0, produced
    # bob, with PLAIN and librdkafka's names in his file, reads it back.
    plain = secure_broker.properties_file("bob", mechanism="PLAIN")
    consumed = trafka("consume", topic, "--from-beginning", "--keys", "--max-messages", "1", "--command-config",
                      str(plain))
    assert (consumed.returncode, consumed.stdout) == (0, "k\tv\n"), consumed
    assert trafka("groups", "list", "--command-config", config).returncode == 0
    described = trafka("configs", "describe", "--topic", topic, "--command-config", config)
    assert described.returncode == 0 and "cleanup.policy=delete" in described.stdout, described
    users = trafka("users", "list", "alice", "--command-config", config)
    assert users.stdout == "USER\tMECHANISM\tITERATIONS\nalice\tSCRAM-SHA-256\t4096\nalice\tSCRAM-SHA-512\t4096\n"


def test_command_config_refusals_say_what_is_wrong(secure_broker, tmp_path):
    base = secure_broker.java_properties("alice", mechanism="SCRAM-SHA-256")
    wrong = tmp_path / "wrong.properties"
    wrong.write_text("".join(f"{k}={v}\n" for k, v in base.items()).replace('password="alice-secret"',
                                                                           'password="nope"'))
    refused = trafka("topics", "list", "--command-config", str(wrong))
    assert refused.returncode == 1
    assert refused.stderr == (
        f"trafka topics: {secure_broker.bootstrap_servers}: authenticating as alice with SCRAM-SHA-256: "
        "SASL_AUTHENTICATION_FAILED: Authentication failed during authentication due to invalid credentials with "
        "SASL mechanism SCRAM-SHA-256\n")
    untrusted = tmp_path / "untrusted.properties"
    untrusted.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=alice\n"
                         f"sasl.password=alice-secret\nbootstrap.servers={secure_broker.bootstrap_servers}\n")
    result = trafka("topics", "list", "--command-config", str(untrusted))
    assert result.returncode == 1 and "the broker's certificate is not trusted" in result.stderr, result.stderr
    kerberos = tmp_path / "kerberos.properties"
    kerberos.write_text("security.protocol=SASL_SSL\n")
    result = trafka("topics", "list", "--command-config", str(kerberos))
    assert result.returncode == 2 and "needs sasl.mechanism" in result.stderr, result.stderr
    missing = trafka("users", "list", "--command-config", str(tmp_path / "missing.properties"))
    assert (missing.returncode, missing.stderr) == (
        2, f"trafka users: --command-config {tmp_path / 'missing.properties'}: No such file or directory\n")


def test_command_config_with_a_client_certificate_over_mutual_tls(tmp_path):
    from trafka.broker.security.dev_certs import create_dev_certificates

    certs = create_dev_certificates(tmp_path / "certs", clients={"alice": "CN=alice,O=trafka"}, key_type="ec")
    plain_port, tls_port = free_port(), free_port()
    listener = {f"listener.name.ssl.{k}": v for k, v in certs.listener_settings(client_auth="required").items()}
    broker = BrokerProcess(tmp_path / "broker", overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{tls_port}", **listener})
    broker.start(plain_port)
    try:
        with_certificate = tmp_path / "alice.properties"
        with_certificate.write_text("security.protocol=SSL\n" + "".join(
            f"{k}={v}\n" for k, v in certs.client_settings("alice").items()))
        listed = trafka("topics", "create", "mtls", "--bootstrap-server", f"127.0.0.1:{tls_port}",
                        "--command-config", str(with_certificate))
        assert listed.returncode == 0, listed
        without = tmp_path / "anonymous.properties"
        without.write_text(f"security.protocol=SSL\nssl.ca.location={certs.ca}\n")  # librdkafka's name
        refused = trafka("topics", "list", "--bootstrap-server", f"127.0.0.1:{tls_port}", "--command-config",
                         str(without))
        assert refused.returncode == 1 and f"127.0.0.1:{tls_port}" in refused.stderr, refused
    finally:
        broker.stop()


def test_a_long_consume_authenticates_again_before_its_session_ends(tmp_path):
    """KIP-368: with connections.max.reauth.ms the broker bounds each session; the tools authenticate again
    on the same connection before it ends, instead of being cut off."""
    with TrafkaBroker(tmp_path / "data", secure=True, properties={"connections.max.reauth.ms": 1500}) as broker:
        config = str(broker.properties_file())
        assert trafka("produce", "reauth", "--command-config", config, stdin="one\ntwo\n").returncode == 0
        started = time.monotonic()
        consumed = trafka("consume", "reauth", "--from-beginning", "--timeout-ms", "4000", "--command-config", config)
        assert (consumed.returncode, consumed.stdout) == (0, "one\ntwo\n"), consumed
        assert time.monotonic() - started > 4  # fetching for several sessions' lifetimes


# -- the testing API's secure broker with each client ----------------------------------------------------------


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_trafka_secure_with_confluent_kafka(trafka_secure, mechanism):
    topic = trafka_secure.create_topic(f"secure-confluent-{mechanism.lower()}")
    assert _round_trip(trafka_secure.confluent_config("bob", mechanism=mechanism),
                       trafka_secure.confluent_config("alice", mechanism=mechanism), topic, 3) == [b"0", b"1", b"2"]
    assert trafka_secure.security_protocol == "SASL_SSL" and set(trafka_secure.users) == {"admin", "alice", "bob"}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_trafka_secure_with_kafka_python(trafka_secure, mechanism):
    from kafka import KafkaConsumer, KafkaProducer

    topic = trafka_secure.create_topic(f"secure-kafka-python-{mechanism.lower()}")
    producer = KafkaProducer(**trafka_secure.kafka_python_config("alice", mechanism=mechanism))
    for i in range(3):
        producer.send(topic, b"kp%d" % i)
    producer.flush(20)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10_000,
                             **trafka_secure.kafka_python_config(mechanism=mechanism))
    try:
        assert [next(consumer).value for _ in range(3)] == [b"kp0", b"kp1", b"kp2"]
    finally:
        consumer.close()


def test_trafka_secure_with_aiokafka(trafka_secure):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = trafka_secure.create_topic("secure-aiokafka")

    async def scenario() -> list[bytes]:
        producer = AIOKafkaProducer(**trafka_secure.aiokafka_config("bob"))
        await producer.start()
        try:
            for i in range(3):
                await producer.send_and_wait(topic, b"aio%d" % i)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest",
                                    **trafka_secure.aiokafka_config("alice", mechanism="SCRAM-SHA-256"))
        await consumer.start()
        try:
            return [(await asyncio.wait_for(consumer.getone(), 20)).value for _ in range(3)]
        finally:
            await consumer.stop()

    assert asyncio.run(scenario()) == [b"aio0", b"aio1", b"aio2"]


JAVA_CLIENT = """
import java.io.FileInputStream;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

/** Creates a topic, produces one record and consumes it, with the client settings of a properties file. */
public class SecureClient {
    public static void main(String[] args) throws Exception {
        Properties settings = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) { settings.load(in); }
        String topic = args[1];
        try (Admin admin = Admin.create(settings)) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            System.out.println("topics " + admin.listTopics().names().get().contains(topic));
        }
        Properties producing = new Properties();
        producing.putAll(settings);
        producing.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        producing.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producing)) {
            producer.send(new ProducerRecord<>(topic, "k", "from java")).get();
        }
        Properties consuming = new Properties();
        consuming.putAll(settings);
        consuming.put("group.id", topic + "-group");
        consuming.put("auto.offset.reset", "earliest");
        consuming.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        consuming.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consuming)) {
            consumer.subscribe(List.of(topic));
            long deadline = System.currentTimeMillis() + 30_000;
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(Duration.ofMillis(500))) {
                    System.out.println("consumed " + record.value());
                    return;
                }
            }
        }
        System.exit(3);
    }
}
"""


def run_java_client(tmp_path: Path, properties: Path, topic: str) -> subprocess.CompletedProcess[str]:
    if not jars_present():
        raise ReferenceUnavailable("Apache Kafka's jars are not in compat_tests/reference/lib: "
                                   "run compat_tests/setup.sh")
    source = tmp_path / "SecureClient.java"
    source.write_text(JAVA_CLIENT)
    return subprocess.run(java_command(str(source), str(properties), topic), capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def test_trafka_secure_with_the_java_client(trafka_secure, tmp_path):
    for user, mechanism in (("alice", "SCRAM-SHA-512"), ("bob", "PLAIN")):
        topic = f"secure-java-{mechanism.lower()}"
        result = run_java_client(tmp_path, trafka_secure.properties_file(user, mechanism=mechanism), topic)
        assert (result.returncode, result.stdout) == (0, "topics true\nconsumed from java\n"), result.stderr[-3000:]


def test_a_user_added_through_the_broker_logs_in(trafka_secure):
    trafka_secure.add_user("carol", "carol-secret", mechanisms=("SCRAM-SHA-256",))
    topic = trafka_secure.create_topic("secure-carol")
    carol = trafka_secure.confluent_config("carol", mechanism="SCRAM-SHA-256")
    assert carol["sasl.password"] == "carol-secret"
    assert _round_trip(carol, carol, topic, 2) == [b"0", b"1"]
    with pytest.raises(BrokerError, match="UNACCEPTABLE_CREDENTIAL: Too few iterations"):
        trafka_secure.add_user("dave", "x", iterations=100)
    with pytest.raises(BrokerError, match="no user 'nobody'"):
        trafka_secure.confluent_config("nobody")


def test_a_plaintext_brokers_settings_are_its_address(trafka):
    assert trafka.confluent_config() == {"bootstrap.servers": trafka.bootstrap_servers}
    assert trafka.kafka_python_config() == {"bootstrap_servers": trafka.bootstrap_servers}
    assert trafka.java_properties() == {"bootstrap.servers": trafka.bootstrap_servers}
    assert trafka.security_protocol == "PLAINTEXT" and trafka.ca_file is None
    with pytest.raises(BrokerError, match="give secure=True too"):
        TrafkaBroker(users={"alice": "x"})


def readme_example(marker: str) -> str:
    readme = (ROOT / "README.md").read_text()
    if f"<!-- {marker}:" not in readme:
        raise AssertionError(f"README.md has no '<!-- {marker}: ... -->' block yet (the Security section's "
                             "fixture example belongs there)")
    section = readme.split(f"<!-- {marker}:", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL)[1]


def test_the_readme_secure_example_passes(tmp_path):
    (tmp_path / "test_example.py").write_text(readme_example("the secure example"))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_example.py"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout, result.stdout


# -- the tools' SASL client against Apache Kafka -------------------------------------------------------------------

KAFKA_PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
                    'password="admin-secret" user_admin="admin-secret";')
KAFKA_SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


class SaslKafka(KafkaBroker):
    """Apache Kafka with its PLAINTEXT listener (where the tools make users) and a SASL_SSL listener (PLAIN,
    SCRAM-SHA-256, SCRAM-SHA-512) serving a development certificate."""

    def __init__(self, data_dir: Path, certs, name: str = "kafka-sasl") -> None:
        super().__init__(data_dir, name=name)
        self.certs = certs
        self.sasl_port = 0

    def start(self) -> SaslKafka:
        if not jars_present():
            raise ReferenceUnavailable("Apache Kafka's jars are not in compat_tests/reference/lib: "
                                       "run compat_tests/setup.sh")
        self.port, controller, self.sasl_port = free_port(), free_port(), free_port()
        prefix = "listener.name.sasl_ssl."
        write_properties(self.properties_path, self.data_dir, self.port, controller, {
            "listeners": f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{controller},"
                         f"SASL_SSL://{HOST}:{self.sasl_port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port},SASL_SSL://{HOST}:{self.sasl_port}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
            f"{prefix}sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            f"{prefix}plain.sasl.jaas.config": KAFKA_PLAIN_JAAS,
            f"{prefix}scram-sha-256.sasl.jaas.config": KAFKA_SCRAM_JAAS,
            f"{prefix}scram-sha-512.sasl.jaas.config": KAFKA_SCRAM_JAAS,
            **{prefix + k: v for k, v in self.certs.listener_settings().items()},
        })
        if not (self.data_dir / "meta.properties").exists():
            format_storage(self.properties_path)
        self._launch(java_command("kafka.Kafka", str(self.properties_path)))
        return self


@pytest.fixture(scope="module")
def sasl_kafka(tmp_path_factory):
    from trafka.broker.security.dev_certs import create_dev_certificates

    certs = create_dev_certificates(tmp_path_factory.mktemp("kafka-certs"))
    kafka = SaslKafka(tmp_path_factory.mktemp("kafka-sasl") / "data", certs)
    kafka.start()
    yield kafka
    kafka.close()


def _kafka_client_file(tmp_path: Path, kafka: SaslKafka, mechanism: str, user: str, password: str) -> Path:
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    path = tmp_path / f"{user}-{mechanism}.properties"
    path.write_text(f"bootstrap.servers={HOST}:{kafka.sasl_port}\nsecurity.protocol=SASL_SSL\n"
                    f"sasl.mechanism={mechanism}\nsasl.jaas.config=org.apache.kafka.common.security.{module} "
                    f'required username="{user}" password="{password}";\n'
                    f"ssl.truststore.type=PEM\nssl.truststore.location={kafka.certs.ca}\n")
    return path


def test_users_made_with_trafka_users_log_in_to_apache_kafka(sasl_kafka, tmp_path):
    kafka = sasl_kafka
    made = trafka("users", "set", "erin", "--password", "erin-secret", "--bootstrap-server", kafka.bootstrap)
    assert made.returncode == 0, made
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        config = _kafka_client_file(tmp_path, kafka, mechanism, "erin", "erin-secret")
        topic = f"erin-{mechanism.lower()}"
        created = trafka("topics", "create", topic, "--command-config", str(config))
        assert created.returncode == 0, created
        produced = trafka("produce", topic, "--command-config", str(config), stdin="over scram\n")
        assert produced.returncode == 0, produced
        consumed = trafka("consume", topic, "--from-beginning", "--max-messages", "1", "--command-config",
                          str(config))
        assert (consumed.returncode, consumed.stdout) == (0, "over scram\n"), consumed
    # PLAIN, and the users tool itself over SASL_SSL.
    admin = _kafka_client_file(tmp_path, kafka, "PLAIN", "admin", "admin-secret")
    listed = trafka("users", "list", "erin", "--command-config", str(admin))
    assert listed.stdout == "USER\tMECHANISM\tITERATIONS\nerin\tSCRAM-SHA-256\t4096\nerin\tSCRAM-SHA-512\t4096\n"
    # Kafka's refusal of a wrong password, as the tool shows it.
    wrong = _kafka_client_file(tmp_path, kafka, "SCRAM-SHA-512", "erin", "wrong")
    refused = trafka("topics", "list", "--command-config", str(wrong))
    assert refused.returncode == 1
    assert refused.stderr == (
        f"trafka topics: {HOST}:{kafka.sasl_port}: authenticating as erin with SCRAM-SHA-512: "
        "SASL_AUTHENTICATION_FAILED: Authentication failed during authentication due to invalid credentials with "
        "SASL mechanism SCRAM-SHA-512\n")
    # Deleted, erin no longer logs in.
    assert trafka("users", "delete", "erin", "--command-config", str(admin)).returncode == 0
    gone = trafka("topics", "list", "--command-config",
                  str(_kafka_client_file(tmp_path, kafka, "SCRAM-SHA-256", "erin", "erin-secret")))
    assert gone.returncode == 1 and "SASL_AUTHENTICATION_FAILED" in gone.stderr, gone


# -- a cluster's users, in ZooKeeper before any broker runs ------------------------------------------------------


def test_users_of_a_cluster_made_in_zookeeper_before_any_broker_runs(zookeeper, tmp_path):
    """``trafka users --zookeeper`` writes where Kafka keeps users (``kafka-configs.sh --zookeeper``): Apache Kafka
    3.9 in ZooKeeper mode and a trafka broker of a cluster both serve them, and follow a later change."""
    chroots = {name: f"{zookeeper.connect_string}/{name}-{uuid.uuid4().hex[:8]}" for name in ("kafka", "trafka")}
    for connect in chroots.values():
        made = trafka("users", "set", "admin", "--password", "admin-secret", "--zookeeper", connect)
        assert (made.returncode, made.stdout) == (0, (
            f"Set the SCRAM-SHA-256 credential of user admin (4096 iterations) in ZooKeeper {connect}.\n"
            f"Set the SCRAM-SHA-512 credential of user admin (4096 iterations) in ZooKeeper {connect}.\n")), made
        bob = trafka("users", "add", "bob", "--mechanism", "SCRAM-SHA-512", "--iterations", "8192",
                     "--zookeeper", connect, stdin="bob-secret\n")
        assert bob.returncode == 0, bob
        listed = trafka("users", "list", "--zookeeper", connect)
        assert listed.stdout == ("USER\tMECHANISM\tITERATIONS\nadmin\tSCRAM-SHA-256\t4096\n"
                                 "admin\tSCRAM-SHA-512\t4096\nbob\tSCRAM-SHA-512\t8192\n"), listed
    kafka = ZooKeeperModeKafka(tmp_path / "kafka", chroots["kafka"])
    broker = BrokerProcess(tmp_path / "trafka", name="trafka-zk",
                           overrides={"zookeeper.connect": chroots["trafka"], "broker.id": 1})
    try:
        kafka.start()
        broker.start()
        for name, target in (("kafka", kafka), ("trafka", broker)):
            served = trafka("users", "list", "--bootstrap-server", target.bootstrap)
            assert served.stdout == ("USER\tMECHANISM\tITERATIONS\nadmin\tSCRAM-SHA-256\t4096\n"
                                     "admin\tSCRAM-SHA-512\t4096\nbob\tSCRAM-SHA-512\t8192\n"), (name, served)
            # A change made in ZooKeeper while the brokers run reaches them through its notification.
            deleted = trafka("users", "delete", "bob", "--zookeeper", chroots[name])
            assert deleted.stdout == f"Deleted the SCRAM-SHA-512 credential of user bob in ZooKeeper {chroots[name]}.\n"
            wait_until(lambda: "bob" not in trafka("users", "list", "--bootstrap-server", target.bootstrap).stdout,
                       timeout=20, message=f"{name} to forget bob")
        missing = trafka("users", "delete", "bob", "--zookeeper", chroots["kafka"])
        assert (missing.returncode, missing.stderr) == (1, "trafka users: user bob: RESOURCE_NOT_FOUND: Attempt to "
                                                           "describe a user credential that does not exist: bob\n")
    finally:
        broker.close()
        kafka.close()
