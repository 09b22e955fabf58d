"""ACLs side by side: Apache Kafka 4.4 and trafka started with the StandardAuthorizer, the same super users and
the same PLAIN users; the same CreateAcls, DescribeAcls and DeleteAcls requests sent to both, byte for byte,
and what a client sees compared: every creation's and every filter's code and message, the bindings
described and deleted (for every kind of filter: ANY, MATCH, LITERAL, PREFIXED, by principal, host,
operation and permission), invalid bindings, a principal without ALTER or DESCRIBE on the cluster, and a
broker without an authorizer."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from trafka.wire.messages import (
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)

from compat_tests.harness import BrokerProcess
from compat_tests.reference import KafkaBroker
from compat_tests.ports import free_port
from compat_tests.wire_client import WireClient

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SETTINGS = {
    "authorizer.class.name": AUTHORIZER,
    # The PLAINTEXT listener's clients (Kafka's own controller connections among them) are ANONYMOUS.
    "super.users": "User:ANONYMOUS;User:admin",
    "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
}
Creation = CreateAclsRequest.AclCreation
Filter = DeleteAclsRequest.DeleteAclsFilter

# Codes: resource types TOPIC 2, GROUP 3, CLUSTER 4, TRANSACTIONAL_ID 5; patterns ANY 1, MATCH 2,
# LITERAL 3, PREFIXED 4; operations ANY 1, ALL 2, READ 3, WRITE 4, DESCRIBE 8; permissions ANY 1, DENY 2,
# ALLOW 3.
TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
ALL, READ, WRITE, DESCRIBE = 2, 3, 4, 8
DENY, ALLOW = 2, 3


def creation(rt=TOPIC, name="orders", pattern=LITERAL, principal="User:alice", host="*", op=READ, perm=ALLOW):
    return Creation(resource_type=rt, resource_name=name, resource_pattern_type=pattern, principal=principal,
                    host=host, operation=op, permission_type=perm)


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[object, int]]]:
    """Kafka and trafka with the authorizer, a PLAINTEXT listener (super user ANONYMOUS) and a SASL_PLAINTEXT
    one (admin, a super user, and alice): by name, the process and its SASL port."""
    root = Path(tmp_path_factory.mktemp("differential-acls"))
    kafka = KafkaBroker(root / "kafka", overrides=SETTINGS, listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"})
    trafka_dir = root / "trafka"
    trafka_dir.mkdir()
    sasl_port = free_port()
    trafka = BrokerProcess(trafka_dir, name="trafka", overrides={
        **SETTINGS, "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}"})
    try:
        kafka.start()
        trafka.start()
        yield {"kafka": (kafka, kafka.ports["SASL_PLAINTEXT"]), "trafka": (trafka, sasl_port)}
    finally:
        trafka.close()
        kafka.close()


@pytest.fixture(scope="module")
def lenient_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[object, int]]]:
    """As ``brokers``, with ``allow.everyone.if.no.acl.found=true``."""
    root = Path(tmp_path_factory.mktemp("differential-acls-lenient"))
    settings = {**SETTINGS, "allow.everyone.if.no.acl.found": "true"}
    kafka = KafkaBroker(root / "kafka", overrides=settings, listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"})
    (root / "trafka").mkdir()
    sasl_port = free_port()
    trafka = BrokerProcess(root / "trafka", name="trafka", overrides={
        **settings, "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}"})
    try:
        kafka.start()
        trafka.start()
        yield {"kafka": (kafka, kafka.ports["SASL_PLAINTEXT"]), "trafka": (trafka, sasl_port)}
    finally:
        trafka.close()
        kafka.close()


@pytest.fixture(scope="module")
def plain_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """Kafka and trafka without an authorizer."""
    root = Path(tmp_path_factory.mktemp("differential-no-authorizer"))
    kafka = KafkaBroker(root / "kafka")
    (root / "trafka").mkdir()
    trafka = BrokerProcess(root / "trafka", name="trafka")
    try:
        kafka.start()
        trafka.start()
        yield {"kafka": kafka, "trafka": trafka}
    finally:
        trafka.close()
        kafka.close()


def on_both(brokers, ask: Callable[[WireClient], object], *, user: str | None = None) -> dict[str, object]:
    """``ask`` on each broker: on its PLAINTEXT listener (a super user), or authenticated as ``user``."""
    observed = {}
    for name, (process, sasl_port) in brokers.items():
        if user is None:
            with WireClient(process.bootstrap) as client:
                observed[name] = ask(client)
            continue
        with WireClient(f"127.0.0.1:{sasl_port}") as client:
            client.request(SaslHandshakeRequest(mechanism="PLAIN"), 1)
            answer = client.request(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{user}-secret".encode()), 2)
            assert answer.error_code == 0, answer
            observed[name] = ask(client)
    return observed


def assert_same(observed: dict[str, object]) -> None:
    assert observed["trafka"] == observed["kafka"], observed


def create(client: WireClient, *creations: Creation, version: int = 3):
    """Create the bindings; answered once every binding created is described (Kafka's broker applies ACLs a
    moment after CreateAcls answers)."""
    response = client.request(CreateAclsRequest(creations=list(creations)), version)
    created = {(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host, c.operation,
                c.permission_type) for c, r in zip(creations, response.results, strict=True) if r.error_code == 0}
    _until(client, lambda described: created <= set(described))
    return [(r.error_code, r.error_message) for r in response.results]


def _until(client: WireClient, settled: Callable[[list], bool]) -> None:
    """Wait (a few seconds at most) until the bindings ``describe`` lists are ``settled``."""
    deadline = time.monotonic() + 10
    while not settled(describe(client)[2]) and time.monotonic() < deadline:
        time.sleep(0.02)


def describe(client: WireClient, version: int = 3, **fields):
    wanted = {"resource_type_filter": ANY, "resource_name_filter": None, "pattern_type_filter": ANY,
              "principal_filter": None, "host_filter": None, "operation": ANY, "permission_type": ANY, **fields}
    response = client.request(DescribeAclsRequest(**wanted), version)
    return response.error_code, response.error_message, sorted(
        (r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation, a.permission_type)
        for r in response.resources for a in r.acls)


def delete_filter(**fields) -> Filter:
    wanted = {"resource_type_filter": ANY, "resource_name_filter": None, "pattern_type_filter": ANY,
              "principal_filter": None, "host_filter": None, "operation": ANY, "permission_type": ANY, **fields}
    return Filter(**wanted)


def delete(client: WireClient, *filters: Filter, version: int = 3):
    """Delete what the filters match; answered once nothing deleted is described any more (Kafka's broker
    applies the deletions a moment after DeleteAcls answers)."""
    response = client.request(DeleteAclsRequest(filters=list(filters)), version)
    deleted = {(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation, m.permission_type)
               for r in response.filter_results for m in r.matching_acls if m.error_code == 0}
    _until(client, lambda described: not deleted & set(described))
    return [(r.error_code, r.error_message, sorted(
        (m.error_code, m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host, m.operation,
         m.permission_type) for m in r.matching_acls)) for r in response.filter_results]


def _closed(action: Callable[[], object]) -> object:
    """"closed" when the broker closed the connection instead of answering; else what ``action`` returned."""
    try:
        return action()
    except (ConnectionError, OSError, EOFError):
        return "closed"


def clear(client: WireClient) -> None:
    delete(client, delete_filter())
    _until(client, lambda described: not described)


# A set of bindings every filter test starts from.
BINDINGS = [
    creation(),
    creation(name="orders", op=WRITE, principal="User:bob", host="10.0.0.1"),
    creation(name="*", op=DESCRIBE),
    creation(name="ord", pattern=PREFIXED, op=ALL, perm=DENY, principal="User:*"),
    creation(name="pay", pattern=PREFIXED, principal="User:bob"),
    creation(rt=GROUP, name="orders"),
    creation(rt=GROUP, name="g", pattern=PREFIXED, op=READ),
    creation(rt=CLUSTER, name="kafka-cluster", op=DESCRIBE),
    creation(rt=TXN, name="tx-", pattern=PREFIXED, op=WRITE),
]

FILTERS = {
    "any": {},
    "topics": {"resource_type_filter": TOPIC},
    "literal": {"pattern_type_filter": LITERAL},
    "prefixed": {"pattern_type_filter": PREFIXED},
    "name-any-pattern": {"resource_name_filter": "orders"},
    "name-literal": {"resource_name_filter": "orders", "pattern_type_filter": LITERAL},
    "name-prefixed": {"resource_name_filter": "ord", "pattern_type_filter": PREFIXED},
    "match-topic": {"resource_type_filter": TOPIC, "resource_name_filter": "orders", "pattern_type_filter": MATCH},
    "match-prefix": {"resource_name_filter": "payments", "pattern_type_filter": MATCH},
    "match-no-name": {"pattern_type_filter": MATCH},
    "match-star": {"resource_name_filter": "*", "pattern_type_filter": MATCH},
    "star-literal": {"resource_name_filter": "*", "pattern_type_filter": LITERAL},
    "principal": {"principal_filter": "User:bob"},
    "wildcard-principal": {"principal_filter": "User:*"},
    "host": {"host_filter": "10.0.0.1"},
    "operation": {"operation": WRITE},
    "operation-all": {"operation": ALL},
    "deny": {"permission_type": DENY},
    "allow-group": {"resource_type_filter": GROUP, "permission_type": ALLOW},
    "cluster": {"resource_type_filter": CLUSTER},
    "nothing": {"resource_name_filter": "nothing"},
}


@pytest.mark.parametrize("fields", FILTERS.values(), ids=FILTERS.keys())
def test_describe_filters(brokers, fields):
    def ask(client):
        clear(client)
        created = create(client, *BINDINGS)
        return created, describe(client, **fields)

    assert_same(on_both(brokers, ask))


@pytest.mark.parametrize("fields", FILTERS.values(), ids=FILTERS.keys())
def test_delete_filters(brokers, fields):
    def ask(client):
        clear(client)
        create(client, *BINDINGS)
        return delete(client, delete_filter(**fields)), describe(client)

    assert_same(on_both(brokers, ask))


def test_delete_with_overlapping_filters(brokers):
    def ask(client):
        clear(client)
        create(client, *BINDINGS)
        deleted = delete(client, delete_filter(resource_type_filter=TOPIC), delete_filter(principal_filter="User:bob"),
                         delete_filter(resource_name_filter="nothing"))
        return deleted, describe(client)

    assert_same(on_both(brokers, ask))


INVALID = {
    "cluster-name": creation(rt=CLUSTER, name="other"),
    "empty-name": creation(name=""),
    "any-resource": creation(rt=ANY),
    "any-pattern": creation(pattern=ANY),
    "match-pattern": creation(pattern=MATCH),
    "any-operation": creation(op=ANY),
    "any-permission": creation(perm=ANY),
    "principal-without-type": creation(principal="alice"),
    "empty-principal": creation(principal=""),
    "empty-host": creation(host=""),
    "group-principal": creation(principal="Group:admins"),
    "operation-not-for-topics": creation(op=9),
    "cluster-prefixed": creation(rt=CLUSTER, name="kafka-cluster", pattern=PREFIXED),
    "prefixed-star": creation(name="*", pattern=PREFIXED),
    "user-resource": creation(rt=7, name="alice", op=13),
    "delegation-token": creation(rt=6, name="token-1", op=DESCRIBE),
    "user-resource-operation-it-lacks": creation(rt=7, name="alice", op=READ),
    "two-phase-commit": creation(rt=TXN, name="tx", op=15),
    "unicode-name": creation(name="commandes-été"),
    "long-name": creation(name="n" * 1000),
}


@pytest.mark.parametrize("invalid", INVALID.values(), ids=INVALID.keys())
def test_creations_judged_one_by_one(brokers, invalid):
    def ask(client):
        clear(client)
        created = create(client, creation(name="before"), invalid, creation(name="after"))
        return created, describe(client)

    assert_same(on_both(brokers, ask))


def test_creating_a_binding_twice(brokers):
    def ask(client):
        clear(client)
        return create(client, creation(), creation()), create(client, creation()), describe(client)

    assert_same(on_both(brokers, ask))


@pytest.mark.parametrize("version", [1, 2, 3])
def test_every_version(brokers, version):
    def ask(client):
        clear(client)
        created = create(client, creation(), creation(name="p-", pattern=PREFIXED), version=version)
        described = describe(client, version=version)
        deleted = delete(client, delete_filter(pattern_type_filter=PREFIXED), version=version)
        return created, described, deleted, describe(client, version=version)

    assert_same(on_both(brokers, ask))


@pytest.mark.parametrize("request_of", ["create", "describe", "delete"])
@pytest.mark.parametrize("unknown", ["resource", "pattern", "operation", "permission", "code-99"])
def test_unknown_elements(brokers, request_of, unknown):
    """A code of UNKNOWN (0) makes a request Kafka cannot read: it closes the connection. A code it does not
    know at all is not read as UNKNOWN by the broker."""
    field = {"resource": "rt", "pattern": "pattern", "operation": "op", "permission": "perm", "code-99": "op"}[unknown]
    value = 99 if unknown == "code-99" else 0

    def ask(client):
        if request_of == "create":
            clear(client)
            return _closed(lambda: create(client, creation(**{field: value}))), _closed(lambda: describe(client))
        names = {"rt": "resource_type_filter", "pattern": "pattern_type_filter", "op": "operation",
                 "perm": "permission_type"}
        if request_of == "describe":
            return _closed(lambda: describe(client, **{names[field]: value}))
        return _closed(lambda: delete(client, delete_filter(**{names[field]: value}))), _closed(lambda: describe(client))

    assert_same(on_both(brokers, ask))


def test_a_principal_without_rights_on_the_cluster(brokers):
    def ask(client):
        created = create(client, creation())
        described = describe(client)
        deleted = delete(client, delete_filter())
        # Kafka names the whole request in its message: the code is compared.
        return ([code for code, _ in created], described[0], described[2], [(code, m) for code, _, m in deleted])

    assert_same(on_both(brokers, ask, user="alice"))


def test_rights_on_the_cluster_granted(brokers):
    """alice given DESCRIBE, then ALTER, on the cluster by the super user."""
    def grant(client):
        clear(client)
        return create(client, creation(rt=CLUSTER, name="kafka-cluster", op=DESCRIBE))

    def ask(client):
        return describe(client)[0:2], [code for code, _ in create(client, creation())]

    def grant_alter(client):
        return create(client, creation(rt=CLUSTER, name="kafka-cluster", op=ALTER_OP))

    def ask_again(client):
        return create(client, creation(name="alice-topic")), describe(client), delete(
            client, delete_filter(resource_name_filter="alice-topic"))

    assert_same(on_both(brokers, grant))
    assert_same(on_both(brokers, ask, user="alice"))
    assert_same(on_both(brokers, grant_alter))
    assert_same(on_both(brokers, ask_again, user="alice"))
    assert_same(on_both(brokers, ask, user="admin"))


ALTER_OP = 7


def test_without_an_authorizer(plain_brokers):
    def ask(client):
        return (create(client, creation(), creation(name="x")), describe(client),
                delete(client, delete_filter(), delete_filter(resource_type_filter=TOPIC)))

    observed = {}
    for name, process in plain_brokers.items():
        with WireClient(process.bootstrap) as client:
            observed[name] = ask(client)
    assert_same(observed)


# -------------------------------------------------------------------------------- the authorizer's decisions
# alice's right to list ACLs (DESCRIBE on the cluster) and to delete them (ALTER), under each set of ACLs on
# the cluster resource: Kafka's StandardAuthorizer and trafka's decide alike.

def on_cluster(op, perm=ALLOW, principal="User:alice", host="*", pattern=LITERAL):
    return creation(rt=CLUSTER, name="kafka-cluster", pattern=pattern, principal=principal, host=host, op=op,
                    perm=perm)


CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS = 9, 10, 11
DECISIONS = {
    "nothing": [],
    "describe": [on_cluster(DESCRIBE)],
    "alter-implies-describe": [on_cluster(ALTER_OP)],
    "all": [on_cluster(ALL)],
    "all-but-describe-denied": [on_cluster(ALL), on_cluster(DESCRIBE, DENY)],
    "alter-denied-describe-implied": [on_cluster(ALTER_OP), on_cluster(ALTER_OP, DENY)],
    "read-does-not-imply-alter": [on_cluster(READ)],
    "cluster-action-implies-nothing": [on_cluster(CLUSTER_ACTION)],
    "alter-configs": [on_cluster(ALTER_CONFIGS), on_cluster(DESCRIBE_CONFIGS)],
    "everyone": [on_cluster(ALL, principal="User:*")],
    "everyone-but-alice": [on_cluster(ALL, principal="User:*"), on_cluster(ALL, DENY)],
    "someone-else": [on_cluster(ALL, principal="User:bob")],
    "another-type": [on_cluster(ALL, principal="Group:alice")],
    "her-host": [on_cluster(ALL, host="127.0.0.1")],
    "another-host": [on_cluster(ALL, host="10.0.0.1")],
    "denied-from-her-host": [on_cluster(ALL), on_cluster(ALTER_OP, DENY, host="127.0.0.1")],
    "prefixed": [on_cluster(ALTER_OP, pattern=PREFIXED)],
    "prefixed-deny": [on_cluster(ALL), on_cluster(DESCRIBE, DENY, principal="User:*", pattern=PREFIXED)],
}


@pytest.mark.parametrize("acls", DECISIONS.values(), ids=DECISIONS.keys())
def test_the_authorizers_decisions(brokers, acls):
    def prepare(client):
        clear(client)
        return create(client, *acls) if acls else []

    def ask(client):
        listed = describe(client, resource_name_filter="nothing")[0]
        deleted = [code for code, _, _ in delete(client, delete_filter(resource_name_filter="nothing"))]
        return listed, deleted

    assert_same(on_both(brokers, prepare))
    assert_same(on_both(brokers, ask, user="alice"))


LENIENT = {
    "no-acl-on-the-cluster": [],
    "an-acl-for-someone-else": [on_cluster(ALL, principal="User:bob")],
    "an-acl-for-another-operation": [on_cluster(CLUSTER_ACTION)],
    "a-prefixed-acl": [on_cluster(CLUSTER_ACTION, principal="User:bob", pattern=PREFIXED)],
    "a-deny": [on_cluster(DESCRIBE, DENY)],
}


@pytest.mark.parametrize("acls", LENIENT.values(), ids=LENIENT.keys())
def test_allow_everyone_if_no_acl_found(lenient_brokers, acls):
    """With no ACL at all on the cluster resource everyone may; with any, only whom they allow."""
    test_the_authorizers_decisions(lenient_brokers, acls)
