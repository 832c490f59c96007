"""The ZooKeeper store's session: connecting (with the chroot created when
missing), the broker's ephemeral registration, a session that expired
(registered again), reads a watch could not make (made again later), and
the start-up that waits ZooKeeper out.

- until the broker registers, a lost connection or an expired session is
  waited out rather than failing the broker's start (_StartingKazooClient);
- when the session expires the broker registers again; kazoo's watch
  recipes re-read and re-arm themselves, their re-reads sharing a few
  threads (_WatchReadPool);
- cut off for long enough that ZooKeeper has expired the session, the
  broker is told to stop acting as leader, and told when a connection is
  back (session_fence.py decides; ``on_fence``).
"""
from __future__ import annotations

import functools
import logging
import selectors
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (ConnectionClosedError, ConnectionLoss, KazooException,
                              NodeExistsError, NoNodeError, OperationTimeoutError,
                              SessionExpiredError)
from kazoo.handlers.threading import KazooTimeoutError, SequentialThreadingHandler
from kazoo.handlers.utils import selector_select
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.retry import KazooRetry

from .. import zk_layout as z
from .buffered_socket import BufferedSocket, select_buffered
from .session_fence import Decision, SessionFence
from ..store import BrokerEndpoint, ListenerEndpoint, MetadataUnavailableError, new_cluster_id

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


def retry_about_every_second() -> KazooRetry:
    """How a kazoo client made here tries again, for as long as it takes:
    about a second apart (kazoo adds up to 0.4 s of jitter), as Kafka's
    ZooKeeper client reconnects within a second. Both for connecting again
    once ZooKeeper was lost and for the watch recipes' re-reads. kazoo's
    default doubles the wait up to an hour: a client that lost ZooKeeper for
    a minute came back up to a minute after it, its session (a broker's
    registration) expired by then."""
    return KazooRetry(max_tries=-1, max_delay=1.0)


WATCH_READ_THREADS = 8  # kazoo's watch re-reads after a reconnection, at a time
WAIT_WARNING_S = 10.0  # how often a start waiting for ZooKeeper says so


class _POLL_SELECTORS:
    """The ``selectors`` module as kazoo's ``selector_select`` uses it, with
    poll as the default selector."""
    EVENT_READ = selectors.EVENT_READ
    EVENT_WRITE = selectors.EVENT_WRITE
    DefaultSelector = selectors.PollSelector


class _WatchReadPool(SequentialThreadingHandler):
    """kazoo's threading handler, except that the watch recipes' re-reads run
    on a few threads: kazoo spawns a thread per DataWatch each time the
    connection comes back (and per ChildrenWatch whose watch was lost), and
    this store kept a watch per partition state, so every session expiry
    started a thread per partition (~1,000 on a broker with 1,000
    partitions); the partition states now have one reader of their own
    (state_watch.py), the topics' watches still come here. Everything else kazoo spawns (its connection loop, its
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

    def select(self, *args, **kwargs):
        # kazoo's connection loop waits in this once per request and per
        # answer; its default builds and closes an epoll set each time (two
        # system calls and a few objects), which was a third of a controller's
        # CPU writing thousands of partition states. A poll set costs no
        # system call to build and, unlike select(), takes any descriptor
        # number (a broker holds thousands of sockets). A socket with answers
        # read ahead is readable without asking (buffered_socket.py).
        return select_buffered(self._poll, *args, **kwargs)

    @staticmethod
    def _poll(*args, **kwargs):
        return selector_select(*args, selectors_module=_POLL_SELECTORS, **kwargs)

    def create_connection(self, *args, **kwargs):
        return BufferedSocket(super().create_connection(*args, **kwargs))

    def dispatch_callback(self, callback) -> None:
        """A watcher marked ``runs_inline`` (a few instructions, no I/O, no
        lock held for long) is called on kazoo's connection thread as its
        event is read, rather than handed to kazoo's callback thread: a
        failover at 30,000 partitions is 30,000 watch events per broker, and
        each hand-over is a queue entry and a wake-up of another thread that
        must get the GIL."""
        if getattr(callback.func, "runs_inline", False):
            try:
                callback.func(*callback.args)
            except Exception:  # noqa: BLE001 - kazoo's own callback thread logs and goes on too
                log.exception("ZooKeeper watcher %r failed", callback.func)
            return
        super().dispatch_callback(callback)

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


def _ensure_chroot(hosts: str, chroot: str, timeout: float) -> None:
    # Kafka creates a missing chroot before using it.
    client = KazooClient(hosts=hosts, timeout=timeout, connection_retry=retry_about_every_second())
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


class ZooKeeperSession:
    """The broker's ZooKeeper session and its registration under
    ``/brokers/ids/<id>``; ``zk`` is the client every other part uses."""

    def __init__(self, connect: str, broker_id: int, endpoint: BrokerEndpoint, *,
                 session_timeout_ms: int, connection_timeout_ms: int | None,
                 clock: Callable[[], float]) -> None:
        hosts, chroot = z.parse_connect(connect)
        self.broker_id = broker_id
        self._endpoint = endpoint
        self._clock = clock
        self._rereads: set[str] = set()  # what read_again_later is reading again
        self._rereads_lock = threading.Lock()
        self.closed = False
        self._registered = False
        # The czxid of our registration znode: Kafka's broker epoch, which a
        # ControlledShutdown carries (-1 until registered). A new session
        # registers anew, under a newer one.
        self.broker_epoch = -1
        self._session_lost = False
        self._init_fence(session_timeout_ms)
        timeout = (connection_timeout_ms if connection_timeout_ms is not None
                   else session_timeout_ms) / 1000
        if chroot:
            _ensure_chroot(hosts, chroot, timeout)
        self._session_timeout = session_timeout_ms / 1000
        self.zk = _StartingKazooClient(
            hosts=hosts + (chroot or ""), timeout=session_timeout_ms / 1000,
            handler=_WatchReadPool(),
            # ChildrenWatch's re-reads (client.retry); DataWatch retries with its
            # own KazooRetry (up to 60 s apart)
            command_retry=retry_about_every_second(),
            connection_retry=retry_about_every_second())
        self.zk.patient = True  # until the broker registers (register())
        try:
            self.zk.start(timeout=timeout)
        except KazooTimeoutError:
            self.zk.close()
            raise ZooKeeperStoreError(
                f"could not connect to ZooKeeper at {connect} within {timeout:g} s "
                f"(zookeeper.connect, zookeeper.connection.timeout.ms)") from None

    def _init_fence(self, session_timeout_ms: int) -> None:
        self._fence = SessionFence(session_timeout_ms)
        self._fence_lock = threading.Lock()
        self._fence_timer: threading.Timer | None = None
        self._fence_handlers: list[tuple[Callable[[], None], Callable[[], None]]] = []
        # fence/resume calls, in order, off kazoo's connection thread
        self._fence_calls = ThreadPoolExecutor(1, thread_name_prefix="samsa-zk-fence")

    # ------------------------------------------------------------ start-up

    def prepare(self) -> str:
        """Kafka's persistent paths, and the cluster id (read, or created)."""
        for path in z.PERSISTENT_PATHS:
            self.zk.ensure_path(path)
        return self._read_or_create_cluster_id()

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

    def follow(self) -> None:
        """From here on a new session registers the broker again."""
        self.zk.add_listener(self._on_state)

    def _registration(self) -> bytes:
        e = self._endpoint
        listeners = e.listeners or (ListenerEndpoint("PLAINTEXT", e.host, e.port, "PLAINTEXT"),)
        return z.encode_broker(z.BrokerRegistration(
            self.broker_id, tuple((lst.name, lst.host, lst.port) for lst in listeners),
            {lst.name: lst.security_protocol for lst in listeners},
            e.rack, int(self._clock() * 1000)))

    def register(self) -> None:
        """Announce this broker in /brokers/ids (the store's register); from
        here on a ZooKeeper error fails the call that met it instead of
        waiting (_StartingKazooClient)."""
        try:
            self.register_at_start()
        except (KazooException, KazooTimeoutError) as e:
            raise ZooKeeperStoreError(f"registering broker {self.broker_id} in ZooKeeper "
                                      f"failed ({type(e).__name__})") from None
        self.zk.patient = False

    def register_at_start(self) -> None:
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
            pass
        # Ours, created now or by this session before (one from a session that
        # has just expired is fine too: it goes away with that session);
        # anyone else's is a live broker with our id. (A read, not create2's
        # stat: that needs ZooKeeper 3.5.)
        found = self.zk.exists(path)
        if found is None:
            # the one there when we tried went away meanwhile: not registered
            # yet, so the callers try again (a KazooException to them)
            raise NoNodeError(path)
        if found.ephemeralOwner != self.zk.client_id[0]:
            raise BrokerIdInUseError(self.broker_id)
        self.broker_epoch = found.czxid

    # ------------------------------------------------------------ expiry

    def on_fence(self, fence: Callable[[], None], resume: Callable[[], None]) -> None:
        """``fence()`` when the session is presumed expired (cut off from ZooKeeper
        past the session timeout, or told it expired), ``resume()`` when connected
        again; called in order on a thread of their own."""
        self._fence_handlers.append((fence, resume))

    def _fence_event(self, state: str | None) -> None:
        """A connection state (None: the presumed-expiry timer fired) into the
        fence's decision; arms the timer for the next one."""
        now = time.monotonic() * 1000
        with self._fence_lock:
            if state == KazooState.SUSPENDED:
                decision = self._fence.disconnected(now)
            elif state == KazooState.LOST:
                decision = self._fence.expired(now)
            elif state == KazooState.CONNECTED:
                decision = self._fence.connected(now)
            else:
                decision = self._fence.tick(now)
            if self._fence_timer is not None:
                self._fence_timer.cancel()
                self._fence_timer = None
            deadline = self._fence.deadline_ms()
            if deadline is not None and not self.closed:
                self._fence_timer = threading.Timer(max(0.0, (deadline - now) / 1000),
                                                    self._fence_event, args=(None,))
                self._fence_timer.daemon = True
                self._fence_timer.start()
            if decision is Decision.NONE or self.closed:
                return
            if decision is Decision.FENCE:
                log.warning("ZooKeeper session of broker %d presumed expired (no connection "
                            "for longer than it lasts)", self.broker_id)
            # Submitted under the lock (submit does not block): the timer's
            # thread and kazoo's decide concurrently, and a RESUME queued
            # before the FENCE decided ahead of it would leave the broker cut
            # off for good, fencing leaders whose followers are merely slow.
            for fence, resume in self._fence_handlers:
                try:
                    self._fence_calls.submit(fence if decision is Decision.FENCE else resume)
                except RuntimeError:  # shut down: closing
                    return

    def _on_state(self, state: str) -> None:
        # Runs on kazoo's connection thread: no blocking calls here.
        self._fence_event(state)
        if state == KazooState.LOST:
            self._session_lost = True
        elif state == KazooState.CONNECTED and self._session_lost and not self.closed \
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

    def read_again_later(self, what: str, read: Callable[[], bool]) -> None:
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
                while not self.closed:
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

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with self._fence_lock:
            if self._fence_timer is not None:
                self._fence_timer.cancel()
        self._fence_calls.shutdown(wait=False, cancel_futures=True)
        try:
            self.zk.stop()  # ends the session: the ephemeral registration goes now
        finally:
            self.zk.close()
