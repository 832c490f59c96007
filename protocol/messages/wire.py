"""Primitive readers/writers that generated codecs call.

Readers take (buf: memoryview of unsigned bytes, pos) and return (value, new_pos).
They never read past ``len(buf)`` and check every untrusted length against the
bytes that remain before slicing or allocating, raising ProtocolError otherwise.
Writers append bytes-like parts to a list (``out``) that the caller joins once.
"""
from __future__ import annotations

import struct
from typing import Any, NoReturn, Protocol, TypeAlias

from samsa.protocol.errors import ProtocolError

# What readers read from: a memoryview of the frame (or bytes, in tests and tools).
Buf: TypeAlias = "bytes | bytearray | memoryview"


class Region(Protocol):
    """A records value that is not bytes-like: a file region the network layer sends
    with sendfile (write_records puts it in ``out.regions``), known by its length."""

    @property
    def length(self) -> int: ...


# What a records field holds: the decoded bytes, a region to send, or null.
Records: TypeAlias = "Buf | Region | None"

_i16 = struct.Struct(">h")
_i32 = struct.Struct(">i")
I16 = _i16.pack
I32 = _i32.pack
U16_FROM = _i16.unpack_from
U32_FROM = _i32.unpack_from

# Single-byte unsigned varints, precomputed: almost every length and count is < 128.
UV1 = tuple(bytes((i,)) for i in range(128))
NULL_I16 = I16(-1)
NULL_I32 = I32(-1)


def fail(msg: str, pos: int | None = None) -> NoReturn:
    raise ProtocolError(msg, pos)


def read_uvarint(buf: Buf, pos: int) -> tuple[int, int]:
    """Unsigned varint of at most 5 bytes (Kafka's are 32-bit)."""
    result = 0
    shift = 0
    while True:
        b = buf[pos]  # IndexError past the end: turned into ProtocolError by the caller
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            if result > 0xFFFFFFFF:
                fail("varint overflows 32 bits", pos)
            return result, pos
        shift += 7
        if shift > 28:
            fail("varint longer than 5 bytes", pos)


def uvarint(n: int) -> bytes:
    if n < 128:
        return UV1[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# ---- readers: strings ----

def read_string(buf: Buf, pos: int) -> tuple[str, int]:
    n = U16_FROM(buf, pos)[0]
    pos += 2
    end = pos + n
    if n < 0 or end > len(buf):
        fail("bad string length %d" % n, pos)
    return str(buf[pos:end], "utf-8"), end


def read_nstring(buf: Buf, pos: int) -> tuple[str | None, int]:
    n = U16_FROM(buf, pos)[0]
    pos += 2
    if n == -1:
        return None, pos
    end = pos + n
    if n < 0 or end > len(buf):
        fail("bad string length %d" % n, pos)
    return str(buf[pos:end], "utf-8"), end


def read_cstring(buf: Buf, pos: int) -> tuple[str, int]:
    n = buf[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = read_uvarint(buf, pos)
    if n == 0:
        fail("null compact string where not nullable", pos)
    end = pos + n - 1
    if end > len(buf):
        fail("compact string length %d past end" % (n - 1), pos)
    return str(buf[pos:end], "utf-8"), end


def read_cnstring(buf: Buf, pos: int) -> tuple[str | None, int]:
    n = buf[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    end = pos + n - 1
    if end > len(buf):
        fail("compact string length %d past end" % (n - 1), pos)
    return str(buf[pos:end], "utf-8"), end


# ---- readers: bytes (copied) and records (zero-copy memoryview) ----

def _bytes_len(buf: Buf, pos: int, compact: bool) -> tuple[int, int]:
    if compact:
        n = buf[pos]
        if n < 0x80:
            pos += 1
        else:
            n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        n = U32_FROM(buf, pos)[0]
        pos += 4
        if n < -1:
            fail("bad bytes length %d" % n, pos)
    if n >= 0 and pos + n > len(buf):
        fail("bytes length %d past end" % n, pos)
    return n, pos


def read_bytes(buf: Buf, pos: int) -> tuple[bytes, int]:
    n, pos = _bytes_len(buf, pos, False)
    if n < 0:
        fail("null bytes where not nullable", pos)
    return bytes(buf[pos:pos + n]), pos + n


def read_nbytes(buf: Buf, pos: int) -> tuple[bytes | None, int]:
    n, pos = _bytes_len(buf, pos, False)
    if n < 0:
        return None, pos
    return bytes(buf[pos:pos + n]), pos + n


def read_cbytes(buf: Buf, pos: int) -> tuple[bytes, int]:
    n, pos = _bytes_len(buf, pos, True)
    if n < 0:
        fail("null bytes where not nullable", pos)
    return bytes(buf[pos:pos + n]), pos + n


def read_cnbytes(buf: Buf, pos: int) -> tuple[bytes | None, int]:
    n, pos = _bytes_len(buf, pos, True)
    if n < 0:
        return None, pos
    return bytes(buf[pos:pos + n]), pos + n


def read_records(buf: Buf, pos: int) -> tuple[Buf | None, int]:
    n, pos = _bytes_len(buf, pos, False)
    if n < 0:
        return None, pos
    return buf[pos:pos + n], pos + n


def read_crecords(buf: Buf, pos: int) -> tuple[Buf | None, int]:
    n, pos = _bytes_len(buf, pos, True)
    if n < 0:
        return None, pos
    return buf[pos:pos + n], pos + n


# ---- readers: array counts ----

def read_count(buf: Buf, pos: int, min_size: int, nullable: bool) -> tuple[int, int]:
    """int32 array count; checks count * min_size fits the rest of the buffer."""
    n = U32_FROM(buf, pos)[0]
    pos += 4
    if n < 0:
        if n == -1 and nullable:
            return -1, pos
        fail("bad array length %d" % n, pos)
    if n * min_size > len(buf) - pos:
        fail("array of %d elements cannot fit in %d bytes" % (n, len(buf) - pos), pos)
    return n, pos


def read_ccount(buf: Buf, pos: int, min_size: int, nullable: bool) -> tuple[int, int]:
    """Compact (uvarint N+1) array count, same checks."""
    n = buf[pos]
    if n < 0x80:
        pos += 1
    else:
        n, pos = read_uvarint(buf, pos)
    n -= 1
    if n < 0:
        if nullable:
            return -1, pos
        fail("null array where not nullable", pos)
    if n * min_size > len(buf) - pos:
        fail("array of %d elements cannot fit in %d bytes" % (n, len(buf) - pos), pos)
    return n, pos


def skip_tags(buf: Buf, pos: int, count: int) -> int:
    """Skip ``count`` unknown tagged fields."""
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            fail("tagged field past end", pos)
    return pos


# ---- writers ----

def write_string(v: str | None, out: list[Any]) -> None:
    if v is None:
        v = ""
    b = v.encode("utf-8")
    out.append(I16(len(b)))
    out.append(b)


def write_nstring(v: str | None, out: list[Any]) -> None:
    if v is None:
        out.append(NULL_I16)
        return
    b = v.encode("utf-8")
    out.append(I16(len(b)))
    out.append(b)


def write_cstring(v: str | None, out: list[Any]) -> None:
    if v is None:
        v = ""
    b = v.encode("utf-8")
    n = len(b) + 1
    out.append(UV1[n] if n < 128 else uvarint(n))
    out.append(b)


def write_cnstring(v: str | None, out: list[Any]) -> None:
    if v is None:
        out.append(b"\x00")
        return
    b = v.encode("utf-8")
    n = len(b) + 1
    out.append(UV1[n] if n < 128 else uvarint(n))
    out.append(b)


def write_bytes(v: bytes | None, out: list[Any]) -> None:
    if v is None:
        v = b""
    out.append(I32(len(v)))
    out.append(v)


def write_nbytes(v: bytes | None, out: list[Any]) -> None:
    if v is None:
        out.append(NULL_I32)
        return
    out.append(I32(len(v)))
    out.append(v)


def write_cbytes(v: bytes | None, out: list[Any]) -> None:
    if v is None:
        v = b""
    n = len(v) + 1
    out.append(UV1[n] if n < 128 else uvarint(n))
    out.append(v)


def write_cnbytes(v: bytes | None, out: list[Any]) -> None:
    if v is None:
        out.append(b"\x00")
        return
    n = len(v) + 1
    out.append(UV1[n] if n < 128 else uvarint(n))
    out.append(v)


_BYTESLIKE = (bytes, bytearray, memoryview)


def write_records(v: Any, out: Out) -> None:
    """Nullable int32-length records.  A region (has int ``length``, is not bytes-like)
    goes into ``out`` as itself and its index is remembered in ``out.regions``."""
    if v is None:
        out.append(NULL_I32)
    elif isinstance(v, _BYTESLIKE):
        out.append(I32(len(v) if not isinstance(v, memoryview) else v.nbytes))
        out.append(v)
    else:
        out.append(I32(v.length))
        out.regions.append(len(out))
        out.append(v)


def write_crecords(v: Any, out: Out) -> None:
    if v is None:
        out.append(b"\x00")
    elif isinstance(v, _BYTESLIKE):
        n = (len(v) if not isinstance(v, memoryview) else v.nbytes) + 1
        out.append(UV1[n] if n < 128 else uvarint(n))
        out.append(v)
    else:
        n = v.length + 1
        out.append(UV1[n] if n < 128 else uvarint(n))
        out.regions.append(len(out))
        out.append(v)


class Out(list[Any]):
    """The parts list encoders append to; ``regions`` holds indexes of region parts."""

    __slots__ = ("regions",)

    def __init__(self, *a: Any) -> None:
        super().__init__(*a)
        self.regions: list[int] = []
