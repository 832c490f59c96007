"""Walking the entries of a ``.log`` file: v2 batches and legacy v0/v1 messages alike.

Every entry on disk starts with ``offset i64, size i32`` and has its magic byte at
position 16 (v2: baseOffset, batchLength, partitionLeaderEpoch, magic; v0/v1:
offset, size, crc, magic), so one walker serves data written by any Kafka
version. Only the fields storage needs are decoded here (where an entry ends,
its last offset, its max timestamp); full v2 headers come from
``protocol.records``. Files are read with ``os.pread`` in chunks, never through
a shared file position, so scans are safe while another thread appends.
"""
from __future__ import annotations

import os
import struct
import zlib
from typing import Iterator, NamedTuple, Protocol

from samsa.protocol.model import Buf
from samsa.protocol.records import (BATCH_OVERHEAD as V2_HEADER, LOG_OVERHEAD, BatchHeader,
                              compute_crc, read_batch_header)

V2_MIN_LENGTH = 49           # smallest batchLength of a v2 batch
LEGACY_MIN_SIZE = {0: 14, 1: 22}   # crc+magic+attrs(+ts)+key len+value len
PEEK = 17                    # bytes needed to know size and magic of any entry

_PREFIX = struct.Struct(">qiiB")    # offset, size, (epoch | crc), magic
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_NO_DATA = memoryview(b"")


class Entry(NamedTuple):
    """One on-disk entry. ``header`` is the v2 BatchHeader (None for v0/v1)."""

    position: int
    size: int
    magic: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    header: BatchHeader | None

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


class InvalidEntry(Exception):
    """The bytes at a position cannot be an entry (size or magic impossible)."""


def parse_entry(buf: Buf, pos: int, file_position: int) -> Entry | None:
    """Decode the entry header at ``buf[pos:]``; None if the buffer holds too little of it.

    Raises InvalidEntry when the size or magic fields are impossible, which
    recovery treats as the first invalid byte.
    """
    avail = len(buf) - pos
    if avail < PEEK:
        return None
    offset, size, _, magic = _PREFIX.unpack_from(buf, pos)
    if magic == 2:
        if size < V2_MIN_LENGTH:
            raise InvalidEntry(f"batch length {size} below minimum")
        if avail < V2_HEADER:
            return None
        hdr = read_batch_header(buf, pos)
        return Entry(file_position, size + LOG_OVERHEAD, 2, offset,
                     offset + hdr.last_offset_delta, hdr.max_timestamp, hdr)
    if magic in (0, 1):
        if size < LEGACY_MIN_SIZE[magic]:
            raise InvalidEntry(f"message size {size} below minimum for magic {magic}")
        ts = -1
        if magic == 1:
            if avail < LOG_OVERHEAD + 14:
                return None
            (ts,) = _I64.unpack_from(buf, pos + 18)
        # a legacy wrapper carries the offset of its last inner message
        return Entry(file_position, size + LOG_OVERHEAD, magic, offset, offset, ts, None)
    raise InvalidEntry(f"unknown magic {magic}")


def entry_is_valid(buf: Buf, pos: int, entry: Entry) -> bool:
    """CRC check of a complete entry held in ``buf`` at ``pos`` (Kafka's ensureValid)."""
    end = pos + entry.size
    if len(buf) < end:
        return False
    hdr = entry.header
    if hdr is not None:  # (a v2 batch's: magic 2)
        return compute_crc(buf, pos, entry.size) == hdr.crc
    # v0/v1: CRC-32 (not C) over magic..value, stored right after offset and size
    stored: int
    (stored,) = _U32.unpack_from(buf, pos + 12)
    with memoryview(buf) as mv:
        return (zlib.crc32(mv[pos + 16:end]) & 0xFFFFFFFF) == stored


class SupportsFileno(Protocol):
    def fileno(self) -> int: ...


class EntryScanner:
    """Iterate entries of a file region ``[start, end)``.

    ``check_crc`` reads whole entries and stops at the first whose CRC fails.
    After iteration, ``valid_end`` is the file position just past the last good
    entry and ``error`` says why the walk stopped early (None if it reached
    ``end`` or a cleanly incomplete tail, see ``truncated``).
    """

    def __init__(self, fd: int | SupportsFileno, start: int, end: int, *,
                 check_crc: bool = False, chunk_size: int | None = None,
                 keep_data: bool = False):
        # A file object is held for the walk: its descriptor stays open even
        # if its segment lets it go meanwhile (storage/fd_cache.py).
        self.file = None if isinstance(fd, int) else fd
        self.fd = fd if isinstance(fd, int) else fd.fileno()
        self.start = start
        self.end = end
        self.check_crc = check_crc
        self.keep_data = keep_data or check_crc
        self.chunk_size = chunk_size or ((1 << 20) if self.keep_data else 8192)
        self.valid_end = start
        self.error: str | None = None
        self.truncated = False     # stopped at an incomplete trailing entry
        self.last_data = _NO_DATA   # the bytes of the entry just yielded (keep_data)

    def __iter__(self) -> Iterator[Entry]:
        fd, end = self.fd, self.end
        pos = self.start
        buf = b""
        buf_start = pos
        while pos < end:
            rel = pos - buf_start
            entry = None
            try:
                entry = parse_entry(buf, rel, pos) if rel >= 0 else None
            except InvalidEntry as exc:
                self.error = f"{exc} at position {pos}"
                return
            need = PEEK if entry is None else (entry.size if self.keep_data else V2_HEADER)
            if entry is None or (self.keep_data and rel + entry.size > len(buf)):
                # refill the buffer starting at pos
                want = min(max(self.chunk_size, need), end - pos)
                buf = os.pread(fd, want, pos)
                buf_start = pos
                rel = 0
                try:
                    entry = parse_entry(buf, 0, pos)
                except InvalidEntry as exc:
                    self.error = f"{exc} at position {pos}"
                    return
                if entry is None:
                    self.truncated = True
                    return
                if self.keep_data and entry.size > len(buf):
                    if entry.size > end - pos:
                        self.truncated = True
                        return
                    buf = os.pread(fd, entry.size, pos)
                    if len(buf) < entry.size:
                        self.truncated = True
                        return
            if pos + entry.size > end:
                self.truncated = True
                return
            if self.keep_data:
                if self.check_crc and not entry_is_valid(buf, rel, entry):
                    self.error = f"CRC mismatch in entry at position {pos}"
                    return
                self.last_data = memoryview(buf)[rel:rel + entry.size]
            yield entry
            pos += entry.size
            self.valid_end = pos
