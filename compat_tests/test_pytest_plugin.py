"""trafka's pytest plugin as its users meet it: the README's example test, run as it stands in the README
by a pytest of its own, in a fresh directory; and ``TrafkaBroker`` as a context manager."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from trafka.broker.testing import BrokerError, TrafkaBroker

ROOT = Path(__file__).resolve().parent.parent


def readme_example(marker: str) -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme.split(f"<!-- {marker}:", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL)[1]


@pytest.mark.parametrize("marker", ["the example test", "the fault example", "the cluster example"])
def test_the_readme_example_tests_pass(tmp_path: Path, marker: str):
    (tmp_path / "test_example.py").write_text(readme_example(marker))

    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_example.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )

    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout, result.stdout


def test_a_broker_as_a_context_manager(tmp_path: Path):
    with TrafkaBroker(properties={"num.partitions": 2}) as broker:
        first_port = broker.port
        assert broker.create_topic("made", partitions=3) == "made"
        try:
            broker.create_topic("made")
        except BrokerError as refused:
            assert "TOPIC_ALREADY_EXISTS" in str(refused)
        else:
            raise AssertionError("a second topic of the same name was created")
        broker.restart()
        assert broker.running and broker.port == first_port
        data_dir = broker.data_dir
        assert (data_dir / "made-2").is_dir()
    assert not broker.running and not data_dir.exists()


def test_each_xdist_worker_gets_a_broker_of_its_own(tmp_path: Path):
    (tmp_path / "test_workers.py").write_text(
        "import os\n"
        "import pytest\n"
        "\n"
        "@pytest.mark.parametrize('n', range(4))\n"
        "def test_port(trafka, trafka_topic, n):\n"
        "    trafka_topic()\n"
        "    with open(os.environ['PORTS_FILE'], 'a') as f:\n"
        "        f.write(f\"{os.environ['PYTEST_XDIST_WORKER']} {trafka.port}\\n\")\n"
    )
    ports_file = tmp_path / "ports"

    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "test_workers.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=180,
        env={**os.environ, "PORTS_FILE": str(ports_file)},
    )

    assert result.returncode == 0, result.stdout + result.stderr
    port_of = {}
    for line in ports_file.read_text().splitlines():
        worker, port = line.split()
        assert port_of.setdefault(worker, port) == port  # one broker for all of a worker's tests
    assert len(set(port_of.values())) == len(port_of) == 2, port_of
