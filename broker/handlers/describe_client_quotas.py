"""DescribeClientQuotas (key 48), versions 0-1.

The quota configs of the entities a filter matches (``trafka.broker.security.quotas``): components name an
entity type (``user``, ``client-id``, ``ip``) with an exact name, the type's default, or any name of the
type; without ``strict`` an entity matches when it has every component's type (and may have others), with
``strict`` when it has exactly those types (no components and strict: nothing). A filter Kafka refuses gets
its top-level error code and message and no entries: INVALID_REQUEST (an empty or repeated type, a match
string where the match type takes none, or none where it takes one, an unknown match type, ip combined with
user or client-id), UNSUPPORTED_VERSION for an unknown entity type. On success the error message is empty,
not null, as Kafka answers.
"""
from __future__ import annotations

from trafka.broker.handlers.registry import RequestContext, handles
from trafka.broker.security.quotas import Component, QuotaRequestError, describe_quotas
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import DescribeClientQuotasRequest, DescribeClientQuotasResponse
from trafka.wire.protocol import ApiKey

Entry = DescribeClientQuotasResponse.EntryData
EntityData = DescribeClientQuotasResponse.EntityData
ValueData = DescribeClientQuotasResponse.ValueData


@handles(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1)
async def handle_describe_client_quotas(
    ctx: RequestContext, request: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    components = [Component(c.entity_type, c.match_type, c.match) for c in request.components]
    try:
        found = describe_quotas(ctx.broker.client_quotas.configs, components, request.strict)
    except QuotaRequestError as exc:
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=exc.code, error_message=exc.message,
                                            entries=None)
    return DescribeClientQuotasResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message="",
        entries=[Entry(entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity],
                       values=[ValueData(key=k, value=v) for k, v in sorted(values.items())])
                 for entity, values in found])
