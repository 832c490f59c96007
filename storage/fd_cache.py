"""A bounded set of open segment files (``samsa.log.open.segment.files.max``).

Each segment reads and appends through one descriptor for its ``.log`` (the
index files hold none: storage/index.py). A broker with 30,000 partitions
holding data would hold 30,000 descriptors, past a usual hard limit, so
segments open their files through this cache: it keeps the most recently
used ``limit`` of them and lets the least recently used go; the segment opens
its file again on its next read or append. A partition written to all the
time keeps its active segment's file, since every append uses it.

Letting a file go never closes a descriptor under someone using it: the
segment only drops its reference (``SegmentFile``), and the descriptor is
closed when the last holder drops its own. Whoever uses a descriptor holds
the file object for as long as it does: a read's FileRegion (the network
layer sendfiles from it later), a scan (EntryScanner takes the object), an
append. So eviction from any thread is safe without the segment's locks, and
the descriptors open are at most ``limit`` plus those in use at the moment.

The cache's lock is a leaf: nothing is called under it but dict operations.
"""
from __future__ import annotations

import io
import os
import resource
import threading
import weakref
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from samsa.storage.segment import LogSegment

# descriptors left to everything else when the limit is derived: sockets,
# checkpoints, the metadata store, the Python runtime itself
_DERIVED_SHARE = 4
_DERIVED_FLOOR = 64


class SegmentFile(io.FileIO):
    """A segment's open ``.log``: closed when the last reference to it goes
    (quietly: that is how a handle the cache let go ends), or explicitly.
    ``ino``: the file's inode, to know it again by (RegionFile)."""

    def __init__(self, path: str, mode: str):
        super().__init__(path, mode)
        self.ino = os.fstat(self.fileno()).st_ino

    def __del__(self) -> None:
        if not self.closed:
            self.close()


class RegionFile:
    """The file a read's FileRegion reads through (``fileno()``, ``name``).

    A fetch of 30,000 partitions answers with 30,000 regions, all waiting to
    be sent at once: holding each one's descriptor from the read on would
    take 30,000 again. So a region keeps only a weak reference to the
    segment's file until it is first used (the network layer's sendfile, a
    copy); then it takes the file if the segment still holds it, else opens
    the same file again (the same inode, found by its name or by the
    ``.deleted`` name a retention gave it), and holds it until the region
    is dropped."""

    __slots__ = ("name", "_ref", "_ino", "_file")

    def __init__(self, f: SegmentFile):
        self.name = f.name
        self._ref = weakref.ref(f)
        self._ino = f.ino
        self._file: io.FileIO | None = None

    def fileno(self) -> int:
        f = self._file
        if f is None:
            f = self._ref()
            if f is None or f.closed:
                f = self._reopen()
            self._file = f
        return f.fileno()

    def _reopen(self) -> SegmentFile:
        path = str(self.name)
        for candidate in (path, path + ".deleted"):
            try:
                f = SegmentFile(candidate, "rb")
            except FileNotFoundError:
                continue
            if f.ino == self._ino:
                return f
            f.close()   # another segment's file by that name now (a truncated log's)
        raise FileNotFoundError(2, "segment file gone", path)

    def __repr__(self) -> str:
        return f"RegionFile({self.name!r})"


def derived_limit() -> int:
    """The default: a quarter of the open-file limit (the soft one, which the
    broker raises to the hard one at start), at least 64; the rest stays
    for connections and everything else."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ValueError, OSError):
        return 1024
    limits = [n for n in (soft, hard) if n != resource.RLIM_INFINITY and n > 0]
    nofile = min(limits) if limits else 1 << 20
    return max(_DERIVED_FLOOR, nofile // _DERIVED_SHARE)


class DescriptorCache:
    """LRU of the segments holding an open file; at most ``limit`` of them."""

    def __init__(self, limit: int | None = None):
        self.limit = limit if limit is not None else derived_limit()
        self._lock = threading.Lock()
        self._open: OrderedDict[LogSegment, None] = OrderedDict()
        self.evictions = 0

    def configure(self, limit: int | None) -> None:
        """Set the limit (None: derived from RLIMIT_NOFILE); over it, the least
        recently used files go at once."""
        self.limit = limit if limit is not None and limit > 0 else derived_limit()
        self._shrink()

    def __len__(self) -> int:
        return len(self._open)

    def admit(self, seg: LogSegment) -> None:
        """``seg`` has just opened its file (and holds it)."""
        with self._lock:
            self._open[seg] = None
            self._open.move_to_end(seg)
        if len(self._open) > self.limit:
            self._shrink()

    def touch(self, seg: LogSegment) -> None:
        """``seg``'s file was used: it goes last in line for eviction. (Lock-free:
        one OrderedDict operation, atomic under the GIL; a segment evicted
        meanwhile is simply not there.)"""
        try:
            self._open.move_to_end(seg)
        except KeyError:
            pass

    def forget(self, seg: LogSegment) -> None:
        """``seg`` closed its file itself (a close, a reopen)."""
        with self._lock:
            self._open.pop(seg, None)

    def _shrink(self) -> None:
        victims = []
        with self._lock:
            while len(self._open) > self.limit:
                victims.append(self._open.popitem(last=False)[0])
            self.evictions += len(victims)
        for seg in victims:
            seg.release_file()


# One per process: the budget is the process's descriptors, whatever number
# of log managers (log dirs, tests) share it.
DESCRIPTORS = DescriptorCache()
