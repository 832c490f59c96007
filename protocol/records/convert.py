"""Conversion between legacy message sets (magic 0/1) and v2 record batches.

Up-conversion serves old producers (Produce v0-2): the log only holds v2 batches.
Down-conversion serves old fetchers (Fetch v0-3), who cannot read v2.

Both keep keys, values and timestamps; headers do not exist before v2 and are
dropped going down, as Kafka does. Codecs are preserved (one v2 batch per
compressed wrapper, one wrapper per compressed batch); zstd cannot go below v2.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from samsa.protocol.model import Buf
from samsa.protocol.records.batch import (BATCH_OVERHEAD, CODEC_MASK, CONTROL_MASK, MIN_BATCH_LENGTH,
                                    TIMESTAMP_TYPE_MASK, peek_magic, read_batch_header)
from samsa.protocol.records.codecs import DEFAULT_MAX_OUTPUT, Codec
from samsa.protocol.records.errors import CorruptRecordError, UnsupportedCompressionError
from samsa.protocol.records.legacy import (KeyValueTimestamp, LegacyMessage, build_message_set,
                                     expand_wrapper, iter_message_set)
from samsa.protocol.records.records import Record, build_batch, decode_batch

_I32_MAX = (1 << 31) - 1


def upconvert_message_set(buf: Buf, *, keep_offsets: bool = False, strict: bool = True,
                          max_output: int = DEFAULT_MAX_OUTPUT) -> bytes:
    """Turn a v0/v1 message set into v2 batches.

    Each compressed wrapper becomes one batch with the same codec; each run of
    consecutive uncompressed messages (same magic and timestamp type) becomes one
    uncompressed batch. v0 messages get timestamp -1 (no timestamp); v1 keeps
    CreateTime timestamps, and a LogAppendTime wrapper/message becomes a
    LogAppendTime batch whose maxTimestamp is that time.

    Offsets: by default (a produce payload, whose client-set offsets mean
    nothing) batches get sequential offsets from 0, so the log only has to patch
    each base offset. With ``keep_offsets`` the messages' absolute offsets are
    kept (converting stored data). ``strict`` (default) rejects a truncated
    trailing entry; pass False for fetched/stored data that may end mid-entry.
    """
    out: list[bytes] = []
    run: list[LegacyMessage] = []           # pending uncompressed messages
    run_key: tuple[int, int] | None = None  # (magic, timestamp_type) of the run (None: no run)
    next_offset = 0

    def emit(msgs: list[LegacyMessage], codec: int, ts_type: int) -> None:
        nonlocal next_offset
        if keep_offsets:
            base = msgs[0].offset
            deltas: Sequence[int] = [m.offset - base for m in msgs]
            if any(d < 0 or d > _I32_MAX for d in deltas):
                raise CorruptRecordError("message offsets go backwards or span too far to batch")
        else:
            base = next_offset
            deltas = range(len(msgs))
        recs = [Record(d, 0, m.key, m.value, (), None, m.timestamp)
                for d, m in zip(deltas, msgs)]
        max_ts: int | None = None
        if ts_type == 1:
            max_ts = max(m.timestamp for m in msgs)
        out.append(build_batch(recs, base_offset=base, codec=codec, timestamp_type=ts_type,
                               max_timestamp=max_ts,
                               last_offset_delta=deltas[-1]))
        next_offset = base + deltas[-1] + 1

    def flush_run() -> None:
        nonlocal run, run_key
        if run_key is not None:  # (set exactly while run holds messages)
            emit(run, Codec.NONE, run_key[1] if run_key[1] >= 0 else 0)
        run = []
        run_key = None

    for m in iter_message_set(buf, strict=strict, verify_crc=True):
        if m.attributes & CODEC_MASK:
            flush_run()
            inner = expand_wrapper(m, max_output=max_output)
            ts_type = m.timestamp_type if m.magic >= 1 else 0
            emit(inner, m.attributes & CODEC_MASK, ts_type)
        else:
            key = (m.magic, m.timestamp_type)
            if run_key is not None and key != run_key:
                flush_run()
            run_key = key
            run.append(m)
    flush_run()
    return b"".join(out)


def downconvert_batches(buf: Buf, magic: int, *, max_output: int = DEFAULT_MAX_OUTPUT) -> bytes:
    """Turn v2 batches (e.g. a fetch response's records) into a magic 0/1
    message set, all of them (see ``downconvert_within``)."""
    return downconvert_within(buf, magic, None, max_output=max_output)[0]


def downconvert_within(buf: Buf, magic: int, budget: int | None, *, first_batch: bool = True,
                       max_output: int = DEFAULT_MAX_OUTPUT) -> tuple[bytes, int]:
    """Turn v2 batches (e.g. a fetch response's records) into a magic 0/1 message
    set: (the message set, bytes decoded for it).

    Absolute offsets are kept. An uncompressed batch becomes plain messages; a
    compressed batch becomes one wrapper with the same codec (zstd raises
    UnsupportedCompressionError: old clients cannot read it, Kafka answers
    UNSUPPORTED_COMPRESSION_TYPE). Control batches and empty batches are
    skipped. A partial trailing batch (a fetch cut at max_bytes) is ignored.
    Legacy entries already in the input are kept as they are when their magic
    is not above ``magic``, else rewritten.

    ``budget`` bounds the work: at most that many bytes are decoded
    (decompressed, or read as they are), beyond the first batch when
    ``first_batch`` (a fetcher must always get past a batch larger than its
    limits; ``max_output`` bounds that one). A later batch is decompressed
    with at most what is left, and one that does not fit ends the message set
    there, as a fetch limit does: the next fetch starts with it. None: no bound.
    """
    if magic not in (0, 1):
        raise ValueError(f"down-conversion target must be magic 0 or 1, not {magic}")
    out: list[bytes] = []
    decoded = 0
    mv = memoryview(buf)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    end = len(mv)
    pos = 0
    while end - pos >= 17:
        if budget is None or (first_batch and not out):
            limit = max_output
        else:
            limit = min(max_output, budget - decoded)
            if limit <= 0:
                break
        try:
            if peek_magic(mv, pos) >= 2:
                if end - pos < BATCH_OVERHEAD:
                    break  # incomplete trailing batch header
                hdr = read_batch_header(mv, pos)
                if hdr.batch_length < MIN_BATCH_LENGTH:
                    raise CorruptRecordError(f"batch length {hdr.batch_length} too small", pos)
                if pos + hdr.size > end:
                    break  # incomplete trailing batch
                if hdr.magic != 2:
                    raise CorruptRecordError(f"unsupported magic {hdr.magic}", pos)
                if hdr.attributes & CONTROL_MASK or hdr.records_count == 0:
                    pos += hdr.size
                    continue
                codec = hdr.attributes & CODEC_MASK
                if codec == Codec.ZSTD:
                    raise UnsupportedCompressionError(
                        f"zstd-compressed batch at offset {hdr.base_offset} cannot be "
                        f"down-converted to magic {magic}")
                if hdr.size > limit:
                    break
                _, recs = decode_batch(mv, pos, max_output=limit, header=hdr)
                base = hdr.base_offset
                size = max(hdr.size, _payload(recs))
                if size > limit:
                    break
                ts_type = 1 if hdr.attributes & TIMESTAMP_TYPE_MASK else 0
                converted = build_message_set(
                    [(r.key, r.value, r.timestamp) for r in recs], magic, codec,
                    timestamp_type=ts_type if magic else 0,
                    offsets=[base + r.offset_delta for r in recs],  # (r.offset, as decoded)
                    log_append_time=hdr.max_timestamp if ts_type else None)
                step = hdr.size
            else:
                m = next(iter_message_set(mv[pos:], strict=False), None)
                if m is None:
                    break
                step = m.size
                if m.magic <= magic:
                    size = m.size
                    if size > limit:
                        break
                    converted = bytes(mv[pos:pos + m.size])
                else:
                    inner = expand_wrapper(m, max_output=limit)
                    size = max(m.size, _payload(inner))
                    if size > limit:
                        break
                    converted = build_message_set(
                        [(i.key, i.value, i.timestamp) for i in inner], magic,
                        m.attributes & CODEC_MASK, offsets=[i.offset for i in inner])
        except CorruptRecordError:
            if limit < max_output:
                break  # perhaps only larger than what is left: the next fetch starts here
            raise
        out.append(converted)
        decoded += size
        pos += step
    return b"".join(out), decoded


def _payload(records: Iterable[KeyValueTimestamp]) -> int:
    """Bytes of keys and values: what decoding a batch or wrapper produced, near enough."""
    return sum(len(r.key or b"") + len(r.value or b"") for r in records)
