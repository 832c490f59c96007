"""Real clients against the codec: a throwaway blocking socket loop in this test
answers with protocol.messages only (ApiVersions, Metadata, InitProducerId,
Produce, ListOffsets, Fetch; records stored verbatim in memory), and
kafka-python (latest, api_version (0,10) and (0,8,2)), librdkafka and aiokafka
produce and consume through it.  This is what caught librdkafka's Metadata v13
trailing bytes; the broker's own integration tests go much further."""
from __future__ import annotations

import asyncio
import socket
import struct
import threading
import uuid

import pytest

from samsa.protocol.errors import UnsupportedVersionError
from samsa.protocol.messages import (API_BY_KEY, ApiVersionsResponse, FetchResponse, InitProducerIdResponse,
                               ListOffsetsResponse, MetadataResponse, ProduceResponse, RequestHeader,
                               decode_request, encode_response)

TOPIC_ID = uuid.uuid4()


class MiniServer:
    def __init__(self):
        self.store: dict[int, bytes] = {}
        self.seen: set = set()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.closed = True
        self.sock.close()
        for c in self.conns:
            c.close()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _versions(self, error=0):
        return ApiVersionsResponse(error_code=error, api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=s.min_version, max_version=s.max_version)
            for k, s in API_BY_KEY.items()])

    def _serve(self, conn):
        try:
            f = conn.makefile("rb")
            while True:
                h = f.read(4)
                if len(h) < 4:
                    return
                frame = f.read(struct.unpack(">i", h)[0])
                try:
                    hdr, req = decode_request(frame)
                except UnsupportedVersionError as e:
                    hdr = RequestHeader(e.api_key, e.api_version, e.correlation_id, None)
                    conn.sendall(encode_response(hdr, self._versions(35), version=0)[0])
                    continue
                name = API_BY_KEY[hdr.api_key].name
                self.seen.add((name, hdr.api_version))
                resp = getattr(self, "on_" + name)(req)
                if resp is not None:
                    conn.sendall(b"".join(encode_response(hdr, resp)))
        except OSError:
            return

    def on_ApiVersions(self, req):
        return self._versions()

    def on_Metadata(self, req):
        M = MetadataResponse
        return M(brokers=[M.MetadataResponseBroker(node_id=0, host="127.0.0.1", port=self.port)],
                 cluster_id="samsa-test", controller_id=0, topics=[M.MetadataResponseTopic(
                     name="t1", topic_id=TOPIC_ID, partitions=[M.MetadataResponsePartition(
                         partition_index=0, leader_id=0, replica_nodes=[0], isr_nodes=[0])])])

    def on_InitProducerId(self, req):
        return InitProducerIdResponse(producer_id=1000, producer_epoch=0)

    def on_Produce(self, req):
        R = ProduceResponse
        topics = []
        for t in req.topic_data:
            parts = []
            for p in t.partition_data:
                self.store[p.index] = self.store.get(p.index, b"") + bytes(p.records)
                parts.append(R.PartitionProduceResponse(index=p.index, base_offset=0, log_start_offset=0))
            topics.append(R.TopicProduceResponse(name=t.name, topic_id=t.topic_id, partition_responses=parts))
        return None if req.acks == 0 else R(responses=topics)

    def on_ListOffsets(self, req):
        R = ListOffsetsResponse
        return R(topics=[R.ListOffsetsTopicResponse(name=t.name, partitions=[
            R.ListOffsetsPartitionResponse(partition_index=p.partition_index, offset=0, timestamp=-1,
                                           old_style_offsets=[0]) for p in t.partitions]) for t in req.topics])

    def on_Fetch(self, req):
        R = FetchResponse
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                data = self.store.get(p.partition, b"") if p.fetch_offset == 0 else b""
                parts.append(R.PartitionData(partition_index=p.partition, high_watermark=1 if data else 0,
                                             last_stable_offset=1, log_start_offset=0, records=data))
            topics.append(R.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=parts))
        return R(responses=topics)


@pytest.fixture
def server():
    s = MiniServer()
    yield s
    s.close()


@pytest.mark.parametrize("api_version,expect", [
    (None, {("Produce", 9), ("Fetch", 12), ("Metadata", 13)}),
    ((0, 10), {("Produce", 2), ("Fetch", 2), ("ListOffsets", 0)}),
    ((0, 8, 2), {("Produce", 0), ("Fetch", 0), ("Metadata", 0)}),
])
def test_kafka_python_produce_consume(server, api_version, expect):
    import kafka
    kw = {} if api_version is None else {"api_version": api_version}
    bs = f"127.0.0.1:{server.port}"
    p = kafka.KafkaProducer(bootstrap_servers=bs, **kw)
    p.send("t1", b"hello", partition=0).get(timeout=10)
    p.close()
    # The first record, however long a loaded machine takes to fetch it (iterating
    # until 0.5 s pass without a record read nothing when the fetch took longer).
    c = kafka.KafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest",
                            consumer_timeout_ms=30000, **kw)
    c.assign([kafka.TopicPartition("t1", 0)])
    got = next(c, None)
    c.close()
    assert got is not None and got.value == b"hello"
    assert expect <= server.seen


def test_librdkafka_metadata_and_produce(server):
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient
    bs = f"127.0.0.1:{server.port}"
    md = AdminClient({"bootstrap.servers": bs}).list_topics(timeout=10)
    assert {t: len(v.partitions) for t, v in md.topics.items()} == {"t1": 1}
    p = Producer({"bootstrap.servers": bs})
    p.produce("t1", b"from-rdkafka", partition=0)
    assert p.flush(10) == 0
    assert b"from-rdkafka" in server.store[0]


def test_aiokafka_produce_consume(server):
    import aiokafka

    async def run():
        bs = f"127.0.0.1:{server.port}"
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=bs)
        await p.start()
        try:
            await p.send_and_wait("t1", b"aio", partition=0)
        finally:
            await p.stop()
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=bs, auto_offset_reset="earliest")
        await c.start()
        try:
            c.assign([aiokafka.TopicPartition("t1", 0)])
            return (await asyncio.wait_for(c.getone(), 10)).value
        finally:
            await c.stop()

    assert asyncio.run(run()) == b"aio"
