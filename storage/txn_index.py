"""A segment's ``.txnindex``: the aborted transactions whose ABORT marker lies in it.

Kafka's TransactionIndex / AbortedTxn, byte for byte: 34-byte entries, big-endian,
back to back, no header::

    version i16 (0), producerId i64, firstOffset i64, lastOffset i64 (the marker),
    lastStableOffset i64

``lastStableOffset`` is the LSO right after the transaction completed: a
read_committed fetch whose upper bound is at or below it need not look at
later segments' indexes (``collect`` says the search is complete).

Aborts are rare, so the file is opened for each append and closed again (an
index file holds no descriptor, like the offset/time indexes); the entries are
kept in memory as a tuple replaced whole on every change, so fetches read them
without a lock while the log's appender (holding the log's lock) adds to them;
a small lock only keeps a reader's first load from the file and an append from
racing (the load could otherwise publish the entries without the new one).
"""
from __future__ import annotations

import os
import struct
import threading
from typing import NamedTuple

from samsa.storage.checkpoints import sync_path

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = VERSION

    def encode(self) -> bytes:
        return ENTRY.pack(self.version, self.producer_id, self.first_offset,
                          self.last_offset, self.last_stable_offset)


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """Whole entries of a ``.txnindex`` file; a torn trailing partial entry is ignored."""
    out = []
    for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
        out.append(AbortedTxn(pid, first, last, lso, version))
    return out


class TransactionIndex:
    def __init__(self, path: str):
        self.path = path
        self._entries: tuple[AbortedTxn, ...] | None = None   # loaded on first use
        self._dirty = False
        self._lock = threading.Lock()
        # False: known not to exist (a loader's listing said so), so reset()
        # has nothing to unlink; an append makes it True again
        self.maybe_on_disk = True

    @property
    def entries(self) -> tuple[AbortedTxn, ...]:
        e = self._entries
        if e is None:
            with self._lock:
                e = self._entries
                if e is None:
                    try:
                        with open(self.path, "rb") as f:
                            e = tuple(decode_entries(f.read()))
                    except FileNotFoundError:
                        e = ()
                    self._entries = e
        return e

    def append(self, txn: AbortedTxn) -> None:
        """Add an entry (log's lock held). Kafka refuses one whose last offset is
        below the previous entry's: markers are appended in offset order."""
        entries = self.entries
        if entries and txn.last_offset < entries[-1].last_offset:
            raise ValueError(f"{self.path}: aborted transaction ending at {txn.last_offset} "
                             f"after one ending at {entries[-1].last_offset}")
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, txn.encode())
            finally:
                os.close(fd)
            self.maybe_on_disk = True
            self._entries = entries + (txn,)
            self._dirty = True

    def flush(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        sync_path(self.path)

    def reset(self) -> None:
        """Forget every entry (recovery re-creates them from the segment's batches)."""
        with self._lock:
            if self.maybe_on_disk:
                try:
                    os.unlink(self.path)
                except FileNotFoundError:
                    pass
            self._entries = ()
            self._dirty = False

    def truncate_to(self, offset: int) -> None:
        """Kafka's truncateTo: drop the entries from the first whose last offset
        >= ``offset`` on (the marker is gone with the truncated batches)."""
        entries = self.entries
        keep = next((i for i, t in enumerate(entries) if t.last_offset >= offset), len(entries))
        with self._lock:
            if keep < len(entries):
                try:
                    os.truncate(self.path, keep * ENTRY_SIZE)
                except FileNotFoundError:
                    pass
                self._entries = entries[:keep]
            elif os.path.exists(self.path) and os.path.getsize(self.path) != keep * ENTRY_SIZE:
                os.truncate(self.path, keep * ENTRY_SIZE)   # a torn entry from a crash

    def renamed(self, path: str) -> None:
        """The file moved (``*.deleted``); entries are loaded first so reads
        in flight keep answering."""
        self.entries
        self.path = path

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Kafka's collectAbortedTxns: entries overlapping [fetch_offset, upper_bound),
        and whether the search may stop here (an entry's LSO reached the bound)."""
        out = []
        for t in self.entries:
            if t.last_offset >= fetch_offset and t.first_offset < upper_bound:
                out.append(t)
            if t.last_stable_offset >= upper_bound:
                return out, True
        return out, False
