"""The fork server: brokers forked from a process that has loaded trafka, seen as subprocesses are."""
from __future__ import annotations

import os
import signal
import subprocess

import pytest

from trafka.broker.testing import READY_LINE
from trafka.broker.testing.forkserver import ForkServerClient


@pytest.fixture
def server():
    client = ForkServerClient()
    client.launched = []
    yield client
    for process in client.launched:  # what a failed test left running
        process.kill()
    client.close()


def _launch(server: ForkServerClient, tmp_path, *arguments: str, env: dict[str, str] | None = None):
    tmp_path.mkdir(exist_ok=True)
    with open(tmp_path / "broker.log", "a") as log:
        process = server.launch(["--port", "0", "--data-dir", str(tmp_path / "data"), *arguments], log.fileno(),
                                env if env is not None else dict(os.environ), cwd=tmp_path)
    server.launched.append(process)
    return process


def _ready(process) -> str:
    line = process.stdout.readline()
    assert READY_LINE.match(line.rstrip("\n")), line
    return line


def test_a_forked_broker_starts_stops_and_reports_its_exit(server, tmp_path):
    process = _launch(server, tmp_path)
    assert "node_id=1" in _ready(process)
    assert process.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(0.05)
    process.terminate()
    assert process.wait(15) == 0
    assert process.poll() == 0
    process.kill()  # exited: no signal goes to a pid that may be another process's by now
    assert "shutting down" in (tmp_path / "broker.log").read_text()


def test_a_killed_broker_exits_by_its_signal_and_another_starts_on_its_data_directory(server, tmp_path):
    first = _launch(server, tmp_path)
    _ready(first)
    first.kill()
    assert first.wait(15) == -signal.SIGKILL
    second = _launch(server, tmp_path)
    _ready(second)
    second.send_signal(signal.SIGINT)
    assert second.wait(15) == 0


def test_the_broker_gets_the_callers_directory_environment_and_arguments(server, tmp_path):
    process = _launch(server, tmp_path, "--nonsense", env={"PATH": os.environ.get("PATH", "")})
    assert process.wait(15) == 2
    assert "unrecognized arguments: --nonsense" in (tmp_path / "broker.log").read_text()
    relative = _launch(server, tmp_path, "--data-dir", "relative-data")
    _ready(relative)
    assert (tmp_path / "relative-data").is_dir()
    relative.terminate()
    assert relative.wait(15) == 0


def test_a_fork_server_that_died_is_started_again(server, tmp_path):
    _launch(server, tmp_path / "a").kill()
    assert server._server is not None
    server._server.kill()
    server._server.wait()
    process = _launch(server, tmp_path / "b")
    _ready(process)
    process.terminate()
    assert process.wait(15) == 0
