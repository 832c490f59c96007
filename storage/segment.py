"""One log segment: ``<base>.log`` plus its sparse ``.index`` and ``.timeindex``,
and the ``.txnindex`` of the transactions aborted in it (storage/txn_index.py).

File names are the segment's base offset zero-padded to 20 digits, as in Kafka.
Index entries are added while appending, one per ``index.interval.bytes`` of
data: when more than that many bytes were appended since the last entry, the
next batch gets an entry (its last offset -> its position), exactly the rule of
Kafka's LogSegment.append and LogSegment.recover, so a rebuilt index equals the
one written while appending.

Reads hand out ``FileRegion``s (file object, position, length) so the network
layer can ``sendfile`` them; a region always starts at a batch boundary and
ends at one.

Segments of a log that was shut down cleanly are opened lazily: nothing but the
file name is looked at until the first read, size query or retention check
touches the segment. That keeps start-up with thousands of segments cheap.

Descriptors: a segment holds one, for its ``.log``, and only from its first
read or append on (the active segment too: a new or reopened one is not
opened until written or read); size queries use stat(), and the index files
hold none (index.py). So a broker with 10,000 idle partitions starts with
almost no descriptors. The files open are bounded by the process's
DescriptorCache (fd_cache.py): past ``samsa.log.open.segment.files.max`` the
least recently used segment lets its file go and opens it again when next
used. Whoever uses a descriptor holds its file object meanwhile (a region, a
scanner, an append's local), so a file let go by another thread stays open
under them until they are done.

Concurrency: only the owning Log's appender mutates a segment (under the log's
lock). Readers use the size the Log published for the active segment and the
lock-free index arrays; the lazy open is guarded by a small per-segment lock.
"""
from __future__ import annotations

import bisect
import contextlib
import io
import logging
import os
import random
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from samsa.protocol.model import Buf
from samsa.storage.checkpoints import sync_file, sync_path
from samsa.storage.entries import Entry, EntryScanner
from samsa.storage.fd_cache import DESCRIPTORS, RegionFile, SegmentFile
from samsa.storage.index import OffsetIndex, TimeIndex
from samsa.storage.txn_index import AbortedTxn, TransactionIndex

if TYPE_CHECKING:
    from samsa.config.topic import TopicConfig

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
INT32_MAX = 0x7FFFFFFF
_pwrite = os.pwrite
_pwritev = os.pwritev
_touch = DESCRIPTORS.touch


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class FileRegion:
    """A byte range of a segment file, for sendfile: ``file`` has ``fileno()``
    (a RegionFile: the descriptor is taken when the region is first used)."""

    __slots__ = ("file", "position", "length")

    def __init__(self, file: io.FileIO | RegionFile, position: int, length: int):
        self.file = file
        self.position = position
        self.length = length

    def read_bytes(self) -> bytes:
        fd = self.file.fileno()
        out = os.pread(fd, self.length, self.position)
        if len(out) < self.length:  # pread may return short on huge ranges
            parts = [out]
            got = len(out)
            while got < self.length:
                chunk = os.pread(fd, self.length - got, self.position + got)
                if not chunk:
                    break
                parts.append(chunk)
                got += len(chunk)
            out = b"".join(parts)
        return out

    def __repr__(self) -> str:
        return f"FileRegion({getattr(self.file, 'name', self.file)!r}, {self.position}, {self.length})"


class LogSegment:
    def __init__(self, directory: str, base_offset: int, config: TopicConfig, *,
                 create: bool = False):
        self.dir = directory
        self.base_offset = base_offset
        # (one join for the four names: a start makes a segment per partition)
        stem = os.path.join(directory, segment_name(base_offset))
        self.log_path = stem + LOG_SUFFIX
        self.index_path = stem + INDEX_SUFFIX
        self.time_index_path = stem + TIME_INDEX_SUFFIX
        self.txn_index = TransactionIndex(stem + TXN_INDEX_SUFFIX)
        self.max_index_bytes = config.segment_index_bytes
        self.index_interval_bytes = config.index_interval_bytes
        self.roll_jitter_ms = (random.randrange(min(config.segment_jitter_ms, config.segment_ms))
                               if config.segment_jitter_ms > 0 and config.segment_ms > 0 else 0)
        self.created_ms = int(time.time() * 1000)
        self.rolling_based_timestamp: int | None = None
        self._open_lock = threading.Lock()
        self._file: SegmentFile | None = None
        self._ino: int | None = None  # the .log's inode, from its first open: known again by it
        self._size: int | None = None
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._max_ts: int | None = None
        self._offset_of_max_ts = base_offset
        self._bytes_since_last_index = 0
        self.active = False
        self.deleted = False
        # the offset after the last batch, as the last recover() found it
        self.recovered_next_offset: int | None = None
        if create:
            os.close(os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644))
            self._size = 0
            # (index files made by the first append: see storage/index.py)
            self._offset_index = OffsetIndex(self.index_path, base_offset, self.max_index_bytes,
                                             writable=True, lazy=True)
            self._time_index = TimeIndex(self.time_index_path, base_offset, self.max_index_bytes,
                                         writable=True, lazy=True)
            self._max_ts = -1
            self.active = True

    # -- lazy opening -------------------------------------------------------------
    @property
    def file(self) -> SegmentFile:
        """The open ``.log`` (opened now if it is not). Hold the object, not just
        its descriptor, for as long as the descriptor is used (module doc)."""
        f = self._file
        if f is None:
            with self._open_lock:
                f = self._file_locked()
        else:
            DESCRIPTORS.touch(self)
        return f

    def release_file(self) -> None:
        """(The descriptor cache.) Let the file go; its descriptor closes once
        no one holds it, and the next use opens the file again."""
        self._file = None

    @contextlib.contextmanager
    def borrowed_fd(self) -> Iterator[int]:
        """A descriptor to read the .log with for a moment (start-up scans):
        the segment's own if open, else one closed again afterwards, so that
        loading a log leaves no descriptor behind."""
        f = self._file
        if f is not None:
            yield f.fileno()   # (f, held here, keeps it open)
            return
        fd = os.open(self.log_path, os.O_RDONLY)
        try:
            yield fd
        finally:
            os.close(fd)

    @property
    def size(self) -> int:
        s = self._size
        if s is None:
            f = self._file
            s = self._size = (os.fstat(f.fileno()) if f is not None
                              else os.stat(self.log_path)).st_size
        return s

    @property
    def offset_index(self) -> OffsetIndex:
        idx = self._offset_index
        if idx is None:
            idx = self._ensure_indexes()[0]
        return idx

    @property
    def time_index(self) -> TimeIndex:
        idx = self._time_index
        if idx is None:
            idx = self._ensure_indexes()[1]
        return idx

    def _ensure_indexes(self) -> tuple[OffsetIndex, TimeIndex]:
        """Open both indexes on first use (read-only); they are loaded together."""
        with self._open_lock:
            oi, ti = self._offset_index, self._time_index
            if oi is None or ti is None:
                oi, ti = self._load_indexes_locked(writable=False)
            return oi, ti

    def _load_indexes_locked(self, writable: bool) -> tuple[OffsetIndex, TimeIndex]:
        oi = OffsetIndex(self.index_path, self.base_offset, self.max_index_bytes, writable=writable)
        ti = TimeIndex(self.time_index_path, self.base_offset, self.max_index_bytes, writable=writable)
        if self.size == 0 and (oi.corrupt or ti.corrupt or oi.entries or ti.entries):
            # An empty segment has nothing to index: its missing (never written,
            # see storage/index.py), torn or stale index files are made anew by
            # its first append.
            oi = OffsetIndex(self.index_path, self.base_offset, self.max_index_bytes,
                             writable=writable, lazy=True)
            ti = TimeIndex(self.time_index_path, self.base_offset, self.max_index_bytes,
                           writable=writable, lazy=True)
        elif oi.corrupt or ti.corrupt or not self._index_sane(oi, ti):
            log.warning("rebuilding index of segment %s", self.log_path)
            oi.close(trim=False)
            ti.close(trim=False)
            oi = OffsetIndex(self.index_path, self.base_offset, self.max_index_bytes,
                             writable=True, create=True)
            ti = TimeIndex(self.time_index_path, self.base_offset, self.max_index_bytes,
                           writable=True, create=True)
            f = self._file_locked()
            self._rebuild_into(f, oi, ti, os.fstat(f.fileno()).st_size)
            if not writable:
                oi.make_readonly()
                ti.make_readonly()
        self._offset_index, self._time_index = oi, ti
        return oi, ti

    def build_indexes(self) -> None:
        """Index a segment whose index files do not exist yet (a swapped-in segment)."""
        with self._open_lock:
            oi = OffsetIndex(self.index_path, self.base_offset, self.max_index_bytes,
                             writable=True, create=True)
            ti = TimeIndex(self.time_index_path, self.base_offset, self.max_index_bytes,
                           writable=True, create=True)
            f = self._file_locked()
            self._rebuild_into(f, oi, ti, os.fstat(f.fileno()).st_size)
            oi.make_readonly()
            ti.make_readonly()
            self._offset_index, self._time_index = oi, ti

    def _file_locked(self) -> SegmentFile:
        f = self._file
        if f is None:
            # The active segment's one descriptor serves appends and reads.
            f = self._reopen("r+b" if self.active else "rb")
            self._file = f
            DESCRIPTORS.admit(self)
        return f

    def _reopen(self, mode: str) -> SegmentFile:
        """This segment's .log, opened again after the cache let it go: by its
        .deleted name first once retired (a cleaner's swap or a truncation's
        new segment may have put another file at its plain name), and only
        if it is the same inode as first opened."""
        names = ([self.log_path + DELETED_SUFFIX, self.log_path] if self.deleted
                 else [self.log_path])
        for name in names:
            try:
                f = SegmentFile(name, mode)
            except FileNotFoundError:
                continue
            if self._ino is None:
                self._ino = f.ino
            if f.ino == self._ino:
                return f
            f.close()   # another segment's file by that name now
        raise FileNotFoundError(2, "segment file gone", self.log_path)

    def _index_sane(self, oi: OffsetIndex, ti: TimeIndex) -> bool:
        size = self.size
        if oi.entries and oi.values[-1] >= size:
            return False
        if ti.entries and ti.values[-1] < self.base_offset:
            return False
        return True

    def _rebuild_into(self, f: io.FileIO, oi: OffsetIndex, ti: TimeIndex, end: int) -> int:
        """Index the valid prefix of the file ``f`` (no truncation); returns its end."""
        scanner = EntryScanner(f, 0, end, check_crc=False)
        last_index_pos = 0
        max_ts, off_of_max = -1, self.base_offset
        for e in scanner:
            if e.max_timestamp > max_ts:
                max_ts, off_of_max = e.max_timestamp, e.last_offset
            if e.position - last_index_pos > self.index_interval_bytes:
                oi.append(e.last_offset, e.position)
                ti.maybe_append(max_ts, off_of_max)
                last_index_pos = e.position
        ti.maybe_append(max_ts, off_of_max, skip_full_check=True)
        self._max_ts, self._offset_of_max_ts = max_ts, off_of_max
        return scanner.valid_end

    def open_active(self, load_indexes: bool = True) -> None:
        """Reopen an existing segment for appending (the last one of a log).

        ``load_indexes=False`` when recover() is about to rebuild them anyway.
        """
        with self._open_lock:
            if self._file is not None:
                # (let go, not closed: regions handed out keep reading through it)
                self._file = None
                DESCRIPTORS.forget(self)
            if not os.path.exists(self.log_path):
                os.close(os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644))
            self._size = os.stat(self.log_path).st_size
            for old in (self._offset_index, self._time_index):  # (both or neither)
                if old is not None:
                    old.close(trim=False)
            self._offset_index = self._time_index = None
            self.active = True
            if not load_indexes:
                return
            # a rebuilt index was opened with create=True; make sure both are writable
            for idx in self._load_indexes_locked(writable=True):
                if not idx.writable:
                    idx.writable = True
                    idx.preallocate()
            self.active = True

    # -- timestamps ----------------------------------------------------------------
    @property
    def max_timestamp(self) -> int:
        if self._max_ts is None:
            ts, off = self.time_index.last_entry()
            if self._max_ts is None:
                self._max_ts, self._offset_of_max_ts = ts, off
        return self._max_ts

    @property
    def offset_of_max_timestamp(self) -> int:
        self.max_timestamp
        return self._offset_of_max_ts

    def largest_timestamp(self) -> int:
        """For time retention: max timestamp, or the file's mtime when none is known."""
        ts = self.max_timestamp
        if ts > 0:
            return ts
        try:
            return int(os.stat(self.log_path).st_mtime * 1000)
        except FileNotFoundError:
            return int(time.time() * 1000)

    # -- appending (caller holds the log's lock) -------------------------------------
    def should_roll(self, config: TopicConfig, append_size: int, max_ts_in_append: int,
                    last_offset: int, now_ms: int | None = None) -> str | None:
        """Why this (active) segment must roll before the append, or None.
        ``now_ms`` (read from the clock when None) matters only for a segment
        whose batches carry no timestamps."""
        size = self._size if self._size is not None else self.size
        if size > config.segment_bytes - append_size:
            return "segment.bytes"
        if size > 0:
            if self.rolling_based_timestamp is None:
                first = next(iter(EntryScanner(self.file, 0, size)), None)
                self.rolling_based_timestamp = first.max_timestamp if first else -1
            if self.rolling_based_timestamp is not None and self.rolling_based_timestamp >= 0:
                waited = max_ts_in_append - self.rolling_based_timestamp
            else:
                if now_ms is None:
                    now_ms = int(time.time() * 1000)
                waited = now_ms - self.created_ms
            if waited > config.segment_ms - self.roll_jitter_ms:
                return "segment.ms"
        oi = self._offset_index or self.offset_index
        ti = self._time_index or self.time_index
        if len(oi.keys) >= oi.max_entries or len(ti.keys) >= ti.max_entries:
            return "index full"
        if last_offset - self.base_offset > INT32_MAX or last_offset < self.base_offset:
            return "relative offset overflow"
        return None

    def make_index_files(self) -> None:
        """A lazily created segment holding records: its index files exist from
        now on (storage/index.py), holding exactly their entries and grown to
        their preallocated size when entries are next written to them, as a
        reopened active segment's. Its log asks for them after the first
        append, off the append's path (Log._make_index_files: creating two
        files costs a produce a millisecond or two); a roll or a close makes
        them if that has not happened yet. A stop then writes the time
        index's closing entry and nothing else: no file to create, none to
        trim."""
        self._write_absent_indexes()

    @property
    def owes_index_files(self) -> bool:
        """Active, holding records, and an index file not made yet (its log's
        scheduler has not got to it): its close will create it."""
        return bool(self.active and self._size and any(
            idx is not None and idx.absent and idx.writable
            for idx in (self._offset_index, self._time_index)))

    def _write_absent_indexes(self) -> None:
        for idx in (self._offset_index, self._time_index):
            if idx is not None:
                idx.write_if_absent()

    def append(self, parts: Sequence[Buf], total: int,
               batches: Sequence[tuple[int, int, int]]) -> int:
        """Write ``parts`` (buffers holding whole batches, ``total`` bytes) at the
        end with one pwritev; ``batches`` is a list of (size, last_offset,
        max_timestamp) in order. Returns the new size.
        """
        pos = self._size
        assert pos is not None  # an active segment's size is known: created, opened or recovered
        self._write(parts, total, pos)
        if self.rolling_based_timestamp is None:
            self.rolling_based_timestamp = batches[0][2]
        max_ts = self._max_ts
        if max_ts is None:
            max_ts = self.max_timestamp
        interval = self.index_interval_bytes
        since = self._bytes_since_last_index
        for size, last_offset, ts in batches:
            if ts > max_ts:
                max_ts = self._max_ts = ts
                self._offset_of_max_ts = last_offset
            if since > interval:
                # (the properties: an active segment's indexes are loaded, these return them)
                self.offset_index.append(last_offset, pos)
                self.time_index.maybe_append(max_ts, self._offset_of_max_ts)
                since = 0
            pos += size
            since += size
        self._bytes_since_last_index = since
        self._size = pos
        return pos

    def _write(self, parts: Sequence[Buf], total: int, pos: int) -> None:
        """``parts`` (``total`` bytes) written at ``pos``, with one pwritev."""
        f = self._file   # (held until the write is done: see the module doc)
        if f is None:
            f = self.file
        else:
            _touch(self)
        fd = f.fileno()
        written = _pwritev(fd, parts, pos)
        if written < total:  # rare: regular files take a whole write at once
            rest = b"".join(bytes(p) for p in parts)
            view = memoryview(rest)
            while written < total:
                written += _pwrite(fd, view[written:], pos + written)

    def append_one(self, parts: Sequence[Buf], total: int, last_offset: int, ts: int) -> int:
        """``append`` of exactly one batch of ``total`` bytes (the produce fast
        path): same write, same index rule, no per-batch list."""
        pos = self._size
        assert pos is not None  # as in append
        self._write(parts, total, pos)
        if self.rolling_based_timestamp is None:
            self.rolling_based_timestamp = ts
        max_ts = self._max_ts
        if max_ts is None:
            max_ts = self.max_timestamp
        if ts > max_ts:
            max_ts = self._max_ts = ts
            self._offset_of_max_ts = last_offset
        since = self._bytes_since_last_index
        if since > self.index_interval_bytes:
            self.offset_index.append(last_offset, pos)
            self.time_index.maybe_append(max_ts, self._offset_of_max_ts)
            since = 0
        self._bytes_since_last_index = since + total
        pos += total
        self._size = pos
        return pos

    def on_become_inactive(self) -> None:
        """Roll: final time index entry, trim both indexes, stop writing to them."""
        if self._max_ts is not None and self._max_ts >= 0:
            self.time_index.maybe_append(self._max_ts, self._offset_of_max_ts, skip_full_check=True)
        if self._size:
            self._write_absent_indexes()
        self.offset_index.make_readonly()
        self.time_index.make_readonly()
        self.active = False

    def flush(self) -> None:
        f = self._file
        if f is not None and not f.closed:
            sync_file(f.fileno(), self.log_path)
        elif not self.deleted:
            # Let go by the cache since it was written, perhaps: the data is in
            # the page cache and any descriptor syncs it. Always, not when a
            # flag says it was written: a flush between an append's flag and
            # its write would clear the flag for bytes not written yet, and the
            # recovery point would pass them unsynced. (A log flushes only the
            # segments past its recovery point.)
            sync_path(self.log_path)
        for idx in (self._offset_index, self._time_index):
            if idx is not None and idx.writable:
                idx.flush()
        self.txn_index.flush()

    def close(self, trim: bool = True) -> None:
        with self._open_lock:
            try:
                if (trim and self.active and self._max_ts is not None and self._max_ts >= 0
                        and self._time_index):
                    self._time_index.maybe_append(self._max_ts, self._offset_of_max_ts,
                                                  skip_full_check=True)
                if trim and self.active and self._size:
                    self._write_absent_indexes()
                for idx in (self._offset_index, self._time_index):
                    if idx is not None:
                        idx.close(trim=trim)
            finally:
                # The descriptor goes even when an index write failed (a full disk).
                f = self._file
                if f is not None:
                    self._file = None
                    DESCRIPTORS.forget(self)
                    f.close()
                self.active = False

    # -- reading ----------------------------------------------------------------------
    def translate_offset(self, offset: int, max_position: int) -> tuple[int, int] | None:
        """(position, size) of the first batch whose last offset >= ``offset``."""
        found, _ = self._scan_to(offset, max_position)
        return found

    def position_below(self, offset: int, max_position: int) -> tuple[int, bool]:
        """The position up to which every batch is below ``offset``, and whether a
        batch reaching ``offset`` ends the range there (else the range ends after
        the last whole batch read before ``max_position``).

        A bound for lock-free reads under the high watermark: a truncation above
        it may cut this file and appends may fill it again while it is read, so
        the bound is what the scan saw, never the ``max_position`` it was given.
        """
        found, scanned_end = self._scan_to(offset, max_position)
        return (found[0], True) if found is not None else (scanned_end, False)

    def _scan_to(self, offset: int, max_position: int) -> tuple[tuple[int, int] | None, int]:
        _, start = self.offset_index.lookup(offset)
        if start >= max_position:
            start = 0
        scanner = EntryScanner(self.file, start, max_position)
        for e in scanner:
            if e.last_offset >= offset:
                return (e.position, e.size), e.position
        return None, scanner.valid_end

    def read(self, start_offset: int, max_bytes: int, max_position: int | None = None,
             min_one_batch: bool = True) -> FileRegion | None:
        """Region from the batch holding ``start_offset``, ending on a batch boundary.

        Up to ``max_bytes`` of whole batches; if the first batch alone is larger
        it is returned whole when ``min_one_batch``, else nothing is.
        """
        if max_position is None:
            max_position = self.size
        found = self.translate_offset(start_offset, max_position)
        if found is None:
            return None
        start, first_size = found
        f = self.file
        if first_size > max_bytes:
            # nothing fits: an empty region (not None, so the log does not look further)
            return FileRegion(RegionFile(f), start, first_size if min_one_batch else 0)
        limit = start + max_bytes
        if limit >= max_position:
            return FileRegion(RegionFile(f), start, max_position - start)
        scan_from = max(start, self.offset_index.floor_position(limit))
        scanner = EntryScanner(f, scan_from, limit)
        for _ in scanner:
            pass
        end = max(scanner.valid_end, start + first_size)
        return FileRegion(RegionFile(f), start, end - start)

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int
                                 ) -> tuple[Entry, bytes] | None:
        """First batch at/after ``start_offset`` whose max timestamp >= ``timestamp``:
        returns its Entry (and raw bytes through the scanner) or None."""
        _, indexed_offset = self.time_index.lookup(timestamp)
        _, pos = self.offset_index.lookup(max(indexed_offset, start_offset))
        scanner = EntryScanner(self.file, pos, self.size, keep_data=True)
        for e in scanner:
            if e.last_offset >= start_offset and e.max_timestamp >= timestamp:
                return e, bytes(scanner.last_data)
        return None

    def read_next_offset(self) -> int:
        """Offset after the last batch (scans from the last index entry)."""
        _, pos = self.offset_index.last_entry()
        if pos >= self.size:
            return self.base_offset   # an empty segment: nothing to open and scan
        last = None
        with self.borrowed_fd() as fd:
            for e in EntryScanner(fd, pos, self.size):
                last = e
        return last.next_offset if last is not None else self.base_offset

    # -- recovery -------------------------------------------------------------------
    def recover(self, on_batch: Callable[[Entry, memoryview], None] | None = None
                ) -> tuple[int, str | None]:
        """Check every entry (size, magic, CRC, offsets), rebuild both indexes and
        truncate the file at the first invalid byte. Returns (bytes truncated, reason).
        ``on_batch(entry, data)`` is called for each valid entry with its bytes
        (producer state rebuild, which also re-creates the ``.txnindex``: it is
        emptied first, as Kafka's recover resets it).
        """
        # A segment opened just to be checked is closed again afterwards: after a
        # crash every partition's last segment is recovered, and holding them
        # all open would cost a descriptor per partition before any client came.
        f = self._file
        opened_here = f is None
        if f is None:
            # (not through the descriptor cache: it is not kept)
            f = SegmentFile(self.log_path, "rb")
        try:
            return self._recover(f, on_batch)
        finally:
            if opened_here:
                f.close()

    def _recover(self, f: io.FileIO, on_batch: Callable[[Entry, memoryview], None] | None
                 ) -> tuple[int, str | None]:
        size = os.fstat(f.fileno()).st_size
        writable = self.active
        with self._open_lock:
            for idx in (self._offset_index, self._time_index):
                if idx is not None:
                    idx.close(trim=False)
        # Rebuilt in memory first; the files are written only where they do not
        # already hold the same entries (keep_rebuilt). An empty segment's are
        # made by its first append (storage/index.py).
        oi = OffsetIndex(self.index_path, self.base_offset, self.max_index_bytes,
                         writable=False, lazy=True)
        ti = TimeIndex(self.time_index_path, self.base_offset, self.max_index_bytes,
                       writable=False, lazy=True)
        self.txn_index.reset()
        scanner = EntryScanner(f, 0, size, check_crc=True)
        last_index_pos = 0
        max_ts, off_of_max = -1, self.base_offset
        prev_last = self.base_offset - 1
        next_offset = self.base_offset
        reason = None
        valid_end = 0
        first_ts = None
        for e in scanner:
            if (e.last_offset <= prev_last or e.last_offset - self.base_offset > INT32_MAX
                    or (e.header is not None and e.base_offset <= prev_last)):
                reason = f"offset {e.last_offset} out of order at position {e.position}"
                break
            prev_last = e.last_offset
            if first_ts is None:
                first_ts = e.max_timestamp
            if e.max_timestamp > max_ts:
                max_ts, off_of_max = e.max_timestamp, e.last_offset
            if e.position - last_index_pos > self.index_interval_bytes:
                oi.append(e.last_offset, e.position)
                ti.maybe_append(max_ts, off_of_max)
                last_index_pos = e.position
            valid_end = e.position + e.size
            next_offset = e.next_offset
            if on_batch is not None:
                on_batch(e, scanner.last_data)
        else:
            reason = scanner.error or ("incomplete entry at the end" if scanner.truncated else None)
        truncated = size - valid_end
        if truncated:
            log.warning("segment %s: truncating %d invalid bytes at position %d (%s)",
                        self.log_path, truncated, valid_end, reason)
            os.truncate(self.log_path, valid_end)
        self._size = valid_end
        self._max_ts, self._offset_of_max_ts = max_ts, off_of_max
        self.rolling_based_timestamp = first_ts
        self._bytes_since_last_index = valid_end - last_index_pos if last_index_pos else valid_end
        self.recovered_next_offset = next_offset
        if not writable:
            ti.maybe_append(max_ts, off_of_max, skip_full_check=True)
        if valid_end > 0:
            oi.keep_rebuilt(writable)
            ti.keep_rebuilt(writable, final=(max_ts, off_of_max) if writable else None)
        elif writable:
            # nothing to index: lazy files, made (preallocated) by the first append
            oi.writable = ti.writable = True
        with self._open_lock:
            self._offset_index, self._time_index = oi, ti
        return truncated, (reason if truncated else None)

    # -- truncation (a follower cutting its log at a divergence point) ---------------
    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding an offset >= ``offset`` (whole batches: one
        that straddles ``offset`` goes too) and make this the active segment.
        Caller holds the log's lock. Returns the offset after the last batch kept
        (the base offset when none is).

        Kafka's LogSegment.truncateTo: the .log is cut at the batch's position,
        offset/time/txn index entries beyond it go, both indexes are preallocated
        again, and the largest timestamp is recomputed from the last time index
        entry kept plus a scan of the batches after it.
        """
        with self._open_lock:
            if not self.active:
                f = self._file
                if f is not None and "+" not in f.mode:
                    # Opened "rb" (lazily, as a segment loaded at start-up):
                    # appends need "r+b". Let go, not closed: regions handed
                    # to readers before keep reading through it. A rolled
                    # segment kept its "r+b" handle and goes on with it.
                    self._file = None
                    DESCRIPTORS.forget(self)
                self.active = True
        oi = self.offset_index
        ti = self.time_index
        oi.make_writable()
        ti.make_writable()
        old_max_ts = self.max_timestamp
        f = self.file
        fd = f.fileno()
        size = os.fstat(fd).st_size
        found = self.translate_offset(offset, size)
        pos = found[0] if found is not None else size
        if pos < size:
            os.ftruncate(fd, pos)
        self._size = pos
        n = bisect.bisect_left(oi.values, pos, 0, len(oi.keys))
        oi.truncate_entries(n)
        # time index values are batches' last offsets: the kept batches' are < offset
        ti.truncate_entries(bisect.bisect_left(ti.values, offset, 0, len(ti.keys)))
        last_index_pos = oi.values[n - 1] if n else 0
        # Kafka's loadLargestTimestamp: the time index's last entry is a running
        # maximum, so only batches from the one holding its offset on can beat it.
        scan_from = last_index_pos
        max_ts, off_of_max = -1, self.base_offset
        if old_max_ts >= 0:
            te_ts, te_off = ti.last_entry()
            if te_ts >= 0:
                max_ts, off_of_max = te_ts, te_off
                scan_from = min(scan_from, oi.lookup(te_off)[1])
            else:
                scan_from = 0
        last = None
        for e in EntryScanner(f, scan_from, pos):
            last = e
            if e.max_timestamp > max_ts:
                max_ts, off_of_max = e.max_timestamp, e.last_offset
        next_offset = last.next_offset if last is not None else self.base_offset
        self._max_ts, self._offset_of_max_ts = max_ts, off_of_max
        self._bytes_since_last_index = pos - last_index_pos
        if pos == 0:
            self.rolling_based_timestamp = None
            self.created_ms = int(time.time() * 1000)
        self.txn_index.truncate_to(next_offset)
        return next_offset

    @property
    def txn_index_path(self) -> str:
        return os.path.join(self.dir, segment_name(self.base_offset) + TXN_INDEX_SUFFIX)

    # -- transactions -----------------------------------------------------------------
    def append_aborted_txn(self, producer_id: int, first_offset: int, last_offset: int,
                           last_stable_offset: int) -> None:
        """An ABORT marker landed in this segment (Kafka's updateTxnIndex)."""
        self.txn_index.append(AbortedTxn(producer_id, first_offset, last_offset,
                                         last_stable_offset))

    # -- deletion -------------------------------------------------------------------
    def all_paths(self) -> list[str]:
        base = os.path.join(self.dir, segment_name(self.base_offset))
        return [base + s for s in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)]

    def rename_to_deleted(self) -> list[str]:
        """Kafka's async delete, step 1: ``X.log`` -> ``X.log.deleted`` (files stay open,
        so regions already handed to readers remain valid until the delayed delete)."""
        for idx in (self.offset_index, self.time_index):
            # Written out and detached from their path now: a later segment may
            # take the same name (after a truncation), and closing this one must
            # not touch that segment's files.
            if idx.writable:
                idx.make_readonly()
        # (from now on the file opens by its .deleted name: _file_locked)
        self.deleted = True
        self.txn_index.renamed(self.txn_index.path + DELETED_SUFFIX)
        out = []
        for p in self.all_paths():
            try:
                os.rename(p, p + DELETED_SUFFIX)
                out.append(p + DELETED_SUFFIX)
            except FileNotFoundError:
                pass
        return out

    def delete_now(self, renamed: list[str] | None = None) -> None:
        self.close()
        for p in renamed if renamed is not None else self.all_paths():
            try:
                os.unlink(p)
            except FileNotFoundError:
                pass
