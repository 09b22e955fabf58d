"""AddPartitionsToTxn (key 24), versions 0-5.

A transactional producer adds the partitions it is about to write to its transaction (broker.txn),
which becomes Ongoing. Each partition gets its own code, as the coordinator gives them:
INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2), CONCURRENT_TRANSACTIONS
while the previous transaction completes, NOT_COORDINATOR; a partition that does not exist is
UNKNOWN_TOPIC_OR_PARTITION and the others of the request OPERATION_NOT_ATTEMPTED. Versions 0-3 carry
one transaction (a producer's request); from v4 a request carries several (brokers' requests), each
answered in its own result, and ``verify_only`` asks whether the partitions are already in the
transaction without adding them (INVALID_TXN_STATE for those that are not).
With an authorizer, v4+ (from other brokers) needs CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED);
v0-3 (from producers) need WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every
partition) and on each topic but the internal ones (TOPIC_AUTHORIZATION_FAILED, the other partitions then
OPERATION_NOT_ATTEMPTED).
"""
from __future__ import annotations

from collections.abc import Iterable

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.broker.topics import INTERNAL_TOPICS
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from trafka.wire.protocol import ApiKey

TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult


@handles(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 5)
async def handle_add_partitions_to_txn(ctx: RequestContext,
                                       request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    coordinator = ctx.broker.transaction_coordinator()
    if ctx.api_version >= 4 and not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return AddPartitionsToTxnResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results_by_transaction=[])
    if ctx.api_version < 4:
        refused = _refused(ctx, request)
        if refused is not None:
            return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_by_topic(refused))
        errors = await coordinator.add_partitions(
            request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch, _keys(request.v3_and_below_topics))
        if ctx.api_version < 2:
            errors = {key: ErrorCode.INVALID_PRODUCER_EPOCH if code == ErrorCode.PRODUCER_FENCED else code
                      for key, code in errors.items()}
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_by_topic(errors))
    results = []
    for transaction in request.transactions:
        keys = _keys(transaction.topics)
        if transaction.verify_only:
            errors = coordinator.verify_partitions(transaction.transactional_id, transaction.producer_id,
                                                   transaction.producer_epoch, keys)
        else:
            errors = await coordinator.add_partitions(transaction.transactional_id, transaction.producer_id,
                                                      transaction.producer_epoch, keys)
        results.append(AddPartitionsToTxnResponse.AddPartitionsToTxnResult(
            transactional_id=transaction.transactional_id, topic_results=_by_topic(errors)))
    return AddPartitionsToTxnResponse(error_code=ErrorCode.NONE, results_by_transaction=results)


def _refused(ctx: RequestContext, request: AddPartitionsToTxnRequest) -> dict[tuple[str, int], ErrorCode] | None:
    """A client's request (v0-3) the principal may not make: every partition refused when the transactional id
    may not be written; otherwise, when some topic may not be written, those partitions refused, unknown ones
    said so and the others not attempted. None when it may go on."""
    if ctx.broker.authorizer is None:
        return None
    keys = _keys(request.v3_and_below_topics)
    if not ctx.authorize(AclOperation.WRITE, AclResourceType.TRANSACTIONAL_ID, request.v3_and_below_transactional_id):
        return {key: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for key in keys}
    allowed = ctx.authorized_names(AclOperation.WRITE, AclResourceType.TOPIC,
                                   (topic for topic, _ in keys if topic not in INTERNAL_TOPICS))
    if all(topic in allowed or topic in INTERNAL_TOPICS for topic, _ in keys):
        return None
    topics = ctx.broker.topics
    refused = {topic for topic, _ in keys if topic not in allowed and topic not in INTERNAL_TOPICS}
    return {(topic, index): ErrorCode.TOPIC_AUTHORIZATION_FAILED if topic in refused
            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if topics.partition(topic, index) is None
            else ErrorCode.OPERATION_NOT_ATTEMPTED for topic, index in keys}


def _keys(topics: Iterable[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic]) -> list[tuple[str, int]]:
    return [(topic.name, partition) for topic in topics for partition in topic.partitions]


def _by_topic(errors: dict[tuple[str, int], ErrorCode]) -> list[TopicResult]:
    by_topic: dict[str, list[PartitionResult]] = {}
    for (topic, partition), code in errors.items():
        by_topic.setdefault(topic, []).append(PartitionResult(partition_index=partition, partition_error_code=code))
    return [TopicResult(name=name, results_by_partition=results) for name, results in by_topic.items()]
