"""OffsetForLeaderEpoch (key 23), versions 2-4.

Consumers use it after a leader change to detect log truncation (KIP-320): for the requested epoch
the answer is the largest epoch at or below it and the offset where that epoch ended (the log end
offset for the current epoch), from the partition's leader epoch cache. Epochs below the earliest
known give UNDEFINED (-1, -1). Only the partition's leader answers; another broker
NOT_LEADER_OR_FOLLOWER.
With an authorizer, a topic needs DESCRIBE unless the sender (another broker) has CLUSTER_ACTION on the
cluster (TOPIC_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from trafka.wire.protocol import ApiKey

TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = OffsetForLeaderEpochResponse.EpochEndOffset


@handles(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4)
async def handle_offset_for_leader_epoch(
    ctx: RequestContext, request: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    topics = ctx.broker.topics
    results = []
    authorized = None
    if ctx.broker.authorizer is not None and not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION,
                                                                       log_if_denied=False):
        authorized = ctx.authorized_names(AclOperation.DESCRIBE, AclResourceType.TOPIC,
                                          (t.topic for t in request.topics))
    for wanted in request.topics:
        partitions = []
        for wanted_partition in wanted.partitions:
            index = wanted_partition.partition
            partition = topics.partition(wanted.topic, index)
            if authorized is not None and wanted.topic not in authorized:
                partitions.append(EpochEndOffset(partition=index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
                continue
            if partition is None:
                partitions.append(EpochEndOffset(partition=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                continue
            try:
                if not partition.is_leader:
                    raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                partition.check_leader_epoch(wanted_partition.current_leader_epoch)
            except KafkaError as exc:
                partitions.append(EpochEndOffset(partition=index, error_code=exc.code))
                continue
            epoch, end_offset = partition.log.end_offset_for_leader_epoch(wanted_partition.leader_epoch)
            partitions.append(
                EpochEndOffset(partition=index, error_code=ErrorCode.NONE, leader_epoch=epoch, end_offset=end_offset)
            )
        results.append(TopicResult(topic=wanted.topic, partitions=partitions))
    return OffsetForLeaderEpochResponse(topics=results)
