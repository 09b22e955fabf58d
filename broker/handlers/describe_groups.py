"""DescribeGroups (key 15), versions 0-6.

State, protocol type and members of classic groups. A Stable group also reports its protocol and each
member's metadata and assignment; other states list members without them. An unknown group is
reported in state Dead, and from v6 with GROUP_ID_NOT_FOUND. Each group not coordinated here gets
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS while its partition loads, COORDINATOR_NOT_AVAILABLE while
the broker stops. v4 adds each member's group.instance.id;
authorized operations (v3+), when asked for, are every operation a group supports: there is no authorizer. A consumer group of the KIP-848 protocol — also one
whose members use the classic protocol, after an online upgrade — is reported like an unknown group, as
Kafka does ("not a classic group"): ConsumerGroupDescribe describes it.
With an authorizer, a group the principal may not DESCRIBE is GROUP_AUTHORIZATION_FAILED (such groups come
first in the answer, as Kafka orders it); the authorized operations asked for (v3+) come from the ACLs.
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import DescribeGroupsRequest, DescribeGroupsResponse
from trafka.wire.protocol import ApiKey

Described = DescribeGroupsResponse.DescribedGroup
DescribedMember = DescribeGroupsResponse.DescribedGroupMember

GROUP_ID_NOT_FOUND_MIN_VERSION = 6
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


@handles(ApiKey.DESCRIBE_GROUPS, 0, 6)
async def handle_describe_groups(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    coordinator = ctx.broker.group_coordinator()
    from trafka.broker.groups.classic import ClassicGroup  # loaded with the coordinator (Broker.group_coordinator)
    from trafka.broker.groups.state import ClassicGroupState

    operations = request.include_authorized_operations and ctx.api_version >= 3
    described = [_error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED) for group_id in request.groups
                 if not ctx.authorize(AclOperation.DESCRIBE, AclResourceType.GROUP, group_id)]
    refused = {result.group_id for result in described}
    for group_id in request.groups:
        if group_id in refused:
            continue
        error = coordinator.group_error(group_id)
        if error is not ErrorCode.NONE:  # NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...NOT_AVAILABLE
            described.append(_error(group_id, error))
            continue
        group = coordinator.groups.get(group_id)
        if not isinstance(group, ClassicGroup):
            result = _error(group_id, ErrorCode.NONE, state=str(ClassicGroupState.DEAD))
            if ctx.api_version >= GROUP_ID_NOT_FOUND_MIN_VERSION:
                result.error_code = ErrorCode.GROUP_ID_NOT_FOUND
                result.error_message = (
                    f"Group {group_id} not found." if group is None else f"Group {group_id} is not a classic group."
                )
            described.append(result)
            continue
        stable = group.is_in(ClassicGroupState.STABLE)
        described.append(
            Described(
                error_code=ErrorCode.NONE,
                group_id=group_id,
                group_state=str(group.state),
                protocol_type=group.protocol_type or "",
                protocol_data=(group.protocol_name or "") if stable else "",
                members=[
                    DescribedMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata(group.protocol_name) if stable else b"",
                        member_assignment=m.assignment if stable else b"",
                    )
                    for m in group.members.values()
                ],
                authorized_operations=ctx.authorized_operations(AclResourceType.GROUP, group_id) if operations
                else AUTHORIZED_OPERATIONS_OMITTED,
            )
        )
    return DescribeGroupsResponse(groups=described)


def _error(group_id: str, code: ErrorCode, state: str = "") -> Described:
    return Described(
        error_code=code, group_id=group_id, group_state=state, protocol_type="", protocol_data="", members=[],
        authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )
