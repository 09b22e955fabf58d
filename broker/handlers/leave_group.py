"""LeaveGroup (key 13), versions 0-5.

Members leave a classic group, which rebalances without waiting for their sessions to expire.
Versions 0-2 name one member; from v3 a batch of members, each by member id and/or group.instance.id
(an admin client removes static members by instance id alone), each with its own result; v5 adds a
reason per member. Errors: UNKNOWN_MEMBER_ID (unknown group or member), FENCED_INSTANCE_ID,
INVALID_GROUP_ID, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE (also when
what the leave wrote is not replicated within offsets.commit.timeout.ms). Classic members of a consumer
group (KIP-848) leave it the same way and the group epoch moves; a member that uses the consumer protocol cannot be removed
with LeaveGroup (UNKNOWN_MEMBER_ID).
With an authorizer, the group needs READ (GROUP_AUTHORIZATION_FAILED otherwise).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import LeaveGroupRequest, LeaveGroupResponse
from trafka.wire.protocol import ApiKey


_WRITE_ERRORS = {ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE}


@handles(ApiKey.LEAVE_GROUP, 0, 5)
async def handle_leave_group(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    if not ctx.authorize(AclOperation.READ, AclResourceType.GROUP, request.group_id):
        return LeaveGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if ctx.api_version < 3:
        members = [(request.member_id, None, None)]
    else:
        members = [(m.member_id, m.group_instance_id, m.reason) for m in request.members]
    coordinator = ctx.broker.group_coordinator()
    error, outcomes = coordinator.classic.leave(group_id=request.group_id, members=members)
    if error is ErrorCode.NONE:
        written = await coordinator.await_written(request.group_id)
        if written is not ErrorCode.NONE:  # Kafka: a write not replicated in time -> COORDINATOR_NOT_AVAILABLE
            error, outcomes = _WRITE_ERRORS.get(written, written), []
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
