"""Kafka's own key/value formats for records of the internal topic `__consumer_offsets`.

Why Kafka's formats and not our own: the records land in a real partition log
that Kafka tooling (kafka-dump-log --offsets-decoder, kafka-console-consumer
with the offsets formatter) can read, and a future migration or a ZooKeeper
store can translate them without guessing.

Layouts (from Apache Kafka's group-coordinator message schemas):

Key = int16 version (selects the record type), then the key struct:
  versions 0 and 1: OffsetCommitKey   group string, topic string, partition int32
  version 2:        GroupMetadataKey  group string
  other versions belong to record types we do not produce (KIP-848 consumer
  groups, share groups...) and are skipped on load.

OffsetCommitValue = int16 version, then
  offset int64, [v3+ leader_epoch int32], metadata string, commit_timestamp int64,
  [v1 only: expire_timestamp int64]; v4 is flexible (compact string + tag buffer).
  We write v3, or v1 when an explicit expiry was requested (OffsetCommit v2-v4
  retention_time_ms), as Kafka does.

GroupMetadataValue = int16 version, then
  protocol_type string, generation int32, protocol nullable string,
  leader nullable string, [v2+ current_state_timestamp int64],
  members array of: member_id string, [v3+ group_instance_id nullable string],
  client_id string, client_host string, [v1+ rebalance_timeout int32],
  session_timeout int32, subscription bytes, assignment bytes.
  v4 is flexible. We write v3.

"string" = int16 length + UTF-8 (-1 = null); "bytes" = int32 length + data;
arrays = int32 count. Flexible versions use unsigned-varint length+1 and end
each struct with a tag buffer.

A None value is a tombstone: it deletes the key on load (and under compaction).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from samsa.protocol.errors import ProtocolError

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3


@dataclass(frozen=True)
class OffsetAndMetadata:
    """One committed offset. leader_epoch -1 = unknown; expire_timestamp None = use retention."""

    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int | None = None


@dataclass(frozen=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupRecord:
    """The persisted state of one classic group (what GroupMetadataValue holds)."""

    group_id: str
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberRecord] = field(default_factory=list)


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


# ---------------------------------------------------------------- writer


class _Writer:
    __slots__ = ("buf", "flexible")

    def __init__(self, flexible: bool = False):
        self.buf = bytearray()
        self.flexible = flexible

    def i16(self, v: int) -> None:
        self.buf += struct.pack(">h", v)

    def i32(self, v: int) -> None:
        self.buf += struct.pack(">i", v)

    def i64(self, v: int) -> None:
        self.buf += struct.pack(">q", v)

    def uvarint(self, v: int) -> None:
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)

    def string(self, s: str | None) -> None:
        if s is None:
            if self.flexible:
                self.uvarint(0)
            else:
                self.i16(-1)
            return
        data = s.encode("utf-8")
        if self.flexible:
            self.uvarint(len(data) + 1)
        else:
            if len(data) > 0x7FFF:
                raise ValueError("string longer than 32767 bytes")
            self.i16(len(data))
        self.buf += data

    def bytes_(self, b: bytes | None) -> None:
        if b is None:
            if self.flexible:
                self.uvarint(0)
            else:
                self.i32(-1)
            return
        if self.flexible:
            self.uvarint(len(b) + 1)
        else:
            self.i32(len(b))
        self.buf += b

    def array_len(self, n: int) -> None:
        if self.flexible:
            self.uvarint(n + 1)
        else:
            self.i32(n)

    def tags(self) -> None:
        if self.flexible:
            self.uvarint(0)


# ---------------------------------------------------------------- reader


class _Reader:
    __slots__ = ("buf", "pos", "flexible")

    def __init__(self, buf: bytes | memoryview, flexible: bool = False):
        self.buf = memoryview(buf)
        self.pos = 0
        self.flexible = flexible

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.buf):
            raise ProtocolError("truncated __consumer_offsets record", self.pos)
        v = self.buf[self.pos:self.pos + n]
        self.pos += n
        return v

    def i16(self) -> int:
        return struct.unpack(">h", self._take(2))[0]

    def i32(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def i64(self) -> int:
        return struct.unpack(">q", self._take(8))[0]

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self._take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise ProtocolError("varint too long", self.pos)

    def string(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.i16()
        if n < 0:
            return None
        try:
            return bytes(self._take(n)).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"bad UTF-8 in string: {e}", self.pos) from None

    def bytes_(self) -> bytes | None:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            return None
        return bytes(self._take(n))

    def array_len(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        return max(n, 0)

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())


# ---------------------------------------------------------------- keys


def encode_offset_key(group: str, topic: str, partition: int) -> bytes:
    w = _Writer()
    w.i16(OFFSET_COMMIT_KEY_VERSION)
    w.string(group)
    w.string(topic)
    w.i32(partition)
    return bytes(w.buf)


def encode_group_key(group: str) -> bytes:
    w = _Writer()
    w.i16(GROUP_METADATA_KEY_VERSION)
    w.string(group)
    return bytes(w.buf)


def decode_key(data: bytes | memoryview) -> OffsetKey | GroupKey | None:
    """The key's record type; None for record types this coordinator does not use."""
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        group, topic, partition = r.string(), r.string(), r.i32()
        if group is None or topic is None:
            raise ProtocolError("null group/topic in offset commit key")
        return OffsetKey(group, topic, partition)
    if version == 2:
        group = r.string()
        if group is None:
            raise ProtocolError("null group in group metadata key")
        return GroupKey(group)
    return None


# ---------------------------------------------------------------- offset values


def encode_offset_value(om: OffsetAndMetadata) -> bytes:
    w = _Writer()
    if om.expire_timestamp is not None:
        w.i16(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY)
        w.i64(om.offset)
        w.string(om.metadata or "")
        w.i64(om.commit_timestamp)
        w.i64(om.expire_timestamp)
    else:
        w.i16(OFFSET_COMMIT_VALUE_VERSION)
        w.i64(om.offset)
        w.i32(om.leader_epoch)
        w.string(om.metadata or "")
        w.i64(om.commit_timestamp)
    return bytes(w.buf)


def decode_offset_value(data: bytes | memoryview) -> OffsetAndMetadata:
    r = _Reader(data)
    version = r.i16()
    if version < 0 or version > 4:
        raise ProtocolError(f"unknown OffsetCommitValue version {version}")
    r.flexible = version >= 4
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.string() or ""
    commit_ts = r.i64()
    expire_ts = None
    if version == 1:
        expire_ts = r.i64()
        if expire_ts == -1:
            expire_ts = None
    r.skip_tags()
    return OffsetAndMetadata(offset, leader_epoch, metadata, commit_ts, expire_ts)


# ---------------------------------------------------------------- group values


def encode_group_value(g: GroupRecord, version: int = GROUP_METADATA_VALUE_VERSION) -> bytes:
    if version not in (3, 4):
        raise ValueError("we write GroupMetadataValue v3 or v4 only")
    w = _Writer(flexible=version >= 4)
    # the version prefix is always a plain int16
    w.buf += struct.pack(">h", version)
    w.string(g.protocol_type)
    w.i32(g.generation)
    w.string(g.protocol)
    w.string(g.leader)
    w.i64(g.current_state_timestamp)
    w.array_len(len(g.members))
    for m in g.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.i32(m.rebalance_timeout_ms)
        w.i32(m.session_timeout_ms)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.tags()
    w.tags()
    return bytes(w.buf)


def decode_group_value(group_id: str, data: bytes | memoryview) -> GroupRecord:
    r = _Reader(data)
    version = r.i16()
    if version < 0 or version > 4:
        raise ProtocolError(f"unknown GroupMetadataValue version {version}")
    r.flexible = version >= 4
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.string() or ""
        instance_id = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        rebalance_timeout = r.i32() if version >= 1 else None
        session_timeout = r.i32()
        if rebalance_timeout is None:
            rebalance_timeout = session_timeout  # v0: the two were one timeout
        subscription = r.bytes_() or b""
        assignment = r.bytes_() or b""
        r.skip_tags()
        members.append(MemberRecord(member_id, instance_id, client_id, client_host,
                                    rebalance_timeout, session_timeout, subscription, assignment))
    r.skip_tags()
    return GroupRecord(group_id, protocol_type, generation, protocol, leader, ts, members)


# ---------------------------------------------------------------- partitioning


def java_string_hashcode(s: str) -> int:
    """java.lang.String.hashCode(): s[0]*31^(n-1) + ... over UTF-16 code units, as int32."""
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    """The `__consumer_offsets` partition of a group, as Kafka computes it.

    Kafka: Utils.abs(groupId.hashCode) % offsets.topic.num.partitions, where
    Utils.abs(n) is Math.abs(n) except Integer.MIN_VALUE -> 0 (note: not
    n & 0x7fffffff, which gives a different partition for negative hashes).
    """
    h = java_string_hashcode(group_id)
    a = 0 if h == -(1 << 31) else abs(h)
    return a % num_partitions
