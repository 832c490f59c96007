"""Partition reassignment as pure functions (Kafka's KIP-455, ZooKeeper mode).

A reassignment moves a partition from its original replicas (ORS) to a
target set (TRS). While it runs, the partition's replica list is both,
target first (``full``): the replicas being added (AR = TRS - ORS) copy the
leader like any follower, and the ones being removed (RR = ORS - TRS) keep
serving. The topic znode records AR and RR (``adding_replicas``,
``removing_replicas``), so a reassignment in progress is read back from
ZooKeeper alone: a controller that takes office resumes it.

It completes once every target replica is in the ISR: the replica list
becomes the target, the removed replicas leave the ISR (and leadership, if
they had it, goes to a target replica in the ISR), and each removed broker
deletes its copy. Cancelling is completing toward the original replicas
without waiting.

Every step is written together with a leader epoch bump: that is how the
leader learns its new replica set, as Kafka's LeaderAndIsr request tells it.
"""
from __future__ import annotations

import dataclasses
from typing import AbstractSet, Sequence

from samsa.protocol.errors import ErrorCode

from .elections import NO_LEADER, LeaderAndIsr


@dataclasses.dataclass(frozen=True)
class Reassignment:
    original: tuple[int, ...]
    target: tuple[int, ...]

    @property
    def full(self) -> tuple[int, ...]:
        """The replica list while it runs: target first (so its first replica is
        the preferred leader afterwards), then the replicas on their way out."""
        return self.target + tuple(r for r in self.original if r not in self.target)

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(r for r in self.target if r not in self.original)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(r for r in self.original if r not in self.target)


def from_znode(replicas: Sequence[int], adding: Sequence[int],
               removing: Sequence[int]) -> Reassignment | None:
    """The reassignment a topic znode records for a partition (None: none)."""
    if not adding and not removing:
        return None
    return Reassignment(original=tuple(r for r in replicas if r not in adding),
                        target=tuple(r for r in replicas if r not in removing))


def check_target(target: Sequence[int], live: AbstractSet[int],
                 current: Sequence[int] = ()) -> str | None:
    """Why ``target`` cannot be a partition's replica list (None: it can):
    Kafka answers INVALID_REPLICA_ASSIGNMENT with this reason. Only replicas
    being added must be alive (as Kafka checks): a replica may stay on, or
    be moved off, a broker that is down."""
    if not target:
        return "the replica list is empty"
    if len(set(target)) != len(target):
        return f"the replica list {list(target)} has duplicates"
    if any(r < 0 for r in target):
        return f"the replica list {list(target)} has negative broker ids"
    dead = sorted(r for r in target if r not in live and r not in current)
    if dead:
        return f"the replica list has brokers that are not alive: {dead}"
    return None


def refusal(target: Sequence[int], live: AbstractSet[int], original: Sequence[int],
            allow_replication_factor_change: bool = True) -> tuple[ErrorCode, str] | None:
    """Kafka's answer refusing a move of a partition whose replicas were
    ``original`` to ``target`` (None: it may start)."""
    reason = check_target(target, live, original)
    if reason is not None:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, reason
    if not allow_replication_factor_change and len(target) != len(original):
        return (ErrorCode.INVALID_REPLICATION_FACTOR,
                f"the replication factor would change from {len(original)} "
                f"to {len(target)}, which the request does not allow")
    return None


def unknown_partition(tp: tuple[str, int]) -> tuple[ErrorCode, str]:
    return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"partition {tp[0]}-{tp[1]} does not exist"


def nothing_to_cancel(tp: tuple[str, int]) -> tuple[ErrorCode, str]:
    return (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
            f"no reassignment of {tp[0]}-{tp[1]} is in progress")


def begin(current: Sequence[int], running: Reassignment | None,
          target: Sequence[int]) -> Reassignment | None:
    """The reassignment to write for a new ``target``: a running one is
    replaced, keeping its original replicas (its added ones not in the new
    target are dropped). None when the target is the original replica list:
    nothing to move (a running reassignment is then cancelled, as Kafka
    treats it)."""
    original = running.original if running is not None else tuple(current)
    if tuple(target) == original:
        return None
    return Reassignment(original, tuple(target))


def can_cancel(r: Reassignment, state: LeaderAndIsr, live: AbstractSet[int]) -> bool:
    """Cancelling hands the partition back to its original replicas: only when
    one of them is in sync and alive to lead it (else the only in-sync copies
    would be the ones cancelling drops)."""
    return any(x in state.isr and x in live for x in r.original)


def is_complete(r: Reassignment, state: LeaderAndIsr) -> bool:
    """Kafka's test: every target replica is in the ISR."""
    return set(r.target) <= set(state.isr)


def finish(replicas: Sequence[int], state: LeaderAndIsr,
           live: AbstractSet[int]) -> LeaderAndIsr:
    """The state once the partition's replica list is ``replicas`` (finished,
    cancelled, or the list while a reassignment runs): the ISR keeps only
    them, and leadership stays where it is if it may, else goes to the first
    of them that is alive and in sync (none: offline)."""
    isr = tuple(r for r in state.isr if r in replicas)
    if state.leader in replicas and state.leader in live:
        leader = state.leader
    else:
        eligible = [r for r in replicas if r in isr and r in live]
        leader = eligible[0] if eligible else NO_LEADER
    # The ISR is never empty (elections.py): a partition with none of its new
    # replicas in sync keeps the old ISR's record until one of them returns.
    return state.with_change(leader, isr or state.isr)
