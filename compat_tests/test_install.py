"""trafka as a user's project gets it: the wheel built from this checkout, installed into a fresh virtual
environment, puts one import package into site-packages, ``trafka``; and the README's example tests pass
in a project that has ``broker``, ``storage`` and ``wire`` packages of its own, under ``pytest`` and
``python -m pytest`` alike, while the project's tests get the project's own packages."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compat_tests.harness import SOURCE_ROOT
from compat_tests.test_pytest_plugin import readme_example

EXAMPLES = {"test_example.py": "the example test", "test_fault_example.py": "the fault example",
            "test_cluster_example.py": "the cluster example"}
#: What the examples import besides trafka's fixtures, installed into the fresh environment beside the wheel.
EXAMPLE_CLIENTS = ("pytest", "confluent-kafka", "kafka-python")
#: trafka's layers; the user's project has packages of the same names.
LAYERS = ("wire", "storage", "broker")

# The project's own test: each of its packages is its own, trafka's plugin and broker beside them.
OWN_PACKAGES_TEST = '''
import broker.orders
import storage.orders
import wire.orders


def test_my_packages_are_mine(trafka):
    for module in (broker.orders, storage.orders, wire.orders):
        assert module.OWNER == "the project", module.__file__
    assert trafka.running
'''


def run(command: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``command`` in ``cwd``, with nothing of this checkout on its path."""
    inherited = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600, env={**inherited, **env})


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment (no system site-packages) with the wheel of this checkout installed."""
    root = tmp_path_factory.mktemp("install")
    # The wheel is built from a copy of what the distribution is made of: nothing an earlier build or
    # editable install left in the checkout (build/, egg-info) goes into it.
    source = root / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(SOURCE_ROOT / name, source / name)
    for layer in LAYERS:
        shutil.copytree(SOURCE_ROOT / layer, source / layer, ignore=shutil.ignore_patterns("__pycache__"))
    built = run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(root / "dist"),
                 str(source)], root)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (root / "dist").glob("trafka-*.whl")
    created = run([sys.executable, "-m", "venv", str(root / "venv")], root)
    assert created.returncode == 0, created.stderr
    python = root / "venv" / "bin" / "python"
    installed = run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(wheel),
                     *EXAMPLE_CLIENTS], root)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return root / "venv"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's project: packages named like trafka's layers, the README's examples and a test of its own."""
    for name in LAYERS:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
        (tmp_path / name / "orders.py").write_text('OWNER = "the project"\n')
    for file_name, marker in EXAMPLES.items():
        (tmp_path / file_name).write_text(readme_example(marker))
    (tmp_path / "test_own_packages.py").write_text(OWN_PACKAGES_TEST)
    return tmp_path


def site_packages(venv: Path) -> Path:
    python = venv / "bin" / "python"
    return Path(subprocess.check_output([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                        text=True).strip())


def test_the_wheel_installs_one_import_package(venv: Path):
    installed = site_packages(venv)
    (dist_info,) = installed.glob("trafka-*.dist-info")
    paths = [line.rsplit(",", 2)[0] for line in (dist_info / "RECORD").read_text().splitlines()]
    top_level = {path.split("/", 1)[0] for path in paths if not path.startswith("..")}
    assert top_level == {"trafka", dist_info.name}
    assert not any("/tests/" in path for path in paths)
    assert (installed / "trafka" / "__main__.py").exists()


@pytest.mark.parametrize("pytest_command", [["bin/pytest"], ["bin/python", "-m", "pytest"]],
                         ids=["pytest", "python -m pytest"])
def test_the_readme_examples_pass_beside_a_projects_own_broker_storage_and_wire(
        venv: Path, project: Path, pytest_command: list[str]):
    command = [str(venv / pytest_command[0]), *pytest_command[1:], "-q", "-p", "no:cacheprovider"]
    # The cluster example's ZooKeeper comes from the jars compat_tests/setup.sh fetched.
    zookeeper_jars = SOURCE_ROOT / "compat_tests" / "zookeeper" / "lib"

    result = run(command, project, TRAFKA_ZOOKEEPER_CLASSPATH=f"{zookeeper_jars}/*")

    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(EXAMPLES) + 1} passed" in result.stdout, result.stdout


def test_the_command_runs_from_a_projects_directory(venv: Path, project: Path):
    for command in ([str(venv / "bin" / "trafka"), "--version"], [str(venv / "bin" / "python"), "-m", "trafka", "--version"]):
        result = run(command, project)
        assert result.returncode == 0 and result.stdout.startswith("trafka "), result
