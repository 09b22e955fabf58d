"""A local Apache ZooKeeper for a developer's cluster (``trafka cluster``, ``TrafkaCluster``): one
standalone server on a loopback port, its data in a directory of its own.

ZooKeeper runs on the JVM from an installation of it, looked for in this order:

1. the classpath given (a directory of jars, or a classpath string), then ``$TRAFKA_ZOOKEEPER_CLASSPATH``;
2. ``$ZOOKEEPER_HOME``, an unpacked Apache ZooKeeper release (``lib/*.jar``);
3. in a source checkout, the jars the test set-up resolves from Maven Central (``compat_tests/zookeeper/lib``);
4. an unpacked release whose ``bin/zkServer.sh`` is on the ``PATH``;
5. Debian's (and Ubuntu's) ``zookeeper`` package, ``/usr/share/java/zookeeper.jar``, whose manifest
   names the jars it needs;
6. the jars fetched before into trafka's cache (``$XDG_CACHE_HOME/trafka``, else ``~/.cache/trafka``).

Where none is found, ZooKeeper's server and the jars it loads are fetched from Maven Central into that
cache (:func:`fetch`; about 7 MB, each jar checked against its pinned sha256) once the caller consents:
``trafka cluster`` asks on a terminal; scripts and test fixtures go ahead, saying so on stderr.
ZooKeeper is ready once it answers the ``srvr`` four-letter word as a serving server.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from trafka.broker.tools.processes import terminate

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
DEBIAN_JAR = Path("/usr/share/java/zookeeper.jar")

#: What :func:`fetch` takes from Maven Central: Apache ZooKeeper's server and the jars it loads, the
#: versions the cluster tests run (compat_tests/zookeeper/pom.xml), as (group, artifact, version, sha256).
ZOOKEEPER_VERSION = "3.9.5"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
NETTY = "4.1.130.Final"
FETCHED_JARS = (
    ("org.apache.zookeeper", "zookeeper", ZOOKEEPER_VERSION,
     "936d025db1a85f085edea25048c3f5b3de5fc29329c371a10925e3b78b0b38a0"),
    ("org.apache.zookeeper", "zookeeper-jute", ZOOKEEPER_VERSION,
     "abcbc7f9d6c493daa118da6fa3061a201e2c521217526e8535adfb56b629e52a"),
    ("org.apache.yetus", "audience-annotations", "0.12.0",
     "ffb101fc066360ff3c77457c927fd7967fb096a6ee9e046ab7071447d8208efc"),
    ("org.slf4j", "slf4j-api", "2.0.13", "e7c2a48e8515ba1f49fa637d57b4e2f590b3f5bd97407ac699c3aa5efb1204a9"),
    ("io.dropwizard.metrics", "metrics-core", "4.1.12.1",
     "cec34936faa625039f4e46123eccaa10a9eb9d9a40c6075830cd81330e259cf9"),
    ("org.xerial.snappy", "snappy-java", "1.1.10.5", "0f3f1857ed33116583f480b4df5c0218836c47bfbc9c6221c0d73f356decf37b"),
    ("commons-io", "commons-io", "2.17.0", "4aa4ca48f3dfd30b78220b7881d8cb93eac4093ec94361b6befa9487998a550b"),
    ("io.netty", "netty-buffer", NETTY, "00a522b67ea35cb7b4dd9cf27f85c6c58f5e306785aa045302e5f6b2d4944a87"),
    ("io.netty", "netty-codec", NETTY, "52636bc29bd62120b97bbe5d1d21eab9b1cb2bef8efbb54d2221c5f3fa08d8cd"),
    ("io.netty", "netty-common", NETTY, "53921f28dd5a352b1bed0e1cbcc54d013dc60ffebeae9b2b1e53eabef317e581"),
    ("io.netty", "netty-handler", NETTY, "98c78ec187ca30a4b9775bf6f632f5c9929db6bf06a60e6971f945813880ca0f"),
    ("io.netty", "netty-resolver", NETTY, "48c5b218a89d184e1b601d46433957f515fcefdb4464182b1348bce4f5a18f35"),
    ("io.netty", "netty-transport", NETTY, "1bf573266d271f856705a9984d25449c56a1d73c02a16af12033ceccfe555dbb"),
    ("io.netty", "netty-transport-classes-epoll", NETTY,
     "1c352508d70aca1ccc3068daac907ad1e9d8dc68b07148d57426730bf0d0c8b6"),
    ("io.netty", "netty-transport-native-unix-common", NETTY,
     "cf5efc4168597d7cd14695b469418cac2a1134533f9a0c82ef0538d796fd39e1"),
)


class ZooKeeperError(RuntimeError):
    """ZooKeeper cannot be started here (no installation found, no java, or it failed: the message says)."""


class ZooKeeperNotFound(ZooKeeperError):
    """No installation of ZooKeeper was found, and none was fetched."""


def cache_dir() -> Path:
    """Where :func:`fetch` puts ZooKeeper's jars."""
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "trafka" / f"zookeeper-{ZOOKEEPER_VERSION}"


def _jar_name(artifact: str, version: str) -> str:
    return f"{artifact}-{version}.jar"


def _fetched(directory: Path) -> bool:
    return all((directory / _jar_name(artifact, version)).is_file() for _, artifact, version, _ in FETCHED_JARS)


def _jars_in(directory: Path) -> bool:
    return any(directory.glob("zookeeper-[0-9]*.jar")) or (directory / "zookeeper.jar").is_file()


def find_classpath(classpath: str | os.PathLike[str] | None = None) -> str:
    """The classpath of a ZooKeeper installation (see the module docstring for where it is looked for);
    ZooKeeperNotFound where there is none."""
    for given in (classpath, os.environ.get("TRAFKA_ZOOKEEPER_CLASSPATH")):
        if given and not os.path.isdir(given):
            return str(given)
        if given and _jars_in(Path(given)):
            return f"{given}/*"
    directories = []
    if home := os.environ.get("ZOOKEEPER_HOME"):
        directories += [Path(home) / "lib", Path(home)]
    directories.append(_SOURCE_CHECKOUT_JARS)
    if server_script := shutil.which("zkServer.sh"):
        directories.append(Path(server_script).resolve().parent.parent / "lib")
    for directory in directories:
        if _jars_in(directory):
            return f"{directory}/*"
    if DEBIAN_JAR.is_file():
        return str(DEBIAN_JAR)
    if _fetched(cache_dir()):
        return f"{cache_dir()}/*"
    raise ZooKeeperNotFound(
        "no Apache ZooKeeper installation found: install one (Debian's zookeeper package, or an unpacked "
        "release with ZOOKEEPER_HOME set or its bin/ on the PATH), let trafka fetch it from Maven Central, "
        "or give a running ZooKeeper with --zookeeper HOST:PORT")


def fetch(directory: Path | None = None, *, report: Callable[[str], None] | None = None) -> str:
    """Fetch ZooKeeper's server and the jars it loads from Maven Central into ``directory`` (trafka's
    cache by default), each checked against its pinned sha256, and return their classpath. Jars already
    there are kept; a partial download never takes a jar's name."""
    directory = cache_dir() if directory is None else directory
    report = report or (lambda line: print(line, file=sys.stderr, flush=True))
    directory.mkdir(parents=True, exist_ok=True)
    missing = [jar for jar in FETCHED_JARS if not (directory / _jar_name(jar[1], jar[2])).is_file()]
    report(f"fetching Apache ZooKeeper {ZOOKEEPER_VERSION} from Maven Central into {directory} ({len(missing)} jars)")
    fetched_bytes = 0
    for number, (group, artifact, version, sha256) in enumerate(missing, start=1):
        name = _jar_name(artifact, version)
        url = f"{MAVEN_CENTRAL}/{group.replace('.', '/')}/{artifact}/{version}/{name}"
        try:
            with urllib.request.urlopen(url, timeout=60) as response:
                data = response.read()
        except OSError as exc:
            raise ZooKeeperError(f"cannot fetch {url}: {exc}") from None
        if hashlib.sha256(data).hexdigest() != sha256:
            raise ZooKeeperError(f"{url} is not the jar trafka pins (its sha256 differs); nothing was kept")
        partial = directory / f"{name}.part"
        partial.write_bytes(data)
        partial.replace(directory / name)
        fetched_bytes += len(data)
        report(f"  {number}/{len(missing)} {name} ({len(data) / 1e6:.1f} MB)")
    report(f"fetched Apache ZooKeeper {ZOOKEEPER_VERSION}: {fetched_bytes / 1e6:.1f} MB")
    return f"{directory}/*"


def find_or_fetch(classpath: str | os.PathLike[str] | None = None, *,
                  consent: Callable[[str], bool] | None = None) -> str:
    """:func:`find_classpath`, else :func:`fetch` once ``consent`` (asked with the question; granted
    when not given) says yes."""
    try:
        return find_classpath(classpath)
    except ZooKeeperNotFound:
        question = (f"No Apache ZooKeeper installation found. Fetch ZooKeeper {ZOOKEEPER_VERSION} "
                    f"(about 7 MB) from Maven Central into {cache_dir()}?")
        if consent is not None and not consent(question):
            raise
        return fetch()


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
                 classpath: str | os.PathLike[str] | None = None,
                 consent: Callable[[str], bool] | None = None, host: str = HOST,
                 wrap: Callable[[list[str]], list[str]] | None = None) -> None:
        """``host``: the address it serves clients on; ``wrap``: its command as run elsewhere (on a host of a test
        network, trafka.broker.testing.network)."""
        self.data_dir = Path(data_dir)
        self.host = host
        self._wrap = wrap
        self.port = port
        self.classpath = classpath
        #: Asked before ZooKeeper is fetched where no installation is found (see find_or_fetch).
        self.consent = consent
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> LocalZooKeeper:
        if shutil.which("java") is None:
            raise ZooKeeperError("java is not installed: Apache ZooKeeper runs on a JVM (Java 8 or newer); "
                                 "install one (Debian: apt install default-jre-headless), or give a running "
                                 "ZooKeeper with --zookeeper HOST:PORT")
        classpath = find_or_fetch(self.classpath, consent=self.consent)
        if not self.port:
            self.port = free_port()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config_path = self.data_dir.parent / f"{self.data_dir.name}.cfg"
        config = {**SERVER_CONFIG, "dataDir": str(self.data_dir), "clientPort": str(self.port),
                  "clientPortAddress": self.host}
        config_path.write_text("".join(f"{key}={value}\n" for key, value in config.items()))
        command = ["java", *JVM_OPTIONS, "-cp", classpath, MAIN_CLASS, str(config_path)]
        if self._wrap is not None:
            command = self._wrap(command)
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not serves_clients(self.host, self.port):
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
        terminate(self._process, STOP_TIMEOUT_S)

    def __enter__(self) -> LocalZooKeeper:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
