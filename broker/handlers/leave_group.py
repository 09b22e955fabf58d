"""LeaveGroup (key 13), versions 0-5.

Members leave a classic group, which rebalances without waiting for their sessions to expire.
Versions 0-2 name one member; from v3 a batch of members, each by member id and/or group.instance.id
(an admin client removes static members by instance id alone), each with its own result; v5 adds a
reason per member. Errors: UNKNOWN_MEMBER_ID (unknown group or member), FENCED_INSTANCE_ID,
INVALID_GROUP_ID, COORDINATOR_NOT_AVAILABLE. Classic members of a consumer group (KIP-848) leave it
the same way and the group epoch moves; a member that uses the consumer protocol cannot be removed
with LeaveGroup (UNKNOWN_MEMBER_ID).
"""
from __future__ import annotations

from broker.handlers.registry import RequestContext, handles
from wire.errors import ErrorCode
from wire.messages import LeaveGroupRequest, LeaveGroupResponse
from wire.protocol import ApiKey


@handles(ApiKey.LEAVE_GROUP, 0, 5)
async def handle_leave_group(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    if ctx.api_version < 3:
        members = [(request.member_id, None, None)]
    else:
        members = [(m.member_id, m.group_instance_id, m.reason) for m in request.members]
    error, outcomes = ctx.broker.groups.classic.leave(group_id=request.group_id, members=members)
    if ctx.api_version < 3:
        if error is ErrorCode.NONE and outcomes:
            error = outcomes[0][2]
        return LeaveGroupResponse(error_code=error)
    return LeaveGroupResponse(
        error_code=error,
        members=[
            LeaveGroupResponse.MemberResponse(member_id=member_id, group_instance_id=instance_id, error_code=code)
            for member_id, instance_id, code in outcomes
        ],
    )
