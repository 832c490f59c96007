"""The one place the group coordinator will hear of transaction markers: a
broker (in this process, so the test can set the hook) calls
``services.txn_marker_hook(partition, producer id, committed)`` once a
WriteTxnMarkers marker is replicated in a __consumer_offsets partition, and
for no other topic."""
from __future__ import annotations

import asyncio

from samsa.client.aio import KafkaConnection
from samsa.broker.server import Broker
from samsa.config.broker import load_broker_config
from samsa.protocol.messages import CreateTopicsRequest, WriteTxnMarkersRequest
from tests.support.kafka_wire import free_port

W = WriteTxnMarkersRequest


def _marker(pid, commit, topic, partitions):
    return W.WritableTxnMarker(producer_id=pid, producer_epoch=0, transaction_result=commit,
                               coordinator_epoch=0, transaction_version=0,
                               topics=[W.WritableTxnMarkerTopic(name=topic,
                                                                partition_indexes=partitions)])


async def test_markers_in_consumer_offsets_reach_the_hook(tmp_path):
    port = free_port()
    cfg = load_broker_config(None, [
        f"listeners=PLAINTEXT://127.0.0.1:{port}", f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}",
        f"log.dirs={tmp_path}", "offsets.topic.num.partitions=3"], environ={})
    broker = Broker(cfg)
    await broker.start()
    heard = []
    broker.services.txn_marker_hook = lambda partition, pid, committed: heard.append(
        (partition, pid, committed))
    conn = await KafkaConnection.connect("127.0.0.1", port)
    try:
        created = await conn.call(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name="data", num_partitions=1, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=10000, validate_only=False), api_key=19)
        assert created.topics[0].error_code == 0
        resp = await conn.call(W(markers=[
            _marker(7, True, "__consumer_offsets", [2, 0]),
            _marker(8, False, "data", [0]),
            _marker(9, False, "__consumer_offsets", [1, 5])]), api_key=27)
        codes = [[(p.partition_index, p.error_code) for t in m.topics for p in t.partitions]
                 for m in resp.markers]
        assert codes == [[(2, 0), (0, 0)], [(0, 0)], [(1, 0), (5, 3)]]
        # answered only after the hook heard of every replicated marker
        assert heard == [(2, 7, True), (0, 7, True), (1, 9, False)]
    finally:
        await conn.close()
        await asyncio.wait_for(broker.stop(), 30)
