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

Snapshot layout (Kafka's ProducerSnapshot v1, big-endian)::

    version i16 = 1, crc u32 = CRC-32C of everything after it,
    count i32, then per producer: producerId i64, epoch i16, lastSequence i32,
    lastOffset i64, offsetDelta i32, timestamp i64, coordinatorEpoch i32,
    currentTxnFirstOffset i64

A snapshot keeps only each producer's last batch, as Kafka's does. Snapshots
are taken at segment roll and at clean shutdown, named by the log end offset
at that moment; after an unclean stop the state is rebuilt from the newest
usable snapshot plus the batches after it.
"""
from __future__ import annotations

import collections
import logging
import os
import re
import struct
from typing import NamedTuple

from crc32c import crc32c

from storage.checkpoints import fsync_dir
from storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 0x7FFFFFFF
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAPSHOT_RE = re.compile(r"^(\d{20})\.snapshot$")
_HEAD = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")


class BatchMetadata(NamedTuple):
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


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

    def __init__(self, partition_dir: str):
        self.dir = partition_dir
        self.producers: dict[int, ProducerEntry] = {}

    # -- append path -------------------------------------------------------------
    def check(self, headers) -> tuple[list, BatchMetadata | None]:
        """Validate the producer fields of an append's batches, mutating nothing.

        Returns (pending updates, duplicate). ``duplicate`` is the original
        metadata when the append repeats one of the producer's last 5 batches
        (the whole append is then dropped, as Kafka does). Raises
        InvalidProducerEpochError / OutOfOrderSequenceError.
        """
        pending: dict[int, tuple[int, int]] = {}   # pid -> (epoch, last seq) within this append
        updates = []
        for i, hdr in enumerate(headers):
            pid = hdr.producer_id
            if pid < 0 or hdr.is_control:
                continue
            epoch = hdr.producer_epoch
            first_seq = hdr.base_sequence
            last_seq = hdr.last_sequence
            entry = self.producers.get(pid)
            if pid in pending:
                cur_epoch, cur_last = pending[pid]
            elif entry is not None:
                cur_epoch, cur_last = entry.epoch, entry.last_seq
            else:
                cur_epoch, cur_last = None, None
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
            pending[pid] = (epoch, last_seq if first_seq >= 0 else (cur_last if cur_last is not None else -1))
            updates.append(i)
        return updates, None

    def update(self, hdr, first_offset: int, last_offset: int) -> None:
        """Record an appended (or replayed) batch; no checks."""
        pid = hdr.producer_id
        if pid < 0 or hdr.is_control:
            return
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid, hdr.producer_epoch)
        elif hdr.producer_epoch != entry.epoch:
            entry.epoch = hdr.producer_epoch
            entry.batches.clear()
        if hdr.base_sequence >= 0:
            entry.batches.append(BatchMetadata(hdr.base_sequence, hdr.last_sequence,
                                               first_offset, last_offset, hdr.max_timestamp))
        entry.last_timestamp = hdr.max_timestamp

    def truncate_head(self, log_start_offset: int) -> None:
        """Forget producers whose every batch is now below the log start offset."""
        for pid in [p for p, e in self.producers.items()
                    if e.batches and e.last_offset < log_start_offset]:
            del self.producers[pid]

    # -- snapshots -------------------------------------------------------------------
    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.dir, f"{offset:020d}{SNAPSHOT_SUFFIX}")

    def snapshot_offsets(self) -> list[int]:
        out = []
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return out
        for name in names:
            m = _SNAPSHOT_RE.match(name)
            if m:
                out.append(int(m.group(1)))
        return sorted(out)

    def take_snapshot(self, offset: int, keep: int = 2) -> None:
        data = encode_snapshot(self.producers.values())
        path = self.snapshot_path(offset)
        tmp = path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        fsync_dir(self.dir)
        offs = self.snapshot_offsets()
        for old in offs[:-keep] if keep else []:
            self._remove_snapshot(old)

    def clear(self) -> None:
        """Forget every producer and delete every snapshot (the log was emptied)."""
        self.producers = {}
        for off in self.snapshot_offsets():
            self._remove_snapshot(off)

    def delete_snapshots_after(self, offset: int) -> None:
        for off in self.snapshot_offsets():
            if off > offset:
                self._remove_snapshot(off)

    def _remove_snapshot(self, offset: int) -> None:
        try:
            os.unlink(self.snapshot_path(offset))
        except FileNotFoundError:
            pass

    def load_latest_snapshot(self, max_offset: int) -> int | None:
        """Load the newest readable snapshot at or below ``max_offset``; its offset or None."""
        for off in reversed(self.snapshot_offsets()):
            if off > max_offset:
                continue
            try:
                with open(self.snapshot_path(off), "rb") as f:
                    entries = decode_snapshot(f.read())
            except (OSError, ValueError, struct.error) as exc:
                log.warning("skipping unreadable producer snapshot %s: %s",
                            self.snapshot_path(off), exc)
                continue
            self.producers = {e.producer_id: e for e in entries}
            return off
        self.producers = {}
        return None


def encode_snapshot(entries) -> bytes:
    body = bytearray(_COUNT.pack(0))
    n = 0
    for e in entries:
        if e.batches:
            b = e.batches[-1]
            last_seq, last_off, delta, ts = b.last_seq, b.last_offset, b.last_offset - b.first_offset, b.timestamp
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
    out = []
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
