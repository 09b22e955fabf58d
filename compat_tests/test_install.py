"""trafka as a user's project gets it: the wheel built from this checkout, installed into a fresh virtual
environment, puts one import package into site-packages, ``trafka``; and the README's example tests pass
in a project that has ``broker``, ``storage`` and ``wire`` packages of its own, under ``pytest`` and
``python -m pytest`` alike, while the project's tests get the project's own packages. ``trafka cluster``
of the installed trafka (far from the checkout's jars) finds Debian's ZooKeeper, fetches one from Maven
Central where there is none, and says so where there is no Java."""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import subprocess
import sys
import time
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


def start_cluster(command: list[str], cwd: Path, **env: str) -> tuple[str, str]:
    """Run ``trafka cluster`` (``command``) until its ready line, then stop it: (ready line, stderr)."""
    inherited = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    process = subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env={**inherited, **env})
    ready = ""
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            deadline = time.monotonic() + 120
            while not ready.startswith("trafka cluster ready:") and process.poll() is None:
                assert time.monotonic() < deadline, "no ready line within 120 s"
                if selector.select(timeout=1):
                    ready = process.stdout.readline()
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    return ready, stderr


def test_trafka_cluster_finds_debians_zookeeper(venv: Path, tmp_path: Path):
    assert Path("/usr/share/java/zookeeper.jar").is_file(), "Debian's zookeeper package (compat_tests/setup.sh)"
    cache = tmp_path / "cache"

    ready, stderr = start_cluster([str(venv / "bin" / "trafka"), "cluster", "--brokers", "1", "--port", "0"],
                                  tmp_path, XDG_CACHE_HOME=str(cache))

    assert ready.startswith("trafka cluster ready: bootstrap=127.0.0.1:"), stderr
    assert "fetching" not in stderr and not cache.exists(), stderr


def test_trafka_cluster_fetches_zookeeper_where_there_is_none(venv: Path, tmp_path: Path):
    # Debian's package out of sight: an empty /usr/share/java in a mount namespace of the command's own.
    hide_debians = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                    'mount -t tmpfs tmpfs /usr/share/java && exec "$@"', "sh"]
    cache = tmp_path / "cache"

    ready, stderr = start_cluster([*hide_debians, str(venv / "bin" / "trafka"), "cluster", "--brokers", "1",
                                   "--port", "0"], tmp_path, XDG_CACHE_HOME=str(cache))

    assert ready.startswith("trafka cluster ready: bootstrap=127.0.0.1:"), stderr
    fetched = cache / "trafka" / "zookeeper-3.9.5"
    assert f"fetching Apache ZooKeeper 3.9.5 from Maven Central into {fetched} (15 jars)" in stderr, stderr
    assert len(list(fetched.glob("*.jar"))) == 15 and not list(fetched.glob("*.part"))


def test_trafka_cluster_asks_before_fetching_on_a_terminal(venv: Path, tmp_path: Path):
    # On a terminal (script(1) gives the command one), "n" to the question: nothing is fetched.
    hidden = ("unshare --mount --propagation private sh -c 'mount -t tmpfs tmpfs /usr/share/java && exec \"$@\"' "
              f"sh {venv / 'bin' / 'trafka'} cluster --brokers 1 --port 0")
    cache = tmp_path / "cache"

    result = subprocess.run(["script", "--quiet", "--return", "--command", hidden, "/dev/null"], input="n\n",
                            capture_output=True, text=True, timeout=120, env={**os.environ, "XDG_CACHE_HOME": str(cache)})

    assert result.returncode == 1, result
    assert "No Apache ZooKeeper installation found. Fetch ZooKeeper 3.9.5 (about 7 MB) from Maven Central" in result.stdout
    assert "trafka cluster: no Apache ZooKeeper installation found" in result.stdout
    assert not list(cache.rglob("*.jar"))


def test_trafka_cluster_without_java_says_so(venv: Path, tmp_path: Path):
    result = run([str(venv / "bin" / "trafka"), "cluster", "--brokers", "1", "--port", "0"], tmp_path,
                 PATH=str(venv / "bin"), XDG_CACHE_HOME=str(tmp_path / "cache"))

    assert result.returncode == 1, result
    assert result.stderr.startswith("trafka cluster: java is not installed: Apache ZooKeeper runs on a JVM"), result
