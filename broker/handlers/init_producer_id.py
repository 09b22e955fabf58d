"""InitProducerId (key 22), versions 0-5.

Idempotent producers (no transactional id) get a fresh producer id with epoch 0 on every call, as
Kafka does; ids are allocated in blocks (broker.producer_ids) so that they are never reused, across\nrestarts and across the brokers of a cluster.
Transactional ids are answered once the transaction coordinator serves them; until then they get
COORDINATOR_NOT_AVAILABLE, which no client reaches, since FindCoordinator does not name one.
"""
from __future__ import annotations

from broker.handlers.registry import RequestContext, handles
from wire.errors import ErrorCode
from wire.messages import InitProducerIdRequest, InitProducerIdResponse
from wire.protocol import ApiKey


@handles(ApiKey.INIT_PRODUCER_ID, 0, 5)
async def handle_init_producer_id(ctx: RequestContext, request: InitProducerIdRequest) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        return InitProducerIdResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, producer_id=-1, producer_epoch=-1)
    producer_id = await ctx.broker.producer_ids.next_producer_id()
    return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0)
