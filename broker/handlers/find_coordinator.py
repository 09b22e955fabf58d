"""FindCoordinator (key 10), versions 0-6.

Which broker coordinates a group (key type 0) or a transactional id (key type 1). A group's
coordinator is the leader of its partition of ``__consumer_offsets`` (as in Kafka): its node id and
advertised host and port, from the live brokers. The first lookup creates ``__consumer_offsets``
(Kafka creates it on first use too); COORDINATOR_NOT_AVAILABLE while the partition has no live leader
or the topic cannot be created yet (fewer live brokers than offsets.topic.replication.factor, say:
logged once). On a single node the answer is always this broker, and the topic exists by the time it
is sent. Versions 0-3 look up one key; from v4 a request carries a batch of keys of one type and each
gets its own result. A transactional id's coordinator is, in the same way, the leader of its partition
of ``__transaction_state`` (created by the first lookup, as in Kafka; an empty id is INVALID_REQUEST).
A share partition's key (type 2, from v6: "group:topic_id:partition", Kafka's form) is coordinated by the leader
of its partition of ``__share_group_state`` (created by the first lookup); a key not of that form, or a version
before 6, is INVALID_REQUEST. With an authorizer it needs CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED).
With an authorizer, a group's key needs DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) and a transactional
id's DESCRIBE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), before anything is created.
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import FindCoordinatorRequest, FindCoordinatorResponse
from trafka.wire.protocol import ApiKey

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
SHARE_KEY_TYPE = 2
#: The first version that finds share coordinators.
SHARE_SINCE_VERSION = 6
#: A share key lookup without CLUSTER_ACTION: Kafka refuses the whole request, each key with the error's message.
REFUSED_SHARE_KEYS = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
INVALID_REQUEST_MESSAGE = ("This most likely occurs because of a request being malformed by the client library or "
                           "the message was sent to an incompatible broker. See the broker logs for more details.")

NO_NODE = (-1, "", -1)


@handles(ApiKey.FIND_COORDINATOR, 0, 6)
async def handle_find_coordinator(ctx: RequestContext, request: FindCoordinatorRequest) -> FindCoordinatorResponse:
    if ctx.api_version < 4:
        error, message, (node_id, host, port) = await _coordinator(ctx, request.key_type, request.key)
        return FindCoordinatorResponse(
            error_code=error, error_message=message, node_id=node_id, host=host, port=port
        )
    coordinators = []
    for key in request.coordinator_keys:
        error, message, (node_id, host, port) = await _coordinator(ctx, request.key_type, key)
        coordinators.append(  # Kafka gives no message per key (the empty string), but for a refused request
            FindCoordinatorResponse.Coordinator(key=key, node_id=node_id, host=host, port=port, error_code=error,
                                                error_message=message if error == REFUSED_SHARE_KEYS else "")
        )
    return FindCoordinatorResponse(coordinators=coordinators)


async def _coordinator(
    ctx: RequestContext, key_type: int, key: str
) -> tuple[ErrorCode, str | None, tuple[int, str, int]]:
    broker = ctx.broker
    if key_type == GROUP_KEY_TYPE and not ctx.authorize(AclOperation.DESCRIBE, AclResourceType.GROUP, key):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.", NO_NODE
    if key_type == TRANSACTION_KEY_TYPE and not ctx.authorize(
            AclOperation.DESCRIBE, AclResourceType.TRANSACTIONAL_ID, key):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "Transactional Id authorization failed.", NO_NODE
    if key_type == GROUP_KEY_TYPE:
        coordinator = broker.group_coordinator()
        try:
            await coordinator.ensure_offsets_topic()  # a failure is logged there, once
        except KafkaError as exc:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, exc.message or None, NO_NODE
        leader = coordinator.coordinator_id(key)
    elif key_type == TRANSACTION_KEY_TYPE:
        if not key:
            return ErrorCode.INVALID_REQUEST, "A transactional id must not be empty.", NO_NODE
        coordinator = broker.transaction_coordinator()
        try:
            await coordinator.ensure_topic()  # a failure is logged there, once
        except KafkaError as exc:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, exc.message or None, NO_NODE
        leader = coordinator.coordinator_id(key)
    elif key_type == SHARE_KEY_TYPE:
        if ctx.api_version < SHARE_SINCE_VERSION:
            return ErrorCode.INVALID_REQUEST, INVALID_REQUEST_MESSAGE, NO_NODE
        if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.", NO_NODE
        from trafka.broker.share.state import parse_share_coordinator_key

        normalized = parse_share_coordinator_key(key)
        if normalized is None:
            return ErrorCode.INVALID_REQUEST, "", NO_NODE
        coordinator = broker.share_coordinator()
        try:
            await coordinator.ensure_topic()  # a failure is logged there, once
        except KafkaError as exc:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, exc.message or None, NO_NODE
        leader = coordinator.coordinator_id(normalized)
    else:
        return ErrorCode.INVALID_REQUEST, f"Unsupported coordinator key type {key_type}.", NO_NODE
    live = broker.topics.live_brokers(ctx.listener)
    if leader is None or leader not in live:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", NO_NODE
    host, port, _rack = live[leader]
    return ErrorCode.NONE, None, (leader, host, port)

