"""The ACL stores: a single broker's file (trafka.broker.security.acls) and the ZooKeeper format of a
cluster's (trafka.broker.cluster.acls), without a broker."""
from __future__ import annotations

import json

import pytest
import trio
from trafka.broker.cluster.acls import (
    EXTENDED_CHANGES,
    LITERAL_CHANGES,
    decode_acls,
    decode_change,
    encode_acls,
    encode_change,
    resource_path,
    znode_name,
)
from trafka.broker.config import ConfigError
from trafka.broker.security.acls import (
    ACLS_FILE,
    AclStore,
    authorizer_from_properties,
    client_host,
)
from trafka.broker.security.authorizer import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AclResourceType,
    Authorizer,
    PatternType,
)
from trafka.wire.errors import ErrorCode

TOPIC, TXN = AclResourceType.TOPIC, AclResourceType.TRANSACTIONAL_ID
READ, WRITE = AclOperation.READ, AclOperation.WRITE
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED


def binding(name="t", pattern=LITERAL, principal="User:a", op=READ, permission=ALLOW, rt=TOPIC):
    return AclBinding(rt, name, pattern, principal, "*", op, permission)


def test_created_and_deleted_acls_are_kept_in_the_data_directory(tmp_path):
    async def main():
        store = AclStore.load(tmp_path, Authorizer())
        results = await store.create([binding(), binding("p-", PREFIXED), binding(""), binding()])
        assert [(r.error, r.message) for r in results] == [
            (ErrorCode.NONE, ""), (ErrorCode.NONE, ""), (ErrorCode.INVALID_REQUEST, "Invalid empty resource name"),
            (ErrorCode.NONE, "")]
        assert len(store.describe(AclBindingFilter())) == 2
        again = AclStore.load(tmp_path, Authorizer())
        assert set(again.describe(AclBindingFilter())) == {binding(), binding("p-", PREFIXED)}
        deleted = await again.delete([AclBindingFilter(pattern_type=PREFIXED), AclBindingFilter(),
                                      AclBindingFilter(operation=AclOperation.UNKNOWN)])
        assert [(r.error, sorted(r.deleted, key=AclBinding.sort_key)) for r in deleted] == [
            (ErrorCode.NONE, [binding("p-", PREFIXED)]),
            (ErrorCode.NONE, [binding("p-", PREFIXED), binding()]),  # both filters report p-
            (ErrorCode.INVALID_REQUEST, [])]
        assert AclStore.load(tmp_path, Authorizer()).describe(AclBindingFilter()) == []
        assert json.loads((tmp_path / ACLS_FILE).read_text()) == {"version": 1, "acls": []}

    trio.run(main)


def test_the_authorizer_follows_the_store(tmp_path):
    async def main():
        authorizer = Authorizer()
        store = AclStore.load(tmp_path, authorizer)
        assert not authorizer.authorize("User:a", "1.2.3.4", READ, TOPIC, "t")
        await store.create([binding()])
        assert authorizer.authorize("User:a", "1.2.3.4", READ, TOPIC, "t")
        await store.delete([AclBindingFilter(resource_name="t")])
        assert not authorizer.authorize("User:a", "1.2.3.4", READ, TOPIC, "t")

    trio.run(main)


def test_a_file_that_cannot_be_read_stops_the_start(tmp_path):
    (tmp_path / ACLS_FILE).write_text('{"version": 7, "acls": []}')
    with pytest.raises(ConfigError, match="acls.json"):
        AclStore.load(tmp_path, Authorizer())
    (tmp_path / ACLS_FILE).write_text("{not json")
    with pytest.raises(ConfigError):
        AclStore.load(tmp_path, Authorizer())


@pytest.mark.parametrize("name", ["org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                                  " kafka.security.authorizer.AclAuthorizer "])
def test_the_authorizer_settings(name):
    authorizer = authorizer_from_properties({"authorizer.class.name": name, "super.users": "User:admin;User:b",
                                             "allow.everyone.if.no.acl.found": "TRUE"})
    assert authorizer.super_users == {"User:admin", "User:b"} and authorizer.allow_everyone_if_no_acl_found
    assert authorizer_from_properties({}) is None
    assert authorizer_from_properties({"authorizer.class.name": ""}) is None


@pytest.mark.parametrize("properties,message", [
    ({"authorizer.class.name": "com.example.Mine"}, "authorizer.class.name=com.example.Mine"),
    ({"super.users": "admin"}, "super.users='admin'"),
    ({"allow.everyone.if.no.acl.found": "yes"}, "allow.everyone.if.no.acl.found"),
])
def test_bad_authorizer_settings_stop_the_start(properties, message):
    with pytest.raises(ConfigError, match=message):
        authorizer_from_properties({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", **properties})


def test_client_hosts_as_kafka_writes_them():
    assert client_host("127.0.0.1:5555") == "127.0.0.1"
    assert client_host("[::1]:5555") == "0:0:0:0:0:0:0:1"
    assert client_host("::1:5555") == "0:0:0:0:0:0:0:1"
    assert client_host("[fe80::a:b]:1") == "fe80:0:0:0:0:0:a:b"


# -- ZooKeeper's format (Kafka's AclAuthorizer) --

def test_resource_nodes():
    assert resource_path((TOPIC, "orders", LITERAL)) == "/kafka-acl/Topic/orders"
    assert resource_path((TXN, "tx-", PREFIXED)) == "/kafka-acl-extended/prefixed/TransactionalId/tx-"
    acls = [binding("orders", op=AclOperation.IDEMPOTENT_WRITE, permission=DENY), binding("orders")]
    data = encode_acls(acls)
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:a", "permissionType": "Deny", "host": "*", "operation": "IdempotentWrite"},
        {"principal": "User:a", "permissionType": "Allow", "host": "*", "operation": "Read"}]}
    assert decode_acls((TOPIC, "orders", LITERAL), data) == acls
    assert decode_acls((TOPIC, "orders", LITERAL), b"") == []
    # Kafka's upper-case names are read too.
    upper = b'{"version":1,"acls":[{"principal":"User:a","permissionType":"ALLOW","host":"*","operation":"READ"}]}'
    assert decode_acls((TOPIC, "orders", LITERAL), upper) == [binding("orders")]
    with pytest.raises(ValueError):
        decode_acls((TOPIC, "orders", LITERAL), b'{"version":2,"acls":[]}')


def test_change_nodes():
    assert encode_change((TOPIC, "orders", LITERAL)) == (LITERAL_CHANGES, b"TOPIC:orders")
    parent, data = encode_change((TXN, "tx-", PREFIXED))
    assert parent == EXTENDED_CHANGES
    assert json.loads(data) == {"version": 1, "resourceType": "TRANSACTIONAL_ID", "name": "tx-",
                                "patternType": "PREFIXED"}
    assert decode_change(EXTENDED_CHANGES, data) == (TXN, "tx-", PREFIXED)
    assert decode_change(LITERAL_CHANGES, b"TOPIC:a:b") == (TOPIC, "a:b", LITERAL)
    assert decode_change(LITERAL_CHANGES, b"Topic:a") == (TOPIC, "a", LITERAL)
    with pytest.raises(ValueError):
        decode_change(LITERAL_CHANGES, b"nocolon")
    with pytest.raises(ValueError):
        decode_change(LITERAL_CHANGES, b"PLANET:x")


def test_names_a_znode_can_have():
    assert znode_name("orders") and znode_name("a.b") and znode_name("*") and znode_name("ünïcode")
    for name in ("a/b", ".", "..", "a\0b", "tab\there", "\ufff5"):
        assert not znode_name(name), name
