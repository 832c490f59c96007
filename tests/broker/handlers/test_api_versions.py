"""ApiVersions answers every API the broker has a handler for, at the versions it serves."""
from __future__ import annotations

import dataclasses

from samsa.broker.handlers import HANDLERS
from samsa.broker.handlers.api_versions import handle_api_versions
from samsa.protocol.messages import (API_BY_KEY, ApiVersionsRequest, RequestHeader,
                                     decode_response, encode_response)
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


async def test_transaction_version_is_finalized_as_configured():
    """Kafka 4's feature flags: the Java producer 4.x uses transactions v2 only
    when transaction.version is finalized at 2; a broker set to 0 leaves it out."""
    services = FakeServices()
    resp = await handle_api_versions(context(services, ApiKey.API_VERSIONS, 3),
                                     ApiVersionsRequest())
    assert [(f.name, f.min_version, f.max_version) for f in resp.supported_features] == [
        ("transaction.version", 0, 2)]
    assert [(f.name, f.max_version_level) for f in resp.finalized_features] == [
        ("transaction.version", 2)]
    assert resp.finalized_features_epoch == services.features_epoch > 0
    # the tagged fields reach the wire at v3
    hdr = RequestHeader(api_key=ApiKey.API_VERSIONS, api_version=3, correlation_id=9,
                        client_id="t")
    _, back = decode_response(b"".join(encode_response(hdr, resp))[4:], ApiKey.API_VERSIONS, 3)
    assert [(f.name, f.max_version_level) for f in back.finalized_features] == [
        ("transaction.version", 2)]

    services.config = dataclasses.replace(services.config, transaction_version=0)
    off = await handle_api_versions(context(services, ApiKey.API_VERSIONS, 3),
                                    ApiVersionsRequest())
    assert off.finalized_features == [] and len(off.supported_features) == 1


async def test_the_finalized_features_epoch_is_the_brokers_own():
    """Taken when the broker starts, not when the module was imported: brokers
    forked from one process (the test kit's) would otherwise share one epoch."""
    services = FakeServices(features_epoch=1_700_000_000_123)
    resp = await handle_api_versions(context(services, ApiKey.API_VERSIONS, 3),
                                     ApiVersionsRequest())
    assert resp.finalized_features_epoch == 1_700_000_000_123
