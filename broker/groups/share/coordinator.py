"""The share coordinator (KIP-932) as a plain state machine: the durable
state of the share-partitions keyed in the ``__share_group_state``
partitions this broker leads, as the share-partition leaders read and write
it (Initialize/Read/Write/DeleteShareGroupState, ReadShareGroupStateSummary).

A state partition is served only once it is loaded (``loading`` then
``loaded`` with what its log replayed); before that a request answers
COORDINATOR_LOAD_IN_PROGRESS, and for a partition not led here
NOT_COORDINATOR, as Kafka's share coordinator does. The machine plans: a
change returns the share-partition's new state, which the runtime
(share_coordinator.py) writes as a ShareSnapshot record and then ``apply``s,
so memory and log agree in the order the records were appended.

Fencing, as Kafka's: a write from an older state epoch (the share-partition
was re-initialized since, e.g. its offsets reset) answers
FENCED_STATE_EPOCH, a write or read from an older leader epoch (a deposed
share-partition leader) FENCED_LEADER_EPOCH; a read from a newer leader
epoch records that epoch, so the old leader is fenced from then on.

A write's state batches are merged into the stored ones (newer runs win
where they overlap, everything below the start offset is dropped), so a
leader may send the whole in-flight window or only what changed.
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from samsa.protocol.errors import ErrorCode

from .partition import StateBatch
from .service import ShareKey

# Kafka's PartitionFactory: a share-partition with no state yet
UNINITIALIZED_START_OFFSET = -1


@dataclass(frozen=True)
class ShareState:
    """One share-partition's durable state (a ShareSnapshot record's value)."""
    state_epoch: int = 0
    leader_epoch: int = -1
    start_offset: int = UNINITIALIZED_START_OFFSET
    batches: tuple[StateBatch, ...] = ()
    snapshot_epoch: int = 0


UNINITIALIZED = ShareState()


class _Load(enum.Enum):
    LOADING = "loading"
    LOADED = "loaded"


@dataclass(frozen=True)
class Planned:
    """A request's answer: the error, the state to answer with, and (when
    the request changes it) the new state to write before answering; None
    as ``write`` with ``delete`` set: a tombstone."""
    error: ErrorCode
    state: ShareState | None = None
    write: ShareState | None = None
    delete: bool = False


class ShareCoordinatorState:
    def __init__(self, state_partition: Callable[[ShareKey], int]) -> None:
        self._partition_of = state_partition
        self._loads: dict[int, _Load] = {}
        self.states: dict[ShareKey, ShareState] = {}

    # ------------------------------------------------------------ leadership

    def loading(self, partition: int) -> None:
        self._loads[partition] = _Load.LOADING

    def loaded(self, partition: int, replayed: Mapping[ShareKey, ShareState]) -> None:
        """The partition's log replayed: serve its keys (unless leadership
        went meanwhile)."""
        if self._loads.get(partition) is not _Load.LOADING:
            return
        for key, state in replayed.items():
            if self._partition_of(key) == partition:
                self.states[key] = state
        self._loads[partition] = _Load.LOADED

    def unload(self, partition: int) -> None:
        self._loads.pop(partition, None)
        for key in [k for k in self.states if self._partition_of(k) == partition]:
            del self.states[key]

    def serves(self, partition: int) -> bool:
        return self._loads.get(partition) is _Load.LOADED

    def partition_error(self, key: ShareKey) -> ErrorCode:
        load = self._loads.get(self._partition_of(key))
        if load is None:
            return ErrorCode.NOT_COORDINATOR
        if load is _Load.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    # ------------------------------------------------------------ requests

    def read(self, key: ShareKey, leader_epoch: int) -> Planned:
        code = self.partition_error(key)
        if code:
            return Planned(code)
        state = self.states.get(key)
        if state is None:
            return Planned(ErrorCode.NONE, UNINITIALIZED)
        if leader_epoch >= 0 and leader_epoch < state.leader_epoch:
            return Planned(ErrorCode.FENCED_LEADER_EPOCH)
        if leader_epoch > state.leader_epoch:
            bumped = replace(state, leader_epoch=leader_epoch)
            return Planned(ErrorCode.NONE, bumped, write=bumped)
        return Planned(ErrorCode.NONE, state)

    def summary(self, key: ShareKey) -> Planned:
        code = self.partition_error(key)
        if code:
            return Planned(code)
        return Planned(ErrorCode.NONE, self.states.get(key, UNINITIALIZED))

    def write(self, key: ShareKey, state_epoch: int, leader_epoch: int, start_offset: int,
              batches: Sequence[StateBatch]) -> Planned:
        code = self.partition_error(key)
        if code:
            return Planned(code)
        if any(b.last_offset < b.first_offset or b.state not in (0, 2, 4)
               or b.delivery_count < 0 for b in batches):
            return Planned(ErrorCode.INVALID_REQUEST)
        old = self.states.get(key)
        if old is not None:
            if state_epoch < old.state_epoch:
                return Planned(ErrorCode.FENCED_STATE_EPOCH)
            if leader_epoch < old.leader_epoch:
                return Planned(ErrorCode.FENCED_LEADER_EPOCH)
        base = old or ShareState(state_epoch=state_epoch)
        start = start_offset if start_offset >= 0 else base.start_offset
        new = ShareState(max(state_epoch, base.state_epoch), max(leader_epoch, base.leader_epoch),
                         start, merge_batches(base.batches, batches, start))
        return Planned(ErrorCode.NONE, new, write=new)

    def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> Planned:
        """Start the share-partition over at ``start_offset`` (its first
        assignment, or its offsets altered) under a newer state epoch."""
        code = self.partition_error(key)
        if code:
            return Planned(code)
        if start_offset < 0:
            return Planned(ErrorCode.INVALID_REQUEST)
        old = self.states.get(key)
        if old is not None and state_epoch <= old.state_epoch:
            return Planned(ErrorCode.FENCED_STATE_EPOCH)
        new = ShareState(state_epoch, old.leader_epoch if old else -1, start_offset, ())
        return Planned(ErrorCode.NONE, new, write=new)

    def delete(self, key: ShareKey) -> Planned:
        code = self.partition_error(key)
        if code:
            return Planned(code)
        if key not in self.states:
            return Planned(ErrorCode.NONE)
        return Planned(ErrorCode.NONE, delete=True)

    def apply(self, key: ShareKey, state: ShareState | None) -> ShareState | None:
        """A planned change was appended: take it up (None: deleted). The
        snapshot epoch counts the key's snapshots; the stored state."""
        if not self.serves(self._partition_of(key)):
            return None
        if state is None:
            self.states.pop(key, None)
            return None
        old = self.states.get(key)
        stored = replace(state, snapshot_epoch=(old.snapshot_epoch + 1) if old else 0)
        self.states[key] = stored
        return stored


def merge_batches(old: Iterable[StateBatch], new: Iterable[StateBatch],
                  start_offset: int) -> tuple[StateBatch, ...]:
    """``new`` laid over ``old`` (new wins where they overlap), runs below
    ``start_offset`` cut off, neighbours of one state and count joined."""
    runs: list[StateBatch] = []
    new = sorted(new, key=lambda b: b.first_offset)
    for b in old:
        pieces = [b]
        for n in new:
            next_pieces = []
            for p in pieces:
                if n.last_offset < p.first_offset or n.first_offset > p.last_offset:
                    next_pieces.append(p)
                    continue
                if p.first_offset < n.first_offset:
                    next_pieces.append(replace(p, last_offset=n.first_offset - 1))
                if p.last_offset > n.last_offset:
                    next_pieces.append(replace(p, first_offset=n.last_offset + 1))
            pieces = next_pieces
        runs.extend(pieces)
    runs.extend(new)
    out: list[StateBatch] = []
    for b in sorted(runs, key=lambda b: b.first_offset):
        if b.last_offset < start_offset:
            continue
        if b.first_offset < start_offset:
            b = replace(b, first_offset=start_offset)
        last = out[-1] if out else None
        if (last is not None and last.last_offset + 1 == b.first_offset
                and last.state == b.state and last.delivery_count == b.delivery_count):
            out[-1] = replace(last, last_offset=b.last_offset)
        else:
            out.append(b)
    return tuple(out)
