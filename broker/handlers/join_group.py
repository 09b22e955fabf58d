"""JoinGroup (key 11), versions 0-9.

A member joins (or rejoins) a classic group and waits, parked, until the join phase of the rebalance
completes; the response names the generation, the chosen protocol and the leader, and the leader's
response carries every member's protocol metadata for it to compute the assignment.

Version notes: v0 has no rebalance timeout (the session timeout is used); from v4 a member joining
without a member id is first answered MEMBER_ID_REQUIRED with its new id; v5 adds static membership
(group.instance.id); v7 returns the protocol type; v9 lets a static leader that rejoins a stable group
skip the assignment. Errors: INVALID_GROUP_ID (empty group id), INVALID_SESSION_TIMEOUT (outside
group.min/max.session.timeout.ms), INCONSISTENT_GROUP_PROTOCOL, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
GROUP_MAX_SIZE_REACHED, NOT_COORDINATOR (the group's ``__consumer_offsets`` partition is not led here),
COORDINATOR_LOAD_IN_PROGRESS while that partition loads, COORDINATOR_NOT_AVAILABLE while the broker
stops; REBALANCE_IN_PROGRESS when what the join wrote is not replicated within offsets.commit.timeout.ms.
An empty consumer group (KIP-848) of that id becomes a classic group, keeping its offsets. A JoinGroup
to a consumer group with members makes the consumer a member that uses the classic protocol inside it
(see :mod:`trafka.broker.groups.consumer_protocol`): it is answered at once, with the member's epoch as the
generation, no leader (the coordinator assigns) and the member's first protocol; a protocol type other
than ``consumer``, or protocols the group's classic members do not all support, get
INCONSISTENT_GROUP_PROTOCOL; a full group (group.consumer.max.size) GROUP_MAX_SIZE_REACHED.
With an authorizer, the group needs READ (GROUP_AUTHORIZATION_FAILED otherwise).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import JoinGroupRequest, JoinGroupResponse
from trafka.wire.protocol import ApiKey

Member = JoinGroupResponse.JoinGroupResponseMember

#: What a group metadata write that was not replicated in time means to JoinGroup and SyncGroup.
_GROUP_WRITE_ERRORS = {ErrorCode.REQUEST_TIMED_OUT: ErrorCode.REBALANCE_IN_PROGRESS}


@handles(ApiKey.JOIN_GROUP, 0, 9)
async def handle_join_group(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    version = ctx.api_version
    if not ctx.authorize(AclOperation.READ, AclResourceType.GROUP, request.group_id):
        return JoinGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, generation_id=-1,
                                 protocol_name=None if version >= 7 else "", leader="", member_id="", members=[])
    rebalance_timeout_ms = request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms
    coordinator = ctx.broker.group_coordinator()
    await coordinator.prepare_to_store()
    from trafka.broker.groups.classic import JoinRequest, JoinResult  # loaded with the coordinator

    coordinator.consumer.release_empty_group(request.group_id)  # -- KIP-848: an empty consumer group converts --
    reply = coordinator.classic.join(JoinRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=request.group_instance_id,
        protocol_type=request.protocol_type,
        protocols=[(protocol.name, bytes(protocol.metadata)) for protocol in request.protocols],
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=rebalance_timeout_ms,
        client_id=ctx.header.client_id or "",
        client_host=_host(ctx.peer),
        api_version=version,
        reason=request.reason,
    ))
    result = await reply.wait()
    if result.error is ErrorCode.NONE:
        # Answered once what the join wrote (a static member's new id, say) is replicated; Kafka maps a
        # timed-out group metadata write to REBALANCE_IN_PROGRESS.
        written = await coordinator.await_written(request.group_id)
        if written is not ErrorCode.NONE:
            result = JoinResult(_GROUP_WRITE_ERRORS.get(written, written), result.member_id)
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""  # not nullable before v7
    return JoinGroupResponse(
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            Member(member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata)
            for m in result.members
        ],
    )


def _host(peer: str) -> str:
    """The client's address as Kafka reports it (``/host``)."""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host
