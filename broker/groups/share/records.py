"""The records Kafka 4 writes to ``__consumer_offsets`` for a share group that
outlive its members (its group-coordinator record schemas), read and written
here, so a share group with no members survives a restart or a coordinator
move as Kafka's does:

  11 ShareGroupMetadata                group -> epoch, metadata hash
  15 ShareGroupStatePartitionMetadata  group -> initializing [topic id, name, [partitions], created],
                                                initialized  [topic id, name, [partitions], created],
                                                deleting     [topic id, name]

("created": CreateTimestamp, when the topic was first added to the group's
share-partitions, in ms; Kafka 4.1+ writes it, and reads a value without it
wrongly, so it is always written.)

A key is the int16 record type and the group id (non-flexible); a value is
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

from ..log_format import _Reader, _Writer

SHARE_GROUP_METADATA = 11
SHARE_GROUP_STATE_PARTITION_METADATA = 15
RECORD_TYPES = frozenset({SHARE_GROUP_METADATA, SHARE_GROUP_STATE_PARTITION_METADATA})

# topic id -> (topic name, partitions)
TopicPartitions = dict[uuid.UUID, tuple[str, frozenset[int]]]


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


def record_type(key: bytes) -> int:
    return int(struct.unpack_from(">h", key)[0]) if len(key) >= 2 else -1


def key(kind: int, group_id: str) -> bytes:
    w = _Writer()
    w.i16(kind)
    w.string(group_id)
    return bytes(w.buf)


def decode_key(data: bytes) -> tuple[int, str]:
    """(record type, group id)."""
    r = _Reader(data)
    kind = r.i16()
    group = r.string()
    if group is None:
        raise ProtocolError(f"null group id in share group record key of type {kind}")
    return kind, group


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
    return {key(SHARE_GROUP_METADATA, gid): metadata_value(image.epoch),
            key(SHARE_GROUP_STATE_PARTITION_METADATA, gid): state_partitions_value(
                image.initializing, image.initialized, image.deleting, image.created_ms)}


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
    for k, v in records.items():
        kind = record_type(k)
        r = _Reader(v, flexible=True)
        version = r.i16()
        if version != 0:
            raise ProtocolError(f"share group record type {kind}: value version {version}")
        if kind == SHARE_GROUP_METADATA:
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
    return image
