"""One share-partition's delivery state (KIP-932): which offsets of a topic
partition a share group has yet to deliver, has handed to a member under an
acquisition lock, or is done with -- a plain state machine fed events with
the time as a parameter (no I/O, no clock, no timers).

Kafka's words: the share-partition start offset (SPSO) is the first offset
not yet done with; the end offset (SPEO, ``next_offset`` here) the first one
never acquired. Between them every offset is in flight, in one of the record
states below (their numbers are Kafka's, as written in ShareSnapshot records):

    AVAILABLE -acquire-> ACQUIRED -accept/gap-> ACKNOWLEDGED
                         ACQUIRED -release/lock expiry-> AVAILABLE (ARCHIVED
                                   once the delivery count reached the limit)
                         ACQUIRED -reject-> ARCHIVED

Each acquisition counts a delivery. When the records at the start are
ACKNOWLEDGED or ARCHIVED the start offset moves past them and they are
forgotten. Locks are checked against ``now_ms`` on every event (``expire``),
so a record whose lock ran out is available again to the next fetch; the
runtime wakes waiting fetches at ``next_expiry()``.
"""
from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from samsa.protocol.errors import ErrorCode


class RecordState(enum.IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(enum.IntEnum):
    """ShareFetch/ShareAcknowledge's AcknowledgeTypes."""
    GAP = 0       # no record at this offset (a compacted or control offset): done with
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


@dataclass
class _InFlight:
    state: RecordState = RecordState.AVAILABLE
    delivery_count: int = 0
    member: str | None = None
    deadline_ms: int = 0


@dataclass(frozen=True)
class Acquired:
    """A run of offsets handed to a member (ShareFetch's AcquiredRecords)."""
    first_offset: int
    last_offset: int
    delivery_count: int


@dataclass(frozen=True)
class StateBatch:
    """A run of offsets in one persisted state (ShareSnapshot's StateBatches):
    ACQUIRED is persisted as AVAILABLE, as Kafka does (a lock dies with the broker)."""
    first_offset: int
    last_offset: int
    state: int
    delivery_count: int


@dataclass(frozen=True)
class ShareLimits:
    lock_duration_ms: int = 30_000        # share.record.lock.duration.ms
    delivery_count_limit: int = 5         # share.delivery.count.limit
    max_in_flight: int = 2_000            # group.share.partition.max.record.locks


class SharePartition:
    def __init__(self, start_offset: int, limits: ShareLimits,
                 batches: Sequence[StateBatch] = ()) -> None:
        self.start_offset = start_offset
        self.next_offset = start_offset
        self.limits = limits
        self._flight: dict[int, _InFlight] = {}
        for b in batches:
            for off in range(max(b.first_offset, start_offset), b.last_offset + 1):
                state = RecordState(b.state)
                if state == RecordState.ACQUIRED:
                    state = RecordState.AVAILABLE
                self._flight[off] = _InFlight(state, b.delivery_count)
            self.next_offset = max(self.next_offset, b.last_offset + 1)
        self._advance()

    # ------------------------------------------------------------ events

    def expire(self, now_ms: int) -> bool:
        """Release every lock that ran out by ``now_ms``; True if any did."""
        changed = False
        for rec in self._flight.values():
            if rec.state == RecordState.ACQUIRED and rec.deadline_ms <= now_ms:
                self._release(rec)
                changed = True
        if changed:
            self._advance()
        return changed

    def first_acquirable(self, now_ms: int) -> int:
        """Where a fetch should start reading the log: the first AVAILABLE
        in-flight offset, else the end offset."""
        self.expire(now_ms)
        for off in range(self.start_offset, self.next_offset):
            rec = self._flight.get(off)
            if rec is None or rec.state == RecordState.AVAILABLE:
                return off
        return self.next_offset

    def acquire(self, member: str, max_records: int, upper: int, now_ms: int,
                lower: int = -1) -> list[Acquired]:
        """Lock up to ``max_records`` offsets below ``upper`` (the end of what
        the fetch read from the log) for ``member``: available in-flight ones
        first, then new ones from the end offset, within the in-flight limit."""
        self.expire(now_ms)
        deadline = now_ms + self.limits.lock_duration_ms
        taken: list[tuple[int, int]] = []  # (offset, delivery count)
        start = max(self.start_offset, lower)
        for off in range(start, min(self.next_offset, upper)):
            if len(taken) >= max_records:
                break
            rec = self._flight.setdefault(off, _InFlight())
            if rec.state == RecordState.AVAILABLE:
                self._lock(rec, member, deadline)
                taken.append((off, rec.delivery_count))
        room = self.start_offset + self.limits.max_in_flight - self.next_offset
        while len(taken) < max_records and self.next_offset < upper and room > 0:
            if self.next_offset >= start:
                rec = self._flight.setdefault(self.next_offset, _InFlight())
                self._lock(rec, member, deadline)
                taken.append((self.next_offset, rec.delivery_count))
            self.next_offset += 1
            room -= 1
        return _runs(taken)

    def acknowledge(self, member: str, first_offset: int, last_offset: int,
                    types: Sequence[int], now_ms: int) -> ErrorCode:
        """One acknowledgement batch: a type for every offset, or one for them
        all. All or nothing: an offset not held by ``member`` (or its lock
        expired) refuses the batch with INVALID_RECORD_STATE, as Kafka does."""
        if last_offset < first_offset or not types or (
                len(types) != 1 and len(types) != last_offset - first_offset + 1):
            return ErrorCode.INVALID_REQUEST
        if any(t not in AckType.__members__.values() for t in types):
            return ErrorCode.INVALID_REQUEST
        self.expire(now_ms)
        if first_offset < self.start_offset or last_offset >= self.next_offset:
            return ErrorCode.INVALID_RECORD_STATE  # not in flight (and no loop over a wild range)
        recs = []
        for off in range(first_offset, last_offset + 1):
            rec = self._flight.get(off)
            if rec is None or rec.state != RecordState.ACQUIRED or rec.member != member:
                return ErrorCode.INVALID_RECORD_STATE
            recs.append(rec)
        for i, rec in enumerate(recs):
            kind = types[0] if len(types) == 1 else types[i]
            if kind in (AckType.ACCEPT, AckType.GAP):
                rec.state, rec.member = RecordState.ACKNOWLEDGED, None
            elif kind == AckType.REJECT:
                rec.state, rec.member = RecordState.ARCHIVED, None
            else:
                self._release(rec)
        self._advance()
        return ErrorCode.NONE

    def release_member(self, member: str) -> bool:
        """The member's share session ended (or it left): its records are
        available again at once. True if it held any."""
        held = [r for r in self._flight.values()
                if r.state == RecordState.ACQUIRED and r.member == member]
        for rec in held:
            self._release(rec)
        self._advance()
        return bool(held)

    def log_start_moved(self, log_start_offset: int) -> bool:
        """Records below the log start are gone (retention, DeleteRecords):
        nothing below it can be delivered any more."""
        if log_start_offset <= self.start_offset:
            return False
        for off in range(self.start_offset, min(log_start_offset, self.next_offset)):
            self._flight.pop(off, None)
        self.start_offset = log_start_offset
        self.next_offset = max(self.next_offset, log_start_offset)
        self._advance()
        return True

    def reset(self, start_offset: int) -> None:
        """AlterShareGroupOffsets (the group has no members): start over."""
        self._flight.clear()
        self.start_offset = self.next_offset = start_offset

    # ------------------------------------------------------------ views

    def next_expiry(self) -> int | None:
        deadlines = [r.deadline_ms for r in self._flight.values()
                     if r.state == RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    def state_of(self, offset: int) -> tuple[RecordState, int] | None:
        """(state, delivery count) of an in-flight offset; None outside the window."""
        if not self.start_offset <= offset < self.next_offset:
            return None
        rec = self._flight.get(offset, _InFlight())
        return rec.state, rec.delivery_count

    def done_in_flight(self) -> int:
        """In-flight records already acknowledged or archived (not lag)."""
        return sum(1 for r in self._flight.values()
                   if r.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED))

    def in_flight(self) -> int:
        return self.next_offset - self.start_offset

    def state_batches(self) -> list[StateBatch]:
        """The in-flight window as persisted runs (untouched offsets omitted)."""
        out: list[StateBatch] = []
        for off in range(self.start_offset, self.next_offset):
            rec = self._flight.get(off)
            if rec is None or (rec.state in (RecordState.AVAILABLE, RecordState.ACQUIRED)
                               and rec.delivery_count == 0):
                continue
            state = int(RecordState.AVAILABLE if rec.state == RecordState.ACQUIRED
                        else rec.state)
            last = out[-1] if out else None
            if (last is not None and last.last_offset == off - 1 and last.state == state
                    and last.delivery_count == rec.delivery_count):
                out[-1] = StateBatch(last.first_offset, off, state, rec.delivery_count)
            else:
                out.append(StateBatch(off, off, state, rec.delivery_count))
        # the window's end must survive a restart even if its last offsets were untouched
        if self.next_offset > self.start_offset and (
                not out or out[-1].last_offset < self.next_offset - 1):
            off = self.next_offset - 1
            rec = self._flight.get(off, _InFlight())
            out.append(StateBatch(off, off, int(RecordState.AVAILABLE), rec.delivery_count))
        return out

    # ------------------------------------------------------------ internals

    def _lock(self, rec: _InFlight, member: str, deadline: int) -> None:
        rec.state, rec.member, rec.deadline_ms = RecordState.ACQUIRED, member, deadline
        rec.delivery_count += 1

    def _release(self, rec: _InFlight) -> None:
        rec.member = None
        rec.state = (RecordState.ARCHIVED
                     if rec.delivery_count >= self.limits.delivery_count_limit
                     else RecordState.AVAILABLE)

    def _advance(self) -> None:
        while self.start_offset < self.next_offset:
            rec = self._flight.get(self.start_offset)
            if rec is None or rec.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                break
            del self._flight[self.start_offset]
            self.start_offset += 1


def _runs(taken: list[tuple[int, int]]) -> list[Acquired]:
    """Consecutive offsets of one delivery count, as one AcquiredRecords entry."""
    out: list[Acquired] = []
    for off, count in taken:
        last = out[-1] if out else None
        if last is not None and last.last_offset == off - 1 and last.delivery_count == count:
            out[-1] = Acquired(last.first_offset, off, count)
        else:
            out.append(Acquired(off, off, count))
    return out
