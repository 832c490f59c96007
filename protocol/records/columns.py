"""Fetched v2 record batches decoded into columns: plain buffers in Arrow's layouts.

A reader that hands records on column-wise (the Spark source, pipeline/fetch_arrow.py)
gets each field of every record appended to one buffer per column, with no Python
object per record; the caller wraps the buffers as Arrow arrays without copying them.
Pure: bytes in, bytearrays out (no pyarrow here).

``RecordColumns`` holds the buffers (little-endian, Arrow's layouts):

- key and value: int32 offsets (rows + 1), the data, a validity bitmap (bit clear: null);
- offsets and timestamps: int64 (timestamps in Kafka's milliseconds), timestamp types int32
  (0 CreateTime, 1 LogAppendTime);
- with headers: list offsets (rows + 1) into the headers and a validity bitmap (a record
  without headers is a null list, as Spark's Kafka source has it), then per header its
  key's offsets and bytes (UTF-8 is the Arrow wrapper's check) and its value's offsets,
  bytes and validity.

``decode_records(data, pos, end, count, base_offset, base_timestamp, max_timestamp,
timestamp_type, min_offset, end_offset, cols)`` appends the records of one batch body
(uncompressed) whose offsets lie in ``[min_offset, end_offset)`` and returns how many it
kept. The framing is checked exactly as the record walker checks it (walker.py,
``consecutive=False``: compaction leaves gaps), before anything is appended: a
CorruptRecordError leaves the columns as they were. The C module ``_columns`` (setup.py)
does the per-record work; ``decode_records_py`` is its twin, used when it is not built or
``SAMSA_PURE_PYTHON_RECORDS=1`` asks for it (one log line says so).

``next_fetch_offset(records, position)`` is where the Fetch after these records starts, as
``PartitionDecoder.decode`` will return it for them: after the last complete batch (its base
offset plus last offset delta, which compaction's gaps leave in place), or ``position`` when
there is none. It hops from batch header to batch header and reads no record, so a reader
sends its next Fetch before decoding these records, however many batches they hold. The walk
stops where the decoder stops or fails (a batch cut by the response's size limit, a length
below the minimum) or at an offset past int64; the decoder then says what is wrong. The C
module holds it too (``next_fetch_offset_py`` its twin).

``PartitionDecoder.decode`` is the batch level, as Kafka's consumer reads a fetched
partition (its CompletedFetch): complete batches only (a response may end inside one),
CRC-32C checked, every codec decompressed per batch, control batches skipped, under
read_committed the batches of aborted transactions skipped (the response's aborted
list, consumed up to each batch, and the abort markers), records before the fetch
offset skipped (a batch may start earlier). A fault raises PartitionDecodeError naming
the topic, partition and offset.
"""
from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable
from typing import NamedTuple, Protocol

from crc32c import crc32c as _crc32c

from samsa.protocol.model import Buf
from samsa.protocol.records.batch import (BATCH_OVERHEAD, CODEC_MASK, CONTROL_MASK,
                                          HEADER_STRUCT, LOG_OVERHEAD, MIN_BATCH_LENGTH,
                                          TIMESTAMP_TYPE_MASK, TRANSACTIONAL_MASK)
from samsa.protocol.records.codecs import DEFAULT_MAX_OUTPUT, decompress
from samsa.protocol.records.errors import CorruptRecordError
from samsa.protocol.records.walker import RecordFields, walk_records_py

log = logging.getLogger(__name__)

# The buffers of RecordColumns, in the order decode_records takes them (_columns.c's enum).
PLAIN_COLUMNS = ("key_offsets", "key_data", "key_valid", "value_offsets", "value_data",
                 "value_valid", "offsets", "timestamps", "timestamp_types")
HEADER_COLUMNS = ("header_offsets", "header_valid", "hkey_offsets", "hkey_data",
                  "hvalue_offsets", "hvalue_data", "hvalue_valid")
NO_END = (1 << 63) - 1

_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_ZERO32 = _I32.pack(0)


class RecordColumns:
    """The columns of the rows decoded so far (see the module docstring)."""

    key_offsets: bytearray
    key_data: bytearray
    key_valid: bytearray
    value_offsets: bytearray
    value_data: bytearray
    value_valid: bytearray
    offsets: bytearray
    timestamps: bytearray
    timestamp_types: bytearray
    header_offsets: bytearray
    header_valid: bytearray
    hkey_offsets: bytearray
    hkey_data: bytearray
    hvalue_offsets: bytearray
    hvalue_data: bytearray
    hvalue_valid: bytearray

    def __init__(self, with_headers: bool):
        self.with_headers = with_headers
        for name in PLAIN_COLUMNS + HEADER_COLUMNS:
            setattr(self, name, bytearray(_ZERO32) if name.endswith("_offsets") else bytearray())
        names = PLAIN_COLUMNS + HEADER_COLUMNS if with_headers else PLAIN_COLUMNS
        self.buffers: tuple[bytearray, ...] = tuple(getattr(self, n) for n in names)

    @property
    def rows(self) -> int:
        return len(self.offsets) // 8

    @property
    def data_bytes(self) -> int:
        """Bytes of keys, values and headers held (a column's data stays below 2 GiB)."""
        return max(len(self.key_data), len(self.value_data), len(self.hkey_data),
                   len(self.hvalue_data))


class DecodeRecords(Protocol):
    """``decode_records``: the C function's signature (positional only) and the twin's."""

    def __call__(self, data: Buf, pos: int, end: int, count: int, base_offset: int,
                 base_timestamp: int, max_timestamp: int, timestamp_type: int, min_offset: int,
                 end_offset: int, cols: tuple[bytearray, ...], /) -> int: ...


def _wrap64(n: int) -> int:
    """n as a C int64 wraps it (the C decoder's base timestamp + delta)."""
    return ((n + (1 << 63)) & ((1 << 64) - 1)) - (1 << 63)


def _set_bit(bitmap: bytearray, bit: int) -> None:
    bitmap[bit >> 3] |= 1 << (bit & 7)


def _grow_bitmap(bitmap: bytearray, bits: int) -> None:
    want = (bits + 7) // 8
    if want > len(bitmap):
        bitmap += bytes(want - len(bitmap))


def decode_records_py(data: Buf, pos: int, end: int, count: int, base_offset: int,
                      base_timestamp: int, max_timestamp: int, timestamp_type: int,
                      min_offset: int, end_offset: int, cols: tuple[bytearray, ...]) -> int:
    """The pure-Python ``decode_records`` (see the module docstring)."""
    if len(cols) not in (len(PLAIN_COLUMNS), len(PLAIN_COLUMNS) + len(HEADER_COLUMNS)):
        raise TypeError("cols must be a tuple of 9 or 16 bytearrays")
    fields: list[RecordFields] = []
    walk_records_py(data, pos, end, count, False, fields)
    (key_off, key_data, key_valid, value_off, value_data, value_valid, offsets, stamps,
     types) = cols[:9]
    with_headers = len(cols) > 9
    kept = [f for f in fields if min_offset <= base_offset + f[0] < end_offset]
    sizes = [sum(max(f[3], 0) for f in kept), sum(max(f[5], 0) for f in kept)]
    if len(key_data) + sizes[0] > 0x7FFFFFFF or len(value_data) + sizes[1] > 0x7FFFFFFF:
        raise OverflowError("the columns would pass 2 GiB: take them before decoding more")
    row = len(offsets) // 8
    _grow_bitmap(key_valid, row + len(kept))
    _grow_bitmap(value_valid, row + len(kept))
    mv = memoryview(data)
    for off_delta, ts_delta, kpos, klen, vpos, vlen, headers in kept:
        if klen >= 0:
            key_data += mv[kpos:kpos + klen]
            _set_bit(key_valid, row)
        key_off += _I32.pack(len(key_data))
        if vlen >= 0:
            value_data += mv[vpos:vpos + vlen]
            _set_bit(value_valid, row)
        value_off += _I32.pack(len(value_data))
        offsets += _I64.pack(base_offset + off_delta)
        ts = max_timestamp if timestamp_type == 1 else _wrap64(base_timestamp + ts_delta)
        stamps += _I64.pack(ts)
        types += _I32.pack(timestamp_type)
        if with_headers:
            (header_off, header_valid, hkey_off, hkey_data, hvalue_off, hvalue_data,
             hvalue_valid) = cols[9:]
            _grow_bitmap(header_valid, row + 1)
            nheaders = len(hkey_off) // 4 - 1
            _grow_bitmap(hvalue_valid, nheaders + len(headers))
            for hkpos, hklen, hvpos, hvlen in headers:
                hkey_data += mv[hkpos:hkpos + hklen]
                hkey_off += _I32.pack(len(hkey_data))
                if hvlen >= 0:
                    hvalue_data += mv[hvpos:hvpos + hvlen]
                    _set_bit(hvalue_valid, nheaders)
                hvalue_off += _I32.pack(len(hvalue_data))
                nheaders += 1
            if headers:
                _set_bit(header_valid, row)
            header_off += _I32.pack(nheaders)
        row += 1
    if with_headers:
        _grow_bitmap(cols[10], row)
    return len(kept)


_FRAME = struct.Struct(">qi")  # a v2 batch's base offset and length
_LAST_DELTA = struct.Struct(">i")  # its last offset delta, at byte 23
_LAST_DELTA_AT = 23
_INT64_MAX = (1 << 63) - 1


def next_fetch_offset_py(records: Buf, position: int) -> int:
    """The pure-Python ``next_fetch_offset`` (see the module docstring)."""
    mv = memoryview(records)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    end, pos, following = len(mv), 0, position
    while end - pos >= BATCH_OVERHEAD:
        base, length = _FRAME.unpack_from(mv, pos)
        after = base + _LAST_DELTA.unpack_from(mv, pos + _LAST_DELTA_AT)[0] + 1
        if length < MIN_BATCH_LENGTH or length > end - pos - LOG_OVERHEAD or \
                not -_INT64_MAX - 1 <= after <= _INT64_MAX:
            break
        following = max(following, after)
        pos += LOG_OVERHEAD + length
    return following


class NextFetchOffset(Protocol):
    def __call__(self, records: Buf, position: int, /) -> int: ...


def _select() -> tuple[DecodeRecords, NextFetchOffset, str | None]:
    if os.environ.get("SAMSA_PURE_PYTHON_RECORDS") == "1":
        return (decode_records_py, next_fetch_offset_py,
                "SAMSA_PURE_PYTHON_RECORDS=1: records are decoded in Python")
    try:
        from samsa.protocol.records import _columns
    except ImportError:
        return decode_records_py, next_fetch_offset_py, (
            "the compiled record decoder (protocol/records/_columns.c) is not built: records "
            "are decoded into columns in Python, several times slower (pip install -e . "
            "builds it)")
    if not hasattr(_columns, "next_fetch_offset"):
        # (its records are decoded as this source would: only the walk is missing)
        log.warning("the compiled record decoder (protocol/records/_columns.c) was built from "
                    "an older source: the walk over batch headers runs in Python until it is "
                    "built again (pip install -e .)")
        return _columns.decode_records, next_fetch_offset_py, None
    return _columns.decode_records, _columns.next_fetch_offset, None


# SLOWER: why the Python twins are in use (None: the compiled decoder is).
decode_records, next_fetch_offset, SLOWER = _select()
COMPILED = SLOWER is None
if SLOWER:
    log.warning("%s", SLOWER)


# -- the batch level ------------------------------------------------------------------------

class PartitionDecodeError(CorruptRecordError):
    """Records of a fetched partition that cannot be decoded: which partition, from which
    offset (the batch's base offset, or the fetch offset when no batch could be read)."""

    def __init__(self, topic: str, partition: int, offset: int, reason: str):
        self.topic = topic
        self.partition = partition
        self.batch_offset = offset
        super().__init__(f"cannot decode the records of {topic}-{partition} at offset "
                         f"{offset}: {reason}")


class AbortedTransaction(NamedTuple):
    """A Fetch response's aborted transaction: its producer and first offset."""

    producer_id: int
    first_offset: int


_unpack_header = HEADER_STRUCT.unpack_from
_CONTROL_KEY = struct.Struct(">hh")
_ABORT = 0


class PartitionDecoder:
    """Decodes the records of one partition's Fetch responses into ``columns``.

    ``take()`` hands the columns over (the caller wraps their buffers) and starts new
    ones. ``decode`` returns the offset to fetch next: after the last complete batch.
    """

    def __init__(self, topic: str, partition: int, *, with_headers: bool = False,
                 read_committed: bool = False, check_crc: bool = True,
                 max_output: int = DEFAULT_MAX_OUTPUT,
                 decoder: DecodeRecords | None = None):
        self.topic = topic
        self.partition = partition
        self.with_headers = with_headers
        self.read_committed = read_committed
        self.check_crc = check_crc
        self.max_output = max_output
        self._decode = decoder if decoder is not None else decode_records
        self.columns = RecordColumns(with_headers)

    def take(self) -> RecordColumns:
        cols, self.columns = self.columns, RecordColumns(self.with_headers)
        return cols

    def _error(self, offset: int, reason: str) -> PartitionDecodeError:
        return PartitionDecodeError(self.topic, self.partition, offset, reason)

    def decode(self, records: Buf, fetch_offset: int,
               aborted: Iterable[tuple[int, int]] | None = None,
               end_offset: int = NO_END, *, max_rows: int | None = None) -> int:
        """Append the records of ``records`` (one partition's bytes of a Fetch response)
        from ``fetch_offset`` up to ``end_offset`` (exclusive); the next offset to fetch.

        ``aborted``: the response's aborted transactions, (producer id, first offset)
        pairs (read_committed only). ``max_rows``: stop after the batch that brings the
        columns to this many rows (the next offset says where to go on).
        """
        mv = memoryview(records)
        if mv.ndim != 1 or mv.itemsize != 1:
            mv = mv.cast("B")
        end = len(mv)
        pos = 0
        next_offset = fetch_offset
        pending = sorted(((int(first), int(pid)) for pid, first in aborted or ()), reverse=True)
        aborted_pids: set[int] = set()
        while end - pos >= BATCH_OVERHEAD:
            (base_offset, length, _epoch, magic, crc, attributes, last_delta, base_ts, max_ts,
             producer_id, _pe, _seq, count) = _unpack_header(mv, pos)
            if length < MIN_BATCH_LENGTH:
                raise self._error(base_offset, f"batch length {length} below minimum "
                                               f"{MIN_BATCH_LENGTH}")
            batch_end = pos + LOG_OVERHEAD + length
            if batch_end > end:
                break  # the response's size limit cut this batch: fetch it again from here
            if magic != 2:
                raise self._error(base_offset, f"message format v{magic} is not read here "
                                               "(only v2 record batches)")
            if self.check_crc:
                computed = _crc32c(mv[pos + 21:batch_end])
                if computed != crc:
                    raise self._error(base_offset, f"batch CRC-32C mismatch: stored {crc:#010x}, "
                                                   f"computed {computed:#010x}")
            last_offset = base_offset + last_delta
            batch_pos, pos = pos, batch_end
            next_offset = max(next_offset, last_offset + 1)
            if self.read_committed and producer_id >= 0:
                # Kafka's CompletedFetch: the aborted transactions that began by this
                # batch's end are live; an abort marker ends its producer's
                while pending and pending[-1][0] <= last_offset:
                    aborted_pids.add(pending.pop()[1])
                if attributes & CONTROL_MASK:
                    if self._is_abort_marker(mv, batch_pos, batch_end, attributes, count,
                                             base_offset):
                        aborted_pids.discard(producer_id)
                    continue
                if attributes & TRANSACTIONAL_MASK and producer_id in aborted_pids:
                    continue
            if attributes & CONTROL_MASK or last_offset < fetch_offset:
                continue  # (a batch wholly before the fetch offset: Kafka's leader may send it)
            codec = attributes & CODEC_MASK
            body: Buf
            try:
                if codec:
                    body = decompress(codec, mv[batch_pos + BATCH_OVERHEAD:batch_end],
                                      max_output=self.max_output)
                    start, stop = 0, len(body)
                else:
                    body, start, stop = mv, batch_pos + BATCH_OVERHEAD, batch_end
                if self.columns.data_bytes + (stop - start) > 0x7FFFFFFF:
                    return base_offset if base_offset >= fetch_offset else fetch_offset
                self._decode(body, start, stop, count, base_offset, base_ts, max_ts,
                             1 if attributes & TIMESTAMP_TYPE_MASK else 0,
                             fetch_offset, end_offset, self.columns.buffers)
            except CorruptRecordError as exc:
                raise self._error(base_offset, str(exc)) from None
            if max_rows is not None and self.columns.rows >= max_rows:
                break
            if next_offset >= end_offset:
                break
        return next_offset

    def _is_abort_marker(self, mv: memoryview, pos: int, end: int, attributes: int, count: int,
                         base_offset: int) -> bool:
        """Whether a control batch's first record is an ABORT marker."""
        if count < 1:
            return False
        body: Buf
        try:
            if attributes & CODEC_MASK:
                body = decompress(attributes & CODEC_MASK, mv[pos + BATCH_OVERHEAD:end],
                                  max_output=self.max_output)
                start, stop = 0, len(body)
            else:
                body, start, stop = mv, pos + BATCH_OVERHEAD, end
            fields: list[RecordFields] = []
            walk_records_py(body, start, stop, count, False, fields)
        except CorruptRecordError as exc:
            raise self._error(base_offset, f"control batch: {exc}") from None
        _od, _td, kpos, klen, _vp, _vl, _h = fields[0]
        if klen < 4:
            raise self._error(base_offset, "control record key too short")
        _version, ctype = _CONTROL_KEY.unpack_from(body, kpos)
        return bool(ctype == _ABORT)
