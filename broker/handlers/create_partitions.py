"""CreatePartitions (key 37), versions 0-3.

Raises a topic's partition count to ``count``; the new partitions start empty, their replicas placed
as for a new topic (or as ``assignments`` say), led by their first replica. Per topic, with Kafka's codes and messages:

* a topic named twice in the request: INVALID_REQUEST; an unknown topic: UNKNOWN_TOPIC_OR_PARTITION;
* a count equal to or below the current one: INVALID_PARTITIONS (partitions are never removed);
* manual ``assignments``, when given, must list exactly one replica set per new partition, each with
  distinct registered brokers (here only this node) and the topic's replication factor:
  INVALID_REPLICA_ASSIGNMENT otherwise.

Before any topic is looked at, the partitions the request would add are summed over its existing
topics; more than ``controller.max.records.per.batch`` (10,000) answers every topic of the request
POLICY_VIOLATION ("Excessively large number of additional partitions per request.") and changes nothing, so that one request's cost stays bounded whatever counts it
carries.

``validate_only`` checks everything and changes nothing.

Version notes: v2 is the first flexible version; v3 changed only quota behaviour.
With an authorizer, a topic needs DESCRIBE and ALTER (TOPIC_AUTHORIZATION_FAILED, said before whether it
exists).
"""
from __future__ import annotations

from collections import Counter

from trafka.broker.handlers.create_topics import check_replica_assignment
from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import CreatePartitionsRequest, CreatePartitionsResponse
from trafka.wire.protocol import ApiKey

TopicResult = CreatePartitionsResponse.CreatePartitionsTopicResult
TOO_MANY_PARTITIONS = "Excessively large number of additional partitions per request."


@handles(ApiKey.CREATE_PARTITIONS, 0, 3)
async def handle_create_partitions(
    ctx: RequestContext, request: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    counts = Counter(topic.name for topic in request.topics)
    if _added_partitions(ctx, request, counts) > ctx.broker.config.controller_max_records_per_batch:
        return CreatePartitionsResponse(
            throttle_time_ms=0,
            results=[
                TopicResult(name=topic.name, error_code=ErrorCode.POLICY_VIOLATION, error_message=TOO_MANY_PARTITIONS)
                for topic in request.topics
            ],
        )
    results: list[TopicResult] = []
    reported_duplicates: set[str] = set()
    for wanted in request.topics:
        if counts[wanted.name] > 1:
            if wanted.name not in reported_duplicates:
                reported_duplicates.add(wanted.name)
                results.append(TopicResult(name=wanted.name, error_code=ErrorCode.INVALID_REQUEST,
                                           error_message="Duplicate topic name."))
            continue
        if ctx.broker.authorizer is not None and not (
                ctx.authorize(AclOperation.DESCRIBE, AclResourceType.TOPIC, wanted.name, log_if_denied=False)
                and ctx.authorize(AclOperation.ALTER, AclResourceType.TOPIC, wanted.name)):
            results.append(TopicResult(name=wanted.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                       error_message=None))
            continue
        try:
            await _create_partitions(ctx, wanted, request.validate_only)
        except KafkaError as exc:
            results.append(TopicResult(name=wanted.name, error_code=exc.code, error_message=exc.message or None))
        else:
            results.append(TopicResult(name=wanted.name, error_code=ErrorCode.NONE, error_message=None))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


def _added_partitions(ctx: RequestContext, request: CreatePartitionsRequest, counts: Counter[str]) -> int:
    """How many partitions the request would add to the existing topics it names once each."""
    total = 0
    for wanted in request.topics:
        topic = ctx.broker.topics.get(wanted.name)
        if counts[wanted.name] == 1 and topic is not None:
            total += max(wanted.count - len(topic.partitions), 0)
    return total


async def _create_partitions(
    ctx: RequestContext, wanted: CreatePartitionsRequest.CreatePartitionsTopic, validate_only: bool
) -> None:
    topics = ctx.broker.topics
    topic = topics.get(wanted.name)
    if topic is None:
        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
    # The count checks come first: the topic must grow.
    await topics.create_partitions(wanted.name, wanted.count, validate_only=True)
    if wanted.assignments is not None:
        additional = wanted.count - len(topic.partitions)
        if len(wanted.assignments) != additional:
            raise KafkaError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Attempted to add {additional} additional partition(s), but only "
                f"{len(wanted.assignments)} assignment(s) were specified.",
            )
        replication_factor = len(topic.partitions[0].replicas)
        for assignment in wanted.assignments:
            check_replica_assignment(ctx, assignment.broker_ids, replication_factor)
    if not validate_only:
        await topics.create_partitions(
            wanted.name, wanted.count,
            replica_assignment=[a.broker_ids for a in wanted.assignments] if wanted.assignments is not None else None)
