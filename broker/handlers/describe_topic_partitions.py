"""DescribeTopicPartitions (key 75), version 0.

Topics and their partitions, like Metadata, but paginated for topics with very many partitions: a
response holds at most ``response_partition_limit`` partitions (capped by the broker's
``max.request.partition.size.limit``, default 2000, and at least 1). Topics come sorted by name;
when the limit cuts the list short, ``next_cursor`` names the topic and partition to ask for next,
and a request with that ``cursor`` continues from there.

An empty topic list asks for every topic (from the cursor's topic on). Named topics that do not
exist get UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name); listing all
topics never reports errors. A cursor whose topic is missing from a non-empty topic list, or whose
partition is negative, makes the whole request fail with INVALID_REQUEST, as in Kafka.

This node leads every partition and is its only replica; there are no eligible leader replicas
(ELR) to report.

With an authorizer, listing all topics shows only those the principal may DESCRIBE; a named topic it may not
describe comes back TOPIC_AUTHORIZATION_FAILED, after the others, whether or not it exists. Each topic's
authorized operations come from the ACLs (without an authorizer, every operation a topic supports).
"""
from __future__ import annotations

import uuid
from collections.abc import Collection

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.broker.topics import INTERNAL_TOPICS, Topic, validate_topic_name
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse
from trafka.wire.protocol import ApiKey

TopicResult = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
PartitionResult = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition
Cursor = DescribeTopicPartitionsResponse.Cursor

ZERO_UUID = uuid.UUID(int=0)

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


@handles(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, 0)
async def handle_describe_topic_partitions(
    ctx: RequestContext, request: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    try:
        return _describe(ctx, request)
    except KafkaError as exc:
        return DescribeTopicPartitionsResponse(
            throttle_time_ms=0,
            topics=[
                TopicResult(error_code=exc.code, name=wanted.name, topic_id=ZERO_UUID, is_internal=False, partitions=[])
                for wanted in request.topics
            ],
        )


def _describe(ctx: RequestContext, request: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    topics = ctx.broker.topics
    live = topics.live_brokers(ctx.listener)
    cursor = request.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    list_all = not request.topics
    if list_all:
        names = {topic.name for topic in topics if topic.name >= cursor_topic}
    else:
        names = {wanted.name for wanted in request.topics if wanted.name >= cursor_topic}
        if cursor is not None and cursor.topic_name not in names:
            raise KafkaError(
                ErrorCode.INVALID_REQUEST,
                f"DescribeTopicPartitionsRequest topic list should contain the cursor topic: {cursor.topic_name}",
            )
    if cursor is not None and cursor.partition_index < 0:
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            "DescribeTopicPartitionsRequest cursor partition must be valid: "
            f"Cursor(topicName='{cursor.topic_name}', partitionIndex={cursor.partition_index})",
        )
    refused: list[TopicResult] = []
    if ctx.broker.authorizer is not None:
        allowed = ctx.authorized_names(AclOperation.DESCRIBE, AclResourceType.TOPIC, names, log_if_denied=not list_all)
        if not list_all:
            refused = [_refused(name) for name in sorted(names - allowed)]
        names = allowed
    remaining = max(min(_partition_size_limit(ctx), request.response_partition_limit), 1)
    results: list[TopicResult] = []
    next_cursor: Cursor | None = None
    for name in sorted(names):
        if remaining == 0:
            # Every partition of the previous topic fitted: continue with this topic next time.
            next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        topic = topics.get(name)
        if topic is None:
            if not list_all:
                results.append(_missing(ctx, name))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        end = min(len(topic.partitions), start + remaining)
        results.append(_topic_result(ctx, topic, start, end, live))
        if end < len(topic.partitions):
            next_cursor = Cursor(topic_name=name, partition_index=end)
            break
        remaining -= max(end - start, 0)
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=results + refused, next_cursor=next_cursor)


def _partition_size_limit(ctx: RequestContext) -> int:
    return ctx.broker.config.max_request_partition_size_limit


def _topic_result(ctx: RequestContext, topic: Topic, start: int, end: int, live: Collection[int]) -> TopicResult:
    return TopicResult(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=[
            PartitionResult(
                error_code=ErrorCode.NONE, eligible_leader_replicas=[], last_known_elr=[], **partition.leadership(live)
            )
            for partition in topic.partitions[start:end]
        ],
        topic_authorized_operations=ctx.authorized_operations(AclResourceType.TOPIC, topic.name),
    )


def _refused(name: str) -> TopicResult:
    return TopicResult(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, topic_id=ZERO_UUID,
                       is_internal=False, partitions=[], topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED)


def _missing(ctx: RequestContext, name: str) -> TopicResult:
    try:
        validate_topic_name(name)
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    except KafkaError:
        code = ErrorCode.INVALID_TOPIC_EXCEPTION
    return TopicResult(
        error_code=code,
        name=name,
        topic_id=ZERO_UUID,
        is_internal=name in INTERNAL_TOPICS,
        partitions=[],
        topic_authorized_operations=ctx.authorized_operations(AclResourceType.TOPIC, name),
    )
