"""The controller (ZooKeeper mode): one broker of the cluster, elected
through the ephemeral ``/controller`` znode, decides every partition's
leader and ISR and writes them to the partition state znodes.

Every broker runs a ``Controller``; the one that creates ``/controller``
first is active, the others watch the znode and stand for election when it
disappears (its session ended). On taking office the new controller bumps
``/controller_epoch`` with a conditional write, and every write it makes
afterwards is one ZooKeeper transaction that also checks the epoch znode's
version: a controller that has been replaced without noticing (a long GC
pause, a partition from ZooKeeper) cannot overwrite its successor's
decisions. Partition state writes are conditional on the version read too,
so a concurrent ISR change by a leader makes the controller re-read and
decide again rather than overwrite.

Work is serialized on one thread (``_events``), like Kafka's controller
event queue: watches only enqueue, and decisions come from
``elections.py`` on a consistent snapshot, so two events never interleave.

What it reacts to: brokers coming and going (``/brokers/ids``), topics
created or grown (``/brokers/topics``, also when a tool writes them),
preferred replica elections asked through
``/admin/preferred_replica_election``, topic deletions marked under
``/admin/delete_topics``, leaders' ISR changes announced under
``/isr_change_notification``, and partition reassignments asked through
AlterPartitionReassignments or ``/admin/reassign_partitions``
(``reassignment.py`` has their rules).
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from functools import partial
from typing import Callable, Iterable, Iterator, Mapping, NamedTuple

from kazoo.client import KazooClient
from kazoo.exceptions import (BadVersionError, ConnectionLoss, KazooException, NoNodeError,
                              NodeExistsError, NotEmptyError)
from kazoo.protocol.states import ZnodeStat

from samsa.broker.metadata import zk_layout as z
from samsa.broker.metadata.store import INTERNAL_TOPICS
from samsa.broker.metadata.zookeeper.writes import (ControllerZooKeeper, Create, NotControllerError,
                                              SetData, over_kazoo)
from samsa.protocol.errors import ErrorCode

from . import reassignment as ra
from .controller_events import (UNKNOWN_BROKER_EPOCH, Answered, BrokersChanged,
                                ControlledShutdown, ControllerEvent, Elect, ElectLeaders,
                                IsrChangesNoticed, PreferredElectionAsked, Reassign,
                                ReassignZnodeChanged, Resign, ShutdownRefused, Stop, Tick,
                                TopicChanged, TopicsChanged, TopicsMarkedForDeletion, WatchTopics)
from .elections import (LeaderAndIsr, elect_for_shutdown, elect_offline, elect_preferred,
                        election_answer, elections_reported, initial_state, remove_from_isr)

log = logging.getLogger("broker.cluster.controller")

Partition = tuple[str, int]
# A reassignment's outcome per partition: Kafka's error code and its message.
ReassignResult = tuple[ErrorCode, str | None]


REASSIGN_RECHECK_S = 1.0
TOPIC_WATCHES_PER_EVENT = 5  # (WatchTopics)
ELECT_AGAIN_S = 1.0  # after a ZooKeeper error ended a term (_elect_later)


Decision = Callable[[LeaderAndIsr], LeaderAndIsr | None]
"""A decision on a partition: its new state from its current one (None: no change)."""


class TopicZnode(NamedTuple):
    """A topic's znode as the controller read (or wrote) it."""
    assignment: z.TopicAssignment
    version: int
    created: int  # its czxid: which znode of that name (a re-created topic's differs)


class RebalancePolicy(NamedTuple):
    """auto.leader.rebalance.enable, leader.imbalance.check.interval.seconds,
    leader.imbalance.per.broker.percentage."""
    enabled: bool = True
    interval_s: float = 300.0
    imbalance_percent: int = 10


def shutdown_refused(live: bool, registration: int | None, broker_epoch: int
                     ) -> ShutdownRefused | None:
    """Whether a controlled shutdown asked by a broker the controller sees
    ``live`` (or not), whose registration znode has the czxid
    ``registration`` (None: none), with ``broker_epoch``, is refused: as
    Kafka's controller, a broker it does not know is not available, and an
    epoch older than the registration's is stale (the broker registered
    again since: the run that asked is over). UNKNOWN_BROKER_EPOCH, from
    requests older than broker epochs (v0, v1), is not checked."""
    if not live or registration is None:
        return ShutdownRefused.UNKNOWN_BROKER
    if broker_epoch != UNKNOWN_BROKER_EPOCH and broker_epoch < registration:
        return ShutdownRefused.STALE_BROKER_EPOCH
    return None


class Controller:
    def __init__(self, zk: ControllerZooKeeper | KazooClient, broker_id: int, *,
                 unclean_leader_election: Callable[[str], bool] = lambda topic: False,
                 rebalance: Callable[[], RebalancePolicy] = RebalancePolicy,
                 clock: Callable[[], float] = time.time) -> None:
        self.zk: ControllerZooKeeper = over_kazoo(zk)
        self.broker_id = broker_id
        self._unclean = unclean_leader_election
        self._rebalance = rebalance
        self._next_rebalance = 0.0
        self._tick_queued = False
        self._next_reassign_check = 0.0
        self._clock = clock
        self._events: queue.Queue[ControllerEvent] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name=f"samsa-controller-{broker_id}",
                                        daemon=True)
        self._stopped = False
        self._elect_later_lock = threading.Lock()
        self._elect_pending = False  # one _elect_later retry at a time
        # Set while active:
        self.active = False
        self.epoch = 0
        self._epoch_version = -1
        self._live: set[int] = set()
        # Brokers in a controlled shutdown, each with the registration that
        # asked (its znode's czxid, Kafka's broker epoch): registered anew, the
        # broker has started again and is no longer stopping (see _on_brokers).
        self._shutting_down: dict[int, int] = {}
        self._assignments: dict[str, dict[int, list[int]]] = {}
        self._topic_znodes: dict[str, TopicZnode] = {}  # as read
        self._watched_topics: set[str] = set()  # a watch set this term
        self._reassigning: dict[Partition, ra.Reassignment] = {}  # from the topic znodes
        self._states: dict[Partition, tuple[LeaderAndIsr, int]] = {}  # state, znode version
        self._isr_notices_handled: set[str] = set()  # ISR change notifications, this term

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> None:
        self._thread.start()
        self.zk.watch_data(z.CONTROLLER, self._on_controller_znode)

    def stop(self) -> None:
        """Resign (if active) and stop the event thread."""
        self._stopped = True
        self._events.put(Stop())
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=10)

    def _on_controller_znode(self, data: bytes | None, _stat: object) -> bool:
        if data is None:
            if self.active:  # our znode went with our session: that term is over
                self._events.put(Resign())
            self._events.put(Elect())
        elif self.active:
            try:
                if z.decode_controller(data) != self.broker_id:
                    self._events.put(Resign())
            except z.ZNodeFormatError:
                pass
        return not self._stopped

    def _run(self) -> None:
        while True:
            try:
                event = self._events.get(timeout=1.0)
            except queue.Empty:
                event = Tick()
            else:
                # A steady stream of events (ISR notifications, say) must not
                # starve the rebalance check, which otherwise runs when idle.
                if not self._tick_queued and self._periodic_due():
                    self._tick_queued = True
                    self._events.put(Tick())
            if isinstance(event, Tick):
                self._tick_queued = False
            if isinstance(event, Stop):
                self._resign(delete_znode=True)
                return
            try:
                if isinstance(event, Elect):
                    self._try_elect()
                elif self.active:
                    self._handle(event)
            except NotControllerError:
                log.warning("controller %d: a newer controller took over; resigning",
                            self.broker_id)
                self._resign(delete_znode=False)
                self._elect_later()  # stays out unless /controller is still ours
            except KazooException as e:
                # ZooKeeper unreachable or the session gone: decisions cannot be
                # written; the next controller (maybe us again) starts over.
                # kazoo's errors often have no message (SessionExpiredError(),
                # ConnectionLoss()): the type says what happened. While this
                # broker stops, its session closing under an event is expected.
                log.log(logging.DEBUG if self._stopped else logging.WARNING,
                        "controller %d: ZooKeeper error handling %s: %s", self.broker_id,
                        event.kind, type(e).__name__ + (f" ({e})" if str(e) else ""))
                self._resign(delete_znode=False)
                self._elect_later()
            except Exception:  # noqa: BLE001 - a bug must not end the controller thread
                log.exception("controller %d: handling %s failed", self.broker_id, event.kind)
            finally:
                if isinstance(event, Answered):
                    event.reply.done.set()  # the caller waiting for it goes on either way

    def _handle(self, event: ControllerEvent) -> None:
        """One event, while this broker is the active controller."""
        match event:
            case Resign():
                self._resign(delete_znode=False)
            case BrokersChanged(ids=ids):
                self._on_brokers(ids)
            case TopicsChanged(names=names):
                self._on_topics(names)
            case TopicChanged(topic=topic, version=version, created=created):
                self._on_topic(topic, version, created)
            case WatchTopics(topics=topics):
                self._watch_topics(topics)
            case PreferredElectionAsked():
                self._on_preferred_election()
            case TopicsMarkedForDeletion(names=names):
                self._on_delete_topics(names)
            case IsrChangesNoticed(names=names):
                self._on_isr_changes(names)
            case ControlledShutdown(broker_id=broker_id, broker_epoch=broker_epoch, reply=reply):
                reply.value = self._on_controlled_shutdown(broker_id, broker_epoch)
            case ElectLeaders(partitions=partitions, unclean=unclean, reply=reply):
                reply.value = self._on_elect_leaders(partitions, unclean)
            case Reassign(requests=requests, reply=reply):
                reply.value = self._on_reassign(requests, event.allow_replication_factor_change)
            case ReassignZnodeChanged():
                self._on_reassign_znode()
            case Tick():
                self._maybe_rebalance()
                self._recheck_reassignments()

    # ---------------------------------------------------------------- election

    def _elect_later(self) -> None:
        """Stand again in a moment. After a ZooKeeper error the session may
        live on (a connection lost and found again), and with it our
        /controller znode: no watch fires, nobody else can win, and without
        this the cluster had no acting controller until our session ended
        (100-round nemesis: leaders of a paused broker never moved). One
        pending retry at a time."""
        with self._elect_later_lock:
            if self._stopped or self._elect_pending:
                return
            self._elect_pending = True

        def stand() -> None:
            with self._elect_later_lock:
                self._elect_pending = False
            self._events.put(Elect())
        timer = threading.Timer(ELECT_AGAIN_S, stand)
        timer.daemon = True
        timer.start()

    def _try_elect(self) -> None:
        """Take office when /controller is free, or is still ours from this
        very session (an earlier term of ours ended on a ZooKeeper error
        while the session lived on). The znode and the epoch bump are one
        transaction, as Kafka registers its controller: a broker never holds
        office at an epoch it bumped without holding /controller."""
        if self.active or self._stopped:
            return
        session = self.zk.session_id()
        if session is None:
            raise ConnectionLoss()  # not connected: _run stands again later
        try:
            _, held = self.zk.get(z.CONTROLLER)
        except NoNodeError:
            held = None
        if held is not None and held.ephemeralOwner != session:
            return  # someone else's; the watch tells us when it goes
        try:
            data, epoch_stat = self.zk.get(z.CONTROLLER_EPOCH)
            epoch = z.decode_controller_epoch(data) + 1
        except NoNodeError:
            epoch_stat, epoch = None, 1
        claim = self.zk.claim_controller(
            z.encode_controller(self.broker_id, int(self._clock() * 1000)),
            None if held is None else held.version, z.encode_controller_epoch(epoch),
            None if epoch_stat is None else epoch_stat.version)
        if not claim.won:
            if claim.taken:
                return  # someone else won; the watch tells us when it goes
            self._events.put(Elect())  # the epoch or the znode moved meanwhile: look again
            return
        if self.zk.session_id() != session:
            # The session changed during the transaction: a check of "ours" made
            # in the old one proves nothing now; look again.
            self._events.put(Elect())
            return
        self.epoch = epoch
        self._epoch_version = claim.epoch_version
        self.active = True
        self._next_rebalance = time.monotonic() + self._rebalance().interval_s
        log.info("broker %d is the controller (epoch %d)", self.broker_id, self.epoch)
        self._load()

    def _resign(self, delete_znode: bool) -> None:
        if not self.active:
            return
        self.active = False
        self._states.clear()
        self._assignments.clear()
        self._topic_znodes.clear()
        self._watched_topics.clear()
        self._reassigning.clear()
        self._isr_notices_handled.clear()
        if delete_znode:
            try:
                data, stat = self.zk.get(z.CONTROLLER)
                if z.decode_controller(data) == self.broker_id:
                    self.zk.delete(z.CONTROLLER, version=stat.version)
            except (KazooException, z.ZNodeFormatError):
                pass
        log.info("broker %d is no longer the controller", self.broker_id)

    # ---------------------------------------------------------------- taking office

    def _load(self) -> None:
        """Read the whole cluster, then bring every partition online that can be,
        then follow changes through watches (which enqueue events)."""
        laps = Laps()
        self._live = self._read_live_brokers()
        topics = self.zk.get_children(z.BROKER_TOPICS)
        self._read_topics(topics)
        laps.lap("read")
        # Replicas on brokers that died before this term (maybe with the
        # previous controller) leave their ISRs now, as Kafka's replica state
        # machine does on failover; then every partition that can have a leader gets one.
        self._replicas_gone(set().union(*(s.isr for s, _ in self._states.values()))
                            - self._live)
        laps.lap("dead replicas out")
        self._bring_online(list(self._states) + self._partitions_without_state())
        laps.lap("leaderless online")
        # Watched once the partitions have leaders, a few topics per event
        # (WatchTopics), the first before the cluster's watches below enqueue
        # theirs; each watch's first call names the version it saw, so a
        # change since the read above is read again then (_on_topic).
        self._events.put(WatchTopics(tuple(topics)))
        # Reassignments the previous controller left running go on from here.
        for tp in list(self._reassigning):
            self._maybe_complete(tp)
        if len(self._states) >= LOGGED_ONE_BY_ONE:
            log.info("controller %d: taking office over %d partitions took %s", self.broker_id,
                     len(self._states), laps)
        epoch = self.epoch
        # The watches stay for the session; events from an older term are
        # ignored because they are handled only while active with this epoch.
        self.zk.watch_children(z.BROKER_IDS,
                              lambda ids: self._watch_event(epoch, BrokersChanged(tuple(ids))))
        self.zk.watch_children(z.BROKER_TOPICS,
                              lambda names: self._watch_event(epoch, TopicsChanged(tuple(names))))
        self.zk.watch_data(z.PREFERRED_REPLICA_ELECTION,
                          lambda _data, _s: self._watch_event(epoch, PreferredElectionAsked()))
        self.zk.watch_children(z.DELETE_TOPICS, lambda names: self._watch_event(
            epoch, TopicsMarkedForDeletion(tuple(names))))
        self.zk.watch_children(z.ISR_CHANGE_NOTIFICATION,
                              lambda names: self._watch_event(epoch, IsrChangesNoticed(tuple(names))))
        self.zk.watch_data(z.REASSIGN_PARTITIONS,
                          lambda _data, _s: self._watch_event(epoch, ReassignZnodeChanged()))

    def _watch_topics(self, topics: tuple[str, ...]) -> None:
        """The first few of ``topics`` watched (those still known), the rest
        left to the next event: events queued meanwhile go first."""
        for topic in topics[:TOPIC_WATCHES_PER_EVENT]:
            if topic in self._topic_znodes:  # else deleted meanwhile (_on_topics)
                self._watch_topic(topic)
        if topics[TOPIC_WATCHES_PER_EVENT:]:
            self._events.put(WatchTopics(topics[TOPIC_WATCHES_PER_EVENT:]))

    def _watch_topic(self, topic: str) -> None:
        if topic in self._watched_topics:
            return
        self._watched_topics.add(topic)
        epoch = self.epoch

        def on_change(data: bytes | None, stat: ZnodeStat | None) -> bool:
            if data is None:
                return False  # deleted; the topics watch forgets it
            return self._watch_event(epoch, TopicChanged(topic) if stat is None else TopicChanged(
                topic, stat.version, stat.czxid))
        self.zk.watch_data(z.topic_path(topic), on_change)

    def _watch_event(self, epoch: int, event: ControllerEvent) -> bool:
        if self._stopped or not self.active or self.epoch != epoch:
            return False  # this term is over: drop the watch
        self._events.put(event)
        return True

    @property
    def _electable(self) -> set[int]:
        """Brokers that may take leadership: alive and not in a controlled
        shutdown (Kafka's liveBrokerIds, as opposed to liveOrShuttingDownBrokerIds)."""
        return self._live - self._shutting_down.keys()

    def _read_live_brokers(self) -> set[int]:
        return {int(c) for c in self.zk.get_children(z.BROKER_IDS) if c.isdigit()}

    def _read_topic(self, topic: str) -> None:
        self._read_topics([topic])

    def _read_topics(self, topics: list[str]) -> None:
        """Topics' assignments and their partitions' states, each kind in one
        ZooKeeper pipeline (not a round trip per topic: taking office at
        30,000 partitions read them topic after topic)."""
        partitions: list[Partition] = []
        for topic, found in zip(topics, self.zk.get_many([z.topic_path(t) for t in topics])):
            if found is None:
                self._forget_topic(topic)
                continue
            data, stat = found
            try:
                assignment = z.decode_topic(topic, data)
            except z.ZNodeFormatError as e:
                log.warning("controller: ignoring %s", e)
                continue
            self._topic_znodes[topic] = TopicZnode(assignment, stat.version, stat.czxid)
            self._assignments[topic] = {p: list(r) for p, r in assignment.partitions.items()}
            for p, replicas in assignment.partitions.items():
                running = ra.from_znode(replicas, assignment.adding_replicas.get(p, ()),
                                        assignment.removing_replicas.get(p, ()))
                if running is None:
                    self._reassigning.pop((topic, p), None)
                else:
                    self._reassigning[(topic, p)] = running
            partitions += [(topic, p) for p in assignment.partitions]
        self._read_states(partitions)

    def _read_state(self, tp: Partition) -> None:
        self._read_states([tp])

    def _read_states(self, partitions: list[Partition]) -> None:
        """``_read_state`` for many partitions, in one ZooKeeper pipeline."""
        read = self.zk.get_many([z.partition_state_path(*tp) for tp in partitions])
        for tp, found in zip(partitions, read):
            if found is None:
                self._states.pop(tp, None)
                continue
            s = z.decode_partition_state(tp[0], tp[1], found[0])
            self._states[tp] = (LeaderAndIsr(s.leader, s.leader_epoch, s.isr), found[1].version)

    def _forget_topic(self, topic: str) -> None:
        self._assignments.pop(topic, None)
        self._topic_znodes.pop(topic, None)
        self._watched_topics.discard(topic)  # its watch ends as it sees the deletion
        for tp in [tp for tp in self._states if tp[0] == topic]:
            del self._states[tp]
        for tp in [tp for tp in self._reassigning if tp[0] == topic]:
            del self._reassigning[tp]

    def _partitions_without_state(self) -> list[Partition]:
        return [(t, p) for t, parts in self._assignments.items() for p in parts
                if (t, p) not in self._states]

    # ---------------------------------------------------------------- events

    def _on_brokers(self, ids: tuple[str, ...]) -> None:
        live = {int(c) for c in ids if c.isdigit()}
        dead, born = self._live - live, live - self._live
        self._live = live
        # (a broker that stopped and registered again between two reads of
        # the registrations was never seen gone: its new registration tells)
        self._shutting_down = {b: asked for b, asked in self._shutting_down.items()
                               if b in live and self._registration(b) == asked}
        if dead:
            log.info("controller: broker(s) %s went away", sorted(dead))
            self._replicas_gone(dead)
        if born:
            log.info("controller: broker(s) %s joined", sorted(born))
        # Partitions without a leader (or never started) may have one now.
        self._bring_online(list(self._states) + self._partitions_without_state())

    def _registration(self, broker: int) -> int | None:
        """The czxid of ``broker``'s registration (None: not registered)."""
        try:
            return self.zk.get(z.broker_path(broker))[1].czxid
        except NoNodeError:
            return None

    def _replicas_gone(self, dead: set[int]) -> None:
        """Replicas on ``dead`` brokers leave their ISRs (and leadership)."""
        self._decide_each(self._offline_decisions([
            (tp, sorted(hit)) for tp, (state, _) in self._states.items()
            if (hit := ({state.leader} | set(state.isr)) & dead)]))

    def _offline_decisions(self, hits: list[tuple[Partition, list[int]]]
                           ) -> list[tuple[Partition, Decision]]:
        """Each partition's replicas that went offline, as decisions; the
        electable brokers and each topic's unclean-election setting worked out
        once for all of them (a broker's death at 30,000 partitions is 10,000
        elections, and a topic's config is built anew on each look)."""
        electable = self._electable
        unclean_of: dict[str, bool] = {}

        def unclean(topic: str) -> bool:
            if topic not in unclean_of:
                unclean_of[topic] = self._unclean(topic)
            return unclean_of[topic]
        return [(tp, partial(self._offline_steps, tp, replicas=replicas, electable=electable,
                             unclean=unclean)) for tp, replicas in hits]

    def _offline_steps(self, tp: Partition, state: LeaderAndIsr, replicas: list[int],
                       electable: set[int], unclean: Callable[[str], bool]
                       ) -> LeaderAndIsr | None:
        changed = None
        for replica in replicas:
            changed = self._offline_step(tp, changed or state, replica, electable,
                                         unclean) or changed
        return changed

    def _offline_step(self, tp: Partition, state: LeaderAndIsr, replica: int,
                      electable: set[int], unclean: Callable[[str], bool]
                      ) -> LeaderAndIsr | None:
        # First a new leader from the ISR (Kafka's partition state machine),
        # then the dead replica leaves the ISR (its replica state machine).
        elected = elect_offline(self._assignments[tp[0]][tp[1]], state, electable,
                                unclean(tp[0])) if state.leader == replica else None
        base = elected or state
        shrunk = remove_from_isr(base, replica) if replica in base.isr else None
        if shrunk is not None and elected is not None:
            # One decision, one epoch bump.
            shrunk = LeaderAndIsr(shrunk.leader, elected.leader_epoch, shrunk.isr)
        return shrunk or elected

    def _on_topics(self, names: tuple[str, ...]) -> None:
        known = set(self._assignments)
        fresh = sorted(set(names) - known)
        self._read_topics(fresh)
        for topic in fresh:
            self._watch_topic(topic)
        for topic in known - set(names):
            self._forget_topic(topic)
        self._bring_online(self._partitions_without_state())

    def _on_topic(self, topic: str, version: int | None = None,
                  created: int | None = None) -> None:
        """A topic's assignment changed (partitions added). A version already
        read (the watch's first call, made as it is set up right after the
        topic was read; or our own reassignment write) is nothing new: at
        30,000 partitions a re-read of every topic's states on taking office
        queued seconds of reads ahead of a broker's death. The same version
        of another znode (the topic deleted and created again, back at
        version 0, between our read and the watch) is a new topic, whose
        partitions have no state yet: its creation zxid tells them apart."""
        known = self._topic_znodes.get(topic)
        if (version is not None and known is not None and known.version == version
                and known.created == created):
            return
        self._read_topic(topic)
        self._bring_online(self._partitions_without_state())

    def _on_preferred_election(self) -> None:
        try:
            data = self.zk.get(z.PREFERRED_REPLICA_ELECTION)[0]
        except NoNodeError:
            return
        try:
            wanted = z.decode_partition_list(z.PREFERRED_REPLICA_ELECTION, data)
        except z.ZNodeFormatError as e:
            log.warning("controller: %s", e)
            wanted = []
        # Leaders change ISRs without us (and tell us later through
        # notifications): decide on what is written now.
        known = [tp for tp in wanted if tp[1] in self._assignments.get(tp[0], {})]
        self._read_states(known)
        self._decide_each([(tp, partial(elect_preferred, self._assignments[tp[0]][tp[1]],
                                        live=self._electable)) for tp in known])
        try:
            self.zk.delete(z.PREFERRED_REPLICA_ELECTION)  # done, as Kafka signals it
        except NoNodeError:
            pass

    def controlled_shutdown(self, broker_id: int, broker_epoch: int, timeout: float
                            ) -> list[Partition] | ShutdownRefused | None:
        """Move leadership off ``broker_id`` and take it out of the ISRs (Kafka's
        ControlledShutdown, handled on the controller), asked by the run of it
        registered with ``broker_epoch`` (UNKNOWN_BROKER_EPOCH: not checked);
        returned: the partitions it still leads although another live in-sync
        replica could take them (the broker asks again), why it was refused,
        or None when this broker is not the controller (or the decision did
        not come in time). Blocking: call it from a worker thread."""
        if not self.active:
            return None
        event = ControlledShutdown(broker_id, broker_epoch)
        self._events.put(event)
        if not event.reply.wait(timeout) or not self.active:
            return None
        return event.reply.value

    def elect_leaders(self, partitions: list[Partition] | None, unclean: bool,
                      timeout: float) -> dict[Partition, ErrorCode] | None:
        """ElectLeaders on the controller: the preferred replica (or, unclean,
        any live replica of a leaderless partition) for each partition (None:
        all); per partition the error Kafka answers. None when this broker is
        not the controller. Blocking: call it from a worker thread."""
        if not self.active:
            return None
        event = ElectLeaders(partitions, unclean)
        self._events.put(event)
        if not event.reply.wait(timeout) or not self.active:
            return None
        return event.reply.value

    def _on_elect_leaders(self, partitions: list[Partition] | None,
                          unclean: bool) -> dict[Partition, ErrorCode]:
        out: dict[Partition, ErrorCode] = {}
        wanted = partitions if partitions is not None else sorted(self._states)
        for tp in wanted:
            replicas = self._assignments.get(tp[0], {}).get(tp[1])
            if replicas is None:
                out[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            self._read_state(tp)
            if tp not in self._states:
                out[tp] = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                continue
            state = self._states[tp][0]
            answer = election_answer(replicas, state, self._live, self._electable, unclean)
            if answer is not None:
                out[tp] = answer
            elif unclean:
                self._decide(tp, partial(elect_offline, replicas, live=self._electable, unclean=True))
                ok = self._states.get(tp, (state,))[0].leader in self._electable
                out[tp] = ErrorCode.NONE if ok else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
            else:
                self._decide(tp, partial(elect_preferred, replicas, live=self._electable))
                ok = self._states.get(tp, (state,))[0].leader == replicas[0]
                out[tp] = ErrorCode.NONE if ok else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        return elections_reported(out, partitions is None)

    def _periodic_due(self) -> bool:
        return self._rebalance_due() or (bool(self._reassigning)
                                         and time.monotonic() >= self._next_reassign_check)

    def _recheck_reassignments(self) -> None:
        """Running reassignments complete on the ISR change notifications leaders
        leave; a notification lost with a connection (the state written, the
        notice not) must not stall one, so their states are re-read every
        REASSIGN_RECHECK_S (Kafka's controller watches those state znodes)."""
        if not self._reassigning or time.monotonic() < self._next_reassign_check:
            return
        self._next_reassign_check = time.monotonic() + REASSIGN_RECHECK_S
        for tp in list(self._reassigning):
            self._read_state(tp)
            self._maybe_complete(tp)

    def _rebalance_due(self) -> bool:
        return (self.active and self._rebalance().enabled
                and time.monotonic() >= self._next_rebalance)

    def _maybe_rebalance(self) -> None:
        """auto.leader.rebalance.enable: every check interval, a broker leading
        too few of the partitions it is the preferred leader of (more than
        leader.imbalance.per.broker.percentage of them led elsewhere) gets them
        back, where it is in the ISR (Kafka's checkAndTriggerAutoLeaderRebalance)."""
        if not self._rebalance_due():
            return
        policy = self._rebalance()
        self._next_rebalance = time.monotonic() + policy.interval_s
        preferred_of: dict[int, list[Partition]] = {}
        for tp, (state, _) in self._states.items():
            replicas = self._assignments.get(tp[0], {}).get(tp[1])
            if replicas and len(replicas) > 1:
                preferred_of.setdefault(replicas[0], []).append(tp)
        for broker, tps in preferred_of.items():
            if broker not in self._live or broker in self._shutting_down:
                continue
            elsewhere = [tp for tp in tps if self._states[tp][0].leader != broker]
            if elsewhere and len(elsewhere) * 100 > policy.imbalance_percent * len(tps):
                log.info("controller: broker %d leads %d of its %d preferred partitions; "
                         "moving leadership back", broker, len(tps) - len(elsewhere), len(tps))
                self._decide_each([(tp, partial(elect_preferred, self._assignments[tp[0]][tp[1]],
                                                live=self._electable)) for tp in elsewhere])

    # ---------------------------------------------------------------- reassignment

    def reassign(self, requests: dict[Partition, list[int] | None], timeout: float,
                 allow_replication_factor_change: bool = True
                 ) -> dict[Partition, ReassignResult] | None:
        """AlterPartitionReassignments on the controller: per partition a target
        replica list to move to, or None to cancel a running reassignment; the
        answer per partition once it has started (it completes in the
        background). None when this broker is not the controller; TimeoutError
        when the decision did not come within ``timeout`` (it may still be
        carried out). Blocking."""
        if not self.active:
            return None
        event = Reassign(requests, allow_replication_factor_change)
        self._events.put(event)
        if not event.reply.wait(timeout):
            raise TimeoutError(f"the controller did not decide within {timeout:g} s")
        if not self.active:
            return None
        return event.reply.value

    def reassignments(self) -> dict[Partition, ra.Reassignment] | None:
        """The reassignments running now (ListPartitionReassignments); None when
        this broker is not the controller."""
        if not self.active:
            return None
        return dict(self._reassigning)

    def _on_reassign(self, requests: Mapping[Partition, list[int] | None],
                     allow_replication_factor_change: bool = True, from_znode: bool = False
                     ) -> dict[Partition, ReassignResult]:
        deleting = set(self.zk.get_children(z.DELETE_TOPICS))
        out: dict[Partition, ReassignResult] = {}
        for tp, target in requests.items():
            if tp[1] not in self._assignments.get(tp[0], {}) or tp[0] in deleting:
                out[tp] = ra.unknown_partition(tp)
            else:
                running = self._reassigning.get(tp)
                current = self._assignments[tp[0]][tp[1]]
                original = running.original if running else tuple(current)
                if target is None:
                    out[tp] = self._cancel(tp)
                else:
                    refused = ra.refusal(target, self._live, original,
                                         allow_replication_factor_change)
                    if refused is not None:
                        out[tp] = refused
                    elif ra.begin(current, running, target) is None:
                        # The original replicas: nothing to move, and a running
                        # reassignment is cancelled (as Kafka treats it).
                        out[tp] = self._cancel(tp) if running else (ErrorCode.NONE, None)
                    else:
                        self._begin(tp, tuple(target))
                        out[tp] = (ErrorCode.NONE, None)
            if not from_znode and out[tp][0] == ErrorCode.NONE:
                # The API's word replaces a ZooKeeper-era tool's for this partition,
                # as in Kafka (else the znode's target would come back).
                self._prune_reassign_znode({tp})
        return out

    def _on_reassign_znode(self) -> None:
        """/admin/reassign_partitions, as ZooKeeper-era kafka-reassign-partitions
        writes it: each partition listed starts moving (unless it already is, to
        that target); refused ones leave the znode at once, the others as they
        complete, and the znode goes when it is empty, as Kafka signals it."""
        try:
            wanted = z.decode_reassignment(self.zk.get(z.REASSIGN_PARTITIONS)[0])
        except NoNodeError:
            return
        except z.ZNodeFormatError as e:
            log.warning("controller: %s; deleting it", e)
            wanted = {}
        fresh = {tp: r for tp, r in wanted.items()
                 if tp not in self._reassigning or list(self._reassigning[tp].target) != r}
        results = self._on_reassign(fresh, from_znode=True) if fresh else {}
        for tp, (code, message) in results.items():
            if code != ErrorCode.NONE:
                log.warning("controller: reassignment of %s-%d to %s refused: %s", *tp,
                            wanted[tp], message)
        self._prune_reassign_znode({tp for tp in wanted if tp not in self._reassigning})

    def _prune_reassign_znode(self, finished: set[Partition]) -> None:
        """Take ``finished`` partitions off /admin/reassign_partitions."""
        for _ in range(10):
            try:
                data, stat = self.zk.get(z.REASSIGN_PARTITIONS)
            except NoNodeError:
                return
            try:
                listed = z.decode_reassignment(data)
            except z.ZNodeFormatError:
                listed = {}
            keep = {tp: r for tp, r in listed.items() if tp not in finished}
            if len(keep) == len(listed) and listed:
                return
            try:
                if keep:
                    self.zk.set(z.REASSIGN_PARTITIONS, z.encode_reassignment(keep),
                                version=stat.version)
                else:
                    self.zk.delete(z.REASSIGN_PARTITIONS, version=stat.version)
                return
            except (BadVersionError, NoNodeError):
                continue  # the tool wrote it again meanwhile: read it again

    def _begin(self, tp: Partition, target: tuple[int, ...]) -> None:
        """Write the replica list as original + target, with the replicas being
        added and removed, and a new leader epoch: the new replicas start
        following, the leader starts tracking them."""
        def step(current: list[int], running: ra.Reassignment | None,
                 state: LeaderAndIsr | None):
            r = ra.begin(current, running, target)
            if r is None:
                return None
            # A new epoch for the new replica list; replicas a re-targeted
            # reassignment drops leave the ISR and leadership now.
            after = ra.finish(r.full, state, self._electable) if state else None
            return list(r.full), r, after
        if self._reassign_step(tp, step):
            log.info("controller: reassigning %s-%d to %s", *tp, list(target))
        self._maybe_complete(tp)

    def _maybe_complete(self, tp: Partition) -> None:
        def step(current: list[int], running: ra.Reassignment | None,
                 state: LeaderAndIsr | None):
            if running is None or state is None or not ra.is_complete(running, state):
                return None
            return list(running.target), None, ra.finish(running.target, state, self._electable)
        if self._reassign_step(tp, step):
            log.info("controller: reassignment of %s-%d to %s complete", *tp,
                     self._assignments[tp[0]][tp[1]])
            self._prune_reassign_znode({tp})

    def _cancel(self, tp: Partition) -> ReassignResult:
        """Back to the original replicas, at once: the added ones are dropped."""
        running = self._reassigning.get(tp)
        if running is None:
            return ra.nothing_to_cancel(tp)
        self._read_state(tp)
        state = self._states.get(tp, (None,))[0]
        if state is not None and not ra.can_cancel(running, state, self._electable):
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"none of the original replicas {list(running.original)} of "
                    f"{tp[0]}-{tp[1]} is alive and in sync: cancelling would drop the "
                    f"in-sync copies")

        def step(current: list[int], running: ra.Reassignment | None,
                 state: LeaderAndIsr | None):
            if running is None:
                return None
            after = ra.finish(running.original, state, self._electable) if state else None
            return list(running.original), None, after
        if self._reassign_step(tp, step):
            log.info("controller: reassignment of %s-%d cancelled", *tp)
            self._prune_reassign_znode({tp})
        return ErrorCode.NONE, None

    def _reassign_step(self, tp: Partition, step) -> bool:
        """Apply ``step(replicas, running, state) -> (replicas, running, state) |
        None`` and write the topic znode and the partition state in one
        transaction (fenced by the controller epoch, conditional on both
        versions), re-reading and deciding again after a conflict. True when
        something was written."""
        topic, partition = tp
        for _ in range(10):
            if topic not in self._topic_znodes:
                return False
            assignment, topic_version, created = self._topic_znodes[topic]
            state, state_version = self._states.get(tp, (None, None))
            decided = step(self._assignments[topic][partition], self._reassigning.get(tp), state)
            if decided is None:
                return False
            replicas, running, new_state = decided
            if running is not None and not running.adding and not running.removing:
                # The same replicas in another order (a revert read back from the
                # znode has the full list's order): nothing to copy, so it is
                # complete at once with the new order, as in Kafka.
                running = None
            adding = dict(assignment.adding_replicas)
            removing = dict(assignment.removing_replicas)
            adding.pop(partition, None)
            removing.pop(partition, None)
            if running is not None:
                adding[partition], removing[partition] = running.adding, running.removing
            new_assignment = z.TopicAssignment(
                {**assignment.partitions, partition: replicas}, assignment.topic_id,
                {p: r for p, r in adding.items() if r}, {p: r for p, r in removing.items() if r})
            writes = [SetData(z.topic_path(topic), z.encode_topic(new_assignment), topic_version)]
            if new_state is not None:
                if state_version is None:  # the steps decide a new state only from a read one
                    raise RuntimeError(f"reassigning {topic}-{partition}: a new state for a "
                                       f"partition without one")
                writes.append(SetData(z.partition_state_path(*tp), self._state_bytes(new_state),
                                      state_version))
            try:
                results = self.zk.commit_fenced(self._epoch_version, writes)
            except (BadVersionError, NoNodeError):
                self._read_topic(topic)  # a leader's ISR write or a tool's: decide again
                continue
            self._topic_znodes[topic] = TopicZnode(new_assignment, results[0], created)
            self._assignments[topic][partition] = list(replicas)
            if running is None:
                self._reassigning.pop(tp, None)
            else:
                self._reassigning[tp] = running
            if new_state is not None:
                self._states[tp] = (new_state, results[1])
            return True
        log.warning("controller: gave up reassigning %s-%d after repeated conflicts", *tp)
        return False

    def _on_controlled_shutdown(self, broker_id: int, broker_epoch: int
                                ) -> list[Partition] | ShutdownRefused:
        registration = self._registration(broker_id)
        refused = shutdown_refused(broker_id in self._live, registration, broker_epoch)
        if refused is not None:
            log.info("controller: controlled shutdown of broker %d refused: %s (epoch %d, "
                     "registered with %s)", broker_id, refused.value, broker_epoch, registration)
            return refused
        assert registration is not None
        self._shutting_down[broker_id] = registration
        log.info("controller: controlled shutdown of broker %d", broker_id)
        self._decide_each(self._shutdown_decisions(self._states))
        # A partition with no other live in-sync replica has nowhere to go (one
        # replica, or the others are down): the broker is not kept waiting for it.
        return sorted(tp for tp, (state, _) in self._states.items()
                      if state.leader == broker_id
                      and any(r in self._live and r not in self._shutting_down
                              for r in state.isr if r != broker_id))

    def _shutdown_decisions(self, tps: Iterable[Partition]) -> list[tuple[Partition, Decision]]:
        """Of ``tps``, each replicated partition a broker in a controlled
        shutdown leads or is in the ISR of, as a decision moving it off."""
        stopping = self._shutting_down.keys()
        return [(tp, partial(elect_for_shutdown, replicas, live=self._live,
                             shutting_down=stopping))
                for tp in tps if (found := self._states.get(tp)) is not None
                and len(replicas := self._assignments.get(tp[0], {}).get(tp[1], [])) > 1
                and (found[0].leader in stopping or not stopping.isdisjoint(found[0].isr))]

    def _on_isr_changes(self, names: tuple[str, ...]) -> None:
        """Leaders changed ISRs (they write the state znodes themselves and leave
        a notification): re-read those states, so the next decision starts from
        them, and remove the notifications, as Kafka's controller does.

        Each watch event lists every notification present, and thousands
        arrive while followers rejoin after a restart: a notification
        handled already (its znode deleted, so no later listing has it) is
        skipped, and the new ones are read, their states re-read and they are
        deleted in a few requests, not a round trip each (handling every
        listed one one by one queued minutes of reads ahead of a broker's death)."""
        listed = set(names)
        self._isr_notices_handled &= listed
        fresh = sorted(listed - self._isr_notices_handled)
        if not fresh:
            return
        paths = [f"{z.ISR_CHANGE_NOTIFICATION}/{name}" for name in fresh]
        changed: set[Partition] = set()
        for path, found in zip(paths, self.zk.get_many(paths)):
            if found is None:
                continue
            try:
                changed.update(z.decode_partition_list(path, found[0]))
            except z.ZNodeFormatError as e:
                log.warning("controller: %s", e)
        known = sorted(tp for tp in changed if tp[1] in self._assignments.get(tp[0], {}))
        self._read_states(known)
        for tp in known:
            if tp in self._reassigning:  # a target replica may have caught up
                self._maybe_complete(tp)
        # Leaders change ISRs without asking us: one may have taken back a
        # follower whose broker has died since (it was shutting down), in
        # a change we read only now, after handling that death. Kafka's
        # controller refuses such an ISR (AlterPartition); here it is
        # undone, or the dead replica stays in the ISR for good (with no
        # new writes to fall behind on, nothing else takes it out).
        self._decide_each(self._offline_decisions([
            (tp, sorted(dead)) for tp in known if tp in self._states
            if (dead := set(self._states[tp][0].isr) - self._live)]))
        # The same for one taken back while it is still shutting down (Kafka
        # refuses an ISR naming a broker in a controlled shutdown as
        # ineligible): it stops at once, and acks=all would wait on it.
        if self._shutting_down:
            self._decide_each(self._shutdown_decisions(known))
        self.zk.delete_each(paths)
        self._isr_notices_handled.update(fresh)

    def _on_delete_topics(self, names: tuple[str, ...]) -> None:
        """Topics marked for deletion under /admin/delete_topics (by a broker
        handling DeleteTopics, or by a ZooKeeper-era kafka-topics): their znodes
        go, brokers delete their logs when they see the topic gone, and the
        marker goes last, as Kafka signals that a deletion is complete."""
        for topic in names:
            if topic in INTERNAL_TOPICS:
                log.warning("controller: refusing to delete internal topic %s", topic)
            else:
                try:
                    for path in (z.topic_path(topic), z.topic_config_path(topic)):
                        self._delete_tree(path)
                except NotEmptyError:
                    log.warning("controller: topic %s keeps gaining znodes; deletion left "
                                "pending", topic)
                    continue  # the marker stays: the next controller tries again
                self._forget_topic(topic)
                log.info("controller: deleted topic %s", topic)
            try:
                self.zk.delete(z.delete_topic_path(topic))
            except NoNodeError:
                pass

    def _delete_tree(self, path: str) -> None:
        """Delete a znode and its children; a child created meanwhile (by a
        tool) makes it try again, a few times, then NotEmptyError."""
        for attempt in range(5):
            try:
                self.zk.delete(path, recursive=True)
                return
            except NoNodeError:
                return
            except NotEmptyError:
                if attempt == 4:
                    raise

    # ---------------------------------------------------------------- writing

    def _bring_online(self, partitions: list[Partition]) -> None:
        first: list[tuple[Partition, LeaderAndIsr]] = []
        elections: list[tuple[Partition, Decision]] = []
        # Looked at for every partition on each broker change (30,000 at
        # scale): the sets and each topic's setting are worked out once.
        electable = self._electable
        unclean: dict[str, bool] = {}
        for tp in sorted(set(partitions)):
            replicas = self._assignments.get(tp[0], {}).get(tp[1])
            if replicas is None:
                continue
            if tp not in self._states:
                state = initial_state(replicas, electable)
                if state is not None:
                    first.append((tp, state))
            elif self._states[tp][0].leader not in electable:  # else led: nothing to elect
                if tp[0] not in unclean:
                    unclean[tp[0]] = self._unclean(tp[0])
                elections.append((tp, partial(elect_offline, replicas, live=electable,
                                              unclean=unclean[tp[0]])))
        if first:
            self._write_new_each(first)
        self._decide_each(elections)

    def _decide(self, tp: Partition, decide: Decision) -> None:
        self._decide_each([(tp, decide)])

    def _decide_each(self, decisions: list[tuple[Partition, Decision]]) -> None:
        """Apply each decision to its partition's current state and write them
        (in one ZooKeeper pipeline), re-reading and deciding again those someone
        else wrote in between.

        Decisions are made as the writes take them (a generator), so the first
        go to ZooKeeper at once: deciding 30,000 partitions before writing any
        was 1.6 s of a busy broker's take-over with ZooKeeper idle."""
        pending = dict(decisions)
        for _ in range(10):
            laps = Laps()
            writes: list[tuple[Partition, LeaderAndIsr]] = []  # as decided, in order
            cpu = time.thread_time(), self.zk.connection_cpu_s()
            outcomes = self.zk.commit_fenced_each(self._epoch_version,
                                                  self._decided_writes(pending, writes))
            if not writes:
                return
            laps.lap("decided and written")
            if len(writes) >= 1000:
                kazoo_cpu = self.zk.connection_cpu_s()
                log.info("controller: %d of %d decisions made and written in %s; CPU: this "
                         "thread %.2f s, kazoo's connection thread %s", len(writes),
                         len(pending), laps, time.thread_time() - cpu[0],
                         "?" if kazoo_cpu is None or cpu[1] is None
                         else "%.2f s" % (kazoo_cpu - cpu[1]))
            conflicts: list[Partition] = []
            decided: list[tuple[Partition, LeaderAndIsr]] = []
            for (tp, new), outcome in zip(writes, outcomes):
                if isinstance(outcome, (BadVersionError, NoNodeError)):
                    conflicts.append(tp)
                elif isinstance(outcome, Exception):
                    _log_states("leader", decided)
                    raise outcome  # replaced (NotControllerError), or ZooKeeper failing
                else:
                    self._states[tp] = (new, outcome[0])
                    decided.append((tp, new))
            _log_states("leader", decided)
            if not conflicts:
                return
            self._read_states(conflicts)
            pending = {tp: pending[tp] for tp in conflicts}
        for tp in pending:
            log.warning("controller: gave up deciding %s-%d after repeated conflicts", *tp)

    def _decided_writes(self, pending: Mapping[Partition, Decision],
                        writes: list[tuple[Partition, LeaderAndIsr]]
                        ) -> Iterator[list[SetData | Create]]:
        """Each decision that changes its partition: noted in ``writes`` and
        yielded as its fenced write, as the writer asks for the next."""
        for tp, decide in pending.items():
            if tp in self._states:  # else the partition is gone
                state, version = self._states[tp]
                new = decide(state)
                if new is not None:
                    writes.append((tp, new))
                    yield [SetData(z.partition_state_path(*tp), self._state_bytes(new), version)]

    def _state_bytes(self, state: LeaderAndIsr) -> bytes:
        return z.encode_partition_state(z.PartitionState(state.leader, state.leader_epoch,
                                                         state.isr, self.epoch))

    def _write_new_each(self, first: list[tuple[Partition, LeaderAndIsr]]) -> None:
        """The first state of each partition, in ZooKeeper transactions that
        create its partition znode too (one request per hundred partitions;
        brokers following the topic find the state with the partition)."""
        # Not ensure_path: that would re-create the topic's own znode (empty) if
        # the topic has just been deleted, leaving its name unusable.
        topics = sorted({tp[0] for tp, _ in first})
        gone = {topic for topic, error in zip(topics, self.zk.create_each(
            [z.partitions_path(topic) for topic in topics])) if isinstance(error, NoNodeError)}
        first = [(tp, state) for tp, state in first if tp[0] not in gone]
        outcomes = self.zk.commit_fenced_each(self._epoch_version, [
            [Create(z.partition_path(*tp), b""), Create(z.partition_state_path(*tp),
                                                        self._state_bytes(state))]
            for tp, state in first])
        # A partition znode left by an earlier term (its state maybe too): the
        # state alone, as before partition znodes were created with it.
        existing = [(tp, state) for (tp, state), outcome in zip(first, outcomes)
                    if isinstance(outcome, NodeExistsError)]
        if existing:
            self.zk.create_each([z.partition_path(*tp) for tp, _ in existing])
            again = dict(zip((tp for tp, _ in existing), self.zk.commit_fenced_each(
                self._epoch_version, [[Create(z.partition_state_path(*tp),
                                              self._state_bytes(state))]
                                      for tp, state in existing])))
            outcomes = [again.get(tp, outcome) for (tp, _), outcome in zip(first, outcomes)]
        raced: list[Partition] = []
        online: list[tuple[Partition, LeaderAndIsr]] = []
        for (tp, state), outcome in zip(first, outcomes):
            if isinstance(outcome, NodeExistsError):
                raced.append(tp)  # created meanwhile (an older controller's write)
            elif isinstance(outcome, NoNodeError):
                continue  # deleted meanwhile
            elif isinstance(outcome, Exception):
                _log_states("online, leader", online)
                raise outcome
            else:
                self._states[tp] = (state, 0)
                online.append((tp, state))
        _log_states("online, leader", online)
        self._read_states(raced)


class Laps:
    """Wall time of the phases of a long piece of work, for its log line."""

    def __init__(self) -> None:
        self._start = self._last = time.monotonic()
        self._laps: list[tuple[str, float]] = []

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self._laps.append((name, now - self._last))
        self._last = now

    def __str__(self) -> str:
        return "%.2f s (%s)" % (self._last - self._start,
                                ", ".join(f"{name} {s:.2f}" for name, s in self._laps))


LOGGED_ONE_BY_ONE = 20  # decisions of one batch logged a line each at INFO; beyond, at DEBUG


def _log_states(what: str, decided: list[tuple[Partition, LeaderAndIsr]]) -> None:
    """The states just written: a line each for a few, else a summary (a
    broker's death at 30,000 partitions is 10,000 decisions, and a line each
    on an unbuffered stdout cost the controller a second), with the lines at DEBUG."""
    if not decided:
        return
    one_by_one = len(decided) <= LOGGED_ONE_BY_ONE
    if one_by_one or log.isEnabledFor(logging.DEBUG):
        level = logging.INFO if one_by_one else logging.DEBUG
        for (topic, partition), state in decided:
            log.log(level, "controller: %s-%d %s %d epoch %d isr %s", topic, partition, what,
                    state.leader, state.leader_epoch, list(state.isr))
    if not one_by_one:
        leaders: dict[int, int] = {}
        for _, state in decided:
            leaders[state.leader] = leaders.get(state.leader, 0) + 1
        log.info("controller: %d partitions %s (partitions per leader: %s); first %s-%d, "
                 "last %s-%d", len(decided), "online" if what.startswith("online") else "decided",
                 dict(sorted(leaders.items())), *decided[0][0], *decided[-1][0])
