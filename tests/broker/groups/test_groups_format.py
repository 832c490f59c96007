"""`__consumer_offsets` record bytes, group partitioning and subscription parsing.

Expected bytes are spelled out field by field from Kafka's schemas
(OffsetCommitKey/Value, GroupMetadataKey/Value in group-coordinator/.../message):
int16 lengths for strings (-1 = null), int32 lengths for bytes and arrays,
big-endian integers, an int16 version in front of every key and value.
"""
from __future__ import annotations

import struct

import pytest

from samsa.broker.groups.consumer_protocol import encode_subscription, subscription_topics
from samsa.broker.groups.log_format import (
    GroupKey,
    GroupRecord,
    MemberRecord,
    OffsetAndMetadata,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    java_string_hashcode,
    partition_for,
)
from samsa.broker.groups.store import ConsumerOffsetsLog
from samsa.protocol.errors import ProtocolError


def s16(text: str | None) -> bytes:
    if text is None:
        return b"\xff\xff"
    b = text.encode()
    return struct.pack(">h", len(b)) + b


def b32(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


TS = 1_700_000_000_123


def test_offset_commit_key_bytes():
    key = encode_offset_key("g1", "t", 5)
    assert key == b"\x00\x01" + b"\x00\x02g1" + b"\x00\x01t" + b"\x00\x00\x00\x05"
    assert decode_key(key) == OffsetKey("g1", "t", 5)
    # version 0 keys have the same layout
    assert decode_key(b"\x00\x00" + key[2:]) == OffsetKey("g1", "t", 5)


def test_offset_commit_value_v3_bytes():
    value = encode_offset_value(OffsetAndMetadata(42, 7, "md", TS))
    assert value == (b"\x00\x03" + struct.pack(">q", 42) + struct.pack(">i", 7) + s16("md")
                     + struct.pack(">q", TS))
    assert decode_offset_value(value) == OffsetAndMetadata(42, 7, "md", TS, None)


def test_offset_commit_value_v1_when_expiry_requested():
    value = encode_offset_value(OffsetAndMetadata(9, 3, "", TS, TS + 5000))
    assert value == (b"\x00\x01" + struct.pack(">q", 9) + s16("") + struct.pack(">q", TS)
                     + struct.pack(">q", TS + 5000))
    # v1 has no leader epoch
    assert decode_offset_value(value) == OffsetAndMetadata(9, -1, "", TS, TS + 5000)


def test_offset_commit_value_older_and_flexible_versions_decode():
    v0 = b"\x00\x00" + struct.pack(">q", 1) + s16("a") + struct.pack(">q", TS)
    assert decode_offset_value(v0) == OffsetAndMetadata(1, -1, "a", TS)
    v2 = b"\x00\x02" + struct.pack(">q", 2) + s16("b") + struct.pack(">q", TS)
    assert decode_offset_value(v2) == OffsetAndMetadata(2, -1, "b", TS)
    # v4: compact string (uvarint len+1), then an (empty) tag buffer
    v4 = (b"\x00\x04" + struct.pack(">q", 3) + struct.pack(">i", 4) + b"\x02c"
          + struct.pack(">q", TS) + b"\x00")
    assert decode_offset_value(v4) == OffsetAndMetadata(3, 4, "c", TS)
    # with an unknown tagged field: tag 0, size 2, two bytes
    v4_tagged = v4[:-1] + b"\x01\x00\x02zz"
    assert decode_offset_value(v4_tagged) == OffsetAndMetadata(3, 4, "c", TS)


def test_group_metadata_key_bytes():
    key = encode_group_key("g1")
    assert key == b"\x00\x02\x00\x02g1"
    assert decode_key(key) == GroupKey("g1")


def test_unknown_key_versions_are_not_ours():
    # e.g. KIP-848 consumer group records (key version 3+)
    assert decode_key(b"\x00\x03\x00\x02g1") is None


GROUP = GroupRecord(
    "g1", "consumer", 3, "range", "lead", TS,
    [MemberRecord("lead", "i1", "cli", "/host", 30000, 10000, b"abc", b"xy"),
     MemberRecord("m2", None, "c2", "/h2", 60000, 45000, b"", b"")])

GROUP_V3 = (
    b"\x00\x03" + s16("consumer") + struct.pack(">i", 3) + s16("range") + s16("lead")
    + struct.pack(">q", TS) + struct.pack(">i", 2)
    + s16("lead") + s16("i1") + s16("cli") + s16("/host") + struct.pack(">ii", 30000, 10000)
    + b32(b"abc") + b32(b"xy")
    + s16("m2") + s16(None) + s16("c2") + s16("/h2") + struct.pack(">ii", 60000, 45000)
    + b32(b"") + b32(b""))


def test_group_metadata_value_v3_bytes():
    assert encode_group_value(GROUP) == GROUP_V3
    assert decode_group_value("g1", GROUP_V3) == GROUP


def test_empty_group_value_has_null_protocol_and_leader():
    empty = GroupRecord("g", "consumer", 4, None, None, TS, [])
    data = encode_group_value(empty)
    assert data == (b"\x00\x03" + s16("consumer") + struct.pack(">i", 4) + s16(None)
                    + s16(None) + struct.pack(">q", TS) + struct.pack(">i", 0))
    assert decode_group_value("g", data) == empty


def test_group_metadata_value_v4_round_trip_and_layout():
    # flexible: compact strings/bytes/arrays are uvarint(len + 1) (0 = null),
    # every struct ends in a tag buffer (0 = no tags)
    expected = (
        b"\x00\x04" + b"\x09consumer" + struct.pack(">i", 3) + b"\x06range" + b"\x05lead"
        + struct.pack(">q", TS) + b"\x03"
        + b"\x05lead" + b"\x03i1" + b"\x04cli" + b"\x06/host" + struct.pack(">ii", 30000, 10000)
        + b"\x04abc" + b"\x03xy" + b"\x00"
        + b"\x03m2" + b"\x00" + b"\x03c2" + b"\x04/h2" + struct.pack(">ii", 60000, 45000)
        + b"\x01" + b"\x01" + b"\x00"
        + b"\x00")
    data = encode_group_value(GROUP, version=4)
    assert data == expected
    assert decode_group_value("g1", data) == GROUP


def test_group_metadata_value_older_versions_decode():
    v0 = (b"\x00\x00" + s16("consumer") + struct.pack(">i", 1) + s16("range") + s16("m")
          + struct.pack(">i", 1) + s16("m") + s16("c") + s16("h")
          + struct.pack(">i", 10000) + b32(b"s") + b32(b"a"))
    g = decode_group_value("g", v0)
    assert g.current_state_timestamp == -1
    assert g.members == [MemberRecord("m", None, "c", "h", 10000, 10000, b"s", b"a")]
    v2 = (b"\x00\x02" + s16("consumer") + struct.pack(">i", 1) + s16("range") + s16("m")
          + struct.pack(">q", TS) + struct.pack(">i", 1) + s16("m") + s16("c") + s16("h")
          + struct.pack(">ii", 20000, 10000) + b32(b"s") + b32(b"a"))
    g = decode_group_value("g", v2)
    assert g.current_state_timestamp == TS
    assert g.members == [MemberRecord("m", None, "c", "h", 20000, 10000, b"s", b"a")]


def test_truncated_values_raise_protocol_error():
    with pytest.raises(ProtocolError):
        decode_group_value("g", GROUP_V3[:-3])
    with pytest.raises(ProtocolError):
        decode_offset_value(b"\x00\x03\x00")
    with pytest.raises(ProtocolError):
        decode_offset_value(b"\x00\x09" + bytes(30))


def test_java_string_hashcode_and_partition_for():
    assert java_string_hashcode("") == 0
    assert java_string_hashcode("hello") == 99162322
    assert java_string_hashcode("testgroup") == -1172783827
    # a supplementary character counts as two UTF-16 units
    assert java_string_hashcode("\U0001F600") == 0xD83D * 31 + 0xDE00
    # Kafka: Utils.abs(hash) % partitions; abs, not "& 0x7fffffff" (which gives 21)
    assert partition_for("testgroup", 50) == 27
    assert partition_for("hello", 50) == 99162322 % 50
    # Integer.MIN_VALUE hashes map to 0
    assert java_string_hashcode("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0


def test_load_last_value_wins_and_tombstones_delete():
    recs = [
        (encode_offset_key("g", "t", 0), encode_offset_value(OffsetAndMetadata(1, -1, "", TS))),
        (encode_offset_key("g", "t", 0), encode_offset_value(OffsetAndMetadata(2, -1, "", TS))),
        (encode_offset_key("g", "t", 1), encode_offset_value(OffsetAndMetadata(5, -1, "", TS))),
        (encode_offset_key("g", "t", 1), None),
        (encode_offset_key("h", "t", 0), encode_offset_value(OffsetAndMetadata(7, -1, "", TS))),
        (encode_offset_key("h", "t", 0), None),
        (encode_group_key("g1"), encode_group_value(GROUP)),
        (encode_group_key("dead"), encode_group_value(GroupRecord("dead", "", 1, None, None))),
        (encode_group_key("dead"), None),
        (b"\x00\x05\x00\x01x", b"something else entirely"),  # not ours
        (encode_offset_key("g", "bad", 0), b"\x00\x03\x00"),  # undecodable: skipped
    ]
    store = ConsumerOffsetsLog(lambda p, e: None, lambda: recs)
    offsets, groups, _ = store.replay()
    assert offsets == {"g": {("t", 0): OffsetAndMetadata(2, -1, "", TS)}}
    assert groups == {"g1": GROUP}


async def test_store_writes_to_the_groups_partition():
    written = []
    store = ConsumerOffsetsLog(lambda p, e: written.append((p, e)), lambda: [], num_partitions=50)
    await store.store_offsets("testgroup", {("t", 0): OffsetAndMetadata(1, -1, "", TS)})
    await store.store_group(GroupRecord("testgroup", "consumer", 1, None, None, TS))
    await store.delete_offsets("testgroup", [("t", 0)])
    await store.delete_group("testgroup", [("t", 1)])
    assert [p for p, _ in written] == [27] * 4
    assert written[2][1] == [(encode_offset_key("testgroup", "t", 0), None)]
    assert written[3][1] == [(encode_offset_key("testgroup", "t", 1), None),
                             (encode_group_key("testgroup"), None)]


def test_subscription_topics():
    assert subscription_topics(encode_subscription(["a", "bb"], b"user")) == ["a", "bb"]
    assert subscription_topics(encode_subscription([])) == []
    # a v1 subscription: topics, user data, then owned partitions (ignored)
    v1 = (struct.pack(">hi", 1, 1) + s16("orders") + struct.pack(">i", -1)
          + struct.pack(">i", 1) + s16("orders") + struct.pack(">ii", 1, 0))
    assert subscription_topics(v1) == ["orders"]
    for bad in (b"", b"\x00\x00\x00\x00\x00\x05", b"\x00\x00\x00\x00\x00\x01\x00\x09ab"):
        with pytest.raises(ProtocolError):
            subscription_topics(bad)


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=120))
def test_decoders_reject_garbage_only_with_protocol_error(data):
    # a corrupt record must be skippable on load, never crash the coordinator
    for fn in (decode_key, decode_offset_value, lambda d: decode_group_value("g", d),
               subscription_topics):
        try:
            fn(data)
        except ProtocolError:
            pass


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=20), st.text(min_size=1, max_size=20), st.integers(0, 2**31 - 1),
       st.integers(-1, 2**63 - 1), st.integers(-1, 2**31 - 1), st.text(max_size=30))
def test_offset_records_round_trip(group, topic, partition, offset, epoch, metadata):
    assert decode_key(encode_offset_key(group, topic, partition)) == OffsetKey(group, topic, partition)
    om = OffsetAndMetadata(offset, epoch, metadata, TS)
    assert decode_offset_value(encode_offset_value(om)) == om


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([GROUP_V3, encode_group_value(GROUP, version=4),
                        encode_offset_value(OffsetAndMetadata(1, 2, "m", TS))]),
       st.integers(0, 200), st.integers(0, 255), st.integers(0, 200))
def test_mutated_records_fail_cleanly(data, pos, byte, cut):
    buf = bytearray(data)
    buf[pos % len(buf)] = byte
    buf = bytes(buf[:len(buf) - cut % len(buf)])
    for fn in (decode_offset_value, lambda d: decode_group_value("g", d)):
        try:
            fn(buf)
        except ProtocolError:
            pass


def test_subscription_as_a_real_client_encodes_it():
    proto = pytest.importorskip("aiokafka.coordinator.protocol")
    sent = proto.ConsumerProtocolMemberMetadata(0, ["orders", "payments"], b"user").encode()
    assert subscription_topics(sent) == ["orders", "payments"]
    assert encode_subscription(["orders", "payments"], b"user") == sent
