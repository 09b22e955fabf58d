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
UNKNOWN_TOPIC_OR_PARTITION) and the broker logs why.

Authorization (with an authorizer): a request for all topics lists only those the principal may DESCRIBE; a
topic asked for by name (or id) that it may not describe comes back TOPIC_AUTHORIZATION_FAILED, with no id (or
no name), whether or not it exists. Auto-creation needs CREATE on the cluster or on the topic
(TOPIC_AUTHORIZATION_FAILED otherwise). The topics' authorized operations (v8+) and the cluster's (v8-10),
when asked for, are computed from the ACLs (0 for a cluster the principal may not describe); without an
authorizer they are every operation the resource supports.
"""
from __future__ import annotations

import logging
import uuid

import trio

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.partition import Partition
from trafka.broker.security.authorizer import CLUSTER_NAME, AclOperation, AclResourceType
from trafka.broker.topics import INTERNAL_TOPICS, Topic
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
#: The versions that carry the cluster's authorized operations.
CLUSTER_OPERATIONS_VERSIONS = range(8, 11)

Response = MetadataResponse
TopicResponse = MetadataResponse.MetadataResponseTopic
PartitionResponse = MetadataResponse.MetadataResponsePartition


@handles(ApiKey.METADATA, 0, 13)
async def handle_metadata(ctx: RequestContext, request: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    operations = request.include_topic_authorized_operations and ctx.api_version >= 8
    topics: list[TopicResponse] = []
    if ctx.api_version < TOPIC_IDS_MIN_VERSION and any(wanted.name is None for wanted in request.topics or ()):
        # Topics are named up to v11: the whole request is invalid, each topic answered as such.
        return Response(brokers=[], cluster_id=broker.cluster_id, controller_id=broker.topics.controller_id, topics=[
            TopicResponse(error_code=ErrorCode.INVALID_REQUEST, name=wanted.name or "", topic_id=wanted.topic_id,
                          partitions=[]) for wanted in request.topics])
    live = broker.topics.live_brokers(ctx.listener)
    if request.topics is None or (ctx.api_version == 0 and not request.topics):
        # All topics (v0 asks with an empty list; later versions with null).
        topics = [_topic_response(ctx, topic, operations, live) for topic in broker.topics
                  if ctx.authorize(AclOperation.DESCRIBE, AclResourceType.TOPIC, topic.name, log_if_denied=False)]
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
    cluster_operations = AUTHORIZED_OPERATIONS_OMITTED
    if request.include_cluster_authorized_operations and ctx.api_version in CLUSTER_OPERATIONS_VERSIONS:
        cluster_operations = (ctx.authorized_operations(AclResourceType.CLUSTER, CLUSTER_NAME)
                              if ctx.authorize_cluster(AclOperation.DESCRIBE) else 0)
    return Response(
        brokers=[Response.MetadataResponseBroker(node_id=node_id, host=host, port=port, rack=rack)
                 for node_id, (host, port, rack) in live.items()],
        cluster_id=broker.cluster_id,
        controller_id=broker.topics.controller_id,
        topics=topics,
        cluster_authorized_operations=cluster_operations,
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
    ctx: RequestContext, wanted: MetadataRequest.MetadataRequestTopic, allow_auto_create: bool, operations: bool,
    live: dict[int, tuple[str, int, str | None]],
) -> TopicResponse:
    topics = ctx.broker.topics
    if wanted.name is None:
        topic = topics.by_id(wanted.topic_id)
        if topic is None:
            return TopicResponse(
                error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=wanted.topic_id, partitions=[]
            )
        if not ctx.authorize(AclOperation.DESCRIBE, AclResourceType.TOPIC, topic.name):
            return TopicResponse(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=None,
                                 topic_id=wanted.topic_id, partitions=[])
        return _topic_response(ctx, topic, operations, live)
    if not ctx.authorize(AclOperation.DESCRIBE, AclResourceType.TOPIC, wanted.name):
        return TopicResponse(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=wanted.name, topic_id=ZERO_UUID,
                             partitions=[])
    topic = topics.get(wanted.name)
    if topic is not None:
        return _topic_response(ctx, topic, operations, live)
    try:
        if not allow_auto_create:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if not (ctx.authorize_cluster(AclOperation.CREATE, log_if_denied=False)
                or ctx.authorize(AclOperation.CREATE, AclResourceType.TOPIC, wanted.name)):
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        topic = await (ctx.broker.create_internal_topic(wanted.name) if wanted.name in INTERNAL_TOPICS
                       else topics.auto_create(wanted.name))
    except KafkaError as exc:
        refused = exc.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        return TopicResponse(error_code=exc.code, name=wanted.name, topic_id=ZERO_UUID, partitions=[],
                             is_internal=refused and wanted.name in INTERNAL_TOPICS)
    return _topic_response(ctx, topic, operations, live)


def _topic_response(ctx: RequestContext, topic: Topic, operations: bool,
                    live: dict[int, tuple[str, int, str | None]]) -> TopicResponse:
    return TopicResponse(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=[_partition_response(p, live) for p in topic.partitions],
        topic_authorized_operations=(ctx.authorized_operations(AclResourceType.TOPIC, topic.name) if operations
                                     else AUTHORIZED_OPERATIONS_OMITTED),
    )


def _partition_response(partition: Partition, live: dict[int, tuple[str, int, str | None]]) -> PartitionResponse:
    """A partition's leadership; LEADER_NOT_AVAILABLE while it has no live leader, as in Kafka."""
    leadership = partition.leadership(live)
    code = ErrorCode.NONE if leadership["leader_id"] in live else ErrorCode.LEADER_NOT_AVAILABLE
    return PartitionResponse(error_code=code, **leadership)
