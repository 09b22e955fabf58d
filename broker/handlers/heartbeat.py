"""Heartbeat (key 12), versions 0-4.

Keeps a classic group member's session alive. The answer tells the member what to do next: NONE
(carry on), REBALANCE_IN_PROGRESS (rejoin), ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID (its membership is
gone: rejoin from scratch), FENCED_INSTANCE_ID (another process took its group.instance.id, v3+);
NOT_COORDINATOR when the group's ``__consumer_offsets`` partition is not led here,
COORDINATOR_LOAD_IN_PROGRESS while it loads. As in Kafka's classic coordinator a heartbeat writes
nothing and waits for nothing.
A classic member of a consumer group (KIP-848) is told REBALANCE_IN_PROGRESS when the group epoch has
moved past its member epoch, when it must revoke partitions, or when partitions it waits for have been
released; it then rejoins to get its new assignment.
With an authorizer, the group needs READ (GROUP_AUTHORIZATION_FAILED otherwise).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import HeartbeatRequest, HeartbeatResponse
from trafka.wire.protocol import ApiKey


@handles(ApiKey.HEARTBEAT, 0, 4)
async def handle_heartbeat(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    if not ctx.authorize(AclOperation.READ, AclResourceType.GROUP, request.group_id):
        return HeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = ctx.broker.group_coordinator().classic.heartbeat(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
        generation_id=request.generation_id,
    )
    return HeartbeatResponse(error_code=error)
