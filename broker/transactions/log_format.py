"""Kafka's own key/value formats for records of `__transaction_state`.

Why Kafka's: the records land in a real compacted partition log that Kafka's
tooling (kafka-dump-log --transaction-log-decoder) reads, and a broker taking
the partition over after a failover loads them the same way.

Layouts (Apache Kafka's TransactionLogKey / TransactionLogValue schemas):

Key   = int16 version 0, transactional_id string.
Value = int16 version, then
  producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
  transaction_status int8, transaction_partitions nullable array of
  (topic string, partition_ids array of int32), last_update_timestamp_ms int64,
  start_timestamp_ms int64.
  Version 1 is the flexible form (compact strings and arrays, tag buffers;
  tagged fields 0 previous producer id, 1 next producer id, 2 client
  transaction version, each written only when not its default: -1, -1, 0).
  Kafka writes version 1 once the `transaction.version` feature is at level 1
  or more, version 0 below that; so do we, and we read both. Kafka's previous
  producer id is the id before the transition the record writes (so the
  record after a producer id rotation names the id it replaced).

The partitions array is null in the Empty state (Kafka writes it so) and the
value is null (a tombstone) once a transactional id has expired.
"""
from __future__ import annotations

import struct

from samsa.protocol.errors import ProtocolError

from .state import TxnMetadata, TxnState

KEY_VERSION = 0
VALUE_VERSION = 0
FLEXIBLE_VALUE_VERSION = 1

_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_VERSION = 2

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_VALUE_HEAD = struct.Struct(">qhib")     # producer id, epoch, timeout, status
_TIMES = struct.Struct(">qq")            # last update, start


def _string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(KEY_VERSION) + _string(transactional_id)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _compact_string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return _uvarint(len(raw) + 1) + raw


def encode_value(meta: TxnMetadata, version: int = VALUE_VERSION,
                 previous_producer_id: int | None = None) -> bytes:
    """``previous_producer_id``: the producer id before this transition (v1
    only; the record's own producer id when not given)."""
    flexible = version >= FLEXIBLE_VALUE_VERSION
    out = bytearray(_I16.pack(FLEXIBLE_VALUE_VERSION if flexible else VALUE_VERSION))
    out += _VALUE_HEAD.pack(meta.producer_id, meta.producer_epoch, meta.timeout_ms,
                            int(meta.state))
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(partition)
    empty = meta.state == TxnState.EMPTY
    if flexible:
        out += _uvarint(0 if empty else len(by_topic) + 1)
    else:
        out += _I32.pack(-1 if empty else len(by_topic))
    for topic, parts in ({} if empty else by_topic).items():
        if flexible:
            out += _compact_string(topic) + _uvarint(len(parts) + 1)
        else:
            out += _string(topic) + _I32.pack(len(parts))
        out += struct.pack(f">{len(parts)}i", *parts)
        if flexible:
            out += b"\x00"  # the partition entry's (empty) tag buffer
    out += _TIMES.pack(meta.update_ms, meta.start_ms)
    if flexible:
        previous = meta.producer_id if previous_producer_id is None else previous_producer_id
        tags: list[tuple[int, bytes]] = []
        if previous != -1:
            tags.append((_TAG_PREVIOUS_PRODUCER_ID, _I64.pack(previous)))
        if meta.next_producer_id != -1:
            tags.append((_TAG_NEXT_PRODUCER_ID, _I64.pack(meta.next_producer_id)))
        if meta.client_version != 0:
            tags.append((_TAG_CLIENT_VERSION, _I16.pack(meta.client_version)))
        out += _uvarint(len(tags))
        for tag, data in tags:
            out += _uvarint(tag) + _uvarint(len(data)) + data
    return bytes(out)


class _Reader:
    """Big-endian fields of one record; both the classic and the flexible forms."""

    def __init__(self, data: bytes, flexible: bool = False) -> None:
        self.data = data
        self.pos = 0
        self.flexible = flexible

    def take(self, st: struct.Struct) -> tuple:
        if self.pos + st.size > len(self.data):
            raise ProtocolError("transaction log record too short")
        out = st.unpack_from(self.data, self.pos)
        self.pos += st.size
        return out

    def varint(self) -> int:
        shift = value = 0
        while True:
            if self.pos >= len(self.data) or shift > 28:
                raise ProtocolError("bad varint in transaction log record")
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7

    def length(self, width: struct.Struct) -> int:
        """An array or string length; -1 for null."""
        if self.flexible:
            return self.varint() - 1
        return self.take(width)[0]

    def string(self) -> str:
        n = self.length(_I16)
        if n < 0 or self.pos + n > len(self.data):
            raise ProtocolError("bad string in transaction log record")
        s = self.data[self.pos:self.pos + n].decode("utf-8", "replace")
        self.pos += n
        return s

    def skip_tags(self) -> None:
        self.tags()

    def tags(self) -> dict[int, bytes]:
        """The tagged fields of a flexible struct (none for the classic form)."""
        found: dict[int, bytes] = {}
        if not self.flexible:
            return found
        for _ in range(self.varint()):
            tag = self.varint()
            size = self.varint()
            if self.pos + size > len(self.data):
                raise ProtocolError("bad tagged field in transaction log record")
            found[tag] = self.data[self.pos:self.pos + size]
            self.pos += size
        return found


def decode_key(data: bytes) -> str | None:
    """The transactional id, or None for a key version this broker does not know
    (skipped on load, as Kafka does)."""
    r = _Reader(data)
    (version,) = r.take(_I16)
    if version != KEY_VERSION:
        return None
    return r.string()


def decode_value(transactional_id: str, data: bytes) -> TxnMetadata:
    r = _Reader(data)
    (version,) = r.take(_I16)
    if version not in (0, 1):
        raise ProtocolError(f"unknown transaction log value version {version}")
    r.flexible = version >= 1
    producer_id, epoch, timeout_ms, status = r.take(_VALUE_HEAD)
    try:
        state = TxnState(status)
    except ValueError:
        raise ProtocolError(f"unknown transaction status {status}") from None
    partitions: set[tuple[str, int]] = set()
    count = r.length(_I32)
    for _ in range(max(count, 0)):
        topic = r.string()
        n = r.length(_I32)
        for _ in range(max(n, 0)):
            partitions.add((topic, r.take(_I32)[0]))
        r.skip_tags()
    update_ms, start_ms = r.take(_TIMES)
    tags = r.tags()
    if state == TxnState.EMPTY:
        partitions = set()  # Kafka ignores any it finds there
    previous, next_id, client_version = -1, -1, 0
    try:
        if _TAG_PREVIOUS_PRODUCER_ID in tags:
            (previous,) = _I64.unpack(tags[_TAG_PREVIOUS_PRODUCER_ID])
        if _TAG_NEXT_PRODUCER_ID in tags:
            (next_id,) = _I64.unpack(tags[_TAG_NEXT_PRODUCER_ID])
        if _TAG_CLIENT_VERSION in tags:
            (client_version,) = _I16.unpack(tags[_TAG_CLIENT_VERSION])
    except struct.error:
        raise ProtocolError("bad tagged field in transaction log record") from None
    return TxnMetadata(transactional_id=transactional_id, producer_id=producer_id,
                       producer_epoch=epoch, timeout_ms=timeout_ms, state=state,
                       partitions=frozenset(partitions), start_ms=start_ms,
                       update_ms=update_ms, last_producer_id=previous,
                       next_producer_id=next_id, client_version=client_version)
