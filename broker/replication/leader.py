"""A partition this broker leads: its followers' progress, the ISR, the high
watermark, and the produces waiting for acks=all (Kafka's ``Partition`` on
the leader, with its delayed-produce purgatory).

Threads: appends come from processor threads, follower fetches from others,
ISR writes from the replica manager's thread; one lock per partition guards
the ISR and follower progress, and the high watermark only moves under it.
A second lock, held by every append, makes "still the leader at this epoch"
and the write one step: a demotion or a new epoch waits for the append in
progress and no append starts after it under the old role (Kafka's
leaderIsrUpdateLock).
ISR changes are proposed here and written to the metadata store elsewhere
(a ZooKeeper round trip never runs under this lock or on an event loop);
until a change is written, the high watermark counts the ISR as the larger
of the old and new one, so it never runs ahead of what the written ISR holds;
so it does after a write met a newer epoch that keeps this leader, until
that epoch is taken up (``superseded``). A fenced leader commits nothing.
"""
from __future__ import annotations

import asyncio
import heapq
import threading
import time
from typing import Callable, Collection, Protocol

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages.wire import Buf
from samsa.storage import AppendOrigin, AppendResult

from ..append_notifier import ANY, APPENDED, READABLE, resolve_on_their_loops
from ..partition_log import PartitionLog

from .isr import FollowerProgress, high_watermark, may_join_isr, out_of_sync


class Notify(Protocol):
    """The append notifier's notify (broker/append_notifier.py)."""
    def __call__(self, topic: str, partition: int, events: int = ANY,
                 followers: Collection[int] = ()) -> None: ...


class ReplicaLog(PartitionLog, Protocol):
    """What the leader uses of storage.Log; also what handlers read of it (a
    PartitionLog), which the partition layer hands them from a leader lookup."""
    @property
    def partition(self) -> int: ...

    def update_high_watermark(self, offset: int) -> bool: ...
    def begin_leader_epoch(self, epoch: int, *, defer_flush: bool = False) -> None: ...
    def flush_leader_epochs(self) -> None: ...
    def append(self, payload: Buf, leader_epoch: int = 0, *, origin: AppendOrigin = ...,
               txn_version: int = 0) -> AppendResult: ...


class NotLeaderError(Exception):
    """The partition stopped being led here between the lookup and the append."""
    error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class NotEnoughReplicasError(Exception):
    """acks=all into a partition whose ISR is below min.insync.replicas."""
    error_code = ErrorCode.NOT_ENOUGH_REPLICAS


# An acks=all produce waiting: (offset the high watermark must reach, sequence
# number, min.insync.replicas, the loop it waits on, its future).
_Waiter = tuple[int, int, int, asyncio.AbstractEventLoop, "asyncio.Future[ErrorCode]"]


def now_ms() -> float:
    return time.monotonic() * 1000


class LeaderReplica:
    def __init__(self, log: ReplicaLog, broker_id: int, leader_epoch: int,
                 replicas: tuple[int, ...], isr: tuple[int, ...], isr_version: int,
                 notify: Notify) -> None:
        self.log = log
        self.topic, self.partition = log.topic, log.partition
        self.broker_id = broker_id
        self.leader_epoch = leader_epoch
        self.replicas = replicas
        self.isr = isr                     # as last written to the metadata store
        self.isr_version = isr_version     # its znode version (conditional writes)
        self.epoch_start_offset = log.log_end_offset
        self.pending_isr: tuple[int, ...] | None = None  # being written (or superseded)
        self.fenced = False                # a newer decision exists: stop acting as leader
        # fenced because ZooKeeper presumably expired this broker's session (not by a
        # newer decision): it may lead again if the state znode still names it
        self.session_fenced = False
        self._notify = notify
        self._lock = threading.Lock()
        self._append_lock = threading.Lock()
        start = now_ms()
        # Every follower starts as just caught up: a new leader gives them
        # replica.lag.time.max.ms to show up before dropping them.
        self._followers = {r: FollowerProgress(last_caught_up_ms=start)
                           for r in replicas if r != broker_id}
        # acks=all produces, a heap by the offset the high watermark must reach (then
        # a sequence number, so futures are never compared): completing them looks
        # only at the ones now due, not at every waiting produce (a backlog of
        # them made each append and fetch slower the longer it grew)
        self._waiters: list[_Waiter] = []
        self._waiter_seq = 0
        self._unassigned: frozenset[int] = frozenset()  # see not_replicas

    def _counted_isr(self) -> tuple[int, ...]:
        pending = self.pending_isr
        if pending is None:
            return self.isr
        return tuple(sorted(set(self.isr) | set(pending)))

    # ------------------------------------------------------------ progress

    def append(self, payload: Buf, origin: AppendOrigin, min_isr: int | None = None,
               txn_version: int = 0) -> AppendResult:
        """Append as this leader, stamped with its epoch; ``min_isr`` (acks=all):
        refuse with NOT_ENOUGH_REPLICAS when the ISR is smaller, before writing.
        ``txn_version``: a transaction marker's TransactionVersion."""
        with self._append_lock:
            if self.fenced:
                raise NotLeaderError(f"{self.topic}-{self.partition} is no longer led here")
            if min_isr is not None and len(self.isr) < min_isr:
                raise NotEnoughReplicasError(
                    f"{len(self.isr)} in-sync replica(s) of {self.topic}-{self.partition}, "
                    f"min.insync.replicas is {min_isr}")
            if txn_version:
                result = self.log.append(payload, self.leader_epoch, origin=origin,
                                         txn_version=txn_version)
            else:
                result = self.log.append(payload, self.leader_epoch, origin=origin)
        self.appended(origin)
        return result

    def appended(self, origin: AppendOrigin | None = None) -> None:
        """Records were appended by this leader (from ``origin``; None: not
        said): the high watermark follows (at once when the leader is the ISR
        alone). Followers waiting for new records are woken; consumers only when
        what they may read moved: the high watermark, or the last stable offset,
        which a transaction marker (written by the broker, never by a CLIENT)
        can move by itself."""
        committed = self._advance_high_watermark()
        self._notify(self.topic, self.partition,
                     ANY if committed or origin is not AppendOrigin.CLIENT else APPENDED,
                     followers=self._followers)
        if committed and self._waiters:
            self._check_waiters()

    def follower_fetched(self, replica: int, fetch_offset: int,
                         log_start_offset: int = -1) -> tuple[int, ...] | None:
        """A follower fetched at ``fetch_offset`` (its log end); its log starts at
        ``log_start_offset`` (-1: not said). Returns the ISR to write when it
        should join it now, else None."""
        progress = self._followers.get(replica)
        if progress is None:
            return None  # not a replica of this partition
        join = None
        with self._lock:
            if fetch_offset > self.log.log_end_offset:
                # A follower with a tail this leader does not have (it has yet
                # to truncate it): answered OFFSET_OUT_OF_RANGE and, as in
                # Kafka, not counted as holding what it claims.
                return None
            progress.fetched(fetch_offset, self.log.log_end_offset, now_ms())
            progress.log_start_offset = log_start_offset
            if (replica not in self.isr and self.pending_isr is None and not self.fenced
                    and replica not in self._unassigned
                    and may_join_isr(progress, self.log.high_watermark, self.epoch_start_offset)):
                join = tuple(sorted(set(self.isr) | {replica}))
                self.pending_isr = join
        self._maybe_advance()
        return join

    def fetched_settled(self, replica: int) -> bool:
        """A fetch by ``replica`` that leaves this partition out if nothing
        would change here: True when it is in the ISR, has the whole log (as
        its last fetch said) and no ISR change is being written, and then it
        counts as that fetch at the log end (caught up now), as it would
        have had the fetch named the partition. Without that a follower left
        out for longer than replica.lag.time.max.ms would look lagging the
        moment the partition is appended to. (The conditions are read
        without the lock: a wrong answer costs one read pass, and the next
        fetch looks again.)"""
        progress = self._followers.get(replica)
        end = self.log.log_end_offset
        if (progress is None or progress.log_end_offset != end or self.pending_isr is not None
                or self.fenced or replica not in self.isr):
            return False
        now = now_ms()
        with self._lock:
            progress.fetched(end, end, now)
        return True

    def in_sync_followers_holding(self, offset: int) -> list[tuple[int, int, float]]:
        """(broker id, log end, last caught up ms) of the in-sync followers whose
        copy holds ``offset`` (starts at or before it, reaches it): where a
        consumer at ``offset`` may read instead."""
        with self._lock:
            return [(r, p.log_end_offset, p.last_caught_up_ms)
                    for r, p in self._followers.items()
                    if r in self.isr and p.log_end_offset >= offset
                    and 0 <= p.log_start_offset <= offset]

    def lagging_isr(self, max_lag_ms: float) -> tuple[int, ...] | None:
        """The ISR without its lagging members, when some lag (and no other change
        is being written); marks it pending."""
        with self._lock:
            if self.pending_isr is not None or self.fenced:
                return None
            lagging = out_of_sync(self.isr, self.broker_id, self.log.log_end_offset,
                                  self._followers, now_ms(), max_lag_ms)
            if not lagging:
                return None
            shrunk = tuple(r for r in self.isr if r not in lagging)
            self.pending_isr = shrunk
            return shrunk

    def force_isr(self, isr: tuple[int, ...]) -> bool:
        """The test kit's fault injection: mark ``isr`` (members of the ISR, this
        leader among them) pending, lagging or not; False while another change is
        being written. Followers that keep up join again as usual."""
        with self._lock:
            if self.pending_isr is not None or self.fenced:
                return False
            self.pending_isr = isr
            return True

    def write_of(self, isr: tuple[int, ...]) -> tuple[int, int] | None:
        """(leader epoch, ISR znode version) to write ``isr`` at, read together:
        None when it is no longer the change pending here (a new epoch
        dropped it, or this leader is fenced)."""
        with self._lock:
            if self.pending_isr != isr or self.fenced:
                return None
            return self.leader_epoch, self.isr_version

    def not_replicas(self, replicas: tuple[int, ...], written_at: int | None = None) -> None:
        """The store refused to let ``replicas`` into the ISR: the topic lists
        them as replicas no more, which this leader learns later (its replica
        list and its epoch come from znodes read apart). Until it does
        (``set_replicas``, ``new_epoch``) they are followers that may not join,
        instead of a refused write for each of their fetches. ``written_at``:
        as ``isr_written``'s."""
        with self._lock:
            if written_at is None or written_at == self.leader_epoch:
                self._unassigned = self._unassigned | frozenset(replicas)

    def isr_written(self, isr: tuple[int, ...] | None, version: int,
                    written_at: int | None = None) -> None:
        """The pending change was written (``isr``), or refused (None): the ISR in
        the store is then re-read by the caller and given as ``isr`` of a
        conflict-free state, or the partition is fenced. ``written_at``: the
        leader epoch the write was made at; nothing changes once this leader
        took a newer one up (the answer is older than its ISR)."""
        with self._lock:
            if written_at is not None and written_at != self.leader_epoch:
                return
            self.pending_isr = None
            if isr is not None:
                self.isr = isr
                self.isr_version = version
        self._followers_have_news()
        self._maybe_advance()
        self._check_waiters()

    def superseded(self, leader_epoch: int, newer_isr: tuple[int, ...]) -> None:
        """The controller wrote ``leader_epoch`` keeping this broker leading,
        with ``newer_isr``, which the role sync has not taken up yet
        (``new_epoch``). Until it does, this leader's own ISR change is
        dropped but the high watermark counts every member of the ISR as we
        know it, of our change and of ``newer_isr`` (kept as pending, so no
        other change is proposed at an epoch that is gone): a join we wrote
        may have landed unconfirmed, and a follower in the newer ISR without
        the records this leader acknowledges could be elected and lose them
        (as Kafka's leader keeps its maximal ISR until the controller's
        LeaderAndIsr arrives). Nothing when that epoch (or a later one) is
        taken up already, or this leader is fenced: the role sync may win
        the race with the ISR thread's answer."""
        with self._lock:
            if self.fenced or self.leader_epoch >= leader_epoch:
                return
            counted = set(self._counted_isr()) | set(newer_isr)
            self.pending_isr = tuple(sorted(counted))
        self._followers_have_news()

    def new_epoch(self, leader_epoch: int, replicas: tuple[int, ...], isr: tuple[int, ...],
                  version: int, *, defer_flush: bool = False) -> bool:
        """The controller's newer decision keeps this broker leading (it changed
        the ISR, say): its epoch, replicas and ISR replace ours, and a change of
        ours not written yet is dropped (the manager skips it). ``defer_flush``:
        as the log's begin_leader_epoch. False, changing nothing, when this
        leader was fenced meanwhile (the caller checked before, without the
        lock): a fenced leader at the newest epoch would never lead again, so
        the caller replaces it."""
        start = now_ms()
        with self._append_lock, self._lock:
            if self.fenced:
                return False
            self.log.begin_leader_epoch(leader_epoch, defer_flush=defer_flush)
            self.leader_epoch = leader_epoch
            self.epoch_start_offset = self.log.log_end_offset
            self.isr, self.isr_version = isr, version
            self.pending_isr = None
            # Where followers were is not known at the new epoch: they may have
            # truncated (under another leader meanwhile); their next fetch says.
            followers = {}
            for r in replicas:
                if r != self.broker_id:
                    old = self._followers.get(r)
                    followers[r] = FollowerProgress(
                        last_caught_up_ms=old.last_caught_up_ms if old else start)
            self._followers = followers
            self.replicas = replicas
            self._unassigned = frozenset()
        self._followers_have_news()
        self._maybe_advance()
        self._check_waiters()
        return True

    def set_replicas(self, replicas: tuple[int, ...]) -> None:
        """The partition's replica list changed at this epoch: track the new
        followers (as just caught up), forget the removed ones (they can no
        longer fetch as followers nor join the ISR)."""
        start = now_ms()
        with self._lock:
            self._followers = {r: self._followers.get(r) or FollowerProgress(last_caught_up_ms=start)
                               for r in replicas if r != self.broker_id}
            self.replicas = replicas
            self._unassigned = frozenset()
        self._followers_have_news()
        self._maybe_advance()

    def metadata_isr(self, isr: tuple[int, ...], version: int) -> None:
        """The state znode changed at this same leader epoch (our own write,
        seen through the watch): keep the newest version."""
        with self._lock:
            if version > self.isr_version:
                self.isr, self.isr_version = isr, version

    def _advance_high_watermark(self) -> bool:
        with self._lock:
            if self.fenced:
                return False  # not leading (for now): it commits nothing
            hw = high_watermark(self.log.log_end_offset, self._counted_isr(), self.broker_id,
                                self._followers)
            return hw > self.log.high_watermark and self.log.update_high_watermark(hw)

    def _maybe_advance(self) -> None:
        """After a follower's progress or an ISR change: consumers and acks=all
        produces learn of a higher high watermark, and the followers' fetches
        have it to tell (journalled: the fetches that look only at what
        changed look at it; not woken, as a follower's fetch waits for
        records, as Kafka's delayed fetch does)."""
        if self._advance_high_watermark():
            self._notify(self.topic, self.partition, READABLE, followers=self._followers)
            if self._waiters:
                self._check_waiters()

    def _followers_have_news(self) -> None:
        """Something a follower's fetch answers changed other than records or
        the high watermark (the ISR, the epoch, the replicas, leading at
        all): journalled for the fetches that look only at what changed,
        no wait woken."""
        self._notify(self.topic, self.partition, 0, followers=self._followers)

    # ------------------------------------------------------------ acks=all

    def replicated(self, offset: int, min_isr: int) -> ErrorCode | None:
        """wait_for's answer when it is known already (None: not yet)."""
        if self.fenced:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark >= offset:
            return (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND if len(self.isr) < min_isr
                    else ErrorCode.NONE)
        return None

    def wait_for(self, offset: int, min_isr: int,
                 loop: asyncio.AbstractEventLoop) -> asyncio.Future[ErrorCode]:
        """A future resolved with the error code for an acks=all produce whose last
        offset is ``offset - 1``: NONE once the high watermark reaches it,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR is then smaller than
        ``min_isr``, NOT_LEADER_OR_FOLLOWER when leadership is lost first."""
        fut = loop.create_future()
        with self._lock:
            # (the high watermark and fencing change under this lock, and
            # _check_waiters runs after each change: known now, or completed then)
            code = self.replicated(offset, min_isr)
            if code is None:
                self._waiter_seq += 1
                heapq.heappush(self._waiters, (offset, self._waiter_seq, min_isr, loop, fut))
        if code is not None:
            fut.set_result(code)  # (called on ``loop``: wait_replicated's)
        return fut

    def forget(self, fut: asyncio.Future[ErrorCode]) -> None:
        """A waiter timed out: drop it."""
        with self._lock:
            self._waiters = [w for w in self._waiters if w[4] is not fut]
            heapq.heapify(self._waiters)

    def _check_waiters(self) -> None:
        """Answer the waiters now due: those the high watermark reached, or all
        of them once this broker stopped leading."""
        with self._lock:
            waiters = self._waiters
            if not waiters:
                return
            if self.fenced:
                self._waiters = []
                done = [(w[3], w[4], ErrorCode.NOT_LEADER_OR_FOLLOWER) for w in waiters]
            else:
                hw = self.log.high_watermark
                if waiters[0][0] > hw:
                    return
                isr_size = len(self.isr)
                done = []
                while waiters and waiters[0][0] <= hw:
                    _, _, min_isr, loop, fut = heapq.heappop(waiters)
                    done.append((loop, fut, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                                 if isr_size < min_isr else ErrorCode.NONE))
        resolve_on_their_loops(done)   # one wake-up per processor thread

    def followers_lagging(self, max_lag_ms: float) -> bool:
        """Whether an in-sync follower has not caught up for ``max_lag_ms`` (the
        ISR shrink this leader would write now)."""
        with self._lock:
            return bool(out_of_sync(self.isr, self.broker_id, self.log.log_end_offset,
                                    self._followers, now_ms(), max_lag_ms))

    def fence_for_session(self) -> None:
        """This broker's ZooKeeper session is presumed expired: stop acting as
        leader (waiting produces answered NOT_LEADER_OR_FOLLOWER, appends and
        follower fetches refused) until ``unfence`` after a check of the state."""
        with self._append_lock, self._lock:
            if self.fenced:
                return
            self.fenced = self.session_fenced = True
            self.pending_isr = None
        self._followers_have_news()
        self._check_waiters()

    def unfence(self, isr: tuple[int, ...], version: int) -> bool:
        """ZooKeeper still names this broker leader at this epoch (with ``isr`` at
        ``version``): lead again. False when fenced for another reason."""
        with self._append_lock, self._lock:
            if not self.session_fenced:
                return False
            self.fenced = self.session_fenced = False
            self.isr, self.isr_version = isr, version
        self._followers_have_news()
        self._maybe_advance()
        return True

    def resign_if_older_than(self, leader_epoch: int) -> bool:
        """The store names another leader at ``leader_epoch``: resign if this
        leader's epoch is older (False: it took a newer epoch up meanwhile,
        which the answer predates, and leads on)."""
        return self._resign_when(lambda mine: mine < leader_epoch)

    def resign_at(self, leader_epoch: int) -> bool:
        """Resign if this leader is (still) at ``leader_epoch``; False otherwise."""
        return self._resign_when(lambda mine: mine == leader_epoch)

    def resign(self) -> None:
        """Leadership moved (or a newer decision fenced this one): every waiting
        produce is answered NOT_LEADER_OR_FOLLOWER."""
        self._resign_when(lambda mine: True)

    def _resign_when(self, at_epoch: Callable[[int], bool]) -> bool:
        """Fence for good if ``at_epoch`` holds of this leader's epoch, both
        read under the locks (after the append in progress, if any)."""
        with self._append_lock, self._lock:
            if not at_epoch(self.leader_epoch):
                return False
            self.fenced = True
            self.session_fenced = False  # for good
        self._followers_have_news()
        self._check_waiters()
        return True

