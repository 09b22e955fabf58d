"""The ZooKeeper the cluster tests coordinate through: a real Apache ZooKeeper process, driven with kazoo
(the client trafka's brokers use), that serves sessions, ephemeral and sequential nodes, and keeps its
data across a clean restart and a SIGKILL."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import WatchedEvent

import compat_tests.zookeeper as zookeeper_harness
from compat_tests.harness import wait_until
from compat_tests.zookeeper import ZooKeeperServer, ZooKeeperStartError, ZooKeeperUnavailable

pytestmark = pytest.mark.timeout(60)

#: Reconnect quickly while a test restarts the server, instead of kazoo's exponential back-off.
FAST_RECONNECT = {"max_tries": -1, "delay": 0.1, "backoff": 1.5, "max_delay": 0.5}
SESSION_TIMEOUT = 10.0


@pytest.fixture
def connect() -> Iterator[Callable[[ZooKeeperServer], KazooClient]]:
    """``connect(server)``: a started kazoo client of `server`, stopped and closed at teardown."""
    clients: list[KazooClient] = []

    def make(server: ZooKeeperServer) -> KazooClient:
        client = KazooClient(hosts=server.connect_string, timeout=SESSION_TIMEOUT, connection_retry=FAST_RECONNECT)
        client.start(timeout=10)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.stop()
        client.close()


@pytest.fixture
def private_zookeeper(tmp_path: Path) -> Iterator[ZooKeeperServer]:
    """A ZooKeeper of this test alone, for the tests that stop, kill and restart it."""
    server = ZooKeeperServer(tmp_path / "data", name="private-zookeeper")
    server.start()
    yield server
    server.close()


def test_answers_four_letter_words_on_loopback(zookeeper: ZooKeeperServer) -> None:
    host, port = zookeeper.connect_string.split(":")
    assert host == "127.0.0.1" and int(port) == zookeeper.port > 0
    assert zookeeper.four_letter_word("ruok") == "imok"
    status = zookeeper.four_letter_word("srvr")
    assert "Zookeeper version: 3.9.5" in status and "Mode: standalone" in status


def test_kazoo_writes_and_reads_a_node(zookeeper: ZooKeeperServer, connect) -> None:
    client = connect(zookeeper)
    client.create("/trafka-test/brokers/ids/1", b'{"port": 9092}', makepath=True)
    data, stat = client.get("/trafka-test/brokers/ids/1")
    assert data == b'{"port": 9092}' and stat.version == 0
    client.set("/trafka-test/brokers/ids/1", b'{"port": 9093}', version=0)
    assert client.get("/trafka-test/brokers/ids/1")[1].version == 1
    assert client.get_children("/trafka-test/brokers/ids") == ["1"]


def test_sequential_nodes_are_numbered_in_creation_order(zookeeper: ZooKeeperServer, connect) -> None:
    client = connect(zookeeper)
    client.ensure_path("/trafka-test/sequence")
    paths = [client.create("/trafka-test/sequence/entry-", b"", sequence=True) for _ in range(3)]
    numbers = [int(path.rsplit("-", 1)[1]) for path in paths]
    assert all(len(path.rsplit("-", 1)[1]) == 10 for path in paths)
    assert numbers == sorted(numbers) and len(set(numbers)) == 3
    assert sorted(client.get_children("/trafka-test/sequence")) == [p.rsplit("/", 1)[1] for p in paths]


def test_an_ephemeral_node_goes_away_with_its_session(zookeeper: ZooKeeperServer, connect) -> None:
    owner, observer = connect(zookeeper), connect(zookeeper)
    owner.create("/trafka-test/controller", b"owner", ephemeral=True, makepath=True)
    assert observer.get("/trafka-test/controller")[1].ephemeralOwner == owner.client_id[0]

    deleted = threading.Event()

    def watch(event: WatchedEvent) -> None:
        if event.type == "DELETED":
            deleted.set()

    assert observer.exists("/trafka-test/controller", watch=watch) is not None
    owner.stop()
    assert deleted.wait(10), "the observer saw no deletion of the ephemeral node"
    assert observer.exists("/trafka-test/controller") is None
    # Another session may now take the name.
    observer.create("/trafka-test/controller", b"observer", ephemeral=True)


def test_a_restart_keeps_data_port_and_sessions(private_zookeeper: ZooKeeperServer, connect) -> None:
    server = private_zookeeper
    client = connect(server)
    client.create("/trafka-test/cluster/id", b"cluster-1", makepath=True)
    client.create("/trafka-test/broker", b"1", ephemeral=True)
    session_id, port = client.client_id[0], server.port

    server.restart()

    assert server.port == port and server.four_letter_word("ruok") == "imok"
    assert connect(server).get("/trafka-test/cluster/id")[0] == b"cluster-1"
    # The client reconnects by itself and finds its session, and the session's ephemeral node, alive.
    wait_until(lambda: client.connected, timeout=SESSION_TIMEOUT, message="kazoo to reconnect")
    assert client.client_id[0] == session_id
    assert client.exists("/trafka-test/broker").ephemeralOwner == session_id


def test_a_killed_server_restarts_with_every_acknowledged_write(private_zookeeper: ZooKeeperServer,
                                                                 connect) -> None:
    server = private_zookeeper
    client = connect(server)
    client.ensure_path("/trafka-test/log")
    written = [client.create("/trafka-test/log/entry-", str(i).encode(), sequence=True) for i in range(20)]
    pid = server.pid

    server.kill()
    assert not server.running
    server.restart()

    assert server.pid != pid
    reader = connect(server)
    assert sorted(reader.get_children("/trafka-test/log")) == [p.rsplit("/", 1)[1] for p in written]
    assert [reader.get(p)[0] for p in written] == [str(i).encode() for i in range(20)]
    # The parent's sequence counter survived too: new entries are numbered after the old ones.
    after = reader.create("/trafka-test/log/entry-", b"", sequence=True)
    assert after > written[-1]


def test_a_crash_restart_is_one_call(private_zookeeper: ZooKeeperServer, connect) -> None:
    server = private_zookeeper
    connect(server).create("/trafka-test/kept", b"yes", makepath=True)
    server.restart(crash=True)
    assert connect(server).get("/trafka-test/kept")[0] == b"yes"


def test_a_restart_whose_port_is_taken_says_so(private_zookeeper: ZooKeeperServer,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    server = private_zookeeper
    server.stop()
    monkeypatch.setattr(zookeeper_harness, "PORT_TIMEOUT", 0.3)
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past the probes' TIME_WAIT
        squatter.bind((server.host, server.port))
        squatter.listen()
        with pytest.raises(ZooKeeperStartError, match=f"another socket holds {server.connect_string}"):
            server.start()
    assert server.start().four_letter_word("ruok") == "imok"


def test_missing_jars_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zookeeper_harness, "LIB", tmp_path / "lib")
    server = ZooKeeperServer(tmp_path / "data", name="no-jars")
    with pytest.raises(ZooKeeperUnavailable, match=r"ZooKeeper's jars are not in .*lib: run compat_tests/setup.sh"):
        server.start()
    assert not server.running


def test_missing_java_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    server = ZooKeeperServer(tmp_path / "data", name="no-java")
    with pytest.raises(ZooKeeperUnavailable, match="java is not installed"):
        server.start()
    assert not server.running
