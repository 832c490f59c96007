"""A member's next step towards its target assignment (Kafka's
CurrentAssignmentBuilder): partitions it must give up are revoked first
(its epoch stays), and only then does it move to the target's epoch and take
the new partitions no other member still holds."""
from __future__ import annotations

from collections.abc import Iterable
import uuid

from .state import (Assignment, ConsumerGroup, ConsumerMember, MemberState, as_assignment,
                    partitions_of)


def owns_any(owned: Iterable[tuple[uuid.UUID, Iterable[int]]], revoking: Assignment) -> bool:
    for topic_id, parts in owned:
        pending = revoking.get(topic_id)
        if pending and any(p in pending for p in parts):
            return True
    return False


def reconcile(group: ConsumerGroup, member: ConsumerMember,
              owned: list[tuple[uuid.UUID, list[int]]] | None) -> bool:
    """Move the member on as far as it can go now; True when its assignment
    or epoch changed. ``owned``: the partitions it reported holding (None:
    unchanged since its last heartbeat)."""
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owned is None or owns_any(owned, member.pending_revocation):
            return False  # still holds some of what it must give up
        group.release(member, member.pending_revocation)
        member.pending_revocation = {}
        member.state = MemberState.STABLE
    elif member.state is MemberState.STABLE and member.member_epoch == group.assignment_epoch:
        return False
    target = group.target.get(member.member_id, {})
    current = set(partitions_of(member.assigned))
    wanted = set(partitions_of(target))
    revoke = current - wanted
    if revoke:
        member.assigned = as_assignment(current & wanted)
        member.pending_revocation = as_assignment(revoke)
        member.state = MemberState.UNREVOKED_PARTITIONS
        return True
    free = {tp for tp in wanted - current
            if group.owners.get(tp) in (None, member.member_id)}
    before = (member.member_epoch, current)
    assigned = current | free
    member.assigned = as_assignment(assigned)
    group.hold(member, member.assigned)
    member.state = (MemberState.UNRELEASED_PARTITIONS if assigned != wanted
                    else MemberState.STABLE)
    if member.member_epoch != group.assignment_epoch:
        member.previous_member_epoch = member.member_epoch
        member.member_epoch = group.assignment_epoch
    return (member.member_epoch, assigned) != before
