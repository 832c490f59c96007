"""Classic-protocol members inside a KIP-848 consumer group (after an online
upgrade, migration.py): their JoinGroup, SyncGroup, Heartbeat and LeaveGroup
as Kafka's GroupMetadataManager answers them (classicGroupJoinToConsumerGroup
& co.), as a state machine beside ConsumerGroupMachine, whose rules of
assignment and reconciliation it shares.

A classic member gets the server-side assignment: JoinGroup answers at
once, with the member's epoch as the generation and no leader (the member
is a follower and sends an empty SyncGroup); SyncGroup hands it its assigned
partitions. The partitions it reports owning in its subscription stand for
a consumer member's owned partitions in reconciliation. Heartbeat answers
REBALANCE_IN_PROGRESS when the member is to rejoin: the group epoch moved
on, it has partitions to give up, or the partitions it waits for are free.
"""
from __future__ import annotations

import uuid
from collections.abc import Sequence

from samsa.protocol.errors import ErrorCode, ProtocolError

from ..consumer_protocol import CONSUMER_PROTOCOL_TYPE, parse_subscription
from ..effects import Effects
from ..results import JoinResult, LeaveMemberResult, LeaveResult, SyncResult
from .machine import ConsumerGroupMachine, Heartbeat
from .migration import assignment_bytes, owned_by_id
from .reconcile import reconcile
from .state import (ClassicMetadata, ConsumerGroup, ConsumerMember, MemberState, TopicImage,
                    partitions_of)

E = ErrorCode
NONE = int(E.NONE)


class ClassicMembersMachine:
    """JoinGroup & co. from classic members of a consumer group."""

    def __init__(self, machine: ConsumerGroupMachine):
        self.machine = machine

    # ------------------------------------------------------------ JoinGroup

    def join(self, group: ConsumerGroup, member_id: str, instance_id: str | None,
             client_id: str, client_host: str, session_timeout_ms: int,
             rebalance_timeout_ms: int, protocol_type: str,
             protocols: Sequence[tuple[str, bytes]], require_known_member_id: bool,
             image: TopicImage, now_ms: int) -> Effects:
        fx = Effects()
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols:
            fx.answer = JoinResult(int(E.INCONSISTENT_GROUP_PROTOCOL), member_id=member_id)
            return fx
        try:
            sub = parse_subscription(protocols[0][1])
        except ProtocolError:
            fx.answer = JoinResult(int(E.INCONSISTENT_GROUP_PROTOCOL), member_id=member_id)
            return fx
        unknown = not member_id
        member_id = member_id or str(uuid.uuid4())
        if unknown and require_known_member_id and instance_id is None:
            fx.answer = JoinResult(int(E.MEMBER_ID_REQUIRED), member_id=member_id)
            return fx
        bump = False
        member = group.members.get(member_id)
        if instance_id is not None:
            current_id = group.static_members.get(instance_id)
            if current_id is not None and current_id != member_id:
                if not unknown:
                    fx.answer = JoinResult(int(E.FENCED_INSTANCE_ID), member_id=member_id)
                    return fx
                # the static member is back under a new id: it takes the old one's place
                member = self.machine._replace_static(group, group.members[current_id], Heartbeat(
                    member_id, 0, instance_id, sub.rack_id, rebalance_timeout_ms,
                    client_id=client_id, client_host=client_host), fx)
        if member is None:
            if len(group.members) >= self.machine.config.max_size:
                fx.answer = JoinResult(int(E.GROUP_MAX_SIZE_REACHED), member_id=member_id)
                return fx
            member = ConsumerMember(member_id, instance_id, sub.rack_id, client_id, client_host,
                                    rebalance_timeout_ms)
            group.add(member)
            bump = True
        hb = Heartbeat(member_id, member.member_epoch, instance_id, sub.rack_id,
                       rebalance_timeout_ms, subscribed_topic_names=sub.topics,
                       subscribed_topic_regex="", client_id=client_id, client_host=client_host)
        bump |= self.machine._update_member(member, hb)
        member.classic = ClassicMetadata(session_timeout_ms, list(protocols))
        bump |= self.machine._refresh_topics(group, image)
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self.machine._assign(group, image)
        before = member.state
        owned = owned_by_id(sub.owned, image)
        changed = reconcile(group, member, owned)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            # what it gives up may be gone already from what it says it owns
            # (an eager member owns nothing as it rejoins): on at once
            changed |= reconcile(group, member, owned)
        self._revoke_timer(member, before, changed, fx)
        self.machine._touch(group, member, fx)
        self.machine._persist(group, fx)
        fx.answer = JoinResult(NONE, member.member_epoch, CONSUMER_PROTOCOL_TYPE, protocols[0][0],
                               "", False, member_id, [])
        return fx

    @staticmethod
    def _revoke_timer(member: ConsumerMember, before: MemberState, changed: bool,
                      fx: Effects) -> None:
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if before is not MemberState.UNREVOKED_PARTITIONS or changed:
                fx.set_timer(("revoke", member.member_id), member.rebalance_timeout_ms,
                             member.member_epoch)
        elif before is MemberState.UNREVOKED_PARTITIONS:
            fx.cancel_timer(("revoke", member.member_id))

    # ------------------------------------------------------------ SyncGroup, Heartbeat

    def _member(self, group: ConsumerGroup, member_id: str,
                instance_id: str | None) -> tuple[ConsumerMember | None, int]:
        """Kafka's validateConsumerGroupMember, and that it speaks the classic protocol."""
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is None:
                return None, int(E.UNKNOWN_MEMBER_ID)
            if current != member_id:
                return None, int(E.FENCED_INSTANCE_ID)
        member = group.members.get(member_id)
        if member is None or member.classic is None:
            return None, int(E.UNKNOWN_MEMBER_ID)
        return member, NONE

    def sync(self, group: ConsumerGroup, generation_id: int, member_id: str,
             instance_id: str | None, protocol_type: str | None, protocol_name: str | None,
             topic_names: dict[uuid.UUID, str]) -> Effects:
        fx = Effects()
        member, err = self._member(group, member_id, instance_id)
        if member is None or member.classic is None:
            fx.answer = SyncResult(err)
            return fx
        if generation_id != member.member_epoch:
            fx.answer = SyncResult(int(E.ILLEGAL_GENERATION))
        elif (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
                protocol_name is not None
                and protocol_name not in member.classic.protocol_names()):
            fx.answer = SyncResult(int(E.INCONSISTENT_GROUP_PROTOCOL))
        elif group.group_epoch > member.member_epoch and \
                member.state is not MemberState.UNREVOKED_PARTITIONS:
            # a newer assignment is waiting: rejoin for it
            fx.answer = SyncResult(int(E.REBALANCE_IN_PROGRESS))
        else:
            self.machine._touch(group, member, fx)
            fx.answer = SyncResult(NONE, protocol_type or CONSUMER_PROTOCOL_TYPE,
                                   protocol_name or member.classic.protocols[0][0],
                                   assignment_bytes(member, topic_names))
        return fx

    def heartbeat(self, group: ConsumerGroup, generation_id: int, member_id: str,
                  instance_id: str | None) -> Effects:
        fx = Effects()
        member, err = self._member(group, member_id, instance_id)
        if member is None:
            fx.answer = err
            return fx
        if generation_id != member.member_epoch:
            fx.answer = int(E.ILLEGAL_GENERATION)
            return fx
        self.machine._touch(group, member, fx)
        fx.answer = int(E.REBALANCE_IN_PROGRESS) if self.should_rejoin(group, member) else NONE
        return fx

    @staticmethod
    def should_rejoin(group: ConsumerGroup, member: ConsumerMember) -> bool:
        if member.member_epoch < group.group_epoch:
            return True
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            return True
        if member.state is MemberState.UNRELEASED_PARTITIONS:
            target = group.target.get(member.member_id, {})
            held = set(partitions_of(member.assigned))
            return all(group.owners.get(tp) in (None, member.member_id)
                       for tp in partitions_of(target) if tp not in held)
        return False

    # ------------------------------------------------------------ LeaveGroup

    def leave(self, group: ConsumerGroup, members: Sequence[tuple[str, str | None]]) -> Effects:
        fx = Effects()
        results = []
        left = False
        for member_id, instance_id in members:
            mid = member_id or (group.static_members.get(instance_id or "") or "")
            member = group.members.get(mid)
            if member is None:
                results.append(LeaveMemberResult(member_id, instance_id,
                                                 int(E.UNKNOWN_MEMBER_ID)))
                continue
            if instance_id is not None and member.instance_id != instance_id:
                results.append(LeaveMemberResult(member_id, instance_id,
                                                 int(E.FENCED_INSTANCE_ID)))
                continue
            self.machine._drop(group, mid, fx)
            left = True
            results.append(LeaveMemberResult(member_id, instance_id, NONE))
        if left:
            group.group_epoch += 1
            self.machine._persist(group, fx)
        fx.answer = LeaveResult(NONE, results)
        return fx
