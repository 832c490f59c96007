"""In-memory state of one KIP-848 consumer group (no I/O, no timers).

Kafka's model: the group epoch moves on whenever membership, a subscription
or the subscribed topics' partitions change; the target assignment is
computed for the group epoch (then the assignment epoch equals it); each
member walks towards its target at its own pace (its member epoch), giving
up partitions first and taking a partition only once its previous owner has
reported it revoked. Partitions are (topic id, partition) pairs, as on the wire.
"""
from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping

from ..log_format import OffsetAndMetadata

# topic id -> partitions
Assignment = dict[uuid.UUID, set[int]]
# a topic's (name, id, partition count), as the metadata says now
TopicImage = Mapping[str, tuple[uuid.UUID, int]]
TopicPartitionId = tuple[uuid.UUID, int]


class ConsumerGroupState(str, enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


class MemberState(enum.IntEnum):
    """As Kafka's MemberState (its byte is written in the member's record)."""
    UNREVOKED_PARTITIONS = 0  # waits for the member to give partitions up
    UNRELEASED_PARTITIONS = 1  # waits for other members to give its partitions up
    STABLE = 2
    UNKNOWN = 127


def partitions_of(assignment: Mapping[uuid.UUID, Iterable[int]]) -> Iterator[TopicPartitionId]:
    for topic_id, parts in assignment.items():
        for p in parts:
            yield topic_id, p


def as_assignment(pairs: Iterable[TopicPartitionId]) -> Assignment:
    out: Assignment = {}
    for topic_id, p in pairs:
        out.setdefault(topic_id, set()).add(p)
    return out


def copy_assignment(assignment: Mapping[uuid.UUID, Iterable[int]]) -> Assignment:
    return {t: set(ps) for t, ps in assignment.items() if ps}


class ClassicMetadata:
    """What a member speaking the classic protocol (JoinGroup/SyncGroup/
    Heartbeat) inside a consumer group brings: its session timeout and the
    protocols of its JoinGroup (Kafka's ClassicMemberMetadata)."""

    def __init__(self, session_timeout_ms: int, protocols: list[tuple[str, bytes]]):
        self.session_timeout_ms = session_timeout_ms
        self.protocols = [(n, bytes(m)) for n, m in protocols]

    def protocol_names(self) -> list[str]:
        return [n for n, _ in self.protocols]


class ConsumerMember:
    """One member: what it subscribes to and where it stands in reconciliation."""

    def __init__(self, member_id: str, instance_id: str | None = None,
                 rack_id: str | None = None, client_id: str = "", client_host: str = "",
                 rebalance_timeout_ms: int = 300_000):
        self.member_id = member_id
        self.instance_id = instance_id
        self.rack_id = rack_id
        self.client_id = client_id
        self.client_host = client_host
        self.subscribed_topic_names: list[str] = []
        self.subscribed_topic_regex: str | None = None
        self.server_assignor: str | None = None
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.member_epoch = 0
        self.previous_member_epoch = -1
        self.state = MemberState.STABLE
        self.assigned: Assignment = {}
        self.pending_revocation: Assignment = {}
        # set while the member speaks the classic protocol (an online migration)
        self.classic: ClassicMetadata | None = None


class ConsumerGroup:
    """One consumer group: members, epochs, target assignment, offsets."""

    group_type = "consumer"

    def __init__(self, group_id: str):
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target: dict[str, Assignment] = {}  # member id -> its target assignment
        # who holds each partition now (assigned, or still to revoke)
        self.owners: dict[TopicPartitionId, str] = {}
        # the subscribed topics' metadata the target assignment was computed on
        self.subscription_image: dict[str, tuple[uuid.UUID, int]] = {}
        self.offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        self.pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = {}
        # what this group's records in __consumer_offsets say now (key -> value)
        self.persisted: dict[bytes, bytes] = {}
        self.dead = False

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.state is not MemberState.STABLE or m.member_epoch != self.assignment_epoch:
                if m.member_epoch >= 0:  # a static member away (-2) does not hold it up
                    return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    @property
    def generation_id(self) -> int:
        """The group epoch (what log lines about a refused commit show)."""
        return self.group_epoch

    def is_(self, state: str) -> bool:
        return str(self.state) == str(state)

    def add(self, member: ConsumerMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove(self, member_id: str) -> ConsumerMember | None:
        """The member goes with what it holds (its partitions are free)."""
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.instance_id is not None and \
                self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        self.release(member, member.assigned)
        self.release(member, member.pending_revocation)
        return member

    def release(self, member: ConsumerMember, assignment: Assignment) -> None:
        for tp in partitions_of(assignment):
            if self.owners.get(tp) == member.member_id:
                del self.owners[tp]

    def hold(self, member: ConsumerMember, assignment: Assignment) -> None:
        for tp in partitions_of(assignment):
            self.owners[tp] = member.member_id

    def subscribed_topics(self, member: ConsumerMember, image: TopicImage,
                          pattern_matches: Callable[[str, str], bool]) -> set[str]:
        """The topic names the member subscribes to that exist now."""
        names = {n for n in member.subscribed_topic_names if n in image}
        if member.subscribed_topic_regex:
            names.update(n for n in image if pattern_matches(member.subscribed_topic_regex, n))
        return names
