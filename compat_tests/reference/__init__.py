"""Apache Kafka itself, as the reference the differential tests compare trafka with.

`KafkaBroker` runs a single-node Apache Kafka (KRaft, broker and controller in one process) from the
jars that ``compat_tests/reference/setup.sh`` resolves from Maven Central, on free loopback ports and
its own data directory formatted with Kafka's own storage tool. It is ready once it answers Metadata
with itself as a registered broker. Kafka's warnings and errors go to a log file next to the data
directory, shown by failing tests as trafka's are.
"""

from __future__ import annotations

import base64
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from compat_tests.ports import free_port
from compat_tests.process import ChildProcess

HERE = Path(__file__).resolve().parent
LIB = HERE / "lib"
START_TIMEOUT = 90.0
HOST = "127.0.0.1"
JVM_OPTIONS = ("-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
               "-Djava.awt.headless=true")
#: Kafka's settings for a one-node development cluster; a test may override any of them.
DEFAULT_PROPERTIES = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
}


class ReferenceUnavailable(RuntimeError):
    """Apache Kafka cannot be started here: its jars or java are missing (the message says which)."""


def _cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


class KafkaBroker(ChildProcess):
    """One Apache Kafka process in KRaft combined mode, with a persistent data directory."""

    #: Every Kafka started by the tests, so that a failing test can print their logs.
    started: list[KafkaBroker] = []

    def __init__(self, data_dir: Path, *, overrides: Mapping[str, object] | None = None, name: str = "kafka",
                 listeners: Mapping[str, str] | None = None, scram_users: Sequence[str] = (),
                 jvm_options: Sequence[str] = ()):
        """``listeners``: more listeners beside PLAINTEXT, name -> security protocol (each on a free port, see
        ``ports``); ``scram_users``: Kafka's storage tool's ``--add-scram`` entries, made at the format
        (``SCRAM-SHA-256=[name=bob,password=bob-secret]``); ``jvm_options``: more options of the broker's JVM
        (``-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=...``)."""
        KafkaBroker.started.append(self)
        self.data_dir = Path(data_dir)
        self.overrides = {key: str(value) for key, value in (overrides or {}).items()}
        self.name = name
        self.listeners = dict(listeners or {})
        self.scram_users = tuple(scram_users)
        self.jvm_options = tuple(jvm_options)
        #: The port of each listener of ``listeners``.
        self.ports: dict[str, int] = {}
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.stderr.log"
        self.properties_path = self.data_dir.parent / f"{self.data_dir.name}.properties"
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._host = HOST
        self._wrap: Callable[[list[str]], list[str]] | None = None

    # ----------------------------------------------------------------------------------- life-cycle

    def start(self) -> KafkaBroker:
        """Format the data directory (the first time), start Kafka and wait until it serves clients."""
        if not jars_present():
            raise ReferenceUnavailable(f"Apache Kafka's jars are not in {LIB}: run compat_tests/setup.sh")
        if not _has_java():
            raise ReferenceUnavailable("java is not installed: run compat_tests/setup.sh")
        self.port = free_port()
        self.ports = {name: self.ports.get(name) or free_port() for name in self.listeners}
        overrides = dict(self.overrides)
        if self.listeners:
            controller_port = free_port()
            extra = ",".join(f"{name}://{HOST}:{port}" for name, port in self.ports.items())
            overrides.setdefault("listeners", f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{controller_port},"
                                              f"{extra}")
            overrides.setdefault("advertised.listeners", f"PLAINTEXT://{HOST}:{self.port},{extra}")
            overrides.setdefault("listener.security.protocol.map", "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT," + ",".join(
                f"{name}:{protocol}" for name, protocol in self.listeners.items()))
        else:
            controller_port = free_port()
        write_properties(self.properties_path, self.data_dir, self.port, controller_port, overrides)
        if not (self.data_dir / "meta.properties").exists():
            format_storage(self.properties_path, scram_users=self.scram_users)
        self._launch(java_command("kafka.Kafka", str(self.properties_path),
                                  jvm_options=(*JVM_OPTIONS, *self.jvm_options)))
        return self

    def _launch(self, command: list[str]) -> None:
        """Run ``command`` and wait until the broker answers Metadata with itself as a broker."""
        if self._wrap is not None:
            command = self._wrap(command)
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + START_TIMEOUT
        while not self._serves_clients():
            if self._process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self._process.returncode}\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"{self.name} did not serve clients within {START_TIMEOUT} s\n{self.log_tail()}")
            time.sleep(0.2)

    # ----------------------------------------------------------------------------------- inspection

    @property
    def host(self) -> str:
        return self._host

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def __repr__(self) -> str:
        return f"<KafkaBroker {self.name} {self.bootstrap} data_dir={self.data_dir}>"

    # ----------------------------------------------------------------------------------- internals

    def _serves_clients(self) -> bool:
        return serves_clients(self.bootstrap)


#: Apache Kafka 3.9, the last release with ZooKeeper mode (compat_tests/reference_zk/setup.sh).
ZK_MODE_LIB = HERE.parent / "reference_zk" / "lib"
ZK_MODE_PROPERTIES = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
    "zookeeper.session.timeout.ms": "6000",
}


class ZooKeeperModeKafka(KafkaBroker):
    """One Apache Kafka 3.9 broker in ZooKeeper mode, registered in the ZooKeeper at ``zookeeper``
    (``host:port/chroot``): the reference for cluster behaviour, in the layout trafka's clusters keep."""

    def __init__(self, data_dir: Path, zookeeper: str, *, broker_id: int = 1,
                 overrides: Mapping[str, object] | None = None, name: str = "kafka-zk", host: str = HOST,
                 wrap: Callable[[list[str]], list[str]] | None = None, java_options: Sequence[str] = JVM_OPTIONS):
        """``host``: the address it listens on; ``wrap``: the command as run elsewhere (on a host of a test
        network, trafka.broker.testing.network); ``java_options``: the JVM's options, the tests' small heap
        and quick start unless given."""
        super().__init__(data_dir, overrides=overrides, name=name)
        self.java_options = tuple(java_options)
        self.zookeeper = zookeeper
        self.broker_id = broker_id
        self._host = host
        self._wrap = wrap

    def start(self) -> ZooKeeperModeKafka:
        """Start the broker (no storage format in ZooKeeper mode) and wait until it serves clients."""
        if not any(ZK_MODE_LIB.glob("kafka_2.13-*.jar")):
            raise ReferenceUnavailable(f"Apache Kafka 3.9's jars are not in {ZK_MODE_LIB}: run compat_tests/setup.sh")
        if not _has_java():
            raise ReferenceUnavailable("java is not installed: run compat_tests/setup.sh")
        self.port = self.port or free_port()
        properties = {**ZK_MODE_PROPERTIES, "broker.id": self.broker_id, "zookeeper.connect": self.zookeeper,
                      "listeners": f"PLAINTEXT://{self.host}:{self.port}", "log.dirs": str(self.data_dir),
                      **self.overrides}
        self.properties_path.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
        command = ["java", *self.java_options, "-cp", f"{ZK_MODE_LIB}/*", "kafka.Kafka", str(self.properties_path)]
        self._launch(command)
        return self


def jars_present() -> bool:
    return any(LIB.glob("kafka_2.13-*.jar"))


def java_command(main_class: str, *arguments: str, jvm_options: Sequence[str] = JVM_OPTIONS) -> list[str]:
    """The command line running ``main_class`` from the reference's jars, with its logging set-up."""
    return ["java", *jvm_options, f"-Dlog4j2.configurationFile={HERE / 'log4j2.properties'}",
            "-cp", f"{LIB}/*", main_class, *arguments]


def write_properties(path: Path, data_dir: Path, port: int, controller_port: int,
                     overrides: Mapping[str, object] | None = None) -> None:
    """Write a one-node KRaft broker's properties: DEFAULT_PROPERTIES, client listener on ``port``,
    controller on ``controller_port`` (both on HOST), log in ``data_dir``, then ``overrides``."""
    properties = {
        **DEFAULT_PROPERTIES,
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "log.dirs": str(data_dir),
        **{key: str(value) for key, value in (overrides or {}).items()},
    }
    Path(path).write_text("".join(f"{key}={value}\n" for key, value in properties.items()))


def format_storage(properties_path: Path, *, jvm_options: Sequence[str] = JVM_OPTIONS,
                   scram_users: Sequence[str] = ()) -> None:
    """Format the data directory named in ``properties_path`` for a new cluster, with Kafka's storage tool
    (creating the SCRAM users given as its ``--add-scram`` entries)."""
    # (--cluster-id=ID: a random id may begin with "-", which would read as an option)
    arguments = ("format", f"--cluster-id={_cluster_id()}", "-c", str(properties_path),
                 *(argument for user in scram_users for argument in ("--add-scram", user)))
    result = subprocess.run(java_command("kafka.tools.StorageTool", *arguments, jvm_options=jvm_options),
                            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"kafka.tools.StorageTool {' '.join(arguments)} failed:\n{result.stdout}{result.stderr}")


def serves_clients(bootstrap: str) -> bool:
    """Whether the Kafka at ``bootstrap`` answers Metadata with itself among the brokers (registered and
    unfenced)."""
    from compat_tests.wire_client import WireClient
    from trafka.wire.messages import MetadataRequest

    try:
        with WireClient(bootstrap, client_id="trafka-reference", timeout=2) as client:
            response = client.request(MetadataRequest(topics=[], allow_auto_topic_creation=False), 12)
    except OSError:
        return False
    return bool(response.brokers)


def _has_java() -> bool:
    return any(os.access(Path(d) / "java", os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep))
