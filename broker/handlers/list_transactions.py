"""ListTransactions (key 66), versions 0-2.

The transactional ids coordinated here, as ``kafka-transactions.sh list`` shows them, filtered by
state names (those not known come back in ``unknown_state_filters``), producer ids, from v1 by how
long the transaction has been running (``duration_filter`` ms; -1: any) and from v2 by a regular
expression over the id (RE2 syntax, matched in full as Kafka does). COORDINATOR_LOAD_IN_PROGRESS while a
partition of ``__transaction_state`` is loading; an invalid pattern is INVALID_REGULAR_EXPRESSION.
With an authorizer, only the transactional ids the principal may DESCRIBE are listed.
"""
from __future__ import annotations


from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.broker.txn.state import TransactionState
from trafka.storage import clock
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import ListTransactionsRequest, ListTransactionsResponse
from trafka.wire.protocol import ApiKey


@handles(ApiKey.LIST_TRANSACTIONS, 0, 2)
async def handle_list_transactions(ctx: RequestContext, request: ListTransactionsRequest) -> ListTransactionsResponse:
    states = {name: TransactionState.from_name(name) for name in request.state_filters}
    unknown = [name for name, state in states.items() if state is None]
    wanted_states = {state for state in states.values() if state is not None}
    pattern = None
    if ctx.api_version >= 2 and request.transactional_id_pattern:
        import re2

        try:
            pattern = re2.compile(request.transactional_id_pattern)
        except re2.error:
            return ListTransactionsResponse(error_code=ErrorCode.INVALID_REGULAR_EXPRESSION,
                                            unknown_state_filters=unknown, transaction_states=[])
    loading, transactions = ctx.broker.transaction_coordinator().listing()
    if loading:
        return ListTransactionsResponse(error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, unknown_state_filters=unknown,
                                        transaction_states=[])
    now = clock.now_ms()
    duration = request.duration_filter if ctx.api_version >= 1 else -1
    listed = []
    for metadata in sorted(transactions, key=lambda m: m.transactional_id):
        if request.state_filters and metadata.state not in wanted_states:
            continue
        if request.producer_id_filters and metadata.producer_id not in request.producer_id_filters:
            continue
        if duration >= 0 and now - metadata.start_ms < duration:
            continue
        if pattern is not None and not pattern.fullmatch(metadata.transactional_id):
            continue
        if not ctx.authorize(AclOperation.DESCRIBE, AclResourceType.TRANSACTIONAL_ID, metadata.transactional_id):
            continue
        listed.append(ListTransactionsResponse.TransactionState(
            transactional_id=metadata.transactional_id, producer_id=metadata.producer_id,
            transaction_state=metadata.state.display_name))
    return ListTransactionsResponse(error_code=ErrorCode.NONE, unknown_state_filters=unknown,
                                    transaction_states=listed)
