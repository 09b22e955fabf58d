"""`trafka --kafka-version X.Y` (trafka.broker.kafka_versions) against the real thing.

- The committed table (wire/kafka_versions.py) is what each release's own kafka-clients code computes for its
  broker's ApiVersions answer, row by row (compat_tests/kafka_versions, from Maven Central's jars).
- Real brokers of three releases, Apache Kafka 2.8 and 3.9 in ZooKeeper mode and 4.4 in KRaft mode, answer
  ApiVersions as their rows say; trafka given each release answers the same within its own versions, refuses a
  too-new ApiVersions the same way (UNSUPPORTED_VERSION with the list, in v0), and closes the connection of a
  request the release did not serve, as they do.
- trafka given any release answers exactly that release's row within its own versions.
- Real clients meet trafka as they meet the real releases: kafka-python infers the broker's version from the
  answer, and refuses an admin API the release lacked; the Java client and librdkafka refuse KIP-848's consumer
  group protocol against 2.8, as against the real 2.8, and use it against 4.4.
"""

from __future__ import annotations

import logging
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.clients import ClientError, JavaDriver
from compat_tests.harness import BrokerProcess
from compat_tests.kafka_versions import KafkaRelease, ask_api_versions, computed_answers, finalized_features_epoch
from compat_tests.kafka_versions.__main__ import TABLE, render
from compat_tests.reference import ZooKeeperModeKafka
from compat_tests.wire_client import WireClient, decode_response, encode_frame, read_frame
from compat_tests.zookeeper import ZooKeeperServer
from trafka.broker.handlers import REGISTRY
from trafka.broker.testing import BrokerError, TrafkaBroker
from trafka.broker.kafka_versions import cap
from trafka.wire.errors import ErrorCode
from trafka.wire.kafka_versions import KAFKA_VERSIONS
from trafka.wire.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    DescribeTopicPartitionsRequest,
    ListTransactionsRequest,
    MetadataRequest,
    ProduceRequest,
)

#: The release of compat_tests/kafka_versions/setup.sh's broker (its row is 2.8's).
KAFKA_28 = "2.8.2"
#: An API trafka serves that the release's broker did not list: ListTransactions came with 3.0; a ZooKeeper-mode
#: 3.9 did not serve DescribeTopicPartitions (a KRaft one did).
LACKED = {"2.8": ListTransactionsRequest(state_filters=[], producer_id_filters=[]),
          "3.9": DescribeTopicPartitionsRequest(topics=[], response_partition_limit=10)}


def trafka_answer(kafka_version: str) -> dict[int, tuple[int, int]]:
    """What trafka answers ApiVersions with when given ``kafka_version``: its row within trafka's versions (Produce
    v0-2 advertised, as trafka always does)."""
    served = REGISTRY.served_versions()
    advertised = {h.api_key: (h.advertised_min_version, h.max_version) for h in REGISTRY}
    return cap(advertised, kafka_version, served=served)


# ------------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def kafka_28(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaRelease]:
    """Apache Kafka 2.8 in ZooKeeper mode."""
    broker = KafkaRelease(KAFKA_28, tmp_path_factory.mktemp("kafka-2.8") / "data",
                          zookeeper=f"{zookeeper.connect_string}/kafka-2.8")
    broker.start()
    yield broker
    broker.close()


@pytest.fixture(scope="module")
def kafka_39(zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperModeKafka]:
    """Apache Kafka 3.9 in ZooKeeper mode (compat_tests/reference_zk)."""
    broker = ZooKeeperModeKafka(tmp_path_factory.mktemp("kafka-3.9") / "data", f"{zookeeper.connect_string}/kafka-3.9",
                                name="kafka-3.9")
    broker.start()
    yield broker
    broker.close()


@pytest.fixture(scope="module")
def trafka_as(tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    """``trafka_as("2.8")``: a trafka broker given that release, one per release for the module."""
    brokers: dict[str, BrokerProcess] = {}

    def start(kafka_version: str) -> BrokerProcess:
        if kafka_version not in brokers:
            broker = BrokerProcess(tmp_path_factory.mktemp(f"trafka-{kafka_version}") / "data",
                                   overrides={"kafka.version": kafka_version}, name=f"trafka-{kafka_version}")
            brokers[kafka_version] = broker.start()
        return brokers[kafka_version]

    yield start
    for broker in brokers.values():
        broker.close()


def _reference(request: pytest.FixtureRequest, name: str):
    """The real broker of row ``name``: 2.8 and 3.9 in ZooKeeper mode, 4.4 in KRaft mode (the module's ``kafka``)."""
    return request.getfixturevalue({"2.8": "kafka_28", "3.9": "kafka_39", "4.4": "kafka"}[name])


# ------------------------------------------------------------------------------------------------ the table


def test_the_table_is_what_each_releases_kafka_clients_computes() -> None:
    assert TABLE.read_text(encoding="utf-8") == render(computed_answers()), (
        "wire/kafka_versions.py is stale: run python -m compat_tests.kafka_versions")


@pytest.mark.parametrize("name", ["2.8", "3.9", "4.4"])
def test_a_real_broker_answers_as_its_row_says_and_trafka_as_it_within_its_own(
        request: pytest.FixtureRequest, trafka_as, name: str) -> None:
    real = _reference(request, name)
    row = KAFKA_VERSIONS[name]
    answer = ask_api_versions(real.bootstrap)
    assert answer.api_keys == row.api_versions
    if row.mode == "zookeeper":  # (a KRaft broker's features are not copied)
        assert (answer.supported_features, answer.finalized_features, answer.finalized_features_epoch) == (
            {}, {}, row.finalized_features_epoch)

    ours = ask_api_versions(trafka_as(name).bootstrap)
    assert ours.version == answer.version
    assert ours.api_keys == trafka_answer(name)
    assert ours.api_keys == cap(trafka_answer(None), name)
    assert (ours.supported_features, ours.finalized_features, ours.finalized_features_epoch) == (
        {}, {}, finalized_features_epoch(row.release))


@pytest.mark.parametrize("name", ["2.0", "2.4", "2.7", "4.0"])
def test_trafka_answers_each_releases_row_within_its_own_versions(trafka_as, name: str) -> None:
    """A release of each generation (ApiVersions v0-2, v3, v3 with a features epoch, KRaft); every row's answer is
    checked without a broker process in broker/tests/test_kafka_versions.py."""
    with WireClient(trafka_as(name).bootstrap) as client:
        answer = client.request(ApiVersionsRequest(), 0)
    assert answer.error_code == ErrorCode.NONE
    assert {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys} == trafka_answer(name)
    assert ask_api_versions(trafka_as(name).bootstrap).finalized_features_epoch == (
        None if name == "2.0" else finalized_features_epoch(KAFKA_VERSIONS[name].release))


def _api_versions_at(bootstrap: str, version: int) -> tuple[int, ApiVersionsResponse]:
    """ApiVersions at ``version``, and the version its answer came in (v0 when the broker refused it)."""
    with socket.create_connection(tuple(bootstrap.rsplit(":", 1)), timeout=10) as sock:
        sock.sendall(encode_frame(ApiVersionsRequest(client_software_name="kafka-versions",
                                                     client_software_version="1"), version))
        frame = read_frame(sock)
    # An UNSUPPORTED_VERSION answer is in v0: its error code comes first, as in any version.
    error = int.from_bytes(frame[4:6], "big", signed=True)
    answer_version = 0 if error == ErrorCode.UNSUPPORTED_VERSION else version
    return answer_version, decode_response(frame, 18, answer_version)[1]


def _closes_connection(bootstrap: str, message, version: int) -> bool:
    """Whether the broker closes the connection rather than answer ``message`` at ``version``."""
    with socket.create_connection(tuple(bootstrap.rsplit(":", 1)), timeout=10) as sock:
        sock.sendall(encode_frame(message, version))
        try:
            read_frame(sock)
        except (ConnectionError, OSError):
            return True
    return False


@pytest.mark.parametrize("name", ["2.8", "3.9"])
def test_versions_the_release_did_not_serve_are_refused_as_it_refused_them(
        request: pytest.FixtureRequest, trafka_as, name: str) -> None:
    real, ours = _reference(request, name), trafka_as(name)
    row = KAFKA_VERSIONS[name]
    # ApiVersions newer than the release's: answered in v0 with UNSUPPORTED_VERSION and the versions of ApiVersions
    # to retry with (Kafka lists ApiVersions alone there, trafka everything it serves).
    too_new = row.api_versions[18][1] + 1
    for broker in (real, ours) if too_new <= ApiVersionsRequest.MAX_VERSION else ():  # (3.9 had the newest we know)
        version, answer = _api_versions_at(broker.bootstrap, too_new)
        assert (version, answer.error_code) == (0, ErrorCode.UNSUPPORTED_VERSION), broker
        listed = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
        assert listed[18] == row.api_versions[18], broker
        assert broker is real or listed == trafka_answer(name)
    # Any other API at a version the release did not serve, or an API it did not have: the connection closes.
    newer_produce = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[])
    for broker in (real, ours):
        assert _closes_connection(broker.bootstrap, newer_produce, row.api_versions[0][1] + 1), broker
        lacked = LACKED[name]
        assert lacked.API_KEY not in row.api_versions and lacked.API_KEY in REGISTRY.served_versions()
        assert _closes_connection(broker.bootstrap, lacked, REGISTRY.served_versions()[lacked.API_KEY][0]), broker
        with WireClient(broker.bootstrap) as client:  # and what it served still works
            metadata = client.request(MetadataRequest(topics=[]), row.api_versions[3][1])
        assert metadata.brokers


# ------------------------------------------------------------------------------------------------ real clients


@pytest.mark.parametrize("name", ["2.8", "3.9", "4.4"])
def test_kafka_python_infers_the_same_broker_version_as_from_the_real_release(
        request: pytest.FixtureRequest, trafka_as, name: str) -> None:
    from kafka import KafkaAdminClient

    def inferred(bootstrap: str) -> tuple[int, ...]:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
        try:
            return admin.get_broker_version_data(1).broker_version  # (every broker here is node 1)
        finally:
            admin.close()

    assert inferred(trafka_as(name).bootstrap) == inferred(_reference(request, name).bootstrap)


def test_kafka_python_infers_each_release_it_knows(trafka_as) -> None:
    """kafka-python infers a broker's release from the newest version of one API per release; against trafka it
    infers each one but 3.4, which it tells by LeaderAndIsr v7, an API between a ZooKeeper-mode controller and
    its brokers that trafka does not serve (it infers 3.3, one release back)."""
    from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions

    for name in KAFKA_VERSIONS:
        expected = (3, 3) if name == "3.4" else tuple(int(part) for part in name.split("."))
        inferred = infer_broker_version_from_api_versions(trafka_answer(name))
        if expected <= (4, 3):  # (the newest kafka-python knows)
            assert inferred == expected, name
    # ... and from a broker's answer on the wire, for one release of each era.
    from kafka import KafkaAdminClient

    for name in ("2.0", "3.4"):
        admin = KafkaAdminClient(bootstrap_servers=trafka_as(name).bootstrap, request_timeout_ms=10000)
        try:
            inferred = admin.get_broker_version_data(1).broker_version
        finally:
            admin.close()
        assert inferred == ((3, 3) if name == "3.4" else (2, 0))


def _kafka_python_list_transactions(bootstrap: str) -> str:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        return repr(admin.list_transactions())
    except Exception as exc:  # noqa: BLE001 (what the client raised is what is compared)
        return f"{type(exc).__name__}: {exc}"
    finally:
        admin.close()


def test_kafka_python_refuses_an_admin_api_28_lacked_as_against_the_real_28(kafka_28, trafka_as) -> None:
    """ListTransactions came with Kafka 3.0: kafka-python's admin refuses it before sending anything."""
    real = _kafka_python_list_transactions(kafka_28.bootstrap)
    assert real.startswith("IncompatibleBrokerVersion"), real
    assert _kafka_python_list_transactions(trafka_as("2.8").bootstrap) == real
    assert _kafka_python_list_transactions(trafka_as("4.4").bootstrap) == "{1: []}"  # (node id -> transactions)


def _java_group_consume(driver: JavaDriver, bootstrap: str, topic: str, protocol: str) -> str:
    try:
        records = driver.call("group_consume", bootstrap=bootstrap, topics=[topic], group_id=f"{topic}-group",
                              count=1, protocol=protocol, timeout_ms=20000)
    except ClientError as exc:
        return exc.detail.split("; stderr:")[0]
    return f"{len(records)} record"


def _produce_one(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, value=b"hello")
    assert producer.flush(20) == 0


def test_the_java_client_refuses_kip_848s_consumer_protocol_against_28_as_against_the_real_28(
        kafka_28, trafka_as, topic) -> None:
    ours = trafka_as("2.8")
    with JavaDriver() as driver:
        outcomes = []
        for broker in (kafka_28, ours):
            name = topic()
            _produce_one(broker.bootstrap, name)
            outcomes.append(_java_group_consume(driver, broker.bootstrap, name, "consumer"))
        assert "does not support" in outcomes[0] and outcomes[1] == outcomes[0], outcomes
        # The classic protocol works against 2.8, and the consumer protocol against 4.4.
        name = topic()
        _produce_one(ours.bootstrap, name)
        assert _java_group_consume(driver, ours.bootstrap, name, "classic") == "1 record"
        newer = trafka_as("4.4")
        name = topic()
        _produce_one(newer.bootstrap, name)
        assert _java_group_consume(driver, newer.bootstrap, name, "consumer") == "1 record"


def _librdkafka_consumer_protocol(bootstrap: str, topic: str, seconds: float = 8.0) -> tuple[bool, bool]:
    """A confluent-kafka consumer with group.protocol=consumer: whether it got the record, and whether librdkafka
    said that the broker does not support ConsumerGroupHeartbeat (it keeps trying: no error reaches the app)."""
    from confluent_kafka import Consumer

    lines: list[str] = []

    class Lines(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger(f"librdkafka-{topic}")
    logger.addHandler(Lines())
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-group", "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "debug": "cgrp", "logger": logger})
    consumer.subscribe([topic])
    got = False
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not got:
        message = consumer.poll(0.5)
        got = message is not None and message.error() is None
        if any("ConsumerGroupHeartbeatRequest not supported by broker" in line for line in lines):
            break
    consumer.close()
    return got, any("ConsumerGroupHeartbeatRequest not supported by broker" in line for line in lines)


def test_librdkafka_finds_no_consumer_group_heartbeat_on_28_as_on_the_real_28(kafka_28, trafka_as, topic) -> None:
    outcomes = []
    for broker in (kafka_28, trafka_as("2.8"), trafka_as("4.4")):
        name = topic()
        _produce_one(broker.bootstrap, name)
        outcomes.append(_librdkafka_consumer_protocol(broker.bootstrap, name,
                                                      seconds=8.0 if broker is not trafka_as("4.4") else 20.0))
    assert outcomes == [(False, True), (False, True), (True, False)]


def test_a_cluster_needs_a_listener_for_clients_beside_the_inter_broker_one(tmp_path: Path) -> None:
    """kafka.version in a cluster: brokers talk to each other in trafka's own protocol, so one listener for all
    would be a silent downgrade; the start stops and says why."""
    broker = BrokerProcess(tmp_path / "data", overrides={"kafka.version": "2.8", "zookeeper.connect": "127.0.0.1:1",
                                                         "broker.id": 1}, name="clustered")
    with pytest.raises(Exception, match="a listener of their own"):
        broker.start()
    broker.close()


# ------------------------------------------------------------------------------------------------ for tests


def test_the_readme_example_passes_with_the_pytest_option(tmp_path: Path) -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("<!-- the kafka version example:", 1)[1]
    (tmp_path / "test_example.py").write_text(re.search(r"```python\n(.*?)```", section, re.DOTALL)[1])
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "--trafka-kafka-version", "2.8", "test_example.py"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout + result.stderr
    # Without the option the broker has ListTransactions, and the example fails.
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_example.py"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "1 failed" in result.stdout, result.stdout + result.stderr


def test_a_trafka_broker_of_2_0_makes_topics_that_clients_use() -> None:
    from confluent_kafka import Consumer, Producer

    with TrafkaBroker(kafka_version="2.0") as broker:
        topic = broker.create_topic("orders", partitions=2)  # (CreateTopics v3, the newest 2.0 served)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        for value in (b"one", b"two"):
            producer.produce(topic, value=value, partition=0)
        assert producer.flush(20) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "orders-2.0",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        values = []
        deadline = time.monotonic() + 30
        while len(values) < 2 and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                values.append(message.value())
        consumer.close()
        assert values == [b"one", b"two"]
        with pytest.raises(BrokerError, match="no ALTER_USER_SCRAM_CREDENTIALS"):
            broker.add_user("carol", "carol-secret")
    with pytest.raises(BrokerError, match="not a Kafka release trafka knows"):
        TrafkaBroker(kafka_version="2.9")
