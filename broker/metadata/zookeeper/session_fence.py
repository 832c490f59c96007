"""When a broker cut off from ZooKeeper stops acting as a leader: a state machine
fed the client's connection events, with time injected (no kazoo, no threads).

ZooKeeper expires a session ``zookeeper.session.timeout.ms`` after it last heard
from the client; the controller then elects other leaders for the partitions
this broker led. The broker itself learns of the expiry only when it reaches
ZooKeeper again, so a leader cut from ZooKeeper and its peers but not from its
clients would go on accepting writes (acks=1 ones acknowledged, to be truncated
away when it returns: a zombie leader). Instead, once disconnected for long
enough that ZooKeeper has expired the session, it presumes the session gone
(FENCE: the replica manager then stops leading the partitions whose followers
have stopped fetching; a ZooKeeper outage with the brokers fine fences nothing
that way); when a connection (the same session, or a new one) is back, it leads
again where the partition state still names it leader at the same epoch
(RESUME; the caller checks that against ZooKeeper).

kazoo reports a lost connection after up to two thirds of the session timeout
without an answer, so the fence comes a third of the timeout after that report:
about when ZooKeeper expires the session, before the controller's new leaders
are known to clients. Fencing early costs a short NOT_LEADER_OR_FOLLOWER spell
(clients retry); fencing late lets a zombie acknowledge acks=1 writes.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass


class Decision(enum.Enum):
    NONE = "none"
    FENCE = "fence"      # stop acting as leader of every partition
    RESUME = "resume"    # lead again where the metadata still says so


# Of the session timeout, how long after kazoo reported the connection lost the
# session is presumed expired (kazoo reports it after 2/3 without an answer).
PRESUMED_EXPIRED_AFTER = 1 / 3


@dataclass
class SessionFence:
    session_timeout_ms: int
    disconnected_since_ms: float | None = None  # None: connected
    fenced: bool = False

    def deadline_ms(self) -> float | None:
        """When ``tick`` should be called next (None: nothing pending)."""
        if self.disconnected_since_ms is None or self.fenced:
            return None
        return self.disconnected_since_ms + self.session_timeout_ms * PRESUMED_EXPIRED_AFTER

    def disconnected(self, now_ms: float) -> Decision:
        """The client lost its connection (kazoo SUSPENDED); the session may live on."""
        if self.disconnected_since_ms is None:
            self.disconnected_since_ms = now_ms
        return self.tick(now_ms)

    def tick(self, now_ms: float) -> Decision:
        deadline = self.deadline_ms()
        if deadline is not None and now_ms >= deadline:
            self.fenced = True
            return Decision.FENCE
        return Decision.NONE

    def expired(self, now_ms: float) -> Decision:
        """ZooKeeper said the session expired (kazoo LOST)."""
        if self.disconnected_since_ms is None:
            self.disconnected_since_ms = now_ms
        if self.fenced:
            return Decision.NONE
        self.fenced = True
        return Decision.FENCE

    def connected(self, now_ms: float) -> Decision:
        """Connected again (the same session, or a new one after an expiry)."""
        self.disconnected_since_ms = None
        if self.fenced:
            self.fenced = False
            return Decision.RESUME
        return Decision.NONE
