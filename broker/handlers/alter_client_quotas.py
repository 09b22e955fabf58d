"""AlterClientQuotas (key 49), versions 0-1.

Sets and removes quotas of entities (``trafka.broker.security.quotas``), with Kafka's validation and
messages per entity, all INVALID_REQUEST: an empty entity, an unknown entity type, an empty name, ip with
user or client-id, an ip that is neither an address nor a resolvable host, a key the entity cannot set, a
value not above 0, a fraction for a whole-number quota or one too large for its type, and a key or entity
altered twice in one request. ``validate_only`` checks without changing anything. A single node keeps the
quotas in its data directory; a broker of a ZooKeeper cluster keeps them where Kafka does, and every broker
follows them (``trafka.broker.cluster.quotas``). The change applies to clients at once.
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.quotas import Alteration
from trafka.wire.messages import AlterClientQuotasRequest, AlterClientQuotasResponse
from trafka.wire.protocol import ApiKey

Entry = AlterClientQuotasResponse.EntryData
EntityData = AlterClientQuotasResponse.EntityData


@handles(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1)
async def handle_alter_client_quotas(
    ctx: RequestContext, request: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    alterations = [
        Alteration(pairs=tuple((e.entity_type, e.entity_name) for e in entry.entity),
                   ops=tuple((op.key, op.value, op.remove) for op in entry.ops))
        for entry in request.entries
    ]
    results = await ctx.broker.alter_client_quotas(alterations, request.validate_only)
    return AlterClientQuotasResponse(
        throttle_time_ms=0,
        entries=[Entry(error_code=r.error, error_message=r.message,
                       entity=[EntityData(entity_type=t, entity_name=n) for t, n in r.pairs])
                 for r in results])
