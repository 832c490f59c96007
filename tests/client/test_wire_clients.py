"""samsa's own client stack against a real broker: the sans-IO core, the
asyncio connection (pipelined calls, closed connections) and the blocking
client the tools use."""
from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from samsa.client.aio import ConnectionClosedError, KafkaConnection
from samsa.client.blocking import ClientError, SimpleClient
from samsa.client.core import ClientCore, NoCommonVersionError
from samsa.protocol.errors import ProtocolError
from samsa.protocol.messages import (API_BY_KEY, ApiVersionsRequest, ApiVersionsResponse, CreateTopicsRequest,
                               MetadataRequest)


def test_version_choice_is_the_highest_common_one():
    core = ClientCore()
    core.learn_versions(ApiVersionsResponse(error_code=0, throttle_time_ms=0, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=3, min_version=0, max_version=99),
        ApiVersionsResponse.ApiVersion(api_key=19, min_version=50, max_version=60)]))
    assert core.version_for(3) == API_BY_KEY[3].max_version
    assert core.version_for(3, highest=4) == 4
    with pytest.raises(NoCommonVersionError, match="CreateTopics"):
        core.version_for(19)
    with pytest.raises(NoCommonVersionError, match="not advertised"):
        core.version_for(1)


def test_responses_out_of_order_break_the_stream():
    core = ClientCore()
    core.request(ApiVersionsRequest(), api_key=18, version=0)
    with pytest.raises(ProtocolError, match="correlation id 7"):
        core.receive(struct.pack(">ii", 4, 7))
    with pytest.raises(ProtocolError, match="outside"):
        ClientCore().receive(struct.pack(">i", -1))


async def test_pipelined_calls_each_get_their_own_answer(broker):
    conn = await KafkaConnection.connect(broker.host, broker.port, client_id="pipeline-test")
    try:
        names = [f"pipe-{i}" for i in range(20)]
        creates = [conn.call(CreateTopicsRequest(
            topics=[CreateTopicsRequest.CreatableTopic(name=n, num_partitions=1,
                                                       replication_factor=1, assignments=[],
                                                       configs=[])],
            timeout_ms=10000, validate_only=False), api_key=19) for n in names]
        results = await asyncio.gather(*creates)
        assert [r.topics[0].name for r in results] == names
        assert all(r.topics[0].error_code == 0 for r in results)
        meta = await conn.call(MetadataRequest(topics=None, allow_auto_topic_creation=False),
                               api_key=3)
        assert set(names) <= {t.name for t in meta.topics}
    finally:
        await conn.close()
    with pytest.raises(ConnectionClosedError):
        await conn.call(MetadataRequest(topics=None), api_key=3)


async def test_a_broker_that_goes_away_fails_the_waiting_calls(broker):
    conn = await KafkaConnection.connect(broker.host, broker.port)
    broker.kill()
    with pytest.raises(ConnectionClosedError):
        await asyncio.wait_for(conn.call(MetadataRequest(topics=None), api_key=3), 10)
    await conn.close()


async def test_connect_refused_says_where():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(ConnectionClosedError, match=f"127.0.0.1:{port}"):
        await KafkaConnection.connect("127.0.0.1", port, timeout=5)


def test_blocking_client_uses_the_same_core(broker):
    with SimpleClient(broker.bootstrap) as client:
        assert 3 in client.versions
        meta = client.call(3, MetadataRequest(topics=None))
        assert [b.node_id for b in meta.brokers] == [0]
        with pytest.raises(ClientError, match="does not support"):
            client.version_for(9999)
