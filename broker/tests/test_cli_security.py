"""The command line's security choices without a broker: the tools' common options taken from anywhere, and
``trafka --secure``'s users, listener and JAAS settings (broker.tools.secure_dev)."""
from __future__ import annotations

from pathlib import Path

import pytest

from trafka.broker.security.jaas import parse_jaas_config
from trafka.broker.tools.cli import _common_options
from trafka.broker.tools.secure_dev import SecureDev, SecureSetupError, listener_properties, parse_users


def test_the_tools_common_options_are_taken_from_anywhere():
    assert _common_options(["list", "--command-config", "c.properties", "--bootstrap-server=h:1", "x"]) == (
        ["--command-config", "c.properties", "--bootstrap-server", "h:1"], ["list", "x"])


def test_secure_users_and_listener():
    assert parse_users(["alice:pa:ss", "bob@corp:x"]) == {"alice": "pa:ss", "bob@corp": "x"}
    for bad, message in ((["alice"], "expected NAME:PASSWORD"), (["alice:"], "expected NAME:PASSWORD"),
                         (["a:1", "a:2"], "given twice"), (["../x:y"], "it names the user's files")):
        with pytest.raises(SecureSetupError, match=message):
            parse_users(bad)
    assert listener_properties({}, "127.0.0.1", 9092) == {"listeners": "SASL_SSL://127.0.0.1:9092"}
    with pytest.raises(SecureSetupError, match="leave out listeners, zookeeper.connect"):
        listener_properties({"listeners": "PLAINTEXT://:9092", "zookeeper.connect": "zk:2181"}, "127.0.0.1", 9092)


def test_secure_listener_settings_and_plain_users(tmp_path: Path):
    secure = SecureDev(tmp_path, tmp_path / "ca-cert.pem", tmp_path / "broker-keystore.pem",
                       {"alice": 'se"cret', "bob@corp": "x"})
    props = secure.broker_properties()
    assert props["listener.name.sasl_ssl.sasl.enabled.mechanisms"] == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    jaas = parse_jaas_config(props["listener.name.sasl_ssl.plain.sasl.jaas.config"])
    assert dict(jaas.options) == {"user_alice": 'se"cret'}  # bob@corp is no JAAS word: SCRAM only
    only_scram = SecureDev(tmp_path, tmp_path / "ca.pem", tmp_path / "ks.pem", {"bob@corp": "x"})
    assert only_scram.broker_properties()["listener.name.sasl_ssl.sasl.enabled.mechanisms"] == (
        "SCRAM-SHA-256,SCRAM-SHA-512")
    java = secure.java_settings("alice", "127.0.0.1:9092", "PLAIN")
    assert java["sasl.jaas.config"] == ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                                        'username="alice" password="se\\"cret";')
