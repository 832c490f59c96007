"""The classic group protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) as a
state machine: Kafka's classic GroupCoordinator rules over plain objects
(state.py), fed events with the time as a parameter, answering with Effects
(effects.py) -- the request's answer, the waiting requests to answer, the
timers to set, the records to write. No asyncio, no store, no clock.

Behaviour follows Apache Kafka's classic GroupCoordinator:
- JoinGroup waits until every known member has rejoined or the rebalance timeout
  (the largest member rebalance timeout) passes; members that did not rejoin
  are removed. A new empty group waits group.initial.rebalance.delay.ms,
  extended (up to the rebalance timeout) while new members keep arriving.
- The leader gets every member's metadata for the selected protocol and sends
  the assignments in SyncGroup; followers wait for it. The assignment takes
  effect once its group record is written.
- Session timeouts evict silent members; members waiting on a join or sync
  response do not expire (they are waiting on us).
- Static members (group.instance.id, KIP-345) rejoining with a new member id
  take over the old member's place without a rebalance when the group is
  Stable; the old id is fenced (FENCED_INSTANCE_ID).

Timers (keys within the group): ("heartbeat", member) -- the member's
session (or new-member join) timeout; ("pending", member id) -- a member id
handed out with MEMBER_ID_REQUIRED; "join" -- the rebalance (or initial
delay) timeout, payload None or ("initial", remaining ms); "sync" -- the
SyncGroup deadline of a generation (payload: the generation).
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from samsa.protocol.errors import ErrorCode as E
from samsa.protocol.errors import ProtocolError

from ..consumer_protocol import assignment_partitions, subscription_topics
from ..effects import AwaitedWrite, Effects
from ..log_format import GroupRecord, MemberRecord
from ..results import (
    GroupDescription,
    GroupMembership,
    JoinResult,
    LeaveMemberResult,
    LeaveResult,
    ListedGroup,
    MemberDescription,
    SyncResult,
)
from .state import Group, GroupState, Member

if TYPE_CHECKING:  # the coordinator module builds this machine: imported for the annotation only
    from ..coordinator import GroupCoordinatorConfig

log = logging.getLogger(__name__)

NONE = int(E.NONE)
JOIN, SYNC = "join", "sync"


class ClassicGroupMachine:
    """The classic protocol's rules for every classic group of a coordinator;
    ``config``: a GroupCoordinatorConfig (the group.* settings)."""

    group_type = Group.group_type

    def __init__(self, config: GroupCoordinatorConfig) -> None:
        self.config = config

    # ================================================================ state in and out

    @staticmethod
    def new_group(group_id: str) -> Group:
        return Group(group_id)

    def loaded(self, rec: GroupRecord) -> tuple[Group, Effects]:
        """Partition loaded: the group as its last record left it; its members
        get fresh session timers."""
        fx = Effects()
        g = Group(rec.group_id)
        g.protocol_type = rec.protocol_type or None
        g.generation_id = rec.generation
        g.current_state_timestamp = rec.current_state_timestamp
        if rec.members and rec.protocol is not None:
            g.protocol_name = rec.protocol
            for mr in rec.members:
                m = Member(mr.member_id, mr.group_instance_id, mr.client_id, mr.client_host,
                           mr.rebalance_timeout_ms, mr.session_timeout_ms, rec.protocol_type,
                           [(rec.protocol, mr.subscription)])
                m.assignment = mr.assignment
                g.add(m)
                self._schedule_heartbeat(fx, m)
            if rec.leader in g.members:
                g.leader_id = rec.leader
            g.state = GroupState.STABLE
            g.subscribed_topics = g.compute_subscribed_topics()
        return g, fx

    @staticmethod
    def record(group: Group, now_ms: int, assignment: dict[str, bytes] | None = None
               ) -> GroupRecord:
        members = []
        if group.protocol_name is not None:
            for m in group.members.values():
                a = assignment.get(m.member_id, b"") if assignment is not None else m.assignment
                members.append(MemberRecord(m.member_id, m.group_instance_id, m.client_id,
                                            m.client_host, m.rebalance_timeout_ms,
                                            m.session_timeout_ms,
                                            m.metadata(group.protocol_name), a))
        return GroupRecord(group.group_id, group.protocol_type or "", group.generation_id,
                           group.protocol_name, group.leader_id if members else None,
                           now_ms, members)

    @staticmethod
    def forgettable(group: Group) -> bool:
        """An Empty group without offsets has nothing left to remember: Kafka drops it."""
        return (group.is_(GroupState.EMPTY) and not group.offsets
                and not group.pending_members and not group.pending_txn_offsets)

    @staticmethod
    def deletable(group: Group) -> int:
        """DeleteGroups' answer for a live group: only an Empty one goes."""
        return NONE if group.is_(GroupState.EMPTY) else int(E.NON_EMPTY_GROUP)

    @staticmethod
    def delete(group: Group, now_ms: int) -> Effects:
        """Empty -> Dead (the runtime cancels the group's timers and forgets it)."""
        group.transition_to(GroupState.DEAD, now_ms)
        fx = Effects()
        fx.membership_changed()
        return fx

    @staticmethod
    def describe(group: Group) -> GroupDescription:
        if group.is_(GroupState.STABLE):
            members = [MemberDescription(m.member_id, m.group_instance_id, m.client_id,
                                         m.client_host, m.metadata(group.protocol_name),
                                         m.assignment) for m in group.members.values()]
            protocol = group.protocol_name or ""
        else:
            members = [MemberDescription(m.member_id, m.group_instance_id, m.client_id,
                                         m.client_host, b"", b"") for m in group.members.values()]
            protocol = ""
        return GroupDescription(group.group_id, NONE, str(group.state),
                                group.protocol_type or "", protocol, members)

    @staticmethod
    def membership(group: Group) -> GroupMembership | None:
        """What the membership observer is told: a consumer group's members
        and their assignment (none unless it has a generation); None for
        other protocol types."""
        if not group.is_consumer_group():
            return None
        members = {}
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE) \
                and group.protocol_name is not None:
            for m in group.members.values():
                try:
                    members[m.member_id] = (
                        tuple(subscription_topics(m.metadata(group.protocol_name))),
                        assignment_partitions(m.assignment) if m.assignment else {})
                except ProtocolError:
                    continue  # a client's own encoding we cannot read: leave it out
        return GroupMembership(group.group_id, members)

    @staticmethod
    def listed(group: Group) -> ListedGroup:
        return ListedGroup(group.group_id, group.protocol_type or "", str(group.state),
                           group.group_type)

    # ================================================================ offsets' questions

    @staticmethod
    def fetch_error(group: Group, member_id: str | None, member_epoch: int) -> int:
        """A classic group lets anyone read its offsets (Kafka checks nothing)."""
        return NONE

    @staticmethod
    def commit_error(group: Group, generation_id: int, member_id: str,
                     group_instance_id: str | None, transactional: bool = False) -> int:
        """Who may commit, as Kafka's classic group decides it (one rule for
        OffsetCommit and TxnOffsetCommit)."""
        if group.is_(GroupState.DEAD):
            return int(E.COORDINATOR_NOT_AVAILABLE)
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            # From outside group management (admin tools, a "simple" consumer,
            # the ZooKeeper-era consumers that send their own member id with
            # generation -1): nobody's generation to protect while the group
            # has no members, so the member id is not looked at.
            return NONE
        if generation_id >= 0 or member_id or group_instance_id is not None:
            if group_instance_id is not None:
                if group.static_member_id(group_instance_id) is None:
                    return int(E.UNKNOWN_MEMBER_ID)
                if group.is_static_member_fenced(group_instance_id, member_id):
                    return int(E.FENCED_INSTANCE_ID)
            if not group.has(member_id):
                return int(E.UNKNOWN_MEMBER_ID)
            if generation_id != group.generation_id:
                return int(E.ILLEGAL_GENERATION)
        elif not transactional and not group.is_(GroupState.EMPTY):
            # while a group has members only they may commit (a transactional
            # commit before KIP-447 carries no member, and is not refused)
            return int(E.UNKNOWN_MEMBER_ID)
        if not transactional and group.is_(GroupState.COMPLETING_REBALANCE):
            # it has this generation's JoinGroup answer, not its assignment yet
            return int(E.REBALANCE_IN_PROGRESS)
        return NONE

    def offsets_committed(self, group: Group, member_id: str) -> Effects:
        """A member's commit was accepted: it counts as a heartbeat."""
        fx = Effects()
        if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            # PreparingRebalance still commits: the next heartbeat tells it to rejoin
            self._schedule_heartbeat(fx, group.get(member_id))
        return fx

    @staticmethod
    def offsets_deletable(group: Group, partitions: Sequence[tuple[str, int]]
                          ) -> tuple[int, dict[tuple[str, int], int]]:
        """OffsetDelete (KIP-496): (error for the whole request, error per
        partition). An Empty group's offsets all go; a consumer group's go
        except those of topics it subscribes to; other groups with members
        keep theirs."""
        if group.is_(GroupState.EMPTY):
            return NONE, {tp: NONE for tp in partitions}
        if not group.is_consumer_group():
            return int(E.NON_EMPTY_GROUP), {}
        return NONE, {(t, p): int(E.GROUP_SUBSCRIBED_TO_TOPIC) if group.is_subscribed_to(t)
                      else NONE for t, p in partitions}

    @staticmethod
    def expiry(group: Group) -> tuple[int | None, set[str] | None] | None:
        """How retention applies to the group's offsets (KIP-211): (base time,
        topics kept) for offsets.expired, None when none expire now. An Empty
        group's expire retention after it became Empty (by commit time when
        it was never managed: no protocol type); a Stable consumer group's
        offsets of topics it no longer subscribes to expire by commit time."""
        if group.protocol_type is None and group.is_(GroupState.EMPTY):
            return None, None
        if group.is_(GroupState.EMPTY):
            ts = group.current_state_timestamp
            return (ts if ts >= 0 else None), None
        if (group.is_consumer_group() and group.is_(GroupState.STABLE)
                and group.subscribed_topics is not None):
            return None, group.subscribed_topics
        return None

    # ================================================================ timers

    def _schedule_heartbeat(self, fx: Effects, member: Member) -> None:
        """(Re)arm the member's expiry: session timeout, or the join timeout while new."""
        timeout = (self.config.new_member_join_timeout_ms if member.is_new
                   else member.session_timeout_ms)
        fx.set_timer(("heartbeat", member), timeout)

    def timer_fired(self, group: Group, key, payload, now_ms: int) -> Effects:
        fx = Effects()
        if key == JOIN:
            if payload is None:
                self._complete_join(fx, group, now_ms)
            else:
                self._initial_join_expired(fx, group, payload[1], now_ms)
        elif key == SYNC:
            self._sync_expired(fx, group, payload, now_ms)
        elif key[0] == "heartbeat":
            self._heartbeat_expired(fx, group, key[1], now_ms)
        elif key[0] == "pending" and key[1] in group.pending_members:
            self._remove_pending_member(fx, group, key[1], now_ms)
        return fx

    def _heartbeat_expired(self, fx: Effects, group: Group, member: Member, now_ms: int) -> None:
        if group.members.get(member.member_id) is not member:
            return
        if not member.is_new and (member.awaiting_join or member.awaiting_sync):
            # waiting on the coordinator counts as alive
            self._schedule_heartbeat(fx, member)
            return
        log.info("group %s: member %s session expired", group.group_id, member.member_id)
        self._remove_member_and_update_group(fx, group, member, now_ms)

    def _remove_pending_member(self, fx: Effects, group: Group, member_id: str,
                               now_ms: int) -> None:
        group.pending_members.discard(member_id)
        fx.cancel_timer(("pending", member_id))
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(fx, group, now_ms)

    def _remove_member_and_update_group(self, fx: Effects, group: Group, member: Member,
                                        now_ms: int) -> None:
        fx.respond(member, JOIN, JoinResult(int(E.UNKNOWN_MEMBER_ID), member_id=member.member_id))
        fx.respond(member, SYNC, SyncResult(int(E.UNKNOWN_MEMBER_ID)))
        fx.cancel_timer(("heartbeat", member))
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(fx, group, now_ms)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(fx, group, now_ms)

    # ================================================================ rebalance

    def rebalance(self, group: Group, now_ms: int) -> Effects:
        """Start a rebalance of a Stable group from outside its own events
        (a consumer group downgraded to this one: its members must agree on
        an assignment of their own)."""
        fx = Effects()
        self._maybe_prepare_rebalance(fx, group, now_ms)
        return fx

    def _maybe_prepare_rebalance(self, fx: Effects, group: Group, now_ms: int) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(fx, group, now_ms)

    def _prepare_rebalance(self, fx: Effects, group: Group, now_ms: int) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            # members waiting on SyncGroup must rejoin instead
            self._reset_and_propagate_assignment_error(fx, group, int(E.REBALANCE_IN_PROGRESS))
        fx.cancel_timer(SYNC)
        was_empty = group.is_(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, now_ms)
        rt = group.rebalance_timeout_ms()
        if was_empty:
            delay = self.config.group_initial_rebalance_delay_ms
            self._schedule_initial_join(fx, group, min(delay, rt), max(rt - delay, 0))
        else:
            group.join_is_initial = False
            fx.set_timer(JOIN, rt)
            self._try_complete_join(fx, group, now_ms)

    @staticmethod
    def _schedule_initial_join(fx: Effects, group: Group, delay_ms: int,
                               remaining_ms: int) -> None:
        group.join_is_initial = True
        fx.set_timer(JOIN, delay_ms, ("initial", remaining_ms))

    def _initial_join_expired(self, fx: Effects, group: Group, remaining_ms: int,
                              now_ms: int) -> None:
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        if group.new_member_added and remaining_ms > 0:
            # members are still arriving: wait another delay, within the rebalance timeout
            group.new_member_added = False
            delay = self.config.group_initial_rebalance_delay_ms
            self._schedule_initial_join(fx, group, min(delay, remaining_ms),
                                        max(remaining_ms - delay, 0))
        else:
            self._complete_join(fx, group, now_ms)

    def _try_complete_join(self, fx: Effects, group: Group, now_ms: int) -> None:
        if (group.is_(GroupState.PREPARING_REBALANCE) and not group.join_is_initial
                and group.all_joined()):
            self._complete_join(fx, group, now_ms)

    def _complete_join(self, fx: Effects, group: Group, now_ms: int) -> None:
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        fx.cancel_timer(JOIN)
        for m in [m for m in group.members.values() if not m.awaiting_join]:
            log.info("group %s: removing member %s, it did not rejoin in time",
                     group.group_id, m.member_id)
            fx.cancel_timer(("heartbeat", m))
            group.remove(m.member_id)
        group.init_next_generation(now_ms)
        log.info("group %s: generation %d, %d member(s), protocol %s", group.group_id,
                 group.generation_id, len(group.members), group.protocol_name)
        if group.is_(GroupState.EMPTY):
            fx.write_record(self.record(group, now_ms))
            fx.membership_changed()
            return
        leader_view = self._join_response(group, "", for_leader=True).members
        for m in group.members.values():
            is_leader = group.is_leader(m.member_id)
            fx.respond(m, JOIN, JoinResult(
                NONE, group.generation_id, group.protocol_type, group.protocol_name,
                group.leader_id or "", False, m.member_id, leader_view if is_leader else []))
            m.is_new = False
            self._schedule_heartbeat(fx, m)
        # every member must sync within the rebalance timeout, else it is dropped
        fx.set_timer(SYNC, group.rebalance_timeout_ms(), group.generation_id)

    def _sync_expired(self, fx: Effects, group: Group, generation: int, now_ms: int) -> None:
        if group.generation_id != generation:
            return
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) \
                and group.pending_sync:
            log.info("group %s: members %s did not sync in time", group.group_id,
                     sorted(group.pending_sync))
            for mid in list(group.pending_sync):
                m = group.members.get(mid)
                if m is not None:
                    fx.cancel_timer(("heartbeat", m))
                    group.remove(mid)
            group.pending_sync.clear()
            self._prepare_rebalance(fx, group, now_ms)

    @staticmethod
    def _remove_pending_sync(fx: Effects, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            fx.cancel_timer(SYNC)

    def _propagate_assignment(self, fx: Effects, group: Group, error: int) -> None:
        for m in group.members.values():
            if m.awaiting_sync:
                fx.respond(m, SYNC, SyncResult(error, group.protocol_type,
                                               group.protocol_name, m.assignment))
                self._schedule_heartbeat(fx, m)

    def _reset_and_propagate_assignment_error(self, fx: Effects, group: Group,
                                              error: int) -> None:
        for m in group.members.values():
            m.assignment = b""
        self._propagate_assignment(fx, group, error)

    @staticmethod
    def _join_response(group: Group, member_id: str, *, for_leader: bool,
                       skip_assignment: bool = False) -> JoinResult:
        members = []
        if for_leader:
            members = [(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                       for m in group.members.values()]
        return JoinResult(NONE, group.generation_id, group.protocol_type, group.protocol_name,
                          group.leader_id or "", skip_assignment, member_id, members)

    # ================================================================ JoinGroup

    def join(self, group: Group, member_id: str, group_instance_id: str | None,
             client_id: str, client_host: str, session_timeout_ms: int,
             rebalance_timeout_ms: int, protocol_type: str,
             protocols: Sequence[tuple[str, bytes]], require_known_member_id: bool,
             now_ms: int) -> Effects:
        """JoinGroup (the coordinator checked the group id and session timeout)."""
        fx = Effects()
        protocols = [(n, bytes(m or b"")) for n, m in protocols]
        args = (group_instance_id, client_id, client_host, session_timeout_ms,
                rebalance_timeout_ms, protocol_type, protocols, now_ms)
        if not member_id:
            self._join_unknown(fx, group, require_known_member_id, *args)
        else:
            self._join_known(fx, group, member_id, *args)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(fx, group, now_ms)
        return fx

    def _accepts_new_member(self, group: Group) -> bool:
        if group.is_(GroupState.PREPARING_REBALANCE):
            size = sum(1 for m in group.members.values() if m.awaiting_join)
        else:
            size = len(group.members)
        return size < self.config.group_max_size

    def _join_unknown(self, fx, group, require_known, instance_id, client_id, client_host,
                      session_ms, rebalance_ms, protocol_type, protocols, now_ms) -> None:
        if group.is_(GroupState.DEAD):
            fx.answer = JoinResult(int(E.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            fx.answer = JoinResult(int(E.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_id = f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            old_id = group.static_member_id(instance_id)
            if old_id is not None:
                self._rejoin_static_member(fx, group, old_id, new_id, instance_id,
                                           session_ms, rebalance_ms, protocols, now_ms)
                return
        if not self._accepts_new_member(group):
            fx.answer = JoinResult(int(E.GROUP_MAX_SIZE_REACHED))
            return
        if instance_id is None and require_known:
            # the client must come back with this id; if it never does, forget it
            group.pending_members.add(new_id)
            fx.set_timer(("pending", new_id), session_ms)
            fx.answer = JoinResult(int(E.MEMBER_ID_REQUIRED), member_id=new_id)
            return
        self._add_member_and_rebalance(fx, group, new_id, instance_id, client_id, client_host,
                                       session_ms, rebalance_ms, protocol_type, protocols,
                                       now_ms)

    def _join_known(self, fx, group, member_id, instance_id, client_id, client_host,
                    session_ms, rebalance_ms, protocol_type, protocols, now_ms) -> None:
        if group.is_(GroupState.DEAD):
            fx.answer = JoinResult(int(E.COORDINATOR_NOT_AVAILABLE), member_id=member_id)
            return
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            fx.answer = JoinResult(int(E.INCONSISTENT_GROUP_PROTOCOL), member_id=member_id)
            return
        if group.is_pending_member(member_id):
            # second JoinGroup (v4+) with the id we handed out
            if instance_id is not None and group.static_member_id(instance_id) is not None:
                fx.answer = JoinResult(int(E.FENCED_INSTANCE_ID), member_id=member_id)
                return
            if not self._accepts_new_member(group):
                self._remove_pending_member(fx, group, member_id, now_ms)
                fx.answer = JoinResult(int(E.GROUP_MAX_SIZE_REACHED), member_id=member_id)
                return
            group.pending_members.discard(member_id)
            fx.cancel_timer(("pending", member_id))
            self._add_member_and_rebalance(fx, group, member_id, instance_id, client_id,
                                           client_host, session_ms, rebalance_ms,
                                           protocol_type, protocols, now_ms)
            return
        if group.is_static_member_fenced(instance_id, member_id):
            fx.answer = JoinResult(int(E.FENCED_INSTANCE_ID), member_id=member_id)
            return
        if not group.has(member_id) or (instance_id is not None
                                        and group.static_member_id(instance_id) is None):
            fx.answer = JoinResult(int(E.UNKNOWN_MEMBER_ID), member_id=member_id)
            return
        member = group.get(member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(fx, group, member, protocols, rebalance_ms,
                                              session_ms, now_ms)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # it lost our JoinGroup response: send the current generation again
                fx.answer = self._join_response(group, member_id,
                                                for_leader=group.is_leader(member_id))
            else:
                self._update_member_and_rebalance(fx, group, member, protocols, rebalance_ms,
                                                  session_ms, now_ms)
        elif state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # a leader's rejoin means it wants a new assignment (e.g. new topics)
                self._update_member_and_rebalance(fx, group, member, protocols,
                                                  rebalance_ms, session_ms, now_ms)
            else:
                self._schedule_heartbeat(fx, member)
                fx.answer = self._join_response(group, member_id, for_leader=False)
        else:
            fx.answer = JoinResult(int(E.UNKNOWN_MEMBER_ID), member_id=member_id)

    def _add_member_and_rebalance(self, fx, group, member_id, instance_id, client_id,
                                  client_host, session_ms, rebalance_ms, protocol_type,
                                  protocols, now_ms) -> None:
        member = Member(member_id, instance_id, client_id, client_host, rebalance_ms,
                        session_ms, protocol_type, protocols)
        member.is_new = True
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        fx.wait(member, JOIN)
        # a new member cannot heartbeat yet; the join timeout cleans up clients
        # that gave up on their JoinGroup
        self._schedule_heartbeat(fx, member)
        self._maybe_prepare_rebalance(fx, group, now_ms)

    def _update_member_and_rebalance(self, fx, group, member, protocols, rebalance_ms,
                                     session_ms, now_ms) -> None:
        group.update_member(member, protocols, rebalance_ms, session_ms)
        fx.wait(member, JOIN)
        self._maybe_prepare_rebalance(fx, group, now_ms)

    def _rejoin_static_member(self, fx: Effects, group: Group, old_id: str, new_id: str,
                              instance_id: str, session_ms: int, rebalance_ms: int,
                              protocols, now_ms: int) -> None:
        """A known group.instance.id came back with an empty member id (a restart)."""
        member = group.get(old_id)
        # whoever still waits under the old id is a zombie now
        fx.respond(member, JOIN, JoinResult(int(E.FENCED_INSTANCE_ID), member_id=old_id))
        fx.respond(member, SYNC, SyncResult(int(E.FENCED_INSTANCE_ID)))
        old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.replace_static_member(instance_id, old_id, new_id)
        self._schedule_heartbeat(fx, member)
        group.update_member(member, protocols, rebalance_ms, session_ms)
        fx.wait(member, JOIN)
        log.info("group %s: static member %s rejoined as %s", group.group_id, instance_id, new_id)
        if group.is_(GroupState.STABLE):
            if group.select_protocol() != group.protocol_name:
                self._maybe_prepare_rebalance(fx, group, now_ms)
                return
            generation = group.generation_id

            def written(error: int, now_ms: int) -> Effects:
                after = Effects()
                if not (group.is_(GroupState.STABLE) and group.generation_id == generation
                        and member.awaiting_join and group.members.get(new_id) is member):
                    # a rebalance started meanwhile; it answers this join
                    if group.is_(GroupState.PREPARING_REBALANCE):
                        self._try_complete_join(after, group, now_ms)
                elif error:
                    group.replace_static_member(instance_id, new_id, old_id)
                    group.update_member(member, *old)
                    after.respond(member, JOIN, JoinResult(error, member_id=new_id))
                else:
                    # no rebalance: the member gets the current generation and, via
                    # SyncGroup, its old assignment; a rejoining leader must not reassign
                    is_leader = group.is_leader(new_id)
                    after.respond(member, JOIN, self._join_response(
                        group, new_id, for_leader=is_leader, skip_assignment=is_leader))
                return after

            fx.write = AwaitedWrite(self.record(group, now_ms), written)
            return
        if group.is_(GroupState.COMPLETING_REBALANCE):
            # the leader may be assigning for the old id: assign again
            self._prepare_rebalance(fx, group, now_ms)
        # PreparingRebalance: the rebalance answers

    # ================================================================ SyncGroup

    def sync(self, group: Group, generation_id: int, member_id: str,
             group_instance_id: str | None, protocol_type: str | None,
             protocol_name: str | None, assignments: Sequence[tuple[str, bytes]],
             now_ms: int) -> Effects:
        """SyncGroup. protocol_type/protocol_name: None when the request version lacks them."""
        fx = Effects()
        if group.is_(GroupState.DEAD):
            fx.answer = SyncResult(int(E.COORDINATOR_NOT_AVAILABLE))
        elif group.is_static_member_fenced(group_instance_id, member_id):
            fx.answer = SyncResult(int(E.FENCED_INSTANCE_ID))
        elif not group.has(member_id):
            fx.answer = SyncResult(int(E.UNKNOWN_MEMBER_ID))
        elif generation_id != group.generation_id:
            fx.answer = SyncResult(int(E.ILLEGAL_GENERATION))
        elif (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            fx.answer = SyncResult(int(E.INCONSISTENT_GROUP_PROTOCOL))
        elif group.is_(GroupState.EMPTY):
            fx.answer = SyncResult(int(E.UNKNOWN_MEMBER_ID))
        elif group.is_(GroupState.PREPARING_REBALANCE):
            fx.answer = SyncResult(int(E.REBALANCE_IN_PROGRESS))
        elif group.is_(GroupState.STABLE):
            member = group.get(member_id)
            self._remove_pending_sync(fx, group, member_id)
            self._schedule_heartbeat(fx, member)
            fx.answer = SyncResult(NONE, group.protocol_type, group.protocol_name,
                                   member.assignment)
        else:
            self._sync_completing(fx, group, group.get(member_id), assignments, now_ms)
        return fx

    def _sync_completing(self, fx: Effects, group: Group, member: Member,
                         assignments: Sequence[tuple[str, bytes]], now_ms: int) -> None:
        """CompletingRebalance: wait for the leader's assignment, which takes
        effect once the group record holding it is written."""
        fx.wait(member, SYNC)
        self._remove_pending_sync(fx, group, member.member_id)
        if not group.is_leader(member.member_id):
            return
        assignment = {mid: b"" for mid in group.members}
        for mid, data in assignments:
            if mid in assignment:
                assignment[mid] = bytes(data or b"")
        generation = group.generation_id

        def written(error: int, now_ms: int) -> Effects:
            after = Effects()
            # the group may have moved on while we were writing
            if group.is_(GroupState.COMPLETING_REBALANCE) and group.generation_id == generation:
                if error:
                    self._reset_and_propagate_assignment_error(after, group, error)
                    self._maybe_prepare_rebalance(after, group, now_ms)
                else:
                    for m in group.members.values():
                        m.assignment = assignment.get(m.member_id, b"")
                    self._propagate_assignment(after, group, NONE)
                    after.membership_changed()
                    group.transition_to(GroupState.STABLE, now_ms)
            return after

        fx.write = AwaitedWrite(self.record(group, now_ms, assignment), written)

    # ================================================================ Heartbeat

    def heartbeat(self, group: Group, generation_id: int, member_id: str,
                  group_instance_id: str | None, now_ms: int) -> Effects:
        fx = Effects()
        if group.is_(GroupState.DEAD):
            fx.answer = int(E.COORDINATOR_NOT_AVAILABLE)
        elif group.is_static_member_fenced(group_instance_id, member_id):
            fx.answer = int(E.FENCED_INSTANCE_ID)
        elif not group.has(member_id):
            fx.answer = int(E.UNKNOWN_MEMBER_ID)
        elif generation_id != group.generation_id:
            fx.answer = int(E.ILLEGAL_GENERATION)
        elif group.is_(GroupState.EMPTY):
            fx.answer = int(E.UNKNOWN_MEMBER_ID)
        else:
            self._schedule_heartbeat(fx, group.get(member_id))
            fx.answer = (int(E.REBALANCE_IN_PROGRESS)
                         if group.is_(GroupState.PREPARING_REBALANCE) else NONE)
        return fx

    # ================================================================ LeaveGroup

    def leave(self, group: Group, members: Sequence[tuple[str, str | None]],
              now_ms: int) -> Effects:
        """LeaveGroup; members: (member_id, group_instance_id) each. An empty
        member_id with a group_instance_id removes that static member."""
        fx = Effects()
        if group.is_(GroupState.DEAD):
            fx.answer = LeaveResult(int(E.COORDINATOR_NOT_AVAILABLE))
            return fx
        results = []
        for mid, iid in members:
            if not mid:
                current = group.static_member_id(iid)
                if current is None:
                    code = int(E.UNKNOWN_MEMBER_ID)
                else:
                    self._remove_member_and_update_group(fx, group, group.get(current), now_ms)
                    code = NONE
            elif group.is_pending_member(mid):
                self._remove_pending_member(fx, group, mid, now_ms)
                code = NONE
            elif group.is_static_member_fenced(iid, mid):
                code = int(E.FENCED_INSTANCE_ID)
            elif group.has(mid):
                self._remove_member_and_update_group(fx, group, group.get(mid), now_ms)
                code = NONE
            else:
                code = int(E.UNKNOWN_MEMBER_ID)
            results.append(LeaveMemberResult(mid, iid, code))
        fx.answer = LeaveResult(NONE, results)
        return fx

