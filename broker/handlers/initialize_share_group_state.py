"""InitializeShareGroupState (key 83), version 0.

Sent by a group coordinator to the share coordinator of each share partition (group, topic id, partition) as a
share group starts consuming it, or when its start offset is altered: the state begins again at the start offset
given (-1: not known yet) with the state epoch given, its batches gone; the record written is a snapshot. A state
epoch older than the newest is FENCED_STATE_EPOCH; a negative partition or state epoch INVALID_REQUEST; a topic or
partition that does not exist UNKNOWN_TOPIC_OR_PARTITION; a key whose ``__share_group_state`` partition this broker
does not lead NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while it loads). See broker.share.coordinator.

An empty group id, no topics, or a topic without partitions is answered with no results, as Kafka does. With an
authorizer, the sender (another broker) needs CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED for every
partition).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.handlers.share_state import answer_each_partition
from trafka.wire.messages import InitializeShareGroupStateRequest, InitializeShareGroupStateResponse
from trafka.wire.protocol import ApiKey

Result = InitializeShareGroupStateResponse.InitializeStateResult
PartitionResult = InitializeShareGroupStateResponse.PartitionResult


@handles(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, 0)
async def handle_initialize_share_group_state(
        ctx: RequestContext, request: InitializeShareGroupStateRequest) -> InitializeShareGroupStateResponse:
    async def initialize(coordinator, topic_id, wanted) -> dict:
        await coordinator.initialize(request.group_id, topic_id, wanted.partition, wanted.state_epoch,
                                     wanted.start_offset)
        return {}

    return await answer_each_partition(ctx, request, InitializeShareGroupStateResponse, Result, PartitionResult,
                                       initialize)
