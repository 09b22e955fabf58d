"""DescribeTransactions (key 65), version 0.

What ``kafka-transactions.sh describe`` shows of each transactional id coordinated here: its state,
timeout, start time, producer id and epoch, and the partitions of its transaction. An id this broker
does not coordinate is NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while its partition loads), an
unknown one TRANSACTIONAL_ID_NOT_FOUND.
With an authorizer, a transactional id needs DESCRIBE (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and only the
partitions of topics the principal may DESCRIBE are shown.
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode, KafkaError
from trafka.wire.messages import DescribeTransactionsRequest, DescribeTransactionsResponse
from trafka.wire.protocol import ApiKey

State = DescribeTransactionsResponse.TransactionState


@handles(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0)
async def handle_describe_transactions(ctx: RequestContext,
                                       request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    coordinator = ctx.broker.transaction_coordinator()
    states = []
    for transactional_id in request.transactional_ids:
        if not ctx.authorize(AclOperation.DESCRIBE, AclResourceType.TRANSACTIONAL_ID, transactional_id):
            states.append(State(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                transactional_id=transactional_id, transaction_state="", transaction_timeout_ms=0,
                                transaction_start_time_ms=0, producer_id=0, producer_epoch=0, topics=[]))
            continue
        try:
            metadata = coordinator.describe(transactional_id)
        except KafkaError as exc:
            states.append(State(error_code=exc.code, transactional_id=transactional_id, transaction_state="",
                                transaction_timeout_ms=0, transaction_start_time_ms=0, producer_id=0,
                                producer_epoch=0, topics=[]))
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(metadata.partitions):
            if not ctx.authorize(AclOperation.DESCRIBE, AclResourceType.TOPIC, topic):
                continue
            by_topic.setdefault(topic, []).append(partition)
        states.append(State(
            error_code=ErrorCode.NONE, transactional_id=transactional_id,
            transaction_state=metadata.state.display_name, transaction_timeout_ms=metadata.timeout_ms,
            transaction_start_time_ms=metadata.start_ms, producer_id=metadata.producer_id,
            producer_epoch=metadata.producer_epoch,
            topics=[DescribeTransactionsResponse.TopicData(topic=topic, partitions=partitions)
                    for topic, partitions in by_topic.items()]))
    return DescribeTransactionsResponse(transaction_states=states)
