"""ListOffsets (key 2), versions 1-11.

Per partition, the offset for a timestamp or one of the special timestamps:
EARLIEST (-2) the log start offset; LATEST (-1) the last fetchable offset; MAX_TIMESTAMP (-3, v7+)
the record with the largest timestamp; EARLIEST_LOCAL (-4, v8+) the log start offset, as no segments
live in remote storage; LATEST_TIERED (-5, v9+) and EARLIEST_PENDING_UPLOAD (-6, v11+) offset -1, as
nothing is tiered. A timestamp >= 0 gives the first record whose timestamp is at least that.

The last fetchable offset is, as in Kafka, for a consumer (replica id -1) the high watermark at
isolation_level 0 (read_uncommitted, and below v2, which has no isolation level) and the last stable
offset at isolation_level 1 (read_committed); for anyone else (a follower) the log end offset. A
timestamp lookup (MAX_TIMESTAMP too) whose record lies at or above it is answered offset and timestamp
-1, as when no record matches: a consumer is never pointed at records it may not read yet.
Only the partition's leader answers; other brokers NOT_LEADER_OR_FOLLOWER.
A segment that cannot be read (out of file descriptors) fails its partition alone, KAFKA_STORAGE_ERROR.
With an authorizer, a topic needs DESCRIBE (TOPIC_AUTHORIZATION_FAILED for its partitions otherwise).
"""
from __future__ import annotations

import logging

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.partition import Partition
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import ListOffsetsRequest, ListOffsetsResponse
from trafka.wire.protocol import ApiKey

logger = logging.getLogger(__name__)

TopicResponse = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6

CONSUMER_REPLICA_ID = -1
READ_COMMITTED = 1


@handles(ApiKey.LIST_OFFSETS, 1, 11)
async def handle_list_offsets(ctx: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
    topics = ctx.broker.topics
    responses = []
    authorized = ctx.authorized_names(AclOperation.DESCRIBE, AclResourceType.TOPIC, (t.name for t in request.topics))
    for wanted in request.topics:
        partitions = []
        for wanted_partition in wanted.partitions:
            partition = topics.partition(wanted.name, wanted_partition.partition_index)
            if partition is None or wanted.name not in authorized:
                partitions.append(
                    PartitionResponse(
                        partition_index=wanted_partition.partition_index,
                        error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if wanted.name in authorized
                        else ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    )
                )
                continue
            partitions.append(_offset(partition, wanted_partition, ctx.api_version, request.replica_id,
                                      request.isolation_level))
        responses.append(TopicResponse(name=wanted.name, partitions=partitions))
    return ListOffsetsResponse(topics=responses)


def _offset(partition: Partition, wanted: ListOffsetsRequest.ListOffsetsPartition, version: int,
            replica_id: int, isolation_level: int) -> PartitionResponse:
    response = PartitionResponse(partition_index=wanted.partition_index, error_code=ErrorCode.NONE)
    if not partition.is_leader:
        response.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        return response
    try:
        partition.check_leader_epoch(wanted.current_leader_epoch)
    except KafkaError as exc:
        response.error_code = exc.code
        return response
    timestamp = wanted.timestamp
    log = partition.log
    if replica_id != CONSUMER_REPLICA_ID:
        last_fetchable = log.log_end_offset
    elif isolation_level == READ_COMMITTED:
        last_fetchable = log.last_stable_offset
    else:
        last_fetchable = log.high_watermark
    found: tuple[int, int] | None
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        found = (partition.log_start_offset, -1)
    elif timestamp == LATEST:
        found = (last_fetchable, -1)
    elif timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        found = None
    elif timestamp < 0 and timestamp != MAX_TIMESTAMP:
        response.error_code = ErrorCode.INVALID_REQUEST
        return response
    else:
        try:  # these read old segments' files
            found = log.max_timestamp_offset() if timestamp == MAX_TIMESTAMP else log.offset_for_timestamp(timestamp)
        except OSError as exc:  # one that cannot be opened (out of descriptors): this partition fails alone
            logger.warning("looking up timestamp %d in %s failed: %s", timestamp, partition, exc)
            response.error_code = ErrorCode.KAFKA_STORAGE_ERROR
            return response
        if found is not None and found[0] >= last_fetchable:
            found = None
    if found is None:
        response.offset, response.timestamp = -1, -1
    else:
        response.offset, response.timestamp = found
        if version >= 4:
            response.leader_epoch = partition.leader_epoch
    return response
