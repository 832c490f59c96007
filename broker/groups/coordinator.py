"""The classic consumer-group coordinator: Kafka's group membership and offset semantics.

Wire-independent: handlers decode requests, call one method with plain Python
values and copy the result (see results.py) into the response. Runs on ONE
asyncio event loop (the one `start()` runs on); every timer and future lives
there, so no locks are needed. Handlers running on other loops/threads go
through `CoordinatorThread` (runner.py).

Behaviour follows Apache Kafka's classic GroupCoordinator:
- JoinGroup waits until every known member has rejoined or the rebalance timeout
  (the largest member rebalance timeout) passes; members that did not rejoin
  are removed. A new empty group waits group.initial.rebalance.delay.ms,
  extended (up to the rebalance timeout) while new members keep arriving.
- The leader gets every member's metadata for the selected protocol and sends
  the assignments in SyncGroup; followers wait for it.
- Session timeouts evict silent members; members waiting on a join or sync
  response do not expire (they are waiting on us).
- Static members (group.instance.id, KIP-345) rejoining with a new member id
  take over the old member's place without a rebalance when the group is
  Stable; the old id is fenced (FENCED_INSTANCE_ID).
- Offsets are written to the OffsetStore before they become visible.
"""
from __future__ import annotations

import asyncio
import collections
import inspect
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from protocol.errors import ErrorCode, ProtocolError

from ..coordinator_errors import coordinator_write_error
from ..network.log_limit import RateLimitedLog
from .consumer_protocol import assignment_partitions, subscription_topics
from .group import Group, GroupState, Member
from .log_format import GroupRecord, MemberRecord, OffsetAndMetadata
from .results import (
    FetchedOffset,
    GroupDescription,
    JoinResult,
    LeaveMemberResult,
    LeaveResult,
    ListedGroup,
    MemberDescription,
    OffsetDeleteResult,
    OffsetFetchResult,
    PartitionError,
    SyncResult,
)
from .store import OFFSETS_TOPIC, OffsetStore

log = logging.getLogger(__name__)
_store_log = RateLimitedLog(log)  # expected write failures (_log_store_failure)

E = ErrorCode
NONE = int(E.NONE)


@dataclass(frozen=True)
class GroupCoordinatorConfig:
    """Kafka's group.* / offset* broker settings (same defaults)."""

    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3000
    group_max_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000
    # how long a member that joined but never completed a rebalance may wait
    # (Kafka's fixed GroupCoordinator.NewMemberJoinTimeoutMs)
    new_member_join_timeout_ms: int = 300_000

    @classmethod
    def from_broker_config(cls, cfg) -> "GroupCoordinatorConfig":
        """Pick the group settings off a BrokerConfig (attribute = Kafka key, dots -> _)."""
        names = {
            "group_min_session_timeout_ms": "group_min_session_timeout_ms",
            "group_max_session_timeout_ms": "group_max_session_timeout_ms",
            "group_initial_rebalance_delay_ms": "group_initial_rebalance_delay_ms",
            "group_max_size": "group_max_size",
            "offset_metadata_max_bytes": "offset_metadata_max_bytes",
        }
        kw = {f: getattr(cfg, a) for f, a in names.items() if hasattr(cfg, a)}
        if hasattr(cfg, "offsets_retention_minutes"):
            kw["offsets_retention_ms"] = int(cfg.offsets_retention_minutes) * 60_000
        return cls(**kw)


@dataclass(frozen=True)
class GroupMembership:
    """A consumer group's members now: member id -> (subscribed topics,
    {topic: [partitions assigned]}); empty when the group has none."""
    group_id: str
    members: dict[str, tuple[tuple[str, ...], dict[str, list[int]]]]


def _every_partition(offsets, code: int) -> list[PartitionError]:
    """One answer for every partition of an OffsetCommit / TxnOffsetCommit."""
    return [PartitionError(t, p, code) for t, p, *_ in offsets]


def _store_error(exc: BaseException, *, too_large: int,
                 timed_out: int | None = None,
                 otherwise: int = int(E.COORDINATOR_NOT_AVAILABLE)) -> int:
    """The answer for a write of the offsets partition that failed (the
    write's ``error_code``), as Kafka's GroupMetadataManager maps it: a moved
    partition or a short ISR as every coordinator answers them (a client
    finds the new coordinator on NOT_COORDINATOR), a record too large as
    ``too_large``, a timed-out wait as ``timed_out`` where the request has its
    own answer for it."""
    code = getattr(exc, "error_code", None)
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE):
        return too_large
    if code == E.REQUEST_TIMED_OUT and timed_out is not None:
        return timed_out
    answer = coordinator_write_error(code) if code is not None else None
    return int(answer if answer is not None else otherwise)


def _log_store_failure(what: str, group_id: str, exc: BaseException) -> None:
    """A write the partition layer refused (it names why) or the disk failed
    (full, read-only) is expected: one line, at most one per kind per interval
    however many groups commit; any other failure is a bug and keeps its
    traceback."""
    code = getattr(exc, "error_code", None)
    if code is not None or isinstance(exc, OSError):
        kind = f"{what}:{code if code is not None else getattr(exc, 'errno', None)}"
        _store_log.warning(kind, "group %s: %s failed: %s", group_id, what, exc)
    else:
        log.error("group %s: %s failed", group_id, what, exc_info=exc)


def _txn_store_error(exc: BaseException) -> int:
    """TxnOffsetCommit's answer: as a commit's, except that a zombie producer
    hears it is fenced and anything unforeseen is UNKNOWN_SERVER_ERROR."""
    if getattr(exc, "error_code", None) in (E.INVALID_PRODUCER_EPOCH, E.PRODUCER_FENCED):
        return int(E.INVALID_PRODUCER_EPOCH)
    return _store_error(exc, too_large=int(E.INVALID_COMMIT_OFFSET_SIZE),
                        otherwise=int(E.UNKNOWN_SERVER_ERROR))


def _wall_ms() -> int:
    return int(time.time() * 1000)


class GroupCoordinator:
    """Classic-protocol group coordinator for all groups of this broker.

    Lifecycle: `await start()` (loads the store; until then every call answers
    COORDINATOR_LOAD_IN_PROGRESS), then the API methods, then `await shutdown()`
    (waiting joins/syncs are answered NOT_COORDINATOR).
    """

    def __init__(self, store: OffsetStore, config: GroupCoordinatorConfig | None = None,
                 *, time_ms=_wall_ms, owns: Callable[[str], bool] = lambda group_id: True,
                 on_membership: Callable[[GroupMembership], None] | None = None):
        """owns(group_id): whether this broker coordinates the group now (in a
        cluster, whether it leads the group's __consumer_offsets partition).
        on_membership: told each consumer group's members and assignment when
        a rebalance completes, and that it has none when it empties or goes
        (ZooKeeper mode publishes them in the ZooKeeper-era registry)."""
        self.store = store
        self._owns = owns
        self._on_membership = on_membership
        self.config = config or GroupCoordinatorConfig()
        self._time_ms = time_ms
        self.groups: dict[str, Group] = {}
        self._loaded = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task] = set()
        # group id -> futures of offset commits accepted but still being stored.
        # OffsetFetch waits for them: a rebalance can complete while a commit that
        # was valid for the previous generation is being written, and the new owner
        # of a partition must see that commit when it asks where to start.
        self._storing_commits: dict[str, set[asyncio.Future]] = {}
        self._refusal_log = RateLimitedLog(log)
        # Offsets-topic partitions being (re)loaded after this broker took them
        # over, with how many loads are still to run (leadership can go and come
        # back before the first has run): their groups answer
        # COORDINATOR_LOAD_IN_PROGRESS until the last one has.
        self._loading: collections.Counter[int] = collections.Counter()
        self._loading_lock = threading.Lock()  # loading() comes from other threads
        # producer id -> ids of groups holding its pending transactional offsets,
        # so a marker settles them without a walk over every group
        self._txn_groups: dict[int, set[str]] = {}

    # ================================================================ lifecycle

    async def start(self) -> None:
        """Load offsets and groups from the store; loaded members get fresh session timers."""
        self._loop = asyncio.get_running_loop()
        self._add_loaded(*await self.store.load())
        self._loaded = True

    def _add_loaded(self, offsets, records, pending_txn=None) -> None:
        for gid, rec in records.items():
            self.groups[gid] = self._group_from_record(rec)
        for gid, by_tp in offsets.items():
            group = self.groups.get(gid)
            if group is None:
                # offsets without group metadata: a simple consumer's group
                group = self.groups[gid] = Group(gid)
            group.offsets.update(by_tp)
        for gid, by_producer in (pending_txn or {}).items():
            group = self.groups.get(gid)
            if group is None:
                group = self.groups[gid] = Group(gid)
            for pid, by_tp in by_producer.items():
                group.pending_txn_offsets.setdefault(pid, {}).update(by_tp)
                self._txn_groups.setdefault(pid, set()).add(gid)

    def loading(self, partition: int) -> None:
        """About to take over an offsets-topic partition (callable from any
        thread), a load_partition to follow: its groups wait for it, not for
        stale state."""
        with self._loading_lock:
            self._loading[partition] += 1

    async def load_partition(self, partition: int) -> None:
        """This broker now leads the offsets-topic partition: its groups are read
        again from the log (another broker coordinated them until now, and this
        broker's copy of the partition holds what that one wrote)."""
        try:
            self._forget_partition(partition)
            self._add_loaded(*await self.store.load(partition))
            log.info("loaded the groups of %s-%d", OFFSETS_TOPIC, partition)
        finally:
            with self._loading_lock:
                if self._loading[partition] > 1:
                    self._loading[partition] -= 1
                else:
                    del self._loading[partition]

    def unload_partition(self, partition: int) -> None:
        """Another broker now leads the offsets-topic partition: its groups go
        (members waiting here are told NOT_COORDINATOR and find the new one).
        A load still to run (leadership came back meanwhile) reads them again."""
        self._forget_partition(partition)

    def _forget_partition(self, partition: int) -> None:
        for gid in [g for g in self.groups if self.store.partition_for(g) == partition]:
            group = self.groups.pop(gid)
            self._cancel_group_timers(group)
            for m in group.members.values():
                self._resolve_join(m, JoinResult(int(E.NOT_COORDINATOR), member_id=m.member_id))
                self._resolve_sync(m, SyncResult(int(E.NOT_COORDINATOR)))

    async def shutdown(self) -> None:
        self._loaded = False
        for group in self.groups.values():
            self._cancel_group_timers(group)
            for m in group.members.values():
                self._resolve_join(m, JoinResult(int(E.NOT_COORDINATOR), member_id=m.member_id))
                self._resolve_sync(m, SyncResult(int(E.NOT_COORDINATOR)))
        # let pending metadata writes (an emptied group's record) reach the store
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _group_from_record(self, rec: GroupRecord) -> Group:
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
                self._schedule_heartbeat(g, m)
            if rec.leader in g.members:
                g.leader_id = rec.leader
            g.state = GroupState.STABLE
            g.subscribed_topics = g.compute_subscribed_topics()
        return g

    # ================================================================ helpers

    def _check(self, group_id: str | None, allow_empty: bool) -> int:
        if not self._loaded:
            return int(E.COORDINATOR_LOAD_IN_PROGRESS)
        if group_id is None or (not group_id and not allow_empty):
            return int(E.INVALID_GROUP_ID)
        if not self._owns(group_id):
            return int(E.NOT_COORDINATOR)
        if self._loading and self.store.partition_for(group_id) in self._loading:
            return int(E.COORDINATOR_LOAD_IN_PROGRESS)
        return NONE

    def _tell_membership(self, group: Group) -> None:
        if self._on_membership is None or not group.is_consumer_group():
            return
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
        try:
            self._on_membership(GroupMembership(group.group_id, members))
        except Exception:  # noqa: BLE001 - an observer must not break a rebalance
            log.exception("group %s: membership observer failed", group.group_id)

    def _spawn(self, coro) -> None:
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _live(self, group: Group) -> bool:
        """False for a timer armed for a group object that was deleted since."""
        return self.groups.get(group.group_id) is group

    @staticmethod
    def _await_join(member: Member) -> asyncio.Future:
        if member.join_future is None:
            member.join_future = asyncio.get_running_loop().create_future()
        return member.join_future

    @staticmethod
    def _await_sync(member: Member) -> asyncio.Future:
        if member.sync_future is None:
            member.sync_future = asyncio.get_running_loop().create_future()
        return member.sync_future

    @staticmethod
    def _resolve_join(member: Member, result: JoinResult) -> None:
        fut, member.join_future = member.join_future, None
        if fut is not None and not fut.done():
            fut.set_result(result)

    @staticmethod
    def _resolve_sync(member: Member, result: SyncResult) -> None:
        fut, member.sync_future = member.sync_future, None
        if fut is not None and not fut.done():
            fut.set_result(result)

    def _cancel_group_timers(self, group: Group) -> None:
        for h in (group.join_timer, group.sync_timer):
            if h is not None:
                h.cancel()
        group.join_timer = group.sync_timer = None
        for h in group.pending_members.values():
            if h is not None:
                h.cancel()
        for m in group.members.values():
            m.cancel_timer()

    def _group_record(self, group: Group, assignment: dict[str, bytes] | None = None) -> GroupRecord:
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
                           self._time_ms(), members)

    def _join_response(self, group: Group, member_id: str, *, for_leader: bool,
                       skip_assignment: bool = False) -> JoinResult:
        members = []
        if for_leader:
            members = [(m.member_id, m.group_instance_id, m.metadata(group.protocol_name))
                       for m in group.members.values()]
        return JoinResult(NONE, group.generation_id, group.protocol_type, group.protocol_name,
                          group.leader_id or "", skip_assignment, member_id, members)

    # ================================================================ heartbeat timers

    def _schedule_heartbeat(self, group: Group, member: Member) -> None:
        """(Re)arm the member's expiry: session timeout, or the join timeout while new."""
        member.cancel_timer()
        timeout = (self.config.new_member_join_timeout_ms if member.is_new
                   else member.session_timeout_ms)
        member.heartbeat_timer = self._loop.call_later(
            timeout / 1000, self._on_heartbeat_expired, group, member)

    def _on_heartbeat_expired(self, group: Group, member: Member) -> None:
        member.heartbeat_timer = None
        if not self._live(group) or group.members.get(member.member_id) is not member:
            return
        if not member.is_new and (member.awaiting_join or member.awaiting_sync):
            # waiting on the coordinator counts as alive
            self._schedule_heartbeat(group, member)
            return
        log.info("group %s: member %s session expired", group.group_id, member.member_id)
        self._remove_member_and_update_group(group, member)

    def _on_pending_member_expired(self, group: Group, member_id: str) -> None:
        if self._live(group) and member_id in group.pending_members:
            group.pending_members[member_id] = None
            self._remove_pending_member(group, member_id)

    def _remove_pending_member(self, group: Group, member_id: str) -> None:
        h = group.pending_members.pop(member_id, None)
        if h is not None:
            h.cancel()
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _remove_member_and_update_group(self, group: Group, member: Member) -> None:
        self._resolve_join(member, JoinResult(int(E.UNKNOWN_MEMBER_ID), member_id=member.member_id))
        self._resolve_sync(member, SyncResult(int(E.UNKNOWN_MEMBER_ID)))
        member.cancel_timer()
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)

    # ================================================================ rebalance machinery

    def _maybe_prepare_rebalance(self, group: Group) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: Group) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            # members waiting on SyncGroup must rejoin instead
            self._reset_and_propagate_assignment_error(group, int(E.REBALANCE_IN_PROGRESS))
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None
        was_empty = group.is_(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, self._time_ms())
        if group.join_timer is not None:
            group.join_timer.cancel()
        rt = group.rebalance_timeout_ms()
        if was_empty:
            delay = self.config.group_initial_rebalance_delay_ms
            self._schedule_initial_join(group, min(delay, rt), max(rt - delay, 0))
        else:
            group.join_is_initial = False
            group.join_timer = self._loop.call_later(rt / 1000, self._on_join_timeout, group)
            self._try_complete_join(group)

    def _schedule_initial_join(self, group: Group, delay_ms: int, remaining_ms: int) -> None:
        group.join_is_initial = True
        group.join_timer = self._loop.call_later(
            delay_ms / 1000, self._on_initial_join_expired, group, remaining_ms)

    def _on_initial_join_expired(self, group: Group, remaining_ms: int) -> None:
        group.join_timer = None
        if not self._live(group) or not group.is_(GroupState.PREPARING_REBALANCE):
            return
        if group.new_member_added and remaining_ms > 0:
            # members are still arriving: wait another delay, within the rebalance timeout
            group.new_member_added = False
            delay = self.config.group_initial_rebalance_delay_ms
            self._schedule_initial_join(group, min(delay, remaining_ms),
                                        max(remaining_ms - delay, 0))
        else:
            self._complete_join(group)

    def _on_join_timeout(self, group: Group) -> None:
        group.join_timer = None
        if self._live(group):
            self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if (group.is_(GroupState.PREPARING_REBALANCE) and not group.join_is_initial
                and group.all_joined()):
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        for m in [m for m in group.members.values() if not m.awaiting_join]:
            log.info("group %s: removing member %s, it did not rejoin in time",
                     group.group_id, m.member_id)
            m.cancel_timer()
            group.remove(m.member_id)
        group.init_next_generation(self._time_ms())
        log.info("group %s: generation %d, %d member(s), protocol %s", group.group_id,
                 group.generation_id, len(group.members), group.protocol_name)
        if group.is_(GroupState.EMPTY):
            self._spawn(self._store_group_quietly(group, self._group_record(group)))
            self._tell_membership(group)
            return
        leader_view = self._join_response(group, "", for_leader=True).members
        for m in group.members.values():
            is_leader = group.is_leader(m.member_id)
            self._resolve_join(m, JoinResult(
                NONE, group.generation_id, group.protocol_type, group.protocol_name,
                group.leader_id or "", False, m.member_id, leader_view if is_leader else []))
            m.is_new = False
            self._schedule_heartbeat(group, m)
        # every member must sync within the rebalance timeout, else it is dropped
        group.sync_timer = self._loop.call_later(
            group.rebalance_timeout_ms() / 1000, self._on_sync_timeout, group,
            group.generation_id)

    async def _store_group_quietly(self, group: Group, record: GroupRecord) -> None:
        try:
            await self.store.store_group(record)
        except Exception as e:
            _log_store_failure("storing group metadata", group.group_id, e)

    def _on_sync_timeout(self, group: Group, generation: int) -> None:
        group.sync_timer = None
        if not self._live(group) or group.generation_id != generation:
            return
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and group.pending_sync:
            log.info("group %s: members %s did not sync in time", group.group_id,
                     sorted(group.pending_sync))
            for mid in list(group.pending_sync):
                m = group.members.get(mid)
                if m is not None:
                    m.cancel_timer()
                    group.remove(mid)
            group.pending_sync.clear()
            self._prepare_rebalance(group)

    def _remove_pending_sync(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync and group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _propagate_assignment(self, group: Group, error: int) -> None:
        for m in group.members.values():
            if m.awaiting_sync:
                self._resolve_sync(m, SyncResult(error, group.protocol_type,
                                                 group.protocol_name, m.assignment))
                self._schedule_heartbeat(group, m)

    def _reset_and_propagate_assignment_error(self, group: Group, error: int) -> None:
        for m in group.members.values():
            m.assignment = b""
        self._propagate_assignment(group, error)

    # ================================================================ JoinGroup

    async def join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                         client_id: str, client_host: str, session_timeout_ms: int,
                         rebalance_timeout_ms: int, protocol_type: str,
                         protocols: Sequence[tuple[str, bytes]],
                         require_known_member_id: bool = True,
                         reason: str | None = None) -> JoinResult:
        """JoinGroup. JoinGroup v0 has no rebalance timeout: pass the session timeout.
        require_known_member_id: True for JoinGroup v4+ (an empty member id first
        gets MEMBER_ID_REQUIRED with the id to rejoin with)."""
        member_id = member_id or ""
        err = self._check(group_id, allow_empty=False)
        if err:
            return JoinResult(err, member_id=member_id)
        if not (self.config.group_min_session_timeout_ms <= session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            return JoinResult(int(E.INVALID_SESSION_TIMEOUT), member_id=member_id)
        protocols = [(n, bytes(m or b"")) for n, m in protocols]
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(int(E.UNKNOWN_MEMBER_ID), member_id=member_id)
            group = self.groups[group_id] = Group(group_id)
        if reason:
            log.debug("group %s: join from %r: %s", group_id, member_id, reason)
        args = (group_instance_id, client_id, client_host, session_timeout_ms,
                rebalance_timeout_ms, protocol_type, protocols)
        if not member_id:
            outcome = self._join_unknown(group, require_known_member_id, *args)
        else:
            outcome = self._join_known(group, member_id, *args)
        if inspect.isawaitable(outcome) and not isinstance(outcome, asyncio.Future):
            outcome = await outcome
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._try_complete_join(group)
        if isinstance(outcome, asyncio.Future):
            return await asyncio.shield(outcome)
        return outcome

    def _accepts_new_member(self, group: Group) -> bool:
        if group.is_(GroupState.PREPARING_REBALANCE):
            size = sum(1 for m in group.members.values() if m.awaiting_join)
        else:
            size = len(group.members)
        return size < self.config.group_max_size

    def _join_unknown(self, group, require_known, instance_id, client_id, client_host,
                      session_ms, rebalance_ms, protocol_type, protocols):
        if group.is_(GroupState.DEAD):
            return JoinResult(int(E.COORDINATOR_NOT_AVAILABLE))
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return JoinResult(int(E.INCONSISTENT_GROUP_PROTOCOL))
        new_id = f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            old_id = group.static_member_id(instance_id)
            if old_id is not None:
                return self._rejoin_static_member(group, old_id, new_id, instance_id,
                                                  session_ms, rebalance_ms, protocols)
        if not self._accepts_new_member(group):
            return JoinResult(int(E.GROUP_MAX_SIZE_REACHED))
        if instance_id is None and require_known:
            # the client must come back with this id; if it never does, forget it
            group.pending_members[new_id] = self._loop.call_later(
                session_ms / 1000, self._on_pending_member_expired, group, new_id)
            return JoinResult(int(E.MEMBER_ID_REQUIRED), member_id=new_id)
        return self._add_member_and_rebalance(group, new_id, instance_id, client_id, client_host,
                                              session_ms, rebalance_ms, protocol_type, protocols)

    def _join_known(self, group, member_id, instance_id, client_id, client_host,
                    session_ms, rebalance_ms, protocol_type, protocols):
        if group.is_(GroupState.DEAD):
            return JoinResult(int(E.COORDINATOR_NOT_AVAILABLE), member_id=member_id)
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return JoinResult(int(E.INCONSISTENT_GROUP_PROTOCOL), member_id=member_id)
        if group.is_pending_member(member_id):
            # second JoinGroup (v4+) with the id we handed out
            if instance_id is not None and group.static_member_id(instance_id) is not None:
                return JoinResult(int(E.FENCED_INSTANCE_ID), member_id=member_id)
            if not self._accepts_new_member(group):
                self._remove_pending_member(group, member_id)
                return JoinResult(int(E.GROUP_MAX_SIZE_REACHED), member_id=member_id)
            h = group.pending_members.pop(member_id)
            if h is not None:
                h.cancel()
            return self._add_member_and_rebalance(group, member_id, instance_id, client_id,
                                                  client_host, session_ms, rebalance_ms,
                                                  protocol_type, protocols)
        if group.is_static_member_fenced(instance_id, member_id):
            return JoinResult(int(E.FENCED_INSTANCE_ID), member_id=member_id)
        if not group.has(member_id) or (instance_id is not None
                                        and group.static_member_id(instance_id) is None):
            return JoinResult(int(E.UNKNOWN_MEMBER_ID), member_id=member_id)
        member = group.get(member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(group, member, protocols, rebalance_ms,
                                                     session_ms)
        if state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # it lost our JoinGroup response: send the current generation again
                return self._join_response(group, member_id,
                                           for_leader=group.is_leader(member_id))
            return self._update_member_and_rebalance(group, member, protocols, rebalance_ms,
                                                     session_ms)
        if state is GroupState.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # a leader's rejoin means it wants a new assignment (e.g. new topics)
                return self._update_member_and_rebalance(group, member, protocols,
                                                         rebalance_ms, session_ms)
            self._schedule_heartbeat(group, member)
            return self._join_response(group, member_id, for_leader=False)
        return JoinResult(int(E.UNKNOWN_MEMBER_ID), member_id=member_id)

    def _add_member_and_rebalance(self, group, member_id, instance_id, client_id, client_host,
                                  session_ms, rebalance_ms, protocol_type, protocols):
        member = Member(member_id, instance_id, client_id, client_host, rebalance_ms,
                        session_ms, protocol_type, protocols)
        member.is_new = True
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        fut = self._await_join(member)
        # a new member cannot heartbeat yet; the join timeout cleans up clients
        # that gave up on their JoinGroup
        self._schedule_heartbeat(group, member)
        self._maybe_prepare_rebalance(group)
        return fut

    def _update_member_and_rebalance(self, group, member, protocols, rebalance_ms, session_ms):
        group.update_member(member, protocols, rebalance_ms, session_ms)
        fut = self._await_join(member)
        self._maybe_prepare_rebalance(group)
        return fut

    async def _rejoin_static_member(self, group: Group, old_id: str, new_id: str,
                                    instance_id: str, session_ms: int, rebalance_ms: int,
                                    protocols) -> JoinResult | asyncio.Future:
        """A known group.instance.id came back with an empty member id (a restart)."""
        member = group.get(old_id)
        # whoever still waits under the old id is a zombie now
        self._resolve_join(member, JoinResult(int(E.FENCED_INSTANCE_ID), member_id=old_id))
        self._resolve_sync(member, SyncResult(int(E.FENCED_INSTANCE_ID)))
        old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.replace_static_member(instance_id, old_id, new_id)
        self._schedule_heartbeat(group, member)
        group.update_member(member, protocols, rebalance_ms, session_ms)
        fut = self._await_join(member)
        log.info("group %s: static member %s rejoined as %s", group.group_id, instance_id, new_id)
        if group.is_(GroupState.STABLE):
            if group.select_protocol() != group.protocol_name:
                self._maybe_prepare_rebalance(group)
                return fut
            generation = group.generation_id
            try:
                await self.store.store_group(self._group_record(group))
                error = NONE
            except Exception as e:
                _log_store_failure("storing group metadata", group.group_id, e)
                error = _store_error(e, too_large=int(E.UNKNOWN_SERVER_ERROR),
                                     timed_out=int(E.REBALANCE_IN_PROGRESS))
            if not (group.is_(GroupState.STABLE) and group.generation_id == generation
                    and member.join_future is fut and group.members.get(new_id) is member):
                return fut  # a rebalance started meanwhile; it answers this join
            if error:
                group.replace_static_member(instance_id, new_id, old_id)
                group.update_member(member, *old)
                self._resolve_join(member, JoinResult(error, member_id=new_id))
                return fut
            # no rebalance: the member gets the current generation and, via
            # SyncGroup, its old assignment; a rejoining leader must not reassign
            is_leader = group.is_leader(new_id)
            self._resolve_join(member, self._join_response(
                group, new_id, for_leader=is_leader, skip_assignment=is_leader))
            return fut
        if group.is_(GroupState.COMPLETING_REBALANCE):
            # the leader may be assigning for the old id: assign again
            self._prepare_rebalance(group)
        return fut  # PreparingRebalance: the rebalance answers

    # ================================================================ SyncGroup

    async def sync_group(self, group_id: str, generation_id: int, member_id: str,
                         group_instance_id: str | None, protocol_type: str | None,
                         protocol_name: str | None,
                         assignments: Sequence[tuple[str, bytes]]) -> SyncResult:
        """SyncGroup. protocol_type/protocol_name: None when the request version lacks them."""
        err = self._check(group_id, allow_empty=False)
        if err:
            return SyncResult(err)
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(int(E.UNKNOWN_MEMBER_ID))
        if group.is_(GroupState.DEAD):
            return SyncResult(int(E.COORDINATOR_NOT_AVAILABLE))
        if group.is_static_member_fenced(group_instance_id, member_id):
            return SyncResult(int(E.FENCED_INSTANCE_ID))
        if not group.has(member_id):
            return SyncResult(int(E.UNKNOWN_MEMBER_ID))
        if generation_id != group.generation_id:
            return SyncResult(int(E.ILLEGAL_GENERATION))
        if protocol_type is not None and protocol_type != group.protocol_type:
            return SyncResult(int(E.INCONSISTENT_GROUP_PROTOCOL))
        if protocol_name is not None and protocol_name != group.protocol_name:
            return SyncResult(int(E.INCONSISTENT_GROUP_PROTOCOL))
        member = group.get(member_id)
        if group.is_(GroupState.EMPTY):
            return SyncResult(int(E.UNKNOWN_MEMBER_ID))
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(int(E.REBALANCE_IN_PROGRESS))
        if group.is_(GroupState.STABLE):
            self._remove_pending_sync(group, member_id)
            self._schedule_heartbeat(group, member)
            return SyncResult(NONE, group.protocol_type, group.protocol_name, member.assignment)
        # CompletingRebalance: wait for the leader's assignment
        fut = self._await_sync(member)
        self._remove_pending_sync(group, member_id)
        if group.is_leader(member_id):
            assignment = {mid: b"" for mid in group.members}
            for mid, data in assignments:
                if mid in assignment:
                    assignment[mid] = bytes(data or b"")
            generation = group.generation_id
            try:
                await self.store.store_group(self._group_record(group, assignment))
                error = NONE
            except Exception as e:
                _log_store_failure("storing group metadata", group.group_id, e)
                error = _store_error(e, too_large=int(E.UNKNOWN_SERVER_ERROR),
                                     timed_out=int(E.REBALANCE_IN_PROGRESS))
            # the group may have moved on while we were writing
            if group.is_(GroupState.COMPLETING_REBALANCE) and group.generation_id == generation:
                if error:
                    self._reset_and_propagate_assignment_error(group, error)
                    self._maybe_prepare_rebalance(group)
                else:
                    for m in group.members.values():
                        m.assignment = assignment.get(m.member_id, b"")
                    self._propagate_assignment(group, NONE)
                    self._tell_membership(group)
                    group.transition_to(GroupState.STABLE, self._time_ms())
        return await asyncio.shield(fut)

    # ================================================================ Heartbeat

    async def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                        group_instance_id: str | None = None) -> int:
        err = self._check(group_id, allow_empty=False)
        if err:
            return err
        group = self.groups.get(group_id)
        if group is None:
            return int(E.UNKNOWN_MEMBER_ID)
        if group.is_(GroupState.DEAD):
            return int(E.COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(group_instance_id, member_id):
            return int(E.FENCED_INSTANCE_ID)
        if not group.has(member_id):
            return int(E.UNKNOWN_MEMBER_ID)
        if generation_id != group.generation_id:
            return int(E.ILLEGAL_GENERATION)
        if group.is_(GroupState.EMPTY):
            return int(E.UNKNOWN_MEMBER_ID)
        self._schedule_heartbeat(group, group.get(member_id))
        if group.is_(GroupState.PREPARING_REBALANCE):
            return int(E.REBALANCE_IN_PROGRESS)
        return NONE

    # ================================================================ LeaveGroup

    async def leave_group(self, group_id: str,
                          members: Iterable[tuple]) -> LeaveResult:
        """LeaveGroup; members: (member_id, group_instance_id[, reason]) each.

        An empty member_id with a group_instance_id removes that static member
        (the admin path of kafka-consumer-groups --delete-members style tools).
        """
        members = [(t[0] or "", t[1] if len(t) > 1 else None) for t in members]
        err = self._check(group_id, allow_empty=False)
        if err:
            return LeaveResult(err)
        group = self.groups.get(group_id)
        if group is None:
            return LeaveResult(NONE, [LeaveMemberResult(mid, iid, int(E.UNKNOWN_MEMBER_ID))
                                      for mid, iid in members])
        if group.is_(GroupState.DEAD):
            return LeaveResult(int(E.COORDINATOR_NOT_AVAILABLE))
        results = []
        for mid, iid in members:
            if not mid:
                current = group.static_member_id(iid)
                if current is None:
                    code = int(E.UNKNOWN_MEMBER_ID)
                else:
                    self._remove_member_and_update_group(group, group.get(current))
                    code = NONE
            elif group.is_pending_member(mid):
                self._remove_pending_member(group, mid)
                code = NONE
            elif group.is_static_member_fenced(iid, mid):
                code = int(E.FENCED_INSTANCE_ID)
            elif group.has(mid):
                self._remove_member_and_update_group(group, group.get(mid))
                code = NONE
            else:
                code = int(E.UNKNOWN_MEMBER_ID)
            results.append(LeaveMemberResult(mid, iid, code))
        return LeaveResult(NONE, results)

    # ================================================================ admin

    def _describe(self, group: Group) -> GroupDescription:
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

    async def describe_groups(self, group_ids: Iterable[str],
                              unknown_is_error: bool = True) -> list[GroupDescription]:
        """DescribeGroups. An unknown group is state Dead with GROUP_ID_NOT_FOUND
        (DescribeGroups v6+, KIP-1043); pass unknown_is_error=False for v0-v5,
        which answer NONE for it."""
        out = []
        for gid in group_ids:
            err = self._check(gid, allow_empty=True)
            group = self.groups.get(gid) if not err else None
            if err:
                out.append(GroupDescription(gid, err, "", "", ""))
            elif group is None or group.is_(GroupState.DEAD):
                code = int(E.GROUP_ID_NOT_FOUND) if unknown_is_error else NONE
                out.append(GroupDescription(gid, code, str(GroupState.DEAD), "", ""))
            else:
                out.append(self._describe(group))
        return out

    async def list_groups(self, states_filter: Iterable[str] | None = None,
                          types_filter: Iterable[str] | None = None
                          ) -> tuple[int, list[ListedGroup]]:
        """ListGroups -> (error_code, groups). Filters match case-insensitively;
        empty/None = no filter. All groups here are "classic"."""
        if not self._loaded:
            return int(E.COORDINATOR_LOAD_IN_PROGRESS), []
        states = {s.lower() for s in states_filter or ()}
        types = {t.lower() for t in types_filter or ()}
        if types and "classic" not in types:
            return NONE, []
        return NONE, [ListedGroup(g.group_id, g.protocol_type or "", str(g.state))
                      for g in self.groups.values()
                      if not g.is_(GroupState.DEAD) and self._owns(g.group_id)
                      and (not states or str(g.state).lower() in states)]

    def committed_offsets(self) -> dict[str, dict[tuple[str, int], int]]:
        """Read-only copy of the committed offsets of the groups this broker
        coordinates: {group id: {(topic, partition): offset}}. For metrics,
        which scrape from another thread: it only copies (list() of a dict
        view is one step under the GIL), never awaits or changes anything."""
        return {gid: {tp: om.offset for tp, om in list(g.offsets.items())}
                for gid, g in list(self.groups.items())
                if not g.is_(GroupState.DEAD) and self._owns(gid)}

    async def delete_groups(self, group_ids: Iterable[str]) -> list[tuple[str, int]]:
        """DeleteGroups -> [(group_id, error_code)]; deletes committed offsets too."""
        out = []
        for gid in group_ids:
            err = self._check(gid, allow_empty=True)
            group = self.groups.get(gid) if not err else None
            if err:
                out.append((gid, err))
            elif group is None or group.is_(GroupState.DEAD):
                out.append((gid, int(E.GROUP_ID_NOT_FOUND)))
            elif not group.is_(GroupState.EMPTY):
                out.append((gid, int(E.NON_EMPTY_GROUP)))
            else:
                out.append((gid, await self._remove_group(group)))
        return out

    async def _remove_group(self, group: Group) -> int:
        """Empty -> Dead, forgotten in memory first (so nothing joins meanwhile), then in the store."""
        partitions = list(group.offsets)
        self._cancel_group_timers(group)
        group.transition_to(GroupState.DEAD, self._time_ms())
        del self.groups[group.group_id]
        self._tell_membership(group)
        try:
            await self.store.delete_group(group.group_id, partitions)
        except Exception:
            log.exception("group %s: deleting from the store failed", group.group_id)
            return int(E.COORDINATOR_NOT_AVAILABLE)
        return NONE

    # ================================================================ offsets

    async def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                             group_instance_id: str | None,
                             offsets: Sequence[tuple[str, int, int, int, str | None]],
                             retention_ms: int | None = None) -> list[PartitionError]:
        """OffsetCommit: offsets are (topic, partition, offset, leader_epoch, metadata).

        generation_id -1 with an empty member id is a commit from outside group
        management (a "simple" consumer, or admin tools): allowed only while the
        group has no members. retention_ms: OffsetCommit v2-v4 retention_time_ms
        (-1/None = broker default).
        """
        member_id = member_id or ""
        offsets = list(offsets)

        err = self._check(group_id, allow_empty=True)
        if err:
            return _every_partition(offsets, err)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # a member of a generation we never had (or a group we deleted)
                return self._refuse_commit(group_id, offsets, int(E.ILLEGAL_GENERATION),
                                           generation_id, member_id, "the group does not exist")
            # outside group management: a "simple" group that only keeps offsets
            group = self.groups[group_id] = Group(group_id)
        err = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if err:
            return self._refuse_commit(group_id, offsets, err, generation_id, member_id,
                                       f"the group is {group.state}, generation "
                                       f"{group.generation_id}")
        if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            # PreparingRebalance still commits: the next heartbeat tells it to rejoin
            self._schedule_heartbeat(group, group.get(member_id))

        now = self._time_ms()
        expire = now + retention_ms if retention_ms is not None and retention_ms >= 0 else None
        codes, entries = self._offset_entries(offsets, now, expire)
        if entries:
            storing = asyncio.get_running_loop().create_future()
            self._storing_commits.setdefault(group_id, set()).add(storing)
            try:
                await self.store.store_offsets(group_id, entries)
            except Exception as e:
                _log_store_failure("storing offsets", group_id, e)
                code = _store_error(e, too_large=int(E.INVALID_COMMIT_OFFSET_SIZE))
                for tp in entries:
                    codes[tp] = code
            else:
                live = self.groups.get(group_id)
                if live is not None:
                    live.offsets.update(entries)
                    # A transactional commit of these partitions written before
                    # this one is older: its transaction's COMMIT must not
                    # bring it back (Kafka compares their log positions).
                    for by_tp in live.pending_txn_offsets.values():
                        for tp in entries:
                            by_tp.pop(tp, None)
            finally:
                pending = self._storing_commits.get(group_id)
                if pending is not None:
                    pending.discard(storing)
                    if not pending:
                        del self._storing_commits[group_id]
                storing.set_result(None)
        return [PartitionError(t, p, codes[(t, p)]) for t, p, *_ in offsets]

    def _offset_entries(self, offsets, now: int, expire: int | None
                        ) -> tuple[dict[tuple[str, int], int],
                                   dict[tuple[str, int], OffsetAndMetadata]]:
        """(error per partition, the offsets to store): metadata longer than
        offset.metadata.max.bytes is OFFSET_METADATA_TOO_LARGE, the rest kept."""
        codes: dict[tuple[str, int], int] = {}
        entries: dict[tuple[str, int], OffsetAndMetadata] = {}
        for t, p, offset, epoch, metadata in offsets:
            metadata = metadata or ""
            if len(metadata) > self.config.offset_metadata_max_bytes:
                codes[(t, p)] = int(E.OFFSET_METADATA_TOO_LARGE)
            else:
                entries[(t, p)] = OffsetAndMetadata(offset, -1 if epoch is None else epoch,
                                                    metadata, now, expire)
                codes[(t, p)] = NONE
        return codes, entries

    async def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                 generation_id: int, member_id: str,
                                 group_instance_id: str | None,
                                 offsets: Sequence[tuple[str, int, int, int, str | None]]
                                 ) -> list[PartitionError]:
        """TxnOffsetCommit: offsets written in the producer's transaction, kept
        pending until its marker (complete_txn_offsets). The member fields
        (v3+, KIP-447) are checked when given; generation -1 with no member
        is a producer outside group management, always allowed (as Kafka)."""
        member_id = member_id or ""
        offsets = list(offsets)

        err = self._check(group_id, allow_empty=True)
        if err:
            return _every_partition(offsets, err)
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id)
        err = self._validate_offset_commit(group, generation_id, member_id, group_instance_id,
                                           transactional=True)
        if err:
            return self._refuse_commit(group_id, offsets, err, generation_id, member_id,
                                       f"transactional, the group is {group.state}, "
                                       f"generation {group.generation_id}")
        codes, entries = self._offset_entries(offsets, self._time_ms(), None)
        if entries:
            try:
                await self.store.store_offsets(group_id, entries,
                                                            (producer_id, producer_epoch))
            except Exception as e:  # noqa: BLE001 - answered with its error code
                code = _txn_store_error(e)
                _log_store_failure("storing transactional offsets", group_id, e)
                for tp in entries:
                    codes[tp] = code
            else:
                live = self.groups.get(group_id)
                if live is not None:
                    live.pending_txn_offsets.setdefault(producer_id, {}).update(entries)
                    self._txn_groups.setdefault(producer_id, set()).add(group_id)
        return [PartitionError(t, p, codes[(t, p)]) for t, p, *_ in offsets]

    async def complete_txn_offsets(self, partition: int, producer_id: int,
                                   committed: bool) -> None:
        """The producer's transaction marker landed in offsets partition
        ``partition``: its pending offsets there take effect, or are dropped."""
        gids = self._txn_groups.get(producer_id, set())
        for gid in [g for g in gids if self.store.partition_for(g) == partition]:
            gids.discard(gid)
            group = self.groups.get(gid)
            if group is None:
                continue
            settled = group.pending_txn_offsets.pop(producer_id, None)
            if settled and committed:
                group.offsets.update(settled)
            if settled is not None:
                await self._drop_if_empty(group)
        if not gids:
            self._txn_groups.pop(producer_id, None)

    @staticmethod
    def _validate_offset_commit(group: Group, generation_id: int, member_id: str,
                                group_instance_id: str | None,
                                transactional: bool = False) -> int:
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

    def _refuse_commit(self, group_id: str, offsets: list, code: int, generation_id: int,
                       member_id: str, why: str) -> list[PartitionError]:
        """Every partition of a refused commit answers ``code``; the refusal
        is logged (at most a line per error code every interval), since
        a client that ignores the answer otherwise loses its offsets silently."""
        self._refusal_log.info(
            f"commit-refused:{code}",
            "group %s: offset commit (generation %d, member %r) refused with %s: %s",
            group_id, generation_id, member_id, ErrorCode(code).name, why)
        return _every_partition(offsets, code)

    async def fetch_offsets(self, group_id: str,
                            partitions: Iterable[tuple[str, int]] | None,
                            require_stable: bool = False) -> OffsetFetchResult:
        """OffsetFetch; partitions None = every committed offset of the group.
        Nothing committed -> offset -1, leader_epoch -1, metadata "", error NONE.
        ``require_stable`` (v7+, KIP-447): a partition with a transactional
        commit still open answers UNSTABLE_OFFSET_COMMIT, which clients retry."""
        err = self._check(group_id, allow_empty=True)
        if err:
            return OffsetFetchResult(err, [])
        pending = self._storing_commits.get(group_id)
        if pending:
            await asyncio.wait(list(pending))
            # A commit waits for the ISR: the partition may have moved meanwhile
            # (its groups dropped here), and "nothing committed" would be a lie.
            err = self._check(group_id, allow_empty=True)
            if err:
                return OffsetFetchResult(err, [])
        group = self.groups.get(group_id)
        committed = group.offsets if group is not None and not group.is_(GroupState.DEAD) else {}
        if partitions is None:
            partitions = sorted(committed)
        unstable: set[tuple[str, int]] = set()
        if require_stable and group is not None:
            for by_tp in group.pending_txn_offsets.values():
                unstable.update(by_tp)
        out = []
        for t, p in partitions:
            om = committed.get((t, p))
            if (t, p) in unstable:
                out.append(FetchedOffset(t, p, -1, -1, "", int(E.UNSTABLE_OFFSET_COMMIT)))
            elif om is None:
                out.append(FetchedOffset(t, p, -1, -1, "", NONE))
            else:
                out.append(FetchedOffset(t, p, om.offset, om.leader_epoch, om.metadata, NONE))
        return OffsetFetchResult(NONE, out)

    async def delete_offsets(self, group_id: str,
                             partitions: Iterable[tuple[str, int]]) -> OffsetDeleteResult:
        """OffsetDelete (KIP-496). Refuses topics a live consumer group subscribes to."""
        partitions = list(partitions)
        err = self._check(group_id, allow_empty=False)
        if err:
            return OffsetDeleteResult(err)
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return OffsetDeleteResult(int(E.GROUP_ID_NOT_FOUND))
        codes: dict[tuple[str, int], int] = {}
        if group.is_(GroupState.EMPTY):
            eligible = partitions
        elif group.is_consumer_group():
            eligible = []
            for t, p in partitions:
                if group.is_subscribed_to(t):
                    codes[(t, p)] = int(E.GROUP_SUBSCRIBED_TO_TOPIC)
                else:
                    eligible.append((t, p))
        else:
            return OffsetDeleteResult(int(E.NON_EMPTY_GROUP))
        present = [tp for tp in dict.fromkeys(eligible) if tp in group.offsets]
        for tp in eligible:
            codes[tp] = NONE
        if present:
            try:
                await self.store.delete_offsets(group_id, present)
            except Exception:
                log.exception("group %s: deleting offsets failed", group_id)
                for tp in eligible:
                    codes[tp] = int(E.COORDINATOR_NOT_AVAILABLE)
                present = []
        for tp in present:
            group.offsets.pop(tp, None)
        if present:
            await self._drop_if_empty(group)
        return OffsetDeleteResult(NONE, [PartitionError(t, p, codes[(t, p)])
                                         for t, p in partitions])

    async def _drop_if_empty(self, group: Group) -> None:
        """An Empty group without offsets has nothing left to remember: Kafka drops it."""
        if self._live(group) and group.is_(GroupState.EMPTY) and not group.offsets \
                and not group.pending_members and not group.pending_txn_offsets:
            await self._remove_group(group)

    async def expire_offsets(self, now_ms: int | None = None) -> int:
        """Drop offsets past retention (call every offsets.retention.check.interval.ms).

        Kafka's rules (KIP-211): an explicit expire timestamp wins; an Empty
        group's offsets expire retention after it became Empty; a Stable
        consumer group's offsets of topics it no longer subscribes to expire
        retention after their commit; a group never managed by the coordinator
        (no protocol type) expires by commit time. Returns how many went.
        """
        if not self._loaded:
            return 0
        now = self._time_ms() if now_ms is None else now_ms
        retention = self.config.offsets_retention_ms
        removed = 0
        for group in list(self.groups.values()):
            if group.protocol_type is None and group.is_(GroupState.EMPTY):
                base = None  # commit timestamp
                topic_ok = None
            elif group.is_(GroupState.EMPTY):
                base = group.current_state_timestamp if group.current_state_timestamp >= 0 else None
                topic_ok = None
            elif (group.is_consumer_group() and group.is_(GroupState.STABLE)
                  and group.subscribed_topics is not None):
                base = None
                topic_ok = group.subscribed_topics
            else:
                continue
            expired = []
            for (t, p), om in group.offsets.items():
                if topic_ok is not None and t in topic_ok:
                    continue
                if om.expire_timestamp is not None:
                    gone = now >= om.expire_timestamp
                else:
                    gone = now - (om.commit_timestamp if base is None else base) >= retention
                if gone:
                    expired.append((t, p))
            if expired:
                try:
                    await self.store.delete_offsets(group.group_id, expired)
                except Exception:
                    log.exception("group %s: expiring offsets failed", group.group_id)
                    continue
                for tp in expired:
                    group.offsets.pop(tp, None)
                removed += len(expired)
            await self._drop_if_empty(group)
        return removed
