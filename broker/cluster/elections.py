"""The controller's decisions about one partition's leader and ISR, as pure
functions (ZooKeeper-mode Kafka's partition and replica state machines).

Every function takes the partition's replica list (assignment order: the
first replica is the preferred leader), its current leader/ISR state and the
set of live brokers, and returns the new state to write, or None when
nothing changes. Every change bumps the leader epoch, which is how replicas
and clients tell a newer decision from an older one. Writing the result
(conditionally on the znode version, fenced by the controller epoch) is the
caller's business.

Kafka's rules, kept here:
- a leader is only ever chosen from the ISR, in assignment order; outside the
  ISR only when unclean election is allowed, and then the ISR restarts with
  the new leader alone;
- a replica that dies leaves the ISR, except the last one: the ISR is never
  empty, it keeps the last member so that broker's return brings the
  partition back without data loss, and the partition has no leader (-1)
  meanwhile.
"""
from __future__ import annotations

import dataclasses
from typing import AbstractSet, Mapping, Sequence

from samsa.protocol.errors import ErrorCode

NO_LEADER = -1


@dataclasses.dataclass(frozen=True)
class LeaderAndIsr:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]

    def with_change(self, leader: int, isr: Sequence[int]) -> "LeaderAndIsr":
        return LeaderAndIsr(leader, self.leader_epoch + 1, tuple(isr))


def initial_state(replicas: Sequence[int], live: AbstractSet[int]) -> LeaderAndIsr | None:
    """A new partition: the first live replica leads, the live replicas are the
    ISR. None when no replica is alive (the partition waits, as in Kafka)."""
    alive = [r for r in replicas if r in live]
    if not alive:
        return None
    return LeaderAndIsr(alive[0], 0, tuple(alive))


def elect_offline(replicas: Sequence[int], state: LeaderAndIsr, live: AbstractSet[int],
                  unclean: bool = False) -> LeaderAndIsr | None:
    """A partition whose leader is gone (or that has none): the first live ISR
    member in assignment order leads; unclean, the first live replica."""
    if state.leader in live:
        return None
    isr_alive = [r for r in replicas if r in state.isr and r in live]
    if isr_alive:
        return state.with_change(isr_alive[0], [r for r in state.isr if r in live])
    if unclean:
        alive = [r for r in replicas if r in live]
        if alive:
            return state.with_change(alive[0], [alive[0]])
    if state.leader == NO_LEADER:
        return None  # still offline, nothing to write
    return state.with_change(NO_LEADER, state.isr)


def remove_from_isr(state: LeaderAndIsr, replica: int) -> LeaderAndIsr | None:
    """A replica went offline: out of the ISR (unless it is the last member),
    and no longer leader."""
    if replica not in state.isr and replica != state.leader:
        return None
    isr = state.isr if len(state.isr) == 1 else tuple(r for r in state.isr if r != replica)
    leader = NO_LEADER if state.leader == replica else state.leader
    if isr == state.isr and leader == state.leader:
        return None
    return state.with_change(leader, isr)


def elect_preferred(replicas: Sequence[int], state: LeaderAndIsr,
                    live: AbstractSet[int]) -> LeaderAndIsr | None:
    """Move leadership back to the first replica, if it is alive and in the ISR."""
    preferred = replicas[0]
    if state.leader == preferred or preferred not in live or preferred not in state.isr:
        return None
    return state.with_change(preferred, state.isr)


def elect_for_shutdown(replicas: Sequence[int], state: LeaderAndIsr, live: AbstractSet[int],
                       shutting_down: AbstractSet[int]) -> LeaderAndIsr | None:
    """Controlled shutdown: leadership moves to another live ISR member and
    the stopping brokers leave the ISR; a partition with nowhere to go keeps
    its leader (the broker stops anyway, and the partition goes offline then)."""
    staying = [r for r in state.isr if r in live and r not in shutting_down]
    if state.leader in shutting_down:
        candidates = [r for r in replicas if r in staying]
        if not candidates:
            return None
        return state.with_change(candidates[0], staying)
    if any(r in shutting_down for r in state.isr) and staying:
        return state.with_change(state.leader, staying)
    return None


def election_answer(replicas: Sequence[int], state: LeaderAndIsr, live: AbstractSet[int],
                    electable: AbstractSet[int], unclean: bool) -> ErrorCode | None:
    """ElectLeaders' answer for a partition when it is known without electing
    (Kafka's): unclean, a partition whose leader is alive needs no election;
    preferred, one led by its first replica needs none, and one whose first
    replica cannot lead (down, shutting down, out of the ISR) cannot have it.
    None: elect, and the election's outcome is the answer."""
    if unclean:
        return ErrorCode.ELECTION_NOT_NEEDED if state.leader in live else None
    if state.leader == replicas[0]:
        return ErrorCode.ELECTION_NOT_NEEDED
    if replicas[0] not in electable or replicas[0] not in state.isr:
        return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    return None


def elections_reported(results: Mapping, every_partition: bool) -> dict:
    """An election of every partition (no partitions named) answers only the
    partitions it acted on, as Kafka's does; named ones are all answered."""
    if not every_partition:
        return dict(results)
    return {tp: e for tp, e in results.items() if e != ErrorCode.ELECTION_NOT_NEEDED}
