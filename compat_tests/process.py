"""What the harnesses of the tests' child processes share (Apache Kafka, ZooKeeper): a clean stop, a
crash, whether it runs, and its log."""

from __future__ import annotations

import subprocess
from pathlib import Path

from trafka.broker.tools.processes import terminate

STOP_TIMEOUT = 30.0


class ChildProcess:
    """A process started by a subclass into ``_process``, writing its log to ``log_path``."""

    name: str
    log_path: Path
    _process: subprocess.Popen[bytes] | None = None

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Clean shutdown: SIGTERM, then wait for the process to exit (SIGKILL after `timeout` seconds)."""
        terminate(self._process, timeout)

    def kill(self) -> None:
        """Crash: SIGKILL, no chance to flush or close anything."""
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    close = stop

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int:
        if self._process is None:
            raise RuntimeError(f"{self.name} was never started")
        return self._process.pid

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])
