"""Kafka's JAAS configuration (broker/security/jaas.py): the ``sasl.jaas.config`` line as Kafka's JaasConfig
reads it (Java's StreamTokenizer), a JAAS file's sections, and where a listener's entries come from."""
from __future__ import annotations

import logging

import pytest

from trafka.broker.security.jaas import (
    OAUTHBEARER_LOGIN_MODULE,
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasConfigError,
    JaasEntry,
    jaas_config_setting,
    load_jaas_file,
    option,
    parse_jaas_config,
    parse_jaas_entries,
    parse_jaas_file,
    server_jaas,
)

PLAIN = PLAIN_LOGIN_MODULE

PARSES = [
    # (the property's value, login module, flag, options)
    (f'{PLAIN} required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";',
     PLAIN, "REQUIRED", {"username": "admin", "password": "admin-secret", "user_admin": "admin-secret",
                         "user_alice": "alice-secret"}),
    # Flags in any case; no options; whitespace and newlines anywhere.
    (f"{SCRAM_LOGIN_MODULE} Required;", SCRAM_LOGIN_MODULE, "REQUIRED", {}),
    (f"\n  {PLAIN}\n\tREQUISITE\n  a='b'\n ;\n", PLAIN, "REQUISITE", {"a": "b"}),
    (f"{PLAIN} sufficient;", PLAIN, "SUFFICIENT", {}),
    (f"{PLAIN} optional;", PLAIN, "OPTIONAL", {}),
    # Unquoted words: letters, digits, _ $ - . inside; spaces around '='.
    (f"{PLAIN} required username = admin_1 token=$abc-def.ghi;", PLAIN, "REQUIRED",
     {"username": "admin_1", "token": "$abc-def.ghi"}),
    # Quoted values: single or double quotes, Java's escapes, the other quote and spaces inside.
    (rf'{PLAIN} required a="q\"uote" b="back\\slash" c="tab\there" d="nl\n" e="oct\101\60x" f="\x" g=' "'it\"s'" ';',
     PLAIN, "REQUIRED", {"a": 'q"uote', "b": "back\\slash", "c": "tab\there", "d": "nl\n", "e": "octA0x",
                         "f": "x", "g": 'it"s'}),
    (f'{PLAIN} required password="p a s s;w=o,r}}d" empty="";', PLAIN, "REQUIRED",
     {"password": "p a s s;w=o,r}d", "empty": ""}),
    # Comments: //, /* */ and a lone / to the end of the line.
    (f'// the admin\n{PLAIN} /* flag: */ required user_a="x" // trailing\n user_b="y";', PLAIN, "REQUIRED",
     {"user_a": "x", "user_b": "y"}),
    (f'{PLAIN} required user_a="x" / a comment\n ;', PLAIN, "REQUIRED", {"user_a": "x"}),
    # A later option of the same name wins; non-ASCII letters are word characters; quoted keys.
    (f'{PLAIN} required a="1" a="2" "quoted key"="v" clé=café;', PLAIN, "REQUIRED",
     {"a": "2", "quoted key": "v", "clé": "café"}),
    (f'{OAUTHBEARER_LOGIN_MODULE} required unsecuredValidatorRequiredScope="a b"'
     ' unsecuredValidatorAllowableClockSkewMs="3000";',
     OAUTHBEARER_LOGIN_MODULE, "REQUIRED",
     {"unsecuredValidatorRequiredScope": "a b", "unsecuredValidatorAllowableClockSkewMs": "3000"}),
]


@pytest.mark.parametrize(("text", "module", "flag", "options"), PARSES)
def test_parse_jaas_config(text, module, flag, options):
    assert parse_jaas_config(text) == JaasEntry(module, flag, options)


ERRORS = [
    # (the property's value, Kafka's message)
    ("", "Login module not specified in JAAS config"),
    ("// only a comment", "Login module not specified in JAAS config"),
    (PLAIN, "Login module control flag not specified in JAAS config"),
    (f"{PLAIN} ;", "Login module control flag is not available in the JAAS config"),
    (f"{PLAIN} mandatory;", "Invalid login module control flag 'mandatory' in JAAS config"),
    (f"{PLAIN} required", "JAAS config entry not terminated by semi-colon"),
    (f'{PLAIN} required user_a="x"', "JAAS config entry not terminated by semi-colon"),
    (f"{PLAIN} required user_a;", "Value not specified for key 'user_a' in JAAS config"),
    (f"{PLAIN} required user_a=;", "Value not specified for key 'user_a' in JAAS config"),
    (f"{PLAIN} required user_a=", "Value not specified for key 'user_a' in JAAS config"),
    # Unquoted values that are numbers to Java's tokenizer are refused, as Kafka refuses them.
    (f"{PLAIN} required user_a=1secret;", "Value not specified for key 'user_a' in JAAS config (quote a value"),
    (f"{PLAIN} required skew=3000;", "Value not specified for key 'skew' in JAAS config (quote a value"),
    (f"{PLAIN} required user_a=-x;", "Value not specified for key 'user_a' in JAAS config (quote a value"),
    (f"{PLAIN} required path=/etc/x;", "Value not specified for key 'path' in JAAS config"),
    # Java's lone '/' takes the character after it into the comment, even a line's end: the next line goes too.
    (f'{PLAIN} required user_a="x" /\n user_b="y";', "JAAS config entry not terminated by semi-colon"),
    (f"{PLAIN} required = \"x\";", "Option name expected in JAAS config, found '='"),
    ("; required;", "Login module class expected in JAAS config, found ';'"),
    (f'{PLAIN} required a="unclosed;', "Quoted value not closed on its line in JAAS config"),
    (f'{PLAIN} required a="broken\nline";', "Quoted value not closed on its line in JAAS config"),
    (f"{PLAIN} required; {PLAIN} required;", "JAAS config property contains 2 login modules, should be 1 module"),
]


@pytest.mark.parametrize(("text", "message"), ERRORS)
def test_parse_jaas_config_errors_name_the_setting(text, message):
    setting = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
    with pytest.raises(JaasConfigError) as e:
        parse_jaas_config(text, setting=setting)
    assert str(e.value).startswith(f"Invalid {setting}")
    assert message in str(e.value)


def test_errors_say_where_and_never_show_values():
    with pytest.raises(JaasConfigError) as e:
        parse_jaas_config(f'{PLAIN} required\n  password="hunter2" user_a=42;')
    assert "line 2, column 29" in str(e.value)
    assert "hunter2" not in str(e.value)


def test_several_entries_parse_where_allowed():
    entries = parse_jaas_entries(f'{PLAIN} required user_a="1"; {SCRAM_LOGIN_MODULE} optional;')
    assert [e.login_module for e in entries] == [PLAIN, SCRAM_LOGIN_MODULE]
    assert option(entries, "user_a") == "1"
    assert option(entries, "user_a", SCRAM_LOGIN_MODULE) is None
    assert option(entries, "user_a", PLAIN) == "1"


def test_entry_repr_hides_values():
    entry = parse_jaas_config(f'{PLAIN} required user_admin="admin-secret";')
    assert "admin-secret" not in repr(entry) and "user_admin" in repr(entry)


# -- JAAS files -----------------------------------------------------------------------------------------------------

JAAS_FILE = f"""
/* Kafka's broker */
KafkaServer {{
    {PLAIN} required
        username="admin"
        password="admin-secret"
        user_admin="admin-secret";
    {SCRAM_LOGIN_MODULE} required;
}};

sasl_ssl.KafkaServer {{
    {PLAIN} required user_bob="bob-secret";
}};

// a ZooKeeper client section, for other programs
Client {{
    org.apache.zookeeper.server.auth.DigestLoginModule required username="zk" password="zk-secret";
}};
Empty {{ }};
"""


def test_parse_jaas_file():
    sections = parse_jaas_file(JAAS_FILE)
    assert list(sections) == ["KafkaServer", "sasl_ssl.KafkaServer", "Client", "Empty"]
    assert sections["KafkaServer"] == [
        JaasEntry(PLAIN, "REQUIRED", {"username": "admin", "password": "admin-secret", "user_admin": "admin-secret"}),
        JaasEntry(SCRAM_LOGIN_MODULE, "REQUIRED", {}),
    ]
    assert sections["Empty"] == []


@pytest.mark.parametrize(("text", "message"), [
    ("KafkaServer", "'{' expected after 'KafkaServer', found the end"),
    (f"KafkaServer {{ {PLAIN} required; }}", "';' expected after the '}' of section 'KafkaServer', found the end"),
    (f"KafkaServer {{ {PLAIN} required;", "Section 'KafkaServer' not closed by '}'"),
    ("KafkaServer { }; KafkaServer { };", "More than one section named 'KafkaServer'"),
    ("{ };", "Section name expected, found '{'"),
    (f"KafkaServer {{ {PLAIN} required a=1; }};", "Value not specified for key 'a' in JAAS config"),
])
def test_jaas_file_errors(text, message):
    with pytest.raises(JaasConfigError, match="^Invalid JAAS file") as e:
        parse_jaas_file(text)
    assert message in str(e.value)


def test_load_jaas_file(tmp_path):
    path = tmp_path / "kafka_server_jaas.conf"
    path.write_text(JAAS_FILE)
    assert "KafkaServer" in load_jaas_file(path)
    with pytest.raises(JaasConfigError, match="Cannot read the JAAS file .*missing.conf"):
        load_jaas_file(tmp_path / "missing.conf")
    path.write_text("KafkaServer {")
    with pytest.raises(JaasConfigError, match=f"Invalid JAAS file {path}"):
        load_jaas_file(path)


# -- a listener's entries, found as Kafka's broker finds them -------------------------------------------------------

def test_setting_name():
    assert jaas_config_setting("SASL_SSL", "SCRAM-SHA-256") == "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config"


def test_server_jaas_from_the_listener_and_mechanism_setting_first(tmp_path):
    path = tmp_path / "jaas.conf"
    path.write_text(JAAS_FILE)
    settings = {"listener.name.sasl_ssl.plain.sasl.jaas.config": f'{PLAIN} required user_carol="c";'}
    found = server_jaas("SASL_SSL", "PLAIN", settings, path)
    assert found.source == "listener.name.sasl_ssl.plain.sasl.jaas.config"
    assert found.entries == (JaasEntry(PLAIN, "REQUIRED", {"user_carol": "c"}),)


def test_server_jaas_from_the_file_listener_section_then_kafka_server(tmp_path):
    path = tmp_path / "jaas.conf"
    path.write_text(JAAS_FILE)
    found = server_jaas("SASL_SSL", "PLAIN", {}, path)
    assert found.entries == (JaasEntry(PLAIN, "REQUIRED", {"user_bob": "bob-secret"}),)
    assert found.source == f"section sasl_ssl.KafkaServer of JAAS file {path}"
    found = server_jaas("SASL_PLAINTEXT", "PLAIN", {}, path)
    assert [e.login_module for e in found.entries] == [PLAIN, SCRAM_LOGIN_MODULE]


def test_server_jaas_ignores_an_unprefixed_setting_with_kafkas_warning(caplog):
    settings = {"sasl.jaas.config": f'{PLAIN} required user_a="x";'}
    with caplog.at_level(logging.WARNING), pytest.raises(JaasConfigError) as e:
        server_jaas("SASL_PLAINTEXT", "PLAIN", settings)
    assert "Server config sasl.jaas.config should be prefixed with SASL mechanism name, ignoring config" in caplog.text
    assert str(e.value) == (
        "Could not find a 'KafkaServer' or 'sasl_plaintext.KafkaServer' entry in the JAAS configuration. "
        "System property 'java.security.auth.login.config' is not set "
        "(set listener.name.sasl_plaintext.plain.sasl.jaas.config for the PLAIN mechanism of listener SASL_PLAINTEXT)")


def test_server_jaas_without_a_matching_section(tmp_path):
    path = tmp_path / "jaas.conf"
    path.write_text("Client { x required; };")
    with pytest.raises(JaasConfigError, match=f"System property 'java.security.auth.login.config' is {path}"):
        server_jaas("SASL_SSL", "PLAIN", {}, path)
