"""The runtime around the share-group machines: one object per broker that
holds the groups, their share-partitions and the share sessions, and feeds
them events with the clock's time.

A share-partition's durable state lives with the share coordinator
(coordinator.py); this broker, as the partition's leader, reads it before it
first serves the share-partition and writes every change back
(persistence.py does both, on the handlers' behalf). Here that shows as:
``needs_state``/``install`` (nothing is served of a share-partition whose
state was not read yet), and each change numbered and kept as pending
(``pending``/``written``) until a write of it, or of a later change, is
done. Built without ``durable`` (the handlers' unit tests), a share-partition
starts fresh and changes are only handed to ``writer``.

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
from typing import TYPE_CHECKING, Protocol

from samsa.protocol.errors import ErrorCode, ProtocolError

from .records import (MemberImage, ShareGroupImage, TopicPartitions, decode as decode_records,
                      encode as encode_records)
from .config import ShareDefaults, ShareGroupSettings, settings
from .group import HeartbeatAnswer, ShareGroup, ShareMember, TopicsView
from .metrics import ShareMetrics
from .partition import Acquired, AckType, SharePartition, StateBatch
from .session import SessionKey, ShareSession, ShareSessions

if TYPE_CHECKING:
    from ..store import ShareGroupRecords
    from .persistence import SharePersistence

log = logging.getLogger("broker.groups.share")

# (group id, topic id, partition)
ShareKey = tuple[str, uuid.UUID, int]


class StateWriter(Protocol):
    def write(self, key: ShareKey, start_offset: int, batches: Sequence[StateBatch]) -> None:
        """Persist the share-partition's state (raises if it could not)."""


class _NoWriter:
    def write(self, key: ShareKey, start_offset: int, batches: Sequence[StateBatch]) -> None:
        pass


@dataclass(frozen=True)
class PendingState:
    """A share-partition's state to write: the change numbered ``version``."""
    version: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]


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
                 loaded: Mapping[ShareKey, tuple[int, list[StateBatch]]] | None = None,
                 durable: bool = False,
                 loading: Callable[[str], bool] = lambda group_id: False) -> None:
        """loading(group id): whether the group's __consumer_offsets
        partition is being read (the group coordinator's group_loading)."""
        self.defaults = defaults
        self._group_loading = loading
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
        self._durable = durable
        # keys whose durable state was read and found empty: started fresh on first use
        self._fresh: set[ShareKey] = set()
        # (state epoch, leader epoch) each share-partition's writes carry
        self._epochs: dict[ShareKey, tuple[int, int]] = {}
        self._version: dict[ShareKey, int] = {}  # changes made so far
        self._written: dict[ShareKey, int] = {}  # the last change written
        self._pending: dict[ShareKey, PendingState] = {}
        # persistence.py, set by the broker (a durable service only)
        self.persistence: SharePersistence | None = None
        # the groups coordinated here as their __consumer_offsets records
        # keep them (records.py): their share-partitions assigned or with
        # state, and what the log holds of each group (key -> value)
        self._images: dict[str, ShareGroupImage] = {}
        self._group_log: dict[str, dict[bytes, bytes]] = {}

    def loading(self, group_id: str) -> bool:
        """The group's records are being read: it is not served until they
        are (a heartbeat now would write its share-partitions over theirs)."""
        return self._group_loading(group_id)

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
                names = {tid: name for name, (tid, _) in topics.items()}
                image = self._image(group_id)
                for topic_id, parts in answer.assignment.items():
                    new = set(parts) - _parts(image.initialized, topic_id)
                    if new - _parts(image.initializing, topic_id):
                        _add(image.initializing, topic_id, names.get(topic_id, ""), new)
                        image.created_ms.setdefault(topic_id, self.now_ms())
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

    def group_states(self, coordinated: Callable[[str], bool] = lambda g: True) -> list[str]:
        """The state of every share group ``coordinated`` here (the gauges): a
        group known only by the share-partitions led here is another broker's."""
        with self._lock:
            now = self.now_ms()
            for group in self.groups.values():
                group.expire(now)
            return [g.state for gid, g in self.groups.items() if coordinated(gid)] + [
                "Empty" for gid in {k[0] for k in (*self.partitions, *self._loaded)}
                - set(self.groups) if coordinated(gid)]

    def expire_members(self) -> list[str]:
        """Drop the members whose session ran out, in every group; the
        groups that lost one (their records are to be written)."""
        with self._lock:
            now = self.now_ms()
            out = []
            for gid, group in self.groups.items():
                group.expire(now)
                if group.members_expired:  # now, or by a describe or heartbeat since
                    group.members_expired = False
                    out.append(gid)
            return out

    def expiry_unwritten(self, group_id: str) -> None:
        """The records of a group expire_members named could not be written
        (its partition loading, a failed write): it is named again next round."""
        with self._lock:
            group = self.groups.get(group_id)
            if group is not None:
                group.members_expired = True

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
        runs = sorted(aborted)
        with self._lock:
            sp = self.partitions.get(key)
            now = self.now_ms()
            kept: list[Acquired] = []
            for a in acquired:
                # one REJECT per overlap of this acquired run with an aborted
                # run (not one per offset: each acknowledge walks the window)
                pos = a.first_offset
                for first, last in runs:
                    lo, hi = max(first, pos), min(last, a.last_offset)
                    if lo > hi:
                        continue
                    if sp is not None:
                        sp.acknowledge(member_id, lo, hi, [AckType.REJECT], now)
                    if pos < lo:
                        kept.append(Acquired(pos, lo - 1, a.delivery_count))
                    pos = hi + 1
                if pos <= a.last_offset:
                    kept.append(Acquired(pos, a.last_offset, a.delivery_count))
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

    # ------------------------------------------------------------ durable state

    def needs_state(self, key: ShareKey) -> bool:
        """Whether the share-partition's durable state must be read before it
        is served here."""
        with self._lock:
            return (self._durable and key not in self.partitions and key not in self._loaded
                    and key not in self._fresh)

    def install(self, key: ShareKey, state_epoch: int, leader_epoch: int, start_offset: int,
                batches: Sequence[StateBatch]) -> None:
        """The share-partition's durable state as read (start offset -1: none yet)."""
        with self._lock:
            if key in self.partitions:
                return
            self._epochs[key] = (state_epoch, leader_epoch)
            if start_offset < 0:
                self._fresh.add(key)
            else:
                self._loaded[key] = (start_offset, list(batches))

    def forget(self, key: ShareKey) -> None:
        """This broker no longer serves the share-partition (leadership moved,
        or a write was fenced): its state is read again before it is served."""
        with self._lock:
            self._forget(key)

    def forget_partition(self, topic_id: uuid.UUID, partition: int) -> None:
        """Leadership of the topic partition left this broker: every group's
        share-partition on it is forgotten."""
        with self._lock:
            for key in {k for k in (*self.partitions, *self._loaded, *self._fresh, *self._epochs)
                        if k[1] == topic_id and k[2] == partition}:
                self._forget(key)

    def pending(self, key: ShareKey) -> PendingState | None:
        """The share-partition's latest change not yet written (None: all written)."""
        with self._lock:
            found = self._pending.get(key)
            if found is None or found.version <= self._written.get(key, 0):
                return None
            return found

    def written(self, key: ShareKey, version: int) -> None:
        with self._lock:
            if version > self._written.get(key, 0):
                self._written[key] = version
            found = self._pending.get(key)
            if found is not None and found.version <= version:
                del self._pending[key]

    def progress(self, key: ShareKey) -> tuple[int, int]:
        """(changes made, changes written) of the share-partition here."""
        with self._lock:
            return self._version.get(key, 0), self._written.get(key, 0)

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
        first member joins. A durable service changes only the group here: the
        handler resets the state through persistence.py (``reset``)."""
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
            if self._durable:
                return ErrorCode.NONE
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

    def deletable(self, group_id: str, topic_ids: Iterable[uuid.UUID] | None = None
                  ) -> tuple[ErrorCode, list[ShareKey]]:
        """DeleteShareGroupOffsets (``topic_ids``) or DeleteGroups (None): the
        share-partitions whose state goes, or why nothing may go. A durable
        service forgets them through persistence.py (``delete``); one without
        forgets them here with ``drop``."""
        with self._lock:
            if not self._exists(group_id):
                return ErrorCode.GROUP_ID_NOT_FOUND, []
            group = self.groups.get(group_id)
            if group is not None:
                group.expire(self.now_ms())
                if group.members:
                    return ErrorCode.NON_EMPTY_GROUP, []
            wanted = None if topic_ids is None else set(topic_ids)
        return ErrorCode.NONE, [k for k in self.share_partitions(group_id)
                                if wanted is None or k[1] in wanted]

    def drop(self, keys: Iterable[ShareKey], group_id: str | None = None) -> None:
        """Forget share-partitions (and, given ``group_id``, the group itself)."""
        with self._lock:
            for key in keys:
                self._forget(key)
                image = self._images.get(key[0])
                if image is not None:
                    _remove(image.initializing, key[1], {key[2]})
                    _remove(image.initialized, key[1], {key[2]})
            if group_id is not None:
                self.groups.pop(group_id, None)
                self._images.pop(group_id, None)

    # ------------------------------------------------------------ the groups' records

    def loaded(self, groups: Sequence[ShareGroupRecords]) -> None:
        """Share groups a load of __consumer_offsets read (this broker now
        coordinates them): each is Empty at its stored epoch, with its
        share-partitions, until members join."""
        for found in groups:
            try:
                image = decode_records(found.group_id, found.records)
            except ProtocolError as e:
                log.warning("share group %s: records not read: %s", found.group_id, e)
                continue
            conf = self.settings(found.group_id)
            with self._lock:
                group = self.groups.get(found.group_id)
                if group is None:
                    group = self.groups[found.group_id] = ShareGroup(
                        found.group_id, conf.session_timeout_ms, self.defaults.max_size)
                    group.restore([_member(m) for m in image.members.values()], image.targets,
                                  image.epoch, image.assignment_epoch or image.epoch,
                                  self.now_ms())
                self._images[found.group_id] = image
                self._group_log[found.group_id] = dict(found.records)

    def unloaded(self, here: Callable[[str], bool]) -> None:
        """Another broker coordinates these groups now: they go from here
        (the share-partitions led here stay: they serve any group)."""
        with self._lock:
            for gid in [g for g in {*self.groups, *self._images, *self._group_log} if here(g)]:
                self.groups.pop(gid, None)
                self._images.pop(gid, None)
                self._group_log.pop(gid, None)

    def group_records(self, group_id: str) -> list[tuple[bytes, bytes | None]]:
        """The records to write for the group to be in the log as it is
        here (a tombstone for each of a deleted group's): none if it is."""
        with self._lock:
            want: dict[bytes, bytes] = {}
            group = self.groups.get(group_id)
            if group is not None:
                group.expire(self.now_ms())  # those gone are tombstoned
                image = self._image(group_id)
                image.epoch, image.assignment_epoch = group.group_epoch, group.assignment_epoch
                image.members = {mid: MemberImage(
                    mid, m.rack_id, m.client_id, m.client_host, list(m.subscribed), m.epoch,
                    m.previous_epoch, {t: sorted(p) for t, p in m.assignment.items()})
                    for mid, m in group.members.items()}
                image.targets = {mid: {t: sorted(p) for t, p in group.target(mid).items()}
                                 for mid in group.members}
                want = encode_records(image)
            have = self._group_log.get(group_id, {})
            return [*((k, v) for k, v in want.items() if have.get(k) != v),
                    *((k, None) for k in have if k not in want)]

    def group_records_written(self, group_id: str,
                              entries: Sequence[tuple[bytes, bytes | None]]) -> None:
        with self._lock:
            have = self._group_log.setdefault(group_id, {})
            for k, v in entries:
                if v is None:
                    have.pop(k, None)
                else:
                    have[k] = v
            if not have:
                del self._group_log[group_id]

    def mark_initialized(self, group_id: str, keys: Iterable[ShareKey],
                         names: Mapping[uuid.UUID, str] | None = None) -> None:
        """These share-partitions of the group have state at the share coordinator."""
        with self._lock:
            if group_id not in self.groups:
                return
            image = self._image(group_id)
            for _, topic_id, p in keys:
                name = (names or {}).get(topic_id) or image.initializing.get(
                    topic_id, image.initialized.get(topic_id, ("", frozenset())))[0]
                _add(image.initialized, topic_id, name, {p})
                image.created_ms.setdefault(topic_id, self.now_ms())
                _remove(image.initializing, topic_id, {p})

    def share_partitions(self, group_id: str) -> list[ShareKey]:
        """The group's share-partitions: assigned or with state, as its
        records say, and those known here as their leader."""
        with self._lock:
            image = self._images.get(group_id)
            keys = {k for k in (*self.partitions, *self._loaded) if k[0] == group_id}
            if image is not None:
                for topics in (image.initializing, image.initialized):
                    keys.update((group_id, t, p) for t, (_, parts) in topics.items()
                                for p in parts)
            return sorted(keys, key=lambda k: (str(k[1]), k[2]))

    def _image(self, group_id: str) -> ShareGroupImage:
        image = self._images.get(group_id)
        if image is None:
            image = self._images[group_id] = ShareGroupImage(group_id)
        return image

    # ------------------------------------------------------------ internals

    def _exists(self, group_id: str) -> bool:
        # _group_log: its records are in the log (a deletion whose tombstones
        # failed is still to finish)
        return group_id in self.groups or group_id in self._group_log or any(
            k[0] == group_id for k in (*self.partitions, *self._loaded))

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

    def _forget(self, key: ShareKey) -> None:
        self.partitions.pop(key, None)
        self._loaded.pop(key, None)
        self._fresh.discard(key)
        self._epochs.pop(key, None)
        self._pending.pop(key, None)

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
            if self._durable and key not in self._fresh:
                return None  # its durable state is not read yet
            bounds = self._bounds(key[1], key[2])
            if bounds is None:
                return None
            start = self._initial_offset(bounds, conf.auto_offset_reset)
            sp = SharePartition(start, conf.limits)
            self._fresh.discard(key)
            self.partitions[key] = sp
            self._persist(key, sp)
            return sp
        bounds = self._bounds(key[1], key[2])
        if bounds is not None:
            sp.log_start_moved(bounds.log_start_offset)
        self.partitions[key] = sp
        return sp

    def _persist(self, key: ShareKey, sp: SharePartition) -> None:
        """A change of the share-partition's durable state: numbered and kept
        until written (persistence.py writes it before the change is answered)."""
        version = self._version[key] = self._version.get(key, 0) + 1
        state_epoch, leader_epoch = self._epochs.get(key, (0, -1))
        self._pending[key] = PendingState(version, state_epoch, leader_epoch, sp.start_offset,
                                          tuple(sp.state_batches()))
        try:
            self._writer.write(key, sp.start_offset, sp.state_batches())
        except Exception as e:  # the state goes on in memory; a restart would lose this change
            log.warning("share-partition %s: state not written: %s", key, e)


def _member(m: MemberImage) -> ShareMember:
    return ShareMember(m.member_id, m.client_id, m.client_host, m.rack_id, list(m.subscribed),
                       m.epoch, m.previous_epoch,
                       assignment={t: list(p) for t, p in m.assigned.items()})


def _parts(topics: TopicPartitions, topic_id: uuid.UUID) -> frozenset[int]:
    found = topics.get(topic_id)
    return found[1] if found is not None else frozenset()


def _add(topics: TopicPartitions, topic_id: uuid.UUID, name: str,
         parts: Iterable[int]) -> None:
    old_name, old = topics.get(topic_id, (name, frozenset()))
    topics[topic_id] = (old_name or name, old | frozenset(parts))


def _remove(topics: TopicPartitions, topic_id: uuid.UUID,
            parts: Iterable[int]) -> None:
    found = topics.get(topic_id)
    if found is None:
        return
    left = found[1] - frozenset(parts)
    if left:
        topics[topic_id] = (found[0], left)
    else:
        del topics[topic_id]
