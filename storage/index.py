"""Sparse segment indexes in Kafka's byte layout: ``.index`` and ``.timeindex``.

``.index``     8-byte entries: relative offset u32, file position u32 (big-endian)
``.timeindex`` 12-byte entries: timestamp i64, relative offset u32

Kafka memory-maps these files; samsa keeps the entries in two in-memory arrays
(absolute keys and values) and mirrors new entries to the file with
``os.pwrite`` in 4 KiB blocks and on roll/close. Why not mmap: a rolled segment's index is trimmed (file shrunk)
while reader threads may be searching it, and shrinking a mapping under a reader
is exactly the kind of race this design avoids. Appends to an ``array`` are
atomic under the GIL and readers only look at the first ``len()`` entries they
saw, so lookups need no lock. A log truncation (a follower cutting its log)
replaces the arrays with shorter copies instead of shrinking them in place
(``truncate_entries``).

No descriptor is held: the in-memory arrays serve every lookup, and the
rare writes (a 4 KiB block of entries, a trim, an fsync) open the file for
the moment they need it. A broker with 10,000 partitions would otherwise
hold 20,000 index descriptors for files it almost never touches.

The active segment's index files are preallocated to ``segment.index.bytes``
(rounded down to whole entries) like Kafka's, and trimmed to their entries when
the segment rolls or the log closes. A reopened active segment's files, trimmed
by the stop before, are grown again only when entries are next written to them
(``prealloc_due``), so a restart and a stop of 10,000 idle partitions truncate
no index file. A new segment's index files are created
lazily (``lazy=True``): not before the segment's first append
(``write_if_absent``, which its log has the log manager's scheduler do, off
the produce's thread; a roll or close does it if that has not happened yet),
so a topic of 10,000 partitions nobody writes to costs 20,000 fewer file
creations. They are made holding exactly their entries (none, mostly) and
grown to their preallocated size only when entries are next written to them
(``prealloc_due``), as a reopened segment's: 10,000 partitions that took a
few small batches each cost the scheduler two creations each, no
preallocation, and their stop no trim, only the time index's closing
entry. After a crash an active segment's missing files stay lazy. Kafka reads such a directory: an empty segment
without index files is indexed again, from nothing. After a crash the preallocated tail reads
as zero entries; loading stops at the first entry that does not strictly
increase (Kafka's dump tool does the same), and recovery rebuilds the index
anyway.
"""
from __future__ import annotations

import bisect
import os
import struct
from array import array

from samsa.storage.checkpoints import in_durable_batch, sync_path

OFFSET_ENTRY = struct.Struct(">II")   # relative offset, position
TIME_ENTRY = struct.Struct(">qI")     # timestamp, relative offset
_pack_offset = OFFSET_ENTRY.pack


class _SparseIndex:
    """Shared machinery: in-memory sorted keys/values plus a file mirror."""

    entry: struct.Struct

    def __init__(self, path: str, base_offset: int, max_index_bytes: int, *,
                 writable: bool, create: bool = False, lazy: bool = False):
        self.path = path
        self.base_offset = base_offset
        self.entry_size = self.entry.size
        self.max_entries = max(1, max_index_bytes // self.entry_size)
        self.keys = array("q")
        self.values = array("q")
        self.writable = False  # the active segment's indexes take new entries
        # New entries are buffered and written in blocks (or on roll/close): one
        # pwrite per entry would cost the produce path a syscall per batch. Only
        # the appender (under the log lock) touches the buffer. After a crash the
        # unwritten tail is rebuilt by recovery, like Kafka's unflushed mmap pages.
        self._pending = bytearray()
        self._pending_at = 0
        self.corrupt = False
        # No file yet (lazy): the first write makes it (materialize); until then
        # there is nothing on disk to write, trim, truncate or sync.
        self.absent = lazy
        # A loaded file that holds exactly its entries is grown to its full size
        # only when entries are next written to it (materialize): a restart of
        # 10,000 partitions then truncates no index file, and a stop trims none
        # of those that took no entry meanwhile.
        self.prealloc_due = False
        exact = False
        fd: int | None  # None: a missing file, rebuilt by the segment, or a lazy one
        if lazy:
            fd = None
        elif create:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        else:
            try:
                fd = os.open(path, os.O_RDWR if writable else os.O_RDONLY)
            except FileNotFoundError:
                self.corrupt = True  # missing: the segment rebuilds it (or, empty, makes it lazy)
                fd = None
            if fd is not None and not self.corrupt:
                exact = self._load(fd) == len(self.keys) * self.entry_size
        self._pending_at = len(self.keys) * self.entry_size
        if fd is not None:
            os.close(fd)
        if writable:
            self.writable = True
            if exact:
                self.prealloc_due = True
            else:
                self.preallocate()

    # -- loading -------------------------------------------------------------
    def _load(self, fd: int) -> int:
        """Read the entries; returns the file's size."""
        size = os.fstat(fd).st_size
        data = os.pread(fd, size, 0) if size else b""
        if size % self.entry_size:
            # A torn/truncated index: keep whole entries, but flag it for rebuild.
            self.corrupt = True
        n = size // self.entry_size
        self._decode(data, n)
        return size

    def _decode(self, data: bytes, n: int) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- file management ---------------------------------------------------------
    @property
    def entries(self) -> int:
        return len(self.keys)

    def is_full(self) -> bool:
        return len(self.keys) >= self.max_entries

    def _gone(self) -> None:
        # The file went away under us: its directory was renamed for a topic
        # deletion (the data is being discarded) or someone removed it (the
        # next start rebuilds the index from the log). Nothing left to write.
        self.writable = False

    def materialize(self) -> None:
        """Create a lazy index's file (preallocated, as an active segment's):
        its segment takes its first append."""
        if self.absent and self.writable:
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644))
            self.absent = False
            self.preallocate()
        elif self.prealloc_due and self.writable:
            self.preallocate()

    def write_if_absent(self) -> None:
        """A lazy index whose segment took its first append (or rolls or closes
        holding records): its file is made now holding exactly its entries
        (one create, and a write if there are any; grown when entries are next
        written to it, as a loaded one is)."""
        if self.absent and self.writable:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                if self._pending:
                    os.pwrite(fd, self._pending, self._pending_at)
            finally:
                os.close(fd)
            self._pending_at += len(self._pending)
            del self._pending[:]
            self.absent = False
            self.prealloc_due = True
            if in_durable_batch():   # (a stop: durable with the segment it indexes)
                sync_path(self.path)

    def keep_rebuilt(self, writable: bool) -> None:
        """(Recovery.) This index was rebuilt in memory (made ``lazy``, not
        writable): make its file hold exactly these entries, then take new ones
        if ``writable``. A file that holds them already, with nothing but zeros
        after them (what the crashed process left of an index it was writing),
        is kept as it is: after a kill -9 every partition's active segment is
        recovered, and truncating and preallocating 20,000 index files again
        costs a journal transaction each. Anything else is written anew."""
        data = self._encoded()
        if writable and not os.path.exists(self.path):
            # (the active segment's files were never made: they still wait
            # for entries to write, or for the roll or close, as before the crash)
            self._stay_lazy(data)
            return
        self._adopt(data, self._file_holds(data, exact=not writable), writable)

    def _stay_lazy(self, data: bytes) -> None:
        self.absent = True
        self._pending[:] = data
        self._pending_at = 0
        self.writable = True

    def _adopt(self, data: bytes, size: int, writable: bool) -> None:
        """(keep_rebuilt) The file holds ``data`` (the entries in memory) and is
        ``size`` bytes long, or is written anew if ``size`` < 0."""
        if size < 0:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                if data:
                    os.pwrite(fd, data, 0)
            finally:
                os.close(fd)
        self.absent = False
        del self._pending[:]
        self._pending_at = len(data)
        if writable:
            self.writable = True
            if size == len(data):
                self.prealloc_due = True   # (as a loaded file that holds exactly its entries)
            elif size != self.max_entries * self.entry_size:
                self.preallocate()   # (a truncate to the same size still changes the inode)

    def _file_holds(self, data: bytes, exact: bool) -> int:
        """The file's size if it starts with ``data`` and has only zeros after it
        (``exact``: nothing after it at all; a longer file is cut to it here),
        else -1."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return -1
        try:
            size = os.fstat(fd).st_size
            if size < len(data):
                return -1
            # the entries and the rest of their last page; beyond it, holes only
            # (a preallocated file is sparse): no page of a 10 MB index is read
            head_len = min(size, -(-max(len(data), 1) // 4096) * 4096)
            head = os.pread(fd, head_len, 0)
            if len(head) != head_len or head[:len(data)] != data \
                    or head.count(0, len(data)) != head_len - len(data):
                return -1
            if size > head_len:
                try:
                    if os.lseek(fd, head_len, os.SEEK_DATA) < size:
                        return -1   # data further on (or no SEEK_DATA here): rewrite
                except OSError:
                    pass   # ENXIO: no data after head_len
        finally:
            os.close(fd)
        if exact and size != len(data):
            os.truncate(self.path, len(data))
            size = len(data)
        return size

    def _encoded(self) -> bytes:  # pragma: no cover - abstract
        raise NotImplementedError

    def write_pending(self, grow: bool = True) -> None:
        """Write the buffered entries (``grow``: the file preallocated first,
        as an active segment's is once it takes entries)."""
        if self._pending and self.writable:
            if grow or self.absent:
                self.materialize()
            try:
                fd = os.open(self.path, os.O_WRONLY)
            except FileNotFoundError:
                self._gone()
            else:
                try:
                    os.pwrite(fd, self._pending, self._pending_at)
                finally:
                    os.close(fd)
        self._pending_at += len(self._pending)
        del self._pending[:]

    def preallocate(self) -> None:
        """Grow the file to its maximum size (what Kafka does for the active segment)."""
        if self.writable and not self.absent:
            self.prealloc_due = False
            try:
                os.truncate(self.path, self.max_entries * self.entry_size)
            except FileNotFoundError:
                self._gone()

    def trim(self) -> None:
        """Shrink the file to exactly its entries (on roll and on close)."""
        if self.writable:
            if self.prealloc_due:
                # never grown: the file held exactly its entries, and what was
                # pending goes right after them
                self.write_pending(grow=False)
                return
            self.write_pending()
            if self.absent:
                return   # never written: no file to trim
            try:
                os.truncate(self.path, len(self.keys) * self.entry_size)
            except FileNotFoundError:
                self._gone()

    def flush(self) -> None:
        """fsync what was written; may run concurrently with appends (no buffer access)."""
        if self.writable and not self.absent:
            # (gone with its directory, a topic deletion: nothing to sync)
            sync_path(self.path)

    def close(self, trim: bool = True) -> None:
        if self.writable:
            if trim:
                self.trim()
            else:
                self.write_pending()
            self.writable = False

    def make_readonly(self) -> None:
        """Trim and drop the file handle: a rolled segment's index never changes again."""
        self.close(trim=True)

    def make_writable(self) -> None:
        """Take new entries again (a rolled segment made active by a log truncation):
        the file is preallocated like an active segment's."""
        if not self.writable:
            del self._pending[:]
            self._pending_at = len(self.keys) * self.entry_size
            self.writable = True
            self.preallocate()

    def truncate_entries(self, n: int) -> None:
        """Keep only the first ``n`` entries (a log truncation; the owner holds the
        log lock). Shorter copies of the arrays are published, keys first: a
        lock-free reader holding the old arrays still sees consistent pairs, and
        one that mixes an old and a new array can at worst index past the new
        end (IndexError, which Log.read retries). A writable file keeps exactly
        those entries followed by the zero-filled preallocated tail, so no stale
        entry survives a crash."""
        n = max(0, min(n, len(self.keys)))
        if self.writable:
            self.write_pending()
        if n < len(self.keys):
            keys, values = self.keys[:n], self.values[:n]
            self.keys = keys
            self.values = values
        del self._pending[:]
        self._pending_at = n * self.entry_size
        if self.writable and not self.absent:
            try:
                os.truncate(self.path, n * self.entry_size)
            except FileNotFoundError:
                self._gone()
                return
            self.preallocate()

    def _write_entry(self, packed: bytes) -> None:
        if self.writable:
            pending = self._pending
            pending += packed
            if len(pending) >= 4096:
                self.write_pending()
        else:
            self._pending_at += len(packed)


class OffsetIndex(_SparseIndex):
    """Offset -> file position of the batch whose last offset is that offset."""

    entry = OFFSET_ENTRY

    def _decode(self, data: bytes, n: int) -> None:
        base = self.base_offset
        prev_off = -1
        prev_pos = -1
        keys, values = self.keys, self.values
        for rel, pos in OFFSET_ENTRY.iter_unpack(data[:n * 8]):
            if rel <= prev_off or pos <= prev_pos:
                break  # zero-filled preallocated tail (or garbage): stop here
            keys.append(base + rel)
            values.append(pos)
            prev_off, prev_pos = rel, pos

    def _encoded(self) -> bytes:
        base = self.base_offset
        n = min(len(self.keys), len(self.values))
        return b"".join(_pack_offset(k - base, v) for k, v in zip(self.keys[:n], self.values[:n]))

    def append(self, offset: int, position: int) -> None:
        keys = self.keys
        n = len(keys)
        if n:
            if offset <= keys[n - 1] or position <= self.values[n - 1]:
                return  # never break monotonicity (Kafka throws; a silent skip is safer here)
            if n >= self.max_entries:
                return
        # order matters for lock-free readers: value first, then key
        self.values.append(position)
        keys.append(offset)
        if self.writable:
            pending = self._pending
            pending += _pack_offset(offset - self.base_offset, position)
            if len(pending) >= 4096:
                self.write_pending()
        else:
            self._pending_at += 8

    def lookup(self, offset: int) -> tuple[int, int]:
        """Largest entry with offset <= target: (offset, position), or (base, 0)."""
        keys = self.keys
        n = len(keys)
        i = bisect.bisect_right(keys, offset, 0, n) - 1
        if i < 0:
            return self.base_offset, 0
        return keys[i], self.values[i]

    def floor_position(self, position: int) -> int:
        """Largest indexed position <= ``position`` (0 if none): a known batch start."""
        values = self.values
        n = min(len(values), len(self.keys))
        i = bisect.bisect_right(values, position, 0, n) - 1
        return values[i] if i >= 0 else 0

    def last_entry(self) -> tuple[int, int]:
        keys, values = self.keys, self.values
        n = min(len(keys), len(values))
        if n == 0:
            return self.base_offset, 0
        return keys[n - 1], values[n - 1]


class TimeIndex(_SparseIndex):
    """Max timestamp so far -> offset (the batch's last offset) where it was reached."""

    entry = TIME_ENTRY

    def _decode(self, data: bytes, n: int) -> None:
        base = self.base_offset
        keys, values = self.keys, self.values
        prev_ts = None
        prev_rel = -1
        for i, (ts, rel) in enumerate(TIME_ENTRY.iter_unpack(data[:n * 12])):
            if i > 0 and (rel == 0 or ts <= prev_ts or rel < prev_rel):
                break  # preallocated zero tail
            keys.append(ts)
            values.append(base + rel)
            prev_ts, prev_rel = ts, rel

    def _encoded(self) -> bytes:
        base = self.base_offset
        n = min(len(self.keys), len(self.values))
        pack = TIME_ENTRY.pack
        return b"".join(pack(k, v - base) for k, v in zip(self.keys[:n], self.values[:n]))

    def keep_rebuilt(self, writable: bool, final: tuple[int, int] | None = None) -> None:
        """As the base class's; ``final``: the (max timestamp, its offset) of the
        data checked, the entry a stop appends to the active segment's time
        index. A file holding the rebuilt entries and then that one (a segment
        stopped cleanly, reopened, killed before its next entry) is kept too,
        the entry taken into memory: it is what a clean reopen loads."""
        if final is not None:
            ts, off = final
            n = len(self.keys)
            if ts >= 0 and (n == 0 or (ts > self.keys[n - 1] and off >= self.values[n - 1])):
                data = self._encoded() + TIME_ENTRY.pack(ts, off - self.base_offset)
                size = self._file_holds(data, exact=not writable)
                if size >= 0:
                    self.maybe_append(ts, off, skip_full_check=True)
                    self._adopt(data, size, writable)
                    return
        super().keep_rebuilt(writable)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        keys = self.keys
        n = len(keys)
        if n:
            if timestamp <= keys[n - 1] or offset < self.values[n - 1]:
                return
            if n >= self.max_entries and not skip_full_check:
                return
        if timestamp < 0:
            return
        self.values.append(offset)
        keys.append(timestamp)
        self._write_entry(TIME_ENTRY.pack(timestamp, offset - self.base_offset))

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """Largest entry with timestamp <= target: (timestamp, offset), or (-1, base)."""
        keys, values = self.keys, self.values
        i = bisect.bisect_right(keys, timestamp, 0, min(len(keys), len(values))) - 1
        if i < 0:
            return -1, self.base_offset
        return keys[i], values[i]

    def last_entry(self) -> tuple[int, int]:
        keys, values = self.keys, self.values
        n = min(len(keys), len(values))
        if n == 0:
            return -1, self.base_offset
        return keys[n - 1], values[n - 1]
