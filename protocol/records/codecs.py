"""Compression codecs of Kafka record batches and message sets, in the framings Kafka uses.

- gzip: RFC 1952 streams (Java's GZIPOutputStream); concatenated members are accepted.
- snappy: the xerial framing Java clients write (``\\x82SNAPPY\\x00``, two big-endian
  ints, then blocks each prefixed by a big-endian length), and raw snappy when that
  header is absent (librdkafka and some old clients send raw).
- lz4: the LZ4 frame format with independent blocks, no content size (Kafka's
  KafkaLZ4BlockInputStream decodes every block on its own and rejects content size).
  Kafka 0.8/0.9 computed the frame header checksum over the magic number too
  (KIP-57), so magic 0 data carries a wrong checksum byte: we always repair it
  before decoding and write the broken one when producing magic 0 output.
- zstd: frames may lack a content size, so decoding is streaming.

Every decode is bounded by ``max_output`` (decompression bombs) and every library
failure is reported as CorruptRecordError (a ProtocolError).
"""
from __future__ import annotations

import enum
import struct
import threading
import zlib
from typing import Iterator

import lz4.frame as _lz4f
import snappy as _snappy
import zstandard as _zstd

from samsa.protocol.model import Buf
from samsa.protocol.records.errors import CorruptRecordError, UnsupportedCompressionError

# Upper bound of one decompressed batch/wrapper. Kafka's own limits are on the
# compressed size (message.max.bytes, 1 MiB by default); 64 MiB leaves room for
# very compressible data while refusing bombs. Callers may pass their own.
DEFAULT_MAX_OUTPUT = 64 * 1024 * 1024


class Codec(enum.IntEnum):
    """Attribute bits 0-2 of a batch/message."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


_BY_NAME = {"none": Codec.NONE, "uncompressed": Codec.NONE, "gzip": Codec.GZIP,
            "snappy": Codec.SNAPPY, "lz4": Codec.LZ4, "zstd": Codec.ZSTD}


def codec_for_name(name: str) -> Codec:
    """Codec for a ``compression.type`` value ("gzip", "uncompressed", ...); ValueError else.

    "producer" is not a codec (it means "keep what the producer sent"): the caller
    handles it before asking.
    """
    try:
        return _BY_NAME[name.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown compression type {name!r}") from None


def _as_codec(codec: int) -> Codec:
    try:
        return Codec(codec)
    except ValueError:
        raise UnsupportedCompressionError(f"unknown compression codec {codec}") from None


# -- public entry points ------------------------------------------------------

def compress(codec: int, data: Buf, *, magic: int = 2) -> bytes:
    """Compress ``data`` the way Kafka's Java client would for this codec and format.

    ``magic`` only matters for lz4 (magic 0 needs the old, wrong header checksum)
    and zstd (not representable before magic 2).
    """
    codec = _as_codec(codec)
    if codec == Codec.NONE:
        return bytes(data)
    if codec == Codec.GZIP:
        # mtime=0 keeps the output deterministic (same input, same bytes).
        c = zlib.compressobj(6, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == Codec.SNAPPY:
        return _xerial_encode(data)
    if codec == Codec.LZ4:
        # (lz4, zstandard and snappy have no type information: their results are Any)
        out: bytes = _lz4f.compress(data, block_size=_lz4f.BLOCKSIZE_MAX64KB,
                                    block_linked=False, content_checksum=False,
                                    store_size=False)
        if magic == 0:
            out = _lz4_set_header_checksum(out, broken=True)
        return out
    if magic < 2:
        raise UnsupportedCompressionError(f"zstd cannot be used with magic {magic}")
    zstd_out: bytes = _zstd.ZstdCompressor(level=3).compress(data)
    return zstd_out


def decompress(codec: int, data: Buf, *, max_output: int = DEFAULT_MAX_OUTPUT) -> bytes:
    """Decompress one codec payload; CorruptRecordError if invalid or larger than ``max_output``."""
    parts = list(iter_decompress(codec, data, max_output=max_output))
    # one piece is returned as it is; several are copied once (growing a
    # bytearray instead page-faulted its way to the full size each time)
    out = parts[0] if len(parts) == 1 else b"".join(parts)  # (none: b"")
    if len(out) > max_output:
        raise _too_big(codec, max_output)
    return out


def iter_decompress(codec: int, data: Buf, *,
                    max_output: int = DEFAULT_MAX_OUTPUT) -> Iterator[bytes]:
    """The decompressed payload in pieces of at most ``PIECE`` bytes or so (a
    snappy block, a zstd window may be larger), never more than ``max_output``
    in all; errors as ``decompress``. Produce checks the records of every
    compressed batch in these pieces: no buffer of the whole output, whose
    allocation page-faulted in a running broker on every batch."""
    kind = _as_codec(codec)
    try:
        if kind == Codec.NONE:
            yield bytes(data)
        elif kind == Codec.GZIP:
            yield from _gunzip(data, max_output)
        elif kind == Codec.SNAPPY:
            yield from _snappy_decode(data, max_output)
        elif kind == Codec.LZ4:
            yield from _lz4_decode(data, max_output)
        else:
            yield from _zstd_decode(data, max_output)
    except CorruptRecordError:
        raise
    except (zlib.error, _zstd.ZstdError, RuntimeError, ValueError, TypeError, OverflowError,
            MemoryError, _snappy.UncompressError, struct.error) as e:
        # lz4 raises RuntimeError, snappy its own error (a plain Exception subclass).
        raise CorruptRecordError(f"cannot decompress {kind.name.lower()} data: {e}") from None
    except Exception as e:  # noqa: BLE001 - any codec library failure is bad input
        raise CorruptRecordError(f"cannot decompress {kind.name.lower()} data: {e!r}") from None


# Output per decoder call where the library lets us bound it: below glibc's
# mmap threshold, so the pieces come from (and go back to) the heap.
PIECE = 64 * 1024


def _too_big(codec: int, limit: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"{Codec(codec).name.lower()} data decompresses to more than {limit} bytes")


# -- gzip ---------------------------------------------------------------------

def _gunzip(data: Buf, limit: int) -> Iterator[bytes]:
    size = 0
    buf = bytes(data)
    while True:
        d = zlib.decompressobj(31)
        while True:
            piece = d.decompress(buf, PIECE)
            buf = d.unconsumed_tail
            if piece:
                size += len(piece)
                if size > limit:
                    raise _too_big(Codec.GZIP, limit)
                yield piece
            if d.eof or not (piece or buf):
                break
        if not d.eof:
            raise CorruptRecordError("truncated gzip stream")
        buf = d.unused_data
        if not buf:
            return


# -- snappy -------------------------------------------------------------------

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK = 32 * 1024  # xerial's default block size
_U32 = struct.Struct(">I")


def _xerial_encode(data: Buf) -> bytes:
    mv = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1)]
    for i in range(0, len(mv), _XERIAL_BLOCK):
        block = _snappy.compress(bytes(mv[i:i + _XERIAL_BLOCK]))
        parts.append(_U32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_raw_length(block: Buf) -> int:
    """The uncompressed length a raw snappy block declares (its leading uvarint)."""
    result = 0
    shift = 0
    for i in range(min(5, len(block))):
        b = block[i]
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result
        shift += 7
    raise CorruptRecordError("bad snappy length preamble")


def _snappy_raw(block: Buf, budget: int) -> bytes:
    if _snappy_raw_length(block) > budget:
        raise CorruptRecordError("snappy block larger than the decompression limit")
    out: bytes = _snappy.decompress(bytes(block))
    return out


def _snappy_decode(data: Buf, limit: int) -> Iterator[bytes]:
    data = bytes(data)
    if len(data) >= 16 and data[:8] == XERIAL_MAGIC:
        size = 0
        pos = 16
        end = len(data)
        while pos < end:
            if end - pos < 4:
                raise CorruptRecordError("truncated xerial snappy block length")
            (n,) = _U32.unpack_from(data, pos)
            pos += 4
            if n > end - pos:
                raise CorruptRecordError("xerial snappy block runs past the end")
            piece = _snappy_raw(data[pos:pos + n], limit - size)
            size += len(piece)
            pos += n
            yield piece
        return
    yield _snappy_raw(data, limit)


# -- lz4 ----------------------------------------------------------------------

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32, used only for the few bytes of an LZ4 frame descriptor (no C binding needed)."""
    n = len(data)
    p = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while p + 16 <= n:
            a, b, c, d = struct.unpack_from("<4I", data, p)
            v1 = (_rotl((v1 + a * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + b * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + c * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + d * _P2) & _M32, 13) * _P1) & _M32
            p += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while p + 4 <= n:
        (k,) = struct.unpack_from("<I", data, p)
        h = (_rotl((h + k * _P3) & _M32, 17) * _P4) & _M32
        p += 4
    while p < n:
        h = (_rotl((h + data[p] * _P5) & _M32, 11) * _P1) & _M32
        p += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def _lz4_set_header_checksum(frame: Buf, *, broken: bool) -> bytes:
    """Rewrite the frame descriptor's checksum byte: correct, or Kafka 0.8's broken variant.

    The correct checksum hashes FLG..end of descriptor; Kafka 0.8/0.9 hashed from
    the magic number on. Content size is not supported by old Kafka, so when
    writing the broken form the content-size flag must already be off.
    """
    frame = bytes(frame)
    if len(frame) < 7 or frame[:4] != _LZ4_MAGIC:
        raise CorruptRecordError("not an lz4 frame (bad magic)")
    flg = frame[4]
    hc_pos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)
    if len(frame) <= hc_pos:
        raise CorruptRecordError("truncated lz4 frame descriptor")
    start = 0 if broken else 4
    hc = (xxh32(frame[start:hc_pos]) >> 8) & 0xFF
    if frame[hc_pos] == hc:
        return frame
    return frame[:hc_pos] + bytes((hc,)) + frame[hc_pos + 1:]


def _lz4_decode(data: Buf, limit: int) -> Iterator[bytes]:
    size = 0
    buf = bytes(data)
    while True:
        # Accept both the correct and Kafka 0.8's broken header checksum; the
        # batch/message CRC already guards these bytes.
        buf = _lz4_set_header_checksum(buf, broken=False)
        d = _lz4f.LZ4FrameDecompressor()
        # Bounded steps: one unbounded call grows its buffer by reallocation,
        # one bounded by the whole limit allocates the limit.
        piece = d.decompress(buf, max_length=PIECE)
        while True:
            size += len(piece)
            if size > limit:
                raise _too_big(Codec.LZ4, limit)
            if piece:
                yield piece
            if d.eof or d.needs_input:
                break
            piece = d.decompress(b"", max_length=PIECE)
        if not d.eof:
            raise CorruptRecordError("truncated lz4 frame")
        buf = d.unused_data
        if not buf:
            return


# -- zstd ---------------------------------------------------------------------

# zstd can expand a 4-byte RLE block to 128 KiB; feeding small input slices keeps
# the overshoot past ``limit`` bounded (~16 MiB) before we notice and stop.
_ZSTD_FEED = 512


def _zstd_decode(data: Buf, limit: int) -> Iterator[bytes]:
    data = bytes(data)
    # One frame that declares its size within the limit (librdkafka's do)
    # decodes in one call, three times faster than feeding it in slices: the
    # output buffer is that size and a frame producing more is an error.
    try:
        declared = _zstd.frame_content_size(data)
    except _zstd.ZstdError:
        declared = -1
    if 0 <= declared <= min(limit, PIECE):
        try:
            yield _zstd.ZstdDecompressor().decompress(data, allow_extra_data=False)
            return
        except _zstd.ZstdError:
            pass  # several frames, or a broken one: the general path says which
    mv = memoryview(data)
    # A decompressor of this thread's, kept between calls: a new one allocates
    # (and page-faults) a window buffer as large as the frame's window, about
    # the batch, every time. Taken out of the pool while in use, so an
    # interleaved decode gets its own.
    pool = _zstd_pool.__dict__.setdefault("free", [])
    dctx = pool.pop() if pool else _zstd.ZstdDecompressor()
    try:
        yield from _zstd_frames(dctx, mv, limit)
    finally:
        if len(pool) < 2:
            pool.append(dctx)


_zstd_pool = threading.local()


def _zstd_frames(dctx: _zstd.ZstdDecompressor, mv: memoryview, limit: int) -> Iterator[bytes]:
    size = 0
    pos = 0
    end = len(mv)
    if end == 0:
        raise CorruptRecordError("empty zstd payload")
    while pos < end:
        dobj = dctx.decompressobj(write_size=PIECE)
        while pos < end and not dobj.eof:
            chunk = mv[pos:pos + _ZSTD_FEED]
            pos += len(chunk)
            piece = dobj.decompress(chunk)
            if piece:
                size += len(piece)
                if size > limit:
                    raise _too_big(Codec.ZSTD, limit)
                yield piece
        if not dobj.eof:
            raise CorruptRecordError("truncated zstd frame")
        unused = dobj.unused_data
        pos -= len(unused)
