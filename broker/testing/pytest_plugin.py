"""trafka's pytest plugin, registered with pytest when trafka is installed (entry point ``pytest11``).

Fixtures:

* ``trafka``: a real broker process on a free port with its data in a temporary directory, one per
  test session (so one per pytest-xdist worker), running when a test gets it: a
  ``trafka.broker.testing.TrafkaBroker`` with ``bootstrap_servers``, ``restart()``, ``kill()``, ``start()``,
  ``stop()`` and ``create_topic()``; its clock is controllable: ``advance(seconds)`` moves the broker's time
  forward for the rest of the session (trafka.broker.clock).
* ``trafka_topic``: a factory of topics unique to the test, created on the session's broker:
  ``trafka_topic()``, ``trafka_topic(partitions=3, configs={"retention.ms": 60000})``.
* ``trafka_secure``: a broker secured as production is, one per test session (so one per pytest-xdist
  worker), running when a test gets it: one SASL_SSL listener (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512; a
  certificate from a throwaway CA), users ``admin``, ``alice`` and ``bob`` with generated passwords
  (``trafka_secure.users``). A ``TrafkaBroker(secure=True)``: ``confluent_config(user)``,
  ``kafka_python_config(user)``, ``aiokafka_config(user)``, ``java_properties(user)`` and
  ``properties_file(user)`` (for ``--command-config``) are a user's client settings (SCRAM-SHA-512 unless
  ``mechanism=`` says otherwise; the default user is ``admin``), ``add_user(name, password)`` makes another
  SCRAM user, ``create_topic()`` works as on ``trafka``.
* ``trafka_cluster``: a replicated cluster of three brokers for one test, a
  ``trafka.broker.testing.TrafkaCluster`` with ``bootstrap_servers``, ``broker(node_id)`` (each with
  ``kill()``, ``start()``, ``restart()``), ``leader(topic, partition)`` and ``create_topic()``. Its
  brokers coordinate through the ZooKeeper given with ``--trafka-zookeeper HOST:PORT`` (or the
  ``trafka_zookeeper`` ini option, or ``$TRAFKA_ZOOKEEPER``); without one, a ZooKeeper is started for
  the session from a local installation, fetched from Maven Central where there is none
  (trafka.broker.tools.zookeeper_server). Each cluster has its own chroot.

``--trafka-kafka-version X.Y`` (or the ``trafka_kafka_version`` ini option, or ``$TRAFKA_KAFKA_VERSION``) makes
the ``trafka`` and ``trafka_secure`` brokers answer ApiVersions as Apache Kafka X.Y's broker did and serve only
those API versions (``trafka --kafka-version``): a suite runs against the brokers its code will meet.
"""
from __future__ import annotations

import itertools
import os
import re
import secrets
from collections.abc import Callable, Iterator, Mapping

import pytest

from trafka.broker.testing import TrafkaBroker, TrafkaCluster
from trafka.broker.tools.zookeeper_server import LocalZooKeeper

_topic_numbers = itertools.count()


@pytest.fixture(scope="session")
def trafka_session_broker(request: pytest.FixtureRequest,
                          tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrafkaBroker]:
    """The test session's trafka broker (``trafka`` hands it to each test, running)."""
    broker = TrafkaBroker(tmp_path_factory.mktemp("trafka") / "data", controllable_clock=True,
                          kafka_version=_kafka_version(request.config))
    broker.start()
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture
def trafka(trafka_session_broker: TrafkaBroker) -> TrafkaBroker:
    """The session's trafka broker, running (started again if an earlier test stopped or killed it)."""
    if not trafka_session_broker.running:
        trafka_session_broker.start()
    return trafka_session_broker


#: The users of the session's secure broker (their passwords are generated for each session).
SECURE_USERS = ("admin", "alice", "bob")


@pytest.fixture(scope="session")
def trafka_secure_session_broker(request: pytest.FixtureRequest,
                                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrafkaBroker]:
    """The test session's secure broker (``trafka_secure`` hands it to each test, running)."""
    users = {name: secrets.token_urlsafe(12) for name in SECURE_USERS}
    broker = TrafkaBroker(tmp_path_factory.mktemp("trafka-secure") / "data", secure=True, users=users,
                          kafka_version=_kafka_version(request.config))
    broker.start()
    try:
        yield broker
    finally:
        broker.close()


@pytest.fixture
def trafka_secure(trafka_secure_session_broker: TrafkaBroker) -> TrafkaBroker:
    """The session's secure broker (SASL_SSL), running (started again if an earlier test stopped or killed it)."""
    if not trafka_secure_session_broker.running:
        trafka_secure_session_broker.start()
    return trafka_secure_session_broker


@pytest.fixture
def trafka_topic(trafka: TrafkaBroker, request: pytest.FixtureRequest) -> Callable[..., str]:
    """``trafka_topic(partitions=1, configs=None)``: create a topic named after the test; returns its name."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name).strip("-")[:200]

    def make(partitions: int = 1, configs: Mapping[str, object] | None = None) -> str:
        return trafka.create_topic(f"{base}-{next(_topic_numbers)}", partitions, configs)

    return make


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--trafka-zookeeper", metavar="HOST:PORT",
                     help="the ZooKeeper trafka_cluster's brokers coordinate through (default: one started "
                          "for the session from a local installation)")
    parser.addini("trafka_zookeeper", "the ZooKeeper trafka_cluster's brokers coordinate through (HOST:PORT)")
    parser.addoption("--trafka-kafka-version", metavar="X.Y",
                     help="the trafka and trafka_secure brokers answer ApiVersions as Apache Kafka X.Y's broker did "
                          "and serve only those API versions (trafka --kafka-version)")
    parser.addini("trafka_kafka_version", "the Apache Kafka release (X.Y) whose API versions the trafka and "
                                          "trafka_secure brokers serve")


def _kafka_version(config: pytest.Config) -> str | None:
    """The release the session's brokers act as: --trafka-kafka-version, the ini option or $TRAFKA_KAFKA_VERSION."""
    return (config.getoption("--trafka-kafka-version") or config.getini("trafka_kafka_version")
            or os.environ.get("TRAFKA_KAFKA_VERSION") or None)


@pytest.fixture(scope="session")
def trafka_zookeeper(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of the ZooKeeper the session's clusters use (given, or started for the session)."""
    given = (request.config.getoption("--trafka-zookeeper") or request.config.getini("trafka_zookeeper")
             or os.environ.get("TRAFKA_ZOOKEEPER"))
    if given:
        yield given
        return
    with LocalZooKeeper(tmp_path_factory.mktemp("trafka-zookeeper") / "data") as zookeeper:
        yield zookeeper.connect_string


@pytest.fixture
def trafka_cluster(trafka_zookeeper: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TrafkaCluster]:
    """Three trafka brokers forming one replicated cluster, for this test."""
    with TrafkaCluster(3, zookeeper=trafka_zookeeper, data_dir=tmp_path_factory.mktemp("trafka-cluster")) as cluster:
        yield cluster
