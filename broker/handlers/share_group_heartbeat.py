"""ShareGroupHeartbeat (key 76), version 1.

The one membership request of share groups (KIP-932): a member joins (member epoch 0, its client-chosen
member id and the topic names it subscribes to), heartbeats with its member epoch, and leaves (-1). The
response carries the member's epoch, the heartbeat interval and, when it changed or the member joined, its
assignment: partitions it shares with other members of the group. See :mod:`trafka.broker.groups.share`.

Errors: INVALID_REQUEST (an empty or over-long member id, an empty group or rack id, no subscription when
joining, an epoch below -1), UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, GROUP_MAX_SIZE_REACHED,
GROUP_ID_NOT_FOUND (the group id belongs to a classic or consumer group; a group that is not there for a
member that is not joining), NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE
(the broker stops, or what the heartbeat wrote is not replicated within offsets.commit.timeout.ms).
With an authorizer, the group needs READ (GROUP_AUTHORIZATION_FAILED) and every subscribed topic named
DESCRIBE (TOPIC_AUTHORIZATION_FAILED otherwise).
"""
from __future__ import annotations

from trafka.broker.handlers.join_group import _host
from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from trafka.wire.protocol import ApiKey

TopicPartitions = ShareGroupHeartbeatResponse.TopicPartitions
Assignment = ShareGroupHeartbeatResponse.Assignment


def _refusal(code: ErrorCode, message: str | None = None) -> ShareGroupHeartbeatResponse:
    return ShareGroupHeartbeatResponse(error_code=code, error_message=message, member_epoch=0,
                                       heartbeat_interval_ms=0)


@handles(ApiKey.SHARE_GROUP_HEARTBEAT, 1, 1)
async def handle_share_group_heartbeat(
    ctx: RequestContext, request: ShareGroupHeartbeatRequest
) -> ShareGroupHeartbeatResponse:
    if not ctx.authorize(AclOperation.READ, AclResourceType.GROUP, request.group_id):
        return _refusal(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    subscribed = set(request.subscribed_topic_names or ())
    if subscribed and len(ctx.authorized_names(AclOperation.DESCRIBE, AclResourceType.TOPIC, subscribed)) < len(
            subscribed):
        return _refusal(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    coordinator = ctx.broker.group_coordinator()
    await coordinator.prepare_to_store()
    protocol = coordinator.share
    if protocol.persister is None:
        protocol.persister = getattr(ctx.broker, "share_persister", None)
    from trafka.broker.groups.share import ShareHeartbeatRequest  # loaded with the coordinator

    result = protocol.heartbeat(
        ShareHeartbeatRequest(
            group_id=request.group_id,
            member_id=request.member_id,
            member_epoch=request.member_epoch,
            rack_id=request.rack_id,
            subscribed_topic_names=request.subscribed_topic_names,
            client_id=ctx.header.client_id or "",
            client_host=_host(ctx.peer),
        )
    )
    if result.error is ErrorCode.NONE:
        written = await coordinator.await_written(request.group_id)
        if written is not ErrorCode.NONE:
            return _refusal(ErrorCode.COORDINATOR_NOT_AVAILABLE if written is ErrorCode.REQUEST_TIMED_OUT else written)
    assignment = None
    if result.assignment is not None:
        assignment = Assignment(
            topic_partitions=[
                TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
                for topic_id, partitions in sorted(result.assignment.items(), key=lambda item: str(item[0]))
            ]
        )
    return ShareGroupHeartbeatResponse(
        error_code=result.error,
        error_message=result.error_message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=assignment,
    )
