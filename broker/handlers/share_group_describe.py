"""ShareGroupDescribe (key 77), version 1.

Describes share groups (KIP-932): state (Empty, Stable), group epoch, assignment epoch, the assignor
(``simple``) and, per member, its epoch, rack, client, subscribed topic names and assignment, with topic
names next to topic ids. Groups refused or invalid come first, as Kafka orders them: an empty group id is
INVALID_GROUP_ID; with an authorizer a group the principal may not DESCRIBE is GROUP_AUTHORIZATION_FAILED, and
a group whose members subscribe to or are assigned a topic the principal may not DESCRIBE is
TOPIC_AUTHORIZATION_FAILED (without its description), as Kafka 4.4 answers.
An unknown group is GROUP_ID_NOT_FOUND ("Group g not found."), as is a classic or consumer group ("Group g
is not a share group."); NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS and COORDINATOR_NOT_AVAILABLE as
for every group API. The authorized operations asked for come from the ACLs (every operation of a group
without an authorizer).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import ShareGroupDescribeRequest, ShareGroupDescribeResponse
from trafka.wire.protocol import ApiKey

if TYPE_CHECKING:
    from trafka.broker.groups.share import Assignment

Described = ShareGroupDescribeResponse.DescribedGroup
Member = ShareGroupDescribeResponse.Member
DescribedAssignment = ShareGroupDescribeResponse.Assignment
TopicPartitions = ShareGroupDescribeResponse.TopicPartitions
TOPICS_REFUSED = "The group has described topic(s) that the client is not authorized to describe."
#: Authorized operations not asked for.
NOT_ASKED = -(2**31)


@handles(ApiKey.SHARE_GROUP_DESCRIBE, 1, 1)
async def handle_share_group_describe(
    ctx: RequestContext, request: ShareGroupDescribeRequest
) -> ShareGroupDescribeResponse:
    protocol = ctx.broker.group_coordinator().share
    topics = ctx.broker.topics

    def describe_assignment(assignment: Assignment) -> DescribedAssignment:
        described = []
        for topic_id, partitions in sorted(assignment.items(), key=lambda item: str(item[0])):
            topic = topics.by_id(topic_id)
            if topic is not None:  # partitions of deleted topics are not shown
                described.append(
                    TopicPartitions(topic_id=topic_id, topic_name=topic.name, partitions=sorted(partitions))
                )
        return DescribedAssignment(topic_partitions=described)

    groups = [Described(group_id=group_id, error_code=ErrorCode.INVALID_GROUP_ID)
              for group_id in request.group_ids if not group_id]
    groups += [Described(group_id=group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
               for group_id in request.group_ids
               if group_id and not ctx.authorize(AclOperation.DESCRIBE, AclResourceType.GROUP, group_id)]
    settled = {result.group_id for result in groups}
    for group_id in request.group_ids:
        if group_id in settled:
            continue
        try:
            group = protocol.describe(group_id)
        except KafkaError as exc:
            groups.append(Described(group_id=group_id, error_code=exc.code, error_message=exc.message or None))
            continue
        used = {name for m in group.members.values() for name in m.subscribed_topic_names}
        used.update(topic.name for m in group.members.values() for topic_id in m.assigned_partitions
                    if (topic := topics.by_id(topic_id)) is not None)
        if used and len(ctx.authorized_names(AclOperation.DESCRIBE, AclResourceType.TOPIC, used)) < len(used):
            groups.append(Described(group_id=group_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                    error_message=TOPICS_REFUSED))
            continue
        groups.append(
            Described(
                group_id=group_id,
                group_state=str(group.state),
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name="simple",
                members=[
                    Member(
                        member_id=m.member_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=list(m.subscribed_topic_names),
                        assignment=describe_assignment(m.assigned_partitions),
                    )
                    for m in group.members.values()
                ],
                authorized_operations=(ctx.authorized_operations(AclResourceType.GROUP, group_id)
                                       if request.include_authorized_operations else NOT_ASKED),
            )
        )
    return ShareGroupDescribeResponse(groups=groups)
