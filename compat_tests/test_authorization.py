"""Authorization with every real client: confluent-kafka, kafka-python, aiokafka, kafkajs and the Java client,
authenticated with SASL/PLAIN as different users of one broker with the StandardAuthorizer, each see every
refusal with the code Kafka gives, while what they may do keeps working.

The ACLs (created by the super user ``admin`` through confluent-kafka's AdminClient):

- alice may WRITE and READ topics whose names begin with ``app-`` (PREFIXED), and READ groups beginning with
  ``app-``;
- bob may READ every topic and every group (the LITERAL ``*`` wildcard), but is DENIED reading ``app-secret``;
- carol has no ACL: refused everything;
- ``admin`` is a super user.

Each client: alice produces to ``app-orders`` and is refused ``other`` (TOPIC_AUTHORIZATION_FAILED), produces
idempotently (WRITE on a topic is enough, KIP-679); bob reads ``app-orders`` in a group and is refused
``app-secret`` (DENY beats the wildcard's ALLOW); alice is refused a group she may not READ
(GROUP_AUTHORIZATION_FAILED: kafkajs logs it and gives up finding the group's coordinator); carol is refused
writing; admin writes anywhere. The denials are counted in the metrics per API and resource type."""
from __future__ import annotations

import asyncio
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from compat_tests.clients import ClientError, ConfluentClient, KafkaPythonClient, Message, error_name
from compat_tests.harness import BrokerProcess
from compat_tests.ports import free_port
from compat_tests.security import SecureJava, SecureKafkajs, java_jaas

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" '
        + " ".join(f'user_{user}="{user}-secret"' for user in ("admin", "alice", "bob", "carol")) + ";")
SETTINGS = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:admin;User:ANONYMOUS",
    "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
}
TOPICS = ("app-orders", "app-secret", "other")
CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka", "kafkajs", "java")


class Broker:
    def __init__(self, process: BrokerProcess, sasl_port: int, metrics_port: int):
        self.process = process
        self.sasl = f"127.0.0.1:{sasl_port}"
        self.metrics = f"http://127.0.0.1:{metrics_port}/metrics"


def _confluent(bootstrap: str, user: str) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.username": user, "sasl.password": f"{user}-secret"}


def _acls(bootstrap: str) -> None:
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    def binding(principal, resource, name, pattern, operation, permission=AclPermissionType.ALLOW):
        return AclBinding(resource, name, pattern, principal, "*", operation, permission)

    topic, group = ResourceType.TOPIC, ResourceType.GROUP
    prefixed, literal = ResourcePatternType.PREFIXED, ResourcePatternType.LITERAL
    bindings = [
        binding("User:alice", topic, "app-", prefixed, AclOperation.WRITE),
        binding("User:alice", topic, "app-", prefixed, AclOperation.READ),
        binding("User:alice", group, "app-", prefixed, AclOperation.READ),
        binding("User:bob", topic, "*", literal, AclOperation.READ),
        binding("User:bob", group, "*", literal, AclOperation.READ),
        binding("User:bob", topic, "app-secret", literal, AclOperation.READ, AclPermissionType.DENY),
    ]
    admin = AdminClient(_confluent(bootstrap, "admin"))
    for future in admin.create_acls(bindings, request_timeout=10).values():
        future.result(timeout=15)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    data_dir = Path(tmp_path_factory.mktemp("authorization"))
    sasl_port, metrics_port = free_port(), free_port()
    process = BrokerProcess(data_dir, name="trafka", overrides={
        **SETTINGS, "metrics.port": metrics_port,
        "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}"})
    process.start()
    try:
        running = Broker(process, sasl_port, metrics_port)
        admin = ConfluentClient(process.bootstrap)  # PLAINTEXT: anonymous, a super user
        for name in TOPICS:
            admin.create_topic(name, 1)
            admin.produce(name, [Message(b"%d" % i) for i in range(5)])
        _acls(running.sasl)
        yield running
    finally:
        process.close()


# -- each client's way of producing and of reading in a group, as a user; refusals raise ClientError ---------


def _produce(client: str, broker: Broker, user: str, topic: str, *, idempotent: bool = False) -> None:
    values = [Message(b"by-" + user.encode())]
    if client == "confluent-kafka":
        from confluent_kafka import KafkaException

        try:  # refused at once when the producer's metadata already says so, else in the delivery report
            ConfluentClient(broker.sasl).produce(topic, values, **{
                k: v for k, v in _confluent(broker.sasl, user).items() if k != "bootstrap.servers"},
                **{"enable.idempotence": idempotent, "message.timeout.ms": 10_000})
        except KafkaException as exc:
            raise ClientError(client, error_name(exc.args[0].code()), str(exc)) from exc
    elif client == "kafka-python":
        KafkaPythonClient(broker.sasl).produce(topic, values, security_protocol="SASL_PLAINTEXT",
                                               sasl_mechanism="PLAIN", sasl_plain_username=user,
                                               sasl_plain_password=f"{user}-secret", enable_idempotence=idempotent,
                                               max_block_ms=10_000)
    elif client == "aiokafka":
        asyncio.run(_aiokafka_produce(broker, user, topic, idempotent))
    elif client == "kafkajs":
        SecureKafkajs(broker.sasl, {"sasl": {"mechanism": "plain", "username": user, "password": f"{user}-secret"},
                                    "retries": 1}).produce(topic, values, idempotent=idempotent)
    else:
        _java(broker, user).produce(topic, values, **{"enable.idempotence": str(idempotent).lower(),
                                                      "max.block.ms": "10000", "delivery.timeout.ms": "10000",
                                                      "request.timeout.ms": "5000"})


async def _aiokafka_produce(broker: Broker, user: str, topic: str, idempotent: bool) -> None:
    import aiokafka.errors
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=broker.sasl, **_aiokafka_security(user),
                                enable_idempotence=idempotent, request_timeout_ms=10_000)
    try:
        await producer.start()
        await producer.send_and_wait(topic, b"by-" + user.encode())
    except aiokafka.errors.KafkaError as exc:
        raise ClientError("aiokafka", error_name(getattr(exc, "errno", None)), repr(exc)) from exc
    finally:
        await producer.stop()


def _aiokafka_security(user: str) -> dict[str, str]:
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": user,
            "sasl_plain_password": f"{user}-secret"}


def _java(broker: Broker, user: str) -> SecureJava:
    return SecureJava(broker.sasl, {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                    "sasl.jaas.config": java_jaas("PLAIN", user, f"{user}-secret")})


def _group_read(client: str, broker: Broker, user: str, topic: str, group: str, count: int = 5) -> int:
    """Read ``count`` records of ``topic`` as a member of ``group``: how many were read."""
    if client == "confluent-kafka":
        return _confluent_group_read(broker, user, topic, group, count)
    if client == "kafka-python":
        return _kafka_python_group_read(broker, user, topic, group, count)
    if client == "aiokafka":
        return asyncio.run(_aiokafka_group_read(broker, user, topic, group, count))
    if client == "kafkajs":
        security = {"sasl": {"mechanism": "plain", "username": user, "password": f"{user}-secret"}, "retries": 1}
        return len(SecureKafkajs(broker.sasl, security).consume(topic, count, group_id=group, timeout=20))
    return len(_java(broker, user).call("group_consume", group_id=group, topics=[topic], count=count,
                                        timeout=60))


def _confluent_group_read(broker: Broker, user: str, topic: str, group: str, count: int) -> int:
    from confluent_kafka import Consumer

    consumer = Consumer({**_confluent(broker.sasl, user), "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    read, deadline = 0, time.monotonic() + 20
    try:
        while read < count and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                error = message.error()
                raise ClientError("confluent-kafka", error_name(error.code()), error.str())
            read += 1
        return read
    finally:
        consumer.close()


def _kafka_python_group_read(broker: Broker, user: str, topic: str, group: str, count: int) -> int:
    import kafka.errors
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=broker.sasl, group_id=group, auto_offset_reset="earliest",
                             security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_plain_username=user,
                             sasl_plain_password=f"{user}-secret", request_timeout_ms=15_000)
    read, deadline = 0, time.monotonic() + 20
    try:
        while read < count and time.monotonic() < deadline:
            read += sum(len(batch) for batch in consumer.poll(timeout_ms=200).values())
        return read
    except kafka.errors.KafkaError as exc:
        raise ClientError("kafka-python", error_name(getattr(exc, "errno", None)), repr(exc)) from exc
    finally:
        consumer.close()


async def _aiokafka_group_read(broker: Broker, user: str, topic: str, group: str, count: int) -> int:
    import aiokafka.errors
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=broker.sasl, group_id=group, auto_offset_reset="earliest",
                                **_aiokafka_security(user))
    read, deadline = 0, time.monotonic() + 20
    try:
        await consumer.start()
        while read < count and time.monotonic() < deadline:
            read += sum(len(batch) for batch in (await consumer.getmany(timeout_ms=200)).values())
        return read
    except aiokafka.errors.KafkaError as exc:
        raise ClientError("aiokafka", error_name(getattr(exc, "errno", None)), repr(exc)) from exc
    finally:
        await consumer.stop()


def refused(action: Callable[[], object]) -> str | None:
    """The Kafka error name the client reported refusing ``action``."""
    with pytest.raises(ClientError) as failure:
        action()
    return failure.value.error


def _group(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# -- the tests ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS)
def test_a_producer_writes_where_a_prefixed_acl_allows_and_is_refused_elsewhere(broker, client):
    _produce(client, broker, "alice", "app-orders")
    assert refused(lambda: _produce(client, broker, "alice", "other")) == "TOPIC_AUTHORIZATION_FAILED"
    _produce(client, broker, "alice", "app-orders")  # still served after the refusal


@pytest.mark.parametrize("client", CLIENTS)
def test_an_idempotent_producer_needs_only_write_on_its_topic(broker, client):
    _produce(client, broker, "alice", "app-orders", idempotent=True)


@pytest.mark.parametrize("client", CLIENTS)
def test_a_user_without_acls_is_refused_and_a_super_user_is_not(broker, client):
    assert refused(lambda: _produce(client, broker, "carol", "app-orders")) == "TOPIC_AUTHORIZATION_FAILED"
    _produce(client, broker, "admin", "other")


@pytest.mark.parametrize("client", CLIENTS)
def test_a_wildcard_reader_is_denied_the_topic_a_deny_names(broker, client):
    assert _group_read(client, broker, "bob", "app-orders", _group("bob")) >= 5
    assert refused(lambda: _group_read(client, broker, "bob", "app-secret", _group("bob"))) == \
        "TOPIC_AUTHORIZATION_FAILED"


@pytest.mark.parametrize("client", CLIENTS)
def test_a_group_the_reader_may_not_read_is_refused(broker, client):
    assert _group_read(client, broker, "alice", "app-orders", _group("app")) >= 5
    with pytest.raises(ClientError) as failure:
        _group_read(client, broker, "alice", "app-orders", _group("other"))
    if client == "kafkajs":  # it logs the broker's refusal and gives up with KafkaJSGroupCoordinatorNotFound
        assert "Group authorization failed" in failure.value.detail, failure.value.detail
    else:
        assert failure.value.error == "GROUP_AUTHORIZATION_FAILED", failure.value.detail


def test_denials_are_counted_per_api_and_resource_type(broker):
    assert refused(lambda: _produce("confluent-kafka", broker, "carol", "app-orders")) == \
        "TOPIC_AUTHORIZATION_FAILED"
    metrics = urllib.request.urlopen(broker.metrics, timeout=10).read().decode()
    counted = [line for line in metrics.splitlines() if line.startswith("trafka_authorization_denials_total{")]
    assert any('resource_type="TOPIC"' in line for line in counted), counted
