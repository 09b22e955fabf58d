"""The tools' client security settings (broker.tools.client_security): Java's .properties as Java reads them,
Kafka's and librdkafka's names, and the refusals that name the setting; no broker needed."""
from __future__ import annotations

from pathlib import Path

import pytest

from trafka.broker.security.jaas import parse_jaas_config
from trafka.broker.tools.client_security import (
    ClientConfigError,
    ClientSecurity,
    escape_property,
    jaas_quote,
    parse_java_properties,
)


def test_java_properties_are_read_as_java_reads_them():
    text = ("# a comment\n! another\n"
            "a = b\nc:d\ne f\ng==h\n"
            "long=one\\\n    two\n"
            "k\\ ey=v\\tw\n"
            "unicode=caf\\u00e9 \\ud83d\\ude00\n"
            "   indented   =  spaced  \n"
            "empty=\n")
    assert parse_java_properties(text) == {
        "a": "b", "c": "d", "e": "f", "g": "=h", "long": "onetwo", "k ey": "v\tw", "unicode": "café 😀",
        "indented": "spaced  ", "empty": ""}


@pytest.mark.parametrize("password", ["simple", 'quo"te', "back\\slash", " leading space", "café 😀", "a=b:c#!"])
def test_a_password_survives_jaas_quoting_and_a_properties_file(password):
    jaas = f"org.apache.kafka.common.security.scram.ScramLoginModule required username=\"alice\" " \
           f"password={jaas_quote(password)};"
    text = f"sasl.jaas.config={escape_property(jaas)}\n"
    assert text.isascii()  # Java reads .properties files as ISO-8859-1
    read = parse_java_properties(text)["sasl.jaas.config"]
    assert read == jaas and parse_jaas_config(read).options["password"] == password


def test_client_settings_with_kafkas_names():
    security = ClientSecurity.from_properties({
        "security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
                            'password="alice-secret";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem", "bootstrap.servers": "h:1",
        "request.timeout.ms": "1000"})
    assert (security.protocol, security.mechanism, security.username, security.password) == (
        "SASL_SSL", "SCRAM-SHA-512", "alice", "alice-secret")
    assert security.uses_tls and security.uses_sasl and security.bootstrap_servers == "h:1"
    assert security.ssl_settings == {"ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem"}
    assert "alice-secret" not in repr(security)


def test_client_settings_with_librdkafkas_names(tmp_path: Path):
    (tmp_path / "cert.pem").write_text("CERT")
    (tmp_path / "key.pem").write_text("KEY")
    security = ClientSecurity.from_properties({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "bob", "sasl.password": "pw",
        "ssl.ca.location": "/ca.pem", "ssl.certificate.location": str(tmp_path / "cert.pem"),
        "ssl.key.location": str(tmp_path / "key.pem"), "ssl.endpoint.identification.algorithm": "none"})
    assert (security.username, security.password) == ("bob", "pw")
    assert security.ssl_settings == {
        "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem", "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": "CERT", "ssl.keystore.key": "KEY",
        "ssl.endpoint.identification.algorithm": ""}
    assert ClientSecurity.from_properties({}).protocol == "PLAINTEXT"


@pytest.mark.parametrize("props, message", [
    ({"security.protocol": "TLS"}, "security.protocol=TLS: expected one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ({"security.protocol": "SASL_SSL"},
     "needs sasl.mechanism: one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (GSSAPI"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "(GSSAPI, Kafka's default, is not spoken"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OTHER"},
     "sasl.mechanism=OTHER: trafka's tools speak PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "a"},
     'needs a user name and password: sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule'),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": "Broken"},
     "Invalid sasl.jaas.config"),
    ({"security.protocol": "SSL", "ssl.certificate.location": "/c.pem"},
     "ssl.certificate.location and ssl.key.location go together"),
])
def test_client_settings_refused_with_the_setting_named(props, message):
    with pytest.raises(ClientConfigError, match="^the client settings: .*") as refused:
        ClientSecurity.from_properties(props)
    assert message in str(refused.value)


def test_a_tls_setting_that_cannot_make_a_context_is_named():
    security = ClientSecurity.from_properties({"security.protocol": "SSL", "ssl.truststore.type": "JKS",
                                               "ssl.truststore.location": "/nowhere.jks"}, source="--command-config f")
    with pytest.raises(ClientConfigError, match="^--command-config f: .*ssl.truststore"):
        security.ssl_context()
