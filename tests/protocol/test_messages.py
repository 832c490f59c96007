"""Round trips for every served API and version, headers, and malformed input."""
from __future__ import annotations

import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from samsa.protocol.errors import ProtocolError, UnsupportedVersionError
from samsa.protocol.messages import (API_BY_KEY, ApiSpec, ApiVersionsRequest, ApiVersionsResponse,
                               FetchResponse, MetadataRequest, ProduceRequest, ProduceResponse,
                               RequestHeader, decode_request, decode_response, encode_request,
                               encode_response)
from tests.protocol.test_messages_strategies import message_strategy

EXPECTED_RANGES = {
    "ApiVersions": (18, 0, 4), "Metadata": (3, 0, 13), "Produce": (0, 0, 13),
    "Fetch": (1, 0, 18), "ListOffsets": (2, 0, 10), "OffsetCommit": (8, 0, 9),
    "OffsetFetch": (9, 0, 9), "FindCoordinator": (10, 0, 6), "JoinGroup": (11, 0, 9),
    "Heartbeat": (12, 0, 4), "LeaveGroup": (13, 0, 5), "SyncGroup": (14, 0, 5),
    "DescribeGroups": (15, 0, 6), "ListGroups": (16, 0, 5), "DeleteGroups": (42, 0, 2),
    "ConsumerGroupHeartbeat": (68, 0, 1), "ConsumerGroupDescribe": (69, 0, 1),
    "OffsetDelete": (47, 0, 0), "CreateTopics": (19, 0, 7), "DeleteTopics": (20, 0, 6),
    "CreatePartitions": (37, 0, 3), "DeleteRecords": (21, 0, 2), "InitProducerId": (22, 0, 5),
    "OffsetForLeaderEpoch": (23, 0, 4), "DescribeConfigs": (32, 0, 4), "AlterConfigs": (33, 0, 2),
    "IncrementalAlterConfigs": (44, 0, 1), "DescribeCluster": (60, 0, 2),
    "DescribeLogDirs": (35, 0, 5), "AlterReplicaLogDirs": (34, 0, 2),
    "DescribeTopicPartitions": (75, 0, 0), "ListConfigResources": (74, 0, 1),
    "WriteTxnMarkers": (27, 1, 2),
    "DescribeProducers": (61, 0, 0),
    "ControlledShutdown": (7, 1, 3),
    "ElectLeaders": (43, 0, 2), "AlterPartitionReassignments": (45, 0, 1),
    "ListPartitionReassignments": (46, 0, 0),
    "AddPartitionsToTxn": (24, 0, 5), "AddOffsetsToTxn": (25, 0, 4), "EndTxn": (26, 0, 5),
    "TxnOffsetCommit": (28, 0, 5),
    "DescribeTransactions": (65, 0, 0), "ListTransactions": (66, 0, 2),
    "SaslHandshake": (17, 0, 1), "SaslAuthenticate": (36, 0, 2),
    "DescribeUserScramCredentials": (50, 0, 0), "AlterUserScramCredentials": (51, 0, 0),
    "DescribeClientQuotas": (48, 0, 1), "AlterClientQuotas": (49, 0, 1),
    "DescribeAcls": (29, 0, 3), "CreateAcls": (30, 0, 3), "DeleteAcls": (31, 0, 3),
    "ShareGroupHeartbeat": (76, 1, 1), "ShareGroupDescribe": (77, 1, 1),
    "ShareFetch": (78, 1, 1), "ShareAcknowledge": (79, 1, 1),
    "DescribeShareGroupOffsets": (90, 0, 1), "AlterShareGroupOffsets": (91, 0, 0),
    "DeleteShareGroupOffsets": (92, 0, 0),
    "InitializeShareGroupState": (83, 0, 0), "ReadShareGroupState": (84, 0, 0),
    "WriteShareGroupState": (85, 0, 0), "DeleteShareGroupState": (86, 0, 0),
    "ReadShareGroupStateSummary": (87, 0, 0),
}

CASES = [(spec.key, v) for spec in API_BY_KEY.values()
         for v in range(spec.min_version, spec.max_version + 1)]
ROUNDTRIP = settings(max_examples=12, deadline=None, derandomize=True,
                     suppress_health_check=list(HealthCheck))


def test_api_by_key_is_exactly_the_served_set():
    got = {s.name: (s.key, s.min_version, s.max_version) for s in API_BY_KEY.values()}
    assert got == EXPECTED_RANGES
    for key, spec in API_BY_KEY.items():
        assert isinstance(spec, ApiSpec) and spec.key == key
        assert spec.request_cls.__name__ == spec.name + "Request"
        assert spec.response_cls.__name__ == spec.name + "Response"


def _case_id(c):
    return f"{API_BY_KEY[c[0]].name}-v{c[1]}"


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_request_roundtrip(case):
    key, v = case
    spec = API_BY_KEY[key]

    @ROUNDTRIP
    @given(req=message_strategy(spec.request_cls, v), corr=st.integers(-2**31, 2**31 - 1),
           client_id=st.one_of(st.none(), st.text(max_size=10)))
    def check(req, corr, client_id):
        frame = encode_request(RequestHeader(key, v, corr, client_id), req)
        assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
        hdr, got = decode_request(memoryview(frame)[4:], strict=True)
        assert hdr == RequestHeader(key, v, corr, client_id)
        assert got == req

    check()


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_response_roundtrip(case):
    key, v = case
    spec = API_BY_KEY[key]

    @ROUNDTRIP
    @given(resp=message_strategy(spec.response_cls, v), corr=st.integers(-2**31, 2**31 - 1))
    def check(resp, corr):
        parts = encode_response(RequestHeader(key, v, corr, "c"), resp)
        assert len(parts) == 1
        frame = parts[0]
        assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
        got_corr, got = decode_response(frame[4:], key, v)
        assert got_corr == corr
        assert got == resp

    check()


# ---------------- headers ----------------

def test_request_header_v2_client_id_is_not_compact():
    # ApiVersions v3 is flexible: header v2 = key, version, corr, int16 client_id, tags.
    req = ApiVersionsRequest(client_software_name="samsa-test", client_software_version="1.0")
    frame = encode_request(RequestHeader(18, 3, 42, "abc"), req)
    body = frame[4:]
    assert body[:8] == struct.pack(">hhi", 18, 3, 42)
    assert body[8:13] == b"\x00\x03abc"  # int16 length, not a varint
    assert body[13] == 0  # header tag buffer
    hdr, got = decode_request(body)
    assert hdr == RequestHeader(18, 3, 42, "abc") and got == req


@pytest.mark.parametrize("v", [3, 4])
def test_api_versions_response_header_is_v0_even_when_flexible(v):
    resp = ApiVersionsResponse(error_code=0, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=0, min_version=0, max_version=13)])
    frame = encode_response(RequestHeader(18, v, 9, None), resp)[0]
    assert frame[4:8] == struct.pack(">i", 9)
    # v0 header: the body starts right after the correlation id with error_code.
    assert frame[8:10] == b"\x00\x00"
    assert decode_response(frame[4:], 18, v) == (9, resp)


def test_flexible_response_header_has_tag_buffer():
    out = encode_response(RequestHeader(0, 9, 5, None), ProduceResponse())[0]
    assert out[4:9] == struct.pack(">i", 5) + b"\x00"
    out = encode_response(RequestHeader(0, 8, 5, None), ProduceResponse())[0]
    assert out[4:8] == struct.pack(">i", 5) and len(out) == 4 + 4 + 4 + 4  # corr, [] , throttle


def test_unsupported_api_versions_answer_with_v0_body():
    frame = struct.pack(">hhi", 18, 7, 77) + b"\x00\x01x" + b"\x00" * 5
    with pytest.raises(UnsupportedVersionError) as ei:
        decode_request(frame)
    e = ei.value
    assert (e.api_key, e.api_version, e.correlation_id) == (18, 7, 77)
    resp = ApiVersionsResponse(error_code=35, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=k, min_version=s.min_version, max_version=s.max_version)
        for k, s in API_BY_KEY.items()])
    hdr = RequestHeader(e.api_key, e.api_version, e.correlation_id, None)
    frame = encode_response(hdr, resp, version=0)[0]
    corr, got = decode_response(frame[4:], 18, 0)
    assert corr == 77 and got.error_code == 35 and len(got.api_keys) == len(API_BY_KEY)


def test_unknown_key_and_version_raise_unsupported():
    for key, ver in [(9999, 0), (0, 14), (1, 19), (2, 11), (22, 6), (0, -1)]:
        with pytest.raises(UnsupportedVersionError):
            decode_request(struct.pack(">hhi", key, ver, 1) + b"\xff\xff")


def test_header_versions_and_codecs():
    from samsa.protocol.messages import (decode_request_header, encode_request_header,
                                   request_header_version, response_header_version)
    assert [request_header_version(0, v) for v in (0, 8, 9, 13)] == [1, 1, 2, 2]
    assert [response_header_version(1, v) for v in (0, 11, 12)] == [0, 0, 1]
    assert [response_header_version(18, v) for v in (0, 3, 4)] == [0, 0, 0]
    assert request_header_version(60, 0) == 2 and response_header_version(60, 0) == 1
    hdr = RequestHeader(3, 12, 99, "cid")
    for hv, size in [(0, 8), (1, 13), (2, 14)]:
        raw = encode_request_header(hdr, hv)
        assert len(raw) == size
        got, pos = decode_request_header(raw + b"body", hv)
        assert pos == size and got == (hdr if hv else hdr._replace(client_id=None))
    with pytest.raises(ProtocolError):
        decode_request_header(b"\x00\x03\x00", 1)


# ---------------- regions ----------------

class FakeRegion:
    def __init__(self, length):
        self.length = length


@pytest.mark.parametrize("v", [4, 11, 12, 16])
def test_fetch_response_regions_become_parts(v):
    P = FetchResponse.PartitionData
    resp = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic="t", topic_id=uuid.uuid4(), partitions=[
            P(partition_index=0, high_watermark=10, records=FakeRegion(300)),
            P(partition_index=1, high_watermark=10, records=b"abc"),
            P(partition_index=2, high_watermark=10, records=FakeRegion(5)),
        ])])
    parts = encode_response(RequestHeader(1, v, 3, None), resp)
    assert isinstance(parts[0], bytes)
    regions = [p for p in parts if isinstance(p, FakeRegion)]
    assert [r.length for r in regions] == [300, 5]
    size = struct.unpack(">i", parts[0][:4])[0]
    assert size == sum(len(p) if isinstance(p, bytes) else p.length for p in parts) - 4
    # Replace regions with that many bytes: the result must decode.
    flat = b"".join(p if isinstance(p, bytes) else b"\x07" * p.length for p in parts)
    _, got = decode_response(flat[4:], 1, v)
    recs = [bytes(p.records) for p in got.responses[0].partitions]
    assert recs == [b"\x07" * 300, b"abc", b"\x07" * 5]


def test_records_decode_to_memoryview_slices_of_the_frame():
    req = ProduceRequest(acks=-1, timeout_ms=5, topic_data=[ProduceRequest.TopicProduceData(
        name="t", partition_data=[ProduceRequest.PartitionProduceData(index=3, records=b"x" * 100)])])
    frame = memoryview(encode_request(RequestHeader(0, 9, 1, "c"), req))[4:]
    _, got = decode_request(frame)
    rec = got.topic_data[0].partition_data[0].records
    assert isinstance(rec, memoryview) and rec.obj is frame.obj and bytes(rec) == b"x" * 100


# ---------------- objects ----------------

def test_defaults_and_names():
    r = FetchResponse.PartitionData()
    assert r.last_stable_offset == -1 and r.log_start_offset == -1 and r.records is None
    assert r.preferred_read_replica == -1 and r.aborted_transactions is None
    assert r.current_leader == FetchResponse.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    m = MetadataRequest()
    assert m.topics is None and m.allow_auto_topic_creation is True  # nullable: None
    assert ProduceRequest().transactional_id is None
    assert ProduceResponse.PartitionProduceResponse().log_append_time_ms == -1
    with pytest.raises(TypeError):
        ProduceRequest(1)
    with pytest.raises(TypeError):
        ProduceRequest(no_such_field=1)
    a, b = ProduceRequest(), ProduceRequest()
    a.topic_data.append(1)
    assert b.topic_data == []  # no shared mutable defaults


def test_every_message_class_is_importable_by_name():
    import samsa.protocol.messages as pm
    for spec in API_BY_KEY.values():
        for cls in (spec.request_cls, spec.response_cls):
            assert getattr(pm, cls.__name__) is cls and cls.__name__ in pm.__all__
    assert pm.OffsetDeleteResponse.OffsetDeleteResponseTopic.__qualname__ == \
        "OffsetDeleteResponse.OffsetDeleteResponseTopic"


def test_bad_values_give_a_clear_encode_error():
    bad = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
        name="t", partition_responses=[ProduceResponse.PartitionProduceResponse(base_offset=None)])])
    with pytest.raises(ValueError, match="ProduceResponse v9"):
        encode_response(RequestHeader(0, 9, 1, None), bad)


def test_metadata_null_topics_means_all():
    frame = encode_request(RequestHeader(3, 4, 1, None), MetadataRequest(topics=None))
    _, got = decode_request(frame[4:])
    assert got.topics is None


def test_encode_drops_fields_absent_in_version():
    # topic_id does not exist in Produce v9; a set value is dropped, not an error.
    resp = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(
        name="t", topic_id=uuid.uuid4(), partition_responses=[
            ProduceResponse.PartitionProduceResponse(index=0, log_start_offset=5,
                                                     current_leader=ProduceResponse.LeaderIdAndEpoch(
                                                         leader_id=1, leader_epoch=2))])])
    for v in range(0, 14):
        frame = encode_response(RequestHeader(0, v, 1, None), resp)[0]
        _, got = decode_response(frame[4:], 0, v)
        p = got.responses[0].partition_responses[0]
        assert p.log_start_offset == (5 if v >= 5 else -1)
        assert p.current_leader.leader_id == (1 if v >= 10 else -1)


# ---------------- malformed input ----------------

def _valid_frames():
    frames = []
    req = ProduceRequest(acks=1, timeout_ms=5, topic_data=[ProduceRequest.TopicProduceData(
        name="topic", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=b"r" * 40)])])
    for v in (0, 3, 9, 12):
        frames.append(encode_request(RequestHeader(0, v, 1, "c"), req)[4:])
    for v in (0, 4, 9, 12):
        frames.append(encode_request(RequestHeader(3, v, 1, "c"), MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name="a", topic_id=uuid.uuid4())]))[4:])
    frames.append(encode_request(RequestHeader(18, 3, 1, "c"), ApiVersionsRequest(
        client_software_name="x", client_software_version="y"))[4:])
    return frames


def test_truncated_frames_raise_protocol_error():
    for frame in _valid_frames():
        for cut in range(len(frame)):
            with pytest.raises(ProtocolError):
                decode_request(frame[:cut])


def test_trailing_bytes_ignored_like_kafka_unless_strict():
    for frame in _valid_frames():
        assert decode_request(frame + b"\x01\x00\x00") == decode_request(frame)
        with pytest.raises(ProtocolError):
            decode_request(frame + b"\x00", strict=True)


def test_librdkafka_all_topics_metadata_v13():
    # Captured from confluent-kafka 2.16.1 / librdkafka 2.16.0 (AdminClient.list_topics):
    # the topic count is written as int32 0 in a flexible request; Kafka reads the
    # first byte as a null compact array (all topics) and ignores the rest.
    frame = bytes.fromhex("0003000d00000003000772646b61666b610000000000010000")
    hdr, req = decode_request(frame)
    assert hdr == RequestHeader(3, 13, 3, "rdkafka")
    assert req.topics is None and req.allow_auto_topic_creation is False


def test_huge_array_count_fails_fast():
    # Produce v3: transactional_id null, acks, timeout, then topic count 2^31-1 with 10 bytes left.
    frame = struct.pack(">hhi", 0, 3, 1) + b"\xff\xff" + b"\xff\xff" + struct.pack(">hi", 1, 5)
    frame += struct.pack(">i", 2**31 - 1) + b"\x00" * 10
    with pytest.raises(ProtocolError):
        decode_request(frame)
    # same for a compact array (Produce v9) and a huge string length
    frame = struct.pack(">hhi", 0, 9, 1) + b"\xff\xff\x00" + b"\x00" + struct.pack(">hi", 1, 5)
    frame += b"\xff\xff\xff\xff\x07" + b"\x00" * 10
    with pytest.raises(ProtocolError):
        decode_request(frame)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.binary(max_size=64))
def test_garbage_raises_only_protocol_error(data):
    try:
        decode_request(data)
    except ProtocolError:
        pass
