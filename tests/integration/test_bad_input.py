"""Bad input gets a clear answer and loses nothing; the broker keeps serving.

Each case sends something wrong on a raw socket, checks the answer (an error
code, or a closed connection for a malformed frame), and then proves the broker
is still up by serving a real client.
"""
from __future__ import annotations

import socket
import struct
import uuid

import pytest
from kafka import KafkaProducer
from kafka.record import MemoryRecordsBuilder

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (CreateTopicsRequest, ListOffsetsRequest, MetadataRequest,
                               ProduceRequest, RequestHeader, decode_response, encode_request)


@pytest.fixture
def broker(module_broker):
    """One broker for the module (tests/conftest.py): each case still proves it serves after
    its bad input, now after every earlier case's too; topics are of names of their own."""
    return module_broker


def _connect(broker):
    s = socket.create_connection((broker.host, broker.port), timeout=10)
    return s


def _recv_frame(sock):
    head = _recv_exact(sock, 4)
    (size,) = struct.unpack(">i", head)
    return _recv_exact(sock, size)


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def _closed_by_peer(sock) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def _roundtrip(broker, api_key, version, request, correlation_id=1):
    with _connect(broker) as s:
        header = RequestHeader(api_key, version, correlation_id, "bad-input-test")
        s.sendall(encode_request(header, request))
        corr, response = decode_response(_recv_frame(s), api_key, version)
        assert corr == correlation_id
        return response


def _still_serves(broker):
    """A real client can still produce after whatever happened before."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        meta = producer.send(f"alive-{uuid.uuid4().hex[:6]}", b"still here").get(timeout=30)
        assert meta.offset == 0
    finally:
        producer.close()


def test_oversized_frame_closes_connection(broker_factory):
    broker = broker_factory({"socket.request.max.bytes": "1024"})
    with _connect(broker) as s:
        s.sendall(struct.pack(">i", 1 << 30))  # announces 1 GiB; no body follows
        assert _closed_by_peer(s)
    _still_serves(broker)


def test_random_bytes_close_connection(broker):
    rnd = __import__("random").Random(42)
    for _ in range(5):
        body = bytes(rnd.getrandbits(8) for _ in range(200))
        with _connect(broker) as s:
            s.sendall(struct.pack(">i", len(body)) + body)
            assert _closed_by_peer(s)
    _still_serves(broker)


def test_unknown_api_key_closes_connection(broker):
    with _connect(broker) as s:
        body = struct.pack(">hhih", 999, 0, 7, 4) + b"test"
        s.sendall(struct.pack(">i", len(body)) + body)
        assert _closed_by_peer(s)
    _still_serves(broker)


def test_truncated_request_closes_connection(broker):
    frame = encode_request(RequestHeader(3, 1, 5, "t"), MetadataRequest(topics=[
        MetadataRequest.MetadataRequestTopic(name="some-topic")]))
    body = frame[4:-6]  # cut the body short, with a size prefix that matches the cut
    with _connect(broker) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        assert _closed_by_peer(s)
    _still_serves(broker)


def _batch(values):
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for v in values:
        builder.append(timestamp=None, key=None, value=v)
    builder.close()
    return bytes(builder.buffer())


def _produce(broker, topic, records):
    req = ProduceRequest(acks=-1, timeout_ms=5000, transactional_id=None, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=records)])])
    resp = _roundtrip(broker, 0, 9, req)
    return resp.responses[0].partition_responses[0]


def _latest_offset(broker, topic):
    req = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
            partition_index=0, timestamp=-1)])])
    resp = _roundtrip(broker, 2, 5, req)
    part = resp.topics[0].partitions[0]
    assert part.error_code == 0
    return part.offset


def _create(broker, topic):
    req = CreateTopicsRequest(timeout_ms=5000, topics=[CreateTopicsRequest.CreatableTopic(
        name=topic, num_partitions=1, replication_factor=1)])
    resp = _roundtrip(broker, 19, 5, req)
    return resp.topics[0]


def test_wrong_crc_is_corrupt_message_and_nothing_appended(broker):
    topic = f"crc-{uuid.uuid4().hex[:6]}"
    assert _create(broker, topic).error_code == 0
    good = _batch([b"a", b"b", b"c"])
    bad = bytearray(good)
    bad[-1] ^= 0xFF  # flip a byte inside the CRC-covered records
    part = _produce(broker, topic, bytes(bad))
    assert part.error_code == ErrorCode.CORRUPT_MESSAGE
    assert _latest_offset(broker, topic) == 0
    part = _produce(broker, topic, good)
    assert part.error_code == 0 and part.base_offset == 0
    assert _latest_offset(broker, topic) == 3


def test_invalid_topic_name(broker):
    bad_name = "bad/name*"
    assert _create(broker, bad_name).error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    resp = _roundtrip(broker, 3, 9, MetadataRequest(allow_auto_topic_creation=True, topics=[
        MetadataRequest.MetadataRequestTopic(name=bad_name)]))
    assert resp.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    part = _produce(broker, bad_name, _batch([b"x"]))
    assert part.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    _still_serves(broker)


def test_unsupported_api_versions_version_answers_v0_with_error(broker):
    # ApiVersions v99: the broker answers a v0 body with UNSUPPORTED_VERSION and its list.
    with _connect(broker) as s:
        body = struct.pack(">hhih", 18, 99, 11, 4) + b"test"
        s.sendall(struct.pack(">i", len(body)) + body)
        frame = _recv_frame(s)
    corr, err = struct.unpack_from(">ih", frame)
    assert corr == 11 and err == ErrorCode.UNSUPPORTED_VERSION
    _, resp = decode_response(frame, 18, 0)
    assert any(k.api_key == 0 for k in resp.api_keys)
