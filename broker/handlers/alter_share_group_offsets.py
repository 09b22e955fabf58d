"""AlterShareGroupOffsets (key 91), version 0.

Sets where an empty share group (KIP-932) starts consuming partitions: each partition's share state is initialized
again at the start offset given (InitializeShareGroupState through the share persister, with the group's epoch as
its state epoch), its in-flight records forgotten, and the partition recorded among the group's initialized ones.
A group that does not exist yet is created, empty, as Kafka does.

Errors, for the whole request: an empty group id is INVALID_GROUP_ID; a group with members NON_EMPTY_GROUP ("The
group is not empty."); a classic or consumer group GROUP_ID_NOT_FOUND; NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS
and COORDINATOR_NOT_AVAILABLE as for every group API. A topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION for
each of its partitions (such topics come first in the response, as in Kafka's), as is a partition the topic does not
have. With an authorizer the principal needs READ on the group (GROUP_AUTHORIZATION_FAILED) and on each topic
(TOPIC_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse
from trafka.wire.primitives import ZERO_UUID
from trafka.wire.protocol import ApiKey

TopicResult = AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponseTopic
PartitionResult = AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponsePartition
UNKNOWN_TOPIC = "This server does not host this topic-partition."


@handles(ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, 0)
async def handle_alter_share_group_offsets(
        ctx: RequestContext, request: AlterShareGroupOffsetsRequest) -> AlterShareGroupOffsetsResponse:
    from trafka.broker.handlers.delete_share_group_offsets import share_group_metadata

    group_id = request.group_id
    if not ctx.authorize(AclOperation.READ, AclResourceType.GROUP, group_id):
        return AlterShareGroupOffsetsResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                              error_message="Group authorization failed.")
    coordinator = ctx.broker.group_coordinator()
    try:
        if not group_id:
            raise KafkaError(ErrorCode.INVALID_GROUP_ID, "The group id is invalid.")
        coordinator.check_group(group_id)
        metadata = share_group_metadata(coordinator, group_id, create=True)
        if metadata.group is not None and metadata.group.members:
            raise KafkaError(ErrorCode.NON_EMPTY_GROUP, "The group is not empty.")
    except KafkaError as exc:
        return AlterShareGroupOffsetsResponse(error_code=exc.code, error_message=exc.message or None)
    topics = ctx.broker.topics
    unknown, known = [], []
    altered: dict = {}
    for wanted in request.topics:
        topic = topics.get(wanted.topic_name)
        if not ctx.authorize(AclOperation.READ, AclResourceType.TOPIC, wanted.topic_name):
            known.append(TopicResult(topic_name=wanted.topic_name, topic_id=ZERO_UUID, partitions=[
                PartitionResult(partition_index=p.partition_index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                error_message="Topic authorization failed.") for p in wanted.partitions]))
            continue
        if topic is None:
            unknown.append(TopicResult(topic_name=wanted.topic_name, topic_id=ZERO_UUID, partitions=[
                PartitionResult(partition_index=p.partition_index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                error_message=UNKNOWN_TOPIC) for p in wanted.partitions]))
            continue
        results = []
        for partition in wanted.partitions:
            index = partition.partition_index
            if not 0 <= index < len(topic.partitions):
                results.append(PartitionResult(partition_index=index, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                               error_message=UNKNOWN_TOPIC))
                continue
            try:
                await ctx.broker.share_persister().initialize(group_id, topic.topic_id, index, metadata.state_epoch,
                                                              partition.start_offset)
            except KafkaError as exc:
                results.append(PartitionResult(partition_index=index, error_code=exc.code,
                                               error_message=exc.message or None))
                continue
            altered.setdefault((topic.topic_id, topic.name), set()).add(index)
            results.append(PartitionResult(partition_index=index))
        known.append(TopicResult(topic_name=wanted.topic_name, topic_id=topic.topic_id, partitions=results))
    if altered:
        try:
            metadata.record_initialized(altered)
        except KafkaError as exc:
            return AlterShareGroupOffsetsResponse(error_code=exc.code, error_message=exc.message or None)
    return AlterShareGroupOffsetsResponse(responses=unknown + known)
