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
import uuid
from collections.abc import Callable, Coroutine, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from samsa.config import BrokerConfig
from samsa.protocol.errors import ErrorCode

from .classic import ClassicGroupMachine, Group, GroupState, Member
from .clock import Cancellable, Clock, LoopClock, wall_ms
from .consumer import (ConsumerGroup, ConsumerGroupMachine, ConsumerMember, Heartbeat,
                       HeartbeatResult)
from .consumer import migration
from .consumer.classic_members import ClassicMembersMachine
from .consumer.machine import LEAVE_EPOCH, ConsumerGroupConfig, ConsumerGroupView
from .consumer.state import TopicImage
from .effects import (AwaitedWrite, CancelTimer, Effects, GroupMachine, MembershipChanged, Respond,
                      SetTimer, Wait, WriteRecord, WriteRecords)
from .log_format import GroupRecord
from .results import (GroupDescription, GroupMembership, JoinResult, LeaveMemberResult, LeaveResult,
                      ListedGroup, OffsetDeleteResult, OffsetFetchResult, PartitionError,
                      SyncResult)
from .kinds import AnyGroup
from .offset_manager import OffsetManager
from .store import (OFFSETS_TOPIC, ConsumerGroupRecords, LoadedGroups, OffsetsByGroup,
                    OffsetStore, PendingTxnOffsets, ShareGroupRecords)
from .write_errors import log_store_failure, store_error

log = logging.getLogger(__name__)

E = ErrorCode
NONE = int(E.NONE)

Answer = TypeVar("Answer")

__all__ = ["GroupCoordinator", "GroupCoordinatorConfig", "GroupMembership"]


class ShareGroupLoads(Protocol):
    """The share groups' runtime (share/service.py), as the loads see it."""

    def loaded(self, groups: Sequence[ShareGroupRecords]) -> None: ...

    def unloaded(self, here: Callable[[str], bool]) -> None:
        """Forget the share groups whose id ``here`` says was in the partition that went."""


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
    def from_broker_config(cls, cfg: BrokerConfig) -> GroupCoordinatorConfig:
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


class GroupCoordinator:
    """The group coordinator for all groups of this broker.

    Lifecycle: `await start()` (loads the store; until then every call answers
    COORDINATOR_LOAD_IN_PROGRESS), then the API methods, then `await shutdown()`
    (waiting joins/syncs are answered NOT_COORDINATOR).
    """

    def __init__(self, store: OffsetStore, config: GroupCoordinatorConfig | None = None,
                 *, time_ms: Callable[[], int] = wall_ms, clock: Clock | None = None,
                 owns: Callable[[str], bool] = lambda group_id: True,
                 on_membership: Callable[[GroupMembership], None] | None = None,
                 consumer_config: ConsumerGroupConfig | None = None,
                 topics: Callable[[], TopicImage] = dict,
                 group_configs: Callable[[str], dict[str, str]] = lambda group_id: {}):
        """owns(group_id): whether this broker coordinates the group now (in a
        cluster, whether it leads the group's __consumer_offsets partition).
        on_membership: told each consumer group's members and assignment when
        a rebalance completes, and that it has none when it empties or goes
        (ZooKeeper mode publishes them in the ZooKeeper-era registry).
        clock: the time and the timers (default: time_ms and the loop start()
        runs on). consumer_config: the group.consumer.* settings of KIP-848
        groups; topics(): the topics now, name -> (id, partition count), that
        their subscriptions resolve against; group_configs(group id): the
        group's own settings (GROUP config resource)."""
        self.store = store
        self._owns = owns
        self._on_membership = on_membership
        self.config = config or GroupCoordinatorConfig()
        self._clock = clock
        self._time_ms = clock.now_ms if clock is not None else time_ms
        self.classic = ClassicGroupMachine(self.config)
        # group type -> its state machine (JoinGroup & co. always go to "classic")
        self.consumer = ConsumerGroupMachine(consumer_config, group_configs)
        # classic members of a consumer group (an online migration)
        self.classic_members = ClassicMembersMachine(self.consumer)
        self._topics = topics
        self._machines: dict[str, GroupMachine] = {self.classic.group_type: self.classic,
                                                   self.consumer.group_type: self.consumer}
        self.groups: dict[str, AnyGroup] = {}
        self._loaded = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # group id -> timer key -> the armed timer (effects.SetTimer)
        self._timers: dict[str, dict[Hashable, Cancellable]] = {}
        # (member, "join" | "sync") -> the future its waiting request awaits
        self._waiting: dict[tuple[Member, str], asyncio.Future[object]] = {}
        # Offsets-topic partitions being (re)loaded after this broker took them
        # over, with how many loads are still to run (leadership can go and come
        # back before the first has run): their groups answer
        # COORDINATOR_LOAD_IN_PROGRESS until the last one has.
        self._loading: collections.Counter[int] = collections.Counter()
        self._loading_lock = threading.Lock()  # loading() comes from other threads
        # committed offsets and their flows (offset_manager.py), through this runtime
        self.offsets = OffsetManager(self, store, self.config)
        # KIP-932 share groups' records: handed to their runtime once attached
        self._share_groups: ShareGroupLoads | None = None
        self._share_waiting: list[ShareGroupRecords] = []

    # ================================================================ lifecycle

    async def start(self) -> None:
        """Load offsets and groups from the store; loaded members get fresh session timers."""
        self._loop = asyncio.get_running_loop()
        if self._clock is None:
            self._clock = LoopClock(self._loop, self._time_ms)
        self._add_loaded(*await self.store.load())
        self._loaded = True

    def _add_loaded(self, offsets: OffsetsByGroup, records: LoadedGroups,
                    pending_txn: PendingTxnOffsets | None = None) -> None:
        shares = [rec for rec in records.values() if isinstance(rec, ShareGroupRecords)]
        if self._share_groups is not None:
            self._share_groups.loaded(shares)
        else:
            self._share_waiting.extend(shares)
        for gid, rec in records.items():
            if isinstance(rec, ShareGroupRecords):
                continue  # the share groups' (attach_share_groups)
            if isinstance(rec, ConsumerGroupRecords):
                consumer, cfx = self.consumer.loaded(gid, rec.records, self._time_ms())
                self.groups[gid] = consumer
                self._apply_now(consumer, cfx)
                continue
            group, fx = self.classic.loaded(rec)
            self.groups[gid] = group
            self._apply_now(group, fx)
        for gid, by_tp in offsets.items():
            # offsets without group metadata: a simple consumer's group
            self.group_for_offsets(gid).offsets.update(by_tp)
        for gid, by_producer in (pending_txn or {}).items():
            for pid, by_tp in by_producer.items():
                self.offsets.add_loaded_pending(self.group_for_offsets(gid), pid, by_tp)

    def group_for_offsets(self, group_id: str) -> AnyGroup:
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

    def attach_share_groups(self, share_groups: ShareGroupLoads) -> None:
        """The share groups' runtime, told from now on of the share groups
        each load reads and of the partitions that go (those read so far
        are handed over now): their records live in the same partitions,
        written by the share-group runtime through this coordinator's store."""
        self._share_groups = share_groups
        waiting, self._share_waiting = self._share_waiting, []
        share_groups.loaded(waiting)

    def _forget_partition(self, partition: int) -> None:
        def here(group_id: str) -> bool:
            return self.store.partition_for(group_id) == partition
        if self._share_groups is not None:
            self._share_groups.unloaded(here)
        else:
            self._share_waiting = [r for r in self._share_waiting if not here(r.group_id)]
        for gid in [g for g in self.groups if self.store.partition_for(g) == partition]:
            self._release(self.groups.pop(gid))

    async def shutdown(self) -> None:
        self._loaded = False
        for group in self.groups.values():
            self._release(group)
        # let pending metadata writes (an emptied group's record) reach the store
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    def _release(self, group: AnyGroup) -> None:
        """This broker stops coordinating the group: its timers stop and its
        waiting members are told NOT_COORDINATOR (they find the new one)."""
        self._cancel_timers(group.group_id)
        if not isinstance(group, Group):
            return
        for m in group.members.values():
            self._answer(m, "join", JoinResult(int(E.NOT_COORDINATOR), member_id=m.member_id))
            self._answer(m, "sync", SyncResult(int(E.NOT_COORDINATOR)))

    # ================================================================ carrying out effects

    def check(self, group_id: str | None, allow_empty: bool) -> int:
        if not self._loaded:
            return int(E.COORDINATOR_LOAD_IN_PROGRESS)
        if group_id is None or (not group_id and not allow_empty):
            return int(E.INVALID_GROUP_ID)
        if not self._owns(group_id):
            return int(E.NOT_COORDINATOR)
        if self._loading and self.store.partition_for(group_id) in self._loading:
            return int(E.COORDINATOR_LOAD_IN_PROGRESS)
        return NONE

    def group_loading(self, group_id: str) -> bool:
        """Whether the group's __consumer_offsets partition is being read
        (callable from any thread): its group, of any type, answers
        COORDINATOR_LOAD_IN_PROGRESS meanwhile, not from what is still to come."""
        if not self._loaded:
            return True
        with self._loading_lock:
            return bool(self._loading) and self.store.partition_for(group_id) in self._loading

    def machine(self, group: AnyGroup) -> GroupMachine:
        return self._machines[group.group_type]

    @property
    def loaded(self) -> bool:
        return self._loaded

    def now_ms(self) -> int:
        return self._time_ms()

    def owns(self, group_id: str) -> bool:
        return self._owns(group_id)

    def expire_member(self, group_id: str, member_id: str | None = None) -> str | None:
        """A member's session ends now, as when its heartbeats stop (the test kit's
        fault injection): its heartbeat timer fires at once. The member expired
        (``member_id``, or the group's first), or None when this coordinator has
        no such group or member."""
        group = self.groups.get(group_id)
        if group is None or not self.owns(group_id):
            return None
        member: Member | ConsumerMember | None
        if member_id:
            member = group.members.get(member_id)
        else:
            first = list(group.members)
            member = group.members[first[0]] if first else None
        if member is None:
            return None
        # a consumer-protocol member's session timer is keyed by its id
        key: Hashable = (("session", member.member_id) if isinstance(group, ConsumerGroup)
                         else ("heartbeat", member))
        handle = self._timers.get(group_id, {}).pop(key, None)
        if handle is not None:
            handle.cancel()
        self._apply_now(group, self.machine(group).timer_fired(group, key, None, self._time_ms()))
        return member.member_id

    def _live(self, group: AnyGroup) -> bool:
        """False for a group object that was deleted or moved away since."""
        return self.groups.get(group.group_id) is group

    def _answer(self, member: Member, kind: str, result: object) -> None:
        setattr(member, "awaiting_" + kind, False)
        fut = self._waiting.pop((member, kind), None)
        if fut is not None and not fut.done():
            fut.set_result(result)

    def apply(self, group: AnyGroup, fx: Effects) -> asyncio.Future[object] | None:
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
            elif isinstance(op, WriteRecords):
                self._spawn(self._store_records_quietly(op))
            elif isinstance(op, MembershipChanged):
                self._tell_membership(group)
        return request

    def _apply_now(self, group: AnyGroup, fx: Effects) -> None:
        """Effects of an event no request waits on (a timer, a load)."""
        self.apply(group, fx)
        if fx.write is not None:
            self._spawn(self._finish_write(group, fx.write))

    async def _finish_write(self, group: AnyGroup, write: AwaitedWrite | None) -> None:
        while write is not None:
            error = await self._write_group(group, write.record)
            after = write.then(error, self._time_ms())
            self.apply(group, after)
            write = after.write

    async def _run(self, group: AnyGroup, fx: Effects, answer_type: type[Answer]) -> Answer:
        """A request's effects: carried out, its write done, then its answer
        (now, or once the group answers the member). ``answer_type``: what the
        request is answered with (effects carry any answer: another is a bug
        in the machine, said here rather than sent to the client)."""
        fut = self.apply(group, fx)
        await self._finish_write(group, fx.write)
        if fx.answer is not None:
            answer = fx.answer
        else:
            assert fut is not None, "a request neither answered nor waiting"
            answer = await asyncio.shield(fut)
        if not isinstance(answer, answer_type):
            raise TypeError(f"group {group.group_id}: answered {answer!r}, not a {answer_type.__name__}")
        return answer

    def _set_timer(self, group: AnyGroup, op: SetTimer) -> None:
        timers = self._timers.setdefault(group.group_id, {})
        old = timers.pop(op.key, None)
        if old is not None:
            old.cancel()

        def fire() -> None:
            if timers.get(op.key) is not handle:
                return  # replaced or cancelled meanwhile
            del timers[op.key]
            if self._live(group):
                self._apply_now(group, self.machine(group).timer_fired(
                    group, op.key, op.payload, self._time_ms()))
                if isinstance(group, ConsumerGroup):
                    self._maybe_downgrade(group)  # a fenced member may have been the last

        assert self._clock is not None, "start() sets the clock before any timer"
        handle = self._clock.call_later(op.delay_ms, fire)
        timers[op.key] = handle

    def _cancel_timers(self, group_id: str) -> None:
        for handle in self._timers.pop(group_id, {}).values():
            handle.cancel()

    def _tell_membership(self, group: AnyGroup) -> None:
        if self._on_membership is None:
            return
        membership = self.machine(group).membership(group)
        if membership is None:
            return
        try:
            self._on_membership(membership)
        except Exception:  # noqa: BLE001 - an observer must not break a rebalance
            log.exception("group %s: membership observer failed", group.group_id)

    def _spawn(self, coro: Coroutine[object, object, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _write_group(self, group: AnyGroup, record: GroupRecord) -> int:
        """Write the group's record: NONE, or the error code its request answers."""
        try:
            await self.store.store_group(record)
            return NONE
        except Exception as e:
            log_store_failure("storing group metadata", group.group_id, e)
            return store_error(e, too_large=int(E.UNKNOWN_SERVER_ERROR),
                                timed_out=int(E.REBALANCE_IN_PROGRESS))

    async def _store_records_quietly(self, op: WriteRecords) -> None:
        try:
            await self.store.store_records(op.group_id, op.entries)
        except Exception as e:
            log_store_failure("storing consumer group records", op.group_id, e)

    async def _store_group_quietly(self, group: AnyGroup, record: GroupRecord) -> None:
        try:
            await self.store.store_group(record)
        except Exception as e:
            log_store_failure("storing group metadata", group.group_id, e)

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
        err = self.check(group_id, allow_empty=False)
        if err:
            return JoinResult(err, member_id=member_id)
        if not (self.config.group_min_session_timeout_ms <= session_timeout_ms
                <= self.config.group_max_session_timeout_ms):
            return JoinResult(int(E.INVALID_SESSION_TIMEOUT), member_id=member_id)
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            if group.members:
                # a classic member in a consumer group: the server assigns
                return await self._run(group, self.classic_members.join(
                    group, member_id, group_instance_id, client_id, client_host,
                    session_timeout_ms, rebalance_timeout_ms, protocol_type, protocols,
                    require_known_member_id, self._topics(), self._time_ms()), JoinResult)
            group = self._convert_to_classic(group)
        if group is None:
            if member_id:
                return JoinResult(int(E.UNKNOWN_MEMBER_ID), member_id=member_id)
            group = self.groups[group_id] = self.classic.new_group(group_id)
        if reason:
            log.debug("group %s: join from %r: %s", group_id, member_id, reason)
        return await self._run(group, self.classic.join(
            group, member_id, group_instance_id, client_id, client_host, session_timeout_ms,
            rebalance_timeout_ms, protocol_type, protocols, require_known_member_id,
            self._time_ms()), JoinResult)

    async def sync_group(self, group_id: str, generation_id: int, member_id: str,
                         group_instance_id: str | None, protocol_type: str | None,
                         protocol_name: str | None,
                         assignments: Sequence[tuple[str, bytes]]) -> SyncResult:
        """SyncGroup. protocol_type/protocol_name: None when the request version lacks them."""
        err = self.check(group_id, allow_empty=False)
        if err:
            return SyncResult(err)
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return await self._run(group, self.classic_members.sync(
                group, generation_id, member_id, group_instance_id, protocol_type,
                protocol_name, self.topic_names()), SyncResult)
        if not isinstance(group, Group):
            return SyncResult(int(E.UNKNOWN_MEMBER_ID))
        return await self._run(group, self.classic.sync(
            group, generation_id, member_id, group_instance_id, protocol_type, protocol_name,
            assignments, self._time_ms()), SyncResult)

    async def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                        group_instance_id: str | None = None) -> int:
        err = self.check(group_id, allow_empty=False)
        if err:
            return err
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup):
            return await self._run(group, self.classic_members.heartbeat(
                group, generation_id, member_id, group_instance_id), int)
        if not isinstance(group, Group):
            return int(E.UNKNOWN_MEMBER_ID)
        return await self._run(group, self.classic.heartbeat(
            group, generation_id, member_id, group_instance_id, self._time_ms()), int)

    async def leave_group(self, group_id: str,
                          members: Iterable[Sequence[str | None]]) -> LeaveResult:
        """LeaveGroup; members: (member_id, group_instance_id[, reason]) each.

        An empty member_id with a group_instance_id removes that static member
        (the admin path of kafka-consumer-groups --delete-members style tools).
        """
        leaving = [(t[0] or "", t[1] if len(t) > 1 else None) for t in members]
        err = self.check(group_id, allow_empty=False)
        if err:
            return LeaveResult(err)
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and group.members:
            return await self._run(group, self.classic_members.leave(group, leaving), LeaveResult)
        if not isinstance(group, Group):
            return LeaveResult(NONE, [LeaveMemberResult(mid, iid, int(E.UNKNOWN_MEMBER_ID))
                                      for mid, iid in leaving])
        return await self._run(group, self.classic.leave(group, leaving, self._time_ms()), LeaveResult)

    # ================================================================ KIP-848 consumer groups

    async def consumer_group_heartbeat(self, group_id: str, hb: Heartbeat) -> HeartbeatResult:
        """ConsumerGroupHeartbeat (API 68)."""
        err = self.check(group_id, allow_empty=False)
        if err:
            return HeartbeatResult(err)
        refused = self.consumer.validate(hb)
        if refused is not None:
            answer: HeartbeatResult = refused.answer
            return answer
        group = self.groups.get(group_id)
        if isinstance(group, Group) and group.members:
            why = migration.upgrade_refusal(group, self.consumer.config.migration_policy,
                                            self.consumer.config.max_size)
            if hb.member_epoch != 0 or why is not None:
                if why is not None:
                    log.info("group %s: cannot upgrade the classic group to a consumer group: "
                             "%s", group_id, why)
                return HeartbeatResult(int(E.GROUP_ID_NOT_FOUND),
                                       f"Group {group_id} is not a consumer group.")
            group = self._convert_to_consumer(group)
        if not isinstance(group, ConsumerGroup):
            # none yet, or an empty classic group (offsets only), which becomes one
            if hb.member_epoch != 0:
                return HeartbeatResult(int(E.UNKNOWN_MEMBER_ID),
                                       f"Consumer group {group_id} not found.")
            old = group
            group = self.consumer.new_group(group_id)
            if old is not None:
                group.offsets = old.offsets
                group.pending_txn_offsets = old.pending_txn_offsets
                self._cancel_timers(group_id)
            self.groups[group_id] = group
        fx = self.consumer.heartbeat(group, hb, self._topics(), self._time_ms())
        answer = await self._run(group, fx, HeartbeatResult)
        if hb.member_epoch == LEAVE_EPOCH:
            self._maybe_downgrade(group)
        return answer

    def _convert_to_consumer(self, classic: Group) -> ConsumerGroup:
        """Online upgrade (migration.py): the classic group's waiting joins and
        syncs are told to rejoin, its timers go, and its members carry on in
        a consumer group under their own session timeouts."""
        for member in classic.members.values():
            self._answer(member, "join", JoinResult(int(E.REBALANCE_IN_PROGRESS),
                                                    member_id=member.member_id))
            self._answer(member, "sync", SyncResult(int(E.REBALANCE_IN_PROGRESS)))
        self._cancel_timers(classic.group_id)
        group = migration.to_consumer_group(classic, self._topics())
        self.groups[group.group_id] = group
        fx = Effects()
        for joined in group.members.values():
            self.consumer._touch(group, joined, fx)
        self.consumer._persist(group, fx)
        self._apply_now(group, fx)
        log.info("group %s: upgraded from classic to consumer group at epoch %d",
                 group.group_id, group.group_epoch)
        return group

    def _maybe_downgrade(self, group: ConsumerGroup) -> None:
        """Online downgrade (migration.py): the last consumer-protocol member
        left; the classic members go on in a classic group, which rebalances."""
        if not self._live(group) or \
                not migration.downgradable(group, self.consumer.config.migration_policy):
            return
        record = migration.classic_record(group, self.topic_names(), self._time_ms())
        self._cancel_timers(group.group_id)
        gone = self.consumer.delete(group, self._time_ms())
        classic, fx = self.classic.loaded(record)
        classic.offsets = group.offsets
        classic.pending_txn_offsets = group.pending_txn_offsets
        self.groups[group.group_id] = classic
        gone.ops.append(WriteRecord(record))
        self.apply(group, gone)
        self._apply_now(classic, fx)
        self._apply_now(classic, self.classic.rebalance(classic, self._time_ms()))
        log.info("group %s: downgraded from consumer to classic group at generation %d",
                 group.group_id, classic.generation_id)

    def _convert_to_classic(self, group: ConsumerGroup) -> Group:
        """An empty consumer group a classic member joins becomes a classic
        group (its records go, its offsets stay), as in Kafka."""
        self._cancel_timers(group.group_id)
        self.apply(group, self.consumer.delete(group, self._time_ms()))
        classic = self.groups[group.group_id] = self.classic.new_group(group.group_id)
        classic.offsets = group.offsets
        classic.pending_txn_offsets = group.pending_txn_offsets
        return classic

    async def consumer_group_describe(self, group_ids: Iterable[str]) -> list[ConsumerGroupView]:
        """ConsumerGroupDescribe (API 69)."""
        out = []
        for gid in group_ids:
            err = self.check(gid, allow_empty=False)
            group = self.groups.get(gid) if not err else None
            if err:
                out.append(ConsumerGroupView(gid, err))
            elif group is None or group.is_(GroupState.DEAD):
                out.append(ConsumerGroupView(gid, int(E.GROUP_ID_NOT_FOUND),
                                             error_message=f"Group {gid} not found."))
            elif not isinstance(group, ConsumerGroup):
                out.append(ConsumerGroupView(gid, int(E.GROUP_ID_NOT_FOUND),
                                             error_message=f"Group {gid} is not a consumer "
                                             f"group."))
            else:
                out.append(self.consumer.view(group))
        return out

    def topic_names(self) -> dict[uuid.UUID, str]:
        """Topic id -> name, now."""
        return {tid: name for name, (tid, _) in self._topics().items()}

    # ================================================================ admin

    async def describe_groups(self, group_ids: Iterable[str],
                              unknown_is_error: bool = True) -> list[GroupDescription]:
        """DescribeGroups. An unknown group is state Dead with GROUP_ID_NOT_FOUND
        (DescribeGroups v6+, KIP-1043); pass unknown_is_error=False for v0-v5,
        which answer NONE for it."""
        out = []
        for gid in group_ids:
            err = self.check(gid, allow_empty=True)
            group = self.groups.get(gid) if not err else None
            if err:
                out.append(GroupDescription(gid, err, "", "", ""))
            elif group is None or group.is_(GroupState.DEAD) or \
                    group.group_type != self.classic.group_type:
                # DescribeGroups describes classic groups; Kafka answers a
                # consumer group's id as one it does not know
                code = int(E.GROUP_ID_NOT_FOUND) if unknown_is_error else NONE
                out.append(GroupDescription(gid, code, str(GroupState.DEAD), "", ""))
            else:
                out.append(self.machine(group).describe(group))
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
        return NONE, [self.machine(g).listed(g) for g in self.groups.values()
                      if not g.is_(GroupState.DEAD) and self._owns(g.group_id)
                      and (not types or g.group_type in types)
                      and (not states or str(g.state).lower() in states)]

    async def delete_groups(self, group_ids: Iterable[str]) -> list[tuple[str, int]]:
        """DeleteGroups -> [(group_id, error_code)]; deletes committed offsets too."""
        out = []
        for gid in group_ids:
            # (the group's commits being written go with it)
            err = await self.offsets.checked_after_commits(gid, allow_empty=True)
            group = self.groups.get(gid) if not err else None
            if err:
                out.append((gid, err))
            elif group is None or group.is_(GroupState.DEAD):
                out.append((gid, int(E.GROUP_ID_NOT_FOUND)))
            elif err := self.machine(group).deletable(group):
                out.append((gid, err))
            else:
                out.append((gid, await self._remove_group(group)))
        return out

    async def _remove_group(self, group: AnyGroup) -> int:
        """Empty -> Dead, forgotten in memory first (so nothing joins meanwhile), then in the store."""
        partitions = list(group.offsets)
        self._cancel_timers(group.group_id)
        fx = self.machine(group).delete(group, self._time_ms())
        del self.groups[group.group_id]
        self.apply(group, fx)
        try:
            await self.store.delete_group(group.group_id, partitions)
        except Exception:
            log.exception("group %s: deleting from the store failed", group.group_id)
            return int(E.COORDINATOR_NOT_AVAILABLE)
        return NONE

    async def drop_if_empty(self, group: AnyGroup) -> None:
        """A group with nothing left to remember goes, as in Kafka; not while
        a commit of it is being written (its record would come after the
        group's tombstone and bring the group back on the next load)."""
        if (self._live(group) and self.machine(group).forgettable(group)
                and not self.offsets.commits_in_flight(group.group_id)):
            await self._remove_group(group)

    # ================================================================ offsets (offset_manager.py)

    def committed_offsets(self) -> dict[str, dict[tuple[str, int], int]]:
        return self.offsets.committed_offsets()

    async def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                             group_instance_id: str | None,
                             offsets: Sequence[tuple[str, int, int, int, str | None]],
                             retention_ms: int | None = None) -> list[PartitionError]:
        return await self.offsets.commit_offsets(group_id, generation_id, member_id,
                                                 group_instance_id, offsets, retention_ms)

    async def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                 generation_id: int, member_id: str,
                                 group_instance_id: str | None,
                                 offsets: Sequence[tuple[str, int, int, int, str | None]]
                                 ) -> list[PartitionError]:
        return await self.offsets.commit_txn_offsets(group_id, producer_id, producer_epoch,
                                                     generation_id, member_id,
                                                     group_instance_id, offsets)

    async def complete_txn_offsets(self, partition: int, producer_id: int,
                                   committed: bool) -> None:
        await self.offsets.complete_txn_offsets(partition, producer_id, committed)

    async def fetch_offsets(self, group_id: str,
                            partitions: Iterable[tuple[str, int]] | None,
                            require_stable: bool = False, member_id: str | None = None,
                            member_epoch: int = -1) -> OffsetFetchResult:
        return await self.offsets.fetch_offsets(group_id, partitions, require_stable,
                                                member_id, member_epoch)

    async def delete_offsets(self, group_id: str,
                             partitions: Iterable[tuple[str, int]]) -> OffsetDeleteResult:
        return await self.offsets.delete_offsets(group_id, partitions)

    async def expire_offsets(self, now_ms: int | None = None) -> int:
        return await self.offsets.expire_offsets(now_ms)
