"""Leader epoch cache of one partition: (epoch, start offset) pairs, as Kafka keeps them.

OffsetForLeaderEpoch answers from it, so a follower/consumer can tell where an
epoch ended. Persisted to ``leader-epoch-checkpoint`` whenever it changes (rare:
once per new leader epoch, or when the log is truncated at either end).

Two things keep a broker with thousands of partitions from rewriting thousands of
these files for nothing (each write is an fsync and a rename):

- a write whose entries equal what the file already holds is skipped;
- the truncation a load does (``defer_flush=True``: epochs starting at or beyond
  the end of the log found on disk) changes only memory, as Kafka's
  truncateFromEndAsyncFlush does; so does a new leader epoch assigned by a role
  pass (``assign(..., defer_flush=True)``), which then writes it apart. The file may then still hold epochs starting at
  or beyond the log end, which a load would drop again, so that is safe only until
  the log grows past them: the log calls ``flush_deferred`` before its next append
  (``stale`` says one is due), and any other change writes the file anyway. A
  restarted empty partition's leader then assigns the same epoch at the same
  offset the file already holds, and nothing is written at all.
"""
from __future__ import annotations

import os
import threading

from samsa.storage.checkpoints import (LEADER_EPOCH_CHECKPOINT, current_durable_batch,
                                       read_leader_epoch_checkpoint, when_durable,
                                       write_leader_epoch_checkpoint)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, partition_dir: str):
        self.path = os.path.join(partition_dir, LEADER_EPOCH_CHECKPOINT)
        self._lock = threading.Lock()
        self._entries: list[tuple[int, int]] = read_leader_epoch_checkpoint(self.path)
        # what the file holds (it was read or written so): writes of the same skip
        self._persisted = list(self._entries)
        # entries differ from the file by a deferred truncation (see the module doc),
        # or are written but not in place until a durable batch commits (_flush)
        self.stale = False
        self._new_in: object | None = None   # (see new)
        self._writes = 0   # numbers each write: a batch's late callback knows if it is the last

    @classmethod
    def new(cls, partition_dir: str, *, new_dir: bool = False) -> "LeaderEpochCache":
        """The cache of a partition directory without the file: nothing to read.
        ``new_dir``: the directory was just made; if that was in a durable batch,
        the file's first write in the same batch needs no temporary file
        (checkpoints.write_new_file)."""
        self = cls.__new__(cls)
        self.path = os.path.join(partition_dir, LEADER_EPOCH_CHECKPOINT)
        self._lock = threading.Lock()
        self._entries = []
        self._persisted = []
        self.stale = False
        self._new_in = current_durable_batch() if new_dir else None
        self._writes = 0
        return self

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        e = self._entries
        return e[-1][0] if e else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int, *, defer_flush: bool = False) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (no-op if not newer).
        ``defer_flush``: written by ``flush_deferred`` (a leader's role pass, on
        a thread of its own), at the latest before the log grows (the module doc)."""
        if epoch < 0:
            return
        with self._lock:
            if self._entries and epoch <= self._entries[-1][0]:
                return
            # an epoch cannot start before the previous one did
            self._entries = [(e, o) for e, o in self._entries if o < start_offset]
            self._entries.append((epoch, start_offset))
            if defer_flush:
                self.stale = self._entries != self._persisted
            else:
                self._flush()

    def end_offset_for(self, requested: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's LeaderEpochFileCache.endOffsetFor: (epoch, end offset)."""
        entries = self._entries
        if requested == UNDEFINED_EPOCH or not entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested == entries[-1][0]:
            return requested, log_end_offset
        higher = next(((e, o) for e, o in entries if e > requested), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = None
        for e, o in entries:
            if e <= requested:
                floor = (e, o)
        if floor is None:
            return requested, higher[1]
        return floor[0], higher[1]

    def truncate_from_end(self, end_offset: int, *, defer_flush: bool = False) -> None:
        """Drop epochs starting at or after ``end_offset`` (the log was cut there).
        ``defer_flush``: a load's truncation, written only before the log grows."""
        with self._lock:
            kept = [(e, o) for e, o in self._entries if o < end_offset]
            if kept != self._entries:
                self._entries = kept
                if defer_flush:
                    self.stale = kept != self._persisted
                else:
                    self._flush()

    def flush_deferred(self) -> None:
        """Write the change deferred (a load's truncation, a role pass's new
        epoch): the log is about to grow, or the pass makes them durable."""
        with self._lock:
            if self.stale:
                self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: clamp the epoch covering it."""
        with self._lock:
            entries = self._entries
            keep_from = 0
            for i, (_, o) in enumerate(entries):
                if o <= start_offset:
                    keep_from = i
            new = entries[keep_from:]
            if new and new[0][1] < start_offset:
                new[0] = (new[0][0], start_offset)
            if new != entries:
                self._entries = new
                self._flush()

    def clear(self) -> None:
        """Forget every epoch (the log was emptied: truncate_fully_and_start_at);
        the checkpoint is rewritten empty, as Kafka's clearAndFlush does."""
        with self._lock:
            self._entries = []
            self._flush()

    def _flush(self) -> None:
        """(Lock held.) The file holds the entries after this."""
        self.stale = False
        if self._entries == self._persisted:
            return
        new_dir = self._new_in is not None and self._new_in is current_durable_batch()
        self._new_in = None
        if new_dir or os.path.isdir(os.path.dirname(self.path)):
            write_leader_epoch_checkpoint(self.path, self._entries, new_dir=new_dir)
            written = list(self._entries)
            self._writes = mine = self._writes + 1
            in_batch = current_durable_batch() is not None
            if in_batch:
                # Not in place until the batch commits (after a syncfs and a
                # pass's renames, seconds later): an append meanwhile writes
                # the file itself, or a kill -9 would leave records at an
                # epoch the file lacks (the load does not rebuild epochs).
                self.stale = True

            def persisted() -> None:
                if not in_batch:   # (run at once, under the lock)
                    self._persisted = written
                    return
                with self._lock:   # (the batch's commit, on its thread)
                    if self._writes != mine:
                        # a later write superseded this one's rename: the file
                        # holds that one, and must not be taken for this one's
                        return
                    self._persisted = written
                    self.stale = self._entries != written
            # inside a durable batch the file holds them only once the batch
            # commits: a failed batch must not make the next write look redundant
            when_durable(persisted)
