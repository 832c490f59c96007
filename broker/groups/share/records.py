"""The records Kafka 4 writes to ``__consumer_offsets`` for a share group
(its group-coordinator record schemas), read and written here, so a share
group survives a restart or a coordinator move as Kafka's does: its members
and their assignments until their sessions run out (a loaded member gets a
fresh session), its epoch and share-partitions for good:

  10 ShareGroupMemberMetadata          group, member -> rack id (nullable), client id,
                                                        client host, [subscribed topic names]
  11 ShareGroupMetadata                group -> epoch, metadata hash
  12 ShareGroupTargetAssignmentMetadata group -> assignment epoch
  13 ShareGroupTargetAssignmentMember  group, member -> [topic id, [partitions]]
  14 ShareGroupCurrentMemberAssignment group, member -> member epoch, previous member epoch,
                                                        state (int8, 0 stable),
                                                        [topic id, [partitions]]
  15 ShareGroupStatePartitionMetadata  group -> initializing [topic id, name, [partitions], created],
                                                initialized  [topic id, name, [partitions], created],
                                                deleting     [topic id, name]

(Kafka 4.0's ShareGroupPartitionMetadata, type 9, the subscribed topics'
metadata, went with KIP-1101's metadata hash in 4.1, whose format type 11
follows: it is not written.) A member is one with a type 10 record; its
type 13 and 14 records go with it (tombstoned when it leaves).

("created": CreateTimestamp, when the topic was first added to the group's
share-partitions, in ms; Kafka 4.1+ writes it, and reads a value without it
wrongly, so it is always written.)

A key is the int16 record type, the group id and (10, 13, 14) the member
id (non-flexible); a value is
an int16 version (0) and the flexible struct (compact strings and arrays,
tag buffers). "Initialized" share-partitions have state at the share
coordinator (__share_group_state); "initializing" ones were assigned to a
member and may not have it yet (samsa starts a share-partition at its
leader's first fetch). Both are what DescribeShareGroupOffsets and a deletion
cover. The metadata hash (KIP-1101) is written as 0: samsa does not compare
topic metadata by hash (a Kafka reading it sees a changed hash and computes
the assignment again, which is what it does after a load anyway).
"""
from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from samsa.protocol.errors import ProtocolError

from ..consumer.records import _assignment, _read_assignment, _read_strings, _strings
from ..log_format import _Reader, _Writer

SHARE_GROUP_MEMBER_METADATA = 10
SHARE_GROUP_METADATA = 11
SHARE_GROUP_TARGET_ASSIGNMENT_METADATA = 12
SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER = 13
SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT = 14
SHARE_GROUP_STATE_PARTITION_METADATA = 15
RECORD_TYPES = frozenset(range(SHARE_GROUP_MEMBER_METADATA,
                               SHARE_GROUP_STATE_PARTITION_METADATA + 1))
MEMBER_TYPES = frozenset({SHARE_GROUP_MEMBER_METADATA, SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER,
                          SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT})
STABLE = 0  # Kafka's MemberState.STABLE: a share member is never anything else

# topic id -> (topic name, partitions)
TopicPartitions = dict[uuid.UUID, tuple[str, frozenset[int]]]
# topic id -> sorted partitions
Assignment = dict[uuid.UUID, list[int]]


@dataclass
class MemberImage:
    """A member as its records say: type 10's fields, and type 14's epochs
    and assigned partitions (type 13's target is the group's)."""
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed: list[str] = field(default_factory=list)
    epoch: int = 0
    previous_epoch: int = 0
    assigned: Assignment = field(default_factory=dict)


@dataclass
class ShareGroupImage:
    """What a share group's records say: its epoch and its share-partitions."""
    group_id: str
    epoch: int = 0
    initializing: TopicPartitions = field(default_factory=dict)
    initialized: TopicPartitions = field(default_factory=dict)
    deleting: dict[uuid.UUID, str] = field(default_factory=dict)
    # topic id -> when it was first added to initializing (ms): CreateTimestamp
    created_ms: dict[uuid.UUID, int] = field(default_factory=dict)
    assignment_epoch: int = 0
    members: dict[str, MemberImage] = field(default_factory=dict)
    # member id -> its target assignment
    targets: dict[str, Assignment] = field(default_factory=dict)


def record_type(key: bytes) -> int:
    return int(struct.unpack_from(">h", key)[0]) if len(key) >= 2 else -1


def key(kind: int, group_id: str, member_id: str | None = None) -> bytes:
    w = _Writer()
    w.i16(kind)
    w.string(group_id)
    if member_id is not None:
        w.string(member_id)
    return bytes(w.buf)


def decode_key(data: bytes) -> tuple[int, str]:
    """(record type, group id)."""
    kind, group, _ = decode_member_key(data)
    return kind, group


def decode_member_key(data: bytes) -> tuple[int, str, str | None]:
    """(record type, group id, member id: None but for types 10, 13, 14)."""
    r = _Reader(data)
    kind = r.i16()
    group = r.string()
    member = r.string() if kind in MEMBER_TYPES else None
    if group is None or (kind in MEMBER_TYPES and member is None):
        raise ProtocolError(f"null id in share group record key of type {kind}")
    return kind, group, member


def _value() -> _Writer:
    w = _Writer(flexible=True)
    w.i16(0)
    return w


def metadata_value(epoch: int) -> bytes:
    w = _value()
    w.i32(epoch)
    w.i64(0)  # MetadataHash (see above)
    w.tags()
    return bytes(w.buf)


def member_metadata_value(m: MemberImage) -> bytes:
    w = _value()
    w.string(m.rack_id)
    w.string(m.client_id)
    w.string(m.client_host)
    _strings(w, m.subscribed)
    w.tags()
    return bytes(w.buf)


def target_metadata_value(assignment_epoch: int) -> bytes:
    w = _value()
    w.i32(assignment_epoch)
    w.tags()
    return bytes(w.buf)


def _partitions(a: Assignment) -> dict[uuid.UUID, set[int]]:
    return {t: set(parts) for t, parts in a.items()}


def target_member_value(target: Assignment) -> bytes:
    w = _value()
    _assignment(w, _partitions(target))
    w.tags()
    return bytes(w.buf)


def current_assignment_value(m: MemberImage) -> bytes:
    w = _value()
    w.i32(m.epoch)
    w.i32(m.previous_epoch)
    w.buf.append(STABLE)  # State, int8
    _assignment(w, _partitions(m.assigned))
    w.tags()
    return bytes(w.buf)


def _topics(w: _Writer, topics: Mapping[uuid.UUID, tuple[str, frozenset[int]]],
            created_ms: Mapping[uuid.UUID, int]) -> None:
    ids = sorted((t for t in topics if topics[t][1]), key=str)
    w.array_len(len(ids))
    for t in ids:
        name, parts = topics[t]
        w.buf += t.bytes
        w.string(name)
        w.array_len(len(parts))
        for p in sorted(parts):
            w.i32(p)
        w.i64(created_ms.get(t, 0))
        w.tags()


def state_partitions_value(initializing: Mapping[uuid.UUID, tuple[str, frozenset[int]]],
                           initialized: Mapping[uuid.UUID, tuple[str, frozenset[int]]],
                           deleting: Mapping[uuid.UUID, str],
                           created_ms: Mapping[uuid.UUID, int]) -> bytes:
    w = _value()
    _topics(w, initializing, created_ms)
    _topics(w, initialized, created_ms)
    w.array_len(len(deleting))
    for t in sorted(deleting, key=str):
        w.buf += t.bytes
        w.string(deleting[t])
        w.tags()
    w.tags()
    return bytes(w.buf)


def encode(image: ShareGroupImage) -> dict[bytes, bytes]:
    """The group's records (key -> value)."""
    gid = image.group_id
    out = {key(SHARE_GROUP_METADATA, gid): metadata_value(image.epoch),
           key(SHARE_GROUP_STATE_PARTITION_METADATA, gid): state_partitions_value(
               image.initializing, image.initialized, image.deleting, image.created_ms)}
    if image.members or image.assignment_epoch:
        out[key(SHARE_GROUP_TARGET_ASSIGNMENT_METADATA, gid)] = target_metadata_value(
            image.assignment_epoch)
    for mid, member in sorted(image.members.items()):
        out[key(SHARE_GROUP_MEMBER_METADATA, gid, mid)] = member_metadata_value(member)
        out[key(SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER, gid, mid)] = target_member_value(
            image.targets.get(mid, {}))
        out[key(SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT, gid, mid)] = (
            current_assignment_value(member))
    return out


def _sorted(a: Mapping[uuid.UUID, set[int]]) -> Assignment:
    return {t: sorted(parts) for t, parts in a.items()}


def _read_topics(r: _Reader, created_ms: dict[uuid.UUID, int]) -> TopicPartitions:
    out: TopicPartitions = {}
    for _ in range(r.array_len()):
        t = uuid.UUID(bytes=bytes(r._take(16)))
        name = r.string() or ""
        out[t] = (name, frozenset(r.i32() for _ in range(r.array_len())))
        created_ms[t] = r.i64()
        r.skip_tags()
    return out


def decode(group_id: str, records: Mapping[bytes, bytes]) -> ShareGroupImage:
    """The group from its records as a load read them (the last value of each key)."""
    image = ShareGroupImage(group_id)
    # a member's current assignment, read before or after its metadata
    current: dict[str, tuple[int, int, Assignment]] = {}
    for k, v in records.items():
        kind, _, member_id = decode_member_key(k)
        r = _Reader(v, flexible=True)
        version = r.i16()
        if version != 0:
            raise ProtocolError(f"share group record type {kind}: value version {version}")
        if member_id is not None:
            if kind == SHARE_GROUP_MEMBER_METADATA:
                image.members[member_id] = MemberImage(
                    member_id, rack_id=r.string(), client_id=r.string() or "",
                    client_host=r.string() or "", subscribed=_read_strings(r))
            elif kind == SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER:
                image.targets[member_id] = _sorted(_read_assignment(r))
            else:
                epoch, previous = r.i32(), r.i32()
                r._take(1)  # State: stable
                current[member_id] = (epoch, previous, _sorted(_read_assignment(r)))
            r.skip_tags()
        elif kind == SHARE_GROUP_TARGET_ASSIGNMENT_METADATA:
            image.assignment_epoch = r.i32()
            r.skip_tags()
        elif kind == SHARE_GROUP_METADATA:
            image.epoch = r.i32()
            r.i64()  # MetadataHash
            r.skip_tags()
        elif kind == SHARE_GROUP_STATE_PARTITION_METADATA:
            image.initializing = _read_topics(r, image.created_ms)
            image.initialized = _read_topics(r, image.created_ms)
            for _ in range(r.array_len()):
                t = uuid.UUID(bytes=bytes(r._take(16)))
                image.deleting[t] = r.string() or ""
                r.skip_tags()
            r.skip_tags()
    for mid, (epoch, previous, assigned) in current.items():
        member = image.members.get(mid)
        if member is not None:
            member.epoch, member.previous_epoch, member.assigned = epoch, previous, assigned
    # a target with no member (its metadata tombstoned first) is no member's
    image.targets = {m: t for m, t in image.targets.items() if m in image.members}
    return image
