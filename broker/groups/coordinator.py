"""The group coordinator's runtime: every group of this broker, its store,
its timers, the waiting JoinGroup/SyncGroup requests, the membership mirror.

Wire-independent: handlers decode requests, call one method with plain Python
values and copy the result (see results.py) into the response. Runs on ONE
asyncio event loop (the one `start()` runs on); every timer and future lives
there, so no locks are needed. Handlers running on other loops/threads go
through `CoordinatorBridge` (bridge.py).

The rules are not here. A group's membership is decided by the state machine
of its type (classic/machine.py for JoinGroup/SyncGroup groups; KIP-848
consumer groups and KIP-932 share groups are to be machines beside it), fed
each request, timer and load with the time, answering with Effects
(effects.py) that this runtime carries out in order: answer or park the
request, set/cancel timers on the injected Clock (clock.py), write records to
the OffsetStore (store.py), tell the membership observer. Committed offsets
follow offsets.py's rules for every group type; who may commit is the
machine's. Offsets are written to the store before they become visible.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass

from samsa.protocol.errors import ErrorCode

from ..coordinator_errors import coordinator_write_error
from ..network.log_limit import RateLimitedLog
from . import offsets as offset_rules
from .classic import ClassicGroupMachine, Group, GroupState, Member
from .clock import Cancellable, Clock, LoopClock, wall_ms
from .effects import (
    AwaitedWrite,
    CancelTimer,
    Effects,
    GroupMachine,
    MembershipChanged,
    Respond,
    SetTimer,
    Wait,
    WriteRecord,
)
from .log_format import GroupRecord
from .results import (
    FetchedOffset,
    GroupDescription,
    GroupMembership,
    JoinResult,
    LeaveMemberResult,
    LeaveResult,
    ListedGroup,
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

__all__ = ["GroupCoordinator", "GroupCoordinatorConfig", "GroupMembership"]


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
    def from_broker_config(cls, cfg) -> GroupCoordinatorConfig:
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



class GroupCoordinator:
    """The group coordinator for all groups of this broker.

    Lifecycle: `await start()` (loads the store; until then every call answers
    COORDINATOR_LOAD_IN_PROGRESS), then the API methods, then `await shutdown()`
    (waiting joins/syncs are answered NOT_COORDINATOR).
    """

    def __init__(self, store: OffsetStore, config: GroupCoordinatorConfig | None = None,
                 *, time_ms: Callable[[], int] = wall_ms, clock: Clock | None = None,
                 owns: Callable[[str], bool] = lambda group_id: True,
                 on_membership: Callable[[GroupMembership], None] | None = None):
        """owns(group_id): whether this broker coordinates the group now (in a
        cluster, whether it leads the group's __consumer_offsets partition).
        on_membership: told each consumer group's members and assignment when
        a rebalance completes, and that it has none when it empties or goes
        (ZooKeeper mode publishes them in the ZooKeeper-era registry).
        clock: the time and the timers (default: time_ms and the loop start()
        runs on)."""
        self.store = store
        self._owns = owns
        self._on_membership = on_membership
        self.config = config or GroupCoordinatorConfig()
        self._clock = clock
        self._time_ms = clock.now_ms if clock is not None else time_ms
        self.classic = ClassicGroupMachine(self.config)
        # group type -> its state machine (JoinGroup & co. always go to "classic")
        self._machines: dict[str, GroupMachine] = {self.classic.group_type: self.classic}
        self.groups: dict[str, Group] = {}
        self._loaded = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task] = set()
        # group id -> timer key -> the armed timer (effects.SetTimer)
        self._timers: dict[str, dict[Hashable, Cancellable]] = {}
        # (member, "join" | "sync") -> the future its waiting request awaits
        self._waiting: dict[tuple[Member, str], asyncio.Future] = {}
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
        if self._clock is None:
            self._clock = LoopClock(self._loop, self._time_ms)
        self._add_loaded(*await self.store.load())
        self._loaded = True

    def _add_loaded(self, offsets, records, pending_txn=None) -> None:
        for gid, rec in records.items():
            group, fx = self.classic.loaded(rec)
            self.groups[gid] = group
            self._apply_now(group, fx)
        for gid, by_tp in offsets.items():
            # offsets without group metadata: a simple consumer's group
            self._group_for_offsets(gid).offsets.update(by_tp)
        for gid, by_producer in (pending_txn or {}).items():
            group = self._group_for_offsets(gid)
            for pid, by_tp in by_producer.items():
                group.pending_txn_offsets.setdefault(pid, {}).update(by_tp)
                self._txn_groups.setdefault(pid, set()).add(gid)

    def _group_for_offsets(self, group_id: str) -> Group:
        """The group, made (an Empty classic group) when it has only offsets."""
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = self.classic.new_group(group_id)
        return group

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
            self._release(self.groups.pop(gid))

    async def shutdown(self) -> None:
        self._loaded = False
        for group in self.groups.values():
            self._release(group)
        # let pending metadata writes (an emptied group's record) reach the store
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _release(self, group: Group) -> None:
        """This broker stops coordinating the group: its timers stop and its
        waiting members are told NOT_COORDINATOR (they find the new one)."""
        self._cancel_timers(group.group_id)
        for m in group.members.values():
            self._answer(m, "join", JoinResult(int(E.NOT_COORDINATOR), member_id=m.member_id))
            self._answer(m, "sync", SyncResult(int(E.NOT_COORDINATOR)))

    # ================================================================ carrying out effects

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

    def _machine(self, group: Group) -> GroupMachine:
        return self._machines[group.group_type]

    def _live(self, group: Group) -> bool:
        """False for a group object that was deleted or moved away since."""
        return self.groups.get(group.group_id) is group

    def _answer(self, member: Member, kind: str, result) -> None:
        setattr(member, "awaiting_" + kind, False)
        fut = self._waiting.pop((member, kind), None)
        if fut is not None and not fut.done():
            fut.set_result(result)

    def _apply(self, group: Group, fx: Effects) -> asyncio.Future | None:
        """Carry out the effects' ops in order; the future the request waits
        on, if it waits. Timers are only armed for a group still coordinated
        here (a write finishing after its partition moved must not arm any)."""
        request = None
        live = self._live(group)
        for op in fx.ops:
            if isinstance(op, Respond):
                self._answer(op.member, op.kind, op.result)
            elif isinstance(op, Wait):
                fut = self._waiting.get((op.member, op.kind))
                if fut is None:
                    fut = asyncio.get_running_loop().create_future()
                    self._waiting[(op.member, op.kind)] = fut
                if op.request:
                    request = fut
            elif isinstance(op, SetTimer):
                if live:
                    self._set_timer(group, op)
            elif isinstance(op, CancelTimer):
                if live:
                    handle = self._timers.get(group.group_id, {}).pop(op.key, None)
                    if handle is not None:
                        handle.cancel()
            elif isinstance(op, WriteRecord):
                self._spawn(self._store_group_quietly(group, op.record))
            elif isinstance(op, MembershipChanged):
                self._tell_membership(group)
        return request

    def _apply_now(self, group: Group, fx: Effects) -> None:
        """Effects of an event no request waits on (a timer, a load)."""
        self._apply(group, fx)
        if fx.write is not None:
            self._spawn(self._finish_write(group, fx.write))

    async def _finish_write(self, group: Group, write: AwaitedWrite | None) -> None:
        while write is not None:
            error = await self._write_group(group, write.record)
            after = write.then(error, self._time_ms())
            self._apply(group, after)
            write = after.write

    async def _run(self, group: Group, fx: Effects):
        """A request's effects: carried out, its write done, then its answer
        (now, or once the group answers the member)."""
        fut = self._apply(group, fx)
        await self._finish_write(group, fx.write)
        if fx.answer is not None:
            return fx.answer
        assert fut is not None, "a request neither answered nor waiting"
        return await asyncio.shield(fut)

    def _set_timer(self, group: Group, op: SetTimer) -> None:
        timers = self._timers.setdefault(group.group_id, {})
        old = timers.pop(op.key, None)
        if old is not None:
            old.cancel()

        def fire() -> None:
            if timers.get(op.key) is not handle:
                return  # replaced or cancelled meanwhile
            del timers[op.key]
            if self._live(group):
                self._apply_now(group, self._machine(group).timer_fired(
                    group, op.key, op.payload, self._time_ms()))

        assert self._clock is not None, "start() sets the clock before any timer"
        handle = self._clock.call_later(op.delay_ms, fire)
        timers[op.key] = handle

    def _cancel_timers(self, group_id: str) -> None:
        for handle in self._timers.pop(group_id, {}).values():
            handle.cancel()

    def _tell_membership(self, group: Group) -> None:
        if self._on_membership is None:
            return
        membership = self._machine(group).membership(group)
        if membership is None:
            return
        try:
            self._on_membership(membership)
        except Exception:  # noqa: BLE001 - an observer must not break a rebalance
            log.exception("group %s: membership observer failed", group.group_id)

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write_group(self, group: Group, record: GroupRecord) -> int:
        """Write the group's record: NONE, or the error code its request answers."""
        try:
            await self.store.store_group(record)
            return NONE
        except Exception as e:
            _log_store_failure("storing group metadata", group.group_id, e)
            return _store_error(e, too_large=int(E.UNKNOWN_SERVER_ERROR),
                                timed_out=int(E.REBALANCE_IN_PROGRESS))

    async def _store_group_quietly(self, group: Group, record: GroupRecord) -> None:
        try:
            await self.store.store_group(record)
        except Exception as e:
            _log_store_failure("storing group metadata", group.group_id, e)

    # ================================================================ membership requests

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
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(int(E.UNKNOWN_MEMBER_ID), member_id=member_id)
            group = self.groups[group_id] = self.classic.new_group(group_id)
        if reason:
            log.debug("group %s: join from %r: %s", group_id, member_id, reason)
        return await self._run(group, self.classic.join(
            group, member_id, group_instance_id, client_id, client_host, session_timeout_ms,
            rebalance_timeout_ms, protocol_type, protocols, require_known_member_id,
            self._time_ms()))

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
        return await self._run(group, self.classic.sync(
            group, generation_id, member_id, group_instance_id, protocol_type, protocol_name,
            assignments, self._time_ms()))

    async def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                        group_instance_id: str | None = None) -> int:
        err = self._check(group_id, allow_empty=False)
        if err:
            return err
        group = self.groups.get(group_id)
        if group is None:
            return int(E.UNKNOWN_MEMBER_ID)
        return await self._run(group, self.classic.heartbeat(
            group, generation_id, member_id, group_instance_id, self._time_ms()))

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
        return await self._run(group, self.classic.leave(group, members, self._time_ms()))

    # ================================================================ admin

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
                out.append(self._machine(group).describe(group))
        return out

    async def list_groups(self, states_filter: Iterable[str] | None = None,
                          types_filter: Iterable[str] | None = None
                          ) -> tuple[int, list[ListedGroup]]:
        """ListGroups -> (error_code, groups). Filters match case-insensitively;
        empty/None = no filter."""
        if not self._loaded:
            return int(E.COORDINATOR_LOAD_IN_PROGRESS), []
        states = {s.lower() for s in states_filter or ()}
        types = {t.lower() for t in types_filter or ()}
        return NONE, [self._machine(g).listed(g) for g in self.groups.values()
                      if not g.is_(GroupState.DEAD) and self._owns(g.group_id)
                      and (not types or g.group_type in types)
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
            elif err := self._machine(group).deletable(group):
                out.append((gid, err))
            else:
                out.append((gid, await self._remove_group(group)))
        return out

    async def _remove_group(self, group: Group) -> int:
        """Empty -> Dead, forgotten in memory first (so nothing joins meanwhile), then in the store."""
        partitions = list(group.offsets)
        self._cancel_timers(group.group_id)
        fx = self._machine(group).delete(group, self._time_ms())
        del self.groups[group.group_id]
        self._apply(group, fx)
        try:
            await self.store.delete_group(group.group_id, partitions)
        except Exception:
            log.exception("group %s: deleting from the store failed", group.group_id)
            return int(E.COORDINATOR_NOT_AVAILABLE)
        return NONE

    async def _drop_if_empty(self, group: Group) -> None:
        """A group with nothing left to remember goes, as in Kafka."""
        if self._live(group) and self._machine(group).forgettable(group):
            await self._remove_group(group)

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
            return offset_rules.every_partition(offsets, err)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # a member of a generation we never had (or a group we deleted)
                return self._refuse_commit(group_id, offsets, int(E.ILLEGAL_GENERATION),
                                           generation_id, member_id, "the group does not exist")
            # outside group management: a "simple" group that only keeps offsets
            group = self._group_for_offsets(group_id)
        machine = self._machine(group)
        err = machine.commit_error(group, generation_id, member_id, group_instance_id)
        if err:
            return self._refuse_commit(group_id, offsets, err, generation_id, member_id,
                                       f"the group is {group.state}, generation "
                                       f"{group.generation_id}")
        if member_id in group.members:
            self._apply(group, machine.offsets_committed(group, member_id))

        now = self._time_ms()
        codes, entries = offset_rules.offset_entries(
            offsets, now, offset_rules.expire_at(now, retention_ms),
            self.config.offset_metadata_max_bytes)
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
            return offset_rules.every_partition(offsets, err)
        group = self._group_for_offsets(group_id)
        err = self._machine(group).commit_error(group, generation_id, member_id,
                                                group_instance_id, transactional=True)
        if err:
            return self._refuse_commit(group_id, offsets, err, generation_id, member_id,
                                       f"transactional, the group is {group.state}, "
                                       f"generation {group.generation_id}")
        codes, entries = offset_rules.offset_entries(offsets, self._time_ms(), None,
                                                     self.config.offset_metadata_max_bytes)
        if entries:
            try:
                await self.store.store_offsets(group_id, entries, (producer_id, producer_epoch))
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

    def _refuse_commit(self, group_id: str, offsets: list, code: int, generation_id: int,
                       member_id: str, why: str) -> list[PartitionError]:
        """Every partition of a refused commit answers ``code``; the refusal
        is logged (at most a line per error code every interval), since
        a client that ignores the answer otherwise loses its offsets silently."""
        self._refusal_log.info(
            f"commit-refused:{code}",
            "group %s: offset commit (generation %d, member %r) refused with %s: %s",
            group_id, generation_id, member_id, ErrorCode(code).name, why)
        return offset_rules.every_partition(offsets, code)

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
        err, codes = self._machine(group).offsets_deletable(group, partitions)
        if err:
            return OffsetDeleteResult(err)
        eligible = [tp for tp in partitions if codes[tp] == NONE]
        present = [tp for tp in dict.fromkeys(eligible) if tp in group.offsets]
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

    async def expire_offsets(self, now_ms: int | None = None) -> int:
        """Drop offsets past retention (call every offsets.retention.check.interval.ms),
        as offsets.expired decides with the base time and kept topics the
        group's machine gives (KIP-211). Returns how many went."""
        if not self._loaded:
            return 0
        now = self._time_ms() if now_ms is None else now_ms
        removed = 0
        for group in list(self.groups.values()):
            condition = self._machine(group).expiry(group)
            if condition is None:
                continue
            expired = offset_rules.expired(group.offsets, now, self.config.offsets_retention_ms,
                                           *condition)
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
