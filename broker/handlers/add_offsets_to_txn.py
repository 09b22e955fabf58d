"""AddOffsetsToTxn (key 25), versions 0-4.

Before a transactional producer commits a group's offsets with TxnOffsetCommit, it adds the group's
partition of ``__consumer_offsets`` to its transaction (broker.txn): the marker that ends the
transaction then also commits (or drops) those offsets. Errors as AddPartitionsToTxn gives them
(PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2).
With an authorizer, the transactional id needs WRITE (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and the group
READ (GROUP_AUTHORIZATION_FAILED).
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from trafka.wire.protocol import ApiKey


@handles(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4)
async def handle_add_offsets_to_txn(ctx: RequestContext, request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    if not ctx.authorize(AclOperation.WRITE, AclResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    if not ctx.authorize(AclOperation.READ, AclResourceType.GROUP, request.group_id):
        return AddOffsetsToTxnResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    error = await ctx.broker.transaction_coordinator().add_offsets(request.transactional_id, request.producer_id,
                                                      request.producer_epoch, request.group_id)
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 2:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return AddOffsetsToTxnResponse(error_code=error)
