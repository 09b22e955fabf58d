"""CreateTopics (key 19), versions 2-7.

Creates each topic of the request independently and answers with a result per topic, with Kafka's
error codes and messages:

* a name given twice in one request: INVALID_REQUEST for that name (nothing is created for it);
* ``__cluster_metadata``: INVALID_REQUEST; an illegal name, or one that collides with an existing
  topic once ``.`` and ``_`` are treated alike: INVALID_TOPIC_EXCEPTION; an existing topic:
  TOPIC_ALREADY_EXISTS;
* a config with a null value, an unknown config or a bad value: INVALID_CONFIG;
* ``num_partitions``/``replication_factor`` of -1 take the broker's ``num.partitions`` and
  ``default.replication.factor``; 0 or below -1 is INVALID_PARTITIONS/INVALID_REPLICATION_FACTOR;
  a replication factor this single broker cannot hold is INVALID_REPLICATION_FACTOR;
* a manual assignment requires both counts to be -1 (else INVALID_REQUEST); its partitions must be
  0..n-1, each listed once, each with the same number of distinct, registered brokers (here only this
  node): INVALID_REPLICA_ASSIGNMENT otherwise.

One request's cost stays bounded whatever counts it carries, within Kafka's own limit on what one
request may change (``controller.max.records.per.batch``, 10,000). Before any topic is looked at, the
partitions the request asks for are added up (a topic's count, the broker's ``num.partitions`` for
-1, or the length of its manual assignment): more than the limit answers every topic of the request
POLICY_VIOLATION ("Excessively large number of partitions per request."). Then every topic is
checked, and the topics that passed must need no more records than the limit, counting one for each
topic, partition and config; otherwise every topic of the request is POLICY_VIOLATION ("Unable to
perform excessively large batch operation."). Either way nothing is created, validate_only or not.

``validate_only`` checks everything and creates nothing; the response is the same.

Version notes: v1+ has error messages; v4+ lets counts be -1 (the defaults); v5 is the first flexible
version and returns the new topic's partition count, replication factor and every config with its
value and source; v7 returns the topic id.
With an authorizer, a topic needs CREATE on the cluster or on the topic (TOPIC_AUTHORIZATION_FAILED, answered
after the others); a created topic's configs are given only with DESCRIBE_CONFIGS on it (otherwise its
``topic_config_error_code`` is TOPIC_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

import uuid
from collections import Counter

from trafka.broker.handlers.describe_configs import broker_layers, creation_config_source, topic_config_values
from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.broker.topics import Topic, validate_topic_name
from trafka.storage.config import LogConfig
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import CreateTopicsRequest, CreateTopicsResponse
from trafka.wire.protocol import ApiKey

TopicResult = CreateTopicsResponse.CreatableTopicResult
ConfigResult = CreateTopicsResponse.CreatableTopicConfigs
CreatableTopic = CreateTopicsRequest.CreatableTopic

CLUSTER_METADATA_TOPIC = "__cluster_metadata"
ZERO_UUID = uuid.UUID(int=0)


#: The refusals of a request that would create too much at once: more partitions than
#: ``controller.max.records.per.batch``, or, counting each topic and each of its configs too, more records.
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."
TOO_LARGE_BATCH = "Unable to perform excessively large batch operation."


@handles(ApiKey.CREATE_TOPICS, 2, 7)
async def handle_create_topics(ctx: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
    counts = Counter(topic.name for topic in request.topics)
    unauthorized: list[str] = []
    if ctx.broker.authorizer is not None and not ctx.authorize_cluster(AclOperation.CREATE, log_if_denied=False):
        names = [name for name, count in counts.items() if count == 1 and name != CLUSTER_METADATA_TOPIC]
        allowed = ctx.authorized_names(AclOperation.CREATE, AclResourceType.TOPIC, names)
        unauthorized = [name for name in names if name not in allowed]
        request.topics = [topic for topic in request.topics if topic.name not in unauthorized]
    budget = ctx.broker.config.controller_max_records_per_batch
    if _requested_partitions(request, counts, ctx.broker.config.num_partitions) > budget:
        return _refused(request, TOO_MANY_PARTITIONS, unauthorized)
    # Every topic is checked before any is created: what the creations would record (each topic, its
    # partitions and its configs, as Kafka's controller counts them) must fit in one batch.
    results: list[TopicResult] = []
    valid: dict[int, CreatableTopic] = {}  # index in results -> the topic to create
    reported_duplicates: set[str] = set()
    for wanted in request.topics:
        if counts[wanted.name] > 1:
            if wanted.name not in reported_duplicates:
                reported_duplicates.add(wanted.name)
                results.append(_error(wanted.name, ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
            continue
        try:
            result = await _create(ctx, wanted, validate_only=True)
        except KafkaError as exc:
            result = _error(wanted.name, exc.code, exc.message or None)
        else:
            valid[len(results)] = wanted
        results.append(result)
    records = sum(1 + results[index].num_partitions + len(wanted.configs) for index, wanted in valid.items())
    if records > budget:
        return _refused(request, TOO_LARGE_BATCH, unauthorized)
    if not request.validate_only:
        for index, wanted in valid.items():
            try:
                results[index] = await _create(ctx, wanted, validate_only=False)
            except KafkaError as exc:
                results[index] = _error(wanted.name, exc.code, exc.message or None)
    if ctx.broker.authorizer is not None:
        describable = ctx.authorized_names(AclOperation.DESCRIBE_CONFIGS, AclResourceType.TOPIC,
                                           (result.name for result in results), log_if_denied=False)
        for result in results:
            if result.error_code == ErrorCode.NONE and result.name not in describable:
                result.configs = []
                result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return CreateTopicsResponse(throttle_time_ms=0, topics=results + _unauthorized(unauthorized))


def _refused(request: CreateTopicsRequest, message: str, unauthorized: list[str]) -> CreateTopicsResponse:
    """The whole request refused: POLICY_VIOLATION for each of its topics, as Kafka answers it."""
    return CreateTopicsResponse(
        throttle_time_ms=0, topics=[_error(topic.name, ErrorCode.POLICY_VIOLATION, message)
                                    for topic in request.topics] + _unauthorized(unauthorized)
    )


def _unauthorized(names: list[str]) -> list[TopicResult]:
    """The topics the principal may not create, answered after the others, as Kafka answers them."""
    return [_error(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.") for name in names]


def _requested_partitions(request: CreateTopicsRequest, counts: Counter[str], default_partitions: int) -> int:
    """How many partitions the request asks for, over the topics that get as far as being created
    (not a duplicated name, not ``__cluster_metadata``); invalid counts add nothing."""
    total = 0
    for wanted in request.topics:
        if counts[wanted.name] > 1 or wanted.name == CLUSTER_METADATA_TOPIC:
            continue
        if wanted.assignments:
            total += len(wanted.assignments)
        elif wanted.num_partitions == -1:
            total += default_partitions
        elif wanted.num_partitions > 0:
            total += wanted.num_partitions
    return total


async def _create(ctx: RequestContext, wanted: CreatableTopic, validate_only: bool) -> TopicResult:
    broker = ctx.broker
    if wanted.name == CLUSTER_METADATA_TOPIC:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST, f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited."
        )
    # Checked in Kafka's order: the name, then the configs, then partitions and replicas.
    validate_topic_name(wanted.name)
    if broker.topics.get(wanted.name) is not None:
        raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{wanted.name}' already exists.")
    null_configs = [config.name for config in wanted.configs if config.value is None]
    if null_configs:
        raise KafkaError(
            ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {','.join(null_configs)}"
        )
    configs = {config.name: config.value for config in wanted.configs}
    LogConfig.from_properties(configs, broker.default_log_config)
    num_partitions, replication_factor = wanted.num_partitions, wanted.replication_factor
    replica_assignment = None
    if wanted.assignments:
        num_partitions, replication_factor = _check_assignments(ctx, wanted)
        replica_assignment = [a.broker_ids for a in sorted(wanted.assignments, key=lambda a: a.partition_index)]
    topic = await broker.topics.create(
        wanted.name, num_partitions, replication_factor, configs, validate_only=validate_only,
        replica_assignment=replica_assignment,
    )
    if num_partitions == -1:
        num_partitions = broker.config.num_partitions
    if replication_factor == -1:
        replication_factor = broker.config.default_replication_factor
    return _success(ctx, topic, num_partitions, replication_factor)


def _check_assignments(ctx: RequestContext, wanted: CreatableTopic) -> tuple[int, int]:
    """Validate a manual assignment as Kafka does; returns its partition count and replication factor."""
    if wanted.replication_factor != -1:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            "A manual partition assignment was specified, but replication factor was not set to -1.",
        )
    if wanted.num_partitions != -1:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        )
    seen: set[int] = set()
    replication_factor: int | None = None
    for assignment in wanted.assignments:
        if assignment.partition_index in seen:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Found multiple manual partition assignments for partition {assignment.partition_index}",
            )
        seen.add(assignment.partition_index)
        check_replica_assignment(ctx, assignment.broker_ids, replication_factor)
        replication_factor = len(assignment.broker_ids)
    if seen != set(range(len(seen))):
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence"
        )
    assert replication_factor is not None
    return len(seen), replication_factor


def check_replica_assignment(ctx: RequestContext, broker_ids: list[int], replication_factor: int | None) -> None:
    """One partition's manual replica list: not empty, registered brokers only, each once, and as many
    replicas as ``replication_factor`` when that is known. Raises INVALID_REPLICA_ASSIGNMENT."""
    if not broker_ids:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
        )
    previous = None
    live = ctx.broker.topics.live_brokers()
    for broker_id in sorted(broker_ids):
        if broker_id not in live:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {broker_id}, but no such broker is registered.",
            )
        if broker_id == previous:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {broker_id} more than once.",
            )
        previous = broker_id
    if replication_factor is not None and len(broker_ids) != replication_factor:
        raise KafkaError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes a partition with {len(broker_ids)} replica(s), but this "
            f"is not consistent with previous partitions, which have {replication_factor} replica(s).",
        )


def _success(ctx: RequestContext, topic: Topic, num_partitions: int, replication_factor: int) -> TopicResult:
    layers = broker_layers(ctx.broker)
    configs = [
        ConfigResult(
            name=name,
            value=value,
            read_only=False,
            config_source=creation_config_source(name, topic.configs, layers),
            is_sensitive=False,
        )
        for name, value in sorted(topic_config_values(topic.configs, topic.log_config).items())
    ]
    return TopicResult(
        name=topic.name,
        topic_id=topic.topic_id,
        error_code=ErrorCode.NONE,
        error_message=None,
        topic_config_error_code=ErrorCode.NONE,
        num_partitions=num_partitions,
        replication_factor=replication_factor,
        configs=configs,
    )


def _error(name: str, code: ErrorCode, message: str | None) -> TopicResult:
    return TopicResult(
        name=name,
        topic_id=ZERO_UUID,
        error_code=code,
        error_message=message,
        num_partitions=-1,
        replication_factor=-1,
        configs=[],
    )
