"""One partition's log: the directory ``<topic>-<partition>`` and its segments.

Locking (appends and reads come from different event-loop threads):

- ``Log._lock`` (one per partition) serialises everything that changes the
  log: append (validation, producer-state checks, offset assignment, the file
  write, index entries), roll, retention, delete_records_before, close. An
  append holds it for the duration of one ``os.pwrite`` plus header patching;
  listeners run after it is released.
- Readers take no lock. Everything a reader needs is published by the appender
  as immutable values replaced in one assignment (atomic under the GIL):
  ``_segs`` (tuple of segments, tuple of base offsets) and ``_end``
  (log end offset, active segment, its size in bytes). The appender writes the
  bytes first and publishes ``_end`` afterwards, so a reader never sees an
  offset whose bytes are not in the page cache, and it bounds its scan by the
  published size, so it never returns a half-written batch. Index arrays are
  appended value-before-key and read by length, so lookups are lock-free too.
- Flushing (fsync) holds only ``_flush_lock``, never ``_lock``: fsync of a file
  descriptor is safe while another thread writes to it, so a slow disk flush
  never blocks an append or a read. The recovery point only advances to an
  offset whose bytes were written before the fsync started.
- Segments removed by retention/DeleteRecords/truncation are renamed
  ``*.deleted`` and closed only after ``file.delete.delay.ms``, so a FileRegion
  handed to the network layer just before stays valid while it is sent.
- Truncation (``truncate_to``, ``truncate_fully_and_start_at``: a follower
  cutting the log back) holds ``_lock`` and ``_flush_lock`` (so a concurrent
  flush cannot lift the recovery point above the new end). It cuts the file
  and the indexes in place and publishes the shorter ``_end``/``_segs``. A
  reader racing it may still see the bytes being removed (they lie above the
  high watermark, which only replication reads reach) or an index shrinking
  under it, which ``read`` retries; regions of the kept bytes stay valid.

The high watermark is not the log's to move: ``append`` leaves it alone, and
its owner (the partition layer) moves it with ``update_high_watermark``.
Reads take an upper bound (``max_offset``) from their caller.
"""
from __future__ import annotations

import bisect
import contextlib
import enum
import functools
import logging
import os
import struct
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, NamedTuple, Sequence, Union

from samsa.protocol.errors import ProtocolError
from samsa.protocol.records import (CorruptRecordError as _RecCorrupt, InvalidRecordError as _RecInvalid,
                              set_base_offset, set_log_append_time, set_partition_leader_epoch,
                              validate_batches)
from samsa.protocol.records.batch import validate_single_batch
from samsa.storage.checkpoints import (fsync_dir, in_durable_batch, when_durable,
                                       write_partition_metadata)
from samsa.storage.entries import InvalidEntry, entry_is_valid, parse_entry
from samsa.storage.errors import (CorruptRecordError, InvalidRecordError, OffsetOutOfRangeError,
                            OffsetsOutOfOrderError, RecordTooLargeError, StorageError)
from samsa.storage.loader import (SWAP_SUFFIX, LoadedLog, load_log, load_producer_state,
                            new_log, parse_partition_dir)
from samsa.storage.validation import check_records, rules_for
from samsa.storage.producer_state import apply_producer_batch, read_marker
from samsa.storage.entries import Entry
from samsa.storage.segment import INT32_MAX, LOG_SUFFIX, FileRegion, LogSegment
from samsa.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from samsa.config.topic import TopicConfig
    from samsa.protocol.records.batch import BatchHeader
    from samsa.storage.producer_state import ProducerSummary

# what appends take: the request's bytes, or a view of them
Payload = Union[bytes, bytearray, memoryview]

log = logging.getLogger(__name__)

_PREFIX = struct.Struct(">qii")   # baseOffset, batchLength, partitionLeaderEpoch
_tuple_new = tuple.__new__        # NamedTuple without the generated __new__'s Python frame


class AppendOrigin(enum.Enum):
    """Who an append comes from (Kafka's AppendOrigin); it decides what the log
    does to the bytes.

    - CLIENT: a producer. Offsets are assigned, ``leader_epoch`` is stamped,
      the topic's rules apply (max.message.bytes, timestamps, keys on compacted
      topics, LogAppendTime) and idempotent producers' sequences are checked
      (a retried batch is answered as a duplicate with its original offsets).
    - COORDINATOR: the broker's own coordinators writing their internal topics,
      and transaction markers (control batches, which a CLIENT may not write);
      otherwise treated as CLIENT.
    - REPLICATION: a follower copying batches read from the leader's log. Every
      byte is kept (offsets, partitionLeaderEpoch, timestamps, CRC); only the
      structure and CRCs are checked, and producer state and the leader epoch
      cache are updated from the batches themselves.
    """

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


_REPLICATION = AppendOrigin.REPLICATION
_CLIENT = AppendOrigin.CLIENT
_CONTROL_MASK = 0x20
_CLIENT_CONTROL = "Clients are not allowed to write control records"
_FIRST = (0,)                     # positions of a one-batch payload


class AppendResult(NamedTuple):
    first_offset: int
    last_offset: int
    log_append_time: int      # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    duplicate: bool = False


class ReadResult(NamedTuple):
    regions: list[FileRegion]
    high_watermark: int
    log_start_offset: int
    last_stable_offset: int


def _default_scheduler(fn: Callable[[], None], delay_ms: int) -> None:
    if delay_ms <= 0:
        fn()
        return
    t = threading.Timer(delay_ms / 1000.0, fn)
    t.daemon = True
    t.start()


class Log:
    """A partition log. Construct through ``Log.open`` (or LogManager)."""

    # The first offset of the earliest transaction not yet stable (None: all
    # stable), published like _end for lock-free readers; see last_stable_offset.
    _first_unstable: int | None
    # (False while a storage/lazy_log.py UnloadedLog waits for its first use)
    loaded = True

    def __init__(self, directory: str, topic: str, partition: int, config: TopicConfig, *,
                 topic_id: uuid.UUID | None = None, recovery_point: int = 0,
                 log_start_offset: int | None = None,
                 high_watermark: int | None = None, clean_shutdown: bool = True,
                 new: bool = False,
                 scheduler: Callable[[Callable[[], None], int], None] | None = None,
                 flush_requester: Callable[["Log"], None] | None = None,
                 checkpoint_requester: Callable[["Log"], None] | None = None):
        self._setup(directory, topic, partition, config, scheduler, flush_requester,
                    checkpoint_requester)
        self.topic_id = topic_id
        # new: ``directory`` was just created empty (a partition added here), and
        # there is nothing to load; thousands of them come with one topic
        self._run_on(new_log(directory, config, log_start_offset=log_start_offset) if new
                     else load_log(directory, config, recovery_point=recovery_point,
                                   log_start_offset=log_start_offset,
                                   high_watermark=high_watermark, clean_shutdown=clean_shutdown))

    def _setup(self, directory: str, topic: str, partition: int, config: TopicConfig,
               scheduler: Callable[[Callable[[], None], int], None] | None,
               flush_requester: Callable[["Log"], None] | None,
               checkpoint_requester: Callable[["Log"], None] | None) -> None:
        """What a log is before its directory is read (storage/lazy_log.py's
        UnloadedLog stops here until first use)."""
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.config = config
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._listeners: list[Callable[["Log"], None]] = []
        self._schedule = scheduler or _default_scheduler
        self._request_flush = flush_requester
        self._request_checkpoint = checkpoint_requester
        self.closed = False
        # Bumped by every truncation that removes data: a copy of this log made
        # alongside it (a move to another log dir) knows its bytes may no
        # longer match and starts over.
        self.truncations = 0
        self.last_flush_ms = int(time.time() * 1000)
        # a new segment's first append: its index files are to be made (_appended)
        self._index_files_due: LogSegment | None = None

    def _run_on(self, loaded: LoadedLog) -> None:
        """Take over what the loader found in the directory (construction, or
        ``reopen_at``)."""
        segs = loaded.segments
        active = segs[-1]
        self.log_start_offset = loaded.log_start_offset
        self.high_watermark = loaded.high_watermark
        self.recovery_point = loaded.recovery_point
        self.producer_state = loaded.producer_state
        self.leader_epochs = loaded.leader_epochs
        self._refresh_unstable()
        # (published last: a log loaded on first use is read by other threads as
        # soon as they see its segments; storage/lazy_log.py)
        self._segs = (segs, tuple(s.base_offset for s in segs))
        self._end = (loaded.log_end_offset, active, active.size)

    def _refresh_unstable(self) -> None:
        """(Lock held, or loading.) Completed transactions below the high
        watermark are stable; publish the first unstable offset, never below
        the log start (Kafka's maybeIncrementFirstUnstableOffset)."""
        ps = self.producer_state
        if ps.unreplicated:
            ps.on_high_watermark(self.high_watermark)
        fu = ps.first_unstable_offset()
        if fu is not None and fu < self.log_start_offset:
            fu = self.log_start_offset
        self._first_unstable = fu

    def load(self) -> None:
        """(Loaded already: see storage/lazy_log.py.)"""

    def knows_end(self) -> bool:
        """Whether ``log_end_offset`` answers without reading the directory
        (always, once loaded: see storage/lazy_log.py)."""
        return True

    def offset_to_checkpoint(self, name: str) -> int | None:
        """The value of attribute ``name`` (recovery_point, log_start_offset,
        high_watermark) that its checkpoint file is to hold (None: none)."""
        value: int = getattr(self, name)
        return value

    @classmethod
    def open(cls, directory: str, config: TopicConfig, **kw: Any) -> "Log":
        topic, partition = parse_partition_dir(os.path.basename(os.path.normpath(directory)))
        return cls(directory, topic, partition, config, **kw)

    # ------------------------------------------------------------------ properties
    @property
    def config(self) -> TopicConfig:
        return self._config_fast[0]

    @config.setter
    def config(self, config: TopicConfig) -> None:
        # Published together with the flag append's fast path reads (one assignment,
        # so an append never pairs a new config with an old flag): one batch may take
        # that path when nothing config-dependent needs the records or a rewrite.
        # The record rules ride in the same tuple, for the same reason.
        rules = rules_for(config)
        self._config_fast = (config, not rules.any
                             and config.message_timestamp_type != "LogAppendTime", rules)

    @property
    def log_end_offset(self) -> int:
        return self._end[0]

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return self._segs[0]

    @property
    def first_unstable_offset(self) -> int | None:
        return self._first_unstable

    @property
    def last_stable_offset(self) -> int:
        """What read_committed consumers may read up to (exclusive): the first
        offset of the earliest undecided (or decided but not yet replicated)
        transaction, or the high watermark if that comes first (Kafka's
        UnifiedLog.lastStableOffset). Lock-free."""
        hw = self.high_watermark
        fu = self._first_unstable
        return hw if fu is None or fu >= hw else fu

    @property
    def active_segment(self) -> LogSegment:
        return self._end[1]

    @property
    def owes_index_files(self) -> bool:
        """Whether its close will create index files (LogSegment.owes_index_files);
        a log not loaded took no append, so owes none."""
        return self.loaded and self._end[1].owes_index_files

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segs[0])

    def add_append_listener(self, callback: Callable[["Log"], None]) -> None:
        self._listeners.append(callback)

    def remove_append_listener(self, callback: Callable[["Log"], None]) -> None:
        try:
            self._listeners.remove(callback)
        except ValueError:
            pass

    # ------------------------------------------------------------------ append
    def append(self, payload: Payload, leader_epoch: int = 0, *,
               origin: AppendOrigin = AppendOrigin.CLIENT, txn_version: int = 0) -> AppendResult:
        """Validate, assign offsets, write. Nothing is written when anything fails.

        ``origin`` says who the bytes come from (see AppendOrigin): CLIENT and
        COORDINATOR appends get offsets assigned and ``leader_epoch`` stamped;
        a REPLICATION append keeps the leader's bytes unchanged (``leader_epoch``
        is ignored: each batch carries its own), see ``_append_replicated``.
        No append moves the high watermark (``update_high_watermark`` does).
        Control batches (transaction markers) come only from the COORDINATOR;
        ``txn_version`` is their WriteTxnMarkers TransactionVersion.
        This is the produce hot path: keep per-call work minimal.

        Every origin ends in ``_write`` (roll, write, producer state, leader
        epoch, publish) and ``_appended`` (flush, listeners); CLIENT and
        COORDINATOR appends pass ``_append_assigned`` (sizes, control
        batches, producer checks, offsets) first. The one-batch fast path
        below only saves the general walk over the payload when nothing
        config-dependent needs the records: it gets the same header the walk
        would, and every check and the write are the same code.
        """
        if origin is _REPLICATION:
            return self._append_replicated(payload)
        cfg, fast, rules = self._config_fast
        now_ms = int(time.time() * 1000)
        if fast:
            # One batch (what clients send per partition). Anything unusual
            # (several batches, a bad one, an odd buffer) goes on to the general
            # walk, which then gives the verdict.
            mv: memoryview | None
            if isinstance(payload, memoryview):   # (memoryview has no subclasses)
                mv = payload if (payload.ndim == 1 and payload.itemsize == 1
                                 and payload.c_contiguous) else None
            else:
                t = type(payload)
                mv = memoryview(payload) if (t is bytes or t is bytearray) else None
            if mv is not None:
                h = validate_single_batch(mv)
                if h is not None:
                    return self._append_assigned(mv, (h,), _FIRST, leader_epoch, origin,
                                                 txn_version, cfg, now_ms)
        try:
            batches = validate_batches(payload)
        except _RecInvalid as exc:
            raise InvalidRecordError(str(exc)) from exc
        except (_RecCorrupt, ProtocolError) as exc:
            raise CorruptRecordError(str(exc)) from exc
        if not batches:
            raise InvalidRecordError("append of an empty record set")
        if rules.any:
            check_records(payload, batches, rules, now_ms, f"{self.topic}-{self.partition}")
        mv = payload if isinstance(payload, memoryview) else memoryview(payload)
        return self._append_assigned(mv, [b.header for b in batches],
                                     [b.position for b in batches], leader_epoch, origin,
                                     txn_version, cfg, now_ms)

    def _append_assigned(self, mv: memoryview, headers: Sequence[BatchHeader],
                         positions: Sequence[int], leader_epoch: int, origin: AppendOrigin,
                         txn_version: int, cfg: TopicConfig, now_ms: int) -> AppendResult:
        """CLIENT and COORDINATOR appends of validated batches (``headers`` at
        ``positions`` of ``mv``): the size limits, control batches, producer
        checks and offset assignment, then ``_write``."""
        max_msg = cfg.max_message_bytes
        has_pid = False
        markers: dict[int, tuple[int, int] | None] | None = None
        i = 0
        for h in headers:
            size = h.batch_length + 12
            if size > max_msg:
                raise RecordTooLargeError(
                    f"batch of {size} bytes exceeds max.message.bytes {max_msg}")
            if h.producer_id >= 0:
                has_pid = True
            if h.attributes & _CONTROL_MASK:
                if origin is _CLIENT:
                    raise InvalidRecordError(_CLIENT_CONTROL)
                if markers is None:
                    markers = {}
                pos = positions[i]
                markers[i] = read_marker(mv[pos:pos + size])
            i += 1
        total = mv.nbytes
        if total > cfg.segment_bytes:
            raise RecordTooLargeError(
                f"append of {total} bytes exceeds segment.bytes {cfg.segment_bytes}")
        log_append = cfg.message_timestamp_type == "LogAppendTime"
        with self._lock:
            if self.closed:
                raise StorageError(f"log {self.topic}-{self.partition} is closed")
            if has_pid:
                updates, dup = self.producer_state.check(headers, markers, txn_version)
                if dup is not None:
                    return AppendResult(dup.first_offset, dup.last_offset, -1,
                                        self.log_start_offset, True)
            leo = self._end[0]
            infos: list[tuple[int, int, int]] = []
            next_offset = leo
            max_ts = -1
            # Two ways to put the assigned offsets on disk, same bytes either way:
            # - vectored: a fresh 16-byte prefix (baseOffset, batchLength,
            #   partitionLeaderEpoch) per batch plus the caller's bytes from the
            #   magic byte on, written with one pwritev: no copy of the payload.
            # - in place: copy, then patch with protocol.records' setters; needed
            #   for LogAppendTime (the CRC changes) and for very many batches.
            vectored = not log_append and len(headers) <= 256
            parts: list[bytes | bytearray | memoryview]
            if vectored:
                parts = []
            else:
                buf = bytearray(mv)
                parts = [buf]
            i = 0
            for h in headers:
                pos = positions[i]
                size = h.batch_length + 12
                base = next_offset
                ts = h.max_timestamp
                if vectored:
                    parts.append(_PREFIX.pack(base, h.batch_length, leader_epoch))
                    parts.append(mv[pos + 16:pos + size])
                else:
                    set_base_offset(buf, pos, base)
                    set_partition_leader_epoch(buf, pos, leader_epoch)
                    if log_append:
                        set_log_append_time(buf, pos, now_ms)
                        ts = now_ms
                next_offset = base + h.last_offset_delta + 1
                if ts > max_ts:
                    max_ts = ts
                infos.append((size, next_offset - 1, ts))
                i += 1
            self._write(cfg, now_ms, leo, parts, total, infos, max_ts, headers,
                        updates if has_pid else None, markers, leader_epoch)
            lso = self.log_start_offset
        self._appended(next_offset, cfg)
        return _tuple_new(AppendResult, (leo, next_offset - 1, now_ms if log_append else -1,
                                         lso, False))

    def _write(self, cfg: TopicConfig, now_ms: int, first: int,
               parts: Sequence[bytes | bytearray | memoryview], total: int,
               infos: list[tuple[int, int, int]], max_ts: int,
               headers: Sequence[BatchHeader | None], producers: Sequence[int] | None,
               markers: dict[int, tuple[int, int] | None] | None, epoch: int | None) -> None:
        """(Lock held.) What every append does with its batches once they are
        checked, whoever they come from: roll the active segment if the append
        calls for it (a new one starts at ``first``, the append's first offset),
        write ``parts`` (``total`` bytes; per batch ``infos`` (size, last
        offset, max timestamp) and ``headers``, None for a v0/v1 entry),
        record the batches at the indexes ``producers`` in producer state
        (with their ``markers``, index -> read_marker of a control batch),
        start a newer leader epoch (``epoch``, stamped on every batch; None:
        each batch's own, as replicated) and publish the new log end offset."""
        cache = self.leader_epochs
        if cache.stale:   # a load's truncation, due before the log grows past it
            cache.flush_deferred()
        active = self._end[1]
        last = infos[-1][1]
        reason = active.should_roll(cfg, total, max_ts, last, now_ms)
        if reason is not None:
            active = self._roll(reason, first)
        if active.size == 0:
            self._index_files_due = active   # (made once the lock is released: _appended)
        if len(infos) == 1:
            size = active.append_one(parts, total, last, max_ts)
        else:
            size = active.append(parts, total, infos)
        if producers:
            ps = self.producer_state
            txns = False
            for k in producers:
                h = headers[k]
                if h is None:
                    continue
                last_offset = infos[k][1]
                txns |= apply_producer_batch(ps, h, last_offset - h.last_offset_delta, last_offset,
                                             markers.get(k) if markers else None, active)
            if txns:
                self._refresh_unstable()
        if epoch is not None:
            if epoch > cache.latest_epoch:
                cache.assign(epoch, first)
        else:
            k = 0
            for h in headers:
                if h is not None and h.partition_leader_epoch > cache.latest_epoch:
                    cache.assign(h.partition_leader_epoch, infos[k][1] - h.last_offset_delta)
                k += 1
        self._end = (last + 1, active, size)

    def _appended(self, next_offset: int, cfg: TopicConfig) -> None:
        """After any append, the lock released: ask for a flush once
        flush.messages are unflushed, and tell the listeners."""
        if self._request_flush is not None and next_offset - self.recovery_point >= cfg.flush_messages:
            self._request_flush(self)
        if self._index_files_due is not None:
            self._schedule(functools.partial(self._make_index_files, self._index_files_due), 0)
            self._index_files_due = None
        if self._listeners:
            self._notify()

    def _make_index_files(self, seg: LogSegment) -> None:
        """(The log manager's scheduler, after ``seg``'s first append.) Its index files."""
        with self._lock:
            if seg.active and not self.closed:
                try:
                    seg.make_index_files()
                except OSError as exc:   # (a full disk: the roll or close tries again)
                    log.warning("creating the index files of %s failed: %s", seg.log_path, exc)

    def _append_replicated(self, payload: Payload) -> AppendResult:
        """REPLICATION: append batches read from the leader's log, byte for byte.

        The payload is whole entries (v2 batches, or v0/v1 messages a log may
        hold from old data) exactly as the leader's ``read`` returned them.
        Checked: structure and CRC of each entry (CorruptRecordError), offsets
        increasing and the first batch at or beyond the log end offset
        (OffsetsOutOfOrderError). No client policy: no max.message.bytes, no
        timestamp or key rules, no producer sequence checks or duplicate
        detection - the leader applied them. Producer state is updated from
        every batch with a producer id (so this replica deduplicates retries
        once it leads, and opens, closes and indexes transactions exactly as
        the leader did), and the leader epoch cache takes every batch whose
        partitionLeaderEpoch is newer than its latest (epoch -> base offset).
        The log end offset becomes the last batch's last offset + 1.

        An empty payload (a fetch that returned nothing) appends nothing and
        returns first_offset = last_offset = -1.

        Payloads larger than segment.bytes (a leader with a larger segment.bytes
        than this replica's) are written in pieces that each fit a segment,
        rolling between them, rather than refused: a refusal would stall the
        follower for good. Otherwise rolls follow the same rules as any append.
        """
        mv = payload if type(payload) is memoryview else memoryview(payload)
        if mv.ndim != 1 or mv.itemsize != 1:
            mv = mv.cast("B")
        total = mv.nbytes
        if total == 0:
            return AppendResult(-1, -1, -1, self.log_start_offset, False)
        # (position, size, last offset, max timestamp, v2 header or None, base offset)
        entries: list[tuple[int, int, int, int, BatchHeader | None, int]] = []
        pos = 0
        prev_last = -1
        while pos < total:
            try:
                e = parse_entry(mv, pos, pos)
            except (InvalidEntry, ProtocolError) as exc:
                raise CorruptRecordError(f"invalid entry at position {pos}: {exc}") from exc
            if e is None or pos + e.size > total:
                raise CorruptRecordError(
                    f"incomplete entry at position {pos} ({total - pos} bytes left)")
            if not entry_is_valid(mv, pos, e):
                raise CorruptRecordError(f"CRC mismatch in the entry at position {pos}")
            if e.last_offset < e.base_offset:
                raise CorruptRecordError(
                    f"negative lastOffsetDelta in the batch at position {pos}")
            if entries and e.base_offset <= prev_last:
                raise OffsetsOutOfOrderError(
                    f"out of order offsets in replicated batches: {e.base_offset} "
                    f"follows {prev_last}")
            prev_last = e.last_offset
            entries.append((pos, e.size, e.last_offset, e.max_timestamp, e.header, e.base_offset))
            pos += e.size
        first_offset = entries[0][5]
        cfg = self.config
        # pieces of at most segment.bytes (one oversized entry alone), each
        # spanning offsets that fit a segment's relative offsets
        chunks = []
        start = 0
        acc = 0
        for k, (_, size, last, _, _, base) in enumerate(entries):
            if k > start and (acc + size > cfg.segment_bytes
                              or last - entries[start][5] > INT32_MAX):
                chunks.append((start, k))
                start, acc = k, 0
            acc += size
        chunks.append((start, len(entries)))
        now_ms = int(time.time() * 1000)
        with self._lock:
            if self.closed:
                raise StorageError(f"log {self.topic}-{self.partition} is closed")
            leo = self._end[0]
            if first_offset < leo:
                raise OffsetsOutOfOrderError(
                    f"replicated batch base offset {first_offset} is below the log end "
                    f"offset {leo} of {self.topic}-{self.partition}")
            for a, b in chunks:
                c_start = entries[a][0]
                c_end = entries[b - 1][0] + entries[b - 1][1]
                chunk = entries[a:b]
                infos = [(size, last, ts) for _, size, last, ts, _, _ in chunk]
                headers = [h for _, _, _, _, h, _ in chunk]
                # as the leader did: transactions opened and closed, aborts indexed
                producers = [k for k, h in enumerate(headers)
                             if h is not None and h.producer_id >= 0]
                markers = {k: read_marker(mv[pos:pos + size])
                           for k, (pos, size, _, _, h, _) in enumerate(chunk)
                           if h is not None and h.producer_id >= 0 and h.is_control}
                self._write(cfg, now_ms, chunk[0][5], [mv[c_start:c_end]], c_end - c_start,
                            infos, max(ts for _, _, ts in infos), headers, producers, markers,
                            None)
            next_offset = entries[-1][2] + 1
            lso = self.log_start_offset
        self._appended(next_offset, cfg)
        return AppendResult(first_offset, next_offset - 1, -1, lso, False)

    def _notify(self) -> None:
        for cb in self._listeners:
            try:
                cb(self)
            except Exception:  # a listener must never fail an acknowledged append
                log.exception("append listener failed")

    def _roll(self, reason: str, new_base: int) -> LogSegment:
        """Close the active segment for writing and start one at ``new_base`` (lock held)."""
        segs = list(self._segs[0])
        old = segs[-1]
        log.info("rolling %s-%d at offset %d (%s)", self.topic, self.partition, new_base, reason)
        if old.size == 0:
            # nothing in it: replace rather than leave an empty segment behind
            old.delete_now()
            segs.pop()
        else:
            old.on_become_inactive()
        new = LogSegment(self.dir, new_base, self.config, create=True)
        segs.append(new)
        self._segs = (tuple(segs), tuple(s.base_offset for s in segs))
        self._end = (self._end[0], new, 0)
        try:
            self.producer_state.take_snapshot(new_base)
        except OSError as exc:
            log.warning("producer state snapshot at %d failed: %s", new_base, exc)
        if self._request_flush is not None:
            self._request_flush(self)
        return new

    def replace_segments(self, old: list[LogSegment], cleaned_path: str,
                         aborted_txns: Iterable[AbortedTxn] = ()) -> LogSegment:
        """Swap a compacted copy in for ``old`` (contiguous, not the active segment).

        ``cleaned_path`` is the cleaner's output, ``<old[0] base>.log.cleaned`` in this
        directory: whole batches with their original offsets, all within the old
        segments' range. Kafka's protocol, so a stop at any point recovers: rename
        to ``.log.swap`` (from here on start-up completes the swap), retire the old
        segments (``*.deleted``, removed after file.delete.delay.ms so in-flight
        reads finish), rename the swap file to the segment name, index it.
        ``aborted_txns``: the cleaned segment's .txnindex entries (the old
        segments' go with them). A stop before they are written loses only
        entries of aborted data the cleaner has removed already.
        """
        with self._lock:
            if self.closed:
                raise StorageError(f"log {self.topic}-{self.partition} is closed")
            segs = list(self._segs[0])
            if not old:
                raise ValueError("no segments to replace")
            i = next((k for k, s in enumerate(segs) if s is old[0]), None)
            if i is None or segs[i:i + len(old)] != list(old) or i + len(old) >= len(segs):
                raise ValueError("segments to replace must be contiguous and not include the active one")
            base = old[0].base_offset
            swap = os.path.join(self.dir, f"{base:020d}{LOG_SUFFIX}{SWAP_SUFFIX}")
            os.rename(cleaned_path, swap)
            fsync_dir(self.dir)
            retired = [(seg, seg.rename_to_deleted()) for seg in old]
            os.rename(swap, old[0].log_path)
            fsync_dir(self.dir)
            new = LogSegment(self.dir, base, self.config)
            new.build_indexes()
            for t in aborted_txns:
                new.txn_index.append(t)
            new.txn_index.flush()
            segs[i:i + len(old)] = [new]
            self._segs = (tuple(segs), tuple(s.base_offset for s in segs))
            delay = self.config.file_delete_delay_ms
            for seg, renamed in retired:
                self._schedule(functools.partial(seg.delete_now, renamed), delay)
            return new

    def roll(self) -> None:
        """Force a roll (tests, admin)."""
        with self._lock:
            if self._end[1].size:
                self._roll("forced", self._end[0])

    # ------------------------------------------------------------------ read
    def read(self, fetch_offset: int, max_bytes: int, min_one_batch: bool = True,
             max_offset: int | None = None) -> ReadResult:
        """Whole batches from the one holding ``fetch_offset``, up to ``max_bytes``
        (at least one batch when ``min_one_batch``), as file regions. Lock-free.

        ``max_offset`` is an exclusive upper bound on the offsets returned: the
        high watermark (or last stable offset) for consumers, None (the log end
        offset) for followers. Only whole batches whose last offset is below it
        are returned; a ``fetch_offset`` in [max_offset, log end] gets no regions,
        one outside [log start, log end] OffsetOutOfRangeError. The result
        reports the high watermark as it was when the read started.
        """
        for _ in range(3):
            try:
                return self._read(fetch_offset, max_bytes, min_one_batch, max_offset)
            except (ValueError, OSError, IndexError) as exc:
                # a segment was closed under us: deleted with file.delete.delay.ms=0,
                # or the log closed; or an index shrank under us (a truncation).
                # Retry on a fresh snapshot (range is re-checked).
                if self.closed:
                    raise StorageError(f"log {self.topic}-{self.partition} is closed") from exc
                last = exc
        raise StorageError(f"read of {self.topic}-{self.partition} failed: {last}") from last

    def _read(self, fetch_offset: int, max_bytes: int, min_one_batch: bool,
              max_offset: int | None) -> ReadResult:
        hw = self.high_watermark
        fu = self._first_unstable
        stable = hw if fu is None or fu >= hw else fu
        leo, active, active_size = self._end
        segs, bases = self._segs
        lso = self.log_start_offset
        if fetch_offset < lso or fetch_offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {fetch_offset} out of range [{lso}, {leo}] for {self.topic}-{self.partition}")
        if max_offset is not None and max_offset < leo:
            if fetch_offset >= max_offset:
                return ReadResult([], hw, lso, stable)
            return self._read_bounded(fetch_offset, max_bytes, min_one_batch, max_offset,
                                      hw, lso, stable, active, active_size, segs, bases)
        if fetch_offset == leo:
            return ReadResult([], hw, lso, stable)
        i = max(0, bisect.bisect_right(bases, fetch_offset) - 1)
        while i < len(segs):
            seg = segs[i]
            max_pos = active_size if seg is active else seg.size
            region = seg.read(fetch_offset, max_bytes, max_pos, min_one_batch)
            if region is not None:
                return ReadResult([region] if region.length else [], hw, lso, stable)
            if seg is active:
                break
            i += 1
        return ReadResult([], hw, lso, stable)

    @staticmethod
    def _read_bounded(fetch_offset: int, max_bytes: int, min_one_batch: bool, max_offset: int,
                      hw: int, lso: int, stable: int, active: LogSegment, active_size: int,
                      segs: tuple[LogSegment, ...], bases: tuple[int, ...]) -> ReadResult:
        """``_read`` below ``max_offset`` (< log end): each segment looked at is cut
        at the first batch whose last offset reaches the bound (offset index, then
        a scan, as for the start position); the walk ends at the first cut."""
        n = len(segs)
        i = max(0, bisect.bisect_right(bases, fetch_offset) - 1)
        while i < n:
            seg = segs[i]
            max_pos = active_size if seg is active else seg.size
            cut = False
            if i + 1 >= n or bases[i + 1] > max_offset:
                max_pos, cut = seg.position_below(max_offset, max_pos)
            region = seg.read(fetch_offset, max_bytes, max_pos, min_one_batch)
            if region is not None:
                return ReadResult([region] if region.length else [], hw, lso, stable)
            if cut or seg is active:
                break
            i += 1
        return ReadResult([], hw, lso, stable)

    def aborted_transactions(self, fetch_offset: int,
                             regions: list[FileRegion]) -> list[AbortedTxn]:
        """The aborted transactions a read_committed consumer needs with
        ``regions`` (a read from ``fetch_offset``): Kafka's
        collectAbortedTransactions, the .txnindex entries with lastOffset >=
        fetch_offset and firstOffset < the offset after the returned batches,
        from the fetch offset's segment on until an entry's LSO reaches that
        bound. Lock-free (entries are published whole)."""
        if not regions:
            return []
        segs, bases = self._segs
        leo, active, active_size = self._end
        i = max(0, bisect.bisect_right(bases, fetch_offset) - 1)
        region = regions[-1]
        end_pos = region.position + region.length
        upper = leo
        file = region.file   # (the region's own handle: its segment may have let go of it)
        name = getattr(file, "name", None)
        for k in range(i, len(segs)):
            seg = segs[k]
            if name != seg.log_path:
                continue
            size = active_size if seg is active else seg.size
            if end_pos + 8 <= size:   # the batch right after the region: its base offset
                try:
                    upper = struct.unpack(">q", os.pread(file.fileno(), 8, end_pos))[0]
                except (OSError, ValueError):   # closed meanwhile: the log end bounds it
                    pass
            elif k + 1 < len(segs):
                upper = bases[k + 1]
            break
        return self.collect_aborted_txns(fetch_offset, upper)

    def collect_aborted_txns(self, start: int, upper: int) -> list[AbortedTxn]:
        """AbortedTxn entries overlapping [start, upper), from the segment holding
        ``start`` on until an entry's LSO reaches ``upper`` (Kafka's
        collectAbortedTransactions; the cleaner uses it too). Lock-free."""
        segs, bases = self._segs
        i = max(0, bisect.bisect_right(bases, start) - 1)
        out = []
        for seg in segs[i:]:
            found, complete = seg.txn_index.collect(start, upper)
            out.extend(found)
            if complete:
                break
        return out

    # ------------------------------------------------------------------ timestamps
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """First (offset, timestamp) whose timestamp >= ``timestamp``; None if none.

        -2 (earliest) -> (log start offset, -1); -1 (latest) -> (log end offset, -1);
        -3 (max timestamp) -> max_timestamp_and_offset().
        """
        if timestamp == -2:
            return self.log_start_offset, -1
        if timestamp == -1:
            return self.log_end_offset, -1
        if timestamp == -3:
            return self.max_timestamp_and_offset()
        lso = self.log_start_offset
        segs, bases = self._segs
        first = max(0, bisect.bisect_right(bases, lso) - 1)
        for seg in segs[first:]:
            if seg.size == 0 or seg.max_timestamp < timestamp:
                continue
            found = seg.find_offset_by_timestamp(timestamp, max(lso, seg.base_offset))
            if found is None:
                continue
            entry, data = found
            return _record_at_timestamp(entry, data, timestamp, lso)
        return None

    def max_timestamp_and_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record carrying the largest timestamp
        (ListOffsets -3, KIP-734); None if the log holds no timestamps."""
        best = None
        lso = self.log_start_offset
        for seg in self._segs[0]:
            if seg.size == 0:
                continue
            ts = seg.max_timestamp
            if ts >= 0 and (best is None or ts > best[1]) and seg.offset_of_max_timestamp >= lso:
                best = (seg, ts)
        if best is None:
            return None
        seg, ts = best
        shallow = seg.offset_of_max_timestamp
        found = seg.translate_offset(shallow, seg.size)
        if found is None:
            return shallow, ts
        pos, size = found
        f = seg.file
        data = os.pread(f.fileno(), size, pos)
        try:
            from samsa.protocol.records import iter_records
            for rec in iter_records(data):
                if rec.timestamp == ts and rec.offset is not None and rec.offset >= lso:
                    return rec.offset, ts
        except (ImportError, ProtocolError):
            pass
        return shallow, ts

    # ------------------------------------------------------------------ deletion
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (-1: high watermark)."""
        with self._lock:
            hw = self.high_watermark
            if offset == -1:
                offset = hw
            if offset < 0 or offset > hw:
                raise OffsetOutOfRangeError(
                    f"cannot delete records before {offset}: high watermark is {hw}")
            if offset > self.log_start_offset:
                self._advance_log_start(offset)
                self._delete_prefix(self._count_below_log_start(), "log start offset")
            return self.log_start_offset

    def _advance_log_start(self, offset: int) -> None:
        self.log_start_offset = offset
        self.leader_epochs.truncate_from_start(offset)
        self.producer_state.truncate_head(offset)
        self._refresh_unstable()

    def _count_below_log_start(self) -> int:
        bases = self._segs[1]
        n = 0
        for i in range(len(bases) - 1):
            if bases[i + 1] <= self.log_start_offset:
                n = i + 1
            else:
                break
        return n

    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete whole non-active segments past retention.ms / retention.bytes or
        entirely below the log start offset. Returns how many were deleted."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            if self.closed:
                return 0
            cfg = self.config
            segs = self._segs[0]
            candidates = segs[:-1]
            n = self._count_below_log_start()
            if cfg.delete and cfg.retention_ms >= 0:
                k = 0
                for s in candidates:
                    if now_ms - s.largest_timestamp() > cfg.retention_ms:
                        k += 1
                    else:
                        break
                n = max(n, k)
            if cfg.delete and cfg.retention_bytes >= 0:
                diff = sum(s.size for s in segs) - cfg.retention_bytes
                k = 0
                for s in candidates:
                    if diff - s.size >= 0:
                        diff -= s.size
                        k += 1
                    else:
                        break
                n = max(n, k)
            return self._delete_prefix(n, "retention")

    def _delete_prefix(self, n: int, why: str) -> int:
        if n <= 0:
            return 0
        segs = list(self._segs[0])
        n = min(n, len(segs) - 1)
        if n <= 0:
            return 0
        doomed, kept = segs[:n], segs[n:]
        self._segs = (tuple(kept), tuple(s.base_offset for s in kept))
        if kept[0].base_offset > self.log_start_offset:
            self._advance_log_start(kept[0].base_offset)
        delay = self.config.file_delete_delay_ms
        for seg in doomed:
            log.info("deleting segment %s (%s)", seg.log_path, why)
            renamed = seg.rename_to_deleted()
            self._schedule(functools.partial(seg.delete_now, renamed), delay)
        return n

    def transaction_open(self, producer_id: int, epoch: int) -> bool:
        """Whether the producer has a transaction open here at ``epoch`` (its
        next transactional batches join it). Lock-free: one dict lookup and
        two attribute reads of an entry appends replace field by field."""
        entry = self.producer_state.producers.get(producer_id)
        return (entry is not None and entry.epoch == epoch
                and entry.current_txn_first_offset >= 0)

    def active_producers(self) -> list[ProducerSummary]:
        """What this log remembers of each producer, by producer id
        (DescribeProducers): ProducerSummary values taken under the lock,
        as appends change the entries."""
        with self._lock:
            return [e.summary() for _, e in sorted(self.producer_state.producers.items())]

    def last_batches_of_producers(self) -> dict[int, tuple[int, int]]:
        """producer id -> (offset of its last data batch's last record, or -1
        when none is known; epoch): the batches compaction keeps even emptied."""
        with self._lock:
            return {pid: (e.last_offset, e.epoch)
                    for pid, e in self.producer_state.producers.items()}

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """producer.id.expiration.ms: forget producers idle that long without an
        open transaction (Kafka's removeExpiredProducers); how many went."""
        with self._lock:
            if self.closed:
                return 0
            return self.producer_state.remove_expired(now_ms, expiration_ms)

    # ------------------------------------------------------------------ topic id
    def claim_topic_id(self, topic_id: uuid.UUID) -> None:
        """The metadata names this log's topic ``topic_id``: partition.metadata
        says so from now on (a change is warned of: a tool rewrote it)."""
        if self.topic_id != topic_id:
            if self.topic_id is not None:
                log.warning("%s-%d: topic id changes from %s to %s", self.topic, self.partition,
                            self.topic_id, topic_id)
            self.topic_id = topic_id
            write_partition_metadata(self.dir, topic_id)

    # ------------------------------------------------------------------ epochs
    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.leader_epochs.end_offset_for(epoch, self.log_end_offset)

    def begin_leader_epoch(self, epoch: int, *, defer_flush: bool = False) -> None:
        """This replica becomes leader at ``epoch``: record that the epoch starts at
        the current log end offset (no-op unless newer than the latest epoch), so
        OffsetForLeaderEpoch answers right even before the epoch has records.
        ``defer_flush``: the checkpoint file is written by ``flush_leader_epochs``,
        at the latest before the next append (storage/leader_epoch.py)."""
        with self._lock:
            self.leader_epochs.assign(epoch, self._end[0], defer_flush=defer_flush)

    def flush_leader_epochs(self) -> None:
        """Write a leader epoch ``begin_leader_epoch`` deferred (if any)."""
        self.leader_epochs.flush_deferred()

    # ------------------------------------------------------------------ high watermark
    def update_high_watermark(self, offset: int) -> bool:
        """Move the high watermark forward to ``offset``, clamped to [log start,
        log end]; True when it changed. It never moves backwards here (only a
        truncation lowers it). The owner (the partition layer) calls this; no
        append does."""
        if offset <= self.high_watermark:
            return False
        with self._lock:
            hw = min(max(offset, self.log_start_offset), self._end[0])
            if hw > self.high_watermark:
                self.high_watermark = hw
                if self.producer_state.unreplicated:
                    self._refresh_unstable()   # markers now replicated: their txns are stable
                return True
            return False

    # ------------------------------------------------------------------ truncation
    def truncate_to(self, offset: int) -> int:
        """A follower's truncation to a divergence point: remove every batch that
        holds any offset >= ``offset`` (whole batches: one straddling ``offset``
        goes too, and the log then ends at its base offset). Returns the new log
        end offset; a no-op for ``offset`` >= the log end offset (except that,
        as in Kafka, an epoch begun at the log end without records is dropped
        from the epoch cache). Below the first segment's base it is
        ``truncate_fully_and_start_at(offset)``.

        Segments entirely above go (renamed ``*.deleted``, closed after
        file.delete.delay.ms); the one holding ``offset`` is cut and becomes
        the active segment. Then the leader epoch cache is cut at the new end,
        producer state is rebuilt for the shorter log (newest snapshot at or
        below the new end, plus the batches after it), and the high watermark,
        recovery point and log start offset are lowered to the new end if above.
        """
        if offset < 0:
            raise ValueError(f"cannot truncate {self.topic}-{self.partition} to {offset}")
        with self._lock, self._flush_lock:
            if self.closed:
                raise StorageError(f"log {self.topic}-{self.partition} is closed")
            leo = self._end[0]
            if offset >= leo:
                self.leader_epochs.truncate_from_end(leo)
                return leo
            segs, bases = self._segs
            if offset < bases[0]:
                self._truncate_fully(offset)
                new_leo = offset
            else:
                i = bisect.bisect_right(bases, offset) - 1
                seg = segs[i]
                doomed = segs[i + 1:]
                log.info("truncating %s-%d to offset %d (log end %d)",
                         self.topic, self.partition, offset, leo)
                self.truncations += 1
                # first out of the way: their names may be reused by later rolls
                retired = [(d, d.rename_to_deleted()) for d in doomed]
                new_leo = seg.truncate_to(offset)
                # _end before _segs: a reader pairing the new end with the old
                # segment list still finds only kept batches below the new end
                self._end = (new_leo, seg, seg.size)
                self._segs = (tuple(segs[:i + 1]), tuple(bases[:i + 1]))
                delay = self.config.file_delete_delay_ms
                for d, renamed in retired:
                    self._schedule(functools.partial(d.delete_now, renamed), delay)
                if retired:
                    fsync_dir(self.dir)
                self.leader_epochs.truncate_from_end(new_leo)
                if self.log_start_offset > new_leo:
                    self.log_start_offset = new_leo
                load_producer_state(self.producer_state, self._segs[0],
                                    self.log_start_offset, new_leo)
                if self.high_watermark > new_leo:
                    self.high_watermark = new_leo
                if self.recovery_point > new_leo:
                    self.recovery_point = new_leo
                self._refresh_unstable()
        if self._request_checkpoint is not None:
            self._request_checkpoint(self)
        return new_leo

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at ``offset`` (a follower below the
        leader's log start, or with nothing in common with it): every segment
        goes (delayed deletion), a new empty active segment starts at
        ``offset``, which becomes the log start and end offset, high watermark
        and recovery point; producer state and leader epochs are cleared."""
        if offset < 0:
            raise ValueError(f"cannot restart {self.topic}-{self.partition} at {offset}")
        with self._lock, self._flush_lock:
            if self.closed:
                raise StorageError(f"log {self.topic}-{self.partition} is closed")
            self._truncate_fully(offset)
        if self._request_checkpoint is not None:
            self._request_checkpoint(self)

    def _truncate_fully(self, offset: int) -> None:
        """(Both locks held.)"""
        log.info("truncating %s-%d fully, restarting at offset %d",
                 self.topic, self.partition, offset)
        self.truncations += 1
        retired = [(d, d.rename_to_deleted()) for d in self._segs[0]]
        new = LogSegment(self.dir, offset, self.config, create=True)
        # _segs before _end: a reader pairing the old end with the new segment
        # list finds nothing rather than the old data
        self._segs = ((new,), (offset,))
        self._end = (offset, new, 0)
        fsync_dir(self.dir)
        delay = self.config.file_delete_delay_ms
        for d, renamed in retired:
            self._schedule(functools.partial(d.delete_now, renamed), delay)
        self.leader_epochs.clear()
        self.producer_state.clear()
        self.log_start_offset = offset
        self.high_watermark = offset
        self.recovery_point = offset
        self._first_unstable = None

    # ------------------------------------------------------------------ flush/close
    def unflushed_messages(self) -> int:
        return self.log_end_offset - self.recovery_point

    def flush(self) -> None:
        """fsync everything up to the current end; advances the recovery point.
        Never takes the append lock. Inside a durable_batch() (a broker's stop
        closing every log) the files are made durable with the batch, and the
        recovery point moves only once they are."""
        with self._flush_lock:
            leo, active, _ = self._end
            segs, bases = self._segs
            rp = self.recovery_point
            if leo <= rp:
                self.last_flush_ms = int(time.time() * 1000)
                return
            i = max(0, bisect.bisect_right(bases, rp) - 1)
            for seg in segs[i:]:
                if seg.deleted:
                    continue
                try:
                    seg.flush()
                except (OSError, ValueError) as exc:  # closed by a concurrent roll/delete
                    log.debug("flush of %s skipped: %s", seg.log_path, exc)
            if in_durable_batch():
                when_durable(functools.partial(self._flushed_to, leo, self.truncations))
                return
            self.recovery_point = max(self.recovery_point, leo)
            self.last_flush_ms = int(time.time() * 1000)

    def _flushed_to(self, offset: int, truncations: int) -> None:
        """A batched flush is durable: everything below ``offset`` is, unless a
        truncation came in between (the offsets may hold other bytes now)."""
        with self._flush_lock:
            if self.truncations == truncations:
                self.recovery_point = max(self.recovery_point, offset)
            self.last_flush_ms = int(time.time() * 1000)

    def close(self) -> None:
        """Clean close: flush, snapshot producer state, trim indexes, close files.
        A snapshot at the log end already there is kept, not written again
        (Kafka's takeSnapshot skips it too): a broker stopped again without new
        records writes no snapshot per partition; nor does a log without
        producers and without snapshots (a clean load reads that state from
        no snapshot: ProducerStateManager.snapshot_due_at_close), a log never
        written to among them."""
        with self._lock:
            if self.closed:
                return
            # (index files not made yet are written by the segment's close,
            # inside the same durable batch as the flush)
            self.flush()
            if self.leader_epochs.stale:
                # an epoch a role pass's batch has not made durable yet (or a
                # load's truncation): in the file before the clean-stop marker
                self.leader_epochs.flush_deferred()
            try:
                leo = self.log_end_offset
                if self.producer_state.snapshot_due_at_close(leo):
                    self.producer_state.take_snapshot(leo)
            except OSError as exc:
                log.warning("producer state snapshot failed for %s: %s", self.dir, exc)
            for seg in self._segs[0]:
                seg.close()
            self.closed = True

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """Hold off every change (appends, truncation, retention, flushes) for
        the duration; reads go on. A move to another log dir swaps its copy in
        under it, so nothing lands in the old files after the copy caught up."""
        with self._lock, self._flush_lock:
            yield

    def reopen_at(self, directory: str) -> tuple[LogSegment, ...]:
        """(Inside ``frozen``.) Continue from ``directory``, a closed, complete
        copy of this log (the moved replica, now named ``<topic>-<partition>``
        in its new log dir): segments, producer state and leader epochs come
        from its files, the log start offset and high watermark stay this
        log's. The object stays the same, so everything holding it (leader and
        follower replicas, waiting fetches) goes on unchanged, as a Kafka log's
        renameDir keeps the UnifiedLog. Returns the old segments: their files
        stay open (in-flight reads of them stay valid) until the caller closes them."""
        old = self._segs[0]
        self.dir = directory
        self._run_on(load_log(directory, self.config, recovery_point=self.recovery_point,
                              log_start_offset=self.log_start_offset,
                              high_watermark=self.high_watermark, clean_shutdown=True))
        # the copy was flushed whole when it was closed
        self.recovery_point = self._end[0]
        return old

    def close_handles(self, trim: bool = True) -> None:
        """Close files without flushing or snapshots (topic deletion; ``trim=False``
        leaves the files exactly as a crash would)."""
        with self._lock:
            self.closed = True
            for seg in self._segs[0]:
                try:
                    seg.close(trim=trim)
                except OSError:
                    pass

    def __repr__(self) -> str:
        return (f"Log({self.topic}-{self.partition}, start={self.log_start_offset}, "
                f"end={self.log_end_offset}, segments={len(self._segs[0])})")


def _record_at_timestamp(entry: Entry, data: bytes, timestamp: int,
                         start_offset: int) -> tuple[int, int]:
    """Record-level answer inside the batch found by timestamp: (offset, timestamp)."""
    h = entry.header
    if h is None:
        return entry.last_offset, entry.max_timestamp
    first = max(h.base_offset, start_offset)
    if h.timestamp_type == 1:   # LogAppendTime: every record carries maxTimestamp
        return first, h.max_timestamp
    try:
        from samsa.protocol.records import iter_records  # decoded only here, off the hot path
    except ImportError:
        return first, h.max_timestamp
    try:
        for rec in iter_records(data):
            if (rec.offset is not None and rec.timestamp is not None
                    and rec.offset >= start_offset and rec.timestamp >= timestamp):
                return rec.offset, rec.timestamp
    except ProtocolError:
        pass
    return first, h.max_timestamp
