"""In-memory state of one classic group and its members (no I/O, no timers).

The state machine is Kafka's:
    Empty -> PreparingRebalance -> CompletingRebalance -> Stable
    PreparingRebalance -> Empty (everyone left) ; CompletingRebalance/Stable ->
    PreparingRebalance (membership or metadata changed) ; Empty -> Dead (deleted).
A member waiting on its JoinGroup or SyncGroup response is a flag here; the
response itself is the runtime's (coordinator.py) to deliver, and the timers
are the runtime's too, set and cancelled as the machine (machine.py) says.
"""
from __future__ import annotations

import enum
from collections import Counter

from samsa.protocol.errors import ProtocolError

from ..consumer_protocol import CONSUMER_PROTOCOL_TYPE, subscription_topics
from ..log_format import OffsetAndMetadata


class GroupState(str, enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


_VALID_PREVIOUS = {
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
    GroupState.PREPARING_REBALANCE: {GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                                     GroupState.EMPTY},
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.DEAD: {GroupState.STABLE, GroupState.PREPARING_REBALANCE,
                      GroupState.COMPLETING_REBALANCE, GroupState.EMPTY, GroupState.DEAD},
}


class Member:
    """One member of a classic group."""

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str,
                 client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                 protocol_type: str, protocols: list[tuple[str, bytes]]):
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = [(n, bytes(m)) for n, m in protocols]
        self.assignment = b""
        # a member that joined but has not completed a rebalance yet: its
        # expiry is the new-member join timeout, not the session timeout
        self.is_new = False
        # a JoinGroup / SyncGroup of this member waits for the group's answer
        self.awaiting_join = False
        self.awaiting_sync = False

    def protocol_names(self) -> list[str]:
        return [n for n, _ in self.protocols]

    def metadata(self, protocol: str | None) -> bytes:
        for n, m in self.protocols:
            if n == protocol:
                return m
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols, same order, same metadata bytes (a no-op rejoin)."""
        return [(n, bytes(m)) for n, m in protocols] == self.protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol that every member supports."""
        for n, _ in self.protocols:
            if n in candidates:
                return n
        raise ValueError("member supports none of the candidate protocols")


class Group:
    """One classic group: members, generation, selected protocol, offsets."""

    group_type = "classic"

    def __init__(self, group_id: str, state: GroupState = GroupState.EMPTY):
        self.group_id = group_id
        self.state = state
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}  # insertion order = join order
        self.static_members: dict[str, str] = {}  # group_instance_id -> member_id
        # member ids handed out (MEMBER_ID_REQUIRED) whose JoinGroup is still to come
        self.pending_members: set[str] = set()
        self.pending_sync: set[str] = set()
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None
        self.current_state_timestamp: int = -1
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        # TxnOffsetCommit: producer id -> offsets written in its open
        # transaction, visible (moved to ``offsets``) only once its COMMIT
        # marker lands in the offsets partition; dropped on ABORT.
        self.pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = {}
        self.join_is_initial = False  # the initial delayed join completes only on expiry
        # protocol name -> how many members support it (candidate protocols)
        self._protocol_votes: Counter[str] = Counter()

    # ------------------------------------------------------------ queries

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> Member:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def static_member_id(self, group_instance_id: str | None) -> str | None:
        if group_instance_id is None:
            return None
        return self.static_members.get(group_instance_id)

    def is_static_member_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        """A known instance id whose current member id is a different one."""
        current = self.static_member_id(group_instance_id)
        return current is not None and current != member_id

    def all_joined(self) -> bool:
        return (all(m.awaiting_join for m in self.members.values())
                and not self.pending_members)

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def can_rebalance(self) -> bool:
        return self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                              GroupState.EMPTY)

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        return {p for p, c in self._protocol_votes.items() if c == n}

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.is_(GroupState.EMPTY):
            return bool(protocol_type) and bool(names)
        n = len(self.members)
        return (self.protocol_type == protocol_type
                and any(self._protocol_votes.get(p, 0) == n for p in names))

    def select_protocol(self) -> str:
        """Each member votes for its most preferred common protocol; most votes wins.

        Ties go to the protocol whose first vote came first (join order), so
        the choice is deterministic.
        """
        candidates = self.candidate_protocols()
        if not candidates:
            raise ValueError("no protocol supported by all members")
        votes: Counter[str] = Counter()
        first_seen: dict[str, int] = {}
        for i, m in enumerate(self.members.values()):
            v = m.vote(candidates)
            votes[v] += 1
            first_seen.setdefault(v, i)
        return max(votes, key=lambda p: (votes[p], -first_seen[p]))

    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def is_subscribed_to(self, topic: str) -> bool:
        # unknown subscriptions (unparseable metadata) count as "subscribed to all"
        return self.subscribed_topics is None or topic in self.subscribed_topics

    # ------------------------------------------------------------ changes

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise AssertionError(f"group {self.group_id}: illegal transition "
                                 f"{self.state} -> {state}")
        self.state = state
        self.current_state_timestamp = now_ms

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._protocol_votes.update(member.protocol_names())
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._protocol_votes.subtract(member.protocol_names())
        self._protocol_votes += Counter()  # drop zero counts
        if member.group_instance_id is not None and \
                self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_sync.discard(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def update_member(self, member: Member, protocols: list[tuple[str, bytes]],
                      rebalance_timeout_ms: int, session_timeout_ms: int) -> None:
        self._protocol_votes.subtract(member.protocol_names())
        member.protocols = [(n, bytes(m)) for n, m in protocols]
        self._protocol_votes.update(member.protocol_names())
        self._protocol_votes += Counter()
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms

    def replace_static_member(self, group_instance_id: str, old_id: str, new_id: str) -> Member:
        """Give a static member a new member id (the caller fences the old id's waiters)."""
        member = self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        self.static_members[group_instance_id] = new_id
        return member

    def compute_subscribed_topics(self) -> set[str] | None:
        """Union of the members' subscribed topics; None if unknowable."""
        if not self.members or not self.is_consumer_group() or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            try:
                topics.update(subscription_topics(m.metadata(self.protocol_name)))
            except ProtocolError:
                return None
        return topics

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync = set(self.members)
