"""DeleteGroups (key 42), versions 0-2.

Deletes empty groups together with their committed offsets (tombstones in ``__consumer_offsets``).
Each group gets its own result: NONE, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP (it still has members),
INVALID_GROUP_ID (a null group id), NOT_COORDINATOR (its ``__consumer_offsets`` partition is not led
here), COORDINATOR_LOAD_IN_PROGRESS while that partition loads, or COORDINATOR_NOT_AVAILABLE (the broker
stops, or the tombstones are not replicated within offsets.commit.timeout.ms). An empty share group's
share state is deleted first, from the share coordinators of its partitions.
With an authorizer, a group needs DELETE (GROUP_AUTHORIZATION_FAILED, listed after the others, as Kafka does).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import DeleteGroupsRequest, DeleteGroupsResponse
from trafka.wire.protocol import ApiKey

Result = DeleteGroupsResponse.DeletableGroupResult


@handles(ApiKey.DELETE_GROUPS, 0, 2)
async def handle_delete_groups(ctx: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
    coordinator = ctx.broker.group_coordinator()
    results, refused = [], []
    for group_id in dict.fromkeys(request.groups_names):
        if group_id is None:
            results.append(Result(group_id=group_id, error_code=ErrorCode.INVALID_GROUP_ID))
            continue
        if not ctx.authorize(AclOperation.DELETE, AclResourceType.GROUP, group_id):
            refused.append(Result(group_id=group_id, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED))
            continue
        try:
            share_group = coordinator.share_group(group_id)
            if share_group is not None and share_group.is_empty and coordinator.is_serving(group_id):
                # A share group's share state goes first, as Kafka deletes it (DeleteShareGroupState).
                if coordinator.share.persister is None:
                    coordinator.share.persister = getattr(ctx.broker, "share_persister", None)
                await coordinator.share.delete_state(share_group)
            coordinator.delete_group(group_id)
            code = await coordinator.await_written(group_id)
            if code is ErrorCode.REQUEST_TIMED_OUT:  # Kafka's mapping of a write not replicated in time
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        except KafkaError as exc:
            code = exc.code
        results.append(Result(group_id=group_id, error_code=code))
    return DeleteGroupsResponse(results=results + refused)
