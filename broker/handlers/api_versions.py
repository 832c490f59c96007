"""ApiVersions: what this broker serves, from the same table the codecs use."""
from __future__ import annotations

from collections.abc import Iterable

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import ApiSpec, ApiVersionsRequest, ApiVersionsResponse

from .context import RequestContext


def api_versions_response(advertised: Iterable[ApiSpec], error_code: int = ErrorCode.NONE
                          ) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=error_code,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=s.key, min_version=s.min_version,
                                                 max_version=s.max_version)
                  for s in advertised],
        throttle_time_ms=0,
    )


async def handle_api_versions(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
    return api_versions_response(ctx.broker.advertised_apis)
