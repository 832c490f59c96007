"""The runtime around the share-group machines: one object per broker that
holds the groups, their share-partitions and the share sessions, feeds them
events with the clock's time, and hands every change of a share-partition's
durable state to the state writer (state_log.py: a ShareSnapshot record in
__share_group_state).

Handlers call it from several processor loops (threads); each call is short
and holds one lock, so the machines see one event at a time. Nothing here
waits: a ShareFetch's long poll is the handler's (broker/handlers/share.py),
which asks ``wake_at`` when a lock runs out.
"""
from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from samsa.protocol.errors import ErrorCode

from .config import ShareDefaults, ShareGroupSettings, settings
from .group import HeartbeatAnswer, ShareGroup, TopicsView
from .metrics import ShareMetrics
from .partition import Acquired, AckType, SharePartition, StateBatch
from .session import SessionKey, ShareSession, ShareSessions

log = logging.getLogger("broker.groups.share")

# (group id, topic id, partition)
ShareKey = tuple[str, uuid.UUID, int]


class StateWriter(Protocol):
    def write(self, key: ShareKey, start_offset: int, batches: Sequence[StateBatch]) -> None:
        """Persist the share-partition's state (raises if it could not)."""

    def forget(self, key: ShareKey) -> None:
        """Remove the share-partition's state for good (a tombstone)."""


class _NoWriter:
    def write(self, key: ShareKey, start_offset: int, batches: Sequence[StateBatch]) -> None:
        pass

    def forget(self, key: ShareKey) -> None:
        pass


@dataclass(frozen=True)
class Bounds:
    """A partition's log as a share-partition starts on it."""
    log_start_offset: int
    high_watermark: int
    # the first offset with a timestamp at or after the given one (None: none is)
    offset_at: Callable[[int], int | None] = lambda timestamp: None


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    rack_id: str | None
    epoch: int
    client_id: str
    client_host: str
    subscribed: list[str]
    assignment: dict[uuid.UUID, list[int]]


@dataclass(frozen=True)
class DescribedShareGroup:
    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    members: list[DescribedMember]


class ShareService:
    def __init__(self, defaults: ShareDefaults, now_ms: Callable[[], int],
                 bounds: Callable[[uuid.UUID, int], Bounds | None],
                 group_configs: Callable[[str], Mapping[str, str]] = lambda g: {},
                 writer: StateWriter | None = None,
                 loaded: Mapping[ShareKey, tuple[int, list[StateBatch]]] | None = None) -> None:
        self.defaults = defaults
        self.now_ms = now_ms
        self._bounds = bounds
        self._group_configs = group_configs
        self._writer: StateWriter = writer or _NoWriter()
        self._loaded = dict(loaded or {})
        self._lock = threading.Lock()
        self.groups: dict[str, ShareGroup] = {}
        self.partitions: dict[ShareKey, SharePartition] = {}
        self.sessions = ShareSessions()
        self.metrics = ShareMetrics(now_ms)

    def settings(self, group_id: str) -> ShareGroupSettings:
        return settings(self.defaults, self._group_configs(group_id))

    # ------------------------------------------------------------ membership

    def heartbeat(self, group_id: str, member_id: str, member_epoch: int, rack_id: str | None,
                  subscribed: list[str] | None, client_id: str, client_host: str,
                  topics: TopicsView) -> tuple[HeartbeatAnswer, int]:
        """The member's answer and the heartbeat interval to tell it."""
        conf = self.settings(group_id)
        with self._lock:
            group = self.groups.get(group_id)
            if group is None:
                if member_epoch != 0:
                    return HeartbeatAnswer(ErrorCode.UNKNOWN_MEMBER_ID), conf.heartbeat_interval_ms
                group = self.groups[group_id] = ShareGroup(
                    group_id, conf.session_timeout_ms, self.defaults.max_size)
            group.session_timeout_ms = conf.session_timeout_ms
            answer = group.heartbeat(member_id, member_epoch, rack_id, subscribed, client_id,
                                     client_host, topics, self.now_ms())
            if answer.assignment:
                # share.auto.offset.reset is resolved when a partition is first
                # assigned, so "latest" means the records produced from then on
                for topic_id, parts in answer.assignment.items():
                    for p in parts:
                        self._partition((group_id, topic_id, p), conf)
            return answer, conf.heartbeat_interval_ms

    def describe(self, group_id: str) -> DescribedShareGroup | None:
        with self._lock:
            group = self.groups.get(group_id)
            if group is None:
                # known only by its share-partitions' state (read back after a
                # restart, or positioned by AlterShareGroupOffsets): Empty
                return (DescribedShareGroup(group_id, "Empty", 0, 0, [])
                        if self._exists(group_id) else None)
            group.expire(self.now_ms())
            return DescribedShareGroup(group_id, group.state, group.group_epoch,
                                       group.assignment_epoch, [
                DescribedMember(m.member_id, m.rack_id, m.epoch, m.client_id, m.client_host,
                                list(m.subscribed), {t: list(p) for t, p in m.assignment.items()})
                for m in group.members.values()])

    def group_states(self) -> list[str]:
        """Every share group's state (for the share-group-count gauge)."""
        with self._lock:
            now = self.now_ms()
            for group in self.groups.values():
                group.expire(now)
            return [g.state for g in self.groups.values()] + ["Empty"] * len(
                {k[0] for k in (*self.partitions, *self._loaded)} - set(self.groups))

    def group_ids(self) -> list[str]:
        with self._lock:
            return sorted({*self.groups, *(k[0] for k in (*self.partitions, *self._loaded))})

    def is_member(self, group_id: str, member_id: str) -> bool:
        with self._lock:
            group = self.groups.get(group_id)
            if group is None:
                return False
            group.expire(self.now_ms())
            return member_id in group.members

    # ------------------------------------------------------------ sessions

    def open_session(self, group_id: str, member_id: str, epoch: int, *, fetch: bool
                     ) -> tuple[ErrorCode, ShareSession | None]:
        with self._lock:
            return self.sessions.check(group_id, member_id, epoch, fetch=fetch)

    def update_session(self, session: ShareSession, add: Iterable[SessionKey],
                       forget: Iterable[SessionKey], opened: bool) -> None:
        with self._lock:
            self.sessions.advance(session, add, forget, opened)

    def close_session(self, group_id: str, member_id: str) -> None:
        """The member's session ends: what it holds is offered again at once."""
        with self._lock:
            session = self.sessions.close(group_id, member_id)
            if session is None:
                return
            for topic_id, p in session.partitions:
                key = (group_id, topic_id, p)
                sp = self.partitions.get(key)
                if sp is not None and sp.release_member(member_id):
                    self._persist(key, sp)

    # ------------------------------------------------------------ delivery

    def fetch_position(self, key: ShareKey) -> int | None:
        """Where the next fetch reads the partition's log (None: no such partition)."""
        with self._lock:
            sp = self._partition(key, self.settings(key[0]))
            if sp is None:
                return None
            if sp.expire(self.now_ms()):
                self._persist(key, sp)
            return sp.first_acquirable(self.now_ms())

    def acquire(self, key: ShareKey, member_id: str, max_records: int, lower: int,
                upper: int) -> list[Acquired]:
        with self._lock:
            sp = self._partition(key, self.settings(key[0]))
            if sp is None:
                return []
            got = sp.acquire(member_id, max_records, upper, self.now_ms(), lower)
            self.metrics.acquired.mark(sum(a.last_offset - a.first_offset + 1 for a in got))
            return got

    def archive_aborted(self, key: ShareKey, member_id: str, acquired: Sequence[Acquired],
                        aborted: Sequence[tuple[int, int]]) -> list[Acquired]:
        """read_committed: the just-acquired offsets of aborted transactions are
        archived (as Kafka's share-partition does), the rest handed out."""
        drop: set[int] = set()
        for first, last in aborted:
            drop.update(range(first, last + 1))
        with self._lock:
            sp = self.partitions.get(key)
            kept: list[Acquired] = []
            for a in acquired:
                run: list[int] = []
                for off in range(a.first_offset, a.last_offset + 1):
                    if off in drop:
                        if sp is not None:
                            sp.acknowledge(member_id, off, off, [AckType.REJECT], self.now_ms())
                        if run:
                            kept.append(Acquired(run[0], run[-1], a.delivery_count))
                            run = []
                    else:
                        run.append(off)
                if run:
                    kept.append(Acquired(run[0], run[-1], a.delivery_count))
            if sp is not None and kept != list(acquired):
                self._persist(key, sp)
            return kept

    def acknowledge(self, key: ShareKey, member_id: str,
                    batches: Sequence[tuple[int, int, Sequence[int]]]) -> ErrorCode:
        """A partition's acknowledgement batches, each all or nothing; the
        first error is the partition's answer (Kafka's AcknowledgeErrorCode)."""
        with self._lock:
            sp = self.partitions.get(key)
            if sp is None:
                return ErrorCode.INVALID_RECORD_STATE
            first_error = ErrorCode.NONE
            now = self.now_ms()
            for first, last, types in batches:
                code = sp.acknowledge(member_id, first, last, types, now)
                if code and not first_error:
                    first_error = code
                elif not code:
                    self.metrics.acknowledged(first, last, types)
            self._persist(key, sp)
            return first_error

    def wake_at(self, keys: Iterable[ShareKey]) -> int | None:
        """When the first lock on these partitions runs out (a waiting fetch
        may then acquire)."""
        with self._lock:
            times = [t for k in keys if (sp := self.partitions.get(k)) is not None
                     and (t := sp.next_expiry()) is not None]
            return min(times) if times else None

    def offsets(self, group_id: str) -> dict[tuple[uuid.UUID, int], tuple[int, int]] | None:
        """The group's share-partitions: (topic id, partition) -> (start offset,
        records in flight already done with); None: no such share group."""
        with self._lock:
            if not self._exists(group_id):
                return None
            out = {(k[1], k[2]): (sp.start_offset, sp.done_in_flight())
                   for k, sp in self.partitions.items() if k[0] == group_id}
            for k, (start, batches) in self._loaded.items():
                if k[0] == group_id:
                    out[(k[1], k[2])] = (start, sum(
                        b.last_offset - b.first_offset + 1 for b in batches if b.state in (2, 4)))
            return out

    # ------------------------------------------------------------ administration

    def exists(self, group_id: str) -> bool:
        """A share group this broker knows: members now, or share-partition state."""
        with self._lock:
            return self._exists(group_id)

    def non_empty(self, group_id: str) -> bool:
        """The group has members (AlterShareGroupOffsets, DeleteShareGroupOffsets
        and DeleteGroups answer NON_EMPTY_GROUP then, as Kafka's)."""
        with self._lock:
            group = self.groups.get(group_id)
            if group is None:
                return False
            group.expire(self.now_ms())
            return bool(group.members)

    def alter_offsets(self, group_id: str, starts: Mapping[tuple[uuid.UUID, int], int]
                      ) -> ErrorCode:
        """AlterShareGroupOffsets: each share-partition starts over at its new
        start offset (nothing in flight); an unknown group is created empty,
        as Kafka's coordinator does, so a group can be positioned before its
        first member joins."""
        with self._lock:
            group = self.groups.get(group_id)
            if group is not None:
                group.expire(self.now_ms())
                if group.members:
                    return ErrorCode.NON_EMPTY_GROUP
            else:
                conf = self.settings(group_id)
                self.groups[group_id] = ShareGroup(group_id, conf.session_timeout_ms,
                                                   self.defaults.max_size)
            conf = self.settings(group_id)
            for (topic_id, p), start in starts.items():
                key = (group_id, topic_id, p)
                self._loaded.pop(key, None)
                sp = self.partitions.get(key)
                if sp is None:
                    sp = self.partitions[key] = SharePartition(start, conf.limits)
                else:
                    sp.reset(start)
                self._persist(key, sp)
            return ErrorCode.NONE

    def delete_offsets(self, group_id: str, topic_ids: Iterable[uuid.UUID]) -> ErrorCode:
        """DeleteShareGroupOffsets: the group's state of these topics is
        removed (durably); a later assignment starts by share.auto.offset.reset."""
        with self._lock:
            if not self._exists(group_id):
                return ErrorCode.GROUP_ID_NOT_FOUND
            group = self.groups.get(group_id)
            if group is not None:
                group.expire(self.now_ms())
                if group.members:
                    return ErrorCode.NON_EMPTY_GROUP
            wanted = set(topic_ids)
            self._forget(k for k in (*self.partitions, *self._loaded)
                         if k[0] == group_id and k[1] in wanted)
            return ErrorCode.NONE

    def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a share group: the group and all its share-partition
        state go, durably (a restart does not bring them back)."""
        with self._lock:
            if not self._exists(group_id):
                return ErrorCode.GROUP_ID_NOT_FOUND
            group = self.groups.get(group_id)
            if group is not None:
                group.expire(self.now_ms())
                if group.members:
                    return ErrorCode.NON_EMPTY_GROUP
            self._forget(k for k in (*self.partitions, *self._loaded) if k[0] == group_id)
            self.groups.pop(group_id, None)
            return ErrorCode.NONE

    # ------------------------------------------------------------ internals

    def _initial_offset(self, bounds: Bounds, reset: str | int) -> int:
        """share.auto.offset.reset: the log start, the high watermark, or (a
        by_duration) the first record written since that long ago."""
        if reset == "earliest":
            return bounds.log_start_offset
        if isinstance(reset, int):
            found = bounds.offset_at(self.now_ms() - reset)
            if found is not None:
                return max(bounds.log_start_offset, min(found, bounds.high_watermark))
        return bounds.high_watermark

    def _exists(self, group_id: str) -> bool:
        return group_id in self.groups or any(
            k[0] == group_id for k in (*self.partitions, *self._loaded))

    def _forget(self, keys: Iterable[ShareKey]) -> None:
        for key in list(keys):
            self.partitions.pop(key, None)
            self._loaded.pop(key, None)
            try:
                self._writer.forget(key)
            except Exception as e:  # gone in memory; a restart would bring it back
                log.warning("share-partition %s: tombstone not written: %s", key, e)

    def _partition(self, key: ShareKey, conf: ShareGroupSettings) -> SharePartition | None:
        sp = self.partitions.get(key)
        if sp is not None:
            sp.limits = conf.limits
            return sp
        loaded = self._loaded.pop(key, None)
        if loaded is not None:
            start, batches = loaded
            sp = SharePartition(start, conf.limits, batches)
        else:
            bounds = self._bounds(key[1], key[2])
            if bounds is None:
                return None
            start = self._initial_offset(bounds, conf.auto_offset_reset)
            sp = SharePartition(start, conf.limits)
            self.partitions[key] = sp
            self._persist(key, sp)
            return sp
        bounds = self._bounds(key[1], key[2])
        if bounds is not None:
            sp.log_start_moved(bounds.log_start_offset)
        self.partitions[key] = sp
        return sp

    def _persist(self, key: ShareKey, sp: SharePartition) -> None:
        try:
            self._writer.write(key, sp.start_offset, sp.state_batches())
        except Exception as e:  # the state goes on in memory; a restart would lose this change
            log.warning("share-partition %s: state not written: %s", key, e)
