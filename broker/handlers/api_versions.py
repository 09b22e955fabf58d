"""ApiVersions (key 18), versions 0-4.

Lists every API this broker serves with its version range, straight from the handler registry. A
request whose version is newer than the broker knows is answered with a v0 response carrying
UNSUPPORTED_VERSION and the same list (see broker.connection), so clients can settle on a version.
No features are finalized: this broker has no KRaft metadata versions to negotiate.

A broker told to be an older Apache Kafka (``--kafka-version X.Y``, trafka.broker.kafka_versions) lists, and
its connections serve, only the APIs and versions that release's broker listed, within trafka's own; in
ApiVersions v3 and later it answers the finalized features epoch that broker answered (it finalized no feature).
"""
from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from trafka.broker import kafka_versions
from trafka.broker.handlers.registry import REGISTRY, RequestContext, handles
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import ApiVersionsRequest, ApiVersionsResponse
from trafka.wire.protocol import ApiKey

if TYPE_CHECKING:
    from trafka.broker.config import BrokerConfig


@cache
def served_versions(kafka_version: str | None = None) -> dict[int, tuple[int, int]]:
    """The versions served of each API (api key -> (min, max)): the registry's, within ``kafka_version``'s."""
    return kafka_versions.cap(REGISTRY.served_versions(), kafka_version)


def served_versions_on(config: BrokerConfig, listener: str) -> dict[int, tuple[int, int]]:
    """The versions a connection on ``listener`` serves."""
    return served_versions(kafka_versions.for_listener(config, listener))


@cache
def _advertised(kafka_version: str | None) -> tuple[tuple[int, int, int], ...]:
    served = REGISTRY.served_versions()
    advertised = {h.api_key: (h.advertised_min_version, h.max_version) for h in REGISTRY}
    capped = kafka_versions.cap(advertised, kafka_version, served=served)
    return tuple((api_key, low, high) for api_key, (low, high) in sorted(capped.items()))


def api_versions_response(error_code: ErrorCode = ErrorCode.NONE, config: BrokerConfig | None = None,
                          listener: str | None = None) -> ApiVersionsResponse:
    """The answer to ApiVersions on ``listener`` of a broker with ``config`` (by default, trafka's own list)."""
    kafka_version = None if config is None else kafka_versions.for_listener(config, listener or "")
    return ApiVersionsResponse(
        error_code=error_code,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=api_key, min_version=low, max_version=high)
            for api_key, low, high in _advertised(kafka_version)
        ],
        finalized_features_epoch=kafka_versions.finalized_features_epoch(kafka_version),
    )


@handles(ApiKey.API_VERSIONS, 0, 4)
async def handle_api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    return api_versions_response(config=ctx.broker.config, listener=ctx.listener)
