"""The KIP-848 consumer group protocol as a state machine (Kafka's
GroupMetadataManager.consumerGroupHeartbeat and its timers), in the shape of
classic/machine.py: fed a ConsumerGroupHeartbeat, a fired timer or a load
with the time (and the topics the metadata has now), answering Effects.

Timers: ("session", member id) -- the member is fenced when no heartbeat came
for the session timeout; ("revoke", member id) -- fenced when it has not
given up partitions within its rebalance timeout. A fenced or departed
member's partitions go back to the pool and the group epoch moves on.
Every change is written as Kafka's records (records.py).
"""
from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from samsa.protocol.errors import ErrorCode

from ..effects import Effects, WriteRecords
from ..results import GroupDescription, GroupMembership, ListedGroup
from . import records
from .assignors import ASSIGNORS
from .reconcile import reconcile
from .regex import InvalidRegex, compile_regex, matches
from .state import (Assignment, ConsumerGroup, ConsumerGroupState, ConsumerMember, MemberState,
                    TopicImage, copy_assignment)

E = ErrorCode
NONE = int(E.NONE)
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

# group config keys (GROUP resources, KIP-848) this machine reads
SESSION_TIMEOUT_KEY = "consumer.session.timeout.ms"
HEARTBEAT_INTERVAL_KEY = "consumer.heartbeat.interval.ms"


@dataclass(frozen=True)
class ConsumerGroupConfig:
    """Kafka's group.consumer.* broker settings (same defaults)."""
    session_timeout_ms: int = 45_000
    min_session_timeout_ms: int = 45_000
    max_session_timeout_ms: int = 60_000
    heartbeat_interval_ms: int = 5_000
    min_heartbeat_interval_ms: int = 5_000
    max_heartbeat_interval_ms: int = 15_000
    assignors: tuple[str, ...] = ("uniform", "range")
    max_size: int = 2**31 - 1
    # group.consumer.migration.policy: disabled, upgrade, downgrade or
    # bidirectional (Kafka 4's default), see migration.py
    migration_policy: str = "bidirectional"

    @classmethod
    def from_broker_config(cls, cfg: Any) -> ConsumerGroupConfig:
        kw: dict[str, Any] = {}
        for f in ("session_timeout_ms", "min_session_timeout_ms", "max_session_timeout_ms",
                  "heartbeat_interval_ms", "min_heartbeat_interval_ms",
                  "max_heartbeat_interval_ms", "max_size"):
            value = getattr(cfg, "group_consumer_" + f, None)
            if value is not None:
                kw[f] = int(value)
        policy = getattr(cfg, "group_consumer_migration_policy", None)
        if isinstance(policy, str) and policy.strip():
            kw["migration_policy"] = policy.strip().lower()
        names = getattr(cfg, "group_consumer_assignors", None)
        if isinstance(names, str) and names.strip():
            kw["assignors"] = tuple(assignor_name(n) for n in names.split(",") if n.strip())
        return cls(**kw)


def assignor_name(name: str) -> str:
    """"uniform", or Kafka's class name for it (...UniformAssignor) -> "uniform"."""
    short = name.strip().rsplit(".", 1)[-1]
    if short.endswith("Assignor"):
        short = short[:-len("Assignor")]
    return short.lower()


@dataclass(frozen=True)
class Heartbeat:
    """A ConsumerGroupHeartbeat's values (None: unchanged since the last one)."""
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: Sequence[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: list[tuple[uuid.UUID, list[int]]] | None = None
    client_id: str = ""
    client_host: str = ""
    version: int = 1


@dataclass(frozen=True)
class HeartbeatResult:
    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: dict[uuid.UUID, list[int]] | None = None


@dataclass(frozen=True)
class MemberView:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    assignment: dict[uuid.UUID, list[int]]
    target: dict[uuid.UUID, list[int]]
    classic: bool = False  # speaks the classic protocol (after an online upgrade)


@dataclass(frozen=True)
class ConsumerGroupView:
    """ConsumerGroupDescribe's answer for one group."""
    group_id: str
    error_code: int
    state: str = "Dead"
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ""
    members: list[MemberView] = field(default_factory=list)
    error_message: str | None = None


def _sorted(a: Assignment) -> dict[uuid.UUID, list[int]]:
    return {t: sorted(ps) for t, ps in a.items() if ps}


def _fail(code: E, message: str | None = None) -> Effects:
    return Effects(answer=HeartbeatResult(int(code), message))


class ConsumerGroupMachine:
    """The rules of consumer groups (group.type "consumer")."""

    group_type = "consumer"

    def __init__(self, config: ConsumerGroupConfig | None = None,
                 group_configs: Callable[[str], Mapping[str, str]] = lambda group_id: {}):
        """group_configs(group id): the group's own settings (GROUP config
        resource), Kafka key -> value, over the broker's."""
        self.config = config or ConsumerGroupConfig()
        self.group_configs = group_configs

    # ------------------------------------------------------------ settings

    def _setting(self, group_id: str, key: str, default: int) -> int:
        value = self.group_configs(group_id).get(key)
        try:
            return int(value) if value is not None else default
        except ValueError:
            return default

    def session_timeout_ms(self, group_id: str) -> int:
        return self._setting(group_id, SESSION_TIMEOUT_KEY, self.config.session_timeout_ms)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        return self._setting(group_id, HEARTBEAT_INTERVAL_KEY, self.config.heartbeat_interval_ms)

    # ------------------------------------------------------------ groups

    def new_group(self, group_id: str) -> ConsumerGroup:
        return ConsumerGroup(group_id)

    def loaded(self, group_id: str, recs: Mapping[bytes, bytes], now_ms: int
               ) -> tuple[ConsumerGroup, Effects]:
        """The group read back from its records; each member gets a fresh
        session (as after a coordinator move in Kafka)."""
        group = records.decode_group(group_id, recs)
        fx = Effects()
        for m in group.members.values():
            self._touch(group, m, fx)
            if m.state is MemberState.UNREVOKED_PARTITIONS:
                fx.set_timer(("revoke", m.member_id), m.rebalance_timeout_ms, m.member_epoch)
        return group, fx

    def _persist(self, group: ConsumerGroup, fx: Effects) -> None:
        entries = records.changes(group)
        if entries:
            fx.ops.append(WriteRecords(group.group_id, entries))

    def _touch(self, group: ConsumerGroup, member: ConsumerMember, fx: Effects) -> None:
        timeout = member.classic.session_timeout_ms if member.classic is not None \
            else self.session_timeout_ms(group.group_id)
        fx.set_timer(("session", member.member_id), timeout, member.member_id)

    # ------------------------------------------------------------ the heartbeat

    def validate(self, hb: Heartbeat) -> Effects | None:
        """INVALID_REQUEST & co. for a malformed heartbeat, before any group is looked at."""
        if hb.version >= 1 and not hb.member_id:
            return _fail(E.INVALID_REQUEST, "MemberId can't be empty.")
        if hb.member_epoch < STATIC_LEAVE_EPOCH:
            return _fail(E.INVALID_REQUEST, "MemberEpoch is invalid.")
        if hb.member_epoch == STATIC_LEAVE_EPOCH and hb.instance_id is None:
            return _fail(E.INVALID_REQUEST, "InstanceId can't be null.")
        if hb.member_epoch == 0:
            if hb.rebalance_timeout_ms == -1:
                return _fail(E.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first "
                             "request.")
            if hb.owned:
                return _fail(E.INVALID_REQUEST, "TopicPartitions must be empty when (re-)"
                             "joining.")
            if hb.subscribed_topic_names is None and hb.subscribed_topic_regex is None:
                return _fail(E.INVALID_REQUEST, "SubscribedTopicNames or SubscribedTopicRegex "
                             "must be set in first request.")
        elif hb.member_epoch > 0 and not hb.member_id:
            return _fail(E.INVALID_REQUEST, "MemberId can't be empty.")
        if hb.server_assignor is not None and hb.server_assignor not in self.config.assignors:
            return _fail(E.UNSUPPORTED_ASSIGNOR,
                         f"ServerAssignor {hb.server_assignor} is not supported. Supported "
                         f"assignors: {', '.join(self.config.assignors)}.")
        if hb.subscribed_topic_regex:
            try:
                compile_regex(hb.subscribed_topic_regex)
            except InvalidRegex as e:
                return _fail(E.INVALID_REGULAR_EXPRESSION,
                             f"SubscribedTopicRegex `{hb.subscribed_topic_regex}` is not a valid "
                             f"regular expression: {e}.")
        return None

    def heartbeat(self, group: ConsumerGroup, hb: Heartbeat, image: TopicImage,
                  now_ms: int) -> Effects:
        """A member's ConsumerGroupHeartbeat (already validated)."""
        if hb.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(group, hb)
        fx = Effects()
        bump = False
        member: ConsumerMember | None
        if hb.member_epoch == 0:
            member, bump, err = self._join(group, hb, fx)
            if err is not None:
                return err
        else:
            member = group.members.get(hb.member_id)
            if member is None:
                return _fail(E.UNKNOWN_MEMBER_ID, f"Member {hb.member_id} is not a member of "
                             f"group {group.group_id}.")
            if member.member_epoch == STATIC_LEAVE_EPOCH or (
                    hb.instance_id is not None
                    and group.static_members.get(hb.instance_id) != member.member_id):
                return _fail(E.FENCED_INSTANCE_ID, "The static member was replaced.")
            if hb.member_epoch > member.member_epoch or (
                    hb.member_epoch < member.member_epoch
                    and (hb.member_epoch != member.previous_member_epoch
                         or not _subset(hb.owned, member.assigned))):
                return _fail(E.FENCED_MEMBER_EPOCH,
                             f"The consumer group member has a different epoch "
                             f"({hb.member_epoch}) than the one known by the group coordinator "
                             f"({member.member_epoch}). The member must abandon all its "
                             f"partitions and rejoin.")
        bump |= self._update_member(member, hb)
        bump |= self._refresh_topics(group, image)
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self._assign(group, image)
        before_state = member.state
        changed = reconcile(group, member, hb.owned)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if before_state is not MemberState.UNREVOKED_PARTITIONS or changed:
                fx.set_timer(("revoke", member.member_id), member.rebalance_timeout_ms,
                             member.member_epoch)
        elif before_state is MemberState.UNREVOKED_PARTITIONS:
            fx.cancel_timer(("revoke", member.member_id))
        self._touch(group, member, fx)
        self._persist(group, fx)
        full = changed or hb.member_epoch == 0 or hb.owned is not None
        fx.answer = HeartbeatResult(
            NONE, None, member.member_id, member.member_epoch,
            self.heartbeat_interval_ms(group.group_id),
            _sorted(member.assigned) if full else None)
        return fx

    def _join(self, group: ConsumerGroup, hb: Heartbeat, fx: Effects
              ) -> tuple[ConsumerMember, bool, Effects | None]:
        """A member (re)joining with epoch 0: (the member, epoch to bump, refusal)."""
        if hb.instance_id is not None:
            current_id = group.static_members.get(hb.instance_id)
            current = group.members.get(current_id) if current_id else None
            if current is not None and current.member_id != hb.member_id:
                if current.member_epoch != STATIC_LEAVE_EPOCH:
                    return current, False, _fail(
                        E.UNRELEASED_INSTANCE_ID,
                        f"Static member {current_id} with instance id {hb.instance_id} is "
                        f"present in the consumer group.")
                return self._replace_static(group, current, hb, fx), False, None
        member_id = hb.member_id or str(uuid.uuid4())
        if member_id in group.members:
            # it lost its place (fenced) and starts over: what it held is free
            self._drop(group, member_id, fx)
        elif len(group.members) >= self.config.max_size:
            return ConsumerMember(member_id), False, _fail(
                E.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of "
                f"{self.config.max_size} members.")
        member = ConsumerMember(member_id, hb.instance_id, hb.rack_id, hb.client_id,
                                hb.client_host, hb.rebalance_timeout_ms)
        group.add(member)
        return member, True, None

    def _replace_static(self, group: ConsumerGroup, old: ConsumerMember, hb: Heartbeat,
                        fx: Effects) -> ConsumerMember:
        """A static member back under a new member id: it takes over the
        departed one's assignment and epoch; nothing is rebalanced."""
        new = ConsumerMember(hb.member_id or str(uuid.uuid4()), hb.instance_id, hb.rack_id,
                             hb.client_id, hb.client_host, hb.rebalance_timeout_ms)
        new.subscribed_topic_names = list(old.subscribed_topic_names)
        new.subscribed_topic_regex = old.subscribed_topic_regex
        new.server_assignor = old.server_assignor
        target = group.target.get(old.member_id)
        fx.cancel_timer(("session", old.member_id))
        fx.cancel_timer(("revoke", old.member_id))
        group.remove(old.member_id)
        # what the departed one held is the new one's; reconciliation brings
        # it to the target's epoch
        new.assigned = copy_assignment(old.assigned)
        group.add(new)
        group.hold(new, new.assigned)
        if target is not None:
            group.target[new.member_id] = target
        return new

    def _update_member(self, member: ConsumerMember, hb: Heartbeat) -> bool:
        """Take the heartbeat's changed fields; True when the subscription changed."""
        changed = False
        if hb.rack_id is not None:
            member.rack_id = hb.rack_id
        if hb.rebalance_timeout_ms > 0:
            member.rebalance_timeout_ms = hb.rebalance_timeout_ms
        if hb.client_id:
            member.client_id = hb.client_id
        if hb.client_host:
            member.client_host = hb.client_host
        if hb.subscribed_topic_names is not None and \
                sorted(hb.subscribed_topic_names) != sorted(member.subscribed_topic_names):
            member.subscribed_topic_names = sorted(set(hb.subscribed_topic_names))
            changed = True
        if hb.subscribed_topic_regex is not None:
            regex = hb.subscribed_topic_regex or None
            if regex != member.subscribed_topic_regex:
                member.subscribed_topic_regex = regex
                changed = True
        if hb.server_assignor is not None and hb.server_assignor != member.server_assignor:
            member.server_assignor = hb.server_assignor
            changed = True
        return changed

    def _refresh_topics(self, group: ConsumerGroup, image: TopicImage) -> bool:
        """The subscribed topics as the metadata has them now; True when a
        topic came, went or grew since the target assignment was computed."""
        names: set[str] = set()
        for m in group.members.values():
            names |= group.subscribed_topics(m, image, matches)
        now = {n: image[n] for n in names}
        if now != group.subscription_image:
            group.subscription_image = dict(now)
            return True
        return False

    def assignor_name(self, group: ConsumerGroup) -> str:
        """The members' most named server assignor (ties: the configured
        order), else the broker's first."""
        named = Counter(m.server_assignor for m in group.members.values()
                        if m.server_assignor in self.config.assignors)
        if not named:
            return self.config.assignors[0]
        top = max(named.values())
        return next(a for a in self.config.assignors if named.get(a) == top)

    def _assign(self, group: ConsumerGroup, image: TopicImage) -> None:
        subscriptions = {}
        for m in group.members.values():
            names = group.subscribed_topics(m, group.subscription_image, matches)
            subscriptions[m.member_id] = {group.subscription_image[n][0] for n in names}
        partitions = {tid: count for tid, count in group.subscription_image.values()}
        assign = ASSIGNORS[self.assignor_name(group)]
        group.target = assign(subscriptions, partitions, group.target)
        group.assignment_epoch = group.group_epoch

    # ------------------------------------------------------------ leaving and fencing

    def _leave(self, group: ConsumerGroup, hb: Heartbeat) -> Effects:
        fx = Effects()
        member = group.members.get(hb.member_id)
        if member is None and hb.instance_id is not None:
            member = group.members.get(group.static_members.get(hb.instance_id, ""))
        if member is None:
            return _fail(E.UNKNOWN_MEMBER_ID, f"Member {hb.member_id} is not a member of "
                         f"group {group.group_id}.")
        if hb.instance_id is not None and member.member_id != hb.member_id:
            return _fail(E.FENCED_INSTANCE_ID, "The static member was replaced.")
        if hb.member_epoch == STATIC_LEAVE_EPOCH:
            # a static member away for a while: it keeps its place (and its
            # partitions) until its session expires
            if member.member_epoch != STATIC_LEAVE_EPOCH:
                member.previous_member_epoch = member.member_epoch
            member.member_epoch = STATIC_LEAVE_EPOCH
            self._touch(group, member, fx)
        else:
            self._drop(group, member.member_id, fx)
            group.group_epoch += 1
        self._persist(group, fx)
        fx.answer = HeartbeatResult(NONE, None, hb.member_id, hb.member_epoch,
                                    self.heartbeat_interval_ms(group.group_id))
        return fx

    def _drop(self, group: ConsumerGroup, member_id: str, fx: Effects) -> None:
        group.remove(member_id)
        fx.cancel_timer(("session", member_id))
        fx.cancel_timer(("revoke", member_id))

    def timer_fired(self, group: ConsumerGroup, key: Hashable, payload: Any,
                    now_ms: int) -> Effects:
        fx = Effects()
        if not isinstance(key, tuple):
            return fx
        kind, member_id = key
        member = group.members.get(member_id)
        if member is None:
            return fx
        if kind == "revoke" and (member.state is not MemberState.UNREVOKED_PARTITIONS
                                 or member.member_epoch != payload):
            return fx
        # the session expired, or the partitions were not given up in time: fenced
        self._drop(group, member_id, fx)
        group.group_epoch += 1
        self._persist(group, fx)
        return fx

    # ------------------------------------------------------------ offsets and admin

    def commit_error(self, group: ConsumerGroup, generation_id: int, member_id: str,
                     group_instance_id: str | None, transactional: bool = False) -> int:
        """Kafka's ConsumerGroup.validateOffsetCommit: outside group management
        (epoch < 0) only while the group is empty; a member commits with its
        epoch (else STALE_MEMBER_EPOCH). As Kafka 4.3 (KIP-1251), a commit
        made with the epoch just before the member's current one is taken:
        the bump may still be on its way to the member, and a partition only
        moves once the member said it gave it up, so it still holds what it
        commits."""
        if generation_id < 0 and not group.members:
            return NONE
        if transactional and generation_id < 0 and not member_id:
            return NONE
        member = group.members.get(member_id)
        if member is None:
            return int(E.UNKNOWN_MEMBER_ID)
        if generation_id != member.member_epoch and not (
                0 < generation_id == member.previous_member_epoch):
            return _epoch_mismatch(member)
        return NONE

    def fetch_error(self, group: ConsumerGroup, member_id: str | None, member_epoch: int) -> int:
        """Kafka's ConsumerGroup.validateOffsetFetch: a request without a member
        (null id, epoch < 0: an admin client, a classic or older consumer) may
        read; a member must be known and name its current epoch."""
        if member_id is None and member_epoch < 0:
            return NONE
        member = group.members.get(member_id or "")
        if member is None:
            return int(E.UNKNOWN_MEMBER_ID)
        if member_epoch != member.member_epoch:
            return _epoch_mismatch(member)
        return NONE

    def offsets_committed(self, group: ConsumerGroup, member_id: str) -> Effects:
        return Effects()

    def offsets_deletable(self, group: ConsumerGroup, partitions: Sequence[tuple[str, int]]
                          ) -> tuple[int, dict[tuple[str, int], int]]:
        """A partition of a topic a member subscribes to keeps its offset."""
        if not group.members:
            return NONE, {}
        subscribed = set(group.subscription_image)
        return NONE, {tp: int(E.GROUP_SUBSCRIBED_TO_TOPIC) for tp in partitions
                      if tp[0] in subscribed}

    def expiry(self, group: ConsumerGroup) -> tuple[int | None, Collection[str] | None] | None:
        if group.members:
            return None
        return None, None

    def forgettable(self, group: ConsumerGroup) -> bool:
        return not group.members and not group.offsets and not group.pending_txn_offsets

    def deletable(self, group: ConsumerGroup) -> int:
        return int(E.NON_EMPTY_GROUP) if group.members else NONE

    def delete(self, group: ConsumerGroup, now_ms: int) -> Effects:
        fx = Effects()
        group.dead = True
        self._persist(group, fx)
        return fx

    def describe(self, group: ConsumerGroup) -> GroupDescription:
        """DescribeGroups is the classic groups' API: Kafka answers that this
        is not one (GROUP_ID_NOT_FOUND, as for a group it does not know)."""
        return GroupDescription(group.group_id, int(E.GROUP_ID_NOT_FOUND),
                                str(ConsumerGroupState.DEAD), "", "")

    def listed(self, group: ConsumerGroup) -> ListedGroup:
        return ListedGroup(group.group_id, "consumer", str(group.state), self.group_type)

    def membership(self, group: ConsumerGroup) -> GroupMembership | None:
        return None

    def view(self, group: ConsumerGroup) -> ConsumerGroupView:
        return ConsumerGroupView(
            group.group_id, NONE, str(group.state), group.group_epoch, group.assignment_epoch,
            self.assignor_name(group),
            [MemberView(m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id,
                        m.client_host, list(m.subscribed_topic_names), m.subscribed_topic_regex,
                        _sorted(m.assigned), _sorted(group.target.get(m.member_id, {})),
                        m.classic is not None)
             for m in group.members.values()])


def _subset(owned: list[tuple[uuid.UUID, list[int]]] | None, assigned: Assignment) -> bool:
    if owned is None:
        return True
    return all(p in assigned.get(t, ()) for t, ps in owned for p in ps)


def _epoch_mismatch(member: ConsumerMember) -> int:
    """Kafka's validateMemberEpoch: a member still speaking the classic protocol
    (an online migration) is told ILLEGAL_GENERATION, what its client rejoins
    on; a consumer-protocol member STALE_MEMBER_EPOCH."""
    return int(E.ILLEGAL_GENERATION if member.classic is not None else E.STALE_MEMBER_EPOCH)
