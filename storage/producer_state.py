"""Idempotent-producer state of one partition, and its ``<offset>.snapshot`` files.

Per producer id the log remembers the current epoch and the last 5 batches
(first/last sequence, first/last offset), which is what Kafka needs to tell a
retry (duplicate: answer with the original offsets, append nothing) from a gap
(OutOfOrderSequence) or a zombie (lower epoch). The rules, from Kafka's
ProducerAppendInfo:

- epoch lower than the known one            -> InvalidProducerEpochError
- known producer, new epoch, first seq != 0 -> OutOfOrderSequenceError
- same epoch: a batch equal (first/last seq) to one of the last 5 -> duplicate
- same epoch: first seq != last seq + 1 (2^31-1 wraps to 0) -> OutOfOrderSequenceError
- unknown producer (never seen, or its data was deleted by retention): any
  sequence is accepted, like current Kafka (KIP-360).

Transactions (KIP-98, Kafka's ProducerAppendInfo / ProducerStateManager): a
transactional batch opens a transaction for its producer when none is open
(``current_txn_first_offset`` = its base offset); the producer's control batch
(COMMIT/ABORT marker) closes it and yields a ``CompletedTxn``. Refused, for
appends other than replication:

- a non-transactional batch while the producer's transaction is open -> InvalidTxnStateError
- a marker from an older producer epoch -> InvalidProducerEpochError (TV2
  markers carry a bumped epoch: there an equal epoch is refused too, except
  the retry of a marker whose transaction already ended)
- a marker from an older coordinator epoch -> TransactionCoordinatorFencedError

Open transactions (``ongoing``: first offset -> producer id) and completed ones
whose marker is not yet below the high watermark (``unreplicated``: first
offset -> marker offset) make the log's first unstable offset, which bounds the
last stable offset that read_committed consumers read up to.

Snapshot layout (Kafka's ProducerSnapshot v1, big-endian)::

    version i16 = 1, crc u32 = CRC-32C of everything after it,
    count i32, then per producer: producerId i64, epoch i16, lastSequence i32,
    lastOffset i64, offsetDelta i32, timestamp i64, coordinatorEpoch i32,
    currentTxnFirstOffset i64

A snapshot keeps only each producer's last batch, as Kafka's does. Snapshots
are taken at segment roll and at clean shutdown, named by the log end offset
at that moment; after an unclean stop the state is rebuilt from the newest
usable snapshot plus the batches after it. A log that has no snapshot at all
after a clean stop has no producer state: Kafka's loader reads it so (it
takes the case for an upgrade and skips the scan), and a clean stop relies on
it, writing no snapshot for a log with no producers and none before
(``snapshot_due_at_close``): with 10,000 partitions written by producers
without idempotence, 10,000 file creations fewer. Which snapshot files there are is
known in memory once the directory was listed (by the log's load; a new
partition's directory has none), as Kafka's ProducerStateManager keeps its
snapshots map: a stop of 10,000 partitions neither lists their directories to
find the older snapshots to delete nor looks for the one it is about to write.
"""
from __future__ import annotations

import collections
import logging
import os
import re
import struct
import threading
from typing import TYPE_CHECKING, Iterable, Mapping, NamedTuple, Sequence

from crc32c import crc32c

from samsa.storage.checkpoints import read_small_file, when_durable, write_checked_file
from samsa.protocol.errors import ProtocolError
from samsa.protocol.model import Buf
from samsa.protocol.records import CONTROL_ABORT, iter_records, parse_control_record
from samsa.storage.errors import (InvalidProducerEpochError, InvalidTxnStateError,
                            OutOfOrderSequenceError, TransactionCoordinatorFencedError)

if TYPE_CHECKING:
    from samsa.protocol.records import BatchHeader
    from samsa.storage.segment import LogSegment

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 0x7FFFFFFF
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAPSHOT_RE = re.compile(r"^(\d{20})\.snapshot$")
_known_lock = threading.Lock()   # (updates of a manager's known snapshots: rare, tiny)
_HEAD = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
_TRANSACTIONAL, _CONTROL = 0x10, 0x20   # batch attribute bits


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker (Kafka's CompletedTxn): data from
    ``first_offset``, marker at ``last_offset``."""
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


def read_marker(batch: Buf) -> tuple[int, int] | None:
    """(control type, coordinator epoch) of a control batch's first record
    (``batch``: the whole batch's bytes); None when it has no record (a
    compaction emptied it: it changes no state, as in Kafka) or an unreadable one."""
    try:
        for rec in iter_records(batch):
            ctype, coord = parse_control_record(rec.key, rec.value)
            return ctype, (coord if coord is not None else -1)
    except ProtocolError:
        return None
    return None


class ProducerSummary(NamedTuple):
    """A producer as DescribeProducers shows it."""
    producer_id: int
    epoch: int
    last_seq: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


class ProducerEntry:
    __slots__ = ("producer_id", "epoch", "batches", "coordinator_epoch",
                 "current_txn_first_offset", "last_timestamp")

    def __init__(self, producer_id: int, epoch: int):
        self.producer_id = producer_id
        self.epoch = epoch
        self.batches: collections.deque[BatchMetadata] = collections.deque(
            maxlen=NUM_BATCHES_TO_RETAIN)
        self.coordinator_epoch = -1
        self.current_txn_first_offset = -1
        self.last_timestamp = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def summary(self) -> ProducerSummary:
        return ProducerSummary(self.producer_id, self.epoch, self.last_seq, self.last_timestamp,
                               self.coordinator_epoch, self.current_txn_first_offset)

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def _decrement_sequence(seq: int, delta: int) -> int:
    return seq - delta if seq >= delta else INT32_MAX - (delta - seq) + 1


class ProducerStateManager:
    """Producer id -> ProducerEntry, guarded by the owning Log's append lock."""

    def __init__(self, partition_dir: str, snapshots: list[int] | None = None):
        self.dir = partition_dir
        # the offsets of the snapshot files in the directory, oldest first (None:
        # not listed yet); only this manager writes and deletes them
        self._snapshots = snapshots
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}        # open transactions: first offset -> producer id
        self.unreplicated: dict[int, int] = {}   # decided, marker not yet below the HW: first -> marker

    # -- append path -------------------------------------------------------------
    def check(self, headers: Sequence[BatchHeader],
              markers: Mapping[int, tuple[int, int] | None] | None = None, txn_version: int = 0
              ) -> tuple[list[int], BatchMetadata | None]:
        """Validate the producer fields of an append's batches, mutating nothing.

        ``markers``: batch index -> read_marker() of each control batch.
        ``txn_version``: the WriteTxnMarkers request's TransactionVersion (2:
        markers carry a bumped epoch).
        Returns (pending updates, duplicate). ``duplicate`` is the original
        metadata when the append repeats one of the producer's last 5 batches
        (the whole append is then dropped, as Kafka does). Raises
        InvalidProducerEpochError / OutOfOrderSequenceError / InvalidTxnStateError /
        TransactionCoordinatorFencedError.
        """
        # pid -> (epoch, last seq, transaction open, coordinator epoch) within this append
        pending: dict[int, tuple[int, int | None, bool, int]] = {}
        updates: list[int] = []
        cur_epoch: int | None   # None: a producer this log does not know
        cur_last: int | None
        for i, hdr in enumerate(headers):
            pid = hdr.producer_id
            if pid < 0:
                continue
            epoch = hdr.producer_epoch
            entry = self.producers.get(pid)
            if pid in pending:
                cur_epoch, cur_last, txn_open, coord_epoch = pending[pid]
            elif entry is not None:
                cur_epoch, cur_last = entry.epoch, entry.last_seq
                txn_open, coord_epoch = entry.current_txn_first_offset >= 0, entry.coordinator_epoch
            else:
                cur_epoch, cur_last, txn_open, coord_epoch = None, None, False, -1
            attrs = hdr.attributes   # bits, not the properties: this is the produce path
            if attrs & _CONTROL:
                marker = markers.get(i) if markers else None
                if marker is None:
                    continue   # no record: nothing to check or update
                if cur_epoch is not None:
                    if txn_version >= 2:
                        # a retried TV2 marker (same epoch, transaction over) is let through
                        bad = epoch < cur_epoch or (epoch == cur_epoch and txn_open)
                    else:
                        bad = epoch < cur_epoch
                    if bad:
                        raise InvalidProducerEpochError(
                            f"producer {pid}: marker epoch {epoch} is older than current "
                            f"epoch {cur_epoch}")
                if coord_epoch > marker[1]:
                    raise TransactionCoordinatorFencedError(
                        f"producer {pid}: coordinator epoch {marker[1]} (zombie) is older "
                        f"than {coord_epoch} (current)")
                new_last = cur_last if epoch == cur_epoch else -1
                pending[pid] = (epoch, new_last, False, marker[1])
                updates.append(i)
                continue
            first_seq = hdr.base_sequence
            last_seq = hdr.last_sequence
            if cur_epoch is not None and epoch < cur_epoch:
                raise InvalidProducerEpochError(
                    f"producer {pid}: epoch {epoch} is older than current epoch {cur_epoch}")
            if first_seq >= 0 and cur_epoch is not None:
                if epoch != cur_epoch:
                    if first_seq != 0:
                        raise OutOfOrderSequenceError(
                            f"producer {pid}: new epoch {epoch} must start at sequence 0, "
                            f"got {first_seq}")
                else:
                    if pid not in pending and entry is not None:
                        dup = entry.find_duplicate(first_seq, last_seq)
                        if dup is not None:
                            return [], dup
                    if cur_last is not None and not _in_sequence(cur_last, first_seq):
                        raise OutOfOrderSequenceError(
                            f"producer {pid} epoch {epoch}: expected sequence "
                            f"{(cur_last + 1) & INT32_MAX}, got {first_seq}")
            transactional = attrs & _TRANSACTIONAL
            if txn_open and not transactional:
                raise InvalidTxnStateError(
                    f"producer {pid}: expected a transactional write, its transaction is open")
            pending[pid] = (epoch, last_seq if first_seq >= 0 else (cur_last if cur_last is not None else -1),
                            txn_open or bool(transactional), coord_epoch)
            updates.append(i)
        return updates, None

    def update(self, hdr: BatchHeader, first_offset: int, last_offset: int,
               marker: tuple[int, int] | None = None) -> CompletedTxn | None:
        """Record an appended (or replayed) batch; no checks. ``marker`` is
        read_marker() of a control batch. Returns the transaction a marker
        completed, if the producer had one open (a marker without data changes
        no LSO and no index, as in Kafka); the caller then indexes it (if
        aborted) and calls complete_txn."""
        pid = hdr.producer_id
        attrs = hdr.attributes
        if pid < 0 or (attrs & _CONTROL and marker is None):
            return None
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid, hdr.producer_epoch)
        elif hdr.producer_epoch != entry.epoch:
            # a new epoch (data or marker): its sequences start afresh (Kafka's
            # maybeUpdateProducerEpoch); an open transaction stays open
            entry.epoch = hdr.producer_epoch
            entry.batches.clear()
        # (a control batch without a marker returned above: the second test is for mypy)
        if attrs & _CONTROL and marker is not None:
            completed = None
            if entry.current_txn_first_offset >= 0:
                completed = CompletedTxn(pid, entry.current_txn_first_offset, first_offset,
                                         marker[0] == CONTROL_ABORT)
            entry.current_txn_first_offset = -1
            entry.coordinator_epoch = marker[1]
            entry.last_timestamp = hdr.max_timestamp
            return completed
        if hdr.base_sequence >= 0:
            entry.batches.append(BatchMetadata(hdr.base_sequence, hdr.last_sequence,
                                               first_offset, last_offset, hdr.max_timestamp))
        entry.last_timestamp = hdr.max_timestamp
        if attrs & _TRANSACTIONAL and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = first_offset
            self.ongoing[first_offset] = pid
        return None

    # -- transactions ------------------------------------------------------------------
    def last_stable_offset_for(self, completed: CompletedTxn) -> int:
        """Kafka's lastStableOffset(completedTxn), the LSO a .txnindex entry
        records: the first offset of the earliest transaction of another
        producer still open, else the offset after the marker."""
        others = [first for first, pid in self.ongoing.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        """The transaction is decided; it stays unstable until its marker is
        below the high watermark (on_high_watermark)."""
        self.ongoing.pop(completed.first_offset, None)
        self.unreplicated[completed.first_offset] = completed.last_offset

    def on_high_watermark(self, hw: int) -> bool:
        """Forget completed transactions whose marker is below ``hw``; True when any went."""
        gone = [first for first, last in self.unreplicated.items() if last < hw]
        for first in gone:
            del self.unreplicated[first]
        return bool(gone)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest transaction not yet stable, or None."""
        fu = min(self.ongoing) if self.ongoing else None
        if self.unreplicated:
            u = min(self.unreplicated)
            fu = u if fu is None or u < fu else fu
        return fu

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Kafka's removeExpiredProducers: forget producers without an open
        transaction whose last write is ``expiration_ms`` old. Returns how many."""
        gone = [pid for pid, e in self.producers.items()
                if e.current_txn_first_offset < 0 and now_ms - e.last_timestamp >= expiration_ms]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    def truncate_head(self, log_start_offset: int) -> None:
        """Forget producers whose every batch is now below the log start offset
        (not one with an open transaction: its marker is still to come), and
        completed transactions whose marker is below it."""
        for pid in [p for p, e in self.producers.items()
                    if e.batches and e.last_offset < log_start_offset
                    and e.current_txn_first_offset < 0]:
            del self.producers[pid]
        for first in [f for f, last in self.unreplicated.items() if last < log_start_offset]:
            del self.unreplicated[first]

    # -- snapshots -------------------------------------------------------------------
    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.dir, f"{offset:020d}{SNAPSHOT_SUFFIX}")

    def snapshot_offsets(self, names: list[str] | None = None) -> list[int]:
        """The snapshots' offsets, oldest first: as known since the directory
        was listed, else from a listing (``names``: the directory's listing when
        the caller has one, which also tells what is there now)."""
        known = self._snapshots
        if names is None and known is not None:
            return list(known)
        if names is None:
            try:
                names = os.listdir(self.dir)
            except FileNotFoundError:
                return []
        out: list[int] = []
        for name in names:
            m = _SNAPSHOT_RE.match(name)
            if m:
                out.append(int(m.group(1)))
        out.sort()
        self._snapshots = out
        return list(out)

    def has_snapshot(self, offset: int) -> bool:
        return offset in self.snapshot_offsets()

    def snapshot_due_at_close(self, offset: int) -> bool:
        """Whether a clean close at log end ``offset`` writes a snapshot. Not
        when one is there already (Kafka's takeSnapshot skips it too), nor
        when there are no producers and no snapshot at all: a clean load
        finding none reads exactly that state (``empty_after_clean_stop``)."""
        offsets = self.snapshot_offsets()
        return offset not in offsets and bool(offsets or self.producers)

    @staticmethod
    def empty_after_clean_stop(offsets: Sequence[int]) -> bool:
        """Whether a log loaded after a clean stop, holding the snapshots at
        ``offsets``, has no producer state to read from its segments: none at
        all means none (Kafka's rebuildProducerState skips the scan on a clean
        shutdown without snapshots; snapshot_due_at_close writes none for it)."""
        return not offsets

    def take_snapshot(self, offset: int, keep: int = 2) -> None:
        """Write the snapshot at ``offset`` (temporary file, fsync, rename; inside
        durable_batch() a new one in place, made durable with the batch: its
        CRC tells a cut one, see write_checked_file) and then keep only the
        newest ``keep`` (0: delete none), once the new one is durable."""
        write_checked_file(self.snapshot_path(offset), encode_snapshot(self.producers.values()))
        self._known(add=offset)
        if keep:
            when_durable(lambda: self._keep_newest(keep))

    def _known(self, add: int | None = None, gone: int | None = None) -> None:
        """A snapshot file written or deleted (a new sorted list each time: the
        stop's barrier reads it on another thread, and deletes on it)."""
        with _known_lock:
            known = self._snapshots
            if known is None:
                return
            offsets = set(known)
            if add is not None:
                offsets.add(add)
            offsets.discard(gone)   # (None: no such offset)
            self._snapshots = sorted(offsets)

    def _keep_newest(self, keep: int) -> None:
        for old in self.snapshot_offsets()[:-keep]:
            self._remove_snapshot(old)

    def clear(self) -> None:
        """Forget every producer and delete every snapshot (the log was emptied)."""
        self.producers = {}
        self.ongoing = {}
        self.unreplicated = {}
        for off in self.snapshot_offsets():
            self._remove_snapshot(off)

    def delete_snapshots_after(self, offset: int, offsets: list[int] | None = None) -> None:
        for off in self.snapshot_offsets() if offsets is None else offsets:
            if off > offset:
                self._remove_snapshot(off)

    def _remove_snapshot(self, offset: int) -> None:
        try:
            os.unlink(self.snapshot_path(offset))
        except FileNotFoundError:
            pass
        self._known(gone=offset)

    def load_latest_snapshot(self, max_offset: int, offsets: list[int] | None = None
                             ) -> int | None:
        """Load the newest readable snapshot at or below ``max_offset``; its offset
        or None (``offsets``: the snapshots there are, if the caller listed them)."""
        for off in reversed(self.snapshot_offsets() if offsets is None else offsets):
            if off > max_offset:
                continue
            try:
                data = read_small_file(self.snapshot_path(off))
                if data is None:
                    raise FileNotFoundError("gone since the listing")
                entries = decode_snapshot(data)
            except (OSError, ValueError, struct.error) as exc:
                log.warning("skipping unreadable producer snapshot %s: %s",
                            self.snapshot_path(off), exc)
                if not isinstance(exc, OSError):
                    # corrupt (a crash cut it short: write_checked_file): gone, as
                    # Kafka's loadFromSnapshot deletes it, so that a close at this
                    # offset writes a whole one again instead of finding it there
                    self._remove_snapshot(off)
                continue
            self._set_producers(entries)
            return off
        self._set_producers([])
        return None

    def _set_producers(self, entries: Sequence[ProducerEntry]) -> None:
        """Loaded state: open transactions come back from the entries' first
        offsets (Kafka's loadProducerEntry); completed ones are all below the
        snapshot, so none is unreplicated as far as the log is concerned."""
        self.producers = {e.producer_id: e for e in entries}
        self.ongoing = {e.current_txn_first_offset: e.producer_id for e in entries
                        if e.current_txn_first_offset >= 0}
        self.unreplicated = {}


def encode_snapshot(entries: Iterable[ProducerEntry]) -> bytes:
    body = bytearray(_COUNT.pack(0))
    n = 0
    for e in entries:
        # timestamp: the producer's last write, data or marker (Kafka's lastTimestamp)
        if e.batches:
            b = e.batches[-1]
            last_seq, last_off, delta, ts = b.last_seq, b.last_offset, b.last_offset - b.first_offset, e.last_timestamp
        else:
            last_seq, last_off, delta, ts = -1, -1, 0, e.last_timestamp
        body += _ENTRY.pack(e.producer_id, e.epoch, last_seq, last_off, delta, ts,
                            e.coordinator_epoch, e.current_txn_first_offset)
        n += 1
    _COUNT.pack_into(body, 0, n)
    return _HEAD.pack(SNAPSHOT_VERSION, crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerEntry]:
    if len(data) < _HEAD.size + _COUNT.size:
        raise ValueError("snapshot too short")
    version, crc = _HEAD.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise ValueError(f"unknown snapshot version {version}")
    if crc32c(data[6:]) != crc:
        raise ValueError("snapshot CRC mismatch")
    (count,) = _COUNT.unpack_from(data, 6)
    if count < 0 or len(data) != 10 + count * _ENTRY.size:
        raise ValueError("snapshot length does not match its entry count")
    out: list[ProducerEntry] = []
    for i in range(count):
        pid, epoch, last_seq, last_off, delta, ts, coord, txn_first = _ENTRY.unpack_from(
            data, 10 + i * _ENTRY.size)
        e = ProducerEntry(pid, epoch)
        e.coordinator_epoch = coord
        e.current_txn_first_offset = txn_first
        e.last_timestamp = ts
        if last_seq >= 0:
            e.batches.append(BatchMetadata(_decrement_sequence(last_seq, delta), last_seq,
                                           last_off - delta, last_off, ts))
        out.append(e)
    return out


_TRANSACTIONAL_MASK = 0x10


def apply_producer_batch(ps: ProducerStateManager, h: BatchHeader, first: int, last: int,
                         marker: tuple[int, int] | None, seg: LogSegment) -> bool:
    """Record one appended batch in producer state, and a transaction its marker
    aborts in ``seg``'s .txnindex with the LSO Kafka computes right after it
    (UnifiedLog.append / LogSegment.updateProducerState). True when open
    transactions changed (the first unstable offset must be published again).

    Every path (leader append, follower append, segment recovery) applies
    batches one at a time through here, so replicas and a recovered segment
    write the same .txnindex bytes as the leader did: the LSO recorded depends
    only on the batches before the marker, never on how they were grouped into
    appends (Kafka applies a whole append's batches first, so a follower's
    multi-batch fetch could record another LSO than its leader).
    """
    if not h.attributes & _TRANSACTIONAL_MASK:   # no transaction opens or closes
        ps.update(h, first, last, marker)
        return False
    open_before = len(ps.ongoing)
    completed = ps.update(h, first, last, marker)
    if completed is not None:
        if completed.is_aborted:
            seg.append_aborted_txn(completed.producer_id, completed.first_offset,
                                   completed.last_offset, ps.last_stable_offset_for(completed))
        ps.complete_txn(completed)
        return True
    # a batch joining a transaction already open moves nothing: only one that
    # opens a transaction changes the first unstable offset
    return len(ps.ongoing) != open_before
