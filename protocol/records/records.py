"""Records inside v2 batches: decode (with decompression) and build.

Only the cold paths use this (conversion, compaction, dump-log, tests): produce
checks records' framing without decoding them (batch.py, walker.py) and fetch
moves batches as opaque bytes.

Record layout (all varints zigzag)::

    length varint | attributes i8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1 null) | key | valueLength varint (-1 null) | value |
    headerCount varint | (keyLength varint, key utf-8, valueLength varint (-1 null), value)*

Untrusted input: every length is checked against the bytes actually present
before it is used, counts never size an allocation, and decompression is bounded.
"""
from __future__ import annotations

import struct
from typing import Iterable, Iterator, NamedTuple, Sequence, TypeAlias

from samsa.protocol.model import Buf
from samsa.protocol.records import batch as _b
from samsa.protocol.records.batch import (BATCH_OVERHEAD, CODEC_MASK, CONTROL_MASK, LOG_OVERHEAD,
                                    NO_TIMESTAMP, TIMESTAMP_TYPE_MASK, TRANSACTIONAL_MASK,
                                    BatchHeader, iter_batch_headers, read_batch_header)
from samsa.protocol.records.codecs import DEFAULT_MAX_OUTPUT, Codec, compress, decompress
from samsa.protocol.records.errors import CorruptRecordError
from samsa.protocol.records.varint import encode_varint, encode_varlong
from samsa.protocol.records.walker import RecordFields, walk_records

# A header as build_batch takes it: key (str, or its UTF-8 bytes) and value (None: null).
HeaderInput: TypeAlias = "tuple[str | bytes, Buf | None]"


class Record(NamedTuple):
    """One record. Deltas are as stored; ``offset``/``timestamp`` are absolute when known.

    Decoded records carry both. When building, a Record's ``offset_delta`` is
    kept, and its ``timestamp`` (absolute) is used when not None, else
    ``base_timestamp + timestamp_delta``.
    For LogAppendTime batches ``timestamp`` is the batch's maxTimestamp, as
    Kafka's readers report it.
    """

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()
    offset: int | None = None
    timestamp: int | None = None

    def absolute_offset(self, base_offset: int) -> int:
        return base_offset + self.offset_delta

    def absolute_timestamp(self, base_timestamp: int) -> int:
        return base_timestamp + self.timestamp_delta


# -- decoding -----------------------------------------------------------------

def _decode_records(data: Buf, pos: int, end: int, count: int, base_offset: int,
                    base_ts: int, append_time: int | None) -> list[Record]:
    """Decode ``count`` records from data[pos:end]; the records must fill it exactly.

    The framing is the record walker's (walker.py, the same check produce
    makes): it hands back each field's position, and this only slices.
    Offset deltas may have gaps (compaction leaves them on disk).
    """
    fields: list[RecordFields] = []
    walk_records(data, pos, end, count, False, fields)
    out: list[Record] = []
    append = out.append
    for off_delta, ts_delta, kpos, klen, vpos, vlen, hfields in fields:
        headers: list[tuple[str, bytes | None]] = []
        for hkpos, hklen, hvpos, hvlen in hfields:
            try:
                hkey = bytes(data[hkpos:hkpos + hklen]).decode("utf-8")
            except UnicodeDecodeError:
                raise CorruptRecordError("header key is not valid UTF-8", hkpos) from None
            headers.append((hkey, bytes(data[hvpos:hvpos + hvlen]) if hvlen >= 0 else None))
        ts = append_time if append_time is not None else base_ts + ts_delta
        append(Record(off_delta, ts_delta,
                      bytes(data[kpos:kpos + klen]) if klen >= 0 else None,
                      bytes(data[vpos:vpos + vlen]) if vlen >= 0 else None,
                      headers, base_offset + off_delta, ts))
    return out


def decode_batch(buf: Buf, pos: int = 0, *, max_output: int = DEFAULT_MAX_OUTPUT,
                 header: BatchHeader | None = None) -> tuple[BatchHeader, list[Record]]:
    """Header and all records of the v2 batch at ``pos`` (decompressing if needed).

    Checks magic and that the batch lies within the buffer; CRC is the caller's
    business (validate_batches) since conversion paths read already-validated data.
    """
    hdr = header if header is not None else read_batch_header(buf, pos)
    if hdr.magic != 2:
        raise CorruptRecordError(f"not a v2 batch (magic {hdr.magic})", pos)
    if hdr.batch_length < BATCH_OVERHEAD - LOG_OVERHEAD or pos + hdr.size > len(buf):
        raise CorruptRecordError(f"batch length {hdr.batch_length} invalid or past the end", pos)
    end = pos + hdr.size
    append_time = hdr.max_timestamp if hdr.attributes & TIMESTAMP_TYPE_MASK else None
    codec = hdr.attributes & CODEC_MASK
    mv = memoryview(buf)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    if codec == 0:
        data: Buf = mv[pos + BATCH_OVERHEAD:end]
    else:
        data = decompress(codec, mv[pos + BATCH_OVERHEAD:end], max_output=max_output)
    records = _decode_records(data, 0, len(data), hdr.records_count, hdr.base_offset,
                              hdr.base_timestamp, append_time)
    return hdr, records


def iter_records(buf: Buf, pos: int = 0, *, max_output: int = DEFAULT_MAX_OUTPUT) -> Iterator[Record]:
    """Records of the v2 batch at ``pos`` with absolute offsets and timestamps."""
    return iter(decode_batch(buf, pos, max_output=max_output)[1])


def iter_all_records(buf: Buf, *, max_output: int = DEFAULT_MAX_OUTPUT
                     ) -> Iterator[tuple[BatchHeader, Record]]:
    """(header, record) for every complete v2 batch in ``buf`` (a partial tail is ignored)."""
    for pos, hdr in iter_batch_headers(buf):
        for rec in decode_batch(buf, pos, max_output=max_output, header=hdr)[1]:
            yield hdr, rec


# -- building -----------------------------------------------------------------

def _encode_bytes(b: Buf | None, out: bytearray) -> None:
    if b is None:
        out.append(1)  # zigzag(-1)
    else:
        encode_varint(len(b), out)
        out += b


def encode_record(out: bytearray, offset_delta: int, timestamp_delta: int, key: Buf | None,
                  value: Buf | None, headers: Sequence[HeaderInput]) -> None:
    """Append one record (with its length prefix) to ``out``."""
    body = bytearray(b"\x00")  # attributes
    encode_varlong(timestamp_delta, body)
    encode_varint(offset_delta, body)
    _encode_bytes(key, body)
    _encode_bytes(value, body)
    encode_varint(len(headers), body)
    for hk, hv in headers:
        if isinstance(hk, str):
            hk = hk.encode("utf-8")
        encode_varint(len(hk), body)
        body += hk
        _encode_bytes(hv, body)
    encode_varint(len(body), out)
    out += body


_HEADER = _b.HEADER_STRUCT

# What build_batch takes per record: a Record, or (key, value, headers or None, timestamp
# or None).
RecordInput: TypeAlias = "Record | tuple[Buf | None, Buf | None, Sequence[HeaderInput] | None, int | None]"


def build_batch(records: Iterable[RecordInput], base_offset: int = 0, codec: int = Codec.NONE,
                timestamp_type: int = 0, producer_id: int = -1, producer_epoch: int = -1,
                base_sequence: int = -1, partition_leader_epoch: int = -1,
                is_transactional: bool = False, is_control: bool = False, *,
                max_timestamp: int | None = None, base_timestamp: int | None = None,
                last_offset_delta: int | None = None) -> bytes:
    """Encode one v2 batch with a valid CRC-32C.

    ``records`` items: ``(key, value, headers, timestamp)`` tuples (offset delta =
    position in the list; timestamp None means -1, "no timestamp") or Record-like
    objects (their offset_delta is kept; see Record). Headers are (str|bytes, bytes|None).

    baseTimestamp is the first record's timestamp and maxTimestamp the largest, as
    Java's builder does; ``max_timestamp`` overrides the latter (LogAppendTime).
    ``last_offset_delta`` overrides the last record's delta (compaction keeps the
    original range even when trailing records are gone).
    """
    norm: list[tuple[int, int, Buf | None, Buf | None, Sequence[HeaderInput]]] = []
    for i, r in enumerate(records):
        if isinstance(r, Record):
            if r.timestamp is not None:
                ts = r.timestamp
            else:
                ts = (base_timestamp if base_timestamp is not None else 0) + r.timestamp_delta
            norm.append((r.offset_delta, ts, r.key, r.value, r.headers))
        else:
            key, value, headers, timestamp = r
            norm.append((i, NO_TIMESTAMP if timestamp is None else timestamp, key, value,
                         headers or ()))
    if norm:
        first_ts = norm[0][1] if base_timestamp is None else base_timestamp
        max_ts = max(n[1] for n in norm)
        lod = norm[-1][0] if last_offset_delta is None else last_offset_delta
    else:
        first_ts = NO_TIMESTAMP if base_timestamp is None else base_timestamp
        max_ts = NO_TIMESTAMP
        lod = 0 if last_offset_delta is None else last_offset_delta
    if max_timestamp is not None:
        max_ts = max_timestamp
    body = bytearray()
    for off_delta, ts, key, value, headers in norm:
        encode_record(body, off_delta, ts - first_ts, key, value, headers)
    codec = int(codec)
    records_bytes: Buf = compress(codec, body) if codec else body
    attrs = codec & CODEC_MASK
    if timestamp_type:
        attrs |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attrs |= TRANSACTIONAL_MASK
    if is_control:
        attrs |= CONTROL_MASK
    out = bytearray(BATCH_OVERHEAD)
    out += records_bytes
    _HEADER.pack_into(out, 0, base_offset, len(out) - LOG_OVERHEAD, partition_leader_epoch, 2, 0,
                      attrs, lod, first_ts, max_ts, producer_id, producer_epoch, base_sequence,
                      len(norm))
    _b.write_crc(out, 0)
    return bytes(out)


# -- control records (transaction markers) ------------------------------------

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
_CTRL_KEY = struct.Struct(">hh")
_CTRL_VALUE = struct.Struct(">hi")


def parse_control_record(key: Buf | None, value: Buf | None = None) -> tuple[int, int | None]:
    """(type, coordinator_epoch or None) of a control record; type 0 ABORT, 1 COMMIT."""
    if key is None or len(key) < 4:
        raise CorruptRecordError("control record key too short")
    _version, ctype = _CTRL_KEY.unpack_from(key, 0)
    epoch: int | None = None
    if value is not None and len(value) >= 6:
        epoch = _CTRL_VALUE.unpack_from(value, 0)[1]
    return ctype, epoch


def build_control_batch(control_type: int, producer_id: int, producer_epoch: int,
                        coordinator_epoch: int = 0, timestamp: int = NO_TIMESTAMP,
                        base_offset: int = 0, partition_leader_epoch: int = -1) -> bytes:
    """An end-transaction marker batch (COMMIT 1 / ABORT 0), as a transaction coordinator writes."""
    rec = (_CTRL_KEY.pack(0, control_type), _CTRL_VALUE.pack(0, coordinator_epoch), (), timestamp)
    return build_batch([rec], base_offset=base_offset, producer_id=producer_id,
                       producer_epoch=producer_epoch, base_sequence=-1,
                       partition_leader_epoch=partition_leader_epoch,
                       is_transactional=True, is_control=True)
