"""Legacy message sets, magic 0 (Kafka 0.8) and magic 1 (0.10, KIP-31/32).

Entry layout::

    offset i64 | size i32 | crc u32 | magic i8 | attributes i8 | [timestamp i64, v1] |
    key (i32 length, -1 null) | value (i32 length, -1 null)

``size`` counts everything after itself; the CRC is zlib's CRC32 over magic..value
(so the broker may rewrite offset and size freely). A compressed message is a
"wrapper" whose value is a whole compressed message set; nesting stops at one
level. The wrapper carries the offset of its last inner message. v0 inner
offsets are absolute; v1 inner offsets are relative, so
``absolute = wrapper offset - last inner relative + inner relative``.
v1 timestamps: CreateTime keeps each inner timestamp (the wrapper holds the max);
LogAppendTime makes every inner message read as the wrapper's timestamp.

Readers split a set by the size field and stop at an incomplete trailing entry
(fetch responses end mid-message) unless asked to be strict (produce payloads).
"""
from __future__ import annotations

import struct
import zlib
from typing import Iterable, Iterator, NamedTuple, Protocol, TypeAlias, cast

from samsa.protocol.model import Buf
from samsa.protocol.records.codecs import DEFAULT_MAX_OUTPUT, Codec, compress, decompress
from samsa.protocol.records.errors import CorruptRecordError, UnsupportedCompressionError

LOG_OVERHEAD = 12
_ENTRY = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_PREFIX = struct.Struct(">qiI")  # offset, size, crc
HEADER_SIZE_V0 = 4 + 1 + 1          # crc, magic, attributes (after offset+size)
HEADER_SIZE_V1 = HEADER_SIZE_V0 + 8  # + timestamp
MIN_SIZE_V0 = HEADER_SIZE_V0 + 8     # + key length + value length
MIN_SIZE_V1 = HEADER_SIZE_V1 + 8
CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
NO_TIMESTAMP = -1
NO_TIMESTAMP_TYPE = -1


class LegacyMessage(NamedTuple):
    """One message (top-level entry or inner message of a wrapper).

    For inner messages ``offset`` is absolute and ``timestamp``/``timestamp_type``
    are what a reader reports (the wrapper's under LogAppendTime). v0 messages
    have timestamp -1 and timestamp_type -1. ``position`` is the byte position of a
    top-level entry in its buffer (-1 for inner messages); ``size`` its full size.
    """

    offset: int
    magic: int
    attributes: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    crc: int
    position: int = -1
    size: int = 0

    @property
    def codec(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def is_wrapper(self) -> bool:
        return bool(self.attributes & CODEC_MASK)


def is_legacy(buf: Buf, pos: int = 0) -> bool:
    """True when the entry at ``pos`` is a magic 0/1 message (magic sits at byte 16 in all formats).

    False when the buffer is too short to tell: the v2 validator then reports it.
    """
    if len(buf) - pos < 17:
        return False
    return buf[pos + 16] in (0, 1)


def _read_bytes(buf: Buf, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    if end - pos < 4:
        raise CorruptRecordError(f"message {what} length runs past the end", pos)
    (n,) = _I32.unpack_from(buf, pos)
    pos += 4
    if n == -1:
        return None, pos
    if n < 0 or n > end - pos:
        raise CorruptRecordError(f"message {what} length {n} invalid or past the end", pos)
    return bytes(buf[pos:pos + n]), pos + n


def _parse_entry(buf: Buf, pos: int, end: int, verify_crc: bool) -> LegacyMessage:
    """Decode the complete entry at ``pos`` (caller checked pos+12+size <= end)."""
    offset, size, crc, magic, attrs = _ENTRY.unpack_from(buf, pos)
    if magic not in (0, 1):
        raise CorruptRecordError(f"unsupported magic {magic} in message set", pos)
    mend = pos + LOG_OVERHEAD + size
    if size < (MIN_SIZE_V1 if magic else MIN_SIZE_V0):
        raise CorruptRecordError(f"message size {size} below the minimum for magic {magic}", pos)
    if verify_crc:
        computed = zlib.crc32(memoryview(buf)[pos + 16:mend])
        if computed != crc:
            raise CorruptRecordError(
                f"message CRC32 mismatch: stored {crc:#010x}, computed {computed:#010x}", pos)
    p = pos + 18
    if magic:
        (ts,) = _I64.unpack_from(buf, p)
        p += 8
        ts_type = 1 if attrs & TIMESTAMP_TYPE_MASK else 0
    else:
        ts, ts_type = NO_TIMESTAMP, NO_TIMESTAMP_TYPE
    key, p = _read_bytes(buf, p, mend, "key")
    value, p = _read_bytes(buf, p, mend, "value")
    if p != mend:
        raise CorruptRecordError(f"{mend - p} unexpected bytes after the message value", p)
    return LegacyMessage(offset, magic, attrs, ts, ts_type, key, value, crc, pos, size + LOG_OVERHEAD)


def iter_message_set(buf: Buf, *, strict: bool = False, verify_crc: bool = True
                     ) -> Iterator[LegacyMessage]:
    """Top-level entries of a message set (wrappers are not expanded).

    Stops quietly at an incomplete trailing entry, or raises CorruptRecordError
    for one when ``strict`` (a produce payload must be whole).
    """
    mv = memoryview(buf)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    end = len(mv)
    pos = 0
    while pos < end:
        if end - pos < LOG_OVERHEAD:
            if strict:
                raise CorruptRecordError(f"trailing {end - pos} bytes are not a message", pos)
            return
        (size,) = _I32.unpack_from(mv, pos + 8)
        if size < MIN_SIZE_V0:
            raise CorruptRecordError(f"message size {size} below the minimum", pos)
        if size > end - pos - LOG_OVERHEAD:
            if strict:
                raise CorruptRecordError(f"message size {size} runs past the end", pos)
            return
        yield _parse_entry(mv, pos, end, verify_crc)
        pos += LOG_OVERHEAD + size


def expand_wrapper(msg: LegacyMessage, *, max_output: int = DEFAULT_MAX_OUTPUT,
                   verify_crc: bool = True) -> list[LegacyMessage]:
    """Inner messages of a compressed wrapper, with absolute offsets and reader timestamps.

    An uncompressed message expands to itself.
    """
    if not msg.attributes & CODEC_MASK:
        return [msg]
    codec = msg.attributes & CODEC_MASK
    if msg.value is None:
        raise CorruptRecordError("compressed message has a null value", msg.position)
    if codec >= Codec.ZSTD:
        # zstd came with magic 2 (KIP-110): Kafka answers UNSUPPORTED_COMPRESSION_TYPE
        # for it in v0/v1, as for codec ids it does not know.
        raise UnsupportedCompressionError(
            f"codec {codec} is not valid in a magic {msg.magic} message", msg.position)
    data = decompress(codec, msg.value, max_output=max_output)
    inner = list(iter_message_set(data, strict=True, verify_crc=verify_crc))
    if not inner:
        raise CorruptRecordError("compressed message holds no messages", msg.position)
    out: list[LegacyMessage] = []
    log_append = msg.magic >= 1 and msg.timestamp_type == 1
    shift = msg.offset - inner[-1].offset if msg.magic >= 1 else 0
    for m in inner:
        if m.attributes & CODEC_MASK:
            raise CorruptRecordError("nested compressed message", msg.position)
        if m.magic != msg.magic:
            raise CorruptRecordError(
                f"inner message magic {m.magic} differs from wrapper magic {msg.magic}",
                msg.position)
        ts, ts_type = m.timestamp, m.timestamp_type
        if msg.magic >= 1:
            ts_type = msg.timestamp_type
            if log_append:
                ts = msg.timestamp
        out.append(m._replace(offset=m.offset + shift, timestamp=ts, timestamp_type=ts_type,
                              position=-1))
    return out


def parse_message_set(buf: Buf, *, strict: bool = False, verify_crc: bool = True,
                      max_output: int = DEFAULT_MAX_OUTPUT) -> list[LegacyMessage]:
    """All messages of a set, wrappers expanded (what a consumer sees), in order."""
    out: list[LegacyMessage] = []
    for m in iter_message_set(buf, strict=strict, verify_crc=verify_crc):
        if m.attributes & CODEC_MASK:
            out.extend(expand_wrapper(m, max_output=max_output, verify_crc=verify_crc))
        else:
            out.append(m)
    return out


# -- building -----------------------------------------------------------------

def encode_message(offset: int, magic: int, attributes: int, timestamp: int, key: Buf | None,
                   value: Buf | None) -> bytes:
    """One entry (offset, size, crc, message) with its CRC32."""
    klen = -1 if key is None else len(key)
    vlen = -1 if value is None else len(value)
    body = bytearray()
    body.append(magic)
    body.append(attributes & 0xFF)
    if magic:
        body += _I64.pack(timestamp)
    body += _I32.pack(klen)
    if key is not None:
        body += key
    body += _I32.pack(vlen)
    if value is not None:
        body += value
    crc = zlib.crc32(body)
    return _PREFIX.pack(offset, len(body) + 4, crc) + bytes(body)


class KeyValueTimestamp(Protocol):
    """A record-like message to build from (a v2 Record, a LegacyMessage)."""

    @property
    def key(self) -> Buf | None: ...
    @property
    def value(self) -> Buf | None: ...
    @property
    def timestamp(self) -> int | None: ...


# What build_message_set takes per message (see there).
MessageInput: TypeAlias = ("tuple[Buf | None, Buf | None, int | None]"
                           " | tuple[Buf | None, Buf | None, object, int | None]"
                           " | KeyValueTimestamp")


def _norm(msg: MessageInput) -> tuple[Buf | None, Buf | None, int | None]:
    """(key, value, timestamp) from (key, value, ts), (key, value, headers, ts) or record-like."""
    if isinstance(msg, tuple) and not hasattr(msg, "_fields"):
        if len(msg) == 3:
            return msg[0], msg[1], msg[2]
        if len(msg) == 4:
            return msg[0], msg[1], msg[3]  # headers do not exist before magic 2
        raise ValueError("message tuples are (key, value, timestamp) or (key, value, headers, timestamp)")
    # the plain tuples returned above; a named tuple (Record, LegacyMessage) or another
    # object is read by name (mypy does not narrow on the hasattr test)
    rec = cast(KeyValueTimestamp, msg)
    return rec.key, rec.value, rec.timestamp


def build_message_set(messages: Iterable[MessageInput], magic: int, codec: int = Codec.NONE,
                      base_offset: int = 0, timestamp_type: int = 0, *,
                      offsets: list[int] | None = None,
                      log_append_time: int | None = None) -> bytes:
    """Encode a v0/v1 message set.

    ``messages``: (key, value, timestamp) or (key, value, headers, timestamp) tuples
    (headers are dropped: the format has none), or objects with key/value/timestamp.
    Offsets are ``base_offset + i`` unless ``offsets`` gives each absolute offset.
    With a codec the result is ONE wrapper (null key, value = compressed inner set)
    whose offset is the last inner offset; v1 inner offsets are written relative to
    the first, v0 inner offsets absolute, as Kafka does. v0 carries no timestamps.
    ``timestamp_type`` 1 (LogAppendTime, v1 only) stamps ``log_append_time`` (or
    the max timestamp if not given) on the wrapper and messages.
    """
    if magic not in (0, 1):
        raise ValueError(f"legacy magic must be 0 or 1, not {magic}")
    codec = int(codec)
    if codec == Codec.ZSTD:
        raise UnsupportedCompressionError(f"zstd cannot be used with magic {magic}")
    items = [_norm(m) for m in messages]
    n = len(items)
    if offsets is None:
        offs = list(range(base_offset, base_offset + n))
    else:
        offs = list(offsets)
        if len(offs) != n:
            raise ValueError("offsets and messages differ in length")
    if magic == 0:
        ts_list = [NO_TIMESTAMP] * n
        ts_bit = 0
    else:
        ts_list = [NO_TIMESTAMP if t is None else t for _, _, t in items]
        ts_bit = TIMESTAMP_TYPE_MASK if timestamp_type == 1 else 0
        if ts_bit:
            stamp = log_append_time if log_append_time is not None else max(ts_list, default=-1)
            ts_list = [stamp] * n
    if not codec:
        return b"".join(encode_message(offs[i], magic, ts_bit, ts_list[i], k, v)
                        for i, (k, v, _t) in enumerate(items))
    if n == 0:
        return b""
    first = offs[0]
    inner = b"".join(
        encode_message(offs[i] - first if magic else offs[i], magic, ts_bit, ts_list[i], k, v)
        for i, (k, v, _t) in enumerate(items))
    value = compress(codec, inner, magic=magic)
    wrapper_ts = max(ts_list) if magic else NO_TIMESTAMP
    return encode_message(offs[-1], magic, codec | ts_bit, wrapper_ts, None, value)


def validate_message_set(buf: Buf, *, max_output: int = DEFAULT_MAX_OUTPUT) -> list[LegacyMessage]:
    """Check a produce payload of magic 0/1 messages (whole entries, CRCs, inner sets).

    Returns the expanded messages. Raises CorruptRecordError on any defect and for
    an empty payload.
    """
    msgs = parse_message_set(buf, strict=True, verify_crc=True, max_output=max_output)
    if not msgs:
        raise CorruptRecordError("empty message set")
    return msgs
