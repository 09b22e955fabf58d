"""A real trafka broker in a child process, for the compatibility tests.

`BrokerProcess` runs the ``trafka`` command on a free port with its own data directory, waits for the
ready line (``trafka ready: bootstrap=HOST:PORT node_id=N data_dir=PATH``) and offers the life-cycle
operations the tests need: a clean stop (SIGTERM), a crash (SIGKILL) and a restart on the same data
directory. The broker's stderr goes to a log file so that a failing test can show what the broker said.
The process is forked from the fork server of trafka.broker.testing, as the pytest plugin's brokers are;
one on a test network or with its own limit on open files runs as ``python -m trafka``.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from compat_tests.ports import free_port
from trafka.broker.testing import FORK_SERVER, port_is_free
from trafka.broker.testing.forkserver import ForkedBroker
from trafka.broker.tools.processes import terminate

READY_LINE = re.compile(
    r"^trafka ready: bootstrap=(?P<host>\S+):(?P<port>\d+) node_id=(?P<node_id>-?\d+) data_dir=(?P<data_dir>.*)$"
)
START_TIMEOUT = 20.0
STOP_TIMEOUT = 15.0
BIND_HOST = "127.0.0.1"
#: The checkout these tests belong to; ``python -m trafka`` runs it through its editable install
#: (compat_tests/checkout.py stops a run whose ``trafka`` comes from elsewhere).
SOURCE_ROOT = Path(__file__).resolve().parent.parent


class BrokerStartError(RuntimeError):
    """The broker process exited or stayed silent instead of printing its ready line."""


class BrokerProcess:
    """One ``python -m trafka`` child process bound to 127.0.0.1 with a persistent data directory."""

    #: Every broker started by the tests, so that a failing test can print their logs.
    started: list[BrokerProcess] = []

    def __init__(self, data_dir: Path, *, overrides: Mapping[str, object] | None = None, name: str = "broker",
                 max_open_files: int | None = None, host: str = BIND_HOST,
                 wrap: Callable[[list[str]], list[str]] | None = None):
        """``host``: the address it listens on; ``wrap``: the command as run elsewhere (on a host of a test
        network, trafka.broker.testing.network)."""
        self.data_dir = Path(data_dir)
        self._wrap = wrap
        self.overrides = dict(overrides or {})
        self.name = name
        #: The child's RLIMIT_NOFILE (soft and hard) when set; otherwise it inherits this process's.
        self.max_open_files = max_open_files
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.stderr.log"
        self.host = host
        self.port = 0
        self.node_id = -1
        self.starts = 0
        self._process: subprocess.Popen[str] | ForkedBroker | None = None
        self._stdout_lines: list[str] = []
        self._ready = threading.Event()
        BrokerProcess.started.append(self)

    # ----------------------------------------------------------------------------------- life-cycle

    def start(self, port: int = 0) -> BrokerProcess:
        """Start the broker (on `port`, 0 for a free one) and wait for its ready line.

        A free port is one below the kernel's ephemeral range (compat_tests.ports), so that the broker can
        be killed and started again on it; one on a test network is the kernel's choice there."""
        if self.running:
            raise RuntimeError(f"{self.name} is already running")
        if not port and self._wrap is None:
            port = free_port(self.host)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        arguments = ["--host", self.host, "--port", str(port), "--data-dir", str(self.data_dir)]
        for key, value in self.overrides.items():
            arguments += ["--override", f"{key}={value}"]
        forked = self._wrap is None and self.max_open_files is None
        command = [sys.executable, "-m", "trafka", *arguments]
        if self._wrap is not None:
            command = self._wrap(command)
        self.starts += 1
        environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with open(self.log_path, "a") as log:
            log.write(f"===== start #{self.starts}{' (forked)' if forked else ''}: {' '.join(command)}\n")
            log.flush()
            self._ready.clear()
            self._stdout_lines = []
            if forked:
                self._process = FORK_SERVER.launch(arguments, log.fileno(), environment, cwd=SOURCE_ROOT)
            else:
                self._process = subprocess.Popen(
                    command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, text=True,
                    cwd=SOURCE_ROOT, env=environment,
                    preexec_fn=self._limit_open_files if self.max_open_files is not None else None,
                )
        threading.Thread(target=self._read_stdout, args=(self._process,), daemon=True).start()
        deadline = time.monotonic() + START_TIMEOUT
        while not self._ready.wait(0.05):
            if self._process.poll() is not None:
                raise BrokerStartError(
                    f"{self.name} exited with {self._process.returncode} before it was ready\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.kill()
                raise BrokerStartError(f"{self.name} printed no ready line in {START_TIMEOUT} s\n{self.log_tail()}")
        return self

    def _limit_open_files(self) -> None:
        """Runs in the child before it starts the broker."""
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.max_open_files, self.max_open_files))

    @property
    def pid(self) -> int:
        return self._require_process().pid

    def _read_stdout(self, process: subprocess.Popen[str] | ForkedBroker) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            line = line.rstrip("\n")
            self._stdout_lines.append(line)
            match = READY_LINE.match(line)
            if match and not self._ready.is_set():
                self.host, self.port = match["host"], int(match["port"])
                self.node_id = int(match["node_id"])
                self._ready.set()

    def stop(self, timeout: float = STOP_TIMEOUT) -> int:
        """Clean shutdown: SIGTERM, then wait for the process to exit. Returns its exit code."""
        process = self._require_process()
        if not terminate(process, timeout):
            raise AssertionError(f"{self.name} did not exit within {timeout} s of SIGTERM\n{self.log_tail()}")
        return process.returncode

    def kill(self) -> None:
        """Crash: SIGKILL, no chance to flush or checkpoint."""
        process = self._require_process()
        if process.poll() is None:
            process.kill()
        process.wait()

    def restart(self, *, crash: bool = False) -> BrokerProcess:
        """Stop (or kill) and start again on the same data directory, on the same port if it is free.

        Where the old port cannot be bound again the broker gets a new one: clients must bootstrap from
        `bootstrap` after a restart.
        """
        if self.running:
            self.kill() if crash else self.stop()
        old_port = self.port
        if old_port and port_is_free(old_port, self.host):
            try:
                return self.start(old_port)
            except BrokerStartError:
                if self.running:
                    raise
        return self.start(0)

    def close(self) -> None:
        """Make sure the process is gone (used at teardown)."""
        if self.running:
            try:
                self.stop()
            except AssertionError:
                pass

    # ----------------------------------------------------------------------------------- inspection

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self._process is None else self._process.poll()

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def _require_process(self) -> subprocess.Popen[str] | ForkedBroker:
        if self._process is None:
            raise RuntimeError(f"{self.name} was never started")
        return self._process

    def __repr__(self) -> str:
        state = "running" if self.running else f"exited {self.returncode}"
        return f"<BrokerProcess {self.name} {self.bootstrap} {state} data_dir={self.data_dir}>"


def wait_until(condition: Callable[[], object], *, timeout: float = 10.0, interval: float = 0.05,
               message: str | Callable[[], str] = "condition") -> object:
    """Poll `condition` until it returns something truthy; fail with `message` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            text = message() if callable(message) else message
            raise AssertionError(f"timed out after {timeout} s waiting for {text}")
        time.sleep(interval)
