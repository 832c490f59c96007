"""Which partitions this broker leads and which it follows (Kafka's
``ReplicaManager`` role changes), and the leader's ISR upkeep.

Roles follow the metadata store: ``sync_roles`` compares every local log
with its partition's leader and epoch and makes this broker leader (a new
``LeaderReplica``, the leader epoch begun in the log) or follower (handed to
the replica fetcher, which first truncates to the divergence point). It runs
on the local-replica worker after every metadata change, for a single log
as soon as it is opened, so a partition is never served before its role is
known, and for a single partition when a request finds this broker named its
leader at an epoch not taken up yet (``take_up``).

A log not loaded yet whose end its checkpoints do not tell (after an unclean
stop it is recovered on its load: storage/lazy_log.py) is not loaded by a
pass: its role reads its end, so it is taken up once the log is loaded
(``log_loaded``, from the background loader) or by its first request
(``take_up``). A restart after a kill -9 with 10,000 partitions otherwise
recovered every log on the pass's one thread before a single role was taken
up. The internal topics' logs are the exception: their coordinators load as
they are led.

The ISR thread writes the ISR changes leaders propose (a follower caught up,
or lagging for longer than ``replica.lag.time.max.ms``) to the store, one at a
time, conditionally on the state version the leader knows: a leader that was
replaced without noticing (paused, cut off from ZooKeeper) fails the write and
stops acting as leader.

A broker whose ZooKeeper session is presumed expired (cut off for longer than
the session timeout: broker/metadata/zookeeper/session_fence.py) is ``cut_off``:
the controller may be electing other leaders meanwhile. Each leader whose
in-sync followers have then stopped catching up (the ISR shrink it would write
now and cannot) stops acting as leader: its followers have gone to another
leader, or it is cut from them too. A leader whose followers still fetch goes
on (ZooKeeper itself is down, the brokers are fine: Kafka's brokers serve
through a ZooKeeper outage). When a connection is back (``resume``) each such
leader leads again only if its state znode still names it at the same epoch,
checked by a conditional write of its ISR at the version it knows, on the ISR
thread.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Callable, Protocol

from samsa.protocol.model import TopicPartition
from samsa.storage.checkpoints import durable_batch

from ..metadata import IsrChange, IsrUpdate, MetadataStore, MetadataUnavailableError
from .fetcher import FollowerLog
from .leader import LeaderReplica, Notify, ReplicaLog

log = logging.getLogger("broker.replication")

ISR_WRITE_RETRY_S = 0.5  # after a write whose outcome is unknown (ZooKeeper away)
CUT_OFF_CHECK_S = 0.2  # cut off from ZooKeeper: how often abandoned leaders are looked for
LOGGED_ONE_BY_ONE = 20  # role changes of a pass logged a line each; beyond, a summary
# A pass of this many roles or more makes its leader epochs durable on a thread
# of its own (_sync_each), with at most this many such commits in flight.
COMMITTED_APART_FROM = 50
MAX_COMMITS_IN_FLIGHT = 2
# How long the stop waits, in all, for the ISR thread, a role pass (or a
# role being taken up) and the passes' epoch commits to end: far longer than
# any pass takes (seconds at 10,000 partitions), short of hanging the stop on
# a disk that no longer answers (and under the 90 s a service manager gives a
# stop by default, so the stop can still say why before it is killed).
STOP_WAIT_S = 60.0


class ManagedLog(ReplicaLog, FollowerLog, Protocol):
    """A local log (storage.Log) whose role the manager sets: led here, or
    followed by the fetcher."""
    def knows_end(self) -> bool: ...


class Logs(Protocol):
    def get_log(self, topic: str, partition: int) -> ManagedLog | None: ...
    def all_logs(self) -> Mapping[TopicPartition, ManagedLog]: ...


class Follower(Protocol):
    """The replica fetcher, as the role changes see it."""
    def follow(self, log: FollowerLog, leader: int, leader_epoch: int) -> None: ...
    def unfollow(self, topic: str, partition: int) -> None: ...
    def keep_only(self, keys: set[TopicPartition]) -> None: ...


class RolesNotTakenUp(Exception):
    """A pass took up every role but these partitions' (each failed on its own: a
    log that cannot be loaded, a disk error writing its leader epoch); the others
    are not held back by them, and only these are tried again."""

    def __init__(self, partitions: list[TopicPartition]) -> None:
        super().__init__(f"{len(partitions)} partitions' roles not taken up")
        self.partitions = partitions


class ReplicaManager:
    def __init__(self, store: MetadataStore, logs: Logs, broker_id: int,
                 notify: Notify, *,
                 lag_time_max_ms: Callable[[], int],
                 follower: Follower | None = None) -> None:
        self._store = store
        self._logs = logs
        self.broker_id = broker_id
        self._notify = notify
        self._lag_time_max_ms = lag_time_max_ms
        self.follower = follower
        self._leaders: dict[TopicPartition, LeaderReplica] = {}
        self._pass_lines: int | None = None  # role changes logged at DEBUG in this pass
        # logs whose role waits for their load (guarded by _roles_lock; see the module doc)
        self._deferred: set[TopicPartition] = set()
        self._pass_thread: threading.Thread | None = None
        self._roles_done = 0.0  # when the last pass had taken its roles up (its log line)
        self._commits: list[threading.Thread] = []  # passes' epoch commits in flight
        self._commits_lock = threading.Lock()
        self._roles_lock = threading.RLock()
        self._pending: list[tuple[LeaderReplica, tuple[int, ...]]] = []
        self._pending_lock = threading.Lock()
        self._resumes: list[LeaderReplica] = []  # session-fenced leaders to check (ISR thread)
        self._cut_off = False  # ZooKeeper unreachable past the session (session_fence.py)
        self._cut_off_generation = 0
        self._wake = threading.Event()
        self._stopped = False
        # in a controlled shutdown: a partition this broker was taken out of
        # the ISR of is no longer followed (see leaving)
        self._leaving = False
        # role passes running (sync_roles): the stop waits for them to end
        self._passes = 0
        self._passes_ended = threading.Condition()
        self._thread: threading.Thread | None = None
        self.isr_shrinks = 0
        self.isr_expands = 0
        # told (topic, partition, leading) as this broker takes up or gives up
        # leadership: coordinators of internal topics load and unload with it
        self.on_leadership: Callable[[str, int, bool], None] | None = None

    # ------------------------------------------------------------ lookups

    def leader(self, topic: str, partition: int) -> LeaderReplica | None:
        return self._leaders.get((topic, partition))

    def leaders(self) -> list[LeaderReplica]:
        return list(self._leaders.values())

    # ------------------------------------------------------------ roles

    def sync_roles(self, partitions: Iterable[TopicPartition] | None = None,
                   topics_changed: bool = True) -> None:
        """Every local log's role (or only those of ``partitions``), from the
        metadata as it is now. The lock is taken per partition: a request that
        finds this broker named leader takes that one partition up meanwhile
        (take_up) instead of waiting for a pass over every log. A partition
        named whose log is gone is led and followed no more; with
        ``topics_changed`` (a topic deleted, say) every partition without a log is.
        Once the manager is stopping a pass does nothing, and a running one
        takes up no more roles (``stop`` waits for it)."""
        with self._passes_ended:
            if self._stopped:
                return
            self._passes += 1
        try:
            self._sync_roles(partitions, topics_changed)
        finally:
            with self._passes_ended:
                self._passes -= 1
                self._passes_ended.notify_all()

    def _sync_roles(self, partitions: Iterable[TopicPartition] | None,
                    topics_changed: bool) -> None:
        if partitions is None:
            items = list(self._logs.all_logs().items())
            gone: list[TopicPartition] = []
        else:
            items, gone = [], []
            for key in partitions:
                lg = self._logs.get_log(*key)
                if lg is None:
                    gone.append(key)
                else:
                    items.append((key, lg))
        self._pass_lines = 0 if len(items) > LOGGED_ONE_BY_ONE else None
        started = time.monotonic()
        try:
            failed = self._sync_each(items)
        finally:
            lines, self._pass_lines = self._pass_lines, None
        if lines:
            log.info("leading %d more partitions at new epochs (each at DEBUG); the pass's "
                     "%d roles taken up in %.2f s", lines, len(items),
                     self._roles_done - started)
        self._clean_up(gone, partitions is None or topics_changed)
        if failed:
            raise RolesNotTakenUp(failed)

    def _role_log(self, fmt: str, *args: object) -> None:
        """A role change's line: at INFO, except in a pass of many (a failover
        moves thousands at once), where they are counted for one summary line."""
        if self._pass_lines is None or threading.current_thread() is not self._pass_thread:
            log.info(fmt, *args)
        else:
            self._pass_lines += 1
            log.debug(fmt, *args)

    def _sync_each(self, items: list[tuple[TopicPartition, ManagedLog]]) -> list[TopicPartition]:
        """Each partition's role; those that failed (each logged) are returned.

        Each partition this broker comes to lead begins its leader epoch in
        the log's memory (what requests read) as its role is taken up; the
        checkpoint files are written once every role of the pass is, and made
        durable together (a syncfs, then a rename each), not with two fsyncs
        each (a log about to be appended to writes its own first: storage's
        leader_epoch.py). Written with each role, they made a 30,000-partition
        failover take up 22,000 leader roles in 73 s on a loaded machine. A pass of many roles leaves that
        commit to a thread of its own and returns once the roles are taken up:
        where the file system discards a replaced file's blocks (mount -o
        discard) a rename costs 1.5 ms idle and ten times that under load, and
        a failover that moved 4,000 leaders here held the role thread for
        30-50 s of renames while the next changes (the controller's follow-up
        decisions, a second failover) waited."""
        if len(items) < COMMITTED_APART_FROM:
            with durable_batch():
                failed, epochs = self._take_roles(items)
                self._roles_done = time.monotonic()
                self._write_epochs(epochs)
            self._log_commit(len(items))
            return failed
        self._reap_commits(keep=MAX_COMMITS_IN_FLIGHT - 1)
        taken: list[list[TopicPartition]] = []
        roles_done = threading.Event()

        def run() -> None:
            try:
                with durable_batch():
                    try:
                        failed, epochs = self._take_roles(items)
                        taken.append(failed)
                        self._roles_done = time.monotonic()
                    finally:
                        roles_done.set()
                    self._write_epochs(epochs)
                self._log_commit(len(items))
            except Exception:  # noqa: BLE001 - the epochs stay in memory; the next write retries
                log.exception("making %d partitions' leader epochs durable failed", len(items))

        committer = threading.Thread(target=run, name="samsa-roles-commit", daemon=True)
        with self._commits_lock:
            self._commits.append(committer)
        committer.start()
        roles_done.wait()
        if not taken:
            raise RuntimeError("taking up the roles failed (logged)")
        return taken[0]

    def _log_commit(self, roles: int) -> None:
        took = time.monotonic() - self._roles_done
        if roles > LOGGED_ONE_BY_ONE and took >= 0.5:
            log.info("the leader epochs of a pass over %d roles made durable in %.2f s",
                     roles, took)

    def _take_roles(self, items: list[tuple[TopicPartition, ManagedLog]]
                    ) -> tuple[list[TopicPartition], list[ManagedLog]]:
        """The roles, each new leader epoch in its log's memory alone; returned:
        the partitions that failed and the logs whose epoch file is to be written
        (_write_epochs)."""
        self._pass_thread = threading.current_thread()
        failed: list[TopicPartition] = []
        epochs: list[ManagedLog] = []
        for (topic, partition), lg in items:
            if self._stopped:
                break   # (the broker stops: no more roles, and ``stop`` waits for this pass)
            with self._roles_lock:
                if self._defer(topic, partition, lg):
                    continue
                try:
                    self._sync(topic, partition, lg, epochs)
                except Exception as e:  # noqa: BLE001 - one log must not hold back the rest
                    log.warning("taking up the role of %s-%d failed: %s", topic, partition, e)
                    failed.append((topic, partition))
        return failed, epochs

    @staticmethod
    def _write_epochs(logs: list[ManagedLog]) -> None:
        """The leader-epoch checkpoints a pass deferred, written (in its durable
        batch); one the log wrote itself meanwhile (an append) is not again."""
        for lg in logs:
            try:
                lg.flush_leader_epochs()
            except Exception:  # noqa: BLE001 - that log's next append writes it
                log.exception("writing %s-%d's leader epochs failed", lg.topic, lg.partition)

    def _reap_commits(self, keep: int, deadline: float | None = None) -> bool:
        """Wait for the oldest commits in flight until at most ``keep`` are;
        False when one is still running at ``deadline`` (time.monotonic)."""
        while True:
            with self._commits_lock:
                self._commits = [t for t in self._commits if t.is_alive()]
                if len(self._commits) <= keep:
                    return True
                oldest = self._commits[0]
            oldest.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if deadline is not None and oldest.is_alive():
                return False

    def _clean_up(self, gone: list[TopicPartition], everything: bool) -> None:
        with self._roles_lock:
            for key in gone:
                self._deferred.discard(key)
                if key in self._leaders and self._logs.get_log(*key) is None:
                    self._give_up(key)
                if self.follower is not None and self._logs.get_log(*key) is None:
                    self.follower.unfollow(*key)
            if everything:
                logs = self._logs.all_logs()  # as now: one opened during the pass stays
                self._deferred.intersection_update(logs)
                for key in [k for k in self._leaders if k not in logs]:
                    self._give_up(key)
                if self.follower is not None:
                    self.follower.keep_only(set(logs))  # a deleted topic's partitions

    def log_opened(self, lg: ManagedLog) -> None:
        """A log opened (at start, or created): its role now, or once it is loaded."""
        with self._roles_lock:
            if not self._defer(lg.topic, lg.partition, lg):
                self._sync(lg.topic, lg.partition, lg)

    def log_loaded(self, lg: ManagedLog) -> None:
        """A log has been loaded (the background loader's ``on_loaded``): the role
        a pass left for its load is taken up now, from the metadata as it is now."""
        key = (lg.topic, lg.partition)
        with self._roles_lock:
            if key in self._deferred and self._logs.get_log(*key) is lg:
                # still deferred if this fails (a disk error writing the epoch):
                # a request's take_up, or the next change of its state, tries again
                self._sync(lg.topic, lg.partition, lg)
                self._deferred.discard(key)

    def deferred(self) -> int:
        """How many logs' roles wait for their load."""
        return len(self._deferred)

    def _defer(self, topic: str, partition: int, lg: ManagedLog) -> bool:
        """Whether the log's role waits for its load (the module doc's rule);
        called under _roles_lock, as log_loaded is: a log loaded meanwhile is
        either seen loaded here or found deferred there."""
        key = (topic, partition)
        if lg.knows_end() or topic.startswith("__"):
            self._deferred.discard(key)
            return False
        self._deferred.add(key)
        return True

    def take_up(self, topic: str, partition: int) -> LeaderReplica | None:
        """The partition's role from the metadata as it is now, at once: the
        metadata names this broker leader (at an epoch) the role worker has not
        reached yet. As Kafka's broker leads from the moment it handles
        LeaderAndIsr, a request right after the change is served, not refused
        NOT_LEADER_OR_FOLLOWER until the next pass over every log."""
        lg = self._logs.get_log(topic, partition)
        if lg is None:
            return None  # not opened here yet: opening it takes the role up
        with self._roles_lock:
            try:
                # (a deferred log is loaded here: the request needs it anyway)
                self._sync(topic, partition, lg)
                self._deferred.discard((topic, partition))
            except Exception:  # noqa: BLE001 - the role worker logs it and tries again
                # A role change that fails (a disk error writing the leader
                # epoch) is not this request's error: it is answered as if
                # the worker had not reached the partition yet.
                log.debug("taking up %s-%d failed", topic, partition, exc_info=True)
                return None
            return self._leaders.get((topic, partition))

    def _sync(self, topic: str, partition: int, lg: ManagedLog,
              epochs: list[ManagedLog] | None = None) -> None:
        """One partition's role. ``epochs``: a pass's list of the logs whose new
        leader epoch is written later (the file, not the epoch: it is in the
        log's memory at once; the log writes it before its next append anyway);
        None: written now."""
        if self._stopped:
            # a log opened or loaded after the stop began (a reconcile the role
            # worker's join gave up on, a request): no role, no epoch file
            # written into a log the stop is closing
            return
        key = (topic, partition)
        defer = epochs is not None
        # The version read before the state: a pair of a newer version with
        # an older ISR would let a conditional write base itself on an ISR
        # ZooKeeper no longer holds; an older version only fails the write.
        version = self._store.partition_version(topic, partition)
        meta = self._store.partition(topic, partition)
        current = self._leaders.get(key)
        if meta is not None and meta.leader == self.broker_id:
            if current is not None and not current.fenced and current.log is lg:
                if current.leader_epoch == meta.leader_epoch:
                    current.metadata_isr(meta.isr, version)
                    if current.replicas != meta.replicas:
                        # A reassignment's replica list comes with a new epoch,
                        # but watches re-read after a reconnect may show the
                        # epoch first: the replica list is followed either way.
                        current.set_replicas(meta.replicas)
                    return
                if current.leader_epoch > meta.leader_epoch:
                    return
                # Still leading at a newer epoch (the controller changed the
                # ISR): the same leadership goes on, waiting produces included.
                if current.new_epoch(meta.leader_epoch, meta.replicas,
                                     meta.isr or (self.broker_id,), version,
                                     defer_flush=defer):
                    if epochs is not None:
                        epochs.append(lg)
                    self._role_log("leading %s-%d at epoch %d (isr %s)", topic, partition,
                             meta.leader_epoch, list(meta.isr))
                    return
                # fenced since the check above (an ISR write's answer named
                # another leader at an epoch in between): replaced below
            if (current is not None and current.fenced and current.log is lg
                    and current.leader_epoch >= meta.leader_epoch):
                return  # fenced at this epoch (the store's view lags): lead at a newer one only
            if current is not None:
                current.resign()
            if self.follower is not None:
                self.follower.unfollow(topic, partition)  # no replicated append after this
            lg.begin_leader_epoch(meta.leader_epoch, defer_flush=defer)
            if epochs is not None:
                epochs.append(lg)
            leader = LeaderReplica(lg, self.broker_id, meta.leader_epoch, meta.replicas,
                                   meta.isr or (self.broker_id,), version, self._notify)
            self._tell(topic, partition, True)  # before anyone can be served as leader
            self._leaders[key] = leader
            leader.appended()  # a partition led alone commits what it has
            if current is not None or len(meta.replicas) > 1:
                self._role_log("leading %s-%d at epoch %d (isr %s, log end %d, high watermark %d)",
                         topic, partition, meta.leader_epoch, list(meta.isr),
                         lg.log_end_offset, lg.high_watermark)
            return
        if current is not None:
            self._give_up(key)
        if self.follower is None:
            return
        if (meta is not None and meta.leader >= 0 and self.broker_id in meta.replicas
                and not (self._leaving and self.broker_id not in meta.isr)):
            self.follower.follow(lg, meta.leader, meta.leader_epoch)
        else:
            self.follower.unfollow(topic, partition)

    def leaving(self) -> None:
        """This broker has asked the controller for a controlled shutdown: a
        partition the controller takes it out of the ISR of (leadership moved
        off it, or it followed) is no longer followed, as Kafka's controller
        sends the stopping broker StopReplica. Followed on, it caught up with
        the new leader, which took it back into the ISR it had just left
        (leaders change ISRs without asking the controller here), so acks=all
        writes waited on a broker about to go."""
        self._leaving = True

    def _give_up(self, key: TopicPartition) -> None:
        self._leaders.pop(key).resign()
        self._tell(key[0], key[1], False)

    def _tell(self, topic: str, partition: int, leading: bool) -> None:
        if self.on_leadership is not None:
            try:
                self.on_leadership(topic, partition, leading)
            except Exception:  # a listener must not stop role changes
                log.exception("leadership listener failed for %s-%d", topic, partition)

    # ------------------------------------------------------------ ISR upkeep

    def propose_isr(self, leader: LeaderReplica, isr: tuple[int, ...]) -> None:
        """A leader's ISR change to write (called from any thread)."""
        with self._pending_lock:
            self._pending.append((leader, isr))
        self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="samsa-isr", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = STOP_WAIT_S) -> bool:
        """Stop the ISR thread, and wait for a role pass running (it takes up
        no more roles once this begins) and for the passes' epoch commits:
        the logs close after this, and a pass still taking up roles or
        writing epoch files would write into logs the stop has closed, or
        after the clean-shutdown marker. As Kafka's stop waits for its
        request handlers (a LeaderAndIsr being handled), but not for ever: a
        pass stuck on a hung disk must not hang the stop. All of it within
        ``timeout``; False when something outlived it: the logs may still be
        written, so the caller withholds the clean-shutdown marker and the
        next start recovers them."""
        deadline = time.monotonic() + timeout

        def left() -> float:
            return max(0.0, deadline - time.monotonic())
        with self._passes_ended:
            self._stopped = True
        self._wake.set()
        if self._thread is not None and self._thread.is_alive():
            self._thread.join(timeout=min(10.0, left()))
        with self._passes_ended:
            passes_ended = self._passes_ended.wait_for(lambda: self._passes == 0,
                                                       timeout=left())
        # a role being taken up outside a pass is done once this lock is ours: none begins now
        roles_quiet = self._roles_lock.acquire(timeout=left())
        if roles_quiet:
            self._roles_lock.release()
        # the leader epochs in place before the logs are closed
        commits_ended = self._reap_commits(keep=0, deadline=deadline)
        if not (passes_ended and roles_quiet and commits_ended):
            log.error("replica manager stop: %s did not end within %g s; the logs will be "
                      "recovered at the next start",
                      "a role pass" if not passes_ended else
                      "a role being taken up" if not roles_quiet else "a leader epoch commit",
                      timeout)
        if roles_quiet:
            with self._roles_lock:
                for leader in self._leaders.values():
                    leader.resign()
        return passes_ended and roles_quiet and commits_ended

    def _run(self) -> None:
        next_check = 0.0
        while not self._stopped:
            lag = self._lag_time_max_ms()
            # Kafka checks every replica.lag.time.max.ms / 2; writes go out at once.
            every = min(lag / 2000, 1.0)
            self._wake.wait(max(0.0, min(every, next_check - time.monotonic())))
            self._wake.clear()
            if self._stopped:
                return
            if time.monotonic() >= next_check:
                # Only when due, not on each wake-up for a write: a scan of
                # 15,000 leaders per proposal while followers rejoined.
                next_check = time.monotonic() + every
                for leader in self.leaders():
                    shrunk = leader.lagging_isr(lag)
                    if shrunk is not None:
                        self.propose_isr(leader, shrunk)
            with self._pending_lock:
                pending, self._pending = self._pending, []
                resumes, self._resumes = self._resumes, []
            for leader in resumes:
                try:
                    self._check_resume(leader)
                except Exception:  # noqa: BLE001 - checked again later
                    log.exception("checking %s-%d's leadership failed", leader.topic,
                                  leader.partition)
                    self._resume_later(leader)
            try:
                self._write_isrs(pending)
            except Exception:  # the ISR thread must not end: every proposal again later
                log.exception("writing %d ISR changes failed; trying again", len(pending))
                for leader, isr in pending:
                    self._retry_later(leader, isr)

    # ------------------------------------------------------------ session fencing

    def cut_off(self, silent_ms: float | None = None) -> None:
        """The ZooKeeper session is presumed expired: from now on a leader whose
        in-sync followers have not caught up for ``silent_ms`` (the session
        timeout; at most replica.lag.time.max.ms) stops acting as leader
        (``_fence_abandoned``), checked on a thread of its own: the ISR thread
        may be waiting on ZooKeeper."""
        with self._roles_lock:  # against resume() collecting the fenced leaders
            self._cut_off = True
            self._cut_off_generation += 1
            generation = self._cut_off_generation

        def watch() -> None:
            while self._cut_off and not self._stopped \
                    and generation == self._cut_off_generation:
                lag = self._lag_time_max_ms()
                self._fence_abandoned(lag if silent_ms is None else min(lag, silent_ms),
                                      generation)
                time.sleep(CUT_OFF_CHECK_S)
        threading.Thread(target=watch, name="samsa-zk-cut-off", daemon=True).start()

    def _fence_abandoned(self, max_lag_ms: float, generation: int | None = None) -> None:
        """Fence the leaders whose in-sync followers lag past ``max_lag_ms``,
        while still cut off (in ``generation``, if given): checked under the
        roles lock, as resume() clears it, so a leader fenced here is either
        one resume() then finds, or not fenced at all."""
        with self._roles_lock:
            if not self._cut_off or (generation is not None
                                     and generation != self._cut_off_generation):
                return
            gone = [lr for lr in self._leaders.values()
                    if not lr.fenced and lr.followers_lagging(max_lag_ms)]
            for lr in gone:
                lr.fence_for_session()
        for lr in gone:
            log.warning("%s-%d: cut off from ZooKeeper past the session and its in-sync "
                        "followers stopped catching up: no longer acting as leader until "
                        "ZooKeeper says who leads", lr.topic, lr.partition)

    def resume(self) -> None:
        """Connected to ZooKeeper again: check each session-fenced leader (ISR thread)."""
        with self._roles_lock:  # no leader fenced between these two (_fence_abandoned)
            self._cut_off = False
            fenced = [lr for lr in self._leaders.values() if lr.session_fenced]
        if fenced:
            with self._pending_lock:
                self._resumes.extend(fenced)
            self._wake.set()

    def _check_resume(self, leader: LeaderReplica) -> None:
        key = (leader.topic, leader.partition)
        if not leader.session_fenced or self._leaders.get(key) is not leader:
            return
        try:
            # Our own ISR at the version we know: written when nothing changed,
            # else the state as it is (still us at this epoch, or not).
            result = self._store.update_isr(leader.topic, leader.partition,
                                            leader.leader_epoch, leader.isr, leader.isr_version)
        except MetadataUnavailableError:
            self._resume_later(leader)
            return
        if result.leader == self.broker_id and result.leader_epoch == leader.leader_epoch:
            with self._roles_lock:
                if self._leaders.get(key) is leader and leader.unfence(result.isr, result.version):
                    log.info("%s-%d: still leader at epoch %d after the ZooKeeper session "
                             "came back (isr %s)", leader.topic, leader.partition,
                             leader.leader_epoch, list(result.isr))
        else:
            log.info("%s-%d: leader %d epoch %d now; this broker stays fenced at epoch %d",
                     leader.topic, leader.partition, result.leader, result.leader_epoch,
                     leader.leader_epoch)

    def _resume_later(self, leader: LeaderReplica) -> None:
        def again() -> None:
            if not self._stopped and leader.session_fenced:
                with self._pending_lock:
                    self._resumes.append(leader)
                self._wake.set()
        timer = threading.Timer(ISR_WRITE_RETRY_S, again)
        timer.daemon = True
        timer.start()

    def _write_isrs(self, pending: list[tuple[LeaderReplica, tuple[int, ...]]]) -> None:
        """The proposals still current, written together (the store batches
        them: followers rejoining after a restart make thousands at once)."""
        current: dict[int, tuple[LeaderReplica, tuple[int, ...], int, int]] = {}
        for leader, isr in pending:
            at = leader.write_of(isr)  # (epoch and version read with the proposal)
            if at is not None:
                current[id(leader)] = (leader, isr, *at)
        todo = list(current.values())
        if not todo:
            return
        befores = [leader.isr for leader, _, _, _ in todo]
        results = self._store.update_isrs([
            IsrChange(leader.topic, leader.partition, epoch, isr, version)
            for leader, isr, epoch, version in todo])
        for (leader, isr, epoch, _), before, result in zip(todo, befores, results):
            try:
                self._isr_outcome(leader, isr, before, epoch, result)
            except Exception:  # one bad znode must not end ISR upkeep
                log.exception("ISR change of %s-%d to %s failed; trying again",
                              leader.topic, leader.partition, list(isr))
                self._retry_later(leader, isr)

    def _isr_outcome(self, leader: LeaderReplica, isr: tuple[int, ...], before: tuple[int, ...],
                     written_at: int, result: IsrUpdate | MetadataUnavailableError) -> None:
        """The store's answer to writing ``isr`` at leader epoch ``written_at``.
        The leader may have taken a newer epoch up meanwhile (the role sync
        runs apart): each change below is made only if it still leads at
        ``written_at`` (or, resigning, at an older epoch than the answer's),
        checked under its lock, so an answer older than its state changes
        nothing."""
        if isinstance(result, MetadataUnavailableError):
            # The write may have landed or not (a connection lost mid-request):
            # the change stays pending, so the high watermark keeps counting the
            # larger of the two ISRs, and it is written again until the store
            # answers (then a landed write shows as the state at our version).
            log.warning("ISR change of %s-%d to %s: outcome unknown (%s); trying again",
                        leader.topic, leader.partition, list(isr), result)
            self._retry_later(leader, isr)
            return
        if result.not_replicas:
            # Our replica list is older than our epoch (a reassignment's end read
            # apart): those followers join no more until the list is read again.
            log.info("%s-%d: %s not let into the ISR: not replicas of it now",
                     leader.topic, leader.partition, list(result.not_replicas))
            leader.not_replicas(result.not_replicas, written_at)
            leader.isr_written(result.isr, result.version, written_at)
        elif result.written:
            if len(isr) > len(before):
                self.isr_expands += 1
            elif len(isr) < len(before):
                self.isr_shrinks += 1
            log.info("ISR of %s-%d from %s to %s", leader.topic, leader.partition,
                     list(before), list(isr))
            leader.isr_written(isr, result.version, written_at)
        elif result.leader == self.broker_id and result.leader_epoch == written_at:
            # The state at our epoch changed since we read it (our own earlier
            # write, landed although unconfirmed): take what is there, decide again.
            leader.isr_written(result.isr, result.version, written_at)
        elif result.leader == self.broker_id and result.leader_epoch > written_at:
            # The controller bumped the epoch but left us leading: the role sync
            # takes the new epoch up (waiting produces stay); decide again after.
            # Until then the high watermark counts the new epoch's ISR too: it
            # may hold a follower whose join we wrote (landed, its answer lost)
            # and no longer count, and the controller may elect that follower.
            leader.superseded(result.leader_epoch, result.isr)
        elif result.leader != self.broker_id and leader.resign_if_older_than(result.leader_epoch):
            # Resigned before the pending change is dropped: dropping it first
            # would count the smaller ISR again and answer produces that only
            # the joiner held back, which the new leader (maybe that joiner) lacks.
            log.warning("%s-%d: leader %d epoch %d in the metadata now (this broker led at "
                        "epoch %d): no longer acting as leader", leader.topic,
                        leader.partition, result.leader, result.leader_epoch, written_at)
            leader.isr_written(None, leader.isr_version)
        elif leader.resign_at(written_at):
            # Still at the epoch written at, and the state fits no rule above
            # (an older epoch, another leader at ours: the topic deleted and
            # made again, say): not acting on a state it cannot place.
            log.warning("%s-%d: the metadata now says leader %d at epoch %d, which does not "
                        "follow this broker's epoch %d: no longer acting as leader",
                        leader.topic, leader.partition, result.leader, result.leader_epoch,
                        written_at)
            leader.isr_written(None, leader.isr_version)
        # else: an answer older than the epoch this leader has taken up since

    def _retry_later(self, leader: LeaderReplica, isr: tuple[int, ...]) -> None:
        def again() -> None:
            if not self._stopped and not leader.fenced:
                self.propose_isr(leader, isr)
        timer = threading.Timer(ISR_WRITE_RETRY_S, again)
        timer.daemon = True
        timer.start()
