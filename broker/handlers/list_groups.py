"""ListGroups (key 16), versions 0-5.

Every group this broker coordinates (those of the ``__consumer_offsets`` partitions it leads), with its
protocol type; v4 adds the state of each group and a
filter by state (case-insensitive, e.g. ``Stable``, ``Empty``), v5 the group type (``classic`` or
``consumer``) and a filter by type. A consumer group with members that use the classic protocol (after
an online upgrade) is of type ``consumer``, protocol type ``consumer``, as in Kafka.
While some partition loads, the groups of the others come with COORDINATOR_LOAD_IN_PROGRESS, as in
Kafka; COORDINATOR_NOT_AVAILABLE (and no groups) while the broker stops.
With an authorizer, a principal without DESCRIBE on the cluster is shown only the groups it may DESCRIBE.
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.messages import ListGroupsRequest, ListGroupsResponse
from trafka.wire.protocol import ApiKey

Listed = ListGroupsResponse.ListedGroup


@handles(ApiKey.LIST_GROUPS, 0, 5)
async def handle_list_groups(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    coordinator = ctx.broker.group_coordinator()
    states = request.states_filter if ctx.api_version >= 4 else []
    types = request.types_filter if ctx.api_version >= 5 else []
    error, listed = coordinator.list_groups(states, types)
    if not ctx.authorize_cluster(AclOperation.DESCRIBE, log_if_denied=False):
        listed = [group for group in listed if ctx.authorize(
            AclOperation.DESCRIBE, AclResourceType.GROUP, group.group_id, log_if_denied=False)]
    return ListGroupsResponse(
        error_code=error,
        groups=[
            Listed(
                group_id=group.group_id,
                protocol_type=group.protocol_type,
                group_state=group.state,
                group_type=str(group.type),
            )
            for group in listed
        ],
    )
