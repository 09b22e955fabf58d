"""trafka for tests and scripts: a real broker process on a free port, its data in a temporary directory.

    from broker.testing import TrafkaBroker

    with TrafkaBroker() as broker:
        broker.create_topic("orders", partitions=3)
        ...  # any Kafka client, bootstrapping from broker.bootstrap_servers
        broker.restart()  # the same data; the same port when it is still free
        broker.kill()     # SIGKILL, as a crash: what was acknowledged stays on disk
        broker.start()
        rule = broker.add_fault("error", api="produce", topic="orders", error="NOT_LEADER_OR_FOLLOWER", count=1)
        broker.wait_for_hits(rule["id"])  # instead of a sleep

The pytest plugin (``broker.pytest_plugin``) offers the same as fixtures. The broker runs as
``python -m broker`` with the interpreter running the caller, listening on 127.0.0.1; its log goes to
``broker.log`` beside the data directory.
"""
from __future__ import annotations

import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from broker.admin_client import AdminClient, ClientError
from broker.control_client import ControlClient, ControlError
from wire.errors import ErrorCode
from wire.messages import CreateTopicsRequest, CreateTopicsResponse

READY_LINE = re.compile(r"^trafka ready: bootstrap=(?P<host>\S+):(?P<port>\d+) .*?(?: control=\S+:(?P<control>\d+))?$")
HOST = "127.0.0.1"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0
CREATE_TOPICS_VERSION = 7


class BrokerError(RuntimeError):
    """The broker did not start, or refused what was asked of it (the message says why)."""


class TrafkaBroker:
    """One trafka broker process. Use it as a context manager, or ``start()`` and ``stop()`` it."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        properties: Mapping[str, object] | None = None,
    ) -> None:
        """``data_dir`` defaults to a temporary directory removed by ``close()``; ``properties`` are
        Kafka broker properties (``{"num.partitions": 3}``)."""
        self._temp_dir = None if data_dir is not None else tempfile.mkdtemp(prefix="trafka-")
        self.data_dir = Path(data_dir) if data_dir is not None else Path(self._temp_dir) / "data"
        self.properties = {key: str(value) for key, value in (properties or {}).items()}
        self.log_path = self.data_dir.parent / "broker.log"
        self.port = 0
        self.control_port = 0
        self._process: subprocess.Popen[str] | None = None

    # -- life-cycle --------------------------------------------------------------------------------

    def start(self) -> TrafkaBroker:
        """Start the broker (on its previous port when it had one and that is free) and wait until it
        serves clients."""
        if self.running:
            raise BrokerError("the broker is already running")
        port = self.port if self.port and _port_is_free(self.port) else 0
        self.data_dir.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "broker", "--host", HOST, "--port", str(port), "--data-dir", str(self.data_dir),
                   "--control-port", "0"]
        for key, value in self.properties.items():
            command += ["--override", f"{key}={value}"]
        with open(self.log_path, "a") as log:
            self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
                                             text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.port, self.control_port = self._wait_until_ready(self._process)
        return self

    def stop(self) -> None:
        """A clean shutdown (SIGTERM): requests in flight are answered, logs flushed."""
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise BrokerError(f"the broker did not stop within {STOP_TIMEOUT_S} s of SIGTERM") from None

    def kill(self) -> None:
        """A crash (SIGKILL): no flush, no checkpoint; the next start recovers the data directory."""
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

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
        return f"{HOST}:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def create_topic(self, name: str, partitions: int = 1, configs: Mapping[str, object] | None = None) -> str:
        """Create a topic (raises BrokerError with Kafka's error when the broker refuses); returns its name."""
        topic = CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=1, assignments=[],
            configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=str(v)) for k, v in (configs or {}).items()],
        )
        (result,) = self._create_topics(CreateTopicsRequest(topics=[topic], timeout_ms=30_000)).topics
        if result.error_code != ErrorCode.NONE:
            raise BrokerError(f"creating topic {name}: {ErrorCode(result.error_code).name}: {result.error_message}")
        return name

    # -- fault rules (kept in the running broker's memory; a restart clears them) ----------------------

    def add_fault(self, action: str, **rule: object) -> dict[str, object]:
        """Add a fault rule and return it (with its ``id``): ``add_fault("error", api="produce",
        topic="orders", partition=0, error="NOT_LEADER_OR_FOLLOWER", count=2)``; ``"delay"`` takes
        ``delay_ms``; ``"drop"`` closes the connection; ``"observe"`` only counts. Raises BrokerError with
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

    def _wait_until_ready(self, process: subprocess.Popen[str]) -> tuple[int, int]:
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

    def _control(self, call):
        if not self.running:
            raise BrokerError("the broker is not running")
        try:
            return call(ControlClient(self.control_port))
        except ControlError as exc:
            raise BrokerError(str(exc)) from None

    def _log_tail(self, lines: int = 20) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def _create_topics(self, request: CreateTopicsRequest) -> CreateTopicsResponse:
        try:
            with AdminClient(self.bootstrap_servers, timeout=60) as client:
                return client.request(request, CREATE_TOPICS_VERSION)
        except ClientError as exc:
            raise BrokerError(str(exc)) from None


def _port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
    return True
