"""The record walker: the framing of every record in a v2 batch, checked as
Kafka's DefaultRecord.readFrom and LogValidator check it.

``walk_records(buf, pos, end, count, consecutive, fields[, first])`` walks ``count``
records that must fill ``buf[pos:end]`` exactly (uncompressed record bytes:
a batch's body after its 61-byte header, or what its codec decompressed to)
and raises CorruptRecordError naming the first fault and its byte position
(a producer's batch is answered INVALID_RECORD for it, as Kafka answers:
batch.walk_batch_records). Per record:

- length varint: at least 6 (the smallest record) and within ``end``;
- attributes (one byte, no bit defined), timestamp delta varlong, offset delta varint;
- with ``consecutive`` the offset delta is the record's index (Kafka's
  "incremental offsets": what every producer writes; compaction leaves gaps,
  so stored batches are read with ``consecutive=False``);
- key and value length varints: -1 (null) or within the record;
- header count >= 0 and at most half the bytes left (each header takes two
  length varints at least), each header key length >= 0 and value length
  -1 or more, both within the record;
- the fields use exactly the record's declared length;

then no bytes may follow the last record. Varints are strict (varint.py):
one longer than its type or running off the record is corrupt.

``first`` (default 0) is the index of the record at ``pos`` in its batch,
for the offset-delta rule and the messages; ``walk_prefix(buf, pos, end,
count, consecutive, first)`` walks the records of a batch's body that arrive
in pieces (decompressed ones): up to ``count`` records that lie wholly before
``end``, stopping quietly before one whose length varint or bytes continue
past it, and returns ``(position reached, records walked)``; the caller
walks the rest with ``walk_records`` once the last piece is in.

``fields``, when a list, receives for each record the tuple
``(offset_delta, timestamp_delta, key_pos, key_len, value_pos, value_len,
headers)``, positions absolute in ``buf`` and -1 lengths for null, with
``headers`` a tuple of ``(key_pos, key_len, value_pos, value_len)``: the
field offsets record decoders slice from, without a second parse.

The implementation is the C module ``_walker`` (built by setup.py; the
produce path walks every record, which in Python would cost more than the
rest of an append). This module holds its pure-Python twin, used when the C
module is not built or ``SAMSA_PURE_PYTHON_RECORDS=1`` asks for it; both
accept and refuse the same bytes with the same messages
(tests/protocol/test_walker.py).
"""
from __future__ import annotations

import logging
import os
from typing import Protocol, TypeAlias

from samsa.protocol.model import Buf
from samsa.protocol.records.errors import CorruptRecordError
from samsa.protocol.records.varint import decode_varint, decode_varlong

log = logging.getLogger(__name__)

# What ``fields`` receives per record (module docstring): offset delta, timestamp
# delta, key position and length, value position and length, and per header
# (key position, key length, value position, value length).
RecordFields: TypeAlias = tuple[int, int, int, int, int, int, tuple[tuple[int, int, int, int], ...]]


class WalkRecords(Protocol):
    """``walk_records``: the C function's signature (positional only) and the fallback's."""

    def __call__(self, buf: Buf, pos: int, end: int, count: int, consecutive: bool,
                 fields: list[RecordFields] | None, first: int = 0, /) -> None: ...


class WalkPrefix(Protocol):
    """``walk_prefix``: (position reached, records walked)."""

    def __call__(self, buf: Buf, pos: int, end: int, count: int, consecutive: bool,
                 first: int, /) -> tuple[int, int]: ...


def walk_records_py(buf: Buf, pos: int, end: int, count: int, consecutive: bool,
                    fields: list[RecordFields] | None, first: int = 0) -> None:
    """The pure-Python walker (see the module docstring)."""
    if pos < 0 or end > len(buf) or pos > end or first < 0:
        raise ValueError("pos/end outside the buffer")
    if count < 0 or count > (end - pos) // 7:
        raise CorruptRecordError(
            f"records count {count} cannot fit in {end - pos} bytes of records", pos)
    for i in range(first, first + count):
        start = pos
        length, pos = decode_varint(buf, pos, end)
        if length < 6 or length > end - pos:
            raise CorruptRecordError(f"record {i}: length {length} invalid or past the end", pos)
        rend = pos + length
        pos += 1  # attributes: no bit is defined for records
        ts_delta, pos = decode_varlong(buf, pos, rend)
        off_delta, pos = decode_varint(buf, pos, rend)
        klen, kpos = _nullable_length(buf, pos, rend, i, "key")
        pos = kpos + klen if klen > 0 else kpos
        vlen, vpos = _nullable_length(buf, pos, rend, i, "value")
        pos = vpos + vlen if vlen > 0 else vpos
        hcount, pos = decode_varint(buf, pos, rend)
        if hcount < 0 or hcount * 2 > rend - pos:
            raise CorruptRecordError(f"record {i}: invalid header count {hcount}", pos)
        headers: list[tuple[int, int, int, int]] = []
        for _ in range(hcount):
            hklen, pos = decode_varint(buf, pos, rend)
            if hklen < 0 or hklen > rend - pos:
                raise CorruptRecordError(f"record {i}: invalid header key length {hklen}", pos)
            hvlen, hvpos = _nullable_length(buf, pos + hklen, rend, i, "header value")
            headers.append((pos, hklen, hvpos, hvlen))
            pos = hvpos + hvlen if hvlen > 0 else hvpos
        if pos != rend:
            raise CorruptRecordError(f"record {i}: declared {length} bytes but its fields used "
                                     f"{length - (rend - pos)}", pos)
        if consecutive and off_delta != i:
            raise CorruptRecordError(
                f"record {i}: offset delta {off_delta}, expected {i}", start)
        if fields is not None:
            fields.append((off_delta, ts_delta, kpos, klen, vpos, vlen, tuple(headers)))
    if pos != end:
        raise CorruptRecordError(
            f"{end - pos} bytes left after the last of {first + count} records", pos)


def _nullable_length(buf: Buf, pos: int, rend: int, index: int, what: str) -> tuple[int, int]:
    """(length, position after it) of a key, value or header value: -1 (null)
    or bytes that end within the record."""
    n, pos = decode_varint(buf, pos, rend)
    if n < -1:
        raise CorruptRecordError(f"record {index}: invalid {what} length {n}", pos)
    if n > rend - pos:
        raise CorruptRecordError(f"record {index}: {what} length {n} past the end of the record",
                                 pos)
    return n, pos


def walk_prefix_py(buf: Buf, pos: int, end: int, count: int, consecutive: bool,
                   first: int) -> tuple[int, int]:
    """The pure-Python ``walk_prefix`` (see the module docstring)."""
    if pos < 0 or end > len(buf) or pos > end or first < 0:
        raise ValueError("pos/end outside the buffer")
    walked = 0
    while walked < count:
        # the length varint continues in the next piece
        if end - pos < 5 and all(b >= 0x80 for b in buf[pos:end]):
            break
        length, body = decode_varint(buf, pos, end)
        if length < 6:
            raise CorruptRecordError(
                f"record {first + walked}: length {length} invalid or past the end", body)
        if length > end - body:
            break  # so does the record
        walk_records_py(buf, pos, body + length, 1, consecutive, None, first + walked)
        pos = body + length
        walked += 1
    return pos, walked


def _select() -> tuple[WalkRecords, WalkPrefix, str | None]:
    if os.environ.get("SAMSA_PURE_PYTHON_RECORDS") == "1":
        return (walk_records_py, walk_prefix_py,
                "SAMSA_PURE_PYTHON_RECORDS=1: records are validated in Python (slower)")
    try:
        from samsa.protocol.records._walker import walk_prefix, walk_records
    except ImportError:
        return (walk_records_py, walk_prefix_py,
                "the compiled record walker (protocol/records/_walker.c) is not built: "
                "records are validated in Python, slower (pip install -e . builds it)")
    return walk_records, walk_prefix, None


# SLOWER: why the Python walker is in use (None: the compiled one is). The
# broker warns of it once as it starts (broker/server.py); a command-line
# tool, which validates little, says it only at debug level.
walk_records, walk_prefix, SLOWER = _select()
COMPILED = SLOWER is None
if SLOWER:
    log.debug("%s", SLOWER)
