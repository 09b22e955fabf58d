"""ApiVersions (key 18), versions 0-4.

Lists every API this broker serves with its version range, straight from the handler registry. A
request whose version is newer than the broker knows is answered with a v0 response carrying
UNSUPPORTED_VERSION and the same list (see broker.connection), so clients can settle on a version.
No features are finalized: this broker has no KRaft metadata versions to negotiate.
"""
from __future__ import annotations

from trafka.broker.handlers.registry import REGISTRY, RequestContext, handles
from trafka.wire.errors import ErrorCode
from trafka.wire.messages import ApiVersionsRequest, ApiVersionsResponse
from trafka.wire.protocol import ApiKey


def api_versions_response(error_code: ErrorCode = ErrorCode.NONE) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=error_code,
        api_keys=[
            ApiVersionsResponse.ApiVersion(
                api_key=h.api_key, min_version=h.advertised_min_version, max_version=h.max_version
            )
            for h in REGISTRY
        ],
    )


@handles(ApiKey.API_VERSIONS, 0, 4)
async def handle_api_versions(ctx: RequestContext, request: ApiVersionsRequest) -> ApiVersionsResponse:
    return api_versions_response()
