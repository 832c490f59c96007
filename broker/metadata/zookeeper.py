"""The ZooKeeper metadata store: Kafka's own znode layout, through kazoo.

Several brokers share one ZooKeeper ensemble, and so does any tool written
against Kafka's ZooKeeper layout (see zk_layout.py for the znodes and JSON).
This store is the broker's view of that shared state:

- at start it connects (``zookeeper.connect`` with an optional chroot, which
  is created when missing), creates Kafka's persistent paths, reads or
  creates ``/cluster/id`` and registers the broker under the ephemeral
  ``/brokers/ids/<id>``; an id already registered by a live broker refuses
  to start, naming the id;
- it keeps an immutable snapshot of the brokers and topics, replaced (never
  mutated) from ZooKeeper watches, so readers on any thread need no lock and
  a topic created by another broker or written by a tool shows up by itself;
- writes go straight to ZooKeeper in the order Kafka's admin client writes
  them (topic config before the topic, then a change notice), with
  conditional updates on znode versions where two writers could race
  (partition counts, producer-id blocks);
- when its session expires it re-registers the broker and re-reads
  everything, since watches and ephemeral nodes died with the session (the
  watches' re-reads share a few threads: _WatchReadPool);
- until the broker registers, a lost connection or an expired session is
  waited out rather than failing the broker's start (_StartingKazooClient).

Partition state and leader election are the controller's
(broker/cluster/controller.py). DeleteTopics through a broker writes Kafka's
marker and removes the topic's znodes itself, so it answers once the topic is
gone; a marker written by a ZooKeeper-era tool is carried out by the controller.
"""
from __future__ import annotations

import base64
import functools
import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (BadVersionError, ConnectionClosedError, ConnectionLoss,
                              KazooException, NoNodeError, NodeExistsError,
                              OperationTimeoutError, SessionExpiredError)
from kazoo.handlers.threading import KazooTimeoutError, SequentialThreadingHandler
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.retry import KazooRetry

from ..cluster.assignment import assign_replicas
from . import zk_layout as z
from .store import (INTERNAL_TOPICS, BrokerEndpoint, IsrUpdate, ListenerEndpoint,
                    MetadataStore, MetadataUnavailableError,
                    PartitionMeta, TopicExistsError, TopicMeta, UnknownTopicError, kafka_id,
                    new_cluster_id)

log = logging.getLogger("broker.metadata.zookeeper")



class ZooKeeperStoreError(Exception):
    """The store cannot do what was asked (unreachable, refused, malformed)."""


class BrokerIdInUseError(ZooKeeperStoreError):
    def __init__(self, broker_id: int) -> None:
        super().__init__(f"broker.id {broker_id} is already registered in ZooKeeper by a "
                         f"running broker ({z.broker_path(broker_id)}); give every broker "
                         f"its own broker.id")
        self.broker_id = broker_id


def retriable_on_zookeeper_errors(method):
    """A write that ZooKeeper could not take (connection lost, session gone)
    is a retriable condition for the caller, not a bug."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except (KazooException, KazooTimeoutError) as e:
            raise MetadataUnavailableError(
                f"ZooKeeper is not reachable ({type(e).__name__}); try again") from e
    return wrapper


WATCH_READ_THREADS = 8  # kazoo's watch re-reads after a reconnection, at a time
WAIT_WARNING_S = 10.0  # how often a start waiting for ZooKeeper says so


class _WatchReadPool(SequentialThreadingHandler):
    """kazoo's threading handler, except that the watch recipes' re-reads run
    on a few threads: kazoo spawns a thread per DataWatch each time the
    connection comes back (and per ChildrenWatch whose watch was lost), and
    this store keeps a watch per partition state, so every session expiry
    started a thread per partition (~1,000 on a broker with 1,000
    partitions). Everything else kazoo spawns (its connection loop, its
    event workers) and this store's own retries keep a thread each."""

    def __init__(self, workers: int = WATCH_READ_THREADS) -> None:
        super().__init__()
        self._workers_max = workers
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def spawn(self, func, *args, **kwargs):
        if isinstance(getattr(func, "__self__", None), (DataWatch, ChildrenWatch)):
            with self._pool_lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self._workers_max,
                                                    thread_name_prefix="samsa-zk-watch")
                return self._pool.submit(func, *args, **kwargs)
        return super().spawn(func, *args, **kwargs)

    def stop(self) -> None:
        super().stop()
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            # a re-read still queued has nothing to read from a stopped client
            pool.shutdown(wait=False, cancel_futures=True)


class _StartingKazooClient(KazooClient):
    """A kazoo client whose reads and writes wait for ZooKeeper while
    ``patient`` is set (the broker is starting), as Kafka's ZooKeeperClient
    waits until it is connected again: a connection lost, or a session that
    expired meanwhile (kazoo opens a new one by itself), is waited out instead
    of failing the broker's start halfway with SessionExpiredError. Once the
    broker serves, a ZooKeeper error is a retriable error for the request
    that met it, not a wait on a request handler.

    The wait goes through kazoo's asynchronous calls with a bounded wait: a
    request queued while the connection was down is dropped unanswered by
    kazoo when the session turns out to have expired, and its synchronous
    call would wait for ever."""

    _WAITS = (ConnectionLoss, SessionExpiredError, OperationTimeoutError, KazooTimeoutError)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.patient = False
        self._waited_since: float | None = None  # this wait began (None: not waiting)
        self._warned = 0.0

    def _patiently(self, name: str, *args, **kwargs):
        if not self.patient:
            return getattr(super(), name)(*args, **kwargs)
        call = getattr(self, name + "_async")
        while True:
            try:
                if self._live.wait(1.0):
                    result = call(*args, **kwargs).get(
                        timeout=max(self._session_timeout / 1000, 2.0))
                    if self._waited_since is not None:
                        log.info("ZooKeeper answers again (waited %.1f s)",
                                 time.monotonic() - self._waited_since)
                        self._waited_since = None
                    return result
            except ConnectionClosedError:
                raise  # closed by us: stopping
            except self._WAITS as e:
                if not self.patient:
                    raise
                self._note_wait(type(e).__name__)
                continue
            if self._stopped.is_set():
                raise ConnectionClosedError("the ZooKeeper client was closed")
            if not self.patient:
                raise ConnectionLoss()
            self._note_wait("not connected")

    def _note_wait(self, why: str) -> None:
        now = time.monotonic()
        if self._waited_since is None:
            self._waited_since = self._warned = now
        elif now - self._warned < WAIT_WARNING_S:
            return
        self._warned = now
        log.warning("ZooKeeper is not answering (%s); this broker waits for it to start",
                    why)

    def get(self, *args, **kwargs):
        return self._patiently("get", *args, **kwargs)

    def get_children(self, *args, **kwargs):
        return self._patiently("get_children", *args, **kwargs)

    def exists(self, *args, **kwargs):
        return self._patiently("exists", *args, **kwargs)

    def create(self, *args, **kwargs):
        return self._patiently("create", *args, **kwargs)

    def set(self, *args, **kwargs):
        return self._patiently("set", *args, **kwargs)

    def ensure_path(self, *args, **kwargs):
        return self._patiently("ensure_path", *args, **kwargs)


def topic_uuid(kafka_topic_id: str) -> uuid.UUID:
    """Kafka's 22-character base64url topic id -> UUID."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(kafka_topic_id + "=="))



def _broker_endpoint(reg: "z.BrokerRegistration", own: BrokerEndpoint) -> BrokerEndpoint | None:
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

class ZooKeeperMetadataStore(MetadataStore):
    replicates = True

    def __init__(self, connect: str, broker_id: int, endpoint: BrokerEndpoint, *,
                 session_timeout_ms: int = 18000, connection_timeout_ms: int | None = None,
                 clock: Callable[[], float] = time.time, register: bool = True) -> None:
        """register=False: connect and follow the cluster, but register the broker
        only when register() is called (a broker does once it can serve: Kafka
        registers after its logs are loaded, or the controller would send clients
        to a broker still recovering)."""
        hosts, chroot = z.parse_connect(connect)
        self.broker_id = broker_id
        self._endpoint = endpoint
        self._clock = clock
        self._lock = threading.Lock()          # serializes our own writes
        self._snapshot_lock = threading.Lock()  # one replacement of _topics at a time
        self._brokers: list[BrokerEndpoint] = []
        self._topic_drops: dict[str, int] = {}  # times each name was dropped (_reload_topic)
        self._brokers_lock = threading.Lock()  # guards the two counters below
        self._broker_reads_begun = 0
        self._broker_reads_installed = 0
        self._rereads: set[str] = set()  # what _read_again_later is reading again
        self._rereads_lock = threading.Lock()
        self._topics: dict[str, TopicMeta] = {}
        self._watched_topics: set[str] = set()
        # Leader, epoch and ISR per partition, from the state znodes the
        # controller (and, for ISR changes, leaders) write; replaced, not mutated.
        self._states: dict[tuple[str, int], z.PartitionState] = {}
        self._state_versions: dict[tuple[str, int], int] = {}  # their znode versions
        self._assignments: dict[str, dict[int, tuple[int, ...]]] = {}
        self._state_listeners: list[Callable[[str, int, z.PartitionState | None], None]] = []
        self._topic_listeners: list[Callable[[str], None]] = []
        self._broker_config_listeners: list[Callable[[], None]] = []
        self._entity_config_listeners: list[Callable[[str, dict[str, str]], None]] = []
        self._seen_config_changes: set[str] = set()
        self._controller_id = -1
        self._producer_ids: tuple[int, int] = (0, -1)  # next, last of the claimed block
        self._closed = False
        self._registered = False
        self._session_lost = False
        timeout = (connection_timeout_ms if connection_timeout_ms is not None
                   else session_timeout_ms) / 1000
        if chroot:
            self._ensure_chroot(hosts, chroot, timeout)
        self._session_timeout = session_timeout_ms / 1000
        self.zk = _StartingKazooClient(
            hosts=hosts + (chroot or ""), timeout=session_timeout_ms / 1000,
            handler=_WatchReadPool(),
            # the watch recipes' re-reads: for as long as it takes, but a
            # second apart at most (kazoo's default backs off to an hour)
            command_retry=KazooRetry(max_tries=-1, max_delay=1.0))
        self.zk.patient = True  # until the broker registers (register())
        try:
            self.zk.start(timeout=timeout)
        except KazooTimeoutError:
            self.zk.close()
            raise ZooKeeperStoreError(
                f"could not connect to ZooKeeper at {connect} within {timeout:g} s "
                f"(zookeeper.connect, zookeeper.connection.timeout.ms)") from None
        try:
            for path in z.PERSISTENT_PATHS:
                self.zk.ensure_path(path)
            self.cluster_id = self._read_or_create_cluster_id()
            if register:
                self._register_at_start()
                self.zk.patient = False
            self.zk.add_listener(self._on_state)
            self.zk.ChildrenWatch(z.BROKER_IDS, self._on_broker_ids)
            self.zk.ChildrenWatch(z.BROKER_TOPICS, self._on_topic_names)
            self.zk.DataWatch(z.CONTROLLER, self._on_controller)
            self._seen_config_changes = set(self.zk.get_children(z.CONFIG_CHANGES))
            self.zk.ChildrenWatch(z.CONFIG_CHANGES, self._on_config_changes)
        except (KazooException, KazooTimeoutError) as e:
            self.close()
            raise ZooKeeperStoreError(f"ZooKeeper at {connect} failed while this broker was "
                                      f"starting ({type(e).__name__}); is it overloaded or "
                                      f"is zookeeper.session.timeout.ms too short?") from None
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------ start-up

    @staticmethod
    def _ensure_chroot(hosts: str, chroot: str, timeout: float) -> None:
        # Kafka creates a missing chroot before using it.
        client = KazooClient(hosts=hosts, timeout=timeout)
        deadline = time.monotonic() + timeout
        try:
            client.start(timeout=timeout)
            while True:
                try:
                    client.ensure_path(chroot)
                    return
                except (ConnectionLoss, OperationTimeoutError) as e:
                    # A connection dropped under load: kazoo reconnects; ask again
                    # until zookeeper.connection.timeout.ms, as Kafka waits.
                    if time.monotonic() >= deadline:
                        raise ZooKeeperStoreError(
                            f"ZooKeeper at {hosts} kept dropping the connection "
                            f"({type(e).__name__}) while creating {chroot}") from None
                    time.sleep(0.2)
        except KazooTimeoutError:
            raise ZooKeeperStoreError(f"could not connect to ZooKeeper at {hosts} within "
                                      f"{timeout:g} s (zookeeper.connect)") from None
        finally:
            client.stop()
            client.close()

    def _read_or_create_cluster_id(self) -> str:
        try:
            return z.decode_cluster_id(self.zk.get(z.CLUSTER_ID)[0])
        except NoNodeError:
            pass
        try:
            cluster_id = new_cluster_id()
            self.zk.create(z.CLUSTER_ID, z.encode_cluster_id(cluster_id), makepath=True)
            return cluster_id
        except NodeExistsError:  # another broker won the race
            return z.decode_cluster_id(self.zk.get(z.CLUSTER_ID)[0])

    def _registration(self) -> bytes:
        e = self._endpoint
        listeners = e.listeners or (ListenerEndpoint("PLAINTEXT", e.host, e.port, "PLAINTEXT"),)
        return z.encode_broker(z.BrokerRegistration(
            self.broker_id, tuple((lst.name, lst.host, lst.port) for lst in listeners),
            {lst.name: lst.security_protocol for lst in listeners},
            e.rack, int(self._clock() * 1000)))

    def register(self) -> None:
        """Announce this broker in /brokers/ids (see __init__'s register); from
        here on a ZooKeeper error fails the call that met it instead of
        waiting (_StartingKazooClient)."""
        try:
            self._register_at_start()
        except (KazooException, KazooTimeoutError) as e:
            raise ZooKeeperStoreError(f"registering broker {self.broker_id} in ZooKeeper "
                                      f"failed ({type(e).__name__})") from None
        self.zk.patient = False

    def _register_at_start(self) -> None:
        """Register, waiting out a registration left by this broker's previous
        run (killed: its session lives until ZooKeeper expires it). One that
        outlives a session timeout belongs to a live broker with our id."""
        deadline = time.monotonic() + self._session_timeout * 1.5 + 1
        waited = False
        while True:
            try:
                self._register()
                self._registered = True
                return
            except (KazooException, KazooTimeoutError):
                # the connection dropped (a loaded machine, a short session timeout):
                # kazoo reconnects, try again within the same deadline
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
                continue
            except BrokerIdInUseError:
                if time.monotonic() > deadline:
                    raise
                if not waited:
                    log.warning("broker.id %d is registered by another ZooKeeper session; "
                                "waiting up to %.0f s for it to expire (a previous run of "
                                "this broker)", self.broker_id, deadline - time.monotonic())
                    waited = True
                time.sleep(0.2)

    def _register(self) -> None:
        path = z.broker_path(self.broker_id)
        try:
            self.zk.create(path, self._registration(), ephemeral=True)
        except NodeExistsError:
            # Ours from a session that has just expired is fine: it goes away
            # with that session. Anyone else's is a live broker with our id.
            _, stat = self.zk.get(path)
            if stat.ephemeralOwner == self.zk.client_id[0]:
                return
            raise BrokerIdInUseError(self.broker_id) from None

    # ------------------------------------------------------------ watches

    def _on_state(self, state: str) -> None:
        # Runs on kazoo's connection thread: no blocking calls here.
        if state == KazooState.LOST:
            self._session_lost = True
        elif state == KazooState.CONNECTED and self._session_lost and not self._closed \
                and self._registered:
            self._session_lost = False
            self.zk.handler.spawn(self._recover_session)

    def _recover_session(self) -> None:
        """A new session: the ephemeral registration is gone. (kazoo's watch
        recipes re-read and re-arm themselves on reconnection.)"""
        log.warning("ZooKeeper session expired; registering broker %d again", self.broker_id)
        for _ in range(30):
            try:
                self._register()
                break
            except BrokerIdInUseError:
                # The old session's node may outlive it for a moment.
                time.sleep(0.5)
            except KazooException as e:
                log.warning("re-registering broker %d failed: %s", self.broker_id, e)
                time.sleep(0.5)

    def _on_broker_ids(self, children: list[str]) -> bool:
        if not self._read_brokers(self._broker_read_ticket(), children):
            def again() -> bool:
                ticket = self._broker_read_ticket()  # before the listing it reads
                return self._read_brokers(ticket, self.zk.get_children(z.BROKER_IDS))
            self._read_again_later("the broker registrations", again)
        return not self._closed

    def _broker_read_ticket(self) -> int:
        """Reads of the registrations are numbered in the order they began;
        only a read that began after the one installed last is installed, so
        a slow retry cannot put back a list older than the watch's."""
        with self._brokers_lock:
            self._broker_reads_begun += 1
            return self._broker_reads_begun

    def _read_again_later(self, what: str, read: Callable[[], bool]) -> None:
        """Call ``read`` again, with a growing pause, until it returns True
        without a ZooKeeper error; one retry per ``what`` at a time. kazoo's
        watches do not call back after a reconnection when the znode (or list
        of children) is the one they last saw, so a read that failed inside a
        callback (a session that expired meanwhile, ZooKeeper restarting)
        would otherwise leave its part of the snapshot stale until the next
        change: a broker paused past its session never saw the broker that
        came back meanwhile, and its followers never found that leader."""
        with self._rereads_lock:
            if what in self._rereads:
                return
            self._rereads.add(what)

        def again() -> None:
            delay = 0.2
            try:
                while not self._closed:
                    time.sleep(delay)
                    try:
                        if read():
                            log.info("%s read again", what)
                            return
                    except KazooException:
                        pass
                    delay = min(delay * 2, 5.0)
            finally:
                with self._rereads_lock:
                    self._rereads.discard(what)
        self.zk.handler.spawn(again)

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
                # and read it again (_read_again_later).
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

    def _on_topic_names(self, children: list[str]) -> bool:
        names = set(children)
        current = self._topics
        if any(n not in names for n in current):
            with self._snapshot_lock:
                self._topics = {n: m for n, m in self._topics.items() if n in names}
        for name in names - self._watched_topics:
            self._watched_topics.add(name)
            self._watch_topic(name)
        self._watched_topics &= names
        return not self._closed

    def _watch_topic(self, name: str) -> None:
        def on_topic(data: bytes | None, _stat: object) -> bool:
            if data is None:
                self._drop(name)
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
        """``_reload_topic`` from a watch: a read ZooKeeper fails is tried again
        (unless the topic is deleted meanwhile: a read begun before the
        deletion must not bring it back)."""
        try:
            self._reload_topic(name)
        except KazooException as e:
            log.warning("reading topic %s failed (%s); reading it again", name, type(e).__name__)
            def again() -> bool:
                drops = self._topic_drops.get(name, 0)  # before this read begins
                if name in self._watched_topics:
                    self._reload_topic(name, drops_seen=drops)
                return True
            self._read_again_later(f"topic {name}", again)

    def _watch_partition_states(self, topic: str) -> None:
        watched: set[int] = set()

        def on_partitions(children: list[str]) -> bool:
            if topic not in self._watched_topics:
                return False
            for child in children:
                if child.isdigit() and int(child) not in watched:
                    watched.add(int(child))
                    self._watch_state(topic, int(child))
            return not self._closed

        # The controller creates .../partitions with the first state: watch
        # for it to exist (a children watch on a missing node just stops).
        def on_parent(_data: bytes | None, stat: object) -> bool:
            if stat is None:
                return topic in self._watched_topics and not self._closed
            self.zk.ChildrenWatch(z.partitions_path(topic), on_partitions)
            return False
        self.zk.DataWatch(z.partitions_path(topic), on_parent)

    def _watch_state(self, topic: str, partition: int) -> None:
        tp = (topic, partition)

        def on_state(data: bytes | None, stat: ZnodeStat | None) -> bool:
            state = None
            if data is not None:
                try:
                    state = z.decode_partition_state(topic, partition, data)
                except z.ZNodeFormatError as e:
                    log.warning("ignoring partition state: %s", e)
                    return not self._closed
            with self._snapshot_lock:
                states = dict(self._states)
                if state is None:
                    states.pop(tp, None)
                    self._state_versions.pop(tp, None)
                else:
                    states[tp] = state
                    if stat is not None:
                        self._state_versions[tp] = stat.version
                self._states = states
            for listener in list(self._state_listeners):
                try:
                    listener(topic, partition, state)
                except Exception:  # noqa: BLE001 - one listener must not starve the others
                    log.exception("partition state listener failed")
            # A state not written yet (or deleted with a re-created topic) is
            # still watched: the controller writes it after the partition node.
            return not self._closed and topic in self._watched_topics
        self.zk.DataWatch(z.partition_state_path(topic, partition), on_state)

    def partitions(self, topic: str) -> dict[int, PartitionMeta]:
        live = {b.node_id for b in self._brokers}
        return {p: self._partition_meta(topic, p, reps, live)
                for p, reps in self._assignments.get(topic, {}).items()}

    def partition(self, topic: str, partition: int) -> PartitionMeta | None:
        replicas = self._assignments.get(topic, {}).get(partition)
        if replicas is None:
            return None
        return self._partition_meta(topic, partition, replicas,
                                    {b.node_id for b in self._brokers})

    def _partition_meta(self, topic: str, partition: int, replicas: tuple[int, ...],
                        live: set[int]) -> PartitionMeta:
        state = self._states.get((topic, partition))
        offline = tuple(r for r in replicas if r not in live)
        if state is None:  # the controller has not brought it online (yet)
            return PartitionMeta(replicas, -1, -1, (), offline)
        return PartitionMeta(replicas, state.leader, state.leader_epoch, state.isr, offline)

    def partition_version(self, topic: str, partition: int) -> int:
        return self._state_versions.get((topic, partition), -1)

    @retriable_on_zookeeper_errors
    def update_isr(self, topic: str, partition: int, leader_epoch: int,
                   isr: tuple[int, ...], version: int) -> IsrUpdate:
        """A leader's ISR change: a conditional write of the state znode (a leader
        replaced meanwhile, or a controller decision in between, makes it fail),
        then a change notification for the controller, as Kafka's leaders write
        them."""
        path = z.partition_state_path(topic, partition)
        data, stat = self.zk.get(path)
        current = z.decode_partition_state(topic, partition, data)
        if (stat.version != version or current.leader != self.broker_id
                or current.leader_epoch != leader_epoch):
            return IsrUpdate(False, current.leader, current.leader_epoch, current.isr,
                             stat.version)
        new = z.PartitionState(current.leader, leader_epoch, tuple(isr), current.controller_epoch)
        try:
            stat = self.zk.set(path, z.encode_partition_state(new), version=version)
        except BadVersionError:
            data, stat = self.zk.get(path)
            current = z.decode_partition_state(topic, partition, data)
            return IsrUpdate(False, current.leader, current.leader_epoch, current.isr,
                             stat.version)
        self.zk.create(z.ISR_CHANGE_PREFIX, z.encode_isr_change([(topic, partition)]),
                       sequence=True, makepath=True)
        return IsrUpdate(True, new.leader, new.leader_epoch, new.isr, stat.version)

    def partition_states(self) -> dict[tuple[str, int], z.PartitionState]:
        """Every partition's leader, leader epoch and ISR as last written."""
        return self._states

    def on_partition_state(self, listener: Callable[[str, int, z.PartitionState | None],
                                                    None]) -> None:
        """``listener(topic, partition, state)`` on every change (None: gone),
        called on ZooKeeper's event thread: keep it short."""
        self._state_listeners.append(listener)

    def on_broker_config_change(self, listener: Callable[[], None]) -> None:
        """``listener()`` when a broker's or the cluster's dynamic configs were
        changed (a change notice under /config/changes, as Kafka's brokers follow)."""
        self._broker_config_listeners.append(listener)

    def _on_config_changes(self, children: list[str]) -> bool:
        new = [c for c in sorted(children) if c not in self._seen_config_changes]
        self._seen_config_changes = set(children)
        brokers_changed = False
        for child in new:
            try:
                brokers_changed |= self._apply_config_change(child)
            except KazooException as e:
                log.warning("reading config change %s failed (%s); reading it again", child,
                            type(e).__name__)
                self._read_again_later(f"config change {child}",
                                       functools.partial(self._apply_config_change_again, child))
        if brokers_changed:
            self._broker_configs_changed()
        return not self._closed

    def _apply_config_change(self, child: str) -> bool:
        """Act on one change notice; True when it was a broker config's (the
        broker config listeners are told once per batch of notices)."""
        path = f"{z.CONFIG_CHANGES}/{child}"
        try:
            entity = z.decode_config_change(path, self.zk.get(path)[0])
        except (NoNodeError, z.ZNodeFormatError):
            return False
        if entity.startswith("brokers/"):
            return True
        if entity.split("/", 1)[0] in ("users", "clients", "ips"):
            self._entity_config_changed(entity)
        elif entity.startswith("topics/") and entity[7:] in self._topics:
            self._reload_topic(entity[7:])
        return False

    def _apply_config_change_again(self, child: str) -> bool:
        if self._apply_config_change(child):
            self._broker_configs_changed()
        return True

    def _broker_configs_changed(self) -> None:
        for listener in list(self._broker_config_listeners):
            try:
                listener()
            except Exception:  # noqa: BLE001 - one listener must not starve the others
                log.exception("broker config listener failed")

    def on_topic_change(self, listener: Callable[[str], None]) -> None:
        """``listener(topic)`` after a topic's assignment or config changed, or
        it was deleted; called on ZooKeeper's event thread: keep it short."""
        self._topic_listeners.append(listener)

    def _topic_changed(self, name: str) -> None:
        for listener in list(self._topic_listeners):
            try:
                listener(name)
            except Exception:  # noqa: BLE001 - one listener must not starve the others
                log.exception("topic listener failed")

    def _drop(self, name: str) -> None:
        with self._snapshot_lock:
            self._topic_drops[name] = self._topic_drops.get(name, 0) + 1
            if name in self._topics:
                self._topics = {n: m for n, m in self._topics.items() if n != name}
            if name in self._assignments:
                self._assignments = {n: a for n, a in self._assignments.items() if n != name}
            if any(t == name for t, _ in self._states):
                self._states = {tp: s for tp, s in self._states.items() if tp[0] != name}
        self._watched_topics.discard(name)
        self._topic_changed(name)

    def _reload_topic(self, name: str, drops_seen: int | None = None) -> TopicMeta | None:
        """Read one topic's znodes into the snapshot (also used after our writes,
        so a caller reads its own write without waiting for the watch)."""
        try:
            data, stat = self.zk.get(z.topic_path(name))
        except NoNodeError:
            self._drop(name)
            return None
        try:
            assignment = z.decode_topic(name, data)
        except z.ZNodeFormatError as e:
            log.warning("ignoring topic: %s", e)
            return None
        if assignment.topic_id is None:
            # Written by a tool that predates topic ids (a new topic, or an old
            # kafka-topics --alter rewriting a known one): give it an id, as Kafka's
            # controller does, conditionally on what we read. A topic we know keeps
            # its id: a new one would make its logs look like another topic's.
            known = self._topics.get(name)
            topic_id = known.topic_id if known is not None else uuid.uuid4()
            assignment = z.TopicAssignment(assignment.partitions, kafka_id(topic_id),
                                           assignment.adding_replicas,
                                           assignment.removing_replicas)
            try:
                self.zk.set(z.topic_path(name), z.encode_topic(assignment), version=stat.version)
            except (BadVersionError, NoNodeError):
                return self._reload_topic(name, drops_seen)
        try:
            configs = z.decode_config(z.topic_config_path(name),
                                      self.zk.get(z.topic_config_path(name))[0])
        except NoNodeError:
            configs = {}
        except z.ZNodeFormatError as e:
            log.warning("ignoring topic config: %s", e)
            configs = {}
        meta = TopicMeta(name, topic_uuid(assignment.topic_id), len(assignment.partitions),
                         configs, name in INTERNAL_TOPICS)
        replicas = {p: tuple(r) for p, r in assignment.partitions.items()}
        with self._snapshot_lock:
            if drops_seen is not None and self._topic_drops.get(name, 0) != drops_seen:
                return None  # deleted since this read began (``drops_seen``: _drop's count)
            self._topics = {**self._topics, name: meta}
            self._assignments = {**self._assignments, name: replicas}
        self._topic_changed(name)
        return meta

    # ------------------------------------------------------------ reads

    @property
    def controller_id(self) -> int:
        return self._controller_id

    def brokers(self) -> list[BrokerEndpoint]:
        return self._brokers

    def topics(self) -> dict[str, TopicMeta]:
        return self._topics

    # ------------------------------------------------------------ writes

    def _assign(self, first_partition: int, count: int,
                replication_factor: int) -> dict[int, list[int]]:
        """Kafka's placement over the live brokers (rack-aware when they all have
        a rack)."""
        brokers = self._brokers
        ids = [b.node_id for b in brokers] or [self.broker_id]
        return assign_replicas(ids, count, replication_factor,
                               racks={b.node_id: b.rack for b in brokers},
                               first_partition=first_partition)

    @retriable_on_zookeeper_errors
    def create_topic(self, name, num_partitions, configs, is_internal=False,
                     assignment=None, replication_factor=1) -> TopicMeta:
        with self._lock:
            if self.zk.exists(z.topic_path(name)):
                raise TopicExistsError(name)
            topic_id = uuid.uuid4()
            # Config first, then the topic: whoever sees the topic sees its config.
            self.zk.ensure_path(z.CONFIG_TOPICS)
            try:
                self.zk.create(z.topic_config_path(name), z.encode_config(configs))
            except NodeExistsError:
                self.zk.set(z.topic_config_path(name), z.encode_config(configs))
            placed = z.TopicAssignment(assignment or self._assign(0, num_partitions,
                                                                  replication_factor),
                                       kafka_id(topic_id))
            try:
                self.zk.create(z.topic_path(name), z.encode_topic(placed))
            except NodeExistsError:
                raise TopicExistsError(name) from None
            return self._reload_topic(name) or TopicMeta(
                name, topic_id, num_partitions, dict(configs), is_internal)

    @retriable_on_zookeeper_errors
    def delete_topic(self, name, timeout: float = 30.0) -> TopicMeta:
        """Kafka's deletion: mark the topic under /admin/delete_topics and let the
        controller delete it (it alone writes partition states, so nothing
        re-creates what it deletes); answered once the marker is gone, which
        the controller removes last, after the topic's and its config's znodes
        (answered when the topic's znode went, a topic re-created at once could
        have its new config deleted by the rest of the old deletion, and the
        marker was still there)."""
        with self._lock:
            meta = self._reload_topic(name)
            if meta is None:
                raise UnknownTopicError(name)
            try:
                self.zk.create(z.delete_topic_path(name), makepath=True)
            except NodeExistsError:
                pass  # already marked: wait for the same deletion
        deadline = time.monotonic() + timeout
        while True:
            gone = threading.Event()
            if not self.zk.exists(z.delete_topic_path(name), watch=lambda _event: gone.set()):
                break
            if not gone.wait(max(0.0, deadline - time.monotonic())):
                raise MetadataUnavailableError(
                    f"topic {name} is marked for deletion, but no controller deleted it "
                    f"within {timeout:g} s")
        self._drop(name)
        return meta

    @retriable_on_zookeeper_errors
    def set_partition_count(self, name, count, assignment=None) -> TopicMeta:
        with self._lock:
            while True:
                try:
                    data, stat = self.zk.get(z.topic_path(name))
                except NoNodeError:
                    raise UnknownTopicError(name) from None
                current = z.decode_topic(name, data)
                have = len(current.partitions)
                partitions = dict(current.partitions)
                # new partitions get as many replicas as the first one has
                rf = len(current.partitions.get(0, ())) or 1
                partitions.update(assignment or self._assign(have, count - have, rf))
                updated = z.TopicAssignment(partitions, current.topic_id,
                                            current.adding_replicas, current.removing_replicas)
                try:
                    self.zk.set(z.topic_path(name), z.encode_topic(updated), version=stat.version)
                    break
                except BadVersionError:
                    continue  # someone else changed it: decide again on what is there now
            return self._reload_topic(name)

    @retriable_on_zookeeper_errors
    def set_topic_configs(self, name, configs) -> TopicMeta:
        with self._lock:
            if not self.zk.exists(z.topic_path(name)):
                raise UnknownTopicError(name)
            try:
                self.zk.set(z.topic_config_path(name), z.encode_config(configs))
            except NoNodeError:
                self.zk.create(z.topic_config_path(name), z.encode_config(configs))
            self.zk.create(z.CONFIG_CHANGE_PREFIX, z.encode_config_change(f"topics/{name}"),
                           sequence=True)
            return self._reload_topic(name)

    def broker_configs(self, broker: int | None) -> dict[str, str]:
        path = z.broker_config_path(broker)
        try:
            return z.decode_config(path, self.zk.get(path)[0])
        except NoNodeError:
            return {}

    @retriable_on_zookeeper_errors
    def set_broker_configs(self, broker: int | None, configs: dict[str, str]) -> None:
        path = z.broker_config_path(broker)
        with self._lock:
            try:
                self.zk.set(path, z.encode_config(configs))
            except NoNodeError:
                self.zk.create(path, z.encode_config(configs), makepath=True)
            entity = z.DEFAULT_BROKER_CONFIG if broker is None else str(broker)
            self.zk.create(z.CONFIG_CHANGE_PREFIX, z.encode_config_change(f"brokers/{entity}"),
                           sequence=True)

    def entity_configs(self, entity_path: str) -> dict[str, str]:
        path = z.entity_config_path(entity_path)
        try:
            return z.decode_config(path, self.zk.get(path)[0])
        except NoNodeError:
            return {}

    @retriable_on_zookeeper_errors
    def set_entity_configs(self, entity_path: str, configs: dict[str, str]) -> None:
        path = z.entity_config_path(entity_path)
        with self._lock:
            # Kafka keeps the znode with an empty config (a user's node may
            # have a child per client id), so do we.
            try:
                self.zk.set(path, z.encode_config(configs))
            except NoNodeError:
                self.zk.create(path, z.encode_config(configs), makepath=True)
            self.zk.create(z.CONFIG_CHANGE_PREFIX, z.encode_config_change(entity_path),
                           sequence=True)

    @retriable_on_zookeeper_errors
    def entity_config_paths(self, entity_type: str) -> list[str]:
        out = []
        base = f"/config/{entity_type}"
        try:
            names = sorted(self.zk.get_children(base))
        except NoNodeError:
            return []
        for name in names:
            entity = f"{entity_type}/{name}"
            try:
                if self.entity_configs(entity):
                    out.append(entity)
            except z.ZNodeFormatError as e:
                log.warning("%s", e)
            if entity_type != "users":
                continue
            try:
                clients = sorted(self.zk.get_children(f"{base}/{name}/clients"))
            except NoNodeError:
                continue
            for client in clients:
                pair = f"{entity}/clients/{client}"
                try:
                    if self.entity_configs(pair):
                        out.append(pair)
                except z.ZNodeFormatError as e:
                    log.warning("%s", e)
        return out

    def on_entity_config_change(self, listener: Callable[[str, dict[str, str]], None]) -> None:
        self._entity_config_listeners.append(listener)

    def _entity_config_changed(self, entity_path: str) -> None:
        """Tell the listeners, with the entity's configs read here once: a read
        that fails raises, and the change notice is read again later
        (_read_again_later), rather than each listener failing on its own and
        keeping the old values for good."""
        try:
            configs = self.entity_configs(entity_path)
        except z.ZNodeFormatError as e:  # written by hand or a broken tool: keep what we have
            log.warning("ignoring entity config: %s", e)
            return
        for listener in list(self._entity_config_listeners):
            try:
                listener(entity_path, dict(configs))
            except Exception:  # noqa: BLE001 - one listener must not starve the others
                log.exception("entity config listener failed")

    @retriable_on_zookeeper_errors
    def allocate_producer_id(self) -> int:
        with self._lock:
            next_id, last = self._producer_ids
            if next_id > last:
                block = self._claim_producer_id_block()
                next_id, last = block.start, block.end
            self._producer_ids = (next_id + 1, last)
            return next_id

    def _claim_producer_id_block(self) -> z.ProducerIdBlock:
        """The next block of 1,000 ids, claimed with a conditional write so two
        brokers never get the same block."""
        while True:
            try:
                data, stat = self.zk.get(z.LATEST_PRODUCER_ID_BLOCK)
            except NoNodeError:
                block = z.next_producer_id_block(None, self.broker_id)
                try:
                    self.zk.create(z.LATEST_PRODUCER_ID_BLOCK, z.encode_producer_id_block(block))
                    return block
                except NodeExistsError:
                    continue
            block = z.next_producer_id_block(z.decode_producer_id_block(data), self.broker_id)
            try:
                self.zk.set(z.LATEST_PRODUCER_ID_BLOCK, z.encode_producer_id_block(block),
                            version=stat.version)
                return block
            except BadVersionError:
                continue

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.zk.stop()  # ends the session: the ephemeral registration goes now
        finally:
            self.zk.close()
