"""Apache ZooKeeper, the coordination service of the cluster tests.

`ZooKeeperServer` runs a standalone ZooKeeper (``org.apache.zookeeper.server.ZooKeeperServerMain``) from
the jars that ``compat_tests/zookeeper/setup.sh`` resolves from Maven Central, on a free loopback port
with its own data directory, and offers the life-cycle operations the cluster tests need: a clean stop
(SIGTERM), a crash (SIGKILL) and a restart on the same data directory and port. It is ready once it
answers the ``srvr`` four-letter word as a serving server. ZooKeeper's warnings and errors go to a log
file next to the data directory, shown by failing tests as trafka's are.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from compat_tests.ports import free_port
from compat_tests.process import ChildProcess
from trafka.broker.testing import port_is_free
from trafka.broker.tools.zookeeper_server import SERVER_CONFIG, four_letter_word, serves_clients

HERE = Path(__file__).resolve().parent
LIB = HERE / "lib"
START_TIMEOUT = 30.0
#: How long a restart waits for its port, should another socket hold it for a moment.
PORT_TIMEOUT = 10.0
HOST = "127.0.0.1"
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
               "-Djava.awt.headless=true")
#: zoo.cfg settings for a quick standalone server (the product's local ZooKeeper's, see
#: broker.zookeeper_server); a test may override any of them.
DEFAULT_CONFIG = {**SERVER_CONFIG, "maxCnxns": "1000"}


class ZooKeeperUnavailable(RuntimeError):
    """Apache ZooKeeper cannot be started here: its jars or java are missing (the message says which)."""


class ZooKeeperStartError(RuntimeError):
    """The ZooKeeper process exited, or did not serve clients in time, instead of starting."""


class ZooKeeperServer(ChildProcess):
    """One standalone Apache ZooKeeper process on 127.0.0.1 with a persistent data directory."""

    #: Every ZooKeeper started by the tests, so that a failing test can print their logs.
    started: list[ZooKeeperServer] = []

    def __init__(self, data_dir: Path, *, overrides: Mapping[str, object] | None = None, name: str = "zookeeper",
                 jvm_options: Sequence[str] = JVM_OPTIONS, host: str = HOST,
                 wrap: Callable[[list[str]], list[str]] | None = None):
        """``host``: the address it serves clients on; ``wrap``: the command as run elsewhere (on a host of a test
        network, trafka.broker.testing.network)."""
        ZooKeeperServer.started.append(self)
        self._host = host
        self._wrap = wrap
        self.data_dir = Path(data_dir)
        self.overrides = {key: str(value) for key, value in (overrides or {}).items()}
        self.name = name
        self.jvm_options = tuple(jvm_options)
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.stderr.log"
        self.config_path = self.data_dir.parent / f"{self.data_dir.name}.cfg"
        #: Chosen at the first start and kept by every restart, so connect strings stay valid.
        self.port = 0
        self.starts = 0
        self._process: subprocess.Popen[bytes] | None = None

    # ----------------------------------------------------------------------------------- life-cycle

    def start(self) -> ZooKeeperServer:
        """Start ZooKeeper (on a free port the first time, on the same port afterwards) and wait until
        it serves clients."""
        if self.running:
            raise RuntimeError(f"{self.name} is already running")
        check_available()
        if not self.port:
            self.port = free_port()
        else:
            self._wait_for_port()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        write_config(self.config_path, self.data_dir, self.port, {"clientPortAddress": self.host, **self.overrides})
        command = java_command(MAIN_CLASS, str(self.config_path), jvm_options=self.jvm_options)
        if self._wrap is not None:
            command = self._wrap(command)
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"===== start #{self.starts}: {' '.join(command)}\n".encode())
            log.flush()
            self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + START_TIMEOUT
        while not serves_clients(self.host, self.port):
            if self._process.poll() is not None:
                raise ZooKeeperStartError(
                    f"{self.name} exited with {self._process.returncode} before it served clients\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise ZooKeeperStartError(
                    f"{self.name} did not serve clients within {START_TIMEOUT} s\n{self.log_tail()}")
            time.sleep(0.1)
        return self

    def restart(self, *, crash: bool = False) -> ZooKeeperServer:
        """Stop (or kill, with `crash`) and start again on the same data directory and port."""
        self.kill() if crash else self.stop()
        return self.start()

    def _wait_for_port(self) -> None:
        deadline = time.monotonic() + PORT_TIMEOUT
        while not port_is_free(self.port):
            if time.monotonic() > deadline:
                raise ZooKeeperStartError(
                    f"{self.name} cannot start again: another socket holds {self.connect_string}")
            time.sleep(0.1)

    # ----------------------------------------------------------------------------------- inspection

    @property
    def host(self) -> str:
        return self._host

    @property
    def connect_string(self) -> str:
        """``host:port``, as kazoo's ``hosts`` and Kafka's ``zookeeper.connect`` take it."""
        return f"{self.host}:{self.port}"

    def four_letter_word(self, word: str) -> str:
        """ZooKeeper's answer to one of its four-letter words (``ruok``, ``srvr``, ``stat``, ``mntr``)."""
        return four_letter_word(self.host, self.port, word)

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<ZooKeeperServer {self.name} {self.connect_string} {state} data_dir={self.data_dir}>"


def jars_present(lib: Path | None = None) -> bool:
    return any((lib or LIB).glob("zookeeper-[0-9]*.jar"))


def check_available() -> None:
    """Raise ZooKeeperUnavailable, naming what is missing, where ZooKeeper cannot be started."""
    if not jars_present():
        raise ZooKeeperUnavailable(f"Apache ZooKeeper's jars are not in {LIB}: run compat_tests/setup.sh "
                                   "(or compat_tests/zookeeper/setup.sh)")
    if shutil.which("java") is None:
        raise ZooKeeperUnavailable("java is not installed (Apache ZooKeeper runs on a JVM): run compat_tests/setup.sh")


def java_command(main_class: str, *arguments: str, jvm_options: Sequence[str] = JVM_OPTIONS) -> list[str]:
    """The command line running ``main_class`` from ZooKeeper's jars, with its logging set-up."""
    return ["java", *jvm_options, f"-Dlogback.configurationFile={HERE / 'logback.xml'}",
            "-cp", f"{LIB}/*", main_class, *arguments]


def write_config(path: Path, data_dir: Path, port: int, overrides: Mapping[str, object] | None = None) -> None:
    """Write a standalone server's zoo.cfg: DEFAULT_CONFIG, data in ``data_dir``, clients served on HOST
    at ``port``, then ``overrides``."""
    config = {
        **DEFAULT_CONFIG,
        "dataDir": str(data_dir),
        "clientPort": str(port),
        "clientPortAddress": HOST,
        **{key: str(value) for key, value in (overrides or {}).items()},
    }
    Path(path).write_text("".join(f"{key}={value}\n" for key, value in config.items()))
