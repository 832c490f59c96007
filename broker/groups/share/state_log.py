"""Share-partitions' durable state in `__share_group_state`, in the record
format of Kafka's share coordinator (KIP-932), so a restart loses no
acknowledgement and re-delivers only what was handed out and not
acknowledged.

The share coordinator (coordinator.py, run by share_coordinator.py) writes
each change of a share-partition's state as a ShareSnapshot record (the
whole in-flight window: the start offset and the runs of
acknowledged/archived/available-with-a-delivery-count offsets, with the
state and leader epochs), keyed by (group, topic id, partition); the topic
is compacted, so the last snapshot per key is what is kept and what the
partition's next leader replays when it takes the partition up. Kafka's share
coordinator also writes ShareUpdate records (deltas between snapshots);
samsa writes only snapshots, which Kafka's format allows (a snapshot
supersedes every earlier record of its key), and reads ShareUpdate
records' keys as unknown (skipped).

Layout (Kafka's coordinator records: an int16 record type then the key's
fields, non-flexible; the value: an int16 version then flexible fields):

    key   ShareSnapshotKey (type 0): GroupId string, TopicId uuid, Partition int32
    value ShareSnapshotValue v0: SnapshotEpoch uint16, StateEpoch int32,
          LeaderEpoch int32, StartOffset int64,
          StateBatches [FirstOffset int64, LastOffset int64, DeliveryState int8,
                        DeliveryCount int16], tagged fields

The record goes to the partition Kafka's share coordinator picks:
abs(hashCode("group:topicId:partition")) % partitions.
"""
from __future__ import annotations

import logging
import struct
import uuid
from collections.abc import Iterable, Sequence

from samsa.protocol.messages.wire import read_uvarint, uvarint
from samsa.storage.checkpoints import topic_id_to_str

from ..log_format import partition_for
from .coordinator import ShareState
from .partition import StateBatch
from .service import ShareKey

log = logging.getLogger("broker.groups.share")

SHARE_STATE_TOPIC = "__share_group_state"
SNAPSHOT_KEY_TYPE = 0
UPDATE_KEY_TYPE = 1

_H = struct.Struct(">h")
_KEY_TAIL = struct.Struct(">16si")
_VALUE_HEAD = struct.Struct(">hHiiq")  # version, snapshot epoch, state epoch, leader epoch, start
_BATCH = struct.Struct(">qqbh")


def coordinator_key(key: ShareKey) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey: the topic id as Kafka prints
    it (base64url), so the key hashes to the partition Kafka would pick."""
    group, topic_id, partition = key
    return f"{group}:{topic_id_to_str(topic_id)}:{partition}"


def state_partition(key: ShareKey, num_partitions: int) -> int:
    return partition_for(coordinator_key(key), num_partitions)


def encode_key(key: ShareKey) -> bytes:
    group, topic_id, partition = key
    g = group.encode("utf-8")
    return (_H.pack(SNAPSHOT_KEY_TYPE) + _H.pack(len(g)) + g
            + _KEY_TAIL.pack(topic_id.bytes, partition))


def decode_key(data: bytes) -> ShareKey | None:
    """The key of a ShareSnapshot record; None for any other record type."""
    (kind,) = _H.unpack_from(data, 0)
    if kind != SNAPSHOT_KEY_TYPE:
        return None
    (n,) = _H.unpack_from(data, 2)
    group = data[4:4 + n].decode("utf-8")
    raw, partition = _KEY_TAIL.unpack_from(data, 4 + n)
    return group, uuid.UUID(bytes=raw), partition


def encode_value(snapshot_epoch: int, start_offset: int, batches: Sequence[StateBatch],
                 leader_epoch: int = 0, state_epoch: int = 0) -> bytes:
    out = [_VALUE_HEAD.pack(0, snapshot_epoch & 0xFFFF, state_epoch, leader_epoch, start_offset),
           uvarint(len(batches) + 1)]
    for b in batches:
        out.append(_BATCH.pack(b.first_offset, b.last_offset, b.state, b.delivery_count))
        out.append(b"\x00")  # the batch's tagged fields: none
    out.append(b"\x00")  # the value's tagged fields: none
    return b"".join(out)


def decode_value(data: bytes) -> tuple[int, int, list[StateBatch]]:
    """(snapshot epoch, start offset, state batches)."""
    _version, snapshot_epoch, _state_epoch, _leader_epoch, start = _VALUE_HEAD.unpack_from(data)
    pos = _VALUE_HEAD.size
    count, pos = read_uvarint(data, pos)
    batches = []
    for _ in range(max(0, count - 1)):
        first, last, state, delivered = _BATCH.unpack_from(data, pos)
        pos += _BATCH.size
        pos = _skip_tags(data, pos)
        batches.append(StateBatch(first, last, state, delivered))
    return snapshot_epoch, start, batches


def _skip_tags(data: bytes, pos: int) -> int:
    n, pos = read_uvarint(data, pos)
    for _ in range(n):
        _tag, pos = read_uvarint(data, pos)
        size, pos = read_uvarint(data, pos)
        pos += size
    return pos


def replay(records: Iterable[object]) -> dict[ShareKey, tuple[int, list[StateBatch]]]:
    """The last snapshot of every share-partition (a tombstone forgets it):
    (start offset, state batches)."""
    return {k: (s.start_offset, list(s.batches)) for k, s in replay_states(records).items()}


def decode_state(data: bytes) -> ShareState:
    """A ShareSnapshot value as the share coordinator keeps it."""
    _version, snapshot_epoch, state_epoch, leader_epoch, _start = _VALUE_HEAD.unpack_from(data)
    _epoch, start, batches = decode_value(data)
    return ShareState(state_epoch, leader_epoch, start, tuple(batches), snapshot_epoch)


def encode_state(state: ShareState) -> bytes:
    return encode_value(state.snapshot_epoch, state.start_offset, state.batches,
                        leader_epoch=state.leader_epoch, state_epoch=state.state_epoch)


def replay_states(records: Iterable[object]) -> dict[ShareKey, ShareState]:
    """The last snapshot of every share-partition in a state partition's
    log, whole (epochs included): what its coordinator serves once loaded."""
    state: dict[ShareKey, ShareState] = {}
    for rec in records:
        if not isinstance(rec, tuple):
            continue
        key_bytes, value = rec
        try:
            key = decode_key(key_bytes)
            if key is None:
                continue
            if value is None:
                state.pop(key, None)
                continue
            state[key] = decode_state(value)
        except (struct.error, UnicodeDecodeError, ValueError, IndexError) as e:
            log.warning("skipping an unreadable %s record: %s", SHARE_STATE_TOPIC, e)
    return state


def snapshot_record(key: ShareKey, state: ShareState | None) -> tuple[bytes, bytes | None]:
    """The (key, value) record of a share-partition's state; None: its tombstone."""
    return encode_key(key), None if state is None else encode_state(state)
