"""The records Kafka 4 writes to ``__consumer_offsets`` for a consumer group
(its group-coordinator record schemas), read and written here.

A key is an int16 record type (what the older formats call the key version)
and the key struct (non-flexible); a value is an int16 version (0) and the
value struct, flexible (compact strings and arrays, tag buffers):

  3 ConsumerGroupMetadata                group          -> epoch
  4 ConsumerGroupPartitionMetadata       group          -> [topic id, name, partitions, []]
  5 ConsumerGroupMemberMetadata          group, member  -> instance id, rack id, client id,
                                                           client host, [topic names], regex,
                                                           rebalance timeout, server assignor,
                                                           tag 0: classic member metadata
  6 ConsumerGroupTargetAssignmentMetadata group         -> assignment epoch
  7 ConsumerGroupTargetAssignmentMember  group, member  -> [topic id, [partitions]]
  8 ConsumerGroupCurrentMemberAssignment group, member  -> member epoch, previous epoch, state,
                                                           assigned [..], pending revocation [..]

``encode_group`` renders a group's whole state as these records (key ->
value); the machine writes what differs from what it wrote before, and a
tombstone for a key that is gone. ``decode_group`` builds the group back
from the records a load read (the last value of each key).
"""
from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping

from samsa.protocol.errors import ProtocolError

from ..log_format import _Reader, _Writer
from .state import Assignment, ClassicMetadata, ConsumerGroup, ConsumerMember, MemberState

CLASSIC_MEMBER_METADATA_TAG = 0  # ConsumerGroupMemberMetadataValue's tagged field

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
RECORD_TYPES = frozenset(range(GROUP_METADATA, CURRENT_MEMBER_ASSIGNMENT + 1))
_MEMBER_TYPES = (MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT)


def record_type(key: bytes) -> int:
    return int(struct.unpack_from(">h", key)[0]) if len(key) >= 2 else -1


def key(kind: int, group_id: str, member_id: str | None = None) -> bytes:
    w = _Writer()
    w.i16(kind)
    w.string(group_id)
    if member_id is not None:
        w.string(member_id)
    return bytes(w.buf)


def decode_key(data: bytes) -> tuple[int, str, str | None]:
    """(record type, group id, member id or None)."""
    r = _Reader(data)
    kind = r.i16()
    group = r.string()
    member = r.string() if kind in _MEMBER_TYPES else None
    if group is None or (kind in _MEMBER_TYPES and member is None):
        raise ProtocolError(f"null id in consumer group record key of type {kind}")
    return kind, group, member


def _value() -> _Writer:
    w = _Writer(flexible=True)
    w.buf += struct.pack(">h", 0)
    return w


def _uuid(w: _Writer, u: uuid.UUID) -> None:
    w.buf += u.bytes


def _read_uuid(r: _Reader) -> uuid.UUID:
    return uuid.UUID(bytes=bytes(r._take(16)))


def _strings(w: _Writer, items: list[str]) -> None:
    w.array_len(len(items))
    for s in items:
        w.string(s)


def _read_strings(r: _Reader) -> list[str]:
    return [r.string() or "" for _ in range(r.array_len())]


def _assignment(w: _Writer, a: Mapping[uuid.UUID, set[int]]) -> None:
    topics = sorted((t for t in a if a[t]), key=str)
    w.array_len(len(topics))
    for t in topics:
        _uuid(w, t)
        parts = sorted(a[t])
        w.array_len(len(parts))
        for p in parts:
            w.i32(p)
        w.tags()


def _read_assignment(r: _Reader) -> Assignment:
    out: Assignment = {}
    for _ in range(r.array_len()):
        t = _read_uuid(r)
        out[t] = {r.i32() for _ in range(r.array_len())}
        r.skip_tags()
    return out


def _classic_tag(w: _Writer, classic: ClassicMetadata | None) -> None:
    """The member's tag buffer: ClassicMemberMetadata (tag 0: session
    timeout, supported protocols) for a member speaking the classic protocol,
    none for a consumer-protocol one."""
    if classic is None:
        w.tags()
        return
    inner = _Writer(flexible=True)
    inner.i32(classic.session_timeout_ms)
    inner.array_len(len(classic.protocols))
    for name, metadata in classic.protocols:
        inner.string(name)
        inner.bytes_(metadata)
        inner.tags()
    inner.tags()
    w.uvarint(1)
    w.uvarint(CLASSIC_MEMBER_METADATA_TAG)
    w.uvarint(len(inner.buf))
    w.buf += inner.buf


def _read_classic_tag(r: _Reader) -> ClassicMetadata | None:
    classic = None
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        data = bytes(r._take(size))
        if tag != CLASSIC_MEMBER_METADATA_TAG:
            continue
        inner = _Reader(data, flexible=True)
        session = inner.i32()
        protocols = []
        for _ in range(inner.array_len()):
            name = inner.string() or ""
            protocols.append((name, inner.bytes_() or b""))
            inner.skip_tags()
        classic = ClassicMetadata(session, protocols)
    return classic


def _open(data: bytes) -> _Reader:
    r = _Reader(data, flexible=True)
    version = struct.unpack(">h", bytes(r._take(2)))[0]
    if version != 0:
        raise ProtocolError(f"unknown consumer group record value version {version}")
    return r


# ---------------------------------------------------------------- the group as records


def encode_group(group: ConsumerGroup) -> dict[bytes, bytes]:
    gid = group.group_id
    out: dict[bytes, bytes] = {}
    w = _value()
    w.i32(group.group_epoch)
    w.tags()
    out[key(GROUP_METADATA, gid)] = bytes(w.buf)
    w = _value()
    w.array_len(len(group.subscription_image))
    for name in sorted(group.subscription_image):
        topic_id, count = group.subscription_image[name]
        _uuid(w, topic_id)
        w.string(name)
        w.i32(count)
        w.array_len(0)  # partition racks: samsa knows none
        w.tags()
    w.tags()
    out[key(PARTITION_METADATA, gid)] = bytes(w.buf)
    for m in group.members.values():
        w = _value()
        w.string(m.instance_id)
        w.string(m.rack_id)
        w.string(m.client_id)
        w.string(m.client_host)
        _strings(w, list(m.subscribed_topic_names))
        w.string(m.subscribed_topic_regex)
        w.i32(m.rebalance_timeout_ms)
        w.string(m.server_assignor)
        _classic_tag(w, m.classic)
        out[key(MEMBER_METADATA, gid, m.member_id)] = bytes(w.buf)
    for member_id, target in group.target.items():
        w = _value()
        _assignment(w, target)
        w.tags()
        out[key(TARGET_ASSIGNMENT_MEMBER, gid, member_id)] = bytes(w.buf)
    w = _value()
    w.i32(group.assignment_epoch)
    w.tags()
    out[key(TARGET_ASSIGNMENT_METADATA, gid)] = bytes(w.buf)
    for m in group.members.values():
        w = _value()
        w.i32(m.member_epoch)
        w.i32(m.previous_member_epoch)
        w.buf += struct.pack(">b", int(m.state))
        _assignment(w, m.assigned)
        _assignment(w, m.pending_revocation)
        w.tags()
        out[key(CURRENT_MEMBER_ASSIGNMENT, gid, m.member_id)] = bytes(w.buf)
    return out


def changes(group: ConsumerGroup) -> list[tuple[bytes, bytes | None]]:
    """What to write so the log says what the group is now: tombstones of the
    keys gone first, then the values that changed; ``group.persisted``
    is brought up to date."""
    now = {} if group.dead else encode_group(group)
    before = group.persisted
    gone: list[tuple[bytes, bytes | None]] = [(k, None) for k in before if k not in now]
    # a member's records go before the group's (as Kafka deletes them)
    gone.sort(key=lambda kv: record_type(kv[0]) not in _MEMBER_TYPES)
    changed: list[tuple[bytes, bytes | None]] = [(k, v) for k, v in now.items()
                                                 if before.get(k) != v]
    group.persisted = now
    return gone + changed


def decode_group(group_id: str, records: Mapping[bytes, bytes]) -> ConsumerGroup:
    """The group the records (the last value of each of its keys) describe."""
    group = ConsumerGroup(group_id)
    members: dict[str, ConsumerMember] = {}

    def member(member_id: str) -> ConsumerMember:
        if member_id not in members:
            members[member_id] = ConsumerMember(member_id)
        return members[member_id]

    current: set[str] = set()
    for k, v in records.items():
        kind, _, member_id = decode_key(k)
        r = _open(v)
        if kind == GROUP_METADATA:
            group.group_epoch = r.i32()
        elif kind == PARTITION_METADATA:
            for _ in range(r.array_len()):
                topic_id = _read_uuid(r)
                name = r.string() or ""
                count = r.i32()
                for _ in range(r.array_len()):
                    r.i32()
                    _read_strings(r)
                    r.skip_tags()
                r.skip_tags()
                group.subscription_image[name] = (topic_id, count)
        elif kind == MEMBER_METADATA and member_id is not None:
            m = member(member_id)
            m.instance_id = r.string()
            m.rack_id = r.string()
            m.client_id = r.string() or ""
            m.client_host = r.string() or ""
            m.subscribed_topic_names = _read_strings(r)
            m.subscribed_topic_regex = r.string()
            m.rebalance_timeout_ms = r.i32()
            m.server_assignor = r.string()
            m.classic = _read_classic_tag(r)
        elif kind == TARGET_ASSIGNMENT_MEMBER and member_id is not None:
            group.target[member_id] = _read_assignment(r)
        elif kind == TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch = r.i32()
        elif kind == CURRENT_MEMBER_ASSIGNMENT and member_id is not None:
            m = member(member_id)
            m.member_epoch = r.i32()
            m.previous_member_epoch = r.i32()
            state = struct.unpack(">b", bytes(r._take(1)))[0]
            m.state = MemberState(state) if state in MemberState._value2member_map_ \
                else MemberState.UNKNOWN
            m.assigned = _read_assignment(r)
            m.pending_revocation = _read_assignment(r)
            current.add(member_id)
    for member_id, m in members.items():
        group.add(m)
        group.hold(m, m.assigned)
        group.hold(m, m.pending_revocation)
    group.target = {mid: t for mid, t in group.target.items() if mid in members}
    group.persisted = dict(records)
    return group
