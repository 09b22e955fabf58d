"""The admin APIs against a real broker served in-process, through real requests on a TCP socket:
CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs, DescribeCluster, DescribeTopicPartitions and DeleteRecords."""
from __future__ import annotations

import uuid

import pytest

from trafka.broker.tests.conftest import KafkaClient, RunningBroker, start_broker
from trafka.storage.config_defs import BROKER_CONFIG_DEFS, DYNAMIC_BROKER_CONFIGS, TOPIC_CONFIG_DEFS, ConfigType
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import (
    AlterConfigsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeTopicPartitionsRequest,
    IncrementalAlterConfigsRequest,
    ListOffsetsRequest,
    MetadataRequest,
    ProduceRequest,
)
from trafka.wire.records import build_batch

ZERO_UUID = uuid.UUID(int=0)
TOPIC = 2
BROKER = 4
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

CreatableTopic = CreateTopicsRequest.CreatableTopic
CreatableTopicConfig = CreateTopicsRequest.CreatableTopicConfig
CreatableReplicaAssignment = CreateTopicsRequest.CreatableReplicaAssignment

#: The topic configs this broker acts on: every topic lists them.
ACTED_ON = {name for name, definition in TOPIC_CONFIG_DEFS.items() if definition.field is not None}


# -- helpers ---------------------------------------------------------------------------------------


def creatable(name: str, partitions: int = 1, replication_factor: int = 1, configs: dict | None = None,
              assignments: list[list[int]] | None = None) -> CreatableTopic:
    return CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=replication_factor,
        assignments=[
            CreatableReplicaAssignment(partition_index=i, broker_ids=ids) for i, ids in enumerate(assignments or [])
        ],
        configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
    )


async def create_topics(client: KafkaClient, *topics: CreatableTopic, version: int = 7, validate_only: bool = False):
    response = await client.request(
        CreateTopicsRequest(topics=list(topics), timeout_ms=5000, validate_only=validate_only), version
    )
    return response.topics


async def create_topic(client: KafkaClient, name: str, partitions: int = 1, configs: dict | None = None):
    (result,) = await create_topics(client, creatable(name, partitions, configs=configs))
    assert result.error_code == ErrorCode.NONE, result
    return result


async def describe_topic_configs(client: KafkaClient, name: str, *, version: int = 4, keys: list[str] | None = None,
                                 synonyms: bool = False, documentation: bool = False):
    response = await client.request(
        DescribeConfigsRequest(
            resources=[DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=TOPIC, resource_name=name, configuration_keys=keys)],
            include_synonyms=synonyms,
            include_documentation=documentation,
        ),
        version,
    )
    (result,) = response.results
    return result


async def describe_broker_configs(client: KafkaClient, name: str, keys: list[str] | None = None):
    response = await client.request(
        DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=BROKER, resource_name=name, configuration_keys=keys)],
            include_synonyms=True, include_documentation=False),
        4,
    )
    (result,) = response.results
    assert result.error_code == ErrorCode.NONE, result
    return result


async def topic_configs(client: KafkaClient, name: str) -> dict[str, str | None]:
    result = await describe_topic_configs(client, name)
    assert result.error_code == ErrorCode.NONE, result
    return {config.name: config.value for config in result.configs}


async def metadata_topic(client: KafkaClient, name: str):
    response = await client.request(
        MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False), 12
    )
    (topic,) = response.topics
    return topic


async def produce(client: KafkaClient, name: str, partition: int, count: int) -> int:
    batch = build_batch([(b"key-%d" % i, b"value-%d" % i) for i in range(count)])
    response = await client.request(
        ProduceRequest(
            acks=-1,
            timeout_ms=5000,
            topic_data=[ProduceRequest.TopicProduceData(
                name=name, partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=batch)])],
        ),
        9,
    )
    result = response.responses[0].partition_responses[0]
    assert result.error_code == ErrorCode.NONE, result
    return result.base_offset


async def earliest_offset(client: KafkaClient, name: str, partition: int) -> int:
    L = ListOffsetsRequest
    response = await client.request(
        L(replica_id=-1, topics=[L.ListOffsetsTopic(name=name, partitions=[L.ListOffsetsPartition(
            partition_index=partition, timestamp=-2)])]),
        7,
    )
    return response.topics[0].partitions[0].offset


# -- CreateTopics ----------------------------------------------------------------------------------


async def test_create_topic_returns_id_counts_and_configs(broker: RunningBroker, client: KafkaClient):
    (result,) = await create_topics(client, creatable("orders", 3, configs={"retention.ms": "3600000"}))

    assert result.error_code == ErrorCode.NONE and result.error_message is None
    topic = broker.broker.topics.get("orders")
    assert topic is not None and len(topic.partitions) == 3
    assert result.topic_id == topic.topic_id != ZERO_UUID
    assert (result.num_partitions, result.replication_factor) == (3, 1)
    configs = {config.name: config for config in result.configs}
    assert set(configs) >= ACTED_ON
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].config_source == DYNAMIC_TOPIC_CONFIG
    assert configs["segment.bytes"].value == "1073741824"
    assert configs["segment.bytes"].config_source == DEFAULT_CONFIG
    assert not any(config.read_only or config.is_sensitive for config in result.configs)
    assert (await metadata_topic(client, "orders")).topic_id == topic.topic_id


async def test_create_topic_defaults_come_from_the_broker(broker_factory):
    running = await broker_factory({"num.partitions": "4", "log.segment.bytes": "2000000"})
    client = await running.client()

    (result,) = await create_topics(client, creatable("defaults", -1, -1))

    assert result.error_code == ErrorCode.NONE, result
    assert (result.num_partitions, result.replication_factor) == (4, 1)
    configs = {config.name: config for config in result.configs}
    assert configs["segment.bytes"].value == "2000000"
    assert configs["segment.bytes"].config_source == STATIC_BROKER_CONFIG
    assert len((await metadata_topic(client, "defaults")).partitions) == 4


async def test_create_topic_v2_has_no_configs_in_the_response(broker: RunningBroker, client: KafkaClient):
    (result,) = await create_topics(client, creatable("old-client", 2), version=2)

    assert result.error_code == ErrorCode.NONE
    assert result.name == "old-client"
    assert len(broker.broker.topics.get("old-client").partitions) == 2


async def test_validate_only_creates_nothing(broker: RunningBroker, client: KafkaClient):
    (result,) = await create_topics(client, creatable("dry-run", 2), validate_only=True)

    assert result.error_code == ErrorCode.NONE
    assert result.num_partitions == 2
    assert broker.broker.topics.get("dry-run") is None
    assert (await metadata_topic(client, "dry-run")).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_validate_only_still_reports_errors(client: KafkaClient):
    await create_topic(client, "exists")

    (result,) = await create_topics(client, creatable("exists"), validate_only=True)

    assert result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS


async def test_existing_topic(client: KafkaClient):
    await create_topic(client, "twice", 2)

    (result,) = await create_topics(client, creatable("twice", 5))

    assert result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    assert result.error_message == "Topic 'twice' already exists."
    assert (result.num_partitions, result.configs) == (-1, [])
    assert len((await metadata_topic(client, "twice")).partitions) == 2


async def test_duplicate_names_in_one_request(broker: RunningBroker, client: KafkaClient):
    results = await create_topics(client, creatable("dup"), creatable("dup", 2), creatable("single"))

    by_name = {result.name: result for result in results}
    assert len(results) == 2
    assert by_name["dup"].error_code == ErrorCode.INVALID_REQUEST
    assert by_name["dup"].error_message == "Duplicate topic name."
    assert by_name["single"].error_code == ErrorCode.NONE
    assert broker.broker.topics.get("dup") is None


@pytest.mark.parametrize(
    ("topic", "error"),
    [
        (creatable("bad/name"), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (creatable(""), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (creatable("x" * 250), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (creatable("__cluster_metadata"), ErrorCode.INVALID_REQUEST),
        (creatable("zero-partitions", 0), ErrorCode.INVALID_PARTITIONS),
        (creatable("negative-partitions", -2), ErrorCode.INVALID_PARTITIONS),
        (creatable("three-replicas", 1, 3), ErrorCode.INVALID_REPLICATION_FACTOR),
        (creatable("zero-replicas", 1, 0), ErrorCode.INVALID_REPLICATION_FACTOR),
        (creatable("bad-value", configs={"retention.ms": "soon"}), ErrorCode.INVALID_CONFIG),
        (creatable("out-of-range", configs={"min.insync.replicas": "0"}), ErrorCode.INVALID_CONFIG),
        (creatable("unknown-config", configs={"no.such.config": "1"}), ErrorCode.INVALID_CONFIG),
        (creatable("null-config", configs={"retention.ms": None}), ErrorCode.INVALID_CONFIG),
    ],
    ids=lambda value: getattr(value, "name", None) or str(value),
)
async def test_create_topic_errors(broker: RunningBroker, client: KafkaClient, topic, error):
    (result,) = await create_topics(client, topic)

    assert result.error_code == error, result
    assert result.error_message
    assert result.topic_id == ZERO_UUID
    assert broker.broker.topics.get(topic.name) is None


async def test_create_topic_collides_with_existing_name(client: KafkaClient):
    await create_topic(client, "metrics.cpu")

    (result,) = await create_topics(client, creatable("metrics_cpu"))

    assert result.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert result.error_message == "Topic 'metrics_cpu' collides with existing topic: metrics.cpu"


async def test_manual_assignment(broker: RunningBroker, client: KafkaClient):
    (result,) = await create_topics(client, creatable("manual", -1, -1, assignments=[[1], [1], [1]]))

    assert result.error_code == ErrorCode.NONE, result
    assert (result.num_partitions, result.replication_factor) == (3, 1)
    assert len(broker.broker.topics.get("manual").partitions) == 3


@pytest.mark.parametrize(
    ("topic", "error", "message"),
    [
        (creatable("with-count", 2, -1, assignments=[[1]]), ErrorCode.INVALID_REQUEST,
         "A manual partition assignment was specified, but numPartitions was not set to -1."),
        (creatable("with-factor", -1, 1, assignments=[[1]]), ErrorCode.INVALID_REQUEST,
         "A manual partition assignment was specified, but replication factor was not set to -1."),
        (creatable("other-broker", -1, -1, assignments=[[2]]), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes broker 2, but no such broker is registered."),
        (creatable("same-broker-twice", -1, -1, assignments=[[1, 1]]), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes the broker 1 more than once."),
        (creatable("empty-replicas", -1, -1, assignments=[[]]), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes an empty replica list."),
    ],
    ids=lambda value: getattr(value, "name", None) or "",
)
async def test_manual_assignment_errors(broker: RunningBroker, client: KafkaClient, topic, error, message):
    (result,) = await create_topics(client, topic)

    assert (result.error_code, result.error_message) == (error, message)
    assert broker.broker.topics.get(topic.name) is None


async def test_manual_assignment_must_be_consecutive(broker: RunningBroker, client: KafkaClient):
    topic = creatable("gap", -1, -1)
    topic.assignments = [CreatableReplicaAssignment(partition_index=i, broker_ids=[1]) for i in (0, 2)]

    (result,) = await create_topics(client, topic)

    assert result.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert result.error_message == "partitions should be a consecutive 0-based integer sequence"


MAX_INT32 = 2**31 - 1


@pytest.mark.parametrize("validate_only", [False, True])
async def test_too_many_partitions_in_one_request_are_refused_whole(
    broker: RunningBroker, client: KafkaClient, validate_only: bool
):
    # 268,435,456 partitions in one int32, and a request whose topics add up past 10,000.
    huge = creatable("huge", 268_435_456)
    many = [creatable("first-half", 5_000), creatable("second-half", 5_000), creatable("one-more", 1)]
    for request in ([huge, creatable("small", 1)], many):
        results = await create_topics(client, *request, validate_only=validate_only)

        assert [(r.name, r.error_code, r.error_message) for r in results] == [
            (topic.name, ErrorCode.POLICY_VIOLATION, "Excessively large number of partitions per request.")
            for topic in request
        ]
    assert broker.broker.topics.get("small") is None and broker.broker.topics.get("first-half") is None
    data_dir = broker.broker.config.data_dir
    assert not any(path.name.startswith(("huge-", "small-", "first-half-")) for path in data_dir.iterdir())


async def test_partitions_per_request_count_defaults_and_assignments(broker_factory):
    running = await broker_factory({"controller.max.records.per.batch": "8", "num.partitions": "2"})
    client = await running.client()
    assigned = creatable("assigned", -1, -1, assignments=[[1], [1]])

    # 2 (the default) + 2 (the assignment) + 1 partitions, and 3 + 3 + 2 records with the topics';
    # a duplicated name and bad counts add nothing.
    results = await create_topics(client, creatable("defaulted", -1), assigned, creatable("one", 1),
                                  creatable("twice", 9), creatable("twice", 9), creatable("negative", -7))
    assert sorted((r.name, r.error_code) for r in results) == [
        ("assigned", ErrorCode.NONE),
        ("defaulted", ErrorCode.NONE),
        ("negative", ErrorCode.INVALID_PARTITIONS),
        ("one", ErrorCode.NONE),
        ("twice", ErrorCode.INVALID_REQUEST),
    ]

    results = await create_topics(client, creatable("nine", 9))
    assert [(r.name, r.error_code, r.error_message) for r in results] == [
        ("nine", ErrorCode.POLICY_VIOLATION, "Excessively large number of partitions per request.")]


async def test_records_per_request_count_topics_partitions_and_configs(broker_factory):
    running = await broker_factory({"controller.max.records.per.batch": "8"})
    client = await running.client()
    configured = creatable("configured", 4, configs={"retention.ms": "1000", "segment.bytes": "1048576"})

    # 1 + 4 + 2 records, and 1 + 1 more: the whole request is refused, even with validate_only.
    for validate_only in (True, False):
        results = await create_topics(client, configured, creatable("other", 1), validate_only=validate_only)
        assert [(r.name, r.error_code, r.error_message) for r in results] == [
            (name, ErrorCode.POLICY_VIOLATION, "Unable to perform excessively large batch operation.")
            for name in ("configured", "other")]
    assert len(running.broker.topics) == 0

    # A topic that fails its own checks records nothing.
    await create_topic(client, "other", 1)
    results = await create_topics(client, configured, creatable("other", 1))
    assert [(r.name, r.error_code) for r in results] == [
        ("configured", ErrorCode.NONE), ("other", ErrorCode.TOPIC_ALREADY_EXISTS)]
    assert len(running.broker.topics.get("configured").partitions) == 4


# -- DeleteTopics ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 3, 5])
async def test_delete_topic_by_name(broker: RunningBroker, client: KafkaClient, version: int):
    await create_topic(client, "doomed", 2)
    log_dir = broker.broker.topics.get("doomed").partitions[0].log.dir

    response = await client.request(DeleteTopicsRequest(topic_names=["doomed"], timeout_ms=5000), version)

    (result,) = response.responses
    assert (result.name, result.error_code) == ("doomed", ErrorCode.NONE)
    assert broker.broker.topics.get("doomed") is None
    assert (await metadata_topic(client, "doomed")).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert not log_dir.exists()


async def test_delete_topic_by_id_and_reuse_the_name(broker: RunningBroker, client: KafkaClient):
    created = await create_topic(client, "reborn", 2)

    response = await client.request(
        DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=created.topic_id)],
                            timeout_ms=5000),
        6,
    )

    (result,) = response.responses
    assert (result.name, result.topic_id, result.error_code) == ("reborn", created.topic_id, ErrorCode.NONE)
    recreated = await create_topic(client, "reborn", 1)
    assert recreated.topic_id != created.topic_id
    assert len((await metadata_topic(client, "reborn")).partitions) == 1


async def test_delete_unknown_topics(client: KafkaClient):
    unknown_id = uuid.uuid4()
    response = await client.request(
        DeleteTopicsRequest(
            topics=[DeleteTopicsRequest.DeleteTopicState(name="never-was"),
                    DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=unknown_id)],
            timeout_ms=5000,
        ),
        6,
    )

    results = {(result.name, result.topic_id): result.error_code for result in response.responses}
    assert results == {
        ("never-was", ZERO_UUID): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        (None, unknown_id): ErrorCode.UNKNOWN_TOPIC_ID,
    }


async def test_delete_topics_invalid_requests(broker: RunningBroker, client: KafkaClient):
    both = await create_topic(client, "named-and-id")
    await create_topic(client, "twice")
    State = DeleteTopicsRequest.DeleteTopicState

    response = await client.request(
        DeleteTopicsRequest(
            topics=[State(name="named-and-id", topic_id=both.topic_id), State(name="twice"), State(name="twice"),
                    State(name=None, topic_id=ZERO_UUID)],
            timeout_ms=5000,
        ),
        6,
    )

    messages = sorted((r.name or "", r.error_code, r.error_message) for r in response.responses)
    assert messages == [
        ("", ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."),
        ("named-and-id", ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id."),
        ("twice", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
    ]
    assert broker.broker.topics.get("named-and-id") is not None
    assert broker.broker.topics.get("twice") is not None


async def test_name_and_id_of_the_same_topic(broker: RunningBroker, client: KafkaClient):
    created = await create_topic(client, "both-ways")
    State = DeleteTopicsRequest.DeleteTopicState

    response = await client.request(
        DeleteTopicsRequest(topics=[State(name="both-ways"), State(name=None, topic_id=created.topic_id)],
                            timeout_ms=5000),
        6,
    )

    (result,) = response.responses
    assert result.error_code == ErrorCode.INVALID_REQUEST
    assert result.error_message == "The provided topic name maps to an ID that was already supplied."
    assert broker.broker.topics.get("both-ways") is not None


@pytest.mark.parametrize(("version", "error"), [(2, ErrorCode.INVALID_REQUEST), (6, ErrorCode.TOPIC_DELETION_DISABLED)])
async def test_topic_deletion_disabled(broker_factory, version: int, error: ErrorCode):
    running = await broker_factory({"delete.topic.enable": "false"})
    client = await running.client()
    await create_topic(client, "kept")

    if version >= 6:
        request = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name="kept")], timeout_ms=5000)
    else:
        request = DeleteTopicsRequest(topic_names=["kept"], timeout_ms=5000)
    response = await client.request(request, version)

    assert [result.error_code for result in response.responses] == [error]
    assert running.broker.topics.get("kept") is not None


# -- CreatePartitions ------------------------------------------------------------------------------


def partitions_request(name: str, count: int, *, assignments: list[list[int]] | None = None,
                       validate_only: bool = False, extra: list | None = None) -> CreatePartitionsRequest:
    topic = CreatePartitionsRequest.CreatePartitionsTopic(
        name=name,
        count=count,
        assignments=None if assignments is None else [
            CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=ids) for ids in assignments],
    )
    return CreatePartitionsRequest(topics=[topic, *(extra or [])], timeout_ms=5000, validate_only=validate_only)


@pytest.mark.parametrize("version", [0, 3])
async def test_create_partitions(broker: RunningBroker, client: KafkaClient, version: int):
    await create_topic(client, "growing", 2)

    response = await client.request(partitions_request("growing", 5), version)

    (result,) = response.results
    assert (result.name, result.error_code, result.error_message) == ("growing", ErrorCode.NONE, None)
    topic = await metadata_topic(client, "growing")
    assert [p.partition_index for p in topic.partitions] == [0, 1, 2, 3, 4]
    assert await produce(client, "growing", 4, 3) == 0


async def test_create_partitions_with_assignments(broker: RunningBroker, client: KafkaClient):
    await create_topic(client, "assigned", 1)

    response = await client.request(partitions_request("assigned", 3, assignments=[[1], [1]]), 3)

    assert response.results[0].error_code == ErrorCode.NONE
    assert len(broker.broker.topics.get("assigned").partitions) == 3


@pytest.mark.parametrize(
    ("count", "assignments", "error", "message"),
    [
        (2, None, ErrorCode.INVALID_PARTITIONS,
         "The topic fixed currently has 3 partition(s); 2 would not be an increase."),
        (3, None, ErrorCode.INVALID_PARTITIONS, "Topic already has 3 partition(s)."),
        (5, [[1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."),
        (4, [[7]], ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes broker 7, but no such broker is registered."),
    ],
)
async def test_create_partitions_errors(broker: RunningBroker, client: KafkaClient, count, assignments, error, message):
    await create_topic(client, "fixed", 3)

    response = await client.request(partitions_request("fixed", count, assignments=assignments), 3)

    (result,) = response.results
    assert (result.error_code, result.error_message) == (error, message)
    assert len(broker.broker.topics.get("fixed").partitions) == 3


async def test_create_partitions_validate_only_unknown_and_duplicate(broker: RunningBroker, client: KafkaClient):
    await create_topic(client, "checked", 1)
    await create_topic(client, "dup", 1)
    Topic = CreatePartitionsRequest.CreatePartitionsTopic
    extra = [Topic(name="missing", count=2, assignments=None), Topic(name="dup", count=2, assignments=None),
             Topic(name="dup", count=3, assignments=None)]

    response = await client.request(partitions_request("checked", 4, validate_only=True, extra=extra), 3)

    results = {result.name: result.error_code for result in response.results}
    assert results == {
        "checked": ErrorCode.NONE,
        "missing": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "dup": ErrorCode.INVALID_REQUEST,
    }
    assert len(broker.broker.topics.get("checked").partitions) == 1
    assert len(broker.broker.topics.get("dup").partitions) == 1


@pytest.mark.parametrize("validate_only", [False, True])
async def test_create_partitions_past_the_request_budget_changes_nothing(
    broker: RunningBroker, client: KafkaClient, validate_only: bool
):
    await create_topic(client, "budget", 1)
    await create_topic(client, "budget-too", 1)
    Topic = CreatePartitionsRequest.CreatePartitionsTopic

    for count, extra in ((MAX_INT32, []), (268_435_456, []), (5_002, [Topic(name="budget-too", count=5_002,
                                                                              assignments=None)])):
        response = await client.request(partitions_request("budget", count, validate_only=validate_only,
                                                           extra=extra), 3)

        assert [(r.name, r.error_code, r.error_message) for r in response.results] == [
            (name, ErrorCode.POLICY_VIOLATION, "Excessively large number of additional partitions per request.")
            for name in ["budget", *(topic.name for topic in extra)]
        ]
    assert len(broker.broker.topics.get("budget").partitions) == 1
    assert len(broker.broker.topics.get("budget-too").partitions) == 1
    # Up to the budget is fine.
    response = await client.request(partitions_request("budget", 10_000, validate_only=True), 3)
    assert response.results[0].error_code == ErrorCode.NONE


# -- DescribeConfigs -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2, 3, 4])
async def test_describe_topic_configs(client: KafkaClient, version: int):
    await create_topic(client, "described", configs={"retention.ms": "3600000", "cleanup.policy": "compact,delete"})

    result = await describe_topic_configs(client, "described", version=version)

    assert (result.error_code, result.error_message) == (ErrorCode.NONE, "")  # "", as Kafka 4.4 answers
    assert (result.resource_type, result.resource_name) == (TOPIC, "described")
    configs = {config.name: config for config in result.configs}
    assert set(configs) == ACTED_ON
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].config_source == DYNAMIC_TOPIC_CONFIG
    assert configs["cleanup.policy"].value == "compact,delete"
    assert configs["max.message.bytes"].value == "1048588"
    assert configs["max.message.bytes"].config_source == DEFAULT_CONFIG
    assert all(config.synonyms == [] and not config.read_only and not config.is_sensitive
               for config in result.configs)
    if version >= 3:
        assert configs["retention.ms"].config_type == 5  # LONG
        assert configs["cleanup.policy"].config_type == 7  # LIST
        assert configs["preallocate"].config_type == 1  # BOOLEAN
        assert all(config.documentation is None for config in result.configs)


async def test_describe_topic_configs_with_synonyms_and_documentation(broker_factory):
    running = await broker_factory({"log.segment.bytes": "5000000", "log.retention.ms": "7200000"})
    client = await running.client()
    await create_topic(client, "synonyms", configs={"segment.bytes": "100000"})

    result = await describe_topic_configs(client, "synonyms", synonyms=True, documentation=True)

    configs = {config.name: config for config in result.configs}
    segment_bytes = configs["segment.bytes"]
    assert (segment_bytes.value, segment_bytes.config_source) == ("100000", DYNAMIC_TOPIC_CONFIG)
    assert [(s.name, s.value, s.source) for s in segment_bytes.synonyms] == [
        ("segment.bytes", "100000", DYNAMIC_TOPIC_CONFIG),
        ("log.segment.bytes", "5000000", STATIC_BROKER_CONFIG),
        ("log.segment.bytes", "1073741824", DEFAULT_CONFIG),
    ]
    retention = configs["retention.ms"]
    assert (retention.value, retention.config_source) == ("7200000", STATIC_BROKER_CONFIG)
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("log.retention.ms", "7200000", STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", DEFAULT_CONFIG),
    ]
    assert all(config.documentation for config in result.configs)


async def test_retention_set_in_hours_is_reported_as_kafka_does(broker_factory):
    """Kafka takes a topic config's source from its first broker synonym only, so a broker that sets
    log.retention.hours reports retention.ms with its value but as DEFAULT_CONFIG, without synonyms."""
    running = await broker_factory({"log.retention.hours": "24"})
    client = await running.client()
    await create_topic(client, "daily")

    result = await describe_topic_configs(client, "daily", keys=["retention.ms"], synonyms=True)

    (config,) = result.configs
    assert (config.value, config.config_source, config.synonyms) == ("86400000", DEFAULT_CONFIG, [])


async def test_describe_configs_filters_by_key(client: KafkaClient):
    await create_topic(client, "filtered")

    result = await describe_topic_configs(client, "filtered", keys=["segment.ms", "no.such.config"])

    assert [config.name for config in result.configs] == ["segment.ms"]


@pytest.mark.parametrize(
    ("name", "error"),
    [("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ("bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION)],
)
async def test_describe_configs_of_unknown_topic(client: KafkaClient, name: str, error: ErrorCode):
    result = await describe_topic_configs(client, name)

    assert (result.error_code, result.configs) == (error, [])
    assert (result.resource_type, result.resource_name) == (TOPIC, name)


async def test_describe_broker_configs(broker_factory):
    running = await broker_factory({"num.partitions": "3", "ssl.keystore.password": "hunter2",
                                    "num.network.threads": "8"})
    client = await running.client()

    response = await client.request(
        DescribeConfigsRequest(
            resources=[DescribeConfigsRequest.DescribeConfigsResource(resource_type=BROKER, resource_name=str(
                running.broker.node_id), configuration_keys=None)],
            include_synonyms=False,
            include_documentation=True,
        ),
        4,
    )

    (result,) = response.results
    assert result.error_code == ErrorCode.NONE
    configs = {config.name: config for config in result.configs}
    assert (configs["num.partitions"].value, configs["num.partitions"].config_source) == ("3", STATIC_BROKER_CONFIG)
    assert (configs["delete.topic.enable"].value, configs["delete.topic.enable"].config_source) == (
        "true", DEFAULT_CONFIG)
    assert configs["num.network.threads"].value == "8"
    assert configs["log.segment.bytes"].value == "1073741824"
    assert configs["node.id"].value == str(running.broker.node_id)
    password = configs["ssl.keystore.password"]
    assert (password.value, password.is_sensitive) == (None, True)
    # Only the topic defaults may change at run time.
    assert configs["num.partitions"].read_only and not configs["log.segment.bytes"].read_only
    assert all(config.read_only for name, config in configs.items()
               if not name.startswith("log.") and name not in ("message.max.bytes", "min.insync.replicas",
                                                                 "unclean.leader.election.enable", "compression.type"))
    assert configs["num.partitions"].documentation



async def test_describe_broker_configs_lists_every_setting_the_catalog_knows(broker_factory):
    running = await broker_factory({"group.max.size": "5"})
    client = await running.client()

    result = await describe_broker_configs(client, str(running.broker.node_id))

    configs = {config.name: config for config in result.configs}
    assert set(configs) >= set(BROKER_CONFIG_DEFS)
    size = configs["group.max.size"]
    assert (size.value, size.config_type, size.config_source, size.read_only) == (
        "5", ConfigType.INT, STATIC_BROKER_CONFIG, True)
    assert [(s.name, s.value, s.source) for s in size.synonyms] == [
        ("group.max.size", "5", STATIC_BROKER_CONFIG), ("group.max.size", "2147483647", DEFAULT_CONFIG)]
    assert (configs["zookeeper.connect"].value, configs["zookeeper.connect"].config_source) == (None, DEFAULT_CONFIG)
    assert configs["listeners"].config_type == ConfigType.LIST
    assert {name for name, config in configs.items() if not config.read_only} == DYNAMIC_BROKER_CONFIGS


@pytest.mark.parametrize(
    ("name", "error", "message"),
    [
        ("", ErrorCode.NONE, ""),
        ("2", ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 1 or empty string, but received 2"),
        ("one", ErrorCode.INVALID_REQUEST, "Broker id must be an integer, but it is: one"),
    ],
)
async def test_describe_other_broker_resources(client: KafkaClient, name: str, error, message):
    response = await client.request(
        DescribeConfigsRequest(
            resources=[DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=BROKER, resource_name=name, configuration_keys=None)],
        ),
        4,
    )

    (result,) = response.results
    assert (result.error_code, result.error_message, result.configs) == (error, message, [])


async def test_describe_unsupported_resource_type(client: KafkaClient):
    response = await client.request(
        DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=16, resource_name="my-subscription", configuration_keys=None)]),
        4,
    )

    assert response.results[0].error_code == ErrorCode.INVALID_REQUEST


# -- AlterConfigs ----------------------------------------------------------------------------------


def alter_request(resources: list[tuple[int, str, dict]], validate_only: bool = False) -> AlterConfigsRequest:
    A = AlterConfigsRequest
    return A(
        resources=[
            A.AlterConfigsResource(resource_type=resource_type, resource_name=name,
                                   configs=[A.AlterableConfig(name=k, value=v) for k, v in configs.items()])
            for resource_type, name, configs in resources
        ],
        validate_only=validate_only,
    )


@pytest.mark.parametrize("version", [0, 2])
async def test_alter_configs_replaces_the_overrides(broker: RunningBroker, client: KafkaClient, version: int):
    await create_topic(client, "altered", 2, configs={"retention.ms": "1000", "cleanup.policy": "compact"})

    response = await client.request(alter_request([(TOPIC, "altered", {"max.message.bytes": "2048"})]), version)

    (result,) = response.responses
    assert (result.error_code, result.error_message) == (ErrorCode.NONE, None)
    assert (result.resource_type, result.resource_name) == (TOPIC, "altered")
    configs = await topic_configs(client, "altered")
    assert (configs["max.message.bytes"], configs["retention.ms"], configs["cleanup.policy"]) == (
        "2048", "604800000", "delete")
    topic = broker.broker.topics.get("altered")
    assert topic.configs == {"max.message.bytes": "2048"}
    assert all(partition.log.config.max_message_bytes == 2048 for partition in topic.partitions)


async def test_altered_configs_survive_a_restart(nursery, tmp_path):
    data_dir = tmp_path / "data"
    first = await start_broker(nursery, data_dir)
    client = await first.client()
    await create_topic(client, "durable")
    response = await client.request(alter_request([(TOPIC, "durable", {"retention.ms": "5000"})]), 2)
    assert response.responses[0].error_code == ErrorCode.NONE
    await first.close()

    second = await start_broker(nursery, data_dir)
    try:
        configs = await topic_configs(await second.client(), "durable")
        assert configs["retention.ms"] == "5000"
        assert second.broker.topics.get("durable").log_config.retention_ms == 5000
    finally:
        await second.close()


async def test_topic_configs_reach_the_logs_after_a_restart(nursery, tmp_path):
    data_dir = tmp_path / "data"
    first = await start_broker(nursery, data_dir)
    await create_topic(await first.client(), "durable", configs={"retention.ms": "5000"})
    await first.close()

    second = await start_broker(nursery, data_dir)
    try:
        assert second.broker.topics.get("durable").partitions[0].log.config.retention_ms == 5000
    finally:
        await second.close()


async def test_alter_configs_validate_only(broker: RunningBroker, client: KafkaClient):
    await create_topic(client, "unchanged", configs={"retention.ms": "1000"})

    response = await client.request(alter_request([(TOPIC, "unchanged", {"retention.ms": "2000"})], True), 2)

    assert response.responses[0].error_code == ErrorCode.NONE
    assert (await topic_configs(client, "unchanged"))["retention.ms"] == "1000"


async def test_alter_configs_errors(broker: RunningBroker, client: KafkaClient):
    await create_topic(client, "guarded", configs={"retention.ms": "1000"})
    await create_topic(client, "twice")

    response = await client.request(
        alter_request([
            (TOPIC, "guarded", {"retention.ms": "never"}),
            (TOPIC, "missing", {"retention.ms": "1000"}),
            (TOPIC, "twice", {}),
            (TOPIC, "twice", {"retention.ms": "1"}),
            (TOPIC, "", {"retention.ms": "1"}),
            (BROKER, "1", {"num.partitions": "3"}),  # read at start-up only
            (BROKER, "9", {}),
            (99, "what", {}),
        ]),
        2,
    )

    results = [(r.resource_type, r.resource_name, r.error_code) for r in response.responses]
    assert results == [
        (TOPIC, "guarded", ErrorCode.INVALID_CONFIG),
        (TOPIC, "missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (TOPIC, "twice", ErrorCode.INVALID_REQUEST),
        (TOPIC, "twice", ErrorCode.INVALID_REQUEST),
        (TOPIC, "", ErrorCode.INVALID_REQUEST),
        (BROKER, "1", ErrorCode.INVALID_REQUEST),
        (BROKER, "9", ErrorCode.INVALID_REQUEST),
        (99, "what", ErrorCode.INVALID_REQUEST),
    ]
    assert response.responses[1].error_message == "The topic 'missing' does not exist."
    assert (await topic_configs(client, "guarded"))["retention.ms"] == "1000"


async def test_alter_configs_rejects_null_values_and_repeated_keys(client: KafkaClient):
    await create_topic(client, "strict")
    A = AlterConfigsRequest
    request = A(resources=[
        A.AlterConfigsResource(resource_type=TOPIC, resource_name="strict",
                               configs=[A.AlterableConfig(name="retention.ms", value=None)]),
        A.AlterConfigsResource(resource_type=TOPIC, resource_name="strict2",
                               configs=[A.AlterableConfig(name="retention.ms", value="1"),
                                        A.AlterableConfig(name="retention.ms", value="2")]),
    ])

    response = await client.request(request, 2)

    assert [(r.error_code, r.error_message) for r in response.responses] == [
        (ErrorCode.INVALID_REQUEST, "Null value not supported for : retention.ms"),
        (ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys"),
    ]


# -- IncrementalAlterConfigs -----------------------------------------------------------------------


def incremental(name: str, *operations: tuple[str, int, str | None], resource_type: int = TOPIC,
                validate_only: bool = False) -> IncrementalAlterConfigsRequest:
    I = IncrementalAlterConfigsRequest
    return I(
        resources=[I.AlterConfigsResource(
            resource_type=resource_type,
            resource_name=name,
            configs=[I.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in operations],
        )],
        validate_only=validate_only,
    )


@pytest.mark.parametrize("version", [0, 1])
async def test_incremental_set_and_delete(broker: RunningBroker, client: KafkaClient, version: int):
    await create_topic(client, "tuned", configs={"retention.ms": "1000", "segment.bytes": "100000"})

    response = await client.request(
        incremental("tuned", ("retention.ms", DELETE, None), ("max.message.bytes", SET, "4096")), version
    )

    assert [(r.error_code, r.error_message) for r in response.responses] == [(ErrorCode.NONE, None)]
    assert broker.broker.topics.get("tuned").configs == {"segment.bytes": "100000", "max.message.bytes": "4096"}
    configs = await topic_configs(client, "tuned")
    assert (configs["retention.ms"], configs["segment.bytes"], configs["max.message.bytes"]) == (
        "604800000", "100000", "4096")


async def test_incremental_append_and_subtract_lists(broker: RunningBroker, client: KafkaClient):
    await create_topic(client, "policies")

    appended = await client.request(incremental("policies", ("cleanup.policy", APPEND, "compact")), 1)
    after_append = (await topic_configs(client, "policies"))["cleanup.policy"]
    subtracted = await client.request(incremental("policies", ("cleanup.policy", SUBTRACT, "delete")), 1)

    assert appended.responses[0].error_code == subtracted.responses[0].error_code == ErrorCode.NONE
    assert after_append == "delete,compact"
    assert (await topic_configs(client, "policies"))["cleanup.policy"] == "compact"
    assert broker.broker.topics.get("policies").log_config.compact


@pytest.mark.parametrize(
    ("operation", "error", "message"),
    [
        (("retention.ms", APPEND, "1"), ErrorCode.INVALID_CONFIG,
         "Can't APPEND to key retention.ms because its type is not LIST."),
        (("retention.ms", SET, None), ErrorCode.INVALID_REQUEST, "Null value not supported for : retention.ms"),
        (("retention.ms", SET, "-5"), ErrorCode.INVALID_CONFIG, None),
        (("no.such.config", SET, "1"), ErrorCode.INVALID_CONFIG, "Unknown topic config name: no.such.config"),
        (("retention.ms", 7, "1"), ErrorCode.INVALID_REQUEST, "Unknown operations type 7"),
    ],
)
async def test_incremental_errors(client: KafkaClient, operation, error, message):
    await create_topic(client, "careful", configs={"retention.ms": "1000"})

    response = await client.request(incremental("careful", operation), 1)

    (result,) = response.responses
    assert result.error_code == error
    if message is not None:
        assert result.error_message == message
    assert (await topic_configs(client, "careful"))["retention.ms"] == "1000"


async def test_incremental_validate_only_and_unknown_topic(client: KafkaClient):
    await create_topic(client, "dry")

    dry = await client.request(incremental("dry", ("retention.ms", SET, "5"), validate_only=True), 1)
    missing = await client.request(incremental("nowhere", ("retention.ms", SET, "5")), 1)

    assert dry.responses[0].error_code == ErrorCode.NONE
    assert (await topic_configs(client, "dry"))["retention.ms"] == "604800000"
    assert missing.responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_dynamic_broker_configs_set_topic_defaults_at_once_and_for_good(nursery, tmp_path):
    running = await start_broker(nursery, tmp_path / "data", {"log.retention.hours": "24"})
    client = await running.client()
    await create_topic(client, "inherits")
    await create_topic(client, "overrides", configs={"retention.ms": "1000"})

    default = await client.request(incremental("", ("log.retention.ms", SET, "5000"),
                                               ("message.max.bytes", SET, "2000"), resource_type=BROKER), 1)
    own = await client.request(incremental("1", ("log.retention.ms", SET, "7000"), resource_type=BROKER), 1)

    assert [r.error_code for r in (*default.responses, *own.responses)] == [ErrorCode.NONE, ErrorCode.NONE]
    inherited = await describe_topic_configs(client, "inherits", keys=["retention.ms", "max.message.bytes"],
                                             synonyms=True)
    sources = {c.name: (c.value, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms])
               for c in inherited.configs}
    assert sources == {
        "retention.ms": ("7000", DYNAMIC_BROKER_CONFIG, [
            ("log.retention.ms", "7000", DYNAMIC_BROKER_CONFIG), ("log.retention.ms", "5000", DYNAMIC_DEFAULT_CONFIG),
            ("log.retention.hours", "24", STATIC_BROKER_CONFIG), ("log.retention.hours", "168", DEFAULT_CONFIG)]),
        "max.message.bytes": ("2000", DYNAMIC_DEFAULT_CONFIG, [
            ("message.max.bytes", "2000", DYNAMIC_DEFAULT_CONFIG), ("message.max.bytes", "1048588", DEFAULT_CONFIG)]),
    }
    assert (await topic_configs(client, "overrides"))["retention.ms"] == "1000"
    assert running.broker.topics.partition("inherits", 0).log.config.max_message_bytes == 2000
    cluster = await describe_broker_configs(client, "")
    assert [(c.name, c.value, c.config_source, c.read_only) for c in cluster.configs] == [
        ("log.retention.ms", "5000", DYNAMIC_DEFAULT_CONFIG, False),
        ("message.max.bytes", "2000", DYNAMIC_DEFAULT_CONFIG, False)]

    # Deleting this broker's own setting lets the cluster default show through; all of it survives a restart.
    await client.request(incremental("1", ("log.retention.ms", DELETE, None), resource_type=BROKER), 1)
    await running.close()
    running = await start_broker(nursery, tmp_path / "data")
    client = await running.client()
    assert (await topic_configs(client, "inherits"))["retention.ms"] == "5000"
    assert running.broker.topics.partition("inherits", 0).log.config.max_message_bytes == 2000
    await running.close()


@pytest.mark.parametrize(
    ("operations", "message"),
    [
        ([("num.partitions", SET, "3")], "Cannot update these configs dynamically: [num.partitions]"),
        ([("log.dirs", SET, "/elsewhere"), ("listeners", SET, "PLAINTEXT://:1")],
         "Cannot update these configs dynamically: [listeners, log.dirs]"),
        ([("group.max.size", SET, "5"), ("log.retention.hours", SET, "1")],
         "Cannot update these configs dynamically: [group.max.size, log.retention.hours]"),
        ([("log.retention.ms", SET, "soon")],
         "Invalid value soon for configuration log.retention.ms: Not a number of type LONG"),
        ([("log.segment.bytes", SET, "1")],
         "Invalid value 1 for configuration log.segment.bytes: Value must be at least 14"),
    ],
)
async def test_broker_configs_that_cannot_change(broker: RunningBroker, client: KafkaClient, operations, message):
    response = await client.request(incremental("1", *operations, resource_type=BROKER), 1)
    other = await client.request(incremental("2", ("log.retention.ms", SET, "5"), resource_type=BROKER), 1)

    assert (response.responses[0].error_code, response.responses[0].error_message) == (
        ErrorCode.INVALID_REQUEST, message)
    assert other.responses[0].error_message == "Unexpected broker id, expected 1, but received 2"
    assert broker.broker.dynamic_configs.broker == {}


async def test_alter_configs_replaces_a_brokers_dynamic_configs(broker: RunningBroker, client: KafkaClient):
    await client.request(incremental("1", ("log.retention.ms", SET, "5000"), ("log.cleanup.policy", APPEND, "compact"),
                                     resource_type=BROKER), 1)
    assert broker.broker.dynamic_configs.broker == {"log.retention.ms": "5000", "log.cleanup.policy": "delete,compact"}

    response = await client.request(alter_request([(BROKER, "1", {"log.segment.bytes": "2000000"})]), 2)

    assert response.responses[0].error_code == ErrorCode.NONE
    assert broker.broker.dynamic_configs.broker == {"log.segment.bytes": "2000000"}
    assert broker.broker.default_log_config.retention_ms == 604800000


# -- DescribeCluster -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_describe_cluster(broker: RunningBroker, client: KafkaClient, version: int):
    response = await client.request(DescribeClusterRequest(include_fenced_brokers=version >= 2), version)

    assert (response.error_code, response.error_message) == (ErrorCode.NONE, None)
    assert response.cluster_id == broker.broker.cluster_id
    assert response.controller_id == broker.broker.node_id
    (node,) = response.brokers
    assert (node.broker_id, node.host, node.port, node.rack) == (broker.broker.node_id, broker.host, broker.port, None)
    assert node.is_fenced is False
    assert response.cluster_authorized_operations == -(2**31)


async def test_describe_cluster_authorized_operations(client: KafkaClient):
    response = await client.request(DescribeClusterRequest(include_cluster_authorized_operations=True), 1)

    operations = response.cluster_authorized_operations
    assert {code for code in range(32) if operations >> code & 1} == {5, 7, 8, 9, 10, 11, 12}


@pytest.mark.parametrize(
    ("version", "endpoint_type", "error"),
    [
        (1, 2, ErrorCode.MISMATCHED_ENDPOINT_TYPE),
        (2, 9, ErrorCode.UNSUPPORTED_ENDPOINT_TYPE),
    ],
)
async def test_describe_cluster_endpoint_types(client: KafkaClient, version: int, endpoint_type: int, error):
    response = await client.request(DescribeClusterRequest(endpoint_type=endpoint_type), version)

    assert response.error_code == error
    assert response.error_message
    assert response.brokers == []


# -- DescribeTopicPartitions -----------------------------------------------------------------------


async def describe_partitions(client: KafkaClient, names: list[str], limit: int = 2000, cursor=None):
    R = DescribeTopicPartitionsRequest
    return await client.request(
        R(topics=[R.TopicRequest(name=name) for name in names], response_partition_limit=limit, cursor=cursor), 0
    )


def listed(response) -> list[tuple[str, list[int]]]:
    return [(topic.name, [p.partition_index for p in topic.partitions]) for topic in response.topics]


def cursor_of(response) -> tuple[str, int] | None:
    cursor = response.next_cursor
    return None if cursor is None else (cursor.topic_name, cursor.partition_index)


async def test_describe_topic_partitions_paginates(client: KafkaClient):
    for name, partitions in (("c", 1), ("a", 3), ("b", 2)):
        await create_topic(client, name, partitions)

    first = await describe_partitions(client, [], limit=4)
    cursor = DescribeTopicPartitionsRequest.Cursor(topic_name="b", partition_index=1)
    second = await describe_partitions(client, [], limit=4, cursor=cursor)

    assert listed(first) == [("a", [0, 1, 2]), ("b", [0])]
    assert cursor_of(first) == ("b", 1)
    assert listed(second) == [("b", [1]), ("c", [0])]
    assert cursor_of(second) is None


async def test_describe_topic_partitions_cursor_at_a_topic_boundary(client: KafkaClient):
    await create_topic(client, "first", 2)
    await create_topic(client, "second", 1)

    response = await describe_partitions(client, ["second", "first"], limit=2)

    assert listed(response) == [("first", [0, 1])]
    assert cursor_of(response) == ("second", 0)


async def test_describe_topic_partitions_details(broker: RunningBroker, client: KafkaClient):
    await create_topic(client, "detailed", 2)

    response = await describe_partitions(client, ["detailed", "absent", "bad/name"])

    by_name = {topic.name: topic for topic in response.topics}
    detailed = by_name["detailed"]
    node_id = broker.broker.node_id
    assert detailed.error_code == ErrorCode.NONE
    assert detailed.topic_id == broker.broker.topics.get("detailed").topic_id
    assert detailed.is_internal is False
    assert detailed.topic_authorized_operations & (1 << 8)  # DESCRIBE
    for partition in detailed.partitions:
        assert (partition.leader_id, partition.replica_nodes, partition.isr_nodes) == (node_id, [node_id], [node_id])
        assert partition.eligible_leader_replicas == [] and partition.offline_replicas == []
    assert by_name["absent"].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert by_name["bad/name"].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert cursor_of(response) is None


async def test_describe_topic_partitions_cursor_must_be_listed(client: KafkaClient):
    await create_topic(client, "listed")
    cursor = DescribeTopicPartitionsRequest.Cursor(topic_name="other", partition_index=0)

    response = await describe_partitions(client, ["listed"], cursor=cursor)

    assert [(t.name, t.error_code) for t in response.topics] == [("listed", ErrorCode.INVALID_REQUEST)]


# -- DeleteRecords ---------------------------------------------------------------------------------


def delete_records_request(name: str, *partitions: tuple[int, int]) -> DeleteRecordsRequest:
    D = DeleteRecordsRequest
    return D(
        topics=[D.DeleteRecordsTopic(name=name, partitions=[
            D.DeleteRecordsPartition(partition_index=index, offset=offset) for index, offset in partitions])],
        timeout_ms=5000,
    )


@pytest.mark.parametrize("version", [0, 2])
async def test_delete_records(broker: RunningBroker, client: KafkaClient, version: int):
    await create_topic(client, "trimmed", 2)
    await produce(client, "trimmed", 0, 10)
    await produce(client, "trimmed", 1, 4)

    response = await client.request(delete_records_request("trimmed", (0, 6), (1, -1)), version)

    (topic,) = response.topics
    assert topic.name == "trimmed"
    results = {p.partition_index: (p.error_code, p.low_watermark) for p in topic.partitions}
    assert results == {0: (ErrorCode.NONE, 6), 1: (ErrorCode.NONE, 4)}
    assert await earliest_offset(client, "trimmed", 0) == 6
    assert await earliest_offset(client, "trimmed", 1) == 4


async def test_delete_records_errors(client: KafkaClient):
    await create_topic(client, "records", 1)
    await produce(client, "records", 0, 5)
    await create_topic(client, "compacted", 1, configs={"cleanup.policy": "compact"})
    await create_topic(client, "__consumer_offsets", 1)

    beyond = await client.request(delete_records_request("records", (0, 6), (3, 1)), 2)
    negative = await client.request(delete_records_request("records", (0, -7)), 2)
    compacted = await client.request(delete_records_request("compacted", (0, 0)), 2)
    internal = await client.request(delete_records_request("__consumer_offsets", (0, 0)), 2)
    missing = await client.request(delete_records_request("missing", (0, 0)), 2)

    def outcome(response):
        return [(p.partition_index, p.error_code, p.low_watermark) for p in response.topics[0].partitions]

    assert outcome(beyond) == [(0, ErrorCode.OFFSET_OUT_OF_RANGE, -1), (3, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)]
    assert outcome(negative) == [(0, ErrorCode.OFFSET_OUT_OF_RANGE, -1)]
    assert outcome(compacted) == [(0, ErrorCode.POLICY_VIOLATION, -1)]
    assert outcome(internal) == [(0, ErrorCode.INVALID_TOPIC_EXCEPTION, -1)]
    assert outcome(missing) == [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)]
    assert await earliest_offset(client, "records", 0) == 0

