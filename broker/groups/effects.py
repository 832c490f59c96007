"""What a group state machine answers an event with, for any group type.

A machine (classic/machine.py, consumer/machine.py for KIP-848; KIP-932 share
groups beside it later) is fed events -- a request, a timer fired, a
partition loaded, a write done -- with the time as a parameter, and changes
only its own plain objects. Everything else it wants done comes back as
`Effects`, in the order it is to happen, for the runtime (coordinator.py) to
carry out: answer a member's waiting request, make a request wait, set or
cancel a timer, write a record, tell the membership observer. No asyncio, no
store, no clock in here, so a machine runs in virtual time in a test.
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .log_format import GroupRecord
from .results import GroupDescription, GroupMembership, ListedGroup


@dataclass(frozen=True)
class Respond:
    """Answer the member's waiting JoinGroup ("join") or SyncGroup ("sync");
    ``member_id``: its id when answered (a static member's changes after)."""
    member: Any
    kind: str
    result: Any
    member_id: str = ""


@dataclass(frozen=True)
class Wait:
    """The member now waits for its "join" or "sync" answer; ``request``: it
    is the answer of the request being handled (else an earlier one waits)."""
    member: Any
    kind: str
    request: bool = True


@dataclass(frozen=True)
class SetTimer:
    """In ``delay_ms``, feed the machine timer_fired(key, payload); a timer of
    the same key in the same group is replaced."""
    key: Hashable
    delay_ms: int
    payload: Any = None


@dataclass(frozen=True)
class CancelTimer:
    key: Hashable


@dataclass(frozen=True)
class WriteRecord:
    """Write the group's record; nobody waits for it (a failure is logged)."""
    record: GroupRecord


@dataclass(frozen=True)
class WriteRecords:
    """Write these records of the group (key, value; None: a tombstone) in
    one batch, in order; nobody waits for it (a failure is logged). A
    consumer group's state is several records (consumer/records.py)."""
    group_id: str
    entries: list[tuple[bytes, bytes | None]]


@dataclass(frozen=True)
class MembershipChanged:
    """Tell the membership observer (the ZooKeeper registry mirror)."""


@dataclass(frozen=True)
class AwaitedWrite:
    """Write ``record`` before going on: the runtime feeds the outcome (the
    error code, NONE when written) and the time to ``then``, and carries out
    the effects it returns -- the state changes only once the write is done,
    as Kafka's coordinator does it."""
    record: GroupRecord
    then: Callable[[int, int], Effects]


@dataclass
class Effects:
    """An event's outcome: ``answer`` is the request's answer now, or None
    when the request waits (a Wait op names for what); ``ops`` in order;
    ``write`` a write to finish before the request is answered."""
    answer: Any = None
    ops: list = field(default_factory=list)
    write: AwaitedWrite | None = None

    def respond(self, member, kind: str, result) -> None:
        """Answer the member's request of ``kind`` if one waits."""
        flag = "awaiting_" + kind
        if getattr(member, flag):
            setattr(member, flag, False)
            self.ops.append(Respond(member, kind, result, member.member_id))

    def wait(self, member, kind: str, request: bool = True) -> None:
        setattr(member, "awaiting_" + kind, True)
        self.ops.append(Wait(member, kind, request))

    def set_timer(self, key: Hashable, delay_ms: int, payload: Any = None) -> None:
        self.ops.append(SetTimer(key, delay_ms, payload))

    def cancel_timer(self, key: Hashable) -> None:
        self.ops.append(CancelTimer(key))

    def write_record(self, record: GroupRecord) -> None:
        self.ops.append(WriteRecord(record))

    def membership_changed(self) -> None:
        self.ops.append(MembershipChanged())


class GroupMachine(Protocol):
    """What the coordinator asks of the machine of a group type, beside the
    type's own requests (the classic JoinGroup & co., a KIP-848
    ConsumerGroupHeartbeat, a KIP-932 ShareGroupHeartbeat)."""

    group_type: str

    def timer_fired(self, group: Any, key: Hashable, payload: Any, now_ms: int) -> Effects:
        """One of the group's timers is due."""

    def commit_error(self, group: Any, generation_id: int, member_id: str,
                     group_instance_id: str | None, transactional: bool = False) -> int:
        """Whether this member may commit offsets now (an error code, NONE if so)."""

    def fetch_error(self, group: Any, member_id: str | None, member_epoch: int) -> int:
        """Whether this member (OffsetFetch v9+) may read the group's offsets."""

    def offsets_committed(self, group: Any, member_id: str) -> Effects:
        """A member's commit was accepted (it may count as a sign of life)."""

    def offsets_deletable(self, group: Any, partitions: Sequence[tuple[str, int]]
                          ) -> tuple[int, dict[tuple[str, int], int]]:
        """OffsetDelete's errors: for the request, per partition."""

    def expiry(self, group: Any) -> tuple[int | None, Collection[str] | None] | None:
        """(base time, topics kept) for offsets.expired; None: none expire now."""

    def forgettable(self, group: Any) -> bool:
        """Nothing left to remember: the group goes."""

    def deletable(self, group: Any) -> int:
        """DeleteGroups' answer for the group (NONE: it may go)."""

    def delete(self, group: Any, now_ms: int) -> Effects:
        """The group goes (its timers are cancelled by the runtime)."""

    def describe(self, group: Any) -> GroupDescription:
        ...

    def listed(self, group: Any) -> ListedGroup:
        ...

    def membership(self, group: Any) -> GroupMembership | None:
        """What the membership observer is told, None if nothing."""
