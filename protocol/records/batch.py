"""Record batch v2 (magic 2) headers: read, validate, and patch in place.

This is the produce hot path: the broker validates each incoming batch with
header fields, one CRC-32C pass and one walk over its records' framing (the C
walker of walker.py, which never copies a key or value), then the log patches
``baseOffset`` / ``partitionLeaderEpoch`` in place. Neither of those two fields
is covered by the CRC (it starts at ``attributes``), which is why Kafka put
them first and why patching them needs no CRC recomputation.

Layout (big-endian), 61 bytes before the records::

    0  baseOffset            i64
    8  batchLength           i32   bytes after this field (size = batchLength + 12)
    12 partitionLeaderEpoch  i32
    16 magic                 i8    2
    17 crc                   u32   CRC-32C of bytes [21, end of batch)
    21 attributes            i16   bits 0-2 codec, 3 LogAppendTime, 4 transactional,
                                   5 control, 6 delete horizon set
    23 lastOffsetDelta       i32
    27 baseTimestamp         i64
    35 maxTimestamp          i64
    43 producerId            i64
    51 producerEpoch         i16
    53 baseSequence          i32
    57 recordsCount          i32
    61 records...
"""
from __future__ import annotations

import struct
from typing import Iterable, Iterator, NamedTuple

from crc32c import crc32c as _crc32c

from samsa.protocol.errors import ProtocolError
from samsa.protocol.model import Buf
from samsa.protocol.records.codecs import iter_decompress
from samsa.protocol.records.errors import CorruptRecordError, InvalidRecordError
from samsa.protocol.records.walker import walk_prefix, walk_records

# -- layout constants ---------------------------------------------------------
HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
BATCH_OVERHEAD = HEADER_STRUCT.size  # 61: header bytes before the first record
assert BATCH_OVERHEAD == 61

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

LOG_OVERHEAD = 12  # baseOffset + batchLength: the part batchLength does not count
# Smallest legal batchLength: the header after the length field, zero records.
MIN_BATCH_LENGTH = BATCH_OVERHEAD - LOG_OVERHEAD  # 49

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

CREATE_TIME = 0
LOG_APPEND_TIME = 1

_unpack_from = HEADER_STRUCT.unpack_from
# BatchHeader from the 13 unpacked fields without _make's extra call and length check
# (the struct always yields exactly 13).
_tuple_new = tuple.__new__
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


class BatchHeader(NamedTuple):
    """The 61-byte v2 batch header, decoded. ``size`` is the whole batch in bytes."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def is_compressed(self) -> bool:
        return (self.attributes & CODEC_MASK) != 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def timestamp_type(self) -> int:
        """0 CreateTime, 1 LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; wraps at 2^31-1 to 0 like Kafka's."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0


class ValidatedBatch(NamedTuple):
    """A batch that passed ``validate_batches``: where it starts in the buffer, its header."""

    position: int
    header: BatchHeader


def read_batch_header(buf: Buf, pos: int = 0) -> BatchHeader:
    """Decode the v2 header at ``pos``. Does not check magic or CRC."""
    if pos < 0 or len(buf) - pos < BATCH_OVERHEAD:
        raise ProtocolError(
            f"record batch header needs {BATCH_OVERHEAD} bytes, "
            f"{max(0, len(buf) - pos)} available", pos)
    return _tuple_new(BatchHeader, _unpack_from(buf, pos))


def iter_batch_headers(buf: Buf, pos: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each complete batch; stop at a partial trailing one.

    Used on file contents and fetch responses, which may end mid-batch. A batch
    whose length field is below the minimum also ends the walk (it cannot be
    skipped reliably); callers that must tell it apart use ``validate_batches``.
    """
    end = len(buf)
    while end - pos >= BATCH_OVERHEAD:
        hdr = _tuple_new(BatchHeader, _unpack_from(buf, pos))
        size = hdr.batch_length + LOG_OVERHEAD
        if hdr.batch_length < MIN_BATCH_LENGTH or pos + size > end:
            return
        yield pos, hdr
        pos += size


def compute_crc(buf: Buf, pos: int = 0, size: int | None = None) -> int:
    """CRC-32C of the batch at ``pos`` (attributes to end), as stored in the header."""
    if size is None:
        (length,) = _I32.unpack_from(buf, pos + LENGTH_OFFSET)
        size = length + LOG_OVERHEAD
    with memoryview(buf) as mv:
        return _crc32c(mv[pos + ATTRIBUTES_OFFSET:pos + size])


def walk_batch_records(mv: memoryview, pos: int, end: int, attributes: int, count: int) -> None:
    """Check the framing of every record of the batch at mv[pos:end], as Kafka's
    LogValidator does for a producer's batch (see walker.py for the rules).

    The first fault is InvalidRecordError (INVALID_RECORD), Kafka's answer: its
    DefaultRecord.readFrom throws InvalidRecordException for such a record, and
    a producer fails the batch at once, where CORRUPT_MESSAGE is retriable (a
    Java producer would resend the same bytes until delivery.timeout.ms). A
    codec that cannot decompress the body stays CorruptRecordError, as in Kafka.

    A compressed batch's records are checked in its decompressed body, as
    Kafka does, piece by piece as the codec yields them (the log keeps the
    compressed bytes): a buffer of the whole body, allocated and freed for
    every batch, page-faulted its way through a running broker and cost more
    than the decompression.
    """
    codec = attributes & CODEC_MASK
    try:
        if not codec:
            walk_records(mv, pos + BATCH_OVERHEAD, end, count, True, None)
        else:
            walk_record_pieces(_codec_pieces(codec, mv[pos + BATCH_OVERHEAD:end]), count)
    except _UndecompressableBody as exc:
        raise CorruptRecordError(str(exc), pos) from None
    except CorruptRecordError as exc:
        where = "in the decompressed records: " if codec else ""
        raise InvalidRecordError(f"{where}{exc}", pos if codec else None) from None


class _UndecompressableBody(Exception):
    """The codec's own failure, told apart from a record-framing fault."""


def _codec_pieces(codec: int, data: Buf) -> Iterator[bytes]:
    pieces = iter_decompress(codec, data)
    while True:
        try:
            piece = next(pieces)
        except StopIteration:
            return
        except CorruptRecordError as exc:
            raise _UndecompressableBody(str(exc)) from None
        yield piece


def walk_record_pieces(pieces: Iterable[Buf], count: int) -> None:
    """``walk_records`` over the concatenation of ``pieces`` (bytes-like),
    without building it: only a record that spans pieces is copied."""
    walked = 0
    rest = bytearray()  # the start of a record that continues in the next piece
    for piece in pieces:
        if rest:
            rest += piece
            piece = rest
        at, n = walk_prefix(piece, 0, len(piece), count - walked, True, walked)
        walked += n
        if piece is rest:
            del rest[:at]
        else:
            rest += memoryview(piece)[at:]
    walk_records(rest, 0, len(rest), count - walked, True, None, walked)


def validate_single_batch(buf: Buf) -> BatchHeader | None:
    """Fast path of ``validate_batches(buf)`` for the common produce payload of
    exactly one batch: its header when it passes every check validate_batches
    makes (length, magic, CRC-32C, counts, records), else None, and the caller
    runs ``validate_batches`` for the verdict (another batch count, or the error
    to raise). Saves the per-call list, ValidatedBatch and memoryview context of
    the general walk, and decodes the header once. ``buf`` must be bytes,
    bytearray or a contiguous one-dimensional byte memoryview.
    """
    end = len(buf)
    if end < BATCH_OVERHEAD:
        return None
    f = _unpack_from(buf, 0)
    length = f[1]
    # f: base_offset, batch_length, epoch, magic, crc, attributes, last_offset_delta,
    #    base_ts, max_ts, producer_id, producer_epoch, base_sequence, records_count
    if length + LOG_OVERHEAD != end or length < MIN_BATCH_LENGTH or f[3] != 2:
        return None
    mv = buf if type(buf) is memoryview else memoryview(buf)
    if _crc32c(mv[ATTRIBUTES_OFFSET:]) != f[4]:
        return None
    count = f[12]
    if count <= 0 or f[6] != count - 1:
        return None
    attributes = f[5]
    if not (attributes & CODEC_MASK) and count * 7 > length - MIN_BATCH_LENGTH:
        return None
    try:
        walk_batch_records(mv, 0, end, attributes, count)
    except ProtocolError:
        return None
    return _tuple_new(BatchHeader, f)


def validate_batches(buf: Buf, *, check_counts: bool = True,
                     allow_trailing_partial: bool = False) -> list[ValidatedBatch]:
    """Check a buffer that must be an exact sequence of v2 batches; return their headers.

    Per batch: length field >= 49 and within the buffer, magic == 2, CRC-32C
    (CorruptRecordError for any of these); with ``check_counts`` (produce path,
    like Kafka's LogValidator) records_count > 0 and lastOffsetDelta ==
    records_count - 1 (InvalidRecordError), then the framing of every record
    (``walk_batch_records``: InvalidRecordError). Log recovery passes
    ``check_counts=False``: compaction legitimately leaves batches whose count
    is below lastOffsetDelta + 1, or even empty, on disk.
    ``allow_trailing_partial`` stops quietly at an incomplete last batch instead
    of raising (for reading files whose tail may be torn).

    An empty buffer yields an empty list; callers decide whether that is an error.
    """
    out: list[ValidatedBatch] = []
    end = len(buf)
    pos = 0
    with memoryview(buf) as mv:
        if mv.ndim != 1 or mv.itemsize != 1:
            mv = mv.cast("B")
        while pos < end:
            if end - pos < BATCH_OVERHEAD:
                if allow_trailing_partial:
                    break
                raise CorruptRecordError(
                    f"trailing {end - pos} bytes are shorter than a batch header", pos)
            hdr = _tuple_new(BatchHeader, _unpack_from(mv, pos))
            length = hdr.batch_length
            if length < MIN_BATCH_LENGTH:
                raise CorruptRecordError(
                    f"batch length {length} below minimum {MIN_BATCH_LENGTH}", pos)
            nxt = pos + length + LOG_OVERHEAD
            if nxt > end:
                if allow_trailing_partial:
                    break
                raise CorruptRecordError(
                    f"batch length {length} runs past the end of the buffer "
                    f"({end - pos - LOG_OVERHEAD} bytes left)", pos)
            if hdr.magic != 2:
                raise CorruptRecordError(f"unsupported magic {hdr.magic} in record batch", pos)
            crc = _crc32c(mv[pos + ATTRIBUTES_OFFSET:nxt])
            if crc != hdr.crc:
                raise CorruptRecordError(
                    f"batch CRC-32C mismatch: stored {hdr.crc:#010x}, computed {crc:#010x}", pos)
            if check_counts:
                count = hdr.records_count
                if count <= 0:
                    raise InvalidRecordError(f"batch has records count {count}", pos)
                if hdr.last_offset_delta != count - 1:
                    raise InvalidRecordError(
                        f"lastOffsetDelta {hdr.last_offset_delta} does not match "
                        f"records count {count}", pos)
                # Each record is at least 7 bytes (length varint + attributes +
                # 2 deltas + key/value lengths + header count, one byte each);
                # an uncompressed batch cannot hold more records than that allows.
                if not (hdr.attributes & CODEC_MASK) and count * 7 > length - MIN_BATCH_LENGTH:
                    raise InvalidRecordError(
                        f"records count {count} cannot fit in {length - MIN_BATCH_LENGTH} bytes",
                        pos)
                walk_batch_records(mv, pos, nxt, hdr.attributes, count)
            out.append(ValidatedBatch(pos, hdr))
            pos = nxt
    return out


# -- in-place patching --------------------------------------------------------

def set_base_offset(buf: bytearray, pos: int, offset: int) -> None:
    """Assign the batch's base offset (not covered by the CRC: no recompute)."""
    _I64.pack_into(buf, pos + BASE_OFFSET_OFFSET, offset)


def set_partition_leader_epoch(buf: bytearray, pos: int, epoch: int) -> None:
    """Stamp the leader epoch (not covered by the CRC: no recompute)."""
    _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_log_append_time(buf: bytearray, pos: int, ts: int) -> None:
    """Switch the batch to LogAppendTime at ``ts``, as Kafka's setMaxTimestamp does.

    Kafka rewrites only maxTimestamp and the timestamp-type attribute bit (the
    base timestamp and record deltas stay, readers substitute maxTimestamp for
    every record of a LogAppendTime batch), then recomputes the CRC-32C
    because both fields are covered by it. A no-op when already so stamped.
    """
    (attrs,) = _I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    (cur_max,) = _I64.unpack_from(buf, pos + MAX_TIMESTAMP_OFFSET)
    if attrs & TIMESTAMP_TYPE_MASK and cur_max == ts:
        return
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attrs | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, ts)
    _U32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos))


def write_crc(buf: bytearray, pos: int = 0) -> int:
    """Recompute and store the CRC of the batch at ``pos``; returns it."""
    crc = compute_crc(buf, pos)
    _U32.pack_into(buf, pos + CRC_OFFSET, crc)
    return crc


def peek_magic(buf: Buf, pos: int = 0) -> int:
    """The magic byte of the entry at ``pos`` (same place, 16, in v0/v1/v2 layouts).

    ProtocolError if the buffer is too short to hold it.
    """
    if len(buf) - pos < MAGIC_OFFSET + 1:
        raise ProtocolError("buffer too short to hold a magic byte", pos)
    return buf[pos + MAGIC_OFFSET]
