"""Log compaction: Kafka's log cleaner for topics with ``cleanup.policy=compact``.

One pass over a log (``clean_log``), the way Kafka's LogCleaner does it:

1. Where to clean. The *first dirty offset* comes from the per-log-dir
   ``cleaner-offset-checkpoint`` (where the last pass stopped), bounded to
   [log start offset, log end offset]. The *first uncleanable offset* is the
   active segment's base (the active segment is never touched), or earlier:
   the base of the first dirty segment holding a record younger than
   ``min.compaction.lag.ms``.
2. Whether to clean. dirty bytes (whole segments from the first dirty offset
   to the first uncleanable one) / (those + clean bytes before them) must be
   above ``min.cleanable.dirty.ratio``; ``max.compaction.lag.ms`` forces a pass
   when the oldest dirty record is older than that, whatever the ratio.
3. Offset map. The dirty segments are read once: key -> offset of its latest
   record. At most ``max_map_entries`` keys, stopping at a segment boundary
   (Kafka's dedupe buffer); where the map stops is where this pass ends.
4. Copy. Every segment from the log start up to that end is rewritten, in
   groups whose sizes add up to at most ``segment.bytes`` (one cleaned segment
   per group, named after the group's first base offset, like Kafka). A record
   stays when it is the latest for its key (offset >= the map's). Batches
   whose records all stay are copied byte for byte; others are rebuilt with
   the same base offset, lastOffsetDelta (so the producer's last sequence and
   the offset range survive), producer id/epoch/sequence, leader epoch,
   timestamp type and codec (recompressed with it). Batches left empty are
   dropped. The result goes to ``<base>.log.cleaned`` and ``Log.replace_segments``
   swaps it in (``.cleaned -> .swap -> .log``, start-up finishes or rolls back).
5. The checkpoint moves to the end of the pass.

Tombstones (null value) use Kafka 2.8+'s delete horizon (KIP-534): the first
pass that keeps a tombstone rewrites its batch with attribute bit 6 set and
``baseTimestamp = now + delete.retention.ms`` (record timestamp deltas are
rebased, so absolute timestamps do not change). A later pass drops the
tombstones of a batch whose horizon has passed. So a tombstone lives at least
``delete.retention.ms`` after it was first cleaned, giving consumers that time
to see it, and the horizon is in the file itself (no reliance on mtimes).

Records without a key are dropped (Kafka counts them as invalid; produce
rejects them for compacted topics, see ``Log.append``). Legacy v0/v1 entries
are copied as they are.

Transactions, as Kafka's cleaner (CleanedTransactionMetadata): nothing at or
past the log's first unstable offset is cleaned (an ongoing transaction's
batches are never touched; Kafka stops at the last stable offset, which is
also below the high watermark: samsa's cleaner leaves that bound to the
active segment, as before). The aborted transactions come from the segments'
.txnindex; the records of an aborted transaction neither enter the offset
map nor survive the copy. A marker goes when no batch of its transaction is
left: an ABORT marker whose transaction still had batches in this pass is kept
(and indexed in the cleaned segment's .txnindex) so the next pass can see
nothing of it remains; a COMMIT marker when the pass saw no batch of its
transaction. Such a marker first gets a delete horizon (attribute bit 6,
``baseTimestamp = now + delete.retention.ms``, as tombstones) and is dropped by
a pass after it, so a consumer reading meanwhile still sees the transaction end.

Producers' last batches (Kafka's RETAIN_EMPTY): the batch holding a producer's
last data offset as the log's producer state knows it (or, for a producer whose
last write was a marker, that marker at its epoch) is kept even when none of
its records are, as an empty batch (header only, Kafka's writeEmptyHeader), so
the producer's last sequence and epoch survive a rebuild of producer state
from the log (duplicate detection and fencing after a restart).

Threading: a pass reads only non-active segments, which no appender changes,
without the log's lock; ``replace_segments`` takes the lock and refuses (we
then drop our output) if retention or DeleteRecords removed a segment in the
meantime.
"""
from __future__ import annotations

import hashlib
import heapq
import logging
import os
import struct
import threading
import time
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, NamedTuple, Sequence, TypeAlias

from samsa.protocol.errors import ProtocolError
from samsa.protocol.model import Buf, TopicPartition
from samsa.protocol.records import CONTROL_ABORT, CONTROL_COMMIT, Record, build_batch, decode_batch, write_crc
from samsa.storage.checkpoints import read_offset_checkpoint, write_offset_checkpoint
from samsa.storage.entries import Entry, EntryScanner
from samsa.storage.errors import StorageError
from samsa.storage.loader import CLEANED_SUFFIX
from samsa.storage.producer_state import read_marker
from samsa.storage.segment import INT32_MAX, LOG_SUFFIX, LogSegment
from samsa.storage.txn_index import AbortedTxn

if TYPE_CHECKING:
    from samsa.config.topic import TopicConfig
    from samsa.protocol.records import BatchHeader
    from samsa.storage.log import Log

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
DELETE_HORIZON_MASK = 0x40
TIMESTAMP_TYPE_MASK = 0x08
_ATTRIBUTES_OFFSET = 21
_I16 = struct.Struct(">h")
LONG_MAX = 9223372036854775807
DEFAULT_MAX_MAP_ENTRIES = 1_000_000


class CleanerStats(NamedTuple):
    first_dirty_offset: int
    end_offset: int           # the next pass's first dirty offset
    segments_in: int
    segments_out: int
    bytes_in: int
    bytes_out: int
    records_in: int
    records_out: int
    delete_horizon: int | None   # earliest horizon of tombstones still in the cleaned part


class CleanableRange(NamedTuple):
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_bytes: int
    must_clean: bool          # max.compaction.lag.ms passed for the oldest dirty record

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


class CleanAborted(Exception):
    """The log changed under the pass (closed, segments removed): try again later."""


class _TxnTracker:
    """Kafka's CleanedTransactionMetadata, fed the batches of a pass in offset
    order: which data batches belong to aborted transactions (from the
    .txnindex entries handed to ``add``), and which markers may go."""

    def __init__(self) -> None:
        # heap of (first offset, n, AbortedTxn) not reached yet
        self._pending: list[tuple[int, int, AbortedTxn]] = []
        self._n = 0
        self._aborted: dict[int, tuple[AbortedTxn, bool]] = {}   # pid -> (txn, a batch of it seen)
        self._committed: set[int] = set()     # pids whose committed txn had batches in the pass
        self.cleaned_index: list[AbortedTxn] = []   # retained ABORT markers' (cleaned .txnindex)

    def add(self, txns: Iterable[AbortedTxn]) -> None:
        for t in txns:
            heapq.heappush(self._pending, (t.first_offset, self._n, t))
            self._n += 1

    def _reach(self, offset: int) -> None:
        while self._pending and self._pending[0][0] <= offset:
            t = heapq.heappop(self._pending)[2]
            self._aborted.setdefault(t.producer_id, (t, False))

    def on_batch(self, h: BatchHeader, last_offset: int) -> bool:
        """A data batch: True when it belongs to an aborted transaction."""
        self._reach(last_offset)
        if not h.is_transactional:
            return False
        entry = self._aborted.get(h.producer_id)
        if entry is not None:
            if not entry[1]:
                self._aborted[h.producer_id] = (entry[0], True)
            return True
        self._committed.add(h.producer_id)
        return False

    def on_marker(self, h: BatchHeader, last_offset: int, marker: tuple[int, int] | None) -> bool:
        """A control batch: True when it may be discarded (no batch of its
        transaction is left after this pass)."""
        self._reach(last_offset)
        if marker is None:
            return True   # emptied by an earlier pass
        pid = h.producer_id
        if marker[0] == CONTROL_ABORT:
            entry = self._aborted.pop(pid, None)
            if entry is not None and entry[1]:
                self.cleaned_index.append(entry[0])
                return False
            return True
        if marker[0] == CONTROL_COMMIT:
            if pid in self._committed:
                self._committed.discard(pid)
                return False
            return True
        return False


# what the offset map is keyed by (_map_key)
_MapKey: TypeAlias = "bytes | tuple[bytes]"


def _map_key(key: bytes) -> _MapKey:
    # short keys as they are; long ones by a 16-byte digest (Kafka hashes all keys
    # into its dedupe buffer). The tuple wrapper keeps the two spaces apart.
    return key if len(key) <= 32 else (hashlib.blake2b(key, digest_size=16).digest(),)


def _entries(seg: LogSegment) -> Iterator[tuple[Entry, memoryview]]:
    """(Entry, bytes) of every entry of a non-active segment."""
    scanner = EntryScanner(seg.file, 0, seg.size, keep_data=True)
    for e in scanner:
        yield e, scanner.last_data


def _first_timestamp(seg: LogSegment) -> int:
    for e in EntryScanner(seg.file, 0, seg.size):
        return e.max_timestamp
    return -1


def cleanable_range(lg: Log, checkpoint: int | None, now_ms: int) -> CleanableRange:
    """Step 1 and the numbers for step 2 (see the module docstring)."""
    cfg = lg.config
    segs, bases = lg._segs
    lso, leo = lg.log_start_offset, lg.log_end_offset
    first_dirty = checkpoint if checkpoint is not None and lso <= checkpoint <= leo else lso
    uncleanable = segs[-1].base_offset
    fu = lg.first_unstable_offset   # never clean an undecided transaction
    if fu is not None and fu < uncleanable:
        uncleanable = fu
    ends = list(bases[1:]) + [leo]
    dirty_idx = [i for i in range(len(segs) - 1) if ends[i] > first_dirty]
    if cfg.min_compaction_lag_ms > 0:
        for i in dirty_idx:
            if segs[i].largest_timestamp() > now_ms - cfg.min_compaction_lag_ms:
                uncleanable = min(uncleanable, bases[i])
                break
    clean_bytes = sum(segs[i].size for i in range(len(segs) - 1) if ends[i] <= first_dirty)
    dirty = [i for i in dirty_idx if ends[i] <= uncleanable]
    dirty_bytes = sum(segs[i].size for i in dirty)
    must = False
    if dirty and cfg.max_compaction_lag_ms < LONG_MAX:
        ts = _first_timestamp(segs[dirty[0]])
        must = ts >= 0 and now_ms - ts > cfg.max_compaction_lag_ms
    return CleanableRange(first_dirty, uncleanable, clean_bytes, dirty_bytes, must)


def _build_offset_map(lg: Log, segs: Sequence[LogSegment], ends: Sequence[int],
                      first_dirty: int, uncleanable: int, max_entries: int,
                      should_stop: Callable[[], bool]) -> tuple[dict[_MapKey, int], int, int]:
    """Step 3: key -> latest offset over the dirty segments; (map, end offset,
    records). Records of aborted transactions are left out, as Kafka does."""
    key_map: dict[_MapKey, int] = {}
    end = first_dirty
    n = 0
    txns = _TxnTracker()
    txns.add(lg.collect_aborted_txns(first_dirty, uncleanable))
    for i in range(len(segs) - 1):
        if ends[i] <= first_dirty:
            continue
        if ends[i] > uncleanable:
            break
        if should_stop():
            raise CleanAborted("stopping")
        seg_map: dict[_MapKey, int] = {}
        for e, data in _entries(segs[i]):
            h = e.header
            if h is None:
                continue
            if h.is_control:
                txns.on_marker(h, e.last_offset, read_marker(data))
                continue
            if txns.on_batch(h, e.last_offset) or e.last_offset < first_dirty:
                continue
            base = h.base_offset   # a record's offset: base + its delta (Record.offset)
            for r in decode_batch(data, 0, header=h)[1]:
                if r.key is not None and base + r.offset_delta >= first_dirty:
                    seg_map[_map_key(r.key)] = base + r.offset_delta
                    n += 1
        if key_map and len(key_map) + len(seg_map) > max_entries:
            break   # full: this pass ends at the previous segment boundary
        key_map.update(seg_map)
        end = ends[i]
    return key_map, end, n


def _group_segments(segs: Sequence[LogSegment], ends: Sequence[int],
                    cfg: TopicConfig) -> list[list[LogSegment]]:
    """Consecutive segments whose sizes add up to at most segment.bytes (and whose
    offsets fit one segment's relative offsets and index), one cleaned segment each."""
    groups: list[list[LogSegment]] = []
    max_index_entries = max(1, cfg.segment_index_bytes // 8)
    cur: list[LogSegment] = []
    size = 0
    for seg, end in zip(segs, ends):
        s = seg.size
        if cur and (size + s > cfg.segment_bytes
                    or end - 1 - cur[0].base_offset > INT32_MAX
                    or (size + s) // max(1, cfg.index_interval_bytes) >= max_index_entries):
            groups.append(cur)
            cur, size = [], 0
        cur.append(seg)
        size += s
    if cur:
        groups.append(cur)
    return groups


def _with_delete_horizon(data: Buf, h: BatchHeader, horizon: int) -> bytes:
    """The control batch ``data`` rebuilt with a delete horizon (attribute bit 6,
    baseTimestamp = the horizon; record timestamps stay as they were)."""
    _, records = decode_batch(data, 0, header=h)
    recs = [Record(r.offset_delta, 0, r.key, r.value, r.headers, None,
                   h.base_timestamp + r.timestamp_delta) for r in records]
    out = bytearray(build_batch(recs, base_offset=h.base_offset, producer_id=h.producer_id,
                                producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                                partition_leader_epoch=h.partition_leader_epoch,
                                is_transactional=h.is_transactional, is_control=True,
                                base_timestamp=horizon, last_offset_delta=h.last_offset_delta))
    (attrs,) = _I16.unpack_from(out, _ATTRIBUTES_OFFSET)
    _I16.pack_into(out, _ATTRIBUTES_OFFSET, attrs | DELETE_HORIZON_MASK)
    write_crc(out, 0)
    return bytes(out)


def _empty_batch(h: BatchHeader) -> bytes:
    """Kafka's DefaultRecordBatch.writeEmptyHeader: the batch's header without
    records (same offsets, producer fields, attributes but the codec), both
    timestamps its max timestamp."""
    return build_batch([], base_offset=h.base_offset, timestamp_type=h.timestamp_type,
                       producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                       base_sequence=h.base_sequence,
                       partition_leader_epoch=h.partition_leader_epoch,
                       is_transactional=h.is_transactional, is_control=h.is_control,
                       base_timestamp=h.max_timestamp, max_timestamp=h.max_timestamp,
                       last_offset_delta=h.last_offset_delta)


def _is_last_of_producer(h: BatchHeader, last_offset: int,
                         last_batches: dict[int, tuple[int, int]] | None) -> bool:
    """Kafka's isBatchLastRecordOfProducer: the batch holds the producer's last
    data offset, or (no data known) it is a marker at the producer's epoch."""
    if last_batches is None or h.producer_id < 0:
        return False
    last = last_batches.get(h.producer_id)
    if last is None:
        return False
    last_data_offset, epoch = last
    if last_data_offset >= 0:
        return last_offset == last_data_offset
    return h.is_control and h.producer_epoch == epoch


def _filter_marker(h: BatchHeader, last_offset: int, data: memoryview, txns: _TxnTracker,
                   now_ms: int, delete_retention_ms: int, retain_empty: bool = False
                   ) -> tuple[Buf | None, int | None]:
    """A control batch (``h``, ending at ``last_offset``): kept as is while its
    transaction has batches left; else given a delete horizon, and dropped once
    that has passed (Kafka's checkBatchRetention for markers); a producer's last
    one stays, emptied."""
    if not txns.on_marker(h, last_offset, read_marker(data)):
        return data, None
    if h.records_count == 0:   # emptied by an earlier pass: no marker left to delay
        return (data if retain_empty else None), None
    if h.attributes & DELETE_HORIZON_MASK:
        horizon = h.base_timestamp
        if now_ms >= horizon:
            return (_empty_batch(h) if retain_empty else None), None
        return data, horizon
    horizon = now_ms + delete_retention_ms
    return _with_delete_horizon(data, h, horizon), horizon


def _filter_batch(e: Entry, data: memoryview, key_map: dict[_MapKey, int], now_ms: int,
                  delete_retention_ms: int, txns: _TxnTracker | None = None,
                  last_batches: dict[int, tuple[int, int]] | None = None
                  ) -> tuple[Buf | None, int, int, int | None]:
    """Step 4 for one entry: the bytes to keep (``data`` itself when nothing changes),
    or None to drop it; plus (records in, records out, delete horizon of the
    tombstones or marker it keeps, or None). ``last_batches``: producer id ->
    (last data offset or -1, epoch), for the batches kept even when emptied."""
    h = e.header
    if h is None:
        return data, 0, 0, None
    retain_empty = _is_last_of_producer(h, e.last_offset, last_batches)
    if h.is_control:
        if txns is None:
            return data, 0, 0, None
        out, horizon = _filter_marker(h, e.last_offset, data, txns, now_ms, delete_retention_ms,
                                      retain_empty)
        return out, 0, 0, horizon
    if txns is not None and txns.on_batch(h, e.last_offset):
        # an aborted transaction's records go
        return (_empty_batch(h) if retain_empty else None), h.records_count, 0, None
    _, records = decode_batch(data, 0, header=h)
    if not records:   # emptied by an earlier pass: kept only while its producer's last
        return (data if retain_empty else None), 0, 0, None
    horizon = h.base_timestamp if h.attributes & DELETE_HORIZON_MASK else None
    kept: list[Record] = []
    tombstones = False
    base = h.base_offset   # a record's offset: base + its delta (Record.offset)
    for r in records:
        if r.key is None:
            continue
        latest = key_map.get(_map_key(r.key))
        if latest is not None and base + r.offset_delta < latest:
            continue
        if r.value is None:
            if horizon is not None and now_ms >= horizon:
                continue
            tombstones = True
        kept.append(r)
    if len(kept) == len(records) and (horizon is not None or not tombstones):
        return data, len(records), len(kept), horizon if tombstones else None
    if not kept:
        return (_empty_batch(h) if retain_empty else None), len(records), 0, None
    if horizon is None and tombstones:
        horizon = now_ms + delete_retention_ms
    append_time = bool(h.attributes & TIMESTAMP_TYPE_MASK)
    # absolute timestamps as stored (a LogAppendTime batch's records decode as its
    # maxTimestamp; keep their original deltas instead)
    recs = [Record(r.offset_delta, 0, r.key, r.value, r.headers, None,
                   h.base_timestamp + r.timestamp_delta) for r in kept]
    out = build_batch(recs, base_offset=h.base_offset, codec=h.codec,
                      timestamp_type=1 if append_time else 0, producer_id=h.producer_id,
                      producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                      partition_leader_epoch=h.partition_leader_epoch,
                      is_transactional=h.is_transactional,
                      base_timestamp=horizon,
                      max_timestamp=h.max_timestamp if append_time else None,
                      last_offset_delta=h.last_offset_delta)
    if horizon is not None:
        buf = bytearray(out)
        (attrs,) = _I16.unpack_from(buf, _ATTRIBUTES_OFFSET)
        _I16.pack_into(buf, _ATTRIBUTES_OFFSET, attrs | DELETE_HORIZON_MASK)
        write_crc(buf, 0)
        out = bytes(buf)
    return out, len(records), len(kept), horizon if tombstones else None


def _write_all(fd: int, data: Buf) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def pending_delete_horizon(lg: Log) -> int | None:
    """Earliest delete horizon among batches of the non-active segments that carry
    one (headers only; for a log the cleaner has not tracked yet, e.g. after a restart)."""
    best: int | None = None
    for seg in lg.segments[:-1]:
        for e in EntryScanner(seg.file, 0, seg.size):
            h = e.header
            if h is not None and h.attributes & DELETE_HORIZON_MASK:   # tombstones or a marker
                if best is None or h.base_timestamp < best:
                    best = h.base_timestamp
    return best


def clean_log(lg: Log, checkpoint: int | None, now_ms: int | None = None, *,
              max_map_entries: int = DEFAULT_MAX_MAP_ENTRIES, force: bool = False,
              should_stop: Callable[[], bool] = lambda: False) -> CleanerStats | None:
    """One cleaning pass over ``lg`` if it is due; None when nothing was done.

    ``force`` cleans whatever the dirty ratio (also with nothing dirty: the clean
    part is rewritten, which drops tombstones whose delete horizon has passed;
    LogCleaner forces a pass for that). Raises CleanAborted if the log changed
    under it (retention, close): nothing is changed then.
    """
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    cfg = lg.config
    if not cfg.compact or lg.closed:
        return None
    rng = cleanable_range(lg, checkpoint, now_ms)
    if not (force or (rng.dirty_bytes > 0 and (
            rng.must_clean or rng.dirty_ratio > cfg.min_cleanable_dirty_ratio))):
        return None
    segs, bases = lg._segs
    ends = list(bases[1:]) + [lg.log_end_offset]
    if rng.dirty_bytes > 0:
        try:
            key_map, end, _ = _build_offset_map(lg, segs, ends, rng.first_dirty_offset,
                                                rng.first_uncleanable_offset, max_map_entries,
                                                should_stop)
        except (ValueError, OSError) as exc:   # a segment deleted and closed under us
            if lg.closed or any(sg.deleted for sg in segs):
                raise CleanAborted(f"{lg.topic}-{lg.partition}: {exc}") from exc
            raise
    else:
        key_map, end = {}, rng.first_dirty_offset
    to_clean = [(sg, e) for sg, e in zip(segs[:-1], ends) if e <= end]
    if not to_clean:
        return None
    groups = _group_segments([sg for sg, _ in to_clean], [e for _, e in to_clean], cfg)
    last_batches = lg.last_batches_of_producers()
    seg_in = seg_out = b_in = b_out = r_in = r_out = 0
    min_horizon: int | None = None
    for group in groups:
        if should_stop() or lg.closed:
            raise CleanAborted("stopping")
        path = os.path.join(lg.dir, f"{group[0].base_offset:020d}{LOG_SUFFIX}{CLEANED_SUFFIX}")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        txns = _TxnTracker()
        try:
            try:
                pending: list[Buf] = []
                pending_size = 0
                for seg in group:
                    b_in += seg.size
                    seg_end = ends[segs.index(seg)]
                    txns.add(lg.collect_aborted_txns(seg.base_offset, seg_end))
                    for e, data in _entries(seg):
                        out, n_in, n_out, horizon = _filter_batch(
                            e, data, key_map, now_ms, cfg.delete_retention_ms, txns,
                            last_batches)
                        r_in += n_in
                        r_out += n_out
                        if horizon is not None and (min_horizon is None or horizon < min_horizon):
                            min_horizon = horizon
                        if out is None:
                            continue
                        pending.append(out)
                        pending_size += len(out)
                        if pending_size >= 1 << 20:
                            _write_all(fd, b"".join(pending))
                            b_out += pending_size
                            pending, pending_size = [], 0
                if pending:
                    _write_all(fd, b"".join(pending))
                    b_out += pending_size
                os.fsync(fd)
            finally:
                os.close(fd)
            lg.replace_segments(group, path, txns.cleaned_index)
        except (ValueError, OSError, StorageError, ProtocolError) as exc:
            try:
                os.unlink(path)
            except OSError:
                pass
            if isinstance(exc, ProtocolError):
                raise
            raise CleanAborted(f"{lg.topic}-{lg.partition}: {exc}") from exc
        seg_in += len(group)
        seg_out += 1
    return CleanerStats(rng.first_dirty_offset, max(end, rng.first_dirty_offset), seg_in,
                        seg_out, b_in, b_out, r_in, r_out, min_horizon)


class LogCleaner:
    """Cleans every compacted log of a set of log dirs and keeps, per log dir,
    Kafka's ``cleaner-offset-checkpoint`` (each log's first dirty offset).

    ``logs`` returns {(topic, partition): (Log, log dir)} (LogManager's view);
    ``held`` {(topic, partition): log dir} of logs kept from it for now (being
    moved to another dir), whose checkpoints it keeps.
    ``run_once`` is one pass over all logs; ``start`` runs it every
    ``backoff_ms`` (log.cleaner.backoff.ms) on a daemon thread.
    """

    def __init__(self, log_dirs: Iterable[str], logs: Callable[[], dict[TopicPartition, tuple[Log, str]]],
                 *, held: Callable[[], dict[TopicPartition, str]] = dict, backoff_ms: int = 15000,
                 max_map_entries: int = DEFAULT_MAX_MAP_ENTRIES,
                 clock: Callable[[], int] | None = None):
        self.log_dirs = list(log_dirs)
        self._logs = logs
        self._held = held
        self.backoff_ms = backoff_ms
        self.max_map_entries = max_map_entries
        self._clock = clock or (lambda: int(time.time() * 1000))
        self._lock = threading.Lock()       # one pass at a time
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.checkpoints: dict[str, dict[tuple[str, int], int]] = {}
        # earliest pending tombstone delete horizon per log (None: none pending);
        # a log absent here has not been looked at since start-up
        self.delete_horizons: dict[tuple[str, int], int | None] = {}
        for d in self.log_dirs:
            self.checkpoints[d] = read_offset_checkpoint(os.path.join(d, CLEANER_OFFSET_CHECKPOINT))

    def first_dirty_offset(self, topic: str, partition: int) -> int | None:
        for cps in self.checkpoints.values():
            if (topic, partition) in cps:
                return cps[(topic, partition)]
        return None

    def run_once(self, now_ms: int | None = None, *, force: bool = False
                 ) -> dict[TopicPartition, CleanerStats]:
        """Clean every compacted log that is due; {(topic, partition): CleanerStats}."""
        done: dict[TopicPartition, CleanerStats] = {}
        with self._lock:
            now = self._clock() if now_ms is None else now_ms
            changed: set[str] = set()
            for key, (lg, d) in sorted(self._logs().items()):
                if self._stop.is_set():
                    break
                if not lg.config.compact or lg.closed:
                    continue
                cps = self.checkpoints.setdefault(d, {})
                try:
                    if key not in self.delete_horizons:
                        self.delete_horizons[key] = pending_delete_horizon(lg)
                    horizon = self.delete_horizons[key]
                    # tombstones past their horizon are removed even with nothing dirty
                    # (Kafka 3's cleaner also picks logs for that)
                    due = force or (horizon is not None and now >= horizon)
                    stats = clean_log(lg, cps.get(key), now, max_map_entries=self.max_map_entries,
                                      force=due, should_stop=self._stop.is_set)
                except CleanAborted as exc:
                    log.info("cleaning of %s-%d aborted: %s", key[0], key[1], exc)
                    continue
                except Exception:
                    log.exception("cleaning of %s-%d failed", key[0], key[1])
                    continue
                if stats is None or lg.closed:
                    continue
                log.info("cleaned %s-%d [%d, %d): %d segments -> %d, %d -> %d bytes, "
                         "%d -> %d records", key[0], key[1], stats.first_dirty_offset,
                         stats.end_offset, stats.segments_in, stats.segments_out,
                         stats.bytes_in, stats.bytes_out, stats.records_in, stats.records_out)
                cps[key] = stats.end_offset
                self.delete_horizons[key] = stats.delete_horizon
                changed.add(d)
                done[key] = stats
            for d in changed:
                self.write_checkpoint(d)
        return done

    def try_hold(self) -> bool:
        """Keep passes from starting until ``release``; False (nothing held)
        while one is running. A log moving to another dir is swapped in
        under it, so no pass is half-way through the files being replaced."""
        return self._lock.acquire(blocking=False)

    def release(self) -> None:
        self._lock.release()

    def forget(self, topic: str, partition: int) -> None:
        """A deleted partition: a later one of the same name starts from scratch."""
        key = (topic, partition)
        for cps in self.checkpoints.values():
            cps.pop(key, None)
        self.delete_horizons.pop(key, None)

    def write_checkpoint(self, d: str) -> None:
        present = {k for k, (_, dd) in self._logs().items() if dd == d}
        # a log hidden from cleaning is still there: its offset stays for
        # when it is cleaned again (a move cancelled, the next start)
        present |= {k for k, dd in self._held().items() if dd == d}
        cps = {k: v for k, v in self.checkpoints.get(d, {}).items() if k in present}
        self.checkpoints[d] = cps
        try:
            write_offset_checkpoint(os.path.join(d, CLEANER_OFFSET_CHECKPOINT), cps)
        except OSError as exc:
            log.error("writing %s in %s failed: %s", CLEANER_OFFSET_CHECKPOINT, d, exc)

    # -- background thread ----------------------------------------------------------
    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="samsa-log-cleaner", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.backoff_ms / 1000.0):
            try:
                self.run_once()
            except Exception:
                log.exception("log cleaner pass failed")

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
