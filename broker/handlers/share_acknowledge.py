"""ShareAcknowledge (key 79), versions 1-2 (KIP-932).

A share consumer's acknowledgements without a fetch: per partition, batches of offsets with one acknowledge type
for all or one per offset (GAP, ACCEPT, RELEASE, REJECT; RENEW from v2 when ``is_renew_ack``), applied all or
nothing per partition and answered once persisted (broker.share.manager).

The request continues the member's share session: its epoch must be the session's (INVALID_SHARE_SESSION_EPOCH;
SHARE_SESSION_NOT_FOUND without a session); epoch 0 cannot open one (INVALID_SHARE_SESSION_EPOCH); -1 closes the
session after the acknowledgements, releasing what the member still holds. v2 answers with the acquisition lock
timeout.

Errors: top-level INVALID_REQUEST for a null group id or an empty member id, GROUP_AUTHORIZATION_FAILED without
READ on the group; per partition UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION (also for a share partition this
broker has not loaded: not fetched from since it leads the partition), TOPIC_AUTHORIZATION_FAILED,
NOT_LEADER_OR_FOLLOWER, INVALID_RECORD_STATE for records the member does not hold, INVALID_REQUEST for malformed
batches and offsets past the last one in flight (offsets below the share-partition start offset are skipped).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.handlers.share_fetch import _resolve, acknowledgement_batches, node_endpoints
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.broker.share.sessions import FINAL_EPOCH, INITIAL_EPOCH
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import ShareAcknowledgeRequest, ShareAcknowledgeResponse
from trafka.wire.protocol import ApiKey

TopicResponse = ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse
PartitionData = ShareAcknowledgeResponse.PartitionData
LeaderIdAndEpoch = ShareAcknowledgeResponse.LeaderIdAndEpoch


@handles(ApiKey.SHARE_ACKNOWLEDGE, 1, 2)
async def handle_share_acknowledge(ctx: RequestContext, request: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
    manager = ctx.broker.share_manager()
    group_id, member_id, epoch = request.group_id, request.member_id, request.share_session_epoch
    lock_ms = manager.group_settings(group_id or "").record_lock_duration_ms

    def refuse(code: ErrorCode, message: str | None = None) -> ShareAcknowledgeResponse:
        return ShareAcknowledgeResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                        acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[])

    if group_id is None:
        return refuse(ErrorCode.INVALID_REQUEST, "The group id is missing.")
    if not member_id:
        return refuse(ErrorCode.INVALID_REQUEST, "The member id is missing.")
    if not ctx.authorize(AclOperation.READ, AclResourceType.GROUP, group_id):
        return refuse(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    try:
        if epoch == INITIAL_EPOCH:
            raise KafkaError(ErrorCode.INVALID_SHARE_SESSION_EPOCH, "ShareAcknowledge cannot open a share session")
        if epoch == FINAL_EPOCH:
            session = manager.sessions.close(group_id, member_id)
        else:
            session = manager.sessions.use(group_id, member_id, epoch)
    except KafkaError as exc:
        return refuse(exc.code, exc.message or None)
    session.connection_id = ctx.connection_id
    renewing = ctx.api_version >= 2 and request.is_renew_ack
    responses = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            index = wanted.partition_index
            partition, error = _resolve(ctx, topic.topic_id, index)
            message = None
            leader = LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
            if error is None:
                batches, error = acknowledgement_batches(wanted.acknowledgement_batches, renewing)
                if error == ErrorCode.NONE:
                    error, message, _ = await manager.acknowledge(group_id, member_id, partition, batches)
                if error == ErrorCode.NOT_LEADER_OR_FOLLOWER:
                    leader = LeaderIdAndEpoch(leader_id=partition.leader_id, leader_epoch=partition.leader_epoch)
            partitions.append(PartitionData(partition_index=index, error_code=error, error_message=message,
                                            current_leader=leader))
        responses.append(TopicResponse(topic_id=topic.topic_id, partitions=partitions))
    if epoch == FINAL_EPOCH:
        await manager.release_member(group_id, member_id, set(session.partitions))
    leaders = (p.current_leader.leader_id for t in responses for p in t.partitions
               if p.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER)
    return ShareAcknowledgeResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                                    acquisition_lock_timeout_ms=lock_ms, responses=responses,
                                    node_endpoints=node_endpoints(ctx, leaders, ShareAcknowledgeResponse.NodeEndpoint))
