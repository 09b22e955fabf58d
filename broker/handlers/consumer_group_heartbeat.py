"""ConsumerGroupHeartbeat (key 68), versions 0-1.

The one request of the consumer group protocol (KIP-848): a member joins (member epoch 0, with its
subscription and rebalance timeout), heartbeats (its member epoch, and what changed since its last
heartbeat: subscription, owned partitions ...), and leaves (epoch -1; -2 for a static member that will
be back). The response carries the member's epoch, the heartbeat interval and, when it changed, the
member's assignment. See :mod:`trafka.broker.groups.consumer_protocol` for the coordinator's side.

Version notes: v0 lets the coordinator generate the member id when the member sends none; from v1
the client generates it (an empty member id is INVALID_REQUEST) and may subscribe with a regex
(SubscribedTopicRegex, RE2 syntax, matched against whole topic names).
Errors: INVALID_REQUEST (bad field combinations), UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH (the member
must give up its partitions and rejoin with epoch 0), UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID,
GROUP_MAX_SIZE_REACHED, GROUP_ID_NOT_FOUND (the group id belongs to a classic group with members that
cannot be upgraded: group.consumer.migration.policy forbids it, its protocol type is not ``consumer``,
or its members' embedded protocol cannot be read; a classic group that can be is converted, with its
members),
UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION, NOT_COORDINATOR (the group's ``__consumer_offsets``
partition is not led here), COORDINATOR_LOAD_IN_PROGRESS while it loads, COORDINATOR_NOT_AVAILABLE while
the broker stops or when what the heartbeat wrote is not replicated within offsets.commit.timeout.ms.
With an authorizer, the group needs READ (GROUP_AUTHORIZATION_FAILED) and every subscribed topic named
DESCRIBE (TOPIC_AUTHORIZATION_FAILED otherwise).
"""
from __future__ import annotations

from trafka.broker.handlers.join_group import _host
from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from trafka.wire.protocol import ApiKey

TopicPartitions = ConsumerGroupHeartbeatResponse.TopicPartitions
Assignment = ConsumerGroupHeartbeatResponse.Assignment


@handles(ApiKey.CONSUMER_GROUP_HEARTBEAT, 0, 1)
async def handle_consumer_group_heartbeat(
    ctx: RequestContext, request: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    if not ctx.authorize(AclOperation.READ, AclResourceType.GROUP, request.group_id):
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, member_epoch=0,
                                              heartbeat_interval_ms=0)
    subscribed = set(request.subscribed_topic_names or ())
    if subscribed and len(ctx.authorized_names(AclOperation.DESCRIBE, AclResourceType.TOPIC, subscribed)) < len(
            subscribed):
        return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, member_epoch=0,
                                              heartbeat_interval_ms=0)
    owned = None
    if request.topic_partitions is not None:
        owned = {}
        for topic in request.topic_partitions:
            owned[topic.topic_id] = owned.get(topic.topic_id, frozenset()) | frozenset(topic.partitions)
    coordinator = ctx.broker.group_coordinator()
    await coordinator.prepare_to_store()
    protocol = coordinator.consumer
    from trafka.broker.groups.consumer_protocol import HeartbeatRequest  # loaded with the coordinator (Broker.group_coordinator)

    result = protocol.heartbeat(
        HeartbeatRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            subscribed_topic_names=request.subscribed_topic_names,
            subscribed_topic_regex=request.subscribed_topic_regex if ctx.api_version >= 1 else None,
            server_assignor=request.server_assignor,
            owned_partitions=owned,
            client_id=ctx.header.client_id or "",
            client_host=_host(ctx.peer),
            api_version=ctx.api_version,
        )
    )
    if result.error is ErrorCode.NONE:
        # Answered once the records this heartbeat wrote are replicated (Kafka's runtime defers it
        # the same way; a timeout is COORDINATOR_NOT_AVAILABLE).
        written = await coordinator.await_written(request.group_id)
        if written is not ErrorCode.NONE:
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE if written is ErrorCode.REQUEST_TIMED_OUT else written
            return ConsumerGroupHeartbeatResponse(error_code=code, member_epoch=0, heartbeat_interval_ms=0)
    assignment = None
    if result.assignment is not None:
        assignment = Assignment(
            topic_partitions=[
                TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
                for topic_id, partitions in result.assignment.items()
            ]
        )
    return ConsumerGroupHeartbeatResponse(
        error_code=result.error,
        error_message=result.error_message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=assignment,
    )
