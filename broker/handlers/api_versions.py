"""ApiVersions: what this broker serves, from the same table the codecs use,
and (v3+) the feature flags clients decide on (broker/features.py)."""
from __future__ import annotations

from collections.abc import Iterable

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import ApiSpec, ApiVersionsRequest, ApiVersionsResponse

from .. import features
from .context import RequestContext

R = ApiVersionsResponse


def api_versions_response(advertised: Iterable[ApiSpec], error_code: int = ErrorCode.NONE,
                          finalized: features.Finalized | None = None) -> ApiVersionsResponse:
    resp = R(
        error_code=error_code,
        api_keys=[R.ApiVersion(api_key=s.key, min_version=s.min_version,
                               max_version=s.max_version)
                  for s in advertised],
        throttle_time_ms=0,
    )
    if finalized is not None:
        resp.supported_features = [
            R.SupportedFeatureKey(name=name, min_version=lo, max_version=hi)
            for name, (lo, hi) in features.SUPPORTED.items()]
        resp.finalized_features_epoch = finalized.epoch
        resp.finalized_features = [
            R.FinalizedFeatureKey(name=name, min_version_level=level, max_version_level=level)
            for name, level in finalized.levels.items()]
    return resp


async def handle_api_versions(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
    return api_versions_response(ctx.broker.advertised_apis,
                                 finalized=features.finalized(ctx.broker.config.transaction_version,
                                                              ctx.broker.features_epoch))
