"""EndTxn (key 26), versions 0-4.

Commit or abort the producer's transaction (broker.txn): the coordinator writes PrepareCommit or
PrepareAbort to ``__transaction_state`` and answers; the markers and the completion follow. A retry of
an EndTxn already completed is answered NONE; one whose decision is being carried out,
CONCURRENT_TRANSACTIONS; a commit of an aborted (or empty) transaction, or the other way round,
INVALID_TXN_STATE; a fenced producer, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2). Version 5
belongs to transaction version 2 (KIP-890), which this broker does not offer, so clients use v4 at most.
With an authorizer, the transactional id needs WRITE (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import EndTxnRequest, EndTxnResponse
from trafka.wire.protocol import ApiKey


@handles(ApiKey.END_TXN, 0, 4)
async def handle_end_txn(ctx: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
    if not ctx.authorize(AclOperation.WRITE, AclResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return EndTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    error = await ctx.broker.transaction_coordinator().end_transaction(request.transactional_id, request.producer_id,
                                                          request.producer_epoch, request.committed)
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return EndTxnResponse(error_code=error)
