"""Fetched record batches straight into the source's Arrow columns, no Python object per record.

``protocol.records.columns`` decodes one partition's Fetch bytes into plain buffers in Arrow's
layouts (its per-record loop in C, with a pure-Python twin); this wraps those buffers as the
arrays of ``arrow.ARROW_SCHEMA`` (keys and values binary over one data buffer each, nulls as
bitmaps, offsets and timestamps int64) without copying them. The header keys are checked to be
UTF-8 here (Arrow's string type), where an invalid one names its partition and offset.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa

from samsa.protocol.records.columns import (NO_END, PartitionDecodeError, PartitionDecoder,
                                            RecordColumns)

from .arrow import ARROW_SCHEMA, ARROW_SCHEMA_WITH_HEADERS, HEADER_TYPE, HEADERS_FIELD

_MS = pa.timestamp("ms", tz="UTC")
_US = pa.timestamp("us", tz="UTC")


def _buf(b: bytearray) -> pa.Buffer:
    return pa.py_buffer(b)


def columns_to_batch(cols: RecordColumns, topic: str, partition: int) -> pa.RecordBatch:
    """The RecordBatch of ``cols`` (which it takes over: decode no more into them)."""
    n = cols.rows
    arrays = [
        pa.Array.from_buffers(pa.binary(), n, [_buf(cols.key_valid), _buf(cols.key_offsets),
                                               _buf(cols.key_data)]),
        pa.Array.from_buffers(pa.binary(), n, [_buf(cols.value_valid), _buf(cols.value_offsets),
                                               _buf(cols.value_data)]),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.Array.from_buffers(pa.int64(), n, [None, _buf(cols.offsets)]),
        # Kafka's milliseconds to Spark's microseconds (the cast refuses an overflow)
        pa.Array.from_buffers(_MS, n, [None, _buf(cols.timestamps)]).cast(_US),
        pa.Array.from_buffers(pa.int32(), n, [None, _buf(cols.timestamp_types)]),
    ]
    if cols.with_headers:
        arrays.append(_headers(cols, topic, partition, n))
        schema = ARROW_SCHEMA_WITH_HEADERS
    else:
        schema = ARROW_SCHEMA
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _headers(cols: RecordColumns, topic: str, partition: int, n: int) -> pa.Array:
    count = len(cols.hkey_offsets) // 4 - 1
    keys = pa.Array.from_buffers(pa.string(), count, [None, _buf(cols.hkey_offsets),
                                                      _buf(cols.hkey_data)])
    try:
        keys.validate(full=True)
    except pa.ArrowInvalid:
        raise PartitionDecodeError(topic, partition, _bad_key_offset(cols, keys),
                                   "a header key is not valid UTF-8") from None
    values = pa.Array.from_buffers(pa.binary(), count, [_buf(cols.hvalue_valid),
                                                        _buf(cols.hvalue_offsets),
                                                        _buf(cols.hvalue_data)])
    entries = pa.StructArray.from_arrays([keys, values], fields=list(HEADER_TYPE))
    return pa.Array.from_buffers(HEADERS_FIELD.type, n, [_buf(cols.header_valid),
                                                         _buf(cols.header_offsets)],
                                 children=[entries])


def _bad_key_offset(cols: RecordColumns, keys: pa.Array) -> int:
    """The offset of the first record whose header key is not UTF-8 (only on that error)."""
    data, ends = bytes(cols.hkey_data), memoryview(cols.hkey_offsets).cast("i")
    header_ends = memoryview(cols.header_offsets).cast("i")
    offsets = memoryview(cols.offsets).cast("q")
    for h in range(len(keys)):
        try:
            data[ends[h]:ends[h + 1]].decode("utf-8")
        except UnicodeDecodeError:
            row = next(r for r in range(len(offsets)) if header_ends[r + 1] > h)
            return int(offsets[row])
    return int(offsets[0]) if len(offsets) else -1


def decode_to_batches(records: bytes | bytearray | memoryview, topic: str, partition: int,
                      fetch_offset: int, *, aborted: Iterable[tuple[int, int]] | None = None,
                      read_committed: bool = False, include_headers: bool = False,
                      end_offset: int = NO_END) -> tuple[pa.RecordBatch, int]:
    """One partition's records of one Fetch response as one RecordBatch, and the next
    offset to fetch (the convenience of the decoder and ``columns_to_batch`` together)."""
    decoder = PartitionDecoder(topic, partition, with_headers=include_headers,
                               read_committed=read_committed)
    nxt = decoder.decode(records, fetch_offset, aborted, end_offset)
    return columns_to_batch(decoder.take(), topic, partition), nxt
