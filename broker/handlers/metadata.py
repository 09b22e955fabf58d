"""Metadata (key 3), versions 0-13.

Brokers, cluster id, controller and topics with their partitions: every live broker of the cluster,
and each partition's leader, leader epoch, replicas, ISR and offline replicas (those on brokers not
alive). A partition without a live leader comes back LEADER_NOT_AVAILABLE. A single node leads every
partition and is its only replica. Topics are named (v0-11) or may be identified by id alone
(v12+; a nameless topic before that makes the request invalid: every topic comes back INVALID_REQUEST,
as in Kafka); a request for all topics lists every topic, internal ones included, as Kafka does. Unknown topics are
auto-created when ``auto.create.topics.enable`` is on and the request allows it (v4+ may forbid it);
otherwise they come back with UNKNOWN_TOPIC_OR_PARTITION, and invalid names with
INVALID_TOPIC_EXCEPTION. Auto-creation keeps to the budget of a CreateTopics request: when the unknown
topics of one request would need more than ``controller.max.records.per.batch`` records together (one
for each topic and each of its partitions), none of them is created (they come back
UNKNOWN_TOPIC_OR_PARTITION) and the broker logs why. Without an authorizer every operation is
allowed: a topic's authorized operations, when asked for (v8+), are all those a topic supports.
"""
from __future__ import annotations

import logging
import uuid

import trio

from trafka.broker.handlers.describe_topic_partitions import TOPIC_OPERATIONS
from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.partition import Partition
from trafka.broker.topics import Topic
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import MetadataRequest, MetadataResponse
from trafka.wire.protocol import ApiKey

log = logging.getLogger(__name__)

# Authorized operations are reported only when asked for; this sentinel means "not computed".
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
ZERO_UUID = uuid.UUID(int=0)
#: The first version whose topics may be given by id alone.
TOPIC_IDS_MIN_VERSION = 12
#: How many named topics are looked up between two chances for other tasks to run.
YIELD_EVERY = 1000

Response = MetadataResponse
TopicResponse = MetadataResponse.MetadataResponseTopic
PartitionResponse = MetadataResponse.MetadataResponsePartition


@handles(ApiKey.METADATA, 0, 13)
async def handle_metadata(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    # Without an authorizer every operation on a topic is allowed; reported when asked for (v8+).
    operations = TOPIC_OPERATIONS if request.include_topic_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
    topics: list[TopicResponse] = []
    if ctx.api_version < TOPIC_IDS_MIN_VERSION and any(wanted.name is None for wanted in request.topics or ()):
        # Topics are named up to v11: the whole request is invalid, each topic answered as such.
        return Response(brokers=[], cluster_id=broker.cluster_id, controller_id=broker.topics.controller_id, topics=[
            TopicResponse(error_code=ErrorCode.INVALID_REQUEST, name=wanted.name or "", topic_id=wanted.topic_id,
                          partitions=[]) for wanted in request.topics])
    live = broker.topics.live_brokers(ctx.listener)
    if request.topics is None or (ctx.api_version == 0 and not request.topics):
        # All topics (v0 asks with an empty list; later versions with null).
        topics = [_topic_response(topic, operations, live) for topic in broker.topics]
    else:
        allow_auto_create = (
            request.allow_auto_topic_creation
            and broker.config.auto_create_topics_enable
            and _within_budget(ctx, request.topics)
        )
        for index, wanted in enumerate(request.topics, start=1):
            topics.append(await _lookup(ctx, wanted, allow_auto_create, operations, live))
            if not index % YIELD_EVERY:  # a request naming a million topics shares the event loop
                await trio.lowlevel.checkpoint()
    return Response(
        brokers=[Response.MetadataResponseBroker(node_id=node_id, host=host, port=port, rack=rack)
                 for node_id, (host, port, rack) in live.items()],
        cluster_id=broker.cluster_id,
        controller_id=broker.topics.controller_id,
        topics=topics,
    )


def _within_budget(ctx: RequestContext, wanted: list[MetadataRequest.MetadataRequestTopic]) -> bool:
    """Whether auto-creating the request's unknown topics stays within one request's partition budget."""
    broker = ctx.broker
    unknown = {topic.name for topic in wanted if topic.name is not None and broker.topics.get(topic.name) is None}
    needed = len(unknown) * (1 + broker.config.num_partitions)
    if needed <= broker.config.controller_max_records_per_batch:
        return True
    log.warning(
        "not auto-creating the %d unknown topics of a Metadata request from %s (client %r): with their "
        "partitions they are %d records, more than controller.max.records.per.batch=%d",
        len(unknown), ctx.peer, ctx.header.client_id, needed, broker.config.controller_max_records_per_batch,
    )
    return False


async def _lookup(
    ctx: RequestContext, wanted: MetadataRequest.MetadataRequestTopic, allow_auto_create: bool, operations: int,
    live: dict[int, tuple[str, int, str | None]],
) -> TopicResponse:
    topics = ctx.broker.topics
    if wanted.name is None:
        topic = topics.by_id(wanted.topic_id)
        if topic is None:
            return TopicResponse(
                error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=wanted.topic_id, partitions=[]
            )
        return _topic_response(topic, operations, live)
    topic = topics.get(wanted.name)
    if topic is not None:
        return _topic_response(topic, operations, live)
    try:
        if not allow_auto_create:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        topic = await topics.auto_create(wanted.name)
    except KafkaError as exc:
        return TopicResponse(error_code=exc.code, name=wanted.name, topic_id=ZERO_UUID, partitions=[])
    return _topic_response(topic, operations, live)


def _topic_response(topic: Topic, operations: int, live: dict[int, tuple[str, int, str | None]]) -> TopicResponse:
    return TopicResponse(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=[_partition_response(p, live) for p in topic.partitions],
        topic_authorized_operations=operations,
    )


def _partition_response(partition: Partition, live: dict[int, tuple[str, int, str | None]]) -> PartitionResponse:
    """A partition's leadership; LEADER_NOT_AVAILABLE while it has no live leader, as in Kafka."""
    leadership = partition.leadership(live)
    code = ErrorCode.NONE if leadership["leader_id"] in live else ErrorCode.LEADER_NOT_AVAILABLE
    return PartitionResponse(error_code=code, **leadership)
