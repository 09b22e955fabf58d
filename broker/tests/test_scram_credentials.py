"""The SCRAM credential store (broker/security/credentials.py): derivations against RFC 7677 and kafka-python's
admin client, Kafka's text and ZooKeeper forms, the file in the data directory, and Kafka's validation of
AlterUserScramCredentials and DescribeUserScramCredentials."""
from __future__ import annotations

import base64
import json
import os
import stat

import pytest

from trafka.broker.security import credentials as c
from trafka.broker.security.credentials import (
    AlterResult,
    Deletion,
    DescribeResult,
    ScramCredential,
    ScramCredentialStore,
    Upsertion,
)
from trafka.wire.errors import ErrorCode

RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
SHA256, SHA512 = 1, 2


def test_from_password_matches_rfc_7677():
    # RFC 7677's example: user "user", password "pencil", 4096 iterations. Its ServerSignature (checked in
    # test_sasl) follows from these keys; the StoredKey is H(HMAC(SaltedPassword, "Client Key")).
    cred = c.from_password(c.SCRAM_SHA_256, "pencil", 4096, salt=RFC7677_SALT)
    salted = c.salted_password(c.SCRAM_SHA_256, "pencil", RFC7677_SALT, 4096)
    assert cred.salt == RFC7677_SALT and cred.iterations == 4096
    assert cred.stored_key == c.stored_key(c.SCRAM_SHA_256, c.client_key(c.SCRAM_SHA_256, salted))
    assert len(cred.stored_key) == len(cred.server_key) == 32
    assert "[hidden]" in repr(cred) and cred.stored_key.hex() not in repr(cred)


@pytest.mark.parametrize("mechanism", c.SCRAM_MECHANISMS)
def test_salted_password_from_kafka_python_admin_gives_the_same_credential(mechanism):
    # What AlterUserScramCredentials carries: kafka-python's admin client salts the password itself.
    from kafka.admin import UserScramCredentialUpsertion
    upsertion = UserScramCredentialUpsertion("alice", mechanism, "alice-secret", iterations=8192, salt=b"pepper")
    from_wire = c.from_salted_password(mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations)
    assert from_wire == c.from_password(mechanism, "alice-secret", 8192, salt=b"pepper")
    assert len(from_wire.stored_key) == (32 if mechanism == c.SCRAM_SHA_256 else 64)


def test_random_salts_differ():
    a = c.from_password(c.SCRAM_SHA_512, "x", 4096)
    b = c.from_password(c.SCRAM_SHA_512, "x", 4096)
    assert a.salt != b.salt and len(a.salt) == 32


def test_unknown_mechanism_is_refused():
    with pytest.raises(ValueError, match="Unknown SCRAM mechanism 'SCRAM-SHA-1'"):
        c.from_password("SCRAM-SHA-1", "x", 4096)


# -- Kafka's text form -------------------------------------------------------------------------------------------

def test_credential_string_is_kafkas_form_and_round_trips():
    cred = ScramCredential(b"salt", b"\x01" * 32, b"\x02" * 32, 4096)
    text = c.credential_to_string(cred)
    ones, twos = base64.b64encode(cred.stored_key).decode(), base64.b64encode(cred.server_key).decode()
    assert text == f"salt=c2FsdA==,stored_key={ones},server_key={twos},iterations=4096"
    assert c.credential_from_string(text) == cred


@pytest.mark.parametrize("text", [
    "",
    "salt=c2FsdA==,stored_key=AQ==,server_key=Ag==",                          # a key missing
    "salt=c2FsdA==,stored_key=AQ==,server_key=Ag==,iterations=4096,extra=1",   # one too many
    "salt=c2FsdA==,stored_key=AQ==,server_key=Ag==,=4096",                     # no key
    "salt=c2FsdA==,stored_key=AQ==,server_key=Ag==,iterations",                # no '='
    "salt=!!!!,stored_key=AQ==,server_key=Ag==,iterations=4096",               # not base64
    "salt=c2FsdA==,stored_key=AQ==,server_key=Ag==,iterations=many",           # not a number
])
def test_invalid_credential_strings(text):
    with pytest.raises(ValueError, match="^Credentials not valid"):
        c.credential_from_string(text)


# -- Kafka's ZooKeeper form ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "sanitized"), [
    ("alice", "alice"),
    ("a.b-c_d", "a.b-c_d"),
    ("CN=alice,O=org", "CN%3Dalice%2CO%3Dorg"),
    ("a b", "a%20b"),          # Java's URLEncoder writes '+', Kafka turns it into %20
    ("a*b", "a%2Ab"),          # kept by URLEncoder, encoded by Kafka
    ("a+b", "a%2Bb"),
    ("a~b", "a%7Eb"),          # Java encodes '~' (Python's quote would not)
    ("é/ü", "%C3%A9%2F%C3%BC"),
])
def test_sanitize_as_kafka(name, sanitized):
    assert c.sanitize(name) == sanitized
    assert c.desanitize(sanitized) == name


def test_zk_user_config_round_trip_keeps_other_entries():
    cred256 = c.from_password(c.SCRAM_SHA_256, "pw", 4096, salt=b"s1")
    cred512 = c.from_password(c.SCRAM_SHA_512, "pw", 8192, salt=b"s2")
    data = c.encode_zk_user_config({c.SCRAM_SHA_256: cred256, c.SCRAM_SHA_512: cred512}, {"producer_byte_rate": "1024"})
    node = json.loads(data)
    assert node == {"version": 1, "config": {
        "producer_byte_rate": "1024",
        "SCRAM-SHA-256": c.credential_to_string(cred256),
        "SCRAM-SHA-512": c.credential_to_string(cred512),
    }}
    assert b" " not in data                                   # compact, as Kafka's Json.encodeAsBytes
    expected = ({c.SCRAM_SHA_256: cred256, c.SCRAM_SHA_512: cred512}, {"producer_byte_rate": "1024"})
    assert c.decode_zk_user_config(data) == expected


def test_zk_user_config_written_by_kafka_decodes():
    # A node as Kafka's kafka-configs.sh writes it (values from ScramCredentialUtils' form).
    text = c.credential_to_string(c.from_password(c.SCRAM_SHA_512, "alice-secret", 4096, salt=b"abc"))
    data = json.dumps({"version": 1, "config": {"SCRAM-SHA-512": text}}).encode()
    creds, other = c.decode_zk_user_config(data)
    assert creds[c.SCRAM_SHA_512].iterations == 4096 and other == {}


def test_zk_user_config_with_only_quotas_and_empty_credentials():
    data = c.encode_zk_user_config({}, {"consumer_byte_rate": "10", "SCRAM-SHA-256": "stale"})
    assert json.loads(data) == {"version": 1, "config": {"consumer_byte_rate": "10"}}


@pytest.mark.parametrize("data", [b"not json", b"[1]", b'{"version":1,"config":[]}',
                                  b'{"version":1,"config":{"SCRAM-SHA-256":"salt=x"}}'])
def test_zk_user_config_invalid(data):
    with pytest.raises(ValueError):
        c.decode_zk_user_config(data)


def test_zk_paths():
    assert c.zk_user_path("CN=a b") == "/config/users/CN%3Da%20b"
    assert json.loads(c.zk_user_change_notification("a*b")) == {"version": 2, "entity_path": "users/a%2Ab"}


# -- the store -----------------------------------------------------------------------------------------------------

def test_store_set_get_delete_list_persist_and_reload(tmp_path):
    store = ScramCredentialStore.load(tmp_path)
    assert store.list() == {} and store.get("alice", c.SCRAM_SHA_256) is None
    # A password base64 cannot spell (a space, a "!"), so that finding it in the file means it was stored.
    cred = c.from_password(c.SCRAM_SHA_256, "a secret!", 4096)
    store.set("alice", c.SCRAM_SHA_256, cred)
    store.set("bob", c.SCRAM_SHA_512, c.from_password(c.SCRAM_SHA_512, "a secret!", 8192))
    assert store.get("alice", c.SCRAM_SHA_256) == cred
    assert store.get("alice", c.SCRAM_SHA_512) is None
    assert store.list() == {"alice": {c.SCRAM_SHA_256: 4096}, "bob": {c.SCRAM_SHA_512: 8192}}

    path = tmp_path / c.CREDENTIALS_FILE
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert not (tmp_path / (c.CREDENTIALS_FILE + ".tmp")).exists()
    assert b"a secret!" not in path.read_bytes()

    reloaded = ScramCredentialStore.load(tmp_path)
    assert reloaded.get("alice", c.SCRAM_SHA_256) == cred and reloaded.list() == store.list()

    assert reloaded.delete("alice", c.SCRAM_SHA_256) is True
    assert reloaded.delete("alice", c.SCRAM_SHA_256) is False
    assert ScramCredentialStore.load(tmp_path).users() == ["bob"]


def test_store_in_memory_only():
    store = ScramCredentialStore()
    store.set("a", c.SCRAM_SHA_256, c.from_password(c.SCRAM_SHA_256, "pw", 4096))
    assert store.exists("a", c.SCRAM_SHA_256)


def test_store_refuses_bad_sets(tmp_path):
    store = ScramCredentialStore.load(tmp_path)
    cred = c.from_password(c.SCRAM_SHA_256, "pw", 4096)
    with pytest.raises(ValueError, match="Username must not be empty"):
        store.set("", c.SCRAM_SHA_256, cred)
    with pytest.raises(ValueError, match="Unknown SCRAM mechanism"):
        store.set("a", "PLAIN", cred)


def test_a_change_that_cannot_be_written_is_not_made(tmp_path, monkeypatch):
    store = ScramCredentialStore.load(tmp_path)
    cred = c.from_password(c.SCRAM_SHA_256, "pw", 4096)
    store.set("alice", c.SCRAM_SHA_256, cred)

    def disk_full(path, data):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(c, "_write_private_atomically", disk_full)
    with pytest.raises(OSError):
        store.delete("alice", c.SCRAM_SHA_256)
    with pytest.raises(OSError):
        store.set("bob", c.SCRAM_SHA_256, cred)
    assert store.list() == {"alice": {c.SCRAM_SHA_256: 4096}}


@pytest.mark.parametrize("content", [b"{", b"[]", b'{"version": 2, "users": {}}',
                                     b'{"version": 1, "users": {"a": {"PLAIN": "x"}}}',
                                     b'{"version": 1, "users": {"a": {"SCRAM-SHA-256": "salt=1"}}}'])
def test_load_refuses_a_file_that_is_not_the_store(tmp_path, content):
    (tmp_path / c.CREDENTIALS_FILE).write_bytes(content)
    with pytest.raises(ValueError, match=str(tmp_path / c.CREDENTIALS_FILE)):
        ScramCredentialStore.load(tmp_path)


# -- AlterUserScramCredentials, as Kafka's controller validates it ---------------------------------------------------

def up(user, mechanism=SHA256, iterations=4096, password="pw"):
    name = c.MECHANISMS_BY_TYPE.get(mechanism, c.SCRAM_SHA_256)
    return Upsertion(user, mechanism, iterations, b"salt", c.salted_password(name, password, b"salt", 4096))


NONE, DUP, BAD, UNSUPPORTED, NOT_FOUND = (ErrorCode.NONE, ErrorCode.DUPLICATE_RESOURCE,
                                         ErrorCode.UNACCEPTABLE_CREDENTIAL, ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                         ErrorCode.RESOURCE_NOT_FOUND)

DELETE_UNKNOWN = "Attempt to delete a user credential that does not exist"
ALTER_CASES = [
    # (deletions, upsertions, expected results in Kafka's order: deletions, upsertions, then failures)
    ([], [up("alice")], [AlterResult("alice", NONE)]),
    ([], [up("alice", iterations=16384)], [AlterResult("alice", NONE)]),
    ([], [up("alice", iterations=4095)], [AlterResult("alice", BAD, "Too few iterations")]),
    ([], [up("alice", iterations=16385)], [AlterResult("alice", BAD, "Too many iterations")]),
    ([], [up("")], [AlterResult("", BAD, "Username must not be empty")]),
    ([], [up("alice", mechanism=0)], [AlterResult("alice", UNSUPPORTED, "Unknown SCRAM mechanism")]),
    ([], [up("alice", mechanism=3)], [AlterResult("alice", UNSUPPORTED, "Unknown SCRAM mechanism")]),
    # A user altered twice in one request, whatever the mechanisms, fails (Kafka's controller keys by user).
    ([], [up("alice", SHA256), up("alice", SHA512)],
     [AlterResult("alice", DUP, "A user credential cannot be altered twice in the same request")]),
    ([Deletion("bob", SHA256)], [up("bob", SHA512)],
     [AlterResult("bob", DUP, "A user credential cannot be altered twice in the same request")]),
    ([Deletion("bob", SHA256), Deletion("bob", SHA512)], [],
     [AlterResult("bob", DUP, "A user credential cannot be altered twice in the same request")]),
    # Three alterations of one user: the third finds the user failed already and is skipped.
    ([], [up("alice"), up("alice"), up("alice")],
     [AlterResult("alice", DUP, "A user credential cannot be altered twice in the same request")]),
    ([Deletion("bob", SHA256)], [], [AlterResult("bob", NONE)]),
    ([Deletion("bob", SHA512)], [], [AlterResult("bob", NOT_FOUND, DELETE_UNKNOWN)]),
    ([Deletion("nobody", SHA256)], [], [AlterResult("nobody", NOT_FOUND, DELETE_UNKNOWN)]),
    ([Deletion("", SHA256)], [], [AlterResult("", BAD, "Username must not be empty")]),
    ([Deletion("bob", 9)], [], [AlterResult("bob", UNSUPPORTED, "Unknown SCRAM mechanism")]),
    # Independent users: successes first (deletions, then upsertions), failures after.
    ([Deletion("bob", SHA256)], [up("x", iterations=1), up("alice")],
     [AlterResult("bob", NONE), AlterResult("alice", NONE), AlterResult("x", BAD, "Too few iterations")]),
]


@pytest.mark.parametrize(("deletions", "upsertions", "expected"), ALTER_CASES)
def test_alter_validation_as_kafka(tmp_path, deletions, upsertions, expected):
    store = ScramCredentialStore.load(tmp_path)
    bob = c.from_password(c.SCRAM_SHA_256, "bob-secret", 4096)
    store.set("bob", c.SCRAM_SHA_256, bob)
    results = store.alter(deletions, upsertions)
    assert results == expected
    reloaded = ScramCredentialStore.load(tmp_path)
    for result in results:
        if result.error is not NONE:
            # A failed user is left as it was.
            assert reloaded.list().get(result.user) == ({c.SCRAM_SHA_256: 4096} if result.user == "bob" else None)


def test_alter_applies_and_persists(tmp_path):
    store = ScramCredentialStore.load(tmp_path)
    store.set("bob", c.SCRAM_SHA_256, c.from_password(c.SCRAM_SHA_256, "bob-secret", 4096))
    results = store.alter([Deletion("bob", SHA256)], [up("alice", SHA512, iterations=8192, password="alice-secret")])
    assert results == [AlterResult("bob", NONE), AlterResult("alice", NONE)]
    reloaded = ScramCredentialStore.load(tmp_path)
    assert reloaded.list() == {"alice": {c.SCRAM_SHA_512: 8192}}
    salted = c.salted_password(c.SCRAM_SHA_512, "alice-secret", b"salt", 4096)
    assert reloaded.get("alice", c.SCRAM_SHA_512) == c.from_salted_password(c.SCRAM_SHA_512, b"salt", salted, 8192)


def test_alter_with_nothing_valid_does_not_write(tmp_path):
    store = ScramCredentialStore.load(tmp_path)
    assert store.alter([], [up("", iterations=1)]) == [AlterResult("", BAD, "Username must not be empty")]
    assert not (tmp_path / c.CREDENTIALS_FILE).exists()


def test_upsertion_repr_hides_the_salted_password():
    u = up("alice")
    assert u.salted_password.hex() not in repr(u) and "alice" in repr(u)


# -- DescribeUserScramCredentials -----------------------------------------------------------------------------------

def test_describe_as_kafka(tmp_path):
    store = ScramCredentialStore.load(tmp_path)
    store.set("bob", c.SCRAM_SHA_512, c.from_password(c.SCRAM_SHA_512, "pw", 8192))
    store.set("bob", c.SCRAM_SHA_256, c.from_password(c.SCRAM_SHA_256, "pw", 4096))
    store.set("alice", c.SCRAM_SHA_256, c.from_password(c.SCRAM_SHA_256, "pw", 4096))
    everyone = [DescribeResult("alice", NONE, None, ((SHA256, 4096),)),
                DescribeResult("bob", NONE, None, ((SHA256, 4096), (SHA512, 8192)))]
    assert store.describe(None) == everyone
    assert store.describe([]) == everyone
    assert store.describe(["bob", "carol", "alice", "bob"]) == [
        DescribeResult("bob", DUP,
                       "Cannot describe SCRAM credentials for the same user twice in a single request: bob"),
        DescribeResult("carol", NOT_FOUND, "Attempt to describe a user credential that does not exist: carol"),
        DescribeResult("alice", NONE, None, ((SHA256, 4096),)),
    ]
