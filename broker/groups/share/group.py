"""A share group's membership (KIP-932, ShareGroupHeartbeat): a plain state
machine fed heartbeats with the time as a parameter.

Members name themselves (the client generates the member id) and join with
epoch 0, heartbeat with the epoch they were given, and leave with -1. There
is no rebalance barrier as in the classic protocol: each heartbeat answers
the member's current target assignment, and the group epoch moves whenever
membership or the subscribed partitions change. A member not heard from
within the session timeout is dropped (checked on every event against
``now_ms``); the records it held stay locked until their acquisition locks
run out, then go to whoever fetches next.

Assignment follows Kafka 4.x's SimpleAssignor: with no more members than
partitions each partition goes to one member (spread round-robin over the
sorted members); with more members than partitions every partition is shared
by several, member i taking partition i mod P -- so two or three members on
one partition all fetch from it and the share-partition hands each of them
different records.
"""
from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from samsa.protocol.errors import ErrorCode

# topic name -> (topic id, partition count), as the metadata knows them now
TopicsView = Mapping[str, tuple[uuid.UUID, int]]
# topic id -> sorted partitions
Assignment = dict[uuid.UUID, list[int]]


@dataclass
class ShareMember:
    member_id: str
    client_id: str = ""
    client_host: str = ""
    rack_id: str | None = None
    subscribed: list[str] = field(default_factory=list)
    epoch: int = 0
    previous_epoch: int = 0
    last_seen_ms: int = 0
    assignment: Assignment = field(default_factory=dict)


@dataclass(frozen=True)
class HeartbeatAnswer:
    error: ErrorCode
    member_id: str | None = None
    epoch: int = -1
    # None: unchanged since the member's last heartbeat
    assignment: Assignment | None = None
    message: str | None = None


class ShareGroup:
    def __init__(self, group_id: str, session_timeout_ms: int, max_size: int = 200) -> None:
        self.group_id = group_id
        self.session_timeout_ms = session_timeout_ms
        self.max_size = max_size
        self.members: dict[str, ShareMember] = {}
        self.group_epoch = 0
        self.assignment_epoch = 0
        self._target: dict[str, Assignment] = {}
        # a member's session ran out since the group's records were last
        # looked at (expire_members): they are to say so
        self.members_expired = False
        self._subscribed_view: dict[str, tuple[uuid.UUID, int]] = {}
        # restored from the group's records: the topics' metadata the target
        # was computed from is not among them, so the next view is taken as
        # it (the epoch moves only if the assignment does)
        self._view_unknown = False

    def restore(self, members: list[ShareMember], targets: Mapping[str, Assignment],
                group_epoch: int, assignment_epoch: int, now_ms: int) -> None:
        """The group as its records left it (a load of __consumer_offsets):
        each member with a fresh session, as Kafka's coordinator starts
        their timers on a load."""
        self.group_epoch, self.assignment_epoch = group_epoch, assignment_epoch
        for member in members:
            member.last_seen_ms = now_ms
            self.members[member.member_id] = member
        self._target = {m: dict(targets.get(m, {})) for m in self.members}
        self._view_unknown = bool(self.members)

    def target(self, member_id: str) -> Assignment:
        return self._target.get(member_id, {})

    @property
    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def heartbeat(self, member_id: str, member_epoch: int, rack_id: str | None,
                  subscribed: list[str] | None, client_id: str, client_host: str,
                  topics: TopicsView, now_ms: int) -> HeartbeatAnswer:
        self.expire(now_ms)
        if not member_id:
            return HeartbeatAnswer(ErrorCode.INVALID_REQUEST, message="MemberId can't be empty.")
        member = self.members.get(member_id)
        if member_epoch == -1:
            if member is not None:
                del self.members[member_id]
                self._recompute(topics)
            return HeartbeatAnswer(ErrorCode.NONE, member_id, -1)
        if member_epoch == 0:
            if member is None:
                if not subscribed:
                    return HeartbeatAnswer(ErrorCode.INVALID_REQUEST, message=(
                        "SubscribedTopicNames must be set in first request."))
                if len(self.members) >= self.max_size:
                    return HeartbeatAnswer(ErrorCode.GROUP_MAX_SIZE_REACHED)
                member = self.members[member_id] = ShareMember(member_id)
            member.assignment = {}  # (re)joining: it gets its assignment in full
        elif member is None:
            return HeartbeatAnswer(ErrorCode.UNKNOWN_MEMBER_ID)
        elif member_epoch != member.epoch:
            return HeartbeatAnswer(ErrorCode.FENCED_MEMBER_EPOCH)
        member.last_seen_ms = now_ms
        member.client_id, member.client_host = client_id, client_host
        if rack_id is not None:
            member.rack_id = rack_id
        if subscribed is not None:
            member.subscribed = sorted(set(subscribed))
        if (member_epoch == 0 or subscribed is not None
                or self._view(topics) != self._subscribed_view):
            self._recompute(topics)
        target = self._target.get(member_id, {})
        if member_epoch == 0 or target != member.assignment:
            member.assignment = target
            if member.epoch != self.group_epoch:
                member.previous_epoch, member.epoch = member.epoch, self.group_epoch
            return HeartbeatAnswer(ErrorCode.NONE, member_id, member.epoch, target)
        return HeartbeatAnswer(ErrorCode.NONE, member_id, member.epoch, None)

    def expire(self, now_ms: int) -> list[str]:
        """Drop the members whose session ran out; their ids."""
        gone = [m.member_id for m in self.members.values()
                if now_ms - m.last_seen_ms >= self.session_timeout_ms]
        for member_id in gone:
            del self.members[member_id]
        if gone:
            self.members_expired = True
            self._recompute(self._subscribed_view)
        return gone

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}

    def _view(self, topics: TopicsView) -> dict[str, tuple[uuid.UUID, int]]:
        return {t: topics[t] for t in sorted(self.subscribed_topics()) if t in topics}

    def _recompute(self, topics: TopicsView) -> None:
        view = self._view(topics)
        target = _assign(self.members, view)
        if target != self._target or (view != self._subscribed_view
                                      and not self._view_unknown):
            self.group_epoch += 1
            self.assignment_epoch = self.group_epoch
        self._target, self._subscribed_view = target, view
        self._view_unknown = False


def _assign(members: Mapping[str, ShareMember],
            view: Mapping[str, tuple[uuid.UUID, int]]) -> dict[str, Assignment]:
    out: dict[str, Assignment] = {m: {} for m in members}
    for name, (topic_id, count) in sorted(view.items()):
        takers = sorted(m for m, member in members.items() if name in member.subscribed)
        if not takers or count <= 0:
            continue
        if len(takers) <= count:
            for p in range(count):
                out[takers[p % len(takers)]].setdefault(topic_id, []).append(p)
        else:
            for i, m in enumerate(takers):
                out[m].setdefault(topic_id, []).append(i % count)
    return out
