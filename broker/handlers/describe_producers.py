"""DescribeProducers (key 61), version 0.

What ``kafka-transactions.sh describe-producers`` shows (KIP-664): the producers a partition's log
knows of (those not yet expired), each with its producer id and epoch, last sequence (-1 when it wrote
no data batch since its epoch began), last timestamp, the epoch of the coordinator that wrote its last
transaction marker (-1 when none did) and the first offset of its open transaction (-1 when none is
open), in producer id order.

As in Kafka, any broker holding a replica of the partition answers, the leader or a follower (the
admin client asks the leader unless told which broker to ask). A partition of an existing topic with no
replica here is NOT_LEADER_OR_FOLLOWER; an unknown partition UNKNOWN_TOPIC_OR_PARTITION; every
partition of an unknown topic UNKNOWN_TOPIC_OR_PARTITION, and of a topic name Kafka would refuse
INVALID_TOPIC_EXCEPTION, each with Kafka's message.
With an authorizer, a topic needs READ (TOPIC_AUTHORIZATION_FAILED for its partitions).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.broker.partition import Partition
from trafka.broker.topics import validate_topic_name
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import DescribeProducersRequest, DescribeProducersResponse
from trafka.wire.protocol import ApiKey

TopicResponse = DescribeProducersResponse.TopicResponse
PartitionResponse = DescribeProducersResponse.PartitionResponse
ProducerState = DescribeProducersResponse.ProducerState
#: Kafka's message for UNKNOWN_TOPIC_OR_PARTITION, which it gives for a topic it does not know.
UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."


@handles(ApiKey.DESCRIBE_PRODUCERS, 0, 0)
async def handle_describe_producers(ctx: RequestContext,
                                    request: DescribeProducersRequest) -> DescribeProducersResponse:
    topics = []
    for wanted in request.topics:
        error: KafkaError | None = None
        try:
            validate_topic_name(wanted.name)
        except KafkaError as exc:
            error = exc
        if error is None and not ctx.authorize(AclOperation.READ, AclResourceType.TOPIC, wanted.name):
            error = KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")
        topic = ctx.broker.topics.get(wanted.name) if error is None else None
        if error is None and topic is None:
            error = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_MESSAGE)
        partitions = []
        for index in wanted.partition_indexes:
            if error is not None:
                partitions.append(PartitionResponse(partition_index=index, error_code=error.code,
                                                    error_message=error.message or None))
            elif not 0 <= index < len(topic.partitions):
                partitions.append(PartitionResponse(partition_index=index,
                                                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            else:
                partitions.append(_producers(topic.partitions[index]))
        topics.append(TopicResponse(name=wanted.name, partitions=partitions))
    return DescribeProducersResponse(topics=topics)


def _producers(partition: Partition) -> PartitionResponse:
    log = partition.log
    if log is None:
        return PartitionResponse(partition_index=partition.index, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    active = log.producer_state.active_producers
    return PartitionResponse(partition_index=partition.index, error_code=ErrorCode.NONE, active_producers=[
        ProducerState(
            producer_id=producer_id,
            producer_epoch=entry.producer_epoch,
            last_sequence=entry.last_sequence,
            last_timestamp=entry.last_timestamp,
            coordinator_epoch=entry.coordinator_epoch,
            current_txn_start_offset=-1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset,
        )
        for producer_id, entry in sorted(active.items())
    ])
