"""``trafka cluster`` as a developer runs it: one command, one ready line, a replicated cluster that real
clients use, and everything gone after Ctrl-C."""

from __future__ import annotations

import re
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from compat_tests.clients import ConfluentClient, Message
from compat_tests.harness import SOURCE_ROOT

READY = re.compile(r"^trafka cluster ready: bootstrap=(?P<bootstrap>\S+) zookeeper=(?P<zookeeper>\S+) "
                   r"data_dir=(?P<data_dir>.+)$")
START_TIMEOUT = 90.0


def _ready_line(process: subprocess.Popen[str]) -> re.Match[str]:
    deadline = time.monotonic() + START_TIMEOUT
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if selector.select(deadline - time.monotonic()):
                line = process.stdout.readline()
                if not line:
                    raise AssertionError(f"trafka cluster exited with {process.wait()}: {process.stderr.read()}")
                match = READY.match(line.rstrip("\n"))
                if match:
                    return match
    raise AssertionError(f"no ready line in {START_TIMEOUT} s")


def test_one_command_runs_a_replicated_cluster(tmp_path: Path):
    process = subprocess.Popen([sys.executable, "-m", "trafka", "cluster", "--brokers", "3", "--port", "0"],
                               cwd=SOURCE_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready = _ready_line(process)
        bootstrap = ready["bootstrap"]
        assert len(bootstrap.split(",")) == 3
        client = ConfluentClient(bootstrap)
        client.create_topic("replicated", 2, replication_factor=3)
        client.produce("replicated", [Message(value=b"%d" % i) for i in range(50)], acks="all")
        assert sorted(int(r.value) for r in client.consume("replicated", 50)) == list(range(50))
        data_dir = Path(ready["data_dir"])
        assert sorted(p.name for p in data_dir.iterdir() if p.name.startswith("broker")) == [
            "broker1", "broker2", "broker3"]
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(60)
    assert code == 0
    assert not data_dir.exists()  # a temporary directory, removed at exit
