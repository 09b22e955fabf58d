"""DeleteShareGroupState (key 86), version 0.

Sent by a group coordinator to the share coordinator of each share partition (group, topic id, partition) of a
share group being deleted, or whose offsets for a topic are deleted: the state is forgotten (a tombstone of its
snapshot key). Deleting a state that does not exist succeeds. A negative partition is INVALID_REQUEST; a topic or
partition that does not exist UNKNOWN_TOPIC_OR_PARTITION; a key whose ``__share_group_state`` partition this broker
does not lead NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while it loads). See broker.share.coordinator.

An empty group id, no topics, or a topic without partitions is answered with no results, as Kafka does. With an
authorizer, the sender (another broker) needs CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED for every
partition).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.handlers.share_state import answer_each_partition
from trafka.wire.messages import DeleteShareGroupStateRequest, DeleteShareGroupStateResponse
from trafka.wire.protocol import ApiKey

Result = DeleteShareGroupStateResponse.DeleteStateResult
PartitionResult = DeleteShareGroupStateResponse.PartitionResult


@handles(ApiKey.DELETE_SHARE_GROUP_STATE, 0, 0)
async def handle_delete_share_group_state(ctx: RequestContext,
                                          request: DeleteShareGroupStateRequest) -> DeleteShareGroupStateResponse:
    async def delete(coordinator, topic_id, wanted) -> dict:
        await coordinator.delete(request.group_id, topic_id, wanted.partition)
        return {}

    return await answer_each_partition(ctx, request, DeleteShareGroupStateResponse, Result, PartitionResult, delete)
