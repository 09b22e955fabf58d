"""InitProducerId (key 22), versions 0-5.

Idempotent producers (no transactional id) get a fresh producer id with epoch 0 on every call, as
Kafka does; ids are allocated in blocks (broker.producer_ids) so that they are never reused, across
restarts and across the brokers of a cluster.

Transactional producers are answered by the transaction coordinator of their id (broker.txn): the
id's producer id with its epoch bumped, which fences an older producer with the same id and aborts
its open transaction (the new one gets CONCURRENT_TRANSACTIONS until the abort is complete). From v3
a producer may name the producer id and epoch it has (KIP-360): the same ones again after a lost
answer, a fenced epoch is PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4), an id that is not the
transactional id's INVALID_PRODUCER_ID_MAPPING. A timeout above transaction.max.timeout.ms is
INVALID_TRANSACTION_TIMEOUT; a broker that does not coordinate the id answers NOT_COORDINATOR.
With an authorizer, a transactional id needs WRITE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent
producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic (CLUSTER_AUTHORIZATION_FAILED), as
Kafka allows it since KIP-679.
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.authorizer import AclOperation, AclResourceType
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import InitProducerIdRequest, InitProducerIdResponse
from trafka.wire.protocol import ApiKey


@handles(ApiKey.INIT_PRODUCER_ID, 0, 5)
async def handle_init_producer_id(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        if not ctx.authorize(AclOperation.WRITE, AclResourceType.TRANSACTIONAL_ID, request.transactional_id):
            return InitProducerIdResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, producer_id=-1,
                                          producer_epoch=-1)
    elif not (ctx.authorize_cluster(AclOperation.IDEMPOTENT_WRITE, log_if_denied=False)
              or ctx.authorize_by_resource_type(AclOperation.WRITE, AclResourceType.TOPIC)):
        return InitProducerIdResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, producer_id=-1,
                                      producer_epoch=-1)
    if request.transactional_id is None:
        producer_id = await ctx.broker.producer_ids.next_producer_id()
        return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0)
    if request.transactional_id == "":
        return InitProducerIdResponse(error_code=ErrorCode.INVALID_REQUEST, producer_id=-1, producer_epoch=-1)
    expected = (request.producer_id, request.producer_epoch) if ctx.api_version >= 3 else (-1, -1)
    error, producer_id, epoch = await ctx.broker.transaction_coordinator().init_producer_id(
        request.transactional_id, request.transaction_timeout_ms, *expected)
    if error == ErrorCode.PRODUCER_FENCED and ctx.api_version < 4:
        error = ErrorCode.INVALID_PRODUCER_EPOCH
    return InitProducerIdResponse(error_code=error, producer_id=producer_id, producer_epoch=epoch)
