"""Online migration between a classic group and a KIP-848 consumer group
(Kafka's group.consumer.migration.policy; GroupMetadataManager's
validateOnlineUpgrade/convertToConsumerGroup and validateOnlineDowngrade/
convertToClassicGroup).

Upgrade: the first consumer-protocol member to join a non-empty classic
group that speaks the consumer embedded protocol turns it into a consumer
group. Its classic members stay members (they keep speaking JoinGroup/
SyncGroup/Heartbeat, see classic_members.py) at the classic generation as
their epoch, holding what the classic assignment gave them, which is also
the first target assignment; committed offsets stay.

Downgrade: when the last consumer-protocol member leaves (or is fenced) and
only classic members remain, the group goes back to a classic group at its
group epoch as generation, each member holding its target assignment, and a
rebalance starts so the members agree on an assignment of their own.

Pure functions over the groups' state; the runtime carries out the writes
and the timers.
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from samsa.protocol.errors import ProtocolError

from ..classic import Group
from ..consumer_protocol import (CONSUMER_PROTOCOL_TYPE, assignment_partitions, encode_assignment,
                                 parse_subscription)
from ..log_format import GroupRecord, MemberRecord
from .state import (Assignment, ClassicMetadata, ConsumerGroup, ConsumerMember, MemberState,
                    TopicImage, copy_assignment)

POLICIES = ("disabled", "upgrade", "downgrade", "bidirectional")


def upgrade_enabled(policy: str) -> bool:
    return policy in ("upgrade", "bidirectional")


def downgrade_enabled(policy: str) -> bool:
    return policy in ("downgrade", "bidirectional")


def upgrade_refusal(classic: Group, policy: str, max_size: int) -> str | None:
    """Why this non-empty classic group may not become a consumer group now
    (None: it may). Kafka answers the joining member GROUP_ID_NOT_FOUND
    ("Group ... is not a consumer group.") when it may not."""
    if not upgrade_enabled(policy):
        return "online upgrade is disabled"
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return "the group does not use the consumer embedded protocol"
    if len(classic.members) >= max_size:
        return "the group has reached the consumer group's maximum size"
    return None


def to_consumer_group(classic: Group, image: TopicImage) -> ConsumerGroup:
    """The consumer group a classic group becomes (members, epochs, assignment, offsets)."""
    group = ConsumerGroup(classic.group_id)
    generation = classic.generation_id
    group.group_epoch = group.assignment_epoch = generation
    for cm in classic.members.values():
        metadata = cm.metadata(classic.protocol_name) if classic.protocol_name else \
            (cm.protocols[0][1] if cm.protocols else b"")
        try:
            sub = parse_subscription(metadata)
            topics, rack = sub.topics, sub.rack_id
        except ProtocolError:
            topics, rack = [], None
        try:
            held = assignment_partitions(cm.assignment)
        except ProtocolError:
            held = {}
        m = ConsumerMember(cm.member_id, cm.group_instance_id, rack, cm.client_id,
                           cm.client_host, cm.rebalance_timeout_ms)
        m.subscribed_topic_names = sorted(set(topics))
        m.member_epoch = m.previous_member_epoch = generation
        m.state = MemberState.STABLE
        m.assigned = _by_id(held, image)
        m.classic = ClassicMetadata(cm.session_timeout_ms, cm.protocols)
        group.add(m)
        group.hold(m, m.assigned)
        group.target[m.member_id] = copy_assignment(m.assigned)
    subscribed = {n for m in group.members.values() for n in m.subscribed_topic_names}
    group.subscription_image = {n: image[n] for n in subscribed if n in image}
    group.offsets = classic.offsets
    group.pending_txn_offsets = classic.pending_txn_offsets
    return group


def downgradable(group: ConsumerGroup, policy: str) -> bool:
    """Whether the group, as it is now, goes back to a classic group: its
    members left all speak the classic protocol (and there are some)."""
    return (downgrade_enabled(policy) and bool(group.members)
            and all(m.classic is not None for m in group.members.values()))


def classic_record(group: ConsumerGroup, topic_names: Mapping[uuid.UUID, str],
                   now_ms: int) -> GroupRecord:
    """The classic group's record a consumer group of classic members goes
    back to: generation = group epoch, each member with its target
    assignment, the protocol every member supports that the first member
    prefers."""
    members = list(group.members.values())
    protocol = _common_protocol(members)
    records = []
    for m in members:
        assert m.classic is not None
        metadata = dict(m.classic.protocols).get(protocol or "", b"")
        target = group.target.get(m.member_id, m.assigned)
        records.append(MemberRecord(
            m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            m.classic.session_timeout_ms, metadata,
            encode_assignment(_by_name(target, topic_names), _version(metadata))))
    return GroupRecord(group.group_id, CONSUMER_PROTOCOL_TYPE, group.group_epoch, protocol,
                       members[0].member_id if members else None, now_ms, records)


def assignment_bytes(member: ConsumerMember, topic_names: Mapping[uuid.UUID, str]) -> bytes:
    """The member's assigned partitions as its SyncGroup answer carries them
    (in the version of the subscription it sent first)."""
    metadata = member.classic.protocols[0][1] if member.classic and member.classic.protocols \
        else b""
    return encode_assignment(_by_name(member.assigned, topic_names), _version(metadata))


def owned_by_id(owned: Mapping[str, list[int]], image: TopicImage
                ) -> list[tuple[uuid.UUID, list[int]]]:
    return [(tid, sorted(ps)) for tid, ps in _by_id(owned, image).items()]


def _common_protocol(members: Iterable[ConsumerMember]) -> str | None:
    members = list(members)
    if not members:
        return None
    names = [m.classic.protocol_names() if m.classic else [] for m in members]
    common = set(names[0]).intersection(*map(set, names[1:]))
    return next((n for n in names[0] if n in common), names[0][0] if names[0] else None)


def _version(metadata: bytes) -> int:
    return int.from_bytes(metadata[:2], "big", signed=True) if len(metadata) >= 2 else 0


def _by_id(partitions: Mapping[str, Iterable[int]], image: TopicImage) -> Assignment:
    out: Assignment = {}
    for name, parts in partitions.items():
        if name in image:
            topic_id, count = image[name]
            valid = {p for p in parts if 0 <= p < count}
            if valid:
                out.setdefault(topic_id, set()).update(valid)
    return out


def _by_name(assignment: Mapping[uuid.UUID, Iterable[int]],
             topic_names: Mapping[uuid.UUID, str]) -> dict[str, list[int]]:
    return {topic_names[tid]: sorted(ps) for tid, ps in assignment.items()
            if tid in topic_names and ps}
