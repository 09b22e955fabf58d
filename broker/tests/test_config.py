"""Broker configuration from Kafka's property names, and the ``trafka`` command reading a real
server.properties file."""
from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from trafka.broker.config import BrokerConfig, ConfigError, merge_overrides, parse_properties, properties_not_acted_on
from trafka.broker.server import Server
from trafka.storage.config import LogConfig
from trafka.storage.config_defs import BROKER_CONFIG_DEFS

ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(r"^trafka ready: bootstrap=(\S+):(\d+) node_id=(\d+) data_dir=(.*)$")


def test_properties_syntax_as_java_reads_it():
    text = """
    # a comment
    ! another comment
    listeners=PLAINTEXT://0.0.0.0:9093
    log.dirs : /var/lib/trafka
    num.partitions 3
    advertised.listeners=PLAINTEXT://kafka.local:19093,\\
        EXTERNAL://other:9094
    empty.value=
    """
    props = parse_properties(text)
    assert props["listeners"] == "PLAINTEXT://0.0.0.0:9093"
    assert props["log.dirs"] == "/var/lib/trafka"
    assert props["num.partitions"] == "3"
    assert props["advertised.listeners"] == "PLAINTEXT://kafka.local:19093,EXTERNAL://other:9094"
    assert props["empty.value"] == ""


def test_kafka_property_names_configure_the_broker():
    config = BrokerConfig.from_properties(
        {
            "broker.id": "7",
            "listeners": "PLAINTEXT://0.0.0.0:9093",
            "advertised.listeners": "PLAINTEXT://kafka.local:19093",
            "log.dirs": "/data/a,/data/b",
            "num.partitions": "4",
            "auto.create.topics.enable": "false",
            "socket.request.max.bytes": "1048576",
        }
    )
    assert config.node_id == 7
    assert (config.host, config.port) == ("0.0.0.0", 9093)
    assert config.advertised_address == ("kafka.local", 19093)
    assert config.data_dir == Path("/data/a")
    assert config.num_partitions == 4
    assert config.auto_create_topics_enable is False
    assert config.socket_request_max_bytes == 1048576


def test_node_id_wins_over_broker_id_and_wildcard_listeners_advertise_loopback():
    config = BrokerConfig.from_properties({"node.id": "2", "broker.id": "9", "listeners": "PLAINTEXT://:9092"})
    assert config.node_id == 2
    assert config.advertised_address == ("127.0.0.1", 9092)


def test_broker_log_properties_become_topic_defaults():
    log_config = LogConfig.from_broker_properties(
        {"log.segment.bytes": "1048576", "log.retention.hours": "1", "message.max.bytes": "2000"}
    )
    assert log_config.segment_bytes == 1048576
    assert log_config.retention_ms == 3_600_000
    assert log_config.max_message_bytes == 2000


@pytest.mark.parametrize(
    "props, message",
    [
        ({"num.partitions": "many"}, "num.partitions"),
        ({"num.partitions": "0"}, "num.partitions"),
        ({"auto.create.topics.enable": "yes"}, "auto.create.topics.enable"),
        ({"listeners": "PLAINTEXT://host"}, "listeners"),
        ({"listeners": "PLAINTEXT://host:http"}, "listeners"),
        ({"offsets.topic.segment.bytes": "0"}, "offsets.topic.segment.bytes=0: must be at least 1"),
        ({"offsets.load.buffer.size": "-1"}, "offsets.load.buffer.size=-1: must be at least 1"),
        ({"offsets.topic.compression.codec": "5"}, "offsets.topic.compression.codec=5: expected a codec id"),
        ({"transaction.state.log.load.buffer.size": "0"}, "transaction.state.log.load.buffer.size=0"),
        ({"fetch.max.bytes": "-1"}, "fetch.max.bytes=-1: must not be negative"),
        ({"metrics.port": "65536"}, "metrics.port=65536: a port is 0-65535"),
        ({"group.consumer.migration.policy": "Sideways"}, ("group.consumer.migration.policy='Sideways': expected "
                                                           "one of bidirectional, upgrade, downgrade, disabled")),
        ({"delete.topic.enable": "yes"}, "delete.topic.enable='yes': expected true or false"),
        ({"replica.fetch.backoff.ms": "soon"}, "replica.fetch.backoff.ms='soon': expected an integer"),
        ({"group.max.size": "0"}, "group.max.size=0: must be at least 1"),
        ({"offsets.commit.timeout.ms": "soon"}, "offsets.commit.timeout.ms='soon': expected an integer"),
        ({"max.request.partition.size.limit": "0"}, "max.request.partition.size.limit=0: must be at least 1"),
    ],
)
def test_bad_properties_name_the_property(props, message):
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.from_properties(props)


@pytest.mark.parametrize(
    "props, message",
    [
        ({"listeners": "CLIENT://:9092"}, "listener CLIENT has no security protocol"),
        ({"listeners": "CLIENT://:9092", "listener.security.protocol.map": "CLIENT:KERBEROS"},
         "listener.security.protocol.map='CLIENT:KERBEROS': expected NAME:PROTOCOL entries"),
        ({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"}, "each listener needs a name of its own"),
        ({"inter.broker.listener.name": "ELSEWHERE"}, "inter.broker.listener.name=ELSEWHERE: not one of the listeners"),
        ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
         "both set: set one"),
        ({"listeners": "INTERNAL://:9093", "listener.security.protocol.map": "INTERNAL:PLAINTEXT",
          "zookeeper.connect": "127.0.0.1:2181", "broker.id": "1"},
         "security.inter.broker.protocol=PLAINTEXT: no listener named PLAINTEXT"),
        ({"listeners": "PLAINTEXT://:70000"}, "port 70000 is outside 0-65535"),
        ({"listeners": "PLAINTEXT://:-1"}, "port -1 is outside 0-65535"),
        ({"listeners": "PLAINTEXT://:9092", "listener.security.protocol.map": "PLAINTEXT"},
         "listener.security.protocol.map"),
    ],
)
def test_listeners_trafka_cannot_serve_stop_the_start(props, message):
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.from_properties(props)


def test_several_listeners_each_with_its_protocol_and_advertised_address():
    config = BrokerConfig.from_properties({
        "listeners": "CLIENTS://0.0.0.0:9092,INTERNAL://127.0.0.1:9093",
        "listener.security.protocol.map": "CLIENTS:PLAINTEXT,INTERNAL:PLAINTEXT",
        "advertised.listeners": "CLIENTS://kafka.example:19092,INTERNAL://10.0.0.5:9093",
        "inter.broker.listener.name": "INTERNAL",
    })
    assert [(served.name, served.security_protocol, served.host, served.port, served.advertised_address)
            for served in config.listeners] == [
        ("CLIENTS", "PLAINTEXT", "0.0.0.0", 9092, ("kafka.example", 19092)),
        ("INTERNAL", "PLAINTEXT", "127.0.0.1", 9093, ("10.0.0.5", 9093)),
    ]
    assert config.inter_broker_listener.advertised_address == ("10.0.0.5", 9093)
    assert (config.host, config.port, config.advertised_address) == ("0.0.0.0", 9092, ("kafka.example", 19092))
    # A single node without a PLAINTEXT listener talks to no other broker: its first listener stands in.
    alone = BrokerConfig.from_properties({"listeners": "INTERNAL://:9093",
                                          "listener.security.protocol.map": "INTERNAL:PLAINTEXT"})
    assert alone.inter_broker_listener_name == "INTERNAL"


@pytest.mark.parametrize(
    "props, message",
    [
        ({"zookeeper.connect": "127.0.0.1:2181/kafka"}, "each broker of a cluster needs its own broker.id"),
        ({"process.roles": "broker"}, "trafka runs as one node that is both broker and controller"),
        ({"process.roles": "controller"}, "trafka runs as one node that is both broker and controller"),
        ({"controller.quorum.voters": "1@a:9093,2@b:9093,3@c:9093"}, "names 3 controllers"),
    ],
)
def test_settings_of_a_cluster_trafka_cannot_serve_stop_the_start(props, message):
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.from_properties(props)


def test_a_kraft_configuration_serves_its_client_listener():
    config = BrokerConfig.from_properties({
        "process.roles": "broker,controller",
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "advertised.listeners": "PLAINTEXT://kafka.local:19092",
    })
    assert (config.host, config.port) == ("127.0.0.1", 9092)
    assert config.advertised_address == ("kafka.local", 19092)


def test_the_advertised_address_is_the_served_listeners():
    config = BrokerConfig.from_properties({
        "listeners": "INTERNAL://0.0.0.0:9092",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SSL",
        "advertised.listeners": "EXTERNAL://public:443,INTERNAL://kafka.local:19092",
    })
    assert config.advertised_address == ("kafka.local", 19092)


def test_overrides_need_key_and_value():
    assert merge_overrides({"a": "1"}, ["a=2", "b = 3"]) == {"a": "2", "b": "3"}
    with pytest.raises(ConfigError, match="key=value"):
        merge_overrides({}, ["novalue"])


def test_trafka_reads_server_properties_and_stops_cleanly_on_sigterm(tmp_path: Path):
    data_dir = tmp_path / "data"
    properties = tmp_path / "server.properties"
    properties.write_text(
        f"node.id=5\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs={data_dir}\nnum.partitions=3\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "trafka", "--config", str(properties)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = process.stdout.readline()
        match = READY.match(line.strip())
        assert match, f"no ready line: {line!r}\n{process.stderr.read() if process.poll() is not None else ''}"
        host, port, node_id, reported_dir = match.groups()
        assert host == "127.0.0.1" and int(port) > 0
        assert node_id == "5"
        assert Path(reported_dir) == data_dir
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert (data_dir / "meta.properties").exists()
    assert (data_dir / ".kafka_cleanshutdown").exists()


def test_trafka_refuses_a_bad_property_with_a_clear_message(tmp_path: Path):
    result = subprocess.run(
        [sys.executable, "-m", "trafka", "--data-dir", str(tmp_path), "--override", "num.partitions=zero"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "num.partitions" in result.stderr


def test_ephemeral_data_dir_is_removed_at_exit_after_sigint():
    process = subprocess.Popen(
        [sys.executable, "-m", "trafka", "--port", "0", "--ephemeral"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        match = READY.match(process.stdout.readline().strip())
        assert match
        data_dir = Path(match.group(4))
        assert data_dir.is_dir()
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert not data_dir.exists()


def test_a_bad_broker_level_setting_or_a_busy_port_is_one_clear_line(tmp_path: Path):
    bad_default = subprocess.run(
        [sys.executable, "-m", "trafka", "--port", "0", "--data-dir", str(tmp_path / "a"),
         "--override", "log.segment.bytes=huge"],
        cwd=ROOT, capture_output=True, text=True, timeout=30,
    )
    assert bad_default.returncode == 2
    assert bad_default.stderr.strip().splitlines()[-1] == (
        "trafka: Invalid value huge for configuration log.segment.bytes: Not a number of type INT")
    assert "Traceback" not in bad_default.stderr

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        in_use = subprocess.run(
            [sys.executable, "-m", "trafka", "--port", str(port), "--data-dir", str(tmp_path / "b")],
            cwd=ROOT, capture_output=True, text=True, timeout=30,
        )
    assert in_use.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in in_use.stderr
    assert "Traceback" not in in_use.stderr


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--override", "listeners=SASL_PLAINTEXT://127.0.0.1:0"],
         "listener SASL_PLAINTEXT: sasl.enabled.mechanisms=GSSAPI: GSSAPI is not served"),
        (["--port", "70000"], "--port 70000: a port is 0-65535"),
        (["--ephemeral"], "--ephemeral keeps the data in a temporary directory: it cannot be given with --data-dir"),
        (["--port", "-1"], "--port -1: a port is 0-65535"),
        (["--control-port", "65536"], "--control-port 65536: a port is 0-65535"),
    ],
)
def test_trafka_refuses_to_start_with_one_line_for_what_it_cannot_serve(tmp_path: Path, arguments, message):
    result = subprocess.run(
        [sys.executable, "-m", "trafka", "--data-dir", str(tmp_path / "data"), *arguments],
        cwd=ROOT, capture_output=True, text=True, timeout=30,
    )
    assert result.returncode == 2, result
    assert result.stdout == ""
    assert result.stderr.startswith("trafka: ") and message in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr


def test_a_second_broker_on_a_data_directory_in_use_says_so_in_one_line(tmp_path: Path):
    data_dir = tmp_path / "data"
    first = subprocess.Popen([sys.executable, "-m", "trafka", "--port", "0", "--data-dir", str(data_dir),
                              "--log-level", "warning"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    try:
        assert READY.match(first.stdout.readline().strip())
        second = subprocess.run([sys.executable, "-m", "trafka", "--port", "0", "--data-dir", str(data_dir)],
                                cwd=ROOT, capture_output=True, text=True, timeout=30)
        assert second.returncode == 1, second
        assert second.stderr == f"trafka: data directory {data_dir} is in use by another broker (cannot lock .lock)\n"
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=15)


def test_version():
    result = subprocess.run([sys.executable, "-m", "trafka", "--version"], cwd=ROOT, capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 0 and re.fullmatch(r"trafka \S+\n", result.stdout), result


def test_properties_the_broker_does_not_act_on_are_named_in_a_warning(caplog):
    BrokerConfig.from_properties({"num.io.threads": "8", "log.retention.hours": "1", "no.such.thing": "x",
                                  "group.max.size": "5"})
    assert "trafka does not act on these properties: no.such.thing, num.io.threads" in caplog.text


def test_every_property_the_broker_reads_counts_as_acted_on():
    read = set()
    for path in (ROOT / "broker").rglob("*.py"):
        # (the tools and the testing API read client properties, not the broker's)
        if not {"tests", "tools", "testing"} & set(path.parts):
            text = path.read_text()
            read |= set(re.findall(r'(?:properties|props)\.get\(\s*"([a-z][a-z0-9.]+)"', text))
            read |= set(re.findall(r'_(?:int|bool)\(props, "([a-z][a-z0-9.]+)"', text))
    assert len(read) > 10
    assert properties_not_acted_on(dict.fromkeys(read, "")) == []


def test_the_settings_held_in_a_broker_config_have_the_catalogs_defaults():
    config, single = BrokerConfig.from_properties({}), BrokerConfig()
    clustered = BrokerConfig.from_properties({"zookeeper.connect": "127.0.0.1:2181", "broker.id": "1"})

    for definition in BROKER_CONFIG_DEFS.values():
        if definition.field is not None:
            assert getattr(config, definition.field) == getattr(single, definition.field) == definition.default
            if definition.name in clustered.properties:
                continue
            expected = definition.default if definition.cluster_default is None else definition.cluster_default
            assert getattr(clustered, definition.field) == expected, definition.name
    assert (clustered.offsets_topic_replication_factor, clustered.transaction_state_log_min_isr) == (3, 2)


def test_settings_read_elsewhere_have_the_catalogs_defaults():
    """The parts of the broker that read their settings from the properties keep their own defaults: the
    catalog's."""
    from trafka.broker.log_cleaner import DEFAULT_BACKOFF_MS
    from trafka.storage import cleaner

    readers = {
        "log.cleaner.backoff.ms": DEFAULT_BACKOFF_MS,
        "log.cleaner.dedupe.buffer.size": cleaner.DEFAULT_DEDUPE_BUFFER_SIZE,
        "log.cleaner.io.buffer.size": cleaner.DEFAULT_IO_BUFFER_SIZE,
        "log.cleaner.io.buffer.load.factor": cleaner.DEFAULT_IO_BUFFER_LOAD_FACTOR,
    }
    assert {name: BROKER_CONFIG_DEFS[name].default for name in readers} == readers


def test_every_property_in_the_catalog_counts_as_acted_on():
    assert properties_not_acted_on(dict.fromkeys(BROKER_CONFIG_DEFS, "")) == []
    assert properties_not_acted_on({"num.io.threads": "8", "log.retention.minutes": "5"}) == ["num.io.threads"]


async def test_an_ssl_listener_without_a_key_store_stops_the_start(tmp_path: Path):
    config = BrokerConfig.from_properties({"listeners": "SSL://127.0.0.1:0", "log.dirs": str(tmp_path / "data")})
    with pytest.raises(ConfigError, match="listener SSL: .*ssl.keystore"):
        await Server(config).run()


async def test_the_config_a_server_is_given_stays_as_it_was(tmp_path: Path):
    config = BrokerConfig(control_port=0, data_dir=tmp_path / "data")
    config.port = 0
    server = Server(config)
    async with trio.open_nursery() as nursery:
        addresses = await nursery.start(server.run)
        bound = addresses[0][1]
        try:
            assert (config.port, config.control_port) == (0, 0)
            assert server.config.port == server.broker.config.port == bound != 0
            assert server.config.control_port not in (None, 0)
            assert server.config.advertised_address == ("127.0.0.1", bound)
        finally:
            server.request_shutdown()
