"""Admin APIs through each client's admin interface: CreateTopics (with configs), the errors
TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS and INVALID_REPLICATION_FACTOR, DescribeConfigs,
CreatePartitions and DeleteTopics, and auto-creation of topics on produce."""

from __future__ import annotations

import pytest

from compat_tests.clients import CLIENTS, ClientError, client_names, numbered_messages, assert_round_trip
from compat_tests.harness import wait_until

ADMIN_CLIENTS = client_names("admin")


@pytest.mark.parametrize("client", ADMIN_CLIENTS)
def test_create_describe_and_delete_topic(broker, topic, client_for, client):
    admin = client_for(client, broker)
    name = topic()

    admin.create_topic(name, 3, configs={"retention.ms": "3600000", "cleanup.policy": "delete"})

    assert name in admin.list_topics()
    assert admin.partitions(name) == [0, 1, 2]
    configs = admin.describe_configs(name)
    assert configs["retention.ms"] == "3600000"
    assert configs["cleanup.policy"] == "delete"
    assert "segment.bytes" in configs and "max.message.bytes" in configs, sorted(configs)

    admin.delete_topic(name)
    wait_until(lambda: name not in admin.list_topics(), message=f"{name} to disappear from metadata")


@pytest.mark.parametrize("client", ADMIN_CLIENTS)
def test_topic_already_exists(broker, topic, client_for, client):
    admin = client_for(client, broker)
    name = topic()
    admin.create_topic(name, 2)

    with pytest.raises(ClientError) as refused:
        admin.create_topic(name, 2)

    assert refused.value.error == "TOPIC_ALREADY_EXISTS", refused.value
    assert admin.partitions(name) == [0, 1]


@pytest.mark.parametrize("client", ADMIN_CLIENTS)
def test_invalid_replication_factor(broker, topic, client_for, client):
    admin = client_for(client, broker)
    name = topic()

    with pytest.raises(ClientError) as refused:
        admin.create_topic(name, 1, replication_factor=3)  # one broker cannot hold three replicas

    assert refused.value.error == "INVALID_REPLICATION_FACTOR", refused.value
    assert name not in admin.list_topics()


@pytest.mark.parametrize("client", ADMIN_CLIENTS)
def test_create_topic_with_no_partitions(broker, topic, client_for, client):
    admin = client_for(client, broker)
    name = topic()

    with pytest.raises(ClientError) as refused:
        admin.create_topic(name, 0)

    assert refused.value.error == "INVALID_PARTITIONS", refused.value
    assert name not in admin.list_topics()


@pytest.mark.parametrize("client", ADMIN_CLIENTS)
def test_create_partitions(broker, topic, client_for, client):
    admin = client_for(client, broker)
    name = topic(partitions=2)

    admin.create_partitions(name, 5)

    wait_until(lambda: admin.partitions(name) == [0, 1, 2, 3, 4], message=f"{name} to have 5 partitions")
    messages = numbered_messages(5, partitions=5)
    producer = CLIENTS["confluent-kafka"](broker.bootstrap)
    deliveries = producer.produce(name, messages)
    assert_round_trip(messages, deliveries, producer.consume(name, 5))


@pytest.mark.parametrize("client", ADMIN_CLIENTS)
def test_create_partitions_cannot_shrink(broker, topic, client_for, client):
    admin = client_for(client, broker)
    name = topic(partitions=3)

    with pytest.raises(ClientError) as refused:
        admin.create_partitions(name, 2)

    assert refused.value.error == "INVALID_PARTITIONS", refused.value
    assert admin.partitions(name) == [0, 1, 2]


@pytest.mark.parametrize("client", ADMIN_CLIENTS)
def test_delete_unknown_topic(broker, topic, client_for, client):
    admin = client_for(client, broker)

    with pytest.raises(ClientError) as refused:
        admin.delete_topic(topic())

    assert refused.value.error == "UNKNOWN_TOPIC_OR_PARTITION", refused.value


@pytest.mark.parametrize("client", list(CLIENTS))
def test_produce_auto_creates_topic(broker, topic, client_for, client):
    """Producing to an unknown topic creates it with the broker's defaults (one partition)."""
    adapter = client_for(client, broker)
    name = topic()
    messages = numbered_messages(3, prefix=client)

    deliveries = adapter.produce(name, messages)

    assert adapter.partitions(name) == [0]
    assert name in adapter.list_topics()
    assert_round_trip(messages, deliveries, CLIENTS["confluent-kafka"](broker.bootstrap).consume(name, 3))


def test_kafka_python_lists_config_resources(broker, topic):
    from kafka import KafkaAdminClient

    name = topic(partitions=1)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, client_id="compat-config-resources")
    try:
        every = admin.list_config_resources()
        topics_only = admin.list_config_resources(["topic"])
    finally:
        admin.close()

    assert name in every["topic"] and every["broker"] == [str(broker.node_id)], every
    assert set(topics_only) == {"topic"} and name in topics_only["topic"], topics_only


def test_confluent_kafka_sets_a_dynamic_broker_config(broker_factory, topic):
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                       ResourceType)

    broker = broker_factory()
    name = topic(partitions=1, on=broker)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    this_broker = ConfigResource(ResourceType.BROKER, str(broker.node_id), incremental_configs=[
        ConfigEntry("log.retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([this_broker]).values():
        future.result(20)

    [described] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, name)]).values()
    retention = described.result(20)["retention.ms"]
    assert (retention.value, retention.source) == ("3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)

    refused = ConfigResource(ResourceType.BROKER, str(broker.node_id), incremental_configs=[
        ConfigEntry("num.partitions", "4", incremental_operation=AlterConfigOpType.SET)])
    [future] = admin.incremental_alter_configs([refused]).values()
    with pytest.raises(Exception, match="Cannot update these configs dynamically"):
        future.result(20)


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_no_auto_creation_when_auto_create_topics_enable_is_false(broker_factory, topic, client_for, client):
    broker = broker_factory({"auto.create.topics.enable": "false"})
    name = topic()
    adapter = client_for(client, broker)

    with pytest.raises(ClientError) as refused:
        adapter.produce(name, numbered_messages(1), **{"message.timeout.ms": 3000} if client == "confluent-kafka"
                        else {"max_block_ms": 3000})

    # The clients wait for the topic to appear (as with Apache Kafka), and give up.
    assert any(word in str(refused.value).lower() for word in ("timed out", "timeout")), refused.value
    assert name not in adapter.list_topics()
    assert not list(broker.data_dir.glob(f"{name}-*"))
