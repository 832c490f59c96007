"""The leader's rules about its followers, as plain functions and values
(Kafka's ``Replica`` fetch state and ``Partition`` ISR rules), testable
without a broker.

A follower's fetch offset is its log end offset: it only asks for what it
does not have. From it the leader decides:
- whether the follower is caught up: it was, at its last fetch, at or past
  the leader's log end as of that fetch, or the one before (so a follower
  fetching as fast as records arrive is in sync although it is never exactly
  at the end); a follower's fetch that leaves out a partition it has all of
  counts as a fetch at the end (leader.py's fetched_settled);
- the high watermark: the smallest log end in the ISR, the leader's own
  included, never moving backwards; an ISR member whose log end the leader
  does not know yet (it just became leader) holds it back;
- who leaves the ISR: a follower not caught up within ``replica.lag.time.max.ms``;
- who joins it: a follower whose log end reached the high watermark and the
  start of the current leader epoch (so it holds everything this leader
  acknowledged, and nothing of an older leader's that this one dropped).
"""
from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping

UNKNOWN_OFFSET = -1


@dataclasses.dataclass
class FollowerProgress:
    """What the leader knows of one follower (times in ms, from one clock)."""
    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: float = 0.0
    last_fetch_ms: float = 0.0
    last_fetch_leader_end: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET  # as its last fetch said (Fetch v5+)

    def fetched(self, fetch_offset: int, leader_end: int, now_ms: float) -> None:
        """A fetch at ``fetch_offset`` while the leader's log ended at ``leader_end``."""
        if fetch_offset >= leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_end:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_end = leader_end
        self.last_fetch_ms = now_ms


def high_watermark(leader_end: int, isr: Iterable[int], leader_id: int,
                   followers: Mapping[int, FollowerProgress]) -> int:
    """The smallest log end in the ISR (UNKNOWN_OFFSET when a member's is unknown)."""
    hw = leader_end
    for replica in isr:
        if replica == leader_id:
            continue
        progress = followers.get(replica)
        end = progress.log_end_offset if progress is not None else UNKNOWN_OFFSET
        if end < hw:
            hw = end
    return hw


def out_of_sync(isr: Iterable[int], leader_id: int, leader_end: int,
                followers: Mapping[int, FollowerProgress], now_ms: float,
                max_lag_ms: float) -> list[int]:
    """ISR members to drop: not caught up for longer than ``max_lag_ms``."""
    lagging = []
    for replica in isr:
        if replica == leader_id:
            continue
        progress = followers.get(replica)
        if progress is None:
            lagging.append(replica)
        elif (progress.log_end_offset != leader_end
              and now_ms - progress.last_caught_up_ms > max_lag_ms):
            lagging.append(replica)
    return lagging


def may_join_isr(progress: FollowerProgress, high_watermark_: int,
                 leader_epoch_start: int) -> bool:
    """Whether a follower outside the ISR has caught up enough to join it."""
    end = progress.log_end_offset
    return end != UNKNOWN_OFFSET and end >= high_watermark_ and end >= leader_epoch_start
