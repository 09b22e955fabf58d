"""Where a local ZooKeeper is looked for, in order (the real installations are tried by
compat_tests/test_install.py: Debian's package, a fetch from Maven Central)."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from trafka.broker.tools import zookeeper_server
from trafka.broker.tools.zookeeper_server import FETCHED_JARS, ZooKeeperNotFound, find_classpath, find_or_fetch


def jars(directory: Path, *names: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).write_bytes(b"")
    return directory


@pytest.fixture
def nothing_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("TRAFKA_ZOOKEEPER_CLASSPATH", "ZOOKEEPER_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PATH", str(jars(tmp_path / "path")))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(zookeeper_server, "_SOURCE_CHECKOUT_JARS", tmp_path / "checkout")
    monkeypatch.setattr(zookeeper_server, "DEBIAN_JAR", tmp_path / "debian" / "zookeeper.jar")
    return tmp_path


def test_each_place_in_order(nothing_installed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = nothing_installed
    with pytest.raises(ZooKeeperNotFound, match="no Apache ZooKeeper installation found"):
        find_classpath()
    cache = zookeeper_server.cache_dir()
    jars(cache, *(f"{artifact}-{version}.jar" for _, artifact, version, _ in FETCHED_JARS))
    assert find_classpath() == f"{cache}/*"
    jars(root / "debian", "zookeeper.jar")
    assert find_classpath() == str(root / "debian" / "zookeeper.jar")
    release = root / "apache-zookeeper-3.9.5-bin"
    jars(release / "lib", "zookeeper-3.9.5.jar")
    (jars(release / "bin") / "zkServer.sh").write_text("#!/bin/sh\n")
    (release / "bin" / "zkServer.sh").chmod(0o755)
    monkeypatch.setenv("PATH", str(release / "bin"))
    assert find_classpath() == f"{release / 'lib'}/*"
    jars(root / "checkout", "zookeeper-3.9.5.jar")
    assert find_classpath() == f"{root / 'checkout'}/*"
    home = root / "home"
    jars(home / "lib", "zookeeper-3.8.4.jar")
    monkeypatch.setenv("ZOOKEEPER_HOME", str(home))
    assert find_classpath() == f"{home / 'lib'}/*"
    monkeypatch.setenv("TRAFKA_ZOOKEEPER_CLASSPATH", "/opt/zk/a.jar:/opt/zk/b.jar")
    assert find_classpath() == "/opt/zk/a.jar:/opt/zk/b.jar"
    assert find_classpath(jars(root / "given", "zookeeper.jar")) == f"{root / 'given'}/*"


def test_a_partial_cache_is_not_an_installation(nothing_installed: Path) -> None:
    jars(zookeeper_server.cache_dir(), "zookeeper-3.9.5.jar")
    with pytest.raises(ZooKeeperNotFound):
        find_classpath()


def test_nothing_is_fetched_without_consent(nothing_installed: Path) -> None:
    asked = []

    with pytest.raises(ZooKeeperNotFound):
        find_or_fetch(consent=lambda question: asked.append(question) or False)

    assert asked == [f"No Apache ZooKeeper installation found. Fetch ZooKeeper 3.9.5 (about 7 MB) from Maven Central "
                     f"into {zookeeper_server.cache_dir()}?"]
    assert not zookeeper_server.cache_dir().exists()


def test_the_fetched_jars_are_those_the_cluster_tests_run() -> None:
    # compat_tests/setup.sh resolves them with Maven from compat_tests/zookeeper/pom.xml.
    lib = Path(__file__).resolve().parents[2] / "compat_tests" / "zookeeper" / "lib"
    for _, artifact, version, sha256 in FETCHED_JARS:
        jar = lib / f"{artifact}-{version}.jar"
        assert jar.is_file(), f"{jar} (compat_tests/setup.sh)"
        assert hashlib.sha256(jar.read_bytes()).hexdigest() == sha256, jar
