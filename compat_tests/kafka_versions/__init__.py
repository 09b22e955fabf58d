"""What each Apache Kafka release's broker served, for `trafka --kafka-version` (wire/kafka_versions.py).

Two sources, both from Maven Central (``setup.sh``; nothing downloaded is committed):

- ``lib/``: the kafka-clients jar of the last patch release of every minor release from 2.0 on. The broker of
  each release builds its ApiVersions answer from its kafka-clients code; ``ApiVersionsOf.java`` runs that
  code, each release in a class loader of its own, as a broker with default settings does: a ZooKeeper-mode
  broker's answer for the releases before 4.0, a KRaft broker's from 4.0 on. :func:`computed_answers` is
  what the generated table is made of (``python -m compat_tests.kafka_versions`` writes it).
- ``brokers/X.Y.Z/lib``: Apache Kafka's broker of a release, which :class:`KafkaRelease` starts (ZooKeeper
  mode before 4.0, KRaft from 4.0 on) so that its real answer can be asked for (:func:`ask_api_versions`).
"""

from __future__ import annotations

import base64
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from compat_tests.ports import free_port
from compat_tests.process import ChildProcess

HERE = Path(__file__).resolve().parent
LIB = HERE / "lib"
BROKERS = HERE / "brokers"
JAVA_PROGRAM = HERE / "ApiVersionsOf.java"
HOST = "127.0.0.1"
START_TIMEOUT = 120.0
JVM_OPTIONS = ("-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
               "-Djava.awt.headless=true")
#: The first release whose brokers run in KRaft mode here (the first without ZooKeeper mode).
FIRST_KRAFT_RELEASE = (4, 0)


class KafkaVersionsUnavailable(RuntimeError):
    """The jars or java this needs are missing (the message says which and how to get them)."""


def release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


def minor(release: str) -> str:
    """``2.8.2`` -> ``2.8``."""
    return ".".join(release.split(".")[:2])


def mode(release: str) -> str:
    """The mode the table's answer of ``release`` is taken from: ``zookeeper`` before 4.0, ``kraft`` after."""
    return "kraft" if release_key(release)[:2] >= FIRST_KRAFT_RELEASE else "zookeeper"


def client_jars() -> dict[str, Path]:
    """release -> its kafka-clients jar in lib/, oldest first."""
    jars = {}
    for jar in LIB.glob("kafka-clients-*.jar"):
        match = re.fullmatch(r"kafka-clients-(\d+\.\d+\.\d+)\.jar", jar.name)
        if match:
            jars[match.group(1)] = jar
    return dict(sorted(jars.items(), key=lambda item: release_key(item[0])))


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise KafkaVersionsUnavailable("java is not installed: run compat_tests/setup.sh")
    return java


@dataclass
class Computed:
    """The ApiVersions answers of releases' brokers, computed from their kafka-clients jars."""

    #: release -> {api key: (min, max)}
    answers: dict[str, dict[int, tuple[int, int]]]
    #: api key -> its name in the newest release that lists it
    names: dict[int, str]


def computed_answers(releases: Iterable[str] | None = None) -> Computed:
    """The ApiVersions answer of each release's broker (every release in lib/ by default), computed from its
    kafka-clients jar by ``ApiVersionsOf.java``."""
    jars = client_jars()
    if not jars:
        raise KafkaVersionsUnavailable(f"the kafka-clients jars are not in {LIB}: run compat_tests/setup.sh")
    wanted = sorted(jars if releases is None else releases, key=release_key)
    missing = [release for release in wanted if release not in jars]
    if missing:
        raise KafkaVersionsUnavailable(f"no kafka-clients jar of {', '.join(missing)} in {LIB}: run "
                                       "compat_tests/setup.sh (pom.xml lists the releases)")
    slf4j = [str(jar) for jar in sorted(LIB.glob("slf4j-*.jar"))]
    arguments = [f"{'kraft' if mode(release) == 'kraft' else 'zk'}:{'+'.join([str(jars[release]), *slf4j])}"
                 for release in wanted]
    result = subprocess.run([_java(), *JVM_OPTIONS, str(JAVA_PROGRAM), *arguments], stdin=subprocess.DEVNULL,
                            capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"{JAVA_PROGRAM.name} failed:\n{result.stdout}{result.stderr}")
    computed = Computed({}, {})
    for release, line in zip(wanted, result.stdout.splitlines(), strict=True):
        jar, *entries = line.split()
        if jar != str(jars[release]):
            raise RuntimeError(f"{JAVA_PROGRAM.name} answered for {jar}, not {jars[release]}")
        versions = {}
        for entry in entries:
            key, versions_range, name = entry.split(":")
            low, _, high = versions_range.partition("-")
            versions[int(key)] = (int(low), int(high))
            computed.names[int(key)] = name  # (releases come oldest first: the newest name stays)
        computed.answers[release] = versions
    return computed


def finalized_features_epoch(release: str) -> int:
    """The finalized features epoch of the release's ApiVersions v3+ answer, as trafka gives it: a ZooKeeper-mode
    broker from 2.7 on answered 0 (its controller keeps the features znode, with no feature finalized); before,
    -1 (none known). A KRaft broker's features (metadata.version and the others, finalized at the format) are
    not copied: trafka answers its own, none finalized, -1."""
    if mode(release) == "zookeeper" and release_key(release)[:2] >= (2, 7):
        return 0
    return -1


# ------------------------------------------------------------------------------------------ real brokers


def broker_lib(release: str) -> Path:
    return BROKERS / release / "lib"


def broker_available(release: str) -> bool:
    return any(broker_lib(release).glob("kafka_2.1*.jar"))


@dataclass
class ApiVersionsAnswer:
    """What a broker answered ApiVersions with (at the highest version both sides know, v3 at most)."""

    version: int
    api_keys: dict[int, tuple[int, int]]
    supported_features: dict[str, tuple[int, int]] = field(default_factory=dict)
    finalized_features_epoch: int | None = None
    finalized_features: dict[str, tuple[int, int]] = field(default_factory=dict)


def ask_api_versions(bootstrap: str, *, client_id: str = "kafka-versions") -> ApiVersionsAnswer:
    """The broker's ApiVersions answer: asked in v0 first, then again in the highest version both know (at
    most v3, which adds the features)."""
    from compat_tests.wire_client import WireClient
    from trafka.wire.messages import ApiVersionsRequest

    with WireClient(bootstrap, client_id=client_id, timeout=10) as client:
        first = client.request(ApiVersionsRequest(), 0)
        api_keys = {key.api_key: (key.min_version, key.max_version) for key in first.api_keys}
        version = min(3, api_keys.get(18, (0, 0))[1])
        answer = first if version == 0 else client.request(
            ApiVersionsRequest(client_software_name="kafka-versions", client_software_version="1"), version)
    assert answer.error_code == 0, answer
    result = ApiVersionsAnswer(version, {key.api_key: (key.min_version, key.max_version) for key in answer.api_keys})
    if version >= 3:
        result.supported_features = {f.name: (f.min_version, f.max_version) for f in answer.supported_features}
        result.finalized_features_epoch = answer.finalized_features_epoch
        result.finalized_features = {f.name: (f.min_version_level, f.max_version_level)
                                     for f in answer.finalized_features}
    return result


class KafkaRelease(ChildProcess):
    """One Apache Kafka broker of ``release`` from ``brokers/<release>/lib``: in ZooKeeper mode, registered
    in the ZooKeeper at ``zookeeper`` (``host:port/chroot``), for the releases before 4.0; in KRaft
    mode, broker and controller in one process, for 4.0 on."""

    started: list[KafkaRelease] = []

    def __init__(self, release: str, data_dir: Path, *, zookeeper: str | None = None) -> None:
        KafkaRelease.started.append(self)
        self.release = release
        self.data_dir = Path(data_dir)
        self.zookeeper = zookeeper
        self.name = f"kafka-{release}"
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.stderr.log"
        self.properties_path = self.data_dir.parent / f"{self.data_dir.name}.properties"
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def start(self) -> KafkaRelease:
        if not broker_available(self.release):
            raise KafkaVersionsUnavailable(f"Apache Kafka {self.release}'s jars are not in {broker_lib(self.release)}: "
                                           f"run compat_tests/kafka_versions/setup.sh {self.release}")
        self.port = free_port()
        properties = {
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "log.dirs": str(self.data_dir),
        }
        kraft = mode(self.release) == "kraft"
        if kraft:
            controller_port = free_port()
            properties.update({
                "process.roles": "broker,controller",
                "node.id": "1",
                "controller.listener.names": "CONTROLLER",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                "inter.broker.listener.name": "PLAINTEXT",
                "listeners": f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{controller_port}",
                "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
                "controller.quorum.voters": f"1@{HOST}:{controller_port}",
            })
        else:
            if self.zookeeper is None:
                raise ValueError(f"Apache Kafka {self.release} runs in ZooKeeper mode: give zookeeper=")
            properties.update({"broker.id": "1", "zookeeper.connect": self.zookeeper,
                               "zookeeper.session.timeout.ms": "6000",
                               "listeners": f"PLAINTEXT://{HOST}:{self.port}"})
        self.properties_path.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
        if kraft and not (self.data_dir / "meta.properties").exists():
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            result = subprocess.run(self._java("kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}",
                                               "-c", str(self.properties_path)),
                                    stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
            if result.returncode != 0:
                raise RuntimeError(f"Apache Kafka {self.release}'s storage format failed:\n"
                                   f"{result.stdout}{result.stderr}")
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(self._java("kafka.Kafka", str(self.properties_path)),
                                             stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + START_TIMEOUT
        while not self._serves_clients():
            if self._process.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self._process.returncode}\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"{self.name} did not serve clients within {START_TIMEOUT} s\n{self.log_tail()}")
            time.sleep(0.2)
        return self

    def _java(self, main_class: str, *arguments: str) -> list[str]:
        return [_java(), *JVM_OPTIONS, "-cp", f"{broker_lib(self.release)}/*", main_class, *arguments]

    def _serves_clients(self) -> bool:
        """Whether the broker answers Metadata with itself among the brokers."""
        from compat_tests.wire_client import WireClient
        from trafka.wire.messages import MetadataRequest

        try:
            with WireClient(self.bootstrap, client_id="kafka-versions", timeout=2) as client:
                response = client.request(MetadataRequest(topics=[]), 1)
        except OSError:
            return False
        return bool(response.brokers)
