"""ConsumerGroupDescribe (key 69), versions 0-1.

Describes consumer groups of the KIP-848 protocol: state (Empty, Assigning, Reconciling, Stable), group
epoch, assignment epoch, the server assignor in use and, per member, its epoch, client, subscription
(names and regex), current assignment and target assignment, with topic names next to topic ids.
A group id that is unknown or belongs to a classic group gets GROUP_ID_NOT_FOUND (DescribeGroups
describes those); an empty group id INVALID_GROUP_ID; a group whose ``__consumer_offsets`` partition is
not led here NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS while it loads; COORDINATOR_NOT_AVAILABLE
while the broker stops. v1 adds each member's type: 1 for a member of the consumer protocol, 0
for a member that uses the classic protocol (JoinGroup/SyncGroup) inside the consumer group, after an
online upgrade or because a classic consumer joined it. Authorized operations are not computed.
With an authorizer, a group the principal may not DESCRIBE is GROUP_AUTHORIZATION_FAILED (first in the answer,
as Kafka orders it); the authorized operations asked for come from the ACLs.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse
from trafka.wire.protocol import ApiKey

if TYPE_CHECKING:
    from trafka.broker.groups.consumer import Assignment

Described = ConsumerGroupDescribeResponse.DescribedGroup
Member = ConsumerGroupDescribeResponse.Member
DescribedAssignment = ConsumerGroupDescribeResponse.Assignment
TopicPartitions = ConsumerGroupDescribeResponse.TopicPartitions

CLASSIC_MEMBER_TYPE = 0
CONSUMER_MEMBER_TYPE = 1


@handles(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, 1)
async def handle_consumer_group_describe(
    ctx: RequestContext, request: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    protocol = ctx.broker.group_coordinator().consumer
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

    operations = request.include_authorized_operations
    groups = [Described(group_id=group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
              for group_id in request.group_ids
              if not ctx.authorize(AclOperation.DESCRIBE, AclResourceType.GROUP, group_id)]
    refused = {result.group_id for result in groups}
    for group_id in request.group_ids:
        if group_id in refused:
            continue
        if not group_id:
            groups.append(Described(group_id=group_id, error_code=ErrorCode.INVALID_GROUP_ID))
            continue
        try:
            group = protocol.describe(group_id)
        except KafkaError as exc:
            groups.append(Described(group_id=group_id, error_code=exc.code, error_message=exc.message or None))
            continue
        groups.append(
            Described(
                group_id=group_id,
                group_state=str(group.state),
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=protocol.assignor_of(group),
                members=[
                    Member(
                        member_id=m.member_id,
                        instance_id=m.instance_id,
                        rack_id=m.rack_id,
                        member_epoch=m.member_epoch,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        subscribed_topic_names=list(m.subscribed_topic_names),
                        subscribed_topic_regex=m.subscribed_topic_regex,
                        assignment=describe_assignment(m.assigned_partitions),
                        target_assignment=describe_assignment(group.target_assignment.get(m.member_id, {})),
                        member_type=CLASSIC_MEMBER_TYPE if m.uses_classic_protocol else CONSUMER_MEMBER_TYPE,
                    )
                    for m in group.members.values()
                ],
                authorized_operations=ctx.authorized_operations(AclResourceType.GROUP, group_id) if operations
                else -(2**31),
            )
        )
    return ConsumerGroupDescribeResponse(groups=groups)
