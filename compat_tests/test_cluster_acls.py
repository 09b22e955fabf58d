"""ACLs in a cluster: three trafka brokers on a real ZooKeeper with the authorizer. An ACL created through one
broker is returned by DescribeAcls on the others, and enforced by them, within a second, and deleted likewise;
a restarted broker reads them all; the brokers replicate and write transaction markers as their inter-broker
principal, which the authorizer checks; and the ZooKeeper nodes are those Apache Kafka 3.9 in ZooKeeper mode
writes for the same requests (``/kafka-acl``, ``/kafka-acl-extended/prefixed``, the change nodes)."""
from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from trafka.wire.messages import (
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
)

from compat_tests.cluster import Cluster, start_cluster, wait
from compat_tests.reference import ZooKeeperModeKafka
from compat_tests.wire_client import WireClient

SETTINGS = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS"}
Creation = CreateAclsRequest.AclCreation
Filter = DeleteAclsRequest.DeleteAclsFilter
TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5
ANY, LITERAL, PREFIXED = 1, 3, 4
READ, WRITE, ALTER, IDEMPOTENT_WRITE = 3, 4, 7, 12
DENY, ALLOW = 2, 3


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    running = start_cluster(zookeeper, Path(tmp_path_factory.mktemp("cluster-acls")), SETTINGS)
    try:
        yield running
    finally:
        running.close()


def creation(name="orders", rt=TOPIC, pattern=LITERAL, principal="User:alice", host="*", op=READ, perm=ALLOW):
    return Creation(resource_type=rt, resource_name=name, resource_pattern_type=pattern, principal=principal,
                    host=host, operation=op, permission_type=perm)


def address(broker) -> str:
    return f"{broker.host}:{broker.port}"


def create(bootstrap: str, *creations: Creation) -> list[int]:
    with WireClient(bootstrap) as client:
        return [r.error_code for r in client.request(CreateAclsRequest(creations=list(creations)), 3).results]


def delete(bootstrap: str, **fields) -> list[tuple]:
    wanted = {"resource_type_filter": ANY, "resource_name_filter": None, "pattern_type_filter": ANY,
              "principal_filter": None, "host_filter": None, "operation": ANY, "permission_type": ANY, **fields}
    with WireClient(bootstrap) as client:
        result, = client.request(DeleteAclsRequest(filters=[Filter(**wanted)]), 3).filter_results
    assert result.error_code == 0
    return sorted((m.resource_type, m.resource_name, m.pattern_type, m.principal, m.operation)
                  for m in result.matching_acls)


def described(bootstrap: str) -> list[tuple]:
    with WireClient(bootstrap) as client:
        response = client.request(DescribeAclsRequest(
            resource_type_filter=ANY, resource_name_filter=None, pattern_type_filter=ANY, principal_filter=None,
            host_filter=None, operation=ANY, permission_type=ANY), 3)
    assert response.error_code == 0
    return sorted((r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                   a.permission_type) for r in response.resources for a in r.acls)


def seen_everywhere(cluster: Cluster, expected: list[tuple], timeout: float) -> float:
    """How long after now every broker describes ``expected``; fails after ``timeout``."""
    started = time.monotonic()
    wait(lambda: all(described(address(b)) == expected for b in cluster.brokers if b.running),
         f"every broker to describe {expected}", timeout=timeout)
    return time.monotonic() - started


def test_an_acl_created_on_one_broker_is_described_by_all_within_a_second(cluster):
    first, second, third = cluster.brokers
    assert create(address(first), creation(), creation("app-", pattern=PREFIXED, op=WRITE)) == [0, 0]
    expected = [(TOPIC, "app-", PREFIXED, "User:alice", "*", WRITE, ALLOW),
                (TOPIC, "orders", LITERAL, "User:alice", "*", READ, ALLOW)]
    seen_everywhere(cluster, expected, timeout=1.0)
    # More on the same resource through another broker, and one deleted through the third.
    assert create(address(second), creation(principal="User:bob", op=WRITE, perm=DENY)) == [0]
    expected.append((TOPIC, "orders", LITERAL, "User:bob", "*", WRITE, DENY))
    seen_everywhere(cluster, sorted(expected), timeout=1.0)
    assert delete(address(third), resource_name_filter="orders", principal_filter="User:alice") == [
        (TOPIC, "orders", LITERAL, "User:alice", READ)]
    expected = [e for e in expected if not (e[1] == "orders" and e[3] == "User:alice")]
    seen_everywhere(cluster, sorted(expected), timeout=1.0)
    assert delete(address(first)) == [(TOPIC, "app-", PREFIXED, "User:alice", WRITE),
                                       (TOPIC, "orders", LITERAL, "User:bob", WRITE)]
    seen_everywhere(cluster, [], timeout=1.0)


def test_concurrent_creations_on_one_resource_through_every_broker(cluster):
    """Each broker adds to the same resource node at once: version-checked writes keep them all."""
    import threading

    threads = [threading.Thread(target=create, args=(address(b), *[
        creation("shared", principal=f"User:u{b.node_id}-{i}") for i in range(3)])) for b in cluster.brokers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = sorted((TOPIC, "shared", LITERAL, f"User:u{b.node_id}-{i}", "*", READ, ALLOW)
                      for b in cluster.brokers for i in range(3))
    seen_everywhere(cluster, expected, timeout=5.0)
    delete(address(cluster.brokers[0]), resource_name_filter="shared")
    seen_everywhere(cluster, [], timeout=5.0)


def test_a_restarted_broker_reads_the_acls_again(cluster):
    first, second, _ = cluster.brokers
    second.stop()
    assert create(address(first), creation("while-away", rt=GROUP)) == [0]
    second.start(second.port)
    assert described(address(second)) == [(GROUP, "while-away", LITERAL, "User:alice", "*", READ, ALLOW)]
    delete(address(second), resource_name_filter="while-away")
    seen_everywhere(cluster, [], timeout=5.0)


# -- the layout, against Kafka 3.9 in ZooKeeper mode -------------------------------------------------------------

REQUESTS = [
    [creation(), creation(principal="User:bob", host="10.0.0.1", op=IDEMPOTENT_WRITE, perm=DENY),
     creation("tx-", rt=TXN, pattern=PREFIXED, op=WRITE),
     creation("kafka-cluster", rt=CLUSTER, op=ALTER)],
    [creation("tx-", rt=TXN, pattern=PREFIXED, op=READ)],
    # A name no znode can have is refused alone.
    [creation("a/b", rt=GROUP), creation("c", rt=GROUP)],
]


def _tree(connect: str) -> dict[str, object]:
    """The ACL znodes under ``connect``'s chroot: resource nodes as parsed JSON (ACLs as sorted lists),
    change nodes as their data."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=connect)
    client.start(timeout=15)
    tree: dict[str, object] = {}
    try:
        for root in ("/kafka-acl", "/kafka-acl-extended/prefixed"):
            for kind in client.get_children(root):
                for name in client.get_children(f"{root}/{kind}"):
                    document = json.loads(client.get(f"{root}/{kind}/{name}")[0])
                    document["acls"] = sorted(json.dumps(acl, sort_keys=True) for acl in document["acls"])
                    tree[f"{root}/{kind}/{name}"] = document
            tree[f"{root} types"] = sorted(client.get_children(root))
        for changes in ("/kafka-acl-changes", "/kafka-acl-extended-changes"):
            children = sorted(client.get_children(changes))
            # (In what order one request's resources get their change nodes is a hash's in Kafka.)
            tree[changes] = sorted(client.get(f"{changes}/{child}")[0].decode() for child in children)
    finally:
        client.stop()
        client.close()
    return tree


def test_the_zookeeper_layout_is_kafkas(zookeeper, tmp_path):
    chroots = {name: f"{zookeeper.connect_string}/{name}-{uuid.uuid4().hex[:8]}" for name in ("kafka", "trafka")}
    kafka = ZooKeeperModeKafka(tmp_path / "kafka", chroots["kafka"], overrides=SETTINGS)
    trafka = start_cluster(zookeeper, tmp_path / "trafka", SETTINGS, node_ids=[1],
                           chroot=chroots["trafka"].removeprefix(zookeeper.connect_string))
    try:
        kafka.start()
        answers = {}
        for name, bootstrap in (("kafka", kafka.bootstrap), ("trafka", trafka.bootstrap)):
            answers[name] = [create(bootstrap, *request) for request in REQUESTS]
            answers[name].append(delete(bootstrap, resource_type_filter=TOPIC, principal_filter="User:bob"))
        assert answers["trafka"] == answers["kafka"]
        assert answers["kafka"][2] == [42, 0]
        assert _tree(chroots["trafka"]) == _tree(chroots["kafka"])
    finally:
        trafka.close()
        kafka.close()


# -- enforced by every broker ------------------------------------------------------------------------------------

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


@pytest.fixture(scope="module")
def secured_cluster(zookeeper, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, dict[int, int]]]:
    """Three brokers, each also with a SASL_PLAINTEXT listener (admin, alice): the cluster and each broker's
    SASL port."""
    from compat_tests.ports import free_port

    ports = {node_id: free_port() for node_id in (1, 2, 3)}
    settings = {**SETTINGS, "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS}
    running = start_cluster(zookeeper, Path(tmp_path_factory.mktemp("cluster-acls-sasl")), settings,
                            broker_overrides=lambda node_id: {
                                "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{ports[node_id]}"})
    try:
        yield running, ports
    finally:
        running.close()


def alice_may_describe(port: int) -> bool:
    from trafka.wire.messages import SaslAuthenticateRequest, SaslHandshakeRequest

    with WireClient(f"127.0.0.1:{port}") as client:
        client.request(SaslHandshakeRequest(mechanism="PLAIN"), 1)
        assert client.request(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), 2).error_code == 0
        response = client.request(DescribeAclsRequest(
            resource_type_filter=ANY, resource_name_filter=None, pattern_type_filter=ANY, principal_filter=None,
            host_filter=None, operation=ANY, permission_type=ANY), 3)
    assert response.error_code in (0, 31), response  # NONE, CLUSTER_AUTHORIZATION_FAILED
    return response.error_code == 0


def test_every_broker_enforces_a_change_within_a_second(secured_cluster):
    cluster, ports = secured_cluster
    assert not any(alice_may_describe(port) for port in ports.values())
    describe_on_cluster = creation("kafka-cluster", rt=CLUSTER, op=8)  # DESCRIBE
    assert create(address(cluster.brokers[0]), describe_on_cluster) == [0]
    wait(lambda: all(alice_may_describe(port) for port in ports.values()),
         "alice to be allowed DESCRIBE on the cluster by every broker", timeout=1.0)
    delete(address(cluster.brokers[1]), resource_type_filter=CLUSTER)
    wait(lambda: not any(alice_may_describe(port) for port in ports.values()),
         "alice to be refused by every broker again", timeout=1.0)


def test_the_brokers_replicate_as_the_inter_broker_principal(cluster):
    """Followers fetch, and transaction markers are written, as the inter-broker listener's principal
    (``User:ANONYMOUS`` here, a super user): with the authorizer on, an acks=all producer of a replicated topic and
    a transactional producer are served, and every replica ends byte-identical."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    from compat_tests.cluster import replicas_identical

    topic = f"replicated-{uuid.uuid4().hex[:8]}"
    admin = cluster.admin()
    admin.create_topics([NewTopic(topic, 2, 3, config={"min.insync.replicas": "3"})])[topic].result(timeout=30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    delivered: list[object] = []
    for i in range(20):
        producer.produce(topic, value=b"%d" % i, partition=i % 2, on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0
    assert delivered == [None] * 20
    transactional = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": f"{topic}-txn"})
    transactional.init_transactions(30)
    transactional.begin_transaction()
    transactional.produce(topic, value=b"in a transaction", partition=0)
    transactional.commit_transaction(30)
    wait(lambda: replicas_identical(cluster, topic, 2), "every replica to hold the same records")
