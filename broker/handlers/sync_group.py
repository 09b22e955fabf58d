"""SyncGroup (key 14), versions 0-5.

After JoinGroup, every member sends SyncGroup; the leader's carries the assignment for all members.
Followers park until the leader's arrives; then each gets its own assignment (bytes the coordinator
never reads) and the group is Stable. In a Stable group SyncGroup returns the member's current
assignment at once.

Version notes: v3 adds group.instance.id; v5 sends the protocol type and name, which must match the
group's (INCONSISTENT_GROUP_PROTOCOL otherwise). Errors: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
FENCED_INSTANCE_ID, REBALANCE_IN_PROGRESS (a new rebalance started, or the assignment was not replicated
within offsets.commit.timeout.ms: rejoin), INVALID_GROUP_ID, NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE (while the broker stops).

A classic member of a consumer group (KIP-848) gets the assignment the coordinator computed for it,
encoded as a ConsumerProtocol assignment of its subscription's version; REBALANCE_IN_PROGRESS when the
group moved on since its JoinGroup, ILLEGAL_GENERATION when its generation is not its member epoch.
With an authorizer, the group needs READ (GROUP_AUTHORIZATION_FAILED otherwise).
"""
from __future__ import annotations

from trafka.broker.handlers.join_group import _GROUP_WRITE_ERRORS
from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import SyncGroupRequest, SyncGroupResponse
from trafka.wire.protocol import ApiKey


@handles(ApiKey.SYNC_GROUP, 0, 5)
async def handle_sync_group(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    if not ctx.authorize(AclOperation.READ, AclResourceType.GROUP, request.group_id):
        return SyncGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, assignment=b"")
    coordinator = ctx.broker.group_coordinator()
    reply = coordinator.classic.sync(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
        generation_id=request.generation_id,
        protocol_type=request.protocol_type,
        protocol_name=request.protocol_name,
        assignments={a.member_id: bytes(a.assignment) for a in request.assignments},
    )
    result = await reply.wait()
    if result.error is ErrorCode.NONE:
        # The assignment is given once the group's metadata carrying it is replicated.
        written = await coordinator.await_written(request.group_id)
        if written is not ErrorCode.NONE:
            return SyncGroupResponse(error_code=_GROUP_WRITE_ERRORS.get(written, written), assignment=b"")
    return SyncGroupResponse(
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
