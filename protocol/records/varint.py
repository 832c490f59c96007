"""Kafka's zigzag varints (protobuf style), with decoders that never read past the buffer.

Record fields are signed varints (int32) and varlongs (int64): zigzag, then
unsigned LEB128. Decoding is strict: a varint longer than its type allows, or
one that runs off the end of the buffer, is a CorruptRecordError.
"""
from __future__ import annotations

from typing import Callable

from samsa.protocol.model import Buf
from samsa.protocol.records.errors import CorruptRecordError

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def zigzag_encode(n: int) -> int:
    """Signed -> unsigned: 0, -1, 1, -2 ... -> 0, 1, 2, 3 ..."""
    return (n << 1) ^ (n >> 63)


def zigzag_decode(u: int) -> int:
    return (u >> 1) ^ -(u & 1)


def encode_uvarint(u: int, out: bytearray) -> None:
    """Append unsigned LEB128 ``u`` to ``out``."""
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


def encode_varint(n: int, out: bytearray) -> None:
    """Append a signed int32 as a zigzag varint; ValueError if out of range (caller bug)."""
    if not _INT32_MIN <= n <= _INT32_MAX:
        raise ValueError(f"varint out of int32 range: {n}")
    encode_uvarint(((n << 1) ^ (n >> 31)) & 0xFFFFFFFF, out)


def encode_varlong(n: int, out: bytearray) -> None:
    """Append a signed int64 as a zigzag varlong; ValueError if out of range."""
    if not _INT64_MIN <= n <= _INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {n}")
    encode_uvarint(((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF, out)


def size_of_varint(n: int) -> int:
    """Bytes a zigzag varint/varlong of ``n`` takes."""
    u = (n << 1) ^ (n >> 63)
    size = 1
    while u > 0x7F:
        u >>= 7
        size += 1
    return size


def decode_uvarint(buf: Buf, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """(value, next position) of the unsigned varint at ``pos``; never reads at/after ``end``."""
    result = 0
    shift = 0
    limit = pos + max_bytes
    while True:
        if pos >= end:
            raise CorruptRecordError("varint runs past the end of the data", pos)
        if pos >= limit:
            raise CorruptRecordError(f"varint longer than {max_bytes} bytes", pos)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _zigzag_decoder(max_bytes: int, limit: int,
                    overflow: str) -> Callable[[Buf, int, int], tuple[int, int]]:
    """A signed zigzag decoder of at most ``max_bytes`` whose unsigned form
    stays within ``limit``: (value, next position)."""
    def decode(buf: Buf, pos: int, end: int) -> tuple[int, int]:
        # most record fields take one or two bytes: no second call for them
        # (the pure-Python record walker reads seven varints per record)
        if pos + 1 < end:
            b = buf[pos]
            if b < 0x80:
                return (b >> 1) ^ -(b & 1), pos + 1
            c = buf[pos + 1]
            if c < 0x80:
                u = (b & 0x7F) | (c << 7)
                return (u >> 1) ^ -(u & 1), pos + 2
        u, pos = decode_uvarint(buf, pos, end, max_bytes)
        if u > limit:
            raise CorruptRecordError(overflow, pos)
        return (u >> 1) ^ -(u & 1), pos
    return decode


decode_varint = _zigzag_decoder(5, 0xFFFFFFFF, "varint overflows int32")
decode_varint.__doc__ = "Signed int32 zigzag varint at ``pos``: (value, next position)."
decode_varlong = _zigzag_decoder(10, 0xFFFFFFFFFFFFFFFF, "varlong overflows int64")
decode_varlong.__doc__ = "Signed int64 zigzag varlong at ``pos``: (value, next position)."
