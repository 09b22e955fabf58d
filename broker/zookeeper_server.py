"""A local Apache ZooKeeper for a developer's cluster (``trafka cluster``, ``TrafkaCluster``): one
standalone server on a loopback port, its data in a directory of its own.

ZooKeeper runs on the JVM from an installation of it, looked for in this order: the classpath given
(a directory of jars, or a classpath string), ``$TRAFKA_ZOOKEEPER_CLASSPATH``, ``$ZOOKEEPER_HOME``
(an unpacked Apache ZooKeeper release: ``lib/*.jar``), and, in a source checkout, the jars the test
set-up resolves from Maven Central (``compat_tests/zookeeper/lib``). It is ready once it answers the ``srvr`` four-letter word
as a serving server.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

HOST = "127.0.0.1"
MAIN_CLASS = "org.apache.zookeeper.server.ZooKeeperServerMain"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
#: A short tick allows sessions as short as a second, so that a crashed broker leaves the cluster soon;
#: forceSync=no spares the disk an fsync per write (a crashed machine, not a crashed process, would
#: lose the latest writes).
SERVER_CONFIG = {
    "tickTime": "500",
    "minSessionTimeout": "1000",
    "maxSessionTimeout": "60000",
    "maxClientCnxns": "0",
    "preAllocSize": "1024",
    "forceSync": "no",
    "admin.enableServer": "false",
    "4lw.commands.whitelist": "ruok,stat,srvr,mntr,cons",
}
_SOURCE_CHECKOUT_JARS = Path(__file__).resolve().parent.parent / "compat_tests" / "zookeeper" / "lib"


class ZooKeeperError(RuntimeError):
    """ZooKeeper cannot be started here (no installation found, no java, or it failed: the message says)."""


def find_classpath(classpath: str | os.PathLike[str] | None = None) -> str:
    """The classpath of a ZooKeeper installation (see the module docstring for where it is looked for)."""
    candidates: list[str | os.PathLike[str]] = []
    for given in (classpath, os.environ.get("TRAFKA_ZOOKEEPER_CLASSPATH")):
        if given:
            candidates.append(given)
    home = os.environ.get("ZOOKEEPER_HOME")
    if home:
        candidates += [Path(home) / "lib", Path(home)]
    candidates.append(_SOURCE_CHECKOUT_JARS)
    for candidate in candidates:
        if isinstance(candidate, Path) or os.path.isdir(candidate):
            directory = Path(candidate)
            if any(directory.glob("zookeeper-[0-9]*.jar")) or any(directory.glob("zookeeper.jar")):
                return f"{directory}/*"
        elif candidate:
            return str(candidate)
    raise ZooKeeperError(
        "no Apache ZooKeeper installation found: set ZOOKEEPER_HOME (an unpacked release), "
        "TRAFKA_ZOOKEEPER_CLASSPATH (its jars); or give a running ZooKeeper with --zookeeper HOST:PORT")


def four_letter_word(host: str, port: int, word: str, timeout: float = 2.0) -> str:
    """Send a four-letter word to the ZooKeeper at ``host:port`` and return its whole answer."""
    with socket.create_connection((host, port), timeout=timeout) as connection:
        connection.sendall(word.encode("ascii"))
        chunks = []
        while chunk := connection.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def serves_clients(host: str, port: int) -> bool:
    """Whether the ZooKeeper at ``host:port`` is up and serving requests (not still loading its data)."""
    try:
        answer = four_letter_word(host, port, "srvr", timeout=1.0)
    except OSError:
        return False
    return "Mode: " in answer


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


class LocalZooKeeper:
    """One standalone ZooKeeper process on 127.0.0.1; ``start()``, ``stop()``, ``connect_string``."""

    def __init__(self, data_dir: str | os.PathLike[str], *, port: int = 0,
                 classpath: str | os.PathLike[str] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.classpath = classpath
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> LocalZooKeeper:
        classpath = find_classpath(self.classpath)
        if shutil.which("java") is None:
            raise ZooKeeperError("java is not installed (Apache ZooKeeper runs on a JVM)")
        if not self.port:
            self.port = free_port()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config_path = self.data_dir.parent / f"{self.data_dir.name}.cfg"
        config = {**SERVER_CONFIG, "dataDir": str(self.data_dir), "clientPort": str(self.port),
                  "clientPortAddress": HOST}
        config_path.write_text("".join(f"{key}={value}\n" for key, value in config.items()))
        command = ["java", *JVM_OPTIONS, "-cp", classpath, MAIN_CLASS, str(config_path)]
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not serves_clients(HOST, self.port):
            if self._process.poll() is not None:
                raise ZooKeeperError(f"ZooKeeper exited with {self._process.returncode} before it served clients "
                                     f"(its log: {self.log_path})")
            if time.monotonic() > deadline:
                self.stop()
                raise ZooKeeperError(f"ZooKeeper did not serve clients within {START_TIMEOUT_S} s "
                                     f"(its log: {self.log_path})")
            time.sleep(0.1)
        return self

    def stop(self) -> None:
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def __enter__(self) -> LocalZooKeeper:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
