"""The ZooKeeper store's watched snapshot: brokers, topics (assignments and
configs), partition states and the controller's id.

The snapshot is immutable, replaced (never mutated) from ZooKeeper watches,
so readers on any thread need no lock and a topic created by another broker
or written by a tool shows up by itself. A read a watch could not make is
made again later (ZooKeeperSession.read_again_later).
"""
from __future__ import annotations

import base64
import logging
import threading
import uuid
from typing import Callable, Sequence

from kazoo.exceptions import BadVersionError, KazooException, NoNodeError
from kazoo.protocol.states import ZnodeStat

from .. import zk_layout as z
from ..store import (INTERNAL_TOPICS, BrokerEndpoint, ListenerEndpoint, PartitionMeta, TopicMeta,
                     kafka_id)
from .session import ZooKeeperSession
from .state_watch import PartitionStateWatch, StateRead

log = logging.getLogger("broker.metadata.zookeeper")


def topic_uuid(kafka_topic_id: str) -> uuid.UUID:
    """Kafka's 22-character base64url topic id -> UUID."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(kafka_topic_id + "=="))


def _broker_endpoint(reg: z.BrokerRegistration, own: BrokerEndpoint) -> BrokerEndpoint | None:
    """A registered broker with all its listeners; its address is the one of the
    listener this broker talks to other brokers on (the same name on every
    broker, as Kafka requires), else its PLAINTEXT one, else its first."""
    listeners = tuple(ListenerEndpoint(name, host, port, reg.security_protocols.get(name, name))
                      for name, host, port in reg.endpoints)
    if not listeners:
        return None
    inter_broker = next((lst.name for lst in own.listeners
                         if (lst.host, lst.port) == (own.host, own.port)), "PLAINTEXT")
    chosen = (next((lst for lst in listeners if lst.name == inter_broker), None)
              or next((lst for lst in listeners if lst.security_protocol == "PLAINTEXT"), None)
              or listeners[0])
    return BrokerEndpoint(reg.broker_id, chosen.host, chosen.port, reg.rack, listeners)


# (topic, partition) -> (the state, replicas and live brokers a PartitionMeta was made
# from, it): kept across snapshots (_MetaCache)
_Made = dict[tuple[str, int], tuple["z.PartitionState | None", tuple[int, ...], frozenset[int],
                                    PartitionMeta]]


class _MetaCache:
    """PartitionMeta built from one snapshot (the three objects it was made
    from, each replaced, never mutated, on a change), one partition at a time
    as asked for. Threads racing to build the same one build equal ones.

    A partition whose state object, replicas and live brokers are the ones an
    earlier snapshot's PartitionMeta was made from gets that same object back
    (``made``, shared by the snapshots): a snapshot is replaced for every chunk
    of state changes, thousands a second while followers rejoin the ISRs after
    a restart, and every follower fetch and Metadata answer then built every
    partition's PartitionMeta again; kept, Metadata also knows an unchanged
    partition by identity (handlers/metadata.py)."""

    def __init__(self, assignments: dict[str, dict[int, tuple[int, ...]]],
                 states: dict[tuple[str, int], z.PartitionState],
                 brokers: list[BrokerEndpoint], made: _Made) -> None:
        self.assignments = assignments
        self.states = states
        self.brokers = brokers
        self._live = frozenset(b.node_id for b in brokers)
        self._metas: dict[tuple[str, int], PartitionMeta] = {}
        self._made = made

    def meta(self, topic: str, partition: int, replicas: tuple[int, ...]) -> PartitionMeta:
        tp = (topic, partition)
        meta = self._metas.get(tp)
        if meta is None:
            state = self.states.get(tp)
            live = self._live
            made = self._made.get(tp)
            if (made is not None and made[0] is state and made[1] == replicas
                    and made[2] == live):
                meta = made[3]
            else:
                offline = () if live.issuperset(replicas) else tuple(
                    r for r in replicas if r not in live)
                if state is None:  # the controller has not brought it online (yet)
                    meta = PartitionMeta(replicas, -1, -1, (), offline)
                else:
                    meta = PartitionMeta(replicas, state.leader, state.leader_epoch, state.isr,
                                         offline)
                self._made[tp] = (state, replicas, live, meta)
            self._metas[tp] = meta
        return meta

    def forget_topic(self, topic: str) -> None:
        """A deleted topic's partitions leave ``made`` (a snapshot still read
        may put some back: they are checked on every use, and few)."""
        for tp in [tp for tp in list(self._made) if tp[0] == topic]:
            self._made.pop(tp, None)


class WatchCache:
    def __init__(self, session: ZooKeeperSession, endpoint: BrokerEndpoint) -> None:
        self._session = session
        self.zk = session.zk
        self._endpoint = endpoint
        self._snapshot_lock = threading.Lock()  # one replacement of _topics at a time
        self._brokers: list[BrokerEndpoint] = []
        self._topic_drops: dict[str, int] = {}  # times each name was dropped (_reload_topic)
        self._brokers_lock = threading.Lock()  # guards the two counters below
        self._broker_reads_begun = 0
        self._broker_reads_installed = 0
        self._topics: dict[str, TopicMeta] = {}
        self._watched_topics: set[str] = set()
        # Leader, epoch and ISR per partition, from the state znodes the
        # controller (and, for ISR changes, leaders) write; replaced, not mutated.
        self._states: dict[tuple[str, int], z.PartitionState] = {}
        self._state_versions: dict[tuple[str, int], int] = {}  # their znode versions
        # per topic, an object replaced whenever one of its states is (topic_token)
        self._state_stamps: dict[str, object] = {}
        self._assignments: dict[str, dict[int, tuple[int, ...]]] = {}
        self._state_listeners: list[Callable[[str, int, z.PartitionState | None], None]] = []
        self._topic_listeners: list[Callable[[str], None]] = []
        self._controller_id = -1
        self._state_watch = PartitionStateWatch(self.zk, self._on_states, lambda: self._closed)
        self._meta_cache = _MetaCache(self._assignments, self._states, self._brokers, {})

    def start(self) -> None:
        self._state_watch.start()
        self.zk.ChildrenWatch(z.BROKER_IDS, self._on_broker_ids)
        self.zk.ChildrenWatch(z.BROKER_TOPICS, self._on_topic_names)
        self.zk.DataWatch(z.CONTROLLER, self._on_controller)

    @property
    def _closed(self) -> bool:
        return self._session.closed

    # ------------------------------------------------------------ reads

    @property
    def controller_id(self) -> int:
        return self._controller_id

    def brokers(self) -> list[BrokerEndpoint]:
        return self._brokers

    def topics(self) -> dict[str, TopicMeta]:
        return self._topics

    def snapshot_token(self) -> tuple[object, ...]:
        # what partitions() and brokers() read; each is replaced, never mutated
        return (self._assignments, self._states, self._brokers)

    def topic_token(self, topic: str) -> tuple[object, ...]:
        # what partitions(topic) and brokers() read of the snapshot: the topic's
        # assignment and states (its stamp), the live brokers (offline replicas)
        return (self._assignments.get(topic), self._state_stamps.get(topic), self._brokers)

    def partitions(self, topic: str) -> dict[int, PartitionMeta]:
        cache = self._metas()
        return {p: cache.meta(topic, p, reps)
                for p, reps in cache.assignments.get(topic, {}).items()}

    def partition(self, topic: str, partition: int) -> PartitionMeta | None:
        cache = self._metas()
        replicas = cache.assignments.get(topic, {}).get(partition)
        if replicas is None:
            return None
        return cache.meta(topic, partition, replicas)

    def _metas(self) -> "_MetaCache":
        """The partitions' metadata as built from the snapshot now, built once
        per partition until the snapshot is replaced: every partition of every
        follower's fetch looks its partition up here (thousands per request)."""
        cache = self._meta_cache
        assignments, states, brokers = self._assignments, self._states, self._brokers
        if (cache.assignments is not assignments or cache.states is not states
                or cache.brokers is not brokers):
            cache = self._meta_cache = _MetaCache(assignments, states, brokers, cache._made)
        return cache

    def partition_version(self, topic: str, partition: int) -> int:
        return self._state_versions.get((topic, partition), -1)

    def partition_states(self) -> dict[tuple[str, int], z.PartitionState]:
        return self._states

    # ------------------------------------------------------------ listeners

    def on_partition_state(self, listener: Callable[[str, int, z.PartitionState | None],
                                                    None]) -> None:
        self._state_listeners.append(listener)

    def on_topic_change(self, listener: Callable[[str], None]) -> None:
        self._topic_listeners.append(listener)

    def _topic_changed(self, name: str) -> None:
        for listener in list(self._topic_listeners):
            try:
                listener(name)
            except Exception:  # noqa: BLE001 - one listener must not starve the others
                log.exception("topic listener failed")

    # ------------------------------------------------------------ brokers

    def _on_broker_ids(self, children: list[str]) -> bool:
        if not self._read_brokers(self._broker_read_ticket(), children):
            def again() -> bool:
                ticket = self._broker_read_ticket()  # before the listing it reads
                return self._read_brokers(ticket, self.zk.get_children(z.BROKER_IDS))
            self._session.read_again_later("the broker registrations", again)
        return not self._closed

    def _broker_read_ticket(self) -> int:
        """Reads of the registrations are numbered in the order they began;
        only a read that began after the one installed last is installed, so
        a slow retry cannot put back a list older than the watch's."""
        with self._brokers_lock:
            self._broker_reads_begun += 1
            return self._broker_reads_begun

    def _read_brokers(self, ticket: int, children: list[str]) -> bool:
        """Read the registrations of ``children`` (outside any lock: kazoo's
        event thread must not wait on a slow retry) into the broker list;
        False, keeping the list we have, when ZooKeeper failed us meanwhile."""
        brokers = []
        for child in sorted(children, key=lambda c: (not c.isdigit(), int(c) if c.isdigit() else 0)):
            if not child.isdigit():
                continue
            try:
                reg = z.decode_broker(int(child), self.zk.get(z.broker_path(int(child)))[0])
            except NoNodeError:
                continue  # gone between the listing and the read
            except z.ZNodeFormatError as e:
                log.warning("ignoring broker registration: %s", e)
                continue
            except KazooException as e:
                # The session went while reading (seen when ZooKeeper restarts, or
                # this broker was paused past its session): keep the list we have
                # and read it again (read_again_later).
                log.warning("reading the broker registrations failed (%s); keeping the last "
                            "known list and reading it again", type(e).__name__)
                return False
            endpoint = _broker_endpoint(reg, self._endpoint)
            if endpoint is not None:
                brokers.append(endpoint)
        with self._brokers_lock:
            if ticket > self._broker_reads_installed:
                self._broker_reads_installed = ticket
                self._brokers = brokers
        return True

    def _on_controller(self, data: bytes | None, _stat: object) -> bool:
        try:
            self._controller_id = z.decode_controller(data) if data else -1
        except z.ZNodeFormatError as e:
            log.warning("%s", e)
            self._controller_id = -1
        return not self._closed

    # ------------------------------------------------------------ topics

    def _on_topic_names(self, children: list[str]) -> bool:
        names = set(children)
        current = self._topics
        if any(n not in names for n in current):
            with self._snapshot_lock:
                self._topics = {n: m for n, m in self._topics.items() if n in names}
        for name in names - self._watched_topics:
            self._watched_topics.add(name)
            self._watch_topic(name)
        for name in self._watched_topics - names:
            # Deleted (the listing says so in order); its own watch may see
            # that late, or never if the topic is created again meanwhile,
            # and a re-created topic's states must be read afresh.
            self.drop(name)
        return not self._closed

    def _watch_topic(self, name: str) -> None:
        def on_topic(data: bytes | None, _stat: object) -> bool:
            if data is None:
                self.drop(name)
                return False  # deleted: a re-created topic gets a new watch
            self._reload_watched_topic(name)
            return not self._closed

        def on_config(_data: bytes | None, _stat: object) -> bool:
            if name in self._topics:
                self._reload_watched_topic(name)
            return not self._closed and name in self._watched_topics

        self.zk.DataWatch(z.topic_path(name), on_topic)
        self.zk.DataWatch(z.topic_config_path(name), on_config)
        self._watch_partition_states(name)

    def _reload_watched_topic(self, name: str) -> None:
        """``reload_topic`` from a watch: a read ZooKeeper fails is tried again
        (unless the topic is deleted meanwhile: a read begun before the
        deletion must not bring it back)."""
        try:
            self.reload_topic(name)
        except KazooException as e:
            log.warning("reading topic %s failed (%s); reading it again", name, type(e).__name__)
            def again() -> bool:
                drops = self._topic_drops.get(name, 0)  # before this read begins
                if name in self._watched_topics:
                    self.reload_topic(name, drops_seen=drops)
                return True
            self._session.read_again_later(f"topic {name}", again)

    def drop(self, name: str) -> None:
        """Forget a deleted topic, and tell the topic listeners."""
        with self._snapshot_lock:
            self._topic_drops[name] = self._topic_drops.get(name, 0) + 1
            if name in self._topics:
                self._topics = {n: m for n, m in self._topics.items() if n != name}
            if name in self._assignments:
                self._assignments = {n: a for n, a in self._assignments.items() if n != name}
            if any(t == name for t, _ in self._states):
                self._states = {tp: s for tp, s in self._states.items() if tp[0] != name}
                self._state_versions = {tp: v for tp, v in self._state_versions.items()
                                        if tp[0] != name}
                self._state_stamps = {t: s for t, s in self._state_stamps.items() if t != name}
            # under the lock: a batch of states read meanwhile must not put
            # the dropped topic's back (_on_states checks the watched set)
            self._watched_topics.discard(name)
            self._state_watch.forget_topic(name)
        self._meta_cache.forget_topic(name)
        self._topic_changed(name)

    def reload_topic(self, name: str, drops_seen: int | None = None) -> TopicMeta | None:
        """Read one topic's znodes into the snapshot (also used after our writes,
        so a caller reads its own write without waiting for the watch)."""
        try:
            data, stat = self.zk.get(z.topic_path(name))
        except NoNodeError:
            self.drop(name)
            return None
        try:
            assignment = z.decode_topic(name, data)
        except z.ZNodeFormatError as e:
            log.warning("ignoring topic: %s", e)
            return None
        kafka_topic_id = assignment.topic_id
        if kafka_topic_id is None:
            # Written by a tool that predates topic ids (a new topic, or an old
            # kafka-topics --alter rewriting a known one): give it an id, as Kafka's
            # controller does, conditionally on what we read. A topic we know keeps
            # its id: a new one would make its logs look like another topic's.
            known = self._topics.get(name)
            kafka_topic_id = kafka_id(known.topic_id if known is not None else uuid.uuid4())
            assignment = z.TopicAssignment(assignment.partitions, kafka_topic_id,
                                           assignment.adding_replicas,
                                           assignment.removing_replicas)
            try:
                self.zk.set(z.topic_path(name), z.encode_topic(assignment), version=stat.version)
            except (BadVersionError, NoNodeError):
                return self.reload_topic(name, drops_seen)
        configs: dict[str, str | None]  # (TopicMeta's: a null value is a key set to null)
        try:
            configs = dict(z.decode_config(z.topic_config_path(name),
                                           self.zk.get(z.topic_config_path(name))[0]))
        except NoNodeError:
            configs = {}
        except z.ZNodeFormatError as e:
            log.warning("ignoring topic config: %s", e)
            configs = {}
        meta = TopicMeta(name, topic_uuid(kafka_topic_id), len(assignment.partitions),
                         configs, name in INTERNAL_TOPICS)
        replicas = {p: tuple(r) for p, r in assignment.partitions.items()}
        with self._snapshot_lock:
            if drops_seen is not None and self._topic_drops.get(name, 0) != drops_seen:
                return None  # deleted since this read began (``drops_seen``: drop's count)
            self._topics = {**self._topics, name: meta}
            self._assignments = {**self._assignments, name: replicas}
        self._topic_changed(name)
        return meta

    # ------------------------------------------------------------ partition states

    def _watch_partition_states(self, topic: str) -> None:
        def on_partitions(children: list[str]) -> bool:
            if topic not in self._watched_topics:
                return False
            self._state_watch.follow(topic, [int(c) for c in children if c.isdigit()])
            return not self._closed

        # The controller creates .../partitions with the first state: watch
        # for it to exist (a children watch on a missing node just stops).
        def on_parent(_data: bytes | None, stat: object) -> bool:
            if stat is None:
                return topic in self._watched_topics and not self._closed
            self.zk.ChildrenWatch(z.partitions_path(topic), on_partitions)
            return False
        self.zk.DataWatch(z.partitions_path(topic), on_parent)

    def states_writing(self, paths: Sequence[str]) -> None:
        """State znodes this session is about to write (state_watch.py's ``writing``)."""
        self._state_watch.writing(paths)

    def states_written(self, writes: Sequence[tuple[str, bytes, ZnodeStat]],
                       attempted: Sequence[str]) -> None:
        """State znodes this session has just written (state_watch.py's ``written``)."""
        self._state_watch.written(writes, attempted)

    def _on_states(self, reads: list[StateRead]) -> None:
        """A batch of state znodes read (state_watch.py): into the snapshot in
        one replacement, then each to the listeners. A state not written yet
        (or deleted with a re-created topic) stays followed: the controller
        writes it after the partition node."""
        changes: list[tuple[str, int, z.PartitionState | None]] = []
        with self._snapshot_lock:
            states = dict(self._states)
            versions = dict(self._state_versions)
            for (topic, partition), data, stat in reads:
                if topic not in self._watched_topics:
                    continue
                tp = (topic, partition)
                state = None
                if data is not None:
                    try:
                        state = z.decode_partition_state(topic, partition, data)
                    except z.ZNodeFormatError as e:
                        log.warning("ignoring partition state: %s", e)
                        continue
                if state is None:
                    states.pop(tp, None)
                    versions.pop(tp, None)
                else:
                    states[tp] = state
                    if stat is not None:
                        versions[tp] = stat.version
                changes.append((topic, partition, state))
            # States first, then their versions: a reader without the lock
            # that reads a version, then the state (the replica manager's
            # role sync), never pairs a version with an older state (a
            # conditional write based on that state would succeed, where an
            # older version only fails it)
            self._states = states
            self._state_versions = versions
            # after the states: a token read first is never newer than them
            if changes:
                stamps = dict(self._state_stamps)
                for topic in {c[0] for c in changes}:
                    stamps[topic] = object()
                self._state_stamps = stamps
        for topic, partition, state in changes:
            for listener in list(self._state_listeners):
                try:
                    listener(topic, partition, state)
                except Exception:  # noqa: BLE001 - one listener must not starve the others
                    log.exception("partition state listener failed")
