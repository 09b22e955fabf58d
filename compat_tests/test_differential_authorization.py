"""Authorization side by side: Apache Kafka 4.4 (StandardAuthorizer) and trafka started with the same SASL
users, topics, groups and ACLs; the same requests of every API sent to both by users with some rights (alice)
and with none (bob), and what a client sees compared: every error code and message in the answers, with the
names they belong to, which topics, groups and transactional ids are listed, and the authorized operations
reported.

The ACLs: alice may WRITE to ``orders``, READ every topic whose name begins with ``ord`` (but is DENIED
reading ``ordinal``), DESCRIBE_CONFIGS of ``orders``, CREATE topics beginning with ``new-``, READ group
``g-alice`` and WRITE transactional id ``tx-alice``. bob has no ACL at all. The PLAINTEXT listener (anonymous)
and ``User:admin`` are super users: the fixture prepares topics and groups through them."""
from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from trafka.broker.security.authorizer import (
    AclOperation,
    AclPermissionType,
    AclResourceType,
    PatternType,
)
from trafka.wire import messages as m
from trafka.wire.primitives import Struct
from trafka.wire.records import build_batch

from compat_tests.harness import BrokerProcess
from compat_tests.ports import free_port
from compat_tests.reference import KafkaBroker
from compat_tests.wire_client import WireClient

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" '
        'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret";')
SETTINGS = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin;User:ANONYMOUS",
    "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    "auto.create.topics.enable": "true",
}
TOPICS = {"orders": 2, "ordinal": 1, "secret": 1}
GROUPS = ("g-alice", "g-other")
USERS = ("alice", "bob")

T, G, C, X = AclResourceType.TOPIC, AclResourceType.GROUP, AclResourceType.CLUSTER, AclResourceType.TRANSACTIONAL_ID
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
ACLS = [
    (T, "orders", LITERAL, AclOperation.WRITE, ALLOW),
    (T, "ord", PREFIXED, AclOperation.READ, ALLOW),
    (T, "ordinal", LITERAL, AclOperation.READ, DENY),
    (T, "orders", LITERAL, AclOperation.DESCRIBE_CONFIGS, ALLOW),
    (T, "new-", PREFIXED, AclOperation.CREATE, ALLOW),
    (G, "g-alice", LITERAL, AclOperation.READ, ALLOW),
    (X, "tx-alice", LITERAL, AclOperation.WRITE, ALLOW),
]


def _prepare(bootstrap: str) -> None:
    """As a super user: the topics (with a record in each partition), the ACLs, and the groups (each with a
    committed offset)."""
    with WireClient(bootstrap) as client:
        response = client.request(m.CreateTopicsRequest(timeout_ms=30_000, topics=[
            m.CreateTopicsRequest.CreatableTopic(name=name, num_partitions=count, replication_factor=1)
            for name, count in TOPICS.items()]), 5)
        assert {t.error_code for t in response.topics} == {0}, response
        Creation = m.CreateAclsRequest.AclCreation
        response = client.request(m.CreateAclsRequest(creations=[
            Creation(resource_type=rt, resource_name=name, resource_pattern_type=pattern, principal="User:alice",
                     host="*", operation=op, permission_type=permission)
            for rt, name, pattern, op, permission in ACLS]), 3)
        assert {r.error_code for r in response.results} == {0}, response
        for name, count in TOPICS.items():
            for partition in range(count):
                _produce_until_ready(client, name, partition)
        for group in GROUPS:
            deadline = time.monotonic() + 30
            while True:  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR at first
                client.request(m.FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4)  # creates the topic
                response = client.request(m.OffsetCommitRequest(
                    group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
                        m.OffsetCommitRequest.OffsetCommitRequestTopic(name="orders", partitions=[
                            m.OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0,
                                                                               committed_offset=1)])]), 8)
                code = response.topics[0].partitions[0].error_code
                if code == 0:
                    break
                assert code in (14, 15, 16) and time.monotonic() < deadline, response
                time.sleep(0.1)


def _produce_until_ready(client: WireClient, name: str, partition: int) -> None:
    deadline = time.monotonic() + 20
    while True:
        response = client.request(_produce_request(name, partition), 9)
        code = response.responses[0].partition_responses[0].error_code
        if code == 0:
            return
        assert code in (3, 6) and time.monotonic() < deadline, response
        time.sleep(0.05)


def _produce_request(name: str, partition: int = 0, transactional_id: str | None = None,
                     records: bytes | None = None) -> m.ProduceRequest:
    return m.ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=10_000, topic_data=[
        m.ProduceRequest.TopicProduceData(name=name, partition_data=[
            m.ProduceRequest.PartitionProduceData(index=partition, records=records or build_batch([(b"k", b"v")]))])])


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[object, int]]]:
    """Kafka and trafka, each with a PLAINTEXT listener (anonymous: a super user) and a SASL_PLAINTEXT one
    (PLAIN: admin, alice, bob), the same topics, groups and ACLs: by name, the process and its SASL port."""
    root = Path(tmp_path_factory.mktemp("differential-authorization"))
    kafka = KafkaBroker(root / "kafka", overrides=SETTINGS, listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"})
    sasl_port = free_port()
    trafka_dir = root / "trafka"
    trafka_dir.mkdir()
    trafka = BrokerProcess(trafka_dir, name="trafka", overrides={
        **SETTINGS, "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}"})
    try:
        kafka.start()
        trafka.start()
        for process in (kafka, trafka):
            _prepare(process.bootstrap)
        yield {"kafka": (kafka, kafka.ports["SASL_PLAINTEXT"]), "trafka": (trafka, sasl_port)}
    finally:
        trafka.close()
        kafka.close()


def _login(client: WireClient, user: str) -> None:
    response = client.request(m.SaslHandshakeRequest(mechanism="PLAIN"), 1)
    assert response.error_code == 0, response
    token = b"\0" + user.encode() + b"\0" + user.encode() + b"-secret"
    response = client.request(m.SaslAuthenticateRequest(auth_bytes=token), 2)
    assert response.error_code == 0, response


#: The fields that say which thing an answer is about.
IDENTITY = frozenset({"name", "topic", "group_id", "transactional_id", "partition_index", "partition", "index",
                      "resource_name", "resource_type", "user", "key", "partition_id", "producer_id_filters"})


def _is_fact(name: str) -> bool:
    return name.endswith(("error_code", "error_message", "authorized_operations"))


#: Kafka's refusals of cluster operations name its internal request object ("Request Request(processor=2,
#: connectionId=..., buffer=...) needs ALTER permission."); trafka names the API. Compared without the name.
_REQUEST_REFUSAL = re.compile(r"^Request (Request\(.*\)|[A-Z_]+) (is not authorized\.|needs \w+ permission\.)$",
                              re.DOTALL)


def _fact(value: object) -> object:
    if isinstance(value, str):
        return _REQUEST_REFUSAL.sub(r"Request <request> \2", value)
    return value


def outcome(response: Struct) -> list:
    """What a client sees of ``response``: every error code, error message and authorized operations, and
    every named thing listed, each with the names of the things it sits in, sorted (the brokers may order
    their answers differently)."""
    seen: list = []

    def walk(node: object, path: tuple) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item, path)
            return
        if not isinstance(node, Struct):
            return
        values = {name: getattr(node, name) for name in node.__slots__}
        identity = tuple((name, value) for name, value in values.items()
                         if name in IDENTITY and not isinstance(value, (list, Struct)))
        facts = tuple((name, _fact(value)) for name, value in values.items() if _is_fact(name))
        if identity or facts:
            seen.append((path + identity, facts))
        for name, value in values.items():
            if isinstance(value, (list, Struct)):
                walk(value, path + identity + (name,))

    walk(response, ())
    return sorted(seen, key=repr)


def on_both(brokers, user: str, ask: Callable[[WireClient], object]) -> dict[str, object]:
    observed = {}
    for name, (_process, sasl_port) in brokers.items():
        with WireClient(f"127.0.0.1:{sasl_port}") as client:
            _login(client, user)
            observed[name] = ask(client)
    return observed


def assert_same(observed: dict[str, object]) -> None:
    assert observed["trafka"] == observed["kafka"], observed


def request(message: Struct, version: int) -> Callable[[WireClient], object]:
    return lambda client: outcome(client.request(message, version))


def _topic_partitions(cls, field: str, names=("orders", "ordinal", "secret", "missing")):
    return [cls(**{field: name}) for name in names]


def _fetch() -> m.FetchRequest:
    return m.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                          session_id=0, session_epoch=-1, topics=[
                              m.FetchRequest.FetchTopic(topic=name, partitions=[m.FetchRequest.FetchPartition(
                                  partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])
                              for name in ("orders", "ordinal", "secret", "missing")], forgotten_topics_data=[],
                          rack_id="")


def _offset_commit(group: str) -> m.OffsetCommitRequest:
    return m.OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        m.OffsetCommitRequest.OffsetCommitRequestTopic(name=name, partitions=[
            m.OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=1)])
        for name in ("orders", "ordinal", "secret", "missing")])


def _offset_fetch() -> m.OffsetFetchRequest:
    Group = m.OffsetFetchRequest.OffsetFetchRequestGroup
    Topics = m.OffsetFetchRequest.OffsetFetchRequestTopics
    return m.OffsetFetchRequest(groups=[
        Group(group_id="g-alice", topics=[Topics(name=name, partition_indexes=[0])
                                          for name in ("orders", "ordinal", "secret")]),
        Group(group_id="g-alice", topics=None),
        Group(group_id="g-other", topics=None),
    ], require_stable=False)


def _create_topics(user: str) -> m.CreateTopicsRequest:
    return m.CreateTopicsRequest(timeout_ms=30_000, validate_only=True, topics=[
        m.CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=1)
        for name in (f"new-{user}", f"old-{user}", "orders")])


def _describe_configs() -> m.DescribeConfigsRequest:
    Resource = m.DescribeConfigsRequest.DescribeConfigsResource
    return m.DescribeConfigsRequest(resources=[
        Resource(resource_type=2, resource_name="orders", configuration_keys=["cleanup.policy"]),
        Resource(resource_type=2, resource_name="secret", configuration_keys=["cleanup.policy"]),
        Resource(resource_type=4, resource_name="", configuration_keys=["log.retention.ms"]),
    ])


def _incremental_alter_configs() -> m.IncrementalAlterConfigsRequest:
    Resource = m.IncrementalAlterConfigsRequest.AlterConfigsResource
    Config = m.IncrementalAlterConfigsRequest.AlterableConfig
    return m.IncrementalAlterConfigsRequest(validate_only=True, resources=[
        Resource(resource_type=2, resource_name="orders", configs=[
            Config(name="retention.ms", config_operation=0, value="1000")]),
        Resource(resource_type=4, resource_name="", configs=[
            Config(name="log.retention.ms", config_operation=0, value="1000")]),
    ])


def _transaction_id_requests(transactional_id: str) -> list[tuple[Struct, int]]:
    Topic = m.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    Partition = m.TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition
    return [
        (m.InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=60_000), 4),
        (m.AddOffsetsToTxnRequest(transactional_id=transactional_id, producer_id=1000, producer_epoch=0,
                                  group_id="g-alice"), 3),
        (m.TxnOffsetCommitRequest(transactional_id=transactional_id, group_id="g-other", producer_id=1000,
                                  producer_epoch=0, generation_id=-1, member_id="", topics=[
                                      Topic(name="orders", partitions=[Partition(partition_index=0,
                                                                                  committed_offset=1)])]), 3),
        (m.EndTxnRequest(transactional_id=transactional_id, producer_id=1000, producer_epoch=0, committed=True), 3),
        (m.AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=1000,
            v3_and_below_producer_epoch=0, v3_and_below_topics=[
                m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=name, partitions=[0])
                for name in ("orders", "secret")]), 3),
    ]


CASES: dict[str, Callable[[str], list[tuple[Struct, int]]]] = {
    "metadata-all": lambda user: [(m.MetadataRequest(topics=None, include_topic_authorized_operations=True), 12)],
    "metadata-named": lambda user: [(m.MetadataRequest(
        topics=_topic_partitions(m.MetadataRequest.MetadataRequestTopic, "name"), allow_auto_topic_creation=False,
        include_cluster_authorized_operations=True, include_topic_authorized_operations=True), 10)],
    "metadata-auto-create-refused": lambda user: [(m.MetadataRequest(
        topics=[m.MetadataRequest.MetadataRequestTopic(name=f"old-{user}")], allow_auto_topic_creation=True), 12)],
    "produce": lambda user: [(_produce_request(name), 9) for name in ("orders", "ordinal", "secret", "missing")],
    "produce-transactional": lambda user: [(_produce_request("orders", transactional_id=txn, records=build_batch(
        [(b"k", b"v")], producer_id=1000, producer_epoch=0, base_sequence=0, is_transactional=True)), 9)
        for txn in ("tx-alice", "tx-other")],
    "fetch": lambda user: [(_fetch(), 12)],
    "list-offsets": lambda user: [(m.ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        m.ListOffsetsRequest.ListOffsetsTopic(name=name, partitions=[
            m.ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])
        for name in ("orders", "ordinal", "secret", "missing")]), 7)],
    "offset-commit": lambda user: [(_offset_commit(group), 8) for group in GROUPS],
    "offset-fetch": lambda user: [(_offset_fetch(), 8)],
    "find-coordinator": lambda user: [
        (m.FindCoordinatorRequest(key_type=0, coordinator_keys=list(GROUPS)), 4),
        (m.FindCoordinatorRequest(key_type=1, coordinator_keys=["tx-other"]), 4),
        (m.FindCoordinatorRequest(key="g-other", key_type=0), 3),
    ],
    "classic-group": lambda user: [
        (request_, version) for group in GROUPS for request_, version in [
            (m.JoinGroupRequest(group_id=group, session_timeout_ms=30_000, rebalance_timeout_ms=30_000,
                                member_id="", protocol_type="consumer", protocols=[
                                    m.JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]), 7),
            (m.HeartbeatRequest(group_id=group, generation_id=1, member_id="nobody"), 4),
            (m.SyncGroupRequest(group_id=group, generation_id=1, member_id="nobody", protocol_type="consumer",
                                protocol_name="range", assignments=[]), 5),
            (m.LeaveGroupRequest(group_id=group, members=[
                m.LeaveGroupRequest.MemberIdentity(member_id="nobody")]), 5),
        ]],
    "describe-groups": lambda user: [(m.DescribeGroupsRequest(groups=list(GROUPS),
                                                              include_authorized_operations=True), 5)],
    "list-groups": lambda user: [(m.ListGroupsRequest(states_filter=[]), 4)],
    "delete-groups": lambda user: [(m.DeleteGroupsRequest(groups_names=list(GROUPS)), 2)],
    "offset-delete": lambda user: [(m.OffsetDeleteRequest(group_id=group, topics=[
        m.OffsetDeleteRequest.OffsetDeleteRequestTopic(name="orders", partitions=[
            m.OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])]), 0) for group in GROUPS],
    "create-topics": lambda user: [(_create_topics(user), 7)],
    "delete-topics": lambda user: [(m.DeleteTopicsRequest(timeout_ms=30_000, topics=[
        m.DeleteTopicsRequest.DeleteTopicState(name=name) for name in ("orders", "secret", "missing")]), 6)],
    "create-partitions": lambda user: [(m.CreatePartitionsRequest(timeout_ms=30_000, validate_only=True, topics=[
        m.CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=5)
        for name in ("orders", "secret", "missing")]), 3)],
    "delete-records": lambda user: [(m.DeleteRecordsRequest(timeout_ms=30_000, topics=[
        m.DeleteRecordsRequest.DeleteRecordsTopic(name=name, partitions=[
            m.DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=0)])
        for name in ("orders", "secret", "missing")]), 2)],
    "init-producer-id-idempotent": lambda user: [(m.InitProducerIdRequest(transaction_timeout_ms=-1), 4)],
    "transactions-not-allowed": lambda user: _transaction_id_requests("tx-other"),
    "describe-configs": lambda user: [(_describe_configs(), 4)],
    "alter-configs": lambda user: [(_incremental_alter_configs(), 1)],
    "describe-log-dirs": lambda user: [(m.DescribeLogDirsRequest(topics=None), 4)],
    "describe-cluster": lambda user: [(m.DescribeClusterRequest(include_cluster_authorized_operations=True,
                                                                endpoint_type=1), 1)],
    "describe-producers": lambda user: [(m.DescribeProducersRequest(topics=[
        m.DescribeProducersRequest.TopicRequest(name=name, partition_indexes=[0])
        for name in ("orders", "secret", "missing")]), 0)],
    "describe-transactions": lambda user: [(m.DescribeTransactionsRequest(transactional_ids=["tx-alice",
                                                                                            "tx-other"]), 0)],
    "list-transactions": lambda user: [(m.ListTransactionsRequest(state_filters=[], producer_id_filters=[]), 1)],
    "elect-leaders": lambda user: [(m.ElectLeadersRequest(election_type=0, timeout_ms=10_000, topic_partitions=[
        m.ElectLeadersRequest.TopicPartitions(topic="orders", partitions=[0])]), 2)],
    "scram-credentials": lambda user: [
        # (not users=None: Kafka 4.4 fails with a NullPointerException refusing it, and never answers)
        (m.DescribeUserScramCredentialsRequest(users=[
            m.DescribeUserScramCredentialsRequest.UserName(name=name) for name in ("alice", "nobody")]), 0),
        (m.AlterUserScramCredentialsRequest(deletions=[
            m.AlterUserScramCredentialsRequest.ScramCredentialDeletion(name="alice", mechanism=1)], upsertions=[]), 0),
    ],
    "partition-reassignments": lambda user: [
        (m.ListPartitionReassignmentsRequest(timeout_ms=10_000, topics=None), 0),
        (m.AlterPartitionReassignmentsRequest(timeout_ms=10_000, topics=[
            m.AlterPartitionReassignmentsRequest.ReassignableTopic(name="orders", partitions=[
                m.AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=0, replicas=None)])]), 0),
    ],
    "list-config-resources": lambda user: [(m.ListConfigResourcesRequest(resource_types=[]), 1)],
    "describe-topic-partitions": lambda user: [
        (m.DescribeTopicPartitionsRequest(topics=[], response_partition_limit=100), 0),
        (m.DescribeTopicPartitionsRequest(topics=_topic_partitions(
            m.DescribeTopicPartitionsRequest.TopicRequest, "name"), response_partition_limit=100), 0),
    ],
    "consumer-group": lambda user: [
        (m.ConsumerGroupHeartbeatRequest(group_id=group, member_id="", member_epoch=0, rebalance_timeout_ms=30_000,
                                         subscribed_topic_names=topics, server_assignor="uniform",
                                         topic_partitions=[]), 0)
        for group, topics in (("g-alice", ["secret"]), ("g-other", ["orders"]))] + [
        (m.ConsumerGroupDescribeRequest(group_ids=list(GROUPS), include_authorized_operations=True), 0)],
    "inter-broker-requests": lambda user: [
        (m.FetchRequest(replica_id=1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0, session_id=0,
                        session_epoch=-1, topics=[m.FetchRequest.FetchTopic(topic="orders", partitions=[
                            m.FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
                        forgotten_topics_data=[], rack_id=""), 12),
        (m.WriteTxnMarkersRequest(markers=[m.WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=1000, producer_epoch=0, transaction_result=True, coordinator_epoch=0, topics=[
                m.WriteTxnMarkersRequest.WritableTxnMarkerTopic(name="orders", partition_indexes=[0])])]), 1),
        (m.AddPartitionsToTxnRequest(transactions=[m.AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
            transactional_id="tx-alice", producer_id=1000, producer_epoch=0, verify_only=True, topics=[
                m.AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="orders", partitions=[0])])]), 4),
    ],
    "offset-for-leader-epoch": lambda user: [(m.OffsetForLeaderEpochRequest(replica_id=-1, topics=[
        m.OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=name, partitions=[
            m.OffsetForLeaderEpochRequest.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1,
                                                                   leader_epoch=0)])
        for name in ("orders", "secret", "missing")]), 4)],
}


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_same_answers(brokers, case, user):
    def ask(client: WireClient) -> list:
        return [outcome(client.request(message, version)) for message, version in CASES[case](user)]

    assert_same(on_both(brokers, user, ask))
