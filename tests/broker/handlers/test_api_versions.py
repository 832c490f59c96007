"""ApiVersions answers every API the broker has a handler for, at the versions it serves."""
from __future__ import annotations

from samsa.broker.handlers import HANDLERS
from samsa.broker.handlers.api_versions import handle_api_versions
from samsa.protocol.messages import API_BY_KEY, ApiVersionsRequest
from samsa.protocol.model import ApiKey

from .fakes import FakeServices, context


async def test_every_handled_api_is_advertised_with_the_versions_the_codecs_serve():
    ctx = context(FakeServices(), ApiKey.API_VERSIONS, 3)
    resp = await handle_api_versions(ctx, ApiVersionsRequest())
    assert resp.error_code == 0
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert set(got) == set(HANDLERS)
    assert got[ApiKey.PRODUCE] == (API_BY_KEY[ApiKey.PRODUCE].min_version,
                                   API_BY_KEY[ApiKey.PRODUCE].max_version)
