"""DeleteRecords (key 21), versions 0-2.

Moves each partition's log start offset up to the given offset: records below it can no longer be
read, and segments wholly below it are deleted. The result is the new low watermark, the leader's log start
offset; followers move theirs when they next fetch (they follow the leader's log start offset).
Offset -1 means the high watermark, i.e. delete everything consumers can currently see. Only the
partition's leader deletes; another broker answers NOT_LEADER_OR_FOLLOWER.

Per partition, as Kafka answers: an unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION; an
internal topic INVALID_TOPIC_EXCEPTION; a topic whose ``cleanup.policy`` does not include delete
POLICY_VIOLATION; an offset below -1 or beyond the high watermark OFFSET_OUT_OF_RANGE. An offset at
or below the current log start offset changes nothing. Errors carry low watermark -1.

Version notes: v2 is the first flexible version; v1 only changed quota behaviour.
With an authorizer, a topic needs DELETE (TOPIC_AUTHORIZATION_FAILED for its partitions).
"""
from __future__ import annotations

import logging

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.broker.partition import Partition
from trafka.broker.topics import INTERNAL_TOPICS
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import DeleteRecordsRequest, DeleteRecordsResponse
from trafka.wire.protocol import ApiKey

log = logging.getLogger(__name__)

TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = DeleteRecordsResponse.DeleteRecordsPartitionResult

HIGH_WATERMARK = -1
INVALID_LOW_WATERMARK = -1


@handles(ApiKey.DELETE_RECORDS, 0, 2)
async def handle_delete_records(ctx: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
    topics = ctx.broker.topics
    results = []
    authorized = ctx.authorized_names(AclOperation.DELETE, AclResourceType.TOPIC, (t.name for t in request.topics))
    for wanted in request.topics:
        partitions = []
        for wanted_partition in wanted.partitions:
            index = wanted_partition.partition_index
            partition = topics.partition(wanted.name, index)
            try:
                if wanted.name not in authorized:
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                if partition is None:
                    raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                if not partition.is_leader:  # followers take the new log start from their leader
                    raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                low_watermark = _delete_records(partition, wanted_partition.offset)
            except KafkaError as exc:
                log.debug("DeleteRecords on %s-%d failed: %s", wanted.name, index, exc)
                partitions.append(
                    PartitionResult(partition_index=index, low_watermark=INVALID_LOW_WATERMARK, error_code=exc.code)
                )
            else:
                partitions.append(
                    PartitionResult(partition_index=index, low_watermark=low_watermark, error_code=ErrorCode.NONE)
                )
        results.append(TopicResult(name=wanted.name, partitions=partitions))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=results)


def _delete_records(partition: Partition, offset: int) -> int:
    """Delete the records of ``partition`` below ``offset``; returns the new log start offset."""
    if partition.topic in INTERNAL_TOPICS:
        raise KafkaError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot delete records of internal topic {partition.topic}"
        )
    storage_log = partition.log
    if not storage_log.config.delete:
        raise KafkaError(
            ErrorCode.POLICY_VIOLATION,
            f"Records of partition {partition.topic}-{partition.index} can not be deleted due to the configured "
            "policy",
        )
    if offset == HIGH_WATERMARK:
        offset = partition.high_watermark
    if offset < 0:
        raise KafkaError(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"The offset {offset} for partition {partition.topic}-{partition.index} is not valid",
        )
    return storage_log.delete_records_before(offset)
