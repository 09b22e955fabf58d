"""Fixtures for the compatibility tests: a real broker process per module, unique topic names, a real
ZooKeeper for the cluster tests, and the stderr of the brokers (and of ZooKeeper and the Java client's
driver JVMs) attached to every failing test's report."""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the helpers are imported as compat_tests.* from a source checkout
    sys.path.insert(0, str(ROOT))

from compat_tests.clients import CLIENTS, Client, ConfluentClient, JavaDriver  # noqa: E402
from compat_tests.harness import BrokerProcess  # noqa: E402
from compat_tests.reference import KafkaBroker  # noqa: E402
from compat_tests.zookeeper import ZooKeeperServer  # noqa: E402

LOG_LINES_ON_FAILURE = 150
_topic_numbers = itertools.count()
_log_marks = pytest.StashKey[dict[int, int]]()


def pytest_configure(config: pytest.Config) -> None:
    # kafka-python 3 loads its protocol schemas with importlib.resources' legacy API.
    config.addinivalue_line("filterwarnings", "ignore::DeprecationWarning:kafka.protocol.schemas.load_json")
    config.addinivalue_line("filterwarnings", "ignore:.*is deprecated. Use files:DeprecationWarning")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker with default settings, shared by the tests of a module (they use distinct topics)."""
    process = BrokerProcess(tmp_path_factory.mktemp("broker") / "data", name="broker")
    process.start()
    yield process
    process.close()


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """Apache Kafka itself (KRaft, one node), the reference of the differential tests, shared by the tests
    of a module. Started only by the tests that ask for it."""
    process = KafkaBroker(tmp_path_factory.mktemp("kafka") / "data", name="kafka")
    process.start()
    yield process
    process.close()


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """Apache ZooKeeper (standalone, on a free loopback port), the coordination service of the cluster
    tests, shared by the tests of a module. Started only by the tests that ask for it."""
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper") / "data", name="zookeeper")
    server.start()
    yield server
    server.close()


@pytest.fixture
def nemesis_network() -> Iterator[object]:
    """A test network for a nemesis run: ZooKeeper's host and three brokers' (trafka.broker.testing.network; skips
    where there can be none: no root, no nftables)."""
    from compat_tests.nemesis import HOSTS
    from trafka.broker.testing.network import TestNetwork, available

    why_not = available()
    if why_not is not None:
        pytest.skip(f"no test network here: {why_not}")
    with TestNetwork(HOSTS) as network:
        yield network


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """Start a private broker with Kafka property overrides: ``broker_factory(**{"message.max.bytes": 1000})``."""
    processes: list[BrokerProcess] = []

    def start(overrides: dict[str, object] | None = None, **kwargs: object) -> BrokerProcess:
        name = f"broker{len(processes)}"
        process = BrokerProcess(tmp_path / name, overrides={**(overrides or {}), **kwargs}, name=name)
        processes.append(process)
        return process.start()

    yield start
    for process in processes:
        process.close()


@pytest.fixture
def topic(request: pytest.FixtureRequest) -> Callable[..., str]:
    """A factory of unique topic names: ``topic()`` only names one (to be auto-created by a produce);
    ``topic(partitions=8)`` also creates it (on `on`, default the module's `broker`) with confluent-kafka's
    admin client and waits until its metadata shows every partition."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name).strip("-")[:180]

    def make(partitions: int | None = None, *, on: BrokerProcess | None = None,
             configs: dict[str, str] | None = None) -> str:
        name = f"{base}-{next(_topic_numbers)}"
        if partitions is not None:
            target = on if on is not None else request.getfixturevalue("broker")
            admin = ConfluentClient(target.bootstrap)
            admin.create_topic(name, partitions, configs=configs)
            assert admin.partitions(name) == list(range(partitions))
        return name

    return make


@pytest.fixture
def client_for() -> Callable[[str, BrokerProcess], Client]:
    """``client_for("kcat", broker)``: the adapter of one client, bootstrapping from `broker`."""
    return lambda name, process: CLIENTS[name](process.bootstrap)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    # Remember how much each broker and Java driver had logged, so a failure shows only what this test caused.
    item.stash[_log_marks] = {id(p): len(p.log_text())
                              for p in [*BrokerProcess.started, *KafkaBroker.started, *ZooKeeperServer.started]}
    item.stash[_log_marks].update((id(d), len(d.stderr_text())) for d in JavaDriver.started)
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    marks = item.stash.get(_log_marks, {})
    for process in [*BrokerProcess.started, *KafkaBroker.started, *ZooKeeperServer.started]:
        text = process.log_text()[marks.get(id(process), 0):]
        if text.strip():
            tail = "\n".join(text.splitlines()[-LOG_LINES_ON_FAILURE:])
            report.sections.append((f"{process.name} stderr ({process.log_path})", tail))
    for driver in JavaDriver.started:
        text = driver.stderr_text()[marks.get(id(driver), 0):]
        if text.strip():
            tail = "\n".join(text.splitlines()[-LOG_LINES_ON_FAILURE:])
            report.sections.append((f"java driver stderr ({driver.stderr_path})", tail))

