"""Loading a partition directory into what a ``Log`` runs on (Kafka's LogLoader).

``load_log`` reads ``<topic>-<partition>`` as a stop left it and returns a
``LoadedLog``: the segments (the last one open for appends), the log start
and end offsets, the high watermark, the recovery point, producer state and
the leader epoch cache. On the way it

- finishes what a stop interrupted: a compaction swap (``*.cleaned`` output
  dropped, a ``<base>.log.swap`` completed), asynchronous deletes
  (``*.deleted`` files removed);
- after an unclean stop (no clean-shutdown marker, ``clean_shutdown=False``)
  checks every segment from the recovery point on, rebuilding its indexes and
  .txnindex, cuts the log at the first invalid byte (a torn tail) and drops
  every segment after it;
- loads producer state from the newest snapshot at or below the log end plus
  the batches after it, and cuts the leader epoch checkpoint to the log's range.

The log itself (appends, reads, truncation, retention) is ``storage.log``; it
reuses ``load_producer_state`` when a truncation shortens the log.
"""
from __future__ import annotations

import bisect
import logging
import os
import re
from typing import Any, NamedTuple

from samsa.protocol.topic_name import topic_name_error
from samsa.storage.checkpoints import LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA, fsync_dir
from samsa.storage.entries import Entry, EntryScanner
from samsa.storage.leader_epoch import LeaderEpochCache
from samsa.storage.producer_state import ProducerStateManager, apply_producer_batch, read_marker
from samsa.storage.segment import (DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX,
                             TXN_INDEX_SUFFIX, LogSegment, segment_name)

log = logging.getLogger(__name__)

_SEGMENT_FILE_RE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex|\.snapshot)$")
_SWAP_RE = re.compile(r"^(\d{20})\.log\.swap$")
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_KNOWN_FILES = {PARTITION_METADATA, LEADER_EPOCH_CHECKPOINT}


class LoadedLog(NamedTuple):
    """What a partition directory holds, ready for a ``Log`` to run on."""
    segments: tuple[LogSegment, ...]   # oldest first; the last one open for appends
    log_end_offset: int
    log_start_offset: int
    high_watermark: int
    recovery_point: int
    producer_state: ProducerStateManager
    leader_epochs: LeaderEpochCache


def load_log(directory: str, config: Any, *, recovery_point: int,
             log_start_offset: int | None, high_watermark: int | None,
             clean_shutdown: bool) -> LoadedLog:
    """Load (creating it if missing) the partition directory ``directory``.

    ``log_start_offset`` and ``high_watermark`` come from the log dir's
    checkpoints (None: none recorded); ``recovery_point`` too, and with
    ``clean_shutdown=False`` every segment from it on is checked."""
    bases, names = _scan_dir(directory)
    segments = [LogSegment(directory, b, config) for b in bases]
    clean = clean_shutdown
    if not segments:
        segments = [LogSegment(directory, log_start_offset or 0, config, create=True)]
        clean = True
    elif not clean:
        listed = set(names)
        for seg in segments:
            if segment_name(seg.base_offset) + TXN_INDEX_SUFFIX not in listed:
                seg.txn_index.maybe_on_disk = False   # (recovery: no unlink to try)
        segments = _recover(directory, segments, recovery_point)
    if clean and not segments[-1].active:
        segments[-1].open_active()
    # (a recovery scanned the last segment to its end already)
    leo = segments[-1].recovered_next_offset
    if leo is None:
        leo = segments[-1].read_next_offset()
    lso = min(max(log_start_offset or 0, segments[0].base_offset), leo)
    # The high watermark is its owner's (the partition layer's): it comes
    # back from the replication-offset-checkpoint; without one (a data dir
    # from before replication) everything on disk counts as committed.
    hw = leo if high_watermark is None else max(lso, min(high_watermark, leo))
    # (the listing saves a failed open per missing file: thousands at a start)
    epochs = (LeaderEpochCache(directory) if LEADER_EPOCH_CHECKPOINT in names
              else LeaderEpochCache.new(directory))
    # (written only before the log grows: see storage/leader_epoch.py)
    epochs.truncate_from_end(leo, defer_flush=True)
    epochs.truncate_from_start(lso)
    ps = ProducerStateManager(directory)
    # (a recovery may have written snapshots since the listing: list again then)
    load_producer_state(ps, segments, lso, leo, names if clean else None, clean_shutdown=clean)
    return LoadedLog(tuple(segments), leo, lso, hw, min(recovery_point, leo), ps, epochs)


def new_log(directory: str, config: Any, *, log_start_offset: int | None) -> LoadedLog:
    """What a ``Log`` runs on in ``directory``, a partition directory its caller
    just created (so empty): the files a load would create for it, and none of
    a load's reading (no listing, no checkpoint, no snapshot, no scan). The
    bytes on disk are the same as ``load_log`` leaves: one empty segment at the
    log start with its two (preallocated) indexes."""
    start = log_start_offset or 0
    seg = LogSegment(directory, start, config, create=True)
    return LoadedLog((seg,), start, start, start, start,
                     ProducerStateManager(directory, snapshots=[]),   # (a new directory: none)
                     LeaderEpochCache.new(directory, new_dir=True))


def load_producer_state(ps: ProducerStateManager,
                        segments: tuple[LogSegment, ...] | list[LogSegment],
                        log_start_offset: int, leo: int, names: list[str] | None = None,
                        *, clean_shutdown: bool = False) -> None:
    """Producer state for a log of ``segments`` ending at ``leo``: the newest
    snapshot at or below it (later ones, of data no longer there, go) plus
    the batches after it; producers whose data is all below the log start
    are forgotten. ``names``: the directory's listing, if the caller has it.
    ``clean_shutdown``: the log as a clean stop left it, where no snapshot at
    all means no producers (nothing is read from the segments)."""
    offsets = ps.snapshot_offsets(names)
    if clean_shutdown and ps.empty_after_clean_stop(offsets):
        ps.load_latest_snapshot(leo, [])   # (none: no producers)
        return
    ps.delete_snapshots_after(leo, offsets)
    snap = ps.load_latest_snapshot(leo, [o for o in offsets if o <= leo])
    start = snap if snap is not None else log_start_offset
    if start < leo:
        _replay_producers(ps, segments, start, leo)
    ps.truncate_head(log_start_offset)


def parse_partition_dir(name: str) -> tuple[str, int]:
    """``<topic>-<partition>`` -> (topic, partition); ValueError otherwise."""
    topic, sep, part = name.rpartition("-")
    if not sep or not part.isascii() or not part.isdigit() or topic_name_error(topic):
        raise ValueError(f"not a partition directory name: {name!r}")
    return topic, int(part)


def _finish_swaps(directory: str) -> None:
    """Complete or discard a compaction swap interrupted by a stop (Kafka's rules):
    ``*.cleaned`` output never got swapped in and is dropped; a ``<base>.log.swap``
    had replaced segments, so the segments it covers go and it becomes the segment."""
    names = os.listdir(directory)
    for name in names:
        if name.endswith(CLEANED_SUFFIX) or (name.endswith(SWAP_SUFFIX)
                                             and not name.endswith(LOG_SUFFIX + SWAP_SUFFIX)):
            os.unlink(os.path.join(directory, name))   # indexes are rebuilt anyway
    for name in names:
        m = _SWAP_RE.match(name)
        if not m:
            continue
        base = int(m.group(1))
        swap = os.path.join(directory, name)
        with open(swap, "rb") as f:
            last = None
            for last in EntryScanner(f.fileno(), 0, os.fstat(f.fileno()).st_size):
                pass
        end = last.next_offset if last is not None else base
        for other in os.listdir(directory):
            m2 = _SEGMENT_FILE_RE.match(other)
            if m2 and m2.group(2) != ".snapshot" and base <= int(m2.group(1)) < max(end, base + 1):
                os.unlink(os.path.join(directory, other))
        log.warning("completing interrupted segment swap %s", swap)
        os.rename(swap, os.path.join(directory, name[:-len(SWAP_SUFFIX)]))
    fsync_dir(directory)


def _scan_dir(directory: str) -> tuple[list[int], list[str]]:
    """The segments' base offsets, after finishing interrupted swaps and deletes,
    and the names in the directory (created if missing)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        os.makedirs(directory)
        names = []
    if any(n.endswith((SWAP_SUFFIX, CLEANED_SUFFIX)) for n in names):
        _finish_swaps(directory)
        names = os.listdir(directory)
    bases = set()
    indexes: list[tuple[int, str]] = []   # (base offset, name): checked against the segments
    for name in names:
        if name.endswith(DELETED_SUFFIX):
            # leftovers of an async delete interrupted by a stop: finish it
            try:
                os.unlink(os.path.join(directory, name))
            except OSError:
                pass
            continue
        m = _SEGMENT_FILE_RE.match(name)
        if m:
            suffix = m.group(2)
            if suffix == LOG_SUFFIX:
                bases.add(int(m.group(1)))
            elif suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                indexes.append((int(m.group(1)), name))
            continue
        if name in _KNOWN_FILES or name.endswith(".tmp"):
            continue
        log.warning("ignoring unexpected file %s in partition directory",
                    os.path.join(directory, name))
    for base, name in indexes:
        if base not in bases:
            log.warning("ignoring index file %s without a segment",
                        os.path.join(directory, name))
    return sorted(bases), names


def _recover(directory: str, segments: list[LogSegment], recovery_point: int) -> list[LogSegment]:
    """Unclean stop: check every segment from the recovery point on; cut at the
    first invalid byte and drop every segment after it."""
    bases = [s.base_offset for s in segments]
    first = max(0, bisect.bisect_right(bases, recovery_point) - 1)
    for i in range(first, len(segments)):
        seg = segments[i]
        if i == len(segments) - 1:
            seg.open_active(load_indexes=False)
        truncated, _ = _recover_segment(directory, segments, i)
        if truncated and i < len(segments) - 1:
            log.warning("%s: dropping %d segment(s) after corruption in %s",
                        directory, len(segments) - 1 - i, seg.log_path)
            for later in segments[i + 1:]:
                later.delete_now()
            segments = segments[:i + 1]
            seg.open_active(load_indexes=False)
            _recover_segment(directory, segments, i)
            break
    if not segments[-1].active:
        segments[-1].open_active()
    return segments


def _recover_segment(directory: str, segments: list[LogSegment], i: int) -> tuple[int, str | None]:
    """Kafka's recoverSegment: check the segment, and write its .txnindex anew
    from its batches run through producer state as it was at the segment's
    base (a scratch manager: newest snapshot at or below the base plus the
    batches in between); a snapshot at the segment's end then saves the
    next segment (and the final load) that replay. A segment without
    transactional batches has no .txnindex to write: then nothing older is
    read, so recovering a log without transactions stays as cheap as before."""
    seg = segments[i]
    batches = []   # (header, base, last, marker) of the batches with a producer id
    end = [seg.base_offset]

    def on_batch(e: Entry, data: memoryview) -> None:
        end[0] = e.next_offset
        h = e.header
        if h is not None and h.producer_id >= 0:
            batches.append((h, e.base_offset, e.last_offset,
                            read_marker(data) if h.is_control else None))

    result: tuple[int, str | None] = seg.recover(on_batch)
    if not any(h.is_transactional for h, _, _, _ in batches):
        return result
    ps = ProducerStateManager(directory)
    snap = ps.load_latest_snapshot(seg.base_offset)
    start = snap if snap is not None else segments[0].base_offset
    if start < seg.base_offset:
        _replay_producers(ps, segments[:i], start, seg.base_offset)
    for h, base, last, marker in batches:
        apply_producer_batch(ps, h, base, last, marker, seg)
    try:
        ps.take_snapshot(end[0], keep=0)   # later snapshots stay valid: delete none
    except OSError as exc:
        log.warning("producer state snapshot at %d failed: %s", end[0], exc)
    return result


def _replay_producers(ps: ProducerStateManager, segs: tuple[LogSegment, ...] | list[LogSegment],
                      start: int, end: int) -> None:
    """Producer state from the batches with last offset in [start, end) of
    ``segs`` (Kafka's loadProducersFromRecords): transactions open and
    complete, and nothing is written (the .txnindex entries exist already)."""
    bases = [s.base_offset for s in segs]
    i = max(0, bisect.bisect_right(bases, start) - 1)
    for seg in segs[i:]:
        _, pos = seg.offset_index.lookup(start)
        with seg.borrowed_fd() as fd:
            for e in EntryScanner(fd, pos, seg.size):
                h = e.header
                if h is None or h.producer_id < 0 or e.last_offset < start:
                    continue
                if e.last_offset >= end:
                    return
                marker = read_marker(os.pread(fd, e.size, e.position)) if h.is_control else None
                completed = ps.update(h, e.base_offset, e.last_offset, marker)
                if completed is not None:
                    ps.complete_txn(completed)
