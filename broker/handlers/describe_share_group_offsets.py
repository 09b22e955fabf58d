"""DescribeShareGroupOffsets (key 90), versions 0-1.

The start offset of each partition of a share group (KIP-932), from the share coordinator of the partition's key
(ReadShareGroupStateSummary through the share persister), with the leader epoch it last saw, and from v1 the lag:
the partition's high watermark less the start offset less the records at or after it whose delivery is complete.
A partition whose state was never initialized, or whose coordinator cannot answer, has start offset -1 and lag -1
(no error, as Kafka answers); so has one whose delivery complete count is not known. Without topics the group's
initialized partitions are described (none for a group that does not exist); with topics, the partitions named
(a topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION for each).

Per group: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS and COORDINATOR_NOT_AVAILABLE as for every group API; with
an authorizer a group the principal may not DESCRIBE is GROUP_AUTHORIZATION_FAILED, and a topic it may not
DESCRIBE is TOPIC_AUTHORIZATION_FAILED for each of its partitions (left out when every topic is described).
"""
from __future__ import annotations

import uuid

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse
from trafka.wire.primitives import ZERO_UUID
from trafka.wire.protocol import ApiKey

Group = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
Topic = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseTopic
Partition = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponsePartition
UNKNOWN_TOPIC = "This server does not host this topic-partition."
TOPIC_AUTHORIZATION = "Topic authorization failed."


@handles(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, 0, 1)
async def handle_describe_share_group_offsets(
        ctx: RequestContext, request: DescribeShareGroupOffsetsRequest) -> DescribeShareGroupOffsetsResponse:
    broker = ctx.broker
    coordinator = broker.group_coordinator()
    groups = []
    for wanted in request.groups:
        group_id = wanted.group_id
        if not ctx.authorize(AclOperation.DESCRIBE, AclResourceType.GROUP, group_id):
            groups.append(Group(group_id=group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        try:
            coordinator.check_group(group_id)
        except KafkaError as exc:
            groups.append(Group(group_id=group_id, error_code=exc.code, error_message=exc.message or None))
            continue
        if wanted.topics is None:
            group = coordinator.share_group(group_id)
            asked: list[tuple[str, list[int]]] = []
            if group is not None:
                for topic_id, partitions in group.initialized_partitions().items():
                    topic = broker.topics.by_id(topic_id)
                    if topic is not None and ctx.authorize(AclOperation.DESCRIBE, AclResourceType.TOPIC, topic.name,
                                                           log_if_denied=False):
                        asked.append((topic.name, sorted(partitions)))
            asked.sort()
        else:
            asked = [(topic.topic_name, sorted(set(topic.partitions))) for topic in wanted.topics]
        topics = []
        for name, partitions in asked:
            topic = broker.topics.get(name)
            if not ctx.authorize(AclOperation.DESCRIBE, AclResourceType.TOPIC, name):
                topics.append(_failed(name, ZERO_UUID, partitions, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                      TOPIC_AUTHORIZATION))
            elif topic is None:
                topics.append(_failed(name, ZERO_UUID, partitions, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                      UNKNOWN_TOPIC))
            else:
                topics.append(Topic(topic_name=name, topic_id=topic.topic_id, partitions=[
                    await _describe(ctx, group_id, topic, index) for index in partitions]))
        groups.append(Group(group_id=group_id, topics=topics))
    return DescribeShareGroupOffsetsResponse(groups=groups)


def _failed(name: str, topic_id: uuid.UUID, partitions: list[int], code: ErrorCode, message: str) -> Topic:
    return Topic(topic_name=name, topic_id=topic_id, partitions=[
        Partition(partition_index=index, start_offset=-1, leader_epoch=0, error_code=code, error_message=message)
        for index in partitions])


async def _describe(ctx: RequestContext, group_id: str, topic, index: int) -> Partition:
    try:
        summary = await ctx.broker.share_persister().read_summary(group_id, topic.topic_id, index, 0)
    except KafkaError:
        return Partition(partition_index=index, start_offset=-1, leader_epoch=0, lag=-1)
    lag = -1
    partition = topic.partitions[index] if 0 <= index < len(topic.partitions) else None
    if summary.start_offset != -1 and summary.delivery_complete_count != -1 and partition is not None:
        # (-1 for a partition without a replica on this broker: its high watermark is not known here)
        lag = partition.high_watermark - summary.start_offset - summary.delivery_complete_count
    return Partition(partition_index=index, start_offset=summary.start_offset, leader_epoch=summary.leader_epoch,
                     lag=lag)
