"""trafka for tests and scripts: a real broker process on a free port, its data in a temporary directory.

    from trafka.broker.testing import TrafkaBroker

    with TrafkaBroker() as broker:
        broker.create_topic("orders", partitions=3)
        ...  # any Kafka client, bootstrapping from broker.bootstrap_servers
        broker.restart()  # the same data; the same port when it is still free
        broker.kill()     # SIGKILL, as a crash: what was acknowledged stays on disk
        broker.start()
        rule = broker.add_fault("error", api="produce", topic="orders", error="NOT_LEADER_OR_FOLLOWER", count=1)
        broker.wait_for_hits(rule["id"])  # instead of a sleep

    with TrafkaBroker(secure=True, users={"alice": "alice-secret"}) as broker:   # SASL_SSL only
        Producer(broker.confluent_config("alice"))       # confluent-kafka: SCRAM-SHA-512 over TLS
        KafkaProducer(**broker.kafka_python_config())    # kafka-python, as the first user (admin by default)
        AIOKafkaProducer(**broker.aiokafka_config("alice", mechanism="PLAIN"))
        broker.java_properties("alice")                  # the Java client's names; broker.properties_file(user)
                                                         # is a file of them (Kafka's --command-config)
        broker.add_user("carol", "carol-secret")         # SCRAM-SHA-256/512, through the broker

:class:`TrafkaCluster` runs several brokers as one replicated cluster coordinated through ZooKeeper.
The pytest plugin (``trafka.broker.testing.pytest_plugin``) offers the same as fixtures. The broker runs the
``trafka`` command in a process of its own, listening on 127.0.0.1, with the interpreter running the caller.
It is forked from a fork server (:mod:`trafka.broker.testing.forkserver`) that has loaded trafka once, so
that from the second broker on a start takes the broker's own start work alone; ``TrafkaBroker.fork = False``
runs each as ``python -P -m trafka`` instead. (``-P``, in either, keeps the working directory off the path,
so that nothing of the caller's project stands in for trafka.) Its log goes to ``broker.log`` beside the
data directory.
"""
from __future__ import annotations

import os
import re
import secrets
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

from trafka.broker.testing.forkserver import ForkedBroker, ForkServerClient
from trafka.broker.tools.admin_client import AdminClient, ClientError, check
from trafka.broker.tools.control_client import ControlClient, ControlError
from trafka.broker.tools.processes import terminate
from trafka.wire.errors import ErrorCode
from trafka.broker.tools.zookeeper_server import LocalZooKeeper, ZooKeeperError
from trafka.wire.messages import CreateTopicsRequest, MetadataRequest
from trafka.wire.protocol import ApiKey

READY_LINE = re.compile(r"^trafka ready: bootstrap=(?P<host>\S+):(?P<port>\d+) .*?"
                        r"(?: security_protocol=(?P<security>\S+))?(?: control=\S+:(?P<control>\d+))?$")
HOST = "127.0.0.1"
START_TIMEOUT_S = 30.0
#: The SASL mechanism of the client settings a secure broker hands out (PLAIN and SCRAM-SHA-256 work too).
SECURE_MECHANISM = "SCRAM-SHA-512"
#: A secure broker's users when none are given: one, with a generated password.
DEFAULT_SECURE_USER = "admin"
STOP_TIMEOUT_S = 20.0
CREATE_TOPICS_VERSION = 7
METADATA_VERSION = 10
#: Where a secure broker keeps its certificates and client files (trafka.broker.tools.secure_dev.DEV_DIR).
_DEV_DIR = "dev-security"


class BrokerError(RuntimeError):
    """The broker did not start, or refused what was asked of it (the message says why)."""


class TrafkaBroker:
    """One trafka broker process. Use it as a context manager, or ``start()`` and ``stop()`` it."""

    #: Fork the broker from this process's fork server (False: start ``python -P -m trafka`` each time).
    fork = True

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        properties: Mapping[str, object] | None = None,
        secure: bool = False,
        users: Mapping[str, str] | None = None,
        controllable_clock: bool = False,
        kafka_version: str | None = None,
    ) -> None:
        """``data_dir`` defaults to a temporary directory removed by ``close()``; ``properties`` are
        Kafka broker properties (``{"num.partitions": 3}``).

        ``secure=True`` starts it as ``trafka --secure``: one SASL_SSL listener (PLAIN, SCRAM-SHA-256,
        SCRAM-SHA-512) with a certificate from a throwaway CA, and the ``users`` (name -> password; default
        ``admin`` with a generated password) able to log in; ``confluent_config(user)``,
        ``kafka_python_config(user)``, ``aiokafka_config(user)`` and ``java_properties(user)`` are their
        client settings.

        ``controllable_clock=True`` starts it with a clock that ``advance(seconds)`` moves forward: timeouts,
        expiries and retention act as if that time had passed (trafka.broker.clock).

        ``kafka_version="2.8"`` starts it as ``trafka --kafka-version 2.8``: it answers ApiVersions as Apache Kafka
        2.8's broker did and serves only those versions (trafka.broker.kafka_versions); ``create_topic()`` asks
        within them. (A secure broker's own admin connection logs in with SaslAuthenticate v2: from Kafka 2.5.)"""
        if users is not None and not secure:
            raise BrokerError("users log in to a secure broker: give secure=True too")
        self._temp_dir = None if data_dir is not None else tempfile.mkdtemp(prefix="trafka-")
        self.data_dir = Path(data_dir) if data_dir is not None else Path(self._temp_dir) / "data"
        self.properties = {key: str(value) for key, value in (properties or {}).items()}
        self.secure = secure
        self.controllable_clock = controllable_clock
        if kafka_version is not None:
            from trafka.broker.kafka_versions import release

            try:
                release(kafka_version)
            except ValueError as exc:
                raise BrokerError(f"kafka_version={exc}") from None
        #: The Apache Kafka release whose API versions the broker serves (None: all of trafka's).
        self.kafka_version = kafka_version
        #: The users of a secure broker, name -> password (the first one is the default user).
        self.users: dict[str, str] = dict(users) if users else (
            {DEFAULT_SECURE_USER: secrets.token_urlsafe(12)} if secure else {})
        if secure and not self.users:
            raise BrokerError("a secure broker needs at least one user")
        self.log_path = self.data_dir.parent / "broker.log"
        self.port = 0
        self.control_port = 0
        #: The address it listens on (its host's, on a test network) and its command as run there.
        self.host = HOST
        self._wrap: Callable[[list[str]], list[str]] | None = None
        self._process: subprocess.Popen[str] | ForkedBroker | None = None

    # -- life-cycle --------------------------------------------------------------------------------

    def start(self) -> TrafkaBroker:
        """Start the broker (on its previous port when it had one and that is free) and wait until it
        serves clients. A broker of a cluster killed a moment ago is refused while its previous registration's
        ZooKeeper session lasts (``zookeeper.session.timeout.ms``), as Kafka's is: it is started again until that
        is over (for up to REGISTRATION_WAIT_S)."""
        if self.running:
            raise BrokerError("the broker is already running")
        deadline = time.monotonic() + REGISTRATION_WAIT_S
        while True:
            try:
                return self._start_once()
            except BrokerError as exc:
                if "is already registered in ZooKeeper" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def _start_once(self) -> TrafkaBroker:
        port = self.port if self.port and port_is_free(self.port) else 0
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = ["--host", self.host, "--port", str(port), "--data-dir", str(self.data_dir), "--control-port", "0"]
        for key, value in self.properties.items():
            command += ["--override", f"{key}={value}"]
        if self.controllable_clock:
            command.append("--controllable-clock")
        if self.kafka_version is not None:
            command += ["--kafka-version", self.kafka_version]
        if self.secure:
            command.append("--secure")
            for name, password in self.users.items():
                command += ["--user", f"{name}:{password}"]
        environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with open(self.log_path, "a") as log:
            if self._wrap is None and self.fork:
                self._process = FORK_SERVER.launch(command, log.fileno(), environment)
            else:
                command = [sys.executable, "-P", "-m", "trafka", *command]
                self._process = subprocess.Popen(self._wrap(command) if self._wrap is not None else command,
                                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
                                                 text=True, env=environment)
        self.port, self.control_port = self._wait_until_ready(self._process)
        return self

    def stop(self) -> None:
        """A clean shutdown (SIGTERM): requests in flight are answered, logs flushed."""
        if not terminate(self._process, STOP_TIMEOUT_S):
            raise BrokerError(f"the broker did not stop within {STOP_TIMEOUT_S} s of SIGTERM")

    def kill(self) -> None:
        """A crash (SIGKILL): no flush, no checkpoint; the next start recovers the data directory."""
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def pause(self) -> None:
        """Stop the broker's process where it stands (SIGSTOP): its connections stay open and nothing is answered,
        as with a long garbage-collection pause or a frozen VM; in a cluster its ZooKeeper session expires after
        ``zookeeper.session.timeout.ms`` and others take over its partitions. ``resume()`` lets it go on."""
        os.kill(self._running_process().pid, signal.SIGSTOP)

    def resume(self) -> None:
        """Let a paused broker go on (SIGCONT)."""
        os.kill(self._running_process().pid, signal.SIGCONT)

    def restart(self, *, crash: bool = False) -> TrafkaBroker:
        """Stop (or kill) and start again on the same data directory."""
        self.kill() if crash else self.stop()
        return self.start()

    def close(self) -> None:
        """Stop the broker and remove its temporary data directory, if it made one."""
        try:
            self.stop()
        finally:
            if self._temp_dir is not None:
                shutil.rmtree(self._temp_dir, ignore_errors=True)

    def __enter__(self) -> TrafkaBroker:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    # -- what clients need -------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def create_topic(self, name: str, partitions: int = 1, configs: Mapping[str, object] | None = None) -> str:
        """Create a topic (raises BrokerError with Kafka's error when the broker refuses); returns its name."""
        return _create_topic(self.bootstrap_servers, name, partitions, 1, configs, self._client_security(),
                             kafka_version=self.kafka_version)

    # -- a secure broker's client settings (a PLAINTEXT broker's are its address alone) -----------------

    @property
    def security_protocol(self) -> str:
        return "SASL_SSL" if self.secure else "PLAINTEXT"

    @property
    def ca_file(self) -> Path | None:
        """The CA certificate a client of a secure broker trusts (PEM); None for a PLAINTEXT broker."""
        return self.data_dir.absolute() / _DEV_DIR / "ca-cert.pem" if self.secure else None

    def confluent_config(self, user: str | None = None, *, mechanism: str = SECURE_MECHANISM) -> dict[str, str]:
        """confluent-kafka's (librdkafka's) settings for ``user`` (default: the first user)."""
        config = {"bootstrap.servers": self.bootstrap_servers}
        if self.secure:
            name, password = self._user(user)
            config.update({"security.protocol": "SASL_SSL", "sasl.mechanism": _mechanism(mechanism),
                           "sasl.username": name, "sasl.password": password, "ssl.ca.location": str(self.ca_file)})
        return config

    def kafka_python_config(self, user: str | None = None, *, mechanism: str = SECURE_MECHANISM) -> dict[str, object]:
        """kafka-python's keyword arguments for ``user``: ``KafkaProducer(**broker.kafka_python_config())``."""
        config: dict[str, object] = {"bootstrap_servers": self.bootstrap_servers}
        if self.secure:
            name, password = self._user(user)
            config.update({"security_protocol": "SASL_SSL", "sasl_mechanism": _mechanism(mechanism),
                           "sasl_plain_username": name, "sasl_plain_password": password,
                           "ssl_cafile": str(self.ca_file)})
        return config

    def aiokafka_config(self, user: str | None = None, *, mechanism: str = SECURE_MECHANISM) -> dict[str, object]:
        """aiokafka's keyword arguments for ``user`` (its TLS settings are an ``ssl_context``)."""
        config: dict[str, object] = {"bootstrap_servers": self.bootstrap_servers}
        if self.secure:
            import ssl

            name, password = self._user(user)
            config.update({"security_protocol": "SASL_SSL", "sasl_mechanism": _mechanism(mechanism),
                           "sasl_plain_username": name, "sasl_plain_password": password,
                           "ssl_context": ssl.create_default_context(cafile=str(self.ca_file))})
        return config

    def java_properties(self, user: str | None = None, *, mechanism: str = SECURE_MECHANISM) -> dict[str, str]:
        """The Java client's settings for ``user`` (Kafka's tools take them as a ``--command-config`` file:
        ``properties_file``)."""
        from trafka.broker.tools.client_security import jaas_quote

        config = {"bootstrap.servers": self.bootstrap_servers}
        if self.secure:
            name, password = self._user(user)
            mechanism = _mechanism(mechanism)
            module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
            config.update({
                "security.protocol": "SASL_SSL", "sasl.mechanism": mechanism,
                "sasl.jaas.config": f"org.apache.kafka.common.security.{module} required "
                                    f"username={jaas_quote(name)} password={jaas_quote(password)};",
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca_file)})
        return config

    def properties_file(self, user: str | None = None, *, mechanism: str = SECURE_MECHANISM) -> Path:
        """A file of ``java_properties(user)`` (private to its owner), for ``--command-config``: Kafka's
        tools and trafka's."""
        from trafka.broker.tools.client_security import escape_property

        if self.secure:
            directory, name = self.data_dir / _DEV_DIR, self._user(user)[0]
        else:
            directory, name = self.data_dir.parent, "plaintext"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"client-{name}-{_mechanism(mechanism).lower()}.properties"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.writelines(f"{key}={escape_property(value)}\n"
                         for key, value in self.java_properties(user, mechanism=mechanism).items())
        return path

    def add_user(self, name: str, password: str, *, mechanisms: tuple[str, ...] = ("SCRAM-SHA-256", "SCRAM-SHA-512"),
                 iterations: int = 4096) -> None:
        """Give ``name`` SCRAM credentials through the running broker (AlterUserScramCredentials, as the
        first user); it logs in with SCRAM at once, and after restarts (PLAIN users are the ``users``
        given at start). BrokerError with Kafka's error when the broker refuses."""
        from trafka.broker.security.credentials import MECHANISM_TYPES, salted_password
        from trafka.wire.messages import AlterUserScramCredentialsRequest as A

        version = _version(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, self.kafka_version)
        try:
            with AdminClient(self.bootstrap_servers, timeout=30, security=self._client_security()) as client:
                for mechanism in mechanisms:
                    salt = secrets.token_bytes(32)
                    upsertion = A.ScramCredentialUpsertion(
                        name=name, mechanism=MECHANISM_TYPES[_mechanism(mechanism)], iterations=iterations,
                        salt=salt, salted_password=salted_password(mechanism, password, salt, iterations))
                    (result,) = client.request(A(deletions=[], upsertions=[upsertion]), version).results
                    if result.error_code != ErrorCode.NONE:
                        raise BrokerError(f"adding user {name}: {ErrorCode(result.error_code).name}: "
                                          f"{result.error_message}")
        except ClientError as exc:
            raise BrokerError(str(exc)) from None
        if self.secure:
            self.users.setdefault(name, password)

    def _user(self, user: str | None) -> tuple[str, str]:
        name = next(iter(self.users)) if user is None else user
        if name not in self.users:
            raise BrokerError(f"no user {name!r}: this broker's users are {', '.join(self.users)}")
        return name, self.users[name]

    def _client_security(self):
        """The settings of the broker's own admin connections (create_topic, add_user): the first user's."""
        if not self.secure:
            return None
        from trafka.broker.tools.client_security import ClientSecurity

        return ClientSecurity.from_properties(self.java_properties(), source="the secure broker's settings")

    # -- fault rules (kept in the running broker's memory; a restart clears them) ----------------------

    def add_fault(self, action: str, **rule: object) -> dict[str, object]:
        """Add a fault rule and return it (with its ``id``): ``add_fault("error", api="produce",
        topic="orders", partition=0, error="NOT_LEADER_OR_FOLLOWER", count=2)``; ``"delay"`` takes
        ``delay_ms``; ``"drop"`` closes the connection; ``"observe"`` only counts; the network's faults are
        ``"latency"`` (``latency_ms``, ``jitter_ms``), ``"bandwidth"`` (``bytes_per_s``), ``"truncate"``
        (``fraction``), ``"half_open"``, ``"refuse"`` and ``"cut"`` (broker.faults). Raises BrokerError with
        the broker's reason when the rule cannot be made."""
        return self._control(lambda control: control.add({"action": action, **rule}))

    def faults(self) -> list[dict[str, object]]:
        """The rules, with how often each was hit."""
        return self._control(lambda control: control.rules())

    def remove_fault(self, rule_id: int) -> None:
        self._control(lambda control: control.remove(rule_id))

    def clear_faults(self) -> None:
        self._control(lambda control: control.clear())

    def wait_for_hits(self, rule_id: int, hits: int = 1, timeout: float = 30.0) -> dict[str, object]:
        """Wait until rule ``rule_id`` was hit ``hits`` times and return it; BrokerError on timeout."""
        return self._control(lambda control: control.wait_for_hits(rule_id, hits, timeout))

    # -- the clock (a broker started with controllable_clock=True) -------------------------------------

    def advance(self, seconds: float) -> int:
        """Move the broker's time ``seconds`` forward: whatever it decides by time (group sessions, transaction
        timeouts, retention, lock expiries ...) happens as if that time had passed. Returns its time, in ms since
        the epoch. BrokerError on a broker with the real clock."""
        return int(self._control(lambda control: control.advance(seconds))["now_ms"])

    def now_ms(self) -> int:
        """The broker's time, in ms since the epoch (ahead of the real one by what ``advance`` moved it)."""
        return int(self._control(lambda control: control.clock())["now_ms"])

    def wait_for_group(self, group_id: str, *, state: str = "Stable", members: int | None = None,
                       timeout: float = 30.0) -> dict[str, object]:
        """Wait until the group is in ``state`` (with ``members`` members, when given); BrokerError on timeout."""
        return self._control(lambda control: control.group(group_id, state=state, members=members, timeout=timeout))

    def wait_for_end_offset(self, topic: str, partition: int, end_offset: int,
                            timeout: float = 30.0) -> dict[str, object]:
        """Wait until the partition's log end offset reaches ``end_offset``; BrokerError on timeout."""
        return self._control(lambda control: control.partition(topic, partition, end_offset=end_offset,
                                                               timeout=timeout))

    def log_text(self) -> str:
        """What the broker logged so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def __repr__(self) -> str:
        return f"<TrafkaBroker {self.bootstrap_servers} {'running' if self.running else 'stopped'} {self.data_dir}>"

    # -- internals ---------------------------------------------------------------------------------

    def _wait_until_ready(self, process: subprocess.Popen[str] | ForkedBroker) -> tuple[int, int]:
        assert process.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.kill()
                    raise BrokerError(f"the broker printed no ready line in {START_TIMEOUT_S} s\n{self._log_tail()}")
                if selector.select(remaining):
                    line = process.stdout.readline()
                    match = READY_LINE.match(line.rstrip("\n"))
                    if match:
                        return int(match["port"]), int(match["control"])
                    if not line:  # the broker exited
                        process.wait()
                        raise BrokerError(f"the broker exited with {process.returncode}\n{self._log_tail()}")

    def _running_process(self) -> subprocess.Popen[str] | ForkedBroker:
        if self._process is None or self._process.poll() is not None:
            raise BrokerError("the broker is not running")
        return self._process

    def _control(self, call):
        if not self.running:
            raise BrokerError("the broker is not running")
        try:
            return call(ControlClient(self.control_port))
        except ControlError as exc:
            raise BrokerError(str(exc)) from None

    def _log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])


#: The fork server of this process's brokers, started with the first one.
FORK_SERVER = ForkServerClient()

#: How long ``TrafkaBroker.start()`` waits for the ZooKeeper session of a killed incarnation of the broker to end.
REGISTRATION_WAIT_S = 60.0

#: A killed broker's partitions fail over once its ZooKeeper session expires: 6 s here rather than
#: Kafka's default 18 s, so that tests and developers do not wait for it.
CLUSTER_DEFAULTS: dict[str, object] = {"zookeeper.session.timeout.ms": 6000}


class TrafkaCluster:
    """Several trafka brokers forming one replicated cluster through ZooKeeper, each its own process.

        with TrafkaCluster(brokers=3) as cluster:
            cluster.create_topic("orders", partitions=3, replication_factor=3)
            leader = cluster.leader("orders", 0)
            cluster.broker(leader).kill()          # SIGKILL: another replica takes over
            cluster.broker(leader).start()         # it comes back, catches up and rejoins the ISR

    ``zookeeper`` is ``host:port`` of a running ZooKeeper; without it one is started from a local
    installation (broker.zookeeper_server). Each cluster lives under its own ZooKeeper ``chroot`` (by
    default a new one), so clusters can share a ZooKeeper; a cluster started again over the same
    ``data_dir`` must be given the chroot it had. Brokers get ids 1..n (on ``ports`` when given), and
    ``properties`` apply to all of them, over CLUSTER_DEFAULTS.
    """

    def __init__(self, brokers: int = 3, *, zookeeper: str | None = None,
                 data_dir: str | os.PathLike[str] | None = None, properties: Mapping[str, object] | None = None,
                 ports: list[int] | None = None, chroot: str | None = None,
                 zookeeper_consent: Callable[[str], bool] | None = None, network: bool = False) -> None:
        if brokers < 1:
            raise BrokerError("a cluster has at least one broker")
        if network:
            from trafka.broker.testing.network import available

            if zookeeper is not None:
                raise BrokerError("a cluster on a test network runs its own ZooKeeper there: give no zookeeper")
            if (why_not := available()) is not None:
                raise BrokerError(f"no test network here: {why_not}")
        #: The test network the cluster runs on (trafka.broker.testing.network), with ``network=True``.
        self.network = None
        self._on_network = network
        self._temp_dir = None if data_dir is not None else tempfile.mkdtemp(prefix="trafka-cluster-")
        self.data_dir = Path(data_dir) if data_dir is not None else Path(self._temp_dir)
        self._zookeeper_address = zookeeper
        self._local_zookeeper: LocalZooKeeper | None = None
        self._zookeeper_consent = zookeeper_consent
        self.chroot = f"/trafka-{uuid.uuid4().hex[:12]}" if chroot is None else chroot
        self.properties = {**CLUSTER_DEFAULTS, **(properties or {})}
        self.brokers = [TrafkaBroker(self.data_dir / f"broker{node_id}" / "data") for node_id in range(1, brokers + 1)]
        for broker, port in zip(self.brokers, ports or []):
            broker.port = port

    @property
    def zookeeper_connect(self) -> str:
        """Where the brokers coordinate: ZooKeeper's ``host:port`` and this cluster's chroot."""
        address = self._zookeeper_address or (self._local_zookeeper.connect_string if self._local_zookeeper else "")
        return f"{address}{self.chroot}"

    def start(self) -> TrafkaCluster:
        """Start ZooKeeper if this cluster runs its own, then every broker not running."""
        placed: dict[str, object] = {}
        if self._on_network and self.network is None:
            from trafka.broker.testing.network import TestNetwork

            self.network = TestNetwork(["zk", *(f"b{n}" for n in range(1, len(self.brokers) + 1))]).start()
            for node_id, broker in enumerate(self.brokers, start=1):
                broker.host = self.network.address(f"b{node_id}")
                broker._wrap = lambda command, host=f"b{node_id}": self.network.command(host, command)
        if self.network is not None:
            placed = {"host": self.network.address("zk"), "wrap": lambda command: self.network.command("zk", command)}
        if self._zookeeper_address is None and self._local_zookeeper is None:
            try:
                self._local_zookeeper = LocalZooKeeper(self.data_dir / "zookeeper", consent=self._zookeeper_consent,
                                                       **placed).start()
            except ZooKeeperError as exc:
                raise BrokerError(str(exc)) from None
        for node_id, broker in enumerate(self.brokers, start=1):
            broker.properties = {key: str(value) for key, value in {
                **self.properties, "broker.id": node_id, "zookeeper.connect": self.zookeeper_connect}.items()}
            if not broker.running:
                broker.start()
        return self

    def stop(self) -> None:
        """Stop every broker (cleanly), then this cluster's own ZooKeeper."""
        try:
            for broker in self.brokers:
                broker.stop()
        finally:
            if self._local_zookeeper is not None:
                self._local_zookeeper.stop()
                self._local_zookeeper = None

    def close(self) -> None:
        """Stop everything and remove the temporary directory, if the cluster made one (and its test network)."""
        try:
            self.stop()
        finally:
            if self.network is not None:
                self.network.close()
                self.network = None
            if self._temp_dir is not None:
                shutil.rmtree(self._temp_dir, ignore_errors=True)

    def __enter__(self) -> TrafkaCluster:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    @property
    def bootstrap_servers(self) -> str:
        """The running brokers' addresses, comma-separated."""
        return ",".join(broker.bootstrap_servers for broker in self.brokers if broker.running)

    def broker(self, node_id: int) -> TrafkaBroker:
        """The broker with id ``node_id`` (1..n): ``kill()``, ``start()``, ``restart()``, ``stop()``."""
        if not 1 <= node_id <= len(self.brokers):
            raise BrokerError(f"no broker {node_id} in a cluster of {len(self.brokers)}")
        return self.brokers[node_id - 1]

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int | None = None,
                     configs: Mapping[str, object] | None = None) -> str:
        """Create a topic, replicated on ``replication_factor`` brokers (default: all, at most 3)."""
        replication = min(3, len(self.brokers)) if replication_factor is None else replication_factor
        return _create_topic(self.bootstrap_servers.split(",")[0], name, partitions, replication, configs)

    def leader(self, topic: str, partition: int = 0) -> int:
        """The id of the partition's leader as the cluster says it now (-1: none)."""
        request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                  allow_auto_topic_creation=False)
        response, failure = None, None
        for broker in self.brokers:
            if broker.running:
                try:
                    # (briefly: a broker cut off from the network never answers, and the next one is asked)
                    with AdminClient(broker.bootstrap_servers, timeout=5) as client:
                        response = client.request(request, METADATA_VERSION)
                    break
                except ClientError as exc:
                    failure = exc
        if response is None:
            raise BrokerError(f"no broker answered: {failure}" if self.bootstrap_servers else "no broker is running")
        for found in response.topics:
            for p in found.partitions:
                if p.partition_index == partition:
                    return p.leader_id
        raise BrokerError(f"no partition {topic}-{partition}")

    def isolate(self, node_id: int, *, from_: str = "everything") -> None:
        """Cut broker ``node_id`` off (a cluster made with ``network=True``): from ``"everything"`` (the other
        brokers, ZooKeeper and the clients), ``"brokers"`` (the other brokers only: it keeps its ZooKeeper session
        and its clients) or ``"zookeeper"`` (ZooKeeper only). Until :meth:`heal`."""
        network = self._network()
        self.broker(node_id)  # (a broker of this cluster)
        host = f"b{node_id}"
        others = [f"b{n}" for n in range(1, len(self.brokers) + 1) if n != node_id]
        targets = {"everything": None, "brokers": others, "zookeeper": ["zk"]}
        if from_ not in targets:
            raise BrokerError(f"from_={from_!r}: everything, brokers or zookeeper")
        network.isolate(host, targets[from_])

    def heal(self) -> None:
        """Every broker reaches every other, ZooKeeper and the clients again."""
        self._network().heal()

    def _network(self):
        if self.network is None:
            raise BrokerError("isolating a broker needs a cluster on a test network: TrafkaCluster(network=True)")
        return self.network

    def move_leadership(self, topic: str, partition: int, node_id: int, timeout: float = 30.0) -> None:
        """Make broker ``node_id`` (one of the partition's replicas) its leader, as an operator would: first in the
        replicas (AlterPartitionReassignments, the same replicas in a new order), then the preferred leader
        elected (ElectLeaders); returns once the cluster names it leader."""
        from trafka.wire.messages import AlterPartitionReassignmentsRequest as Reassign
        from trafka.wire.messages import ElectLeadersRequest

        with AdminClient(self.bootstrap_servers.split(",")[0], timeout=timeout) as client:
            metadata = client.metadata([topic])
            found = next((p for t in metadata.topics for p in t.partitions if p.partition_index == partition), None)
            if found is None:
                raise BrokerError(f"no partition {topic}-{partition}")
            if node_id not in found.replica_nodes:
                raise BrokerError(f"broker {node_id} holds no replica of {topic}-{partition} "
                                  f"(replicas {list(found.replica_nodes)})")
            replicas = [node_id, *(r for r in found.replica_nodes if r != node_id)]
            # (both asked of the controller, as Kafka's tools ask them)
            reassigned = client.request(Reassign(timeout_ms=int(timeout * 1000), topics=[Reassign.ReassignableTopic(
                name=topic, partitions=[Reassign.ReassignablePartition(partition_index=partition,
                                                                       replicas=replicas)])]), 0,
                node_id=metadata.controller_id)
            check(reassigned.error_code, "reassigning", reassigned.error_message)
            for answered in reassigned.responses:
                for part in answered.partitions:
                    check(part.error_code, f"reassigning {topic}-{partition}", part.error_message)
            deadline = time.monotonic() + timeout
            while self.leader(topic, partition) != node_id:
                controller = client.metadata([]).controller_id
                elected = client.request(ElectLeadersRequest(election_type=0, timeout_ms=int(timeout * 1000),
                                                             topic_partitions=[ElectLeadersRequest.TopicPartitions(
                                                                 topic=topic, partitions=[partition])]), 2,
                                         node_id=controller)
                check(elected.error_code, "electing the preferred leader")
                if time.monotonic() > deadline:
                    raise BrokerError(f"broker {node_id} did not become the leader of {topic}-{partition} in "
                                      f"{timeout} s (not in the ISR?)")
                time.sleep(0.1)

    def __repr__(self) -> str:
        return f"<TrafkaCluster {self.bootstrap_servers or 'stopped'} zookeeper={self.zookeeper_connect}>"


def _version(api_key: ApiKey, wanted: int, kafka_version: str | None) -> int:
    """``wanted``, or the newest version a broker serving ``kafka_version``'s API versions serves, if older."""
    if kafka_version is None:
        return wanted
    from trafka.broker.kafka_versions import cap

    served = cap({api_key: (0, wanted)}, kafka_version)
    if api_key not in served:
        raise BrokerError(f"Apache Kafka {kafka_version} has no {api_key.name} (--kafka-version {kafka_version})")
    return served[api_key][1]


def _mechanism(mechanism: str) -> str:
    name = mechanism.upper()
    if name not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        raise BrokerError(f"mechanism {mechanism!r}: a secure broker serves PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512")
    return name


def _create_topic(bootstrap: str, name: str, partitions: int, replication_factor: int,
                  configs: Mapping[str, object] | None, security=None, *, kafka_version: str | None = None) -> str:
    topic = CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication_factor, assignments=[],
        configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=str(v)) for k, v in (configs or {}).items()],
    )
    try:
        with AdminClient(bootstrap, timeout=60, security=security) as client:
            response = client.request(CreateTopicsRequest(topics=[topic], timeout_ms=30_000),
                                      _version(ApiKey.CREATE_TOPICS, CREATE_TOPICS_VERSION, kafka_version))
    except ClientError as exc:
        raise BrokerError(str(exc)) from None
    (result,) = response.topics
    if result.error_code != ErrorCode.NONE:
        raise BrokerError(f"creating topic {name}: {ErrorCode(result.error_code).name}: {result.error_message}")
    return name


def port_is_free(port: int, host: str = HOST) -> bool:
    """Whether a server may listen on ``host`` at ``port`` (binding with SO_REUSEADDR, as servers do)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True
