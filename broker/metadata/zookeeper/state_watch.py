"""Partition state znodes followed in batches: one-shot watches whose events
only mark a partition to read again, and one thread that reads every marked
partition in a few requests (a multiRead, then one SetWatches re-arming their
watches: multi_read.py, a few chunks of them in flight at once) and hands the
changed ones over a chunk at a time.

A kazoo DataWatch per state znode read each change with a synchronous
``get`` on kazoo's single callback thread: a broker's death at 30,000
partitions changes every state znode, and each broker then made 30,000
round trips one after the other, with the controller's own watch events
(``/brokers/ids``) queued behind them on the same thread. Here a watch event
costs a set insertion, reads and watches share requests, and the snapshot is replaced
once per chunk of reads rather than once per partition.

What to read and what to hand over is decided by ``StateReads`` (no I/O);
``PartitionStateWatch`` does the reading.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Callable, Iterable, Sequence

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import WatchedEvent, ZnodeStat

from .. import zk_layout as z
from .multi_read import PendingReads, PendingWatches, seen_zxid, send_reads, send_watches

log = logging.getLogger("broker.metadata.zookeeper")

Partition = tuple[str, int]
StateRead = tuple[Partition, "bytes | None", "ZnodeStat | None"]
"""A partition, its state znode's data and stat (both None: no such znode)."""

READ_TIMEOUT_S = 30.0  # one answer of a batch (kazoo drops some unanswered)
RETRY_S = 0.5  # after a batch ZooKeeper failed
# Reads to a chunk (one multiRead, one SetWatches), and chunks whose reads are
# sent ahead of the one being handled: the session is the controller's too,
# and its requests and watch events (a broker gone) queue behind every read sent.
READS_AT_ONCE = 500
CHUNKS_IN_FLIGHT = 4
LOGGED_FROM = 1000  # a read of this many states or more logs its time


class StateReads:
    """Which followed partitions need reading, and which reads are news: a
    partition's first read always is, later ones when the znode's last
    modification (mzxid) moved, as kazoo's DataWatch decides."""

    def __init__(self) -> None:
        self._followed: dict[str, set[int]] = {}
        self._pending: set[Partition] = set()
        self._seen: dict[Partition, int | None] = {}  # mzxid last handed over (None: no znode)

    def follow(self, tp: Partition) -> bool:
        """Start following; True when it was not followed (it needs a first read)."""
        partitions = self._followed.setdefault(tp[0], set())
        if tp[1] in partitions:
            return False
        partitions.add(tp[1])
        self._pending.add(tp)
        return True

    def forget_topic(self, topic: str) -> None:
        for p in self._followed.pop(topic, ()):
            self._seen.pop((topic, p), None)
            self._pending.discard((topic, p))

    def followed(self, tp: Partition) -> bool:
        return tp[1] in self._followed.get(tp[0], ())

    def changed(self, tp: Partition) -> None:
        """Its watch fired: read it again."""
        if self.followed(tp):
            self._pending.add(tp)

    def everything_again(self) -> None:
        """A new connection (maybe a new session, whose watches are gone)."""
        self._pending.update((t, p) for t, ps in self._followed.items() for p in ps)

    def take(self) -> list[Partition]:
        batch = sorted(self._pending)
        self._pending.clear()
        return batch

    def news(self, reads: Iterable[StateRead], read_zxids: Sequence[int] = ()
             ) -> list[StateRead]:
        """The reads to hand over: of followed partitions, first or changed.
        A read made at a state older than the one handed over is stale, not
        news: a read sent before this broker's own write
        (``PartitionStateWatch.written``) may be answered after it. A
        znode's mzxid only grows (a re-created znode's too: zxids are
        ZooKeeper's global order), so a read that found the znode is older
        when its mzxid is; one that found none is older when the zxid it was
        made at is (``read_zxids``, each read's, as PendingReads has them:
        0 when not known, and then the read is news)."""
        out = []
        for i, (tp, data, stat) in enumerate(reads):
            if not self.followed(tp):
                continue
            mzxid = None if stat is None else stat.mzxid
            if tp in self._seen:
                seen = self._seen[tp]
                made_at = max(read_zxids[i] if read_zxids else 0, mzxid or 0)
                if seen == mzxid:
                    continue
                if seen is not None and 0 < made_at < seen:
                    # Read again: its watch was set relative to the stale
                    # read, and a change since what was handed over (the
                    # znode's deletion: an existence watch then never
                    # fires) would go unseen.
                    self._pending.add(tp)
                    continue
            self._seen[tp] = mzxid
            out.append((tp, data, stat))
        return out


class PartitionStateWatch:
    """Follows partition state znodes; ``deliver(reads)`` gets each batch of
    news (first reads and changes), on this watch's own thread."""

    def __init__(self, zk: KazooClient, deliver: Callable[[list[StateRead]], None],
                 closed: Callable[[], bool]) -> None:
        self._zk = zk
        self._deliver = deliver
        self._closed = closed
        self._reads = StateReads()
        self._lock = threading.Lock()  # guards _reads
        # Held from deciding what is news to handing it over, so that of two
        # threads handing over (the reader, and a writer's ``written``) the
        # newer state of a partition is always the one handed over last.
        self._handing_over = threading.Lock()
        self._fired: deque[Partition] = deque()  # watches fired, not yet taken in (_take)
        # our own writes on their way (``writing``), and those whose watch fired meanwhile
        self._own_in_flight: dict[Partition, int] = {}
        self._own_fired: set[Partition] = set()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name="samsa-zk-states", daemon=True)
        self._failing = False  # the last batch had reads ZooKeeper did not answer
        # of the read in progress (its log line): the oldest news' mtime, time handing over
        self._oldest_news_ms: int | None = None
        self._delivering_s = 0.0

    def start(self) -> None:
        self._zk.add_listener(self._on_connection)
        self._thread.start()

    def follow(self, topic: str, partitions: Iterable[int]) -> None:
        with self._lock:
            fresh = [self._reads.follow((topic, p)) for p in partitions]
        if any(fresh):
            self._wake.set()

    def forget_topic(self, topic: str) -> None:
        with self._lock:
            self._reads.forget_topic(topic)

    def writing(self, paths: Sequence[str]) -> None:
        """State znodes this broker's session is about to write (the
        controller's fenced writes): until ``written`` says how each went,
        their watches firing (for that very write, as a rule) does not make
        them read. The controller's broker read back every state it had just
        written: at 30,000 partitions 60 multiReads of its own decisions,
        queued in its session among the writes still going out and decoded
        on the connection thread those writes' answers wait for."""
        with self._lock:
            for path in paths:
                tp = z.parse_partition_state_path(path)
                if tp is not None:
                    self._own_in_flight[tp] = self._own_in_flight.get(tp, 0) + 1

    def written(self, writes: Sequence[tuple[str, bytes, ZnodeStat]],
                attempted: Sequence[str] = ()) -> None:
        """State znodes this broker's session has just written (the
        controller's decisions, each znode's path, data and stat after the
        write), of the ``attempted`` ones announced by ``writing``: handed
        over now, on the writer's thread, where newer than what was handed
        over, so the controller's broker does not wait for a read (at 30,000
        partitions seconds behind its own decisions, on the broker whose
        Metadata clients go to) before it names the leaders its controller
        has just chosen. A watch our write fired is set again relative to
        the write's zxid (one SetWatches per transaction): a change made
        after it fires at once and is read then, and the state itself is
        not read back. An attempted znode not written (a version conflict,
        an error) whose watch fired is read as usual. Other paths are ignored."""
        committed: dict[Partition, tuple[bytes, ZnodeStat]] = {}
        for path, data, stat in writes:
            tp = z.parse_partition_state_path(path)
            if tp is not None:
                committed[tp] = (data, stat)
        rearm: dict[int, list[Partition]] = {}  # by the zxid of the write
        with self._lock:
            self._take_fired()  # (our write's events come before its answer)
            for path in attempted:
                tp = z.parse_partition_state_path(path)
                if tp is None or tp not in self._own_in_flight:
                    continue
                self._own_in_flight[tp] -= 1
                if self._own_in_flight[tp] > 0:
                    continue
                del self._own_in_flight[tp]
                if tp not in self._own_fired:
                    continue
                self._own_fired.discard(tp)
                if tp in committed:
                    rearm.setdefault(committed[tp][1].mzxid, []).append(tp)
                else:
                    self._reads.changed(tp)
                    self._wake.set()
        if committed:
            self._hand_over([(tp, data, stat) for tp, (data, stat) in committed.items()])
        self._rearm(rearm)

    def _rearm(self, rearm: dict[int, list[Partition]]) -> None:
        """Watches set again, each relative to the zxid of our write of it;
        one whose SetWatches failed is read (and so watched) again."""
        sent = [(tps, send_watches(self._zk, zxid, [z.partition_state_path(*tp) for tp in tps],
                                   [], self._on_event)) for zxid, tps in rearm.items()]
        failed: list[Partition] = []
        for tps, pending in sent:
            try:
                pending.get(timeout=READ_TIMEOUT_S)
            except (KazooException, KazooTimeoutError):
                failed += tps
        if failed:
            with self._lock:
                for tp in failed:
                    self._reads.changed(tp)
            self._wake.set()

    # ------------------------------------------------------------ kazoo's threads

    def _on_event(self, event: WatchedEvent) -> None:
        # (kazoo tells every watch of a session that closed, with no path)
        tp = None if event.path is None else z.parse_partition_state_path(event.path)
        if tp is None:
            return
        # No lock: kazoo's connection thread must never wait on the reader
        # (its pings wait with it); the reader takes these in (_take).
        self._fired.append(tp)
        self._wake.set()
    # Called on kazoo's connection thread as the event is read, not handed to
    # its callback thread (session.py's dispatch_callback).
    _on_event.runs_inline = True  # type: ignore[attr-defined]

    def _on_connection(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            with self._lock:
                self._reads.everything_again()
            self._wake.set()

    # ------------------------------------------------------------ the reader

    def _run(self) -> None:
        while not self._closed():
            self._wake.wait(1.0)
            self._wake.clear()
            batch = self._take()
            if not batch:
                continue
            started = time.monotonic()
            self._oldest_news_ms = None
            self._delivering_s = 0.0
            try:
                again, requests = self._read(batch)
            except Exception:  # noqa: BLE001 - the reader must not die
                log.exception("reading partition states failed")
                again, requests = list(batch), 0
            if len(batch) >= LOGGED_FROM:
                # (a znode's mtime is ZooKeeper's clock: on another host, an estimate)
                oldest = self._oldest_news_ms
                log.info("read %d partition states in %.2f s (%d chunks of up to %d; handing "
                         "over %.2f s)%s", len(batch), time.monotonic() - started, requests,
                         READS_AT_ONCE, self._delivering_s,
                         "" if oldest is None else
                         "; the oldest change was written %.2f s before" % (
                             time.time() - oldest / 1000))
            with self._lock:
                for tp in again:
                    self._reads.changed(tp)
            if again and not self._closed():
                # Once per outage: while ZooKeeper is away every retry fails.
                if not self._failing:
                    log.warning("reading %d partition states failed; reading them again "
                                "until ZooKeeper answers", len(again))
                self._failing = True
                threading.Event().wait(RETRY_S)
                self._wake.set()
            elif not again and self._failing:
                self._failing = False
                log.info("partition states read again")

    def _take(self) -> list[Partition]:
        """The partitions to read now: those marked, and those whose watches fired."""
        with self._lock:
            self._take_fired()
            return self._reads.take()

    def _take_fired(self) -> None:
        """The watches fired, marked to read; those of our own writes on their
        way set aside for ``written``. Called holding ``_lock``."""
        while self._fired:
            tp = self._fired.popleft()
            if tp in self._own_in_flight:
                self._own_fired.add(tp)
            else:
                self._reads.changed(tp)

    def _read(self, batch: Sequence[Partition]) -> tuple[list[Partition], int]:
        """Each partition's state read, its watch re-armed, and the news handed
        over, READS_AT_ONCE to a chunk with CHUNKS_IN_FLIGHT chunks' reads
        sent ahead: each chunk is handed over as its answer comes, while the
        next ones' are on their way. Waiting for each chunk's answers before
        sending the next made a round trip per chunk, each on a busy machine
        a wait for kazoo's threads to get the GIL: the 60 chunks of 30,000
        states took 50 s. Returned: the partitions ZooKeeper failed to answer
        for (read them again), and the number of chunks."""
        chunks = [batch[i:i + READS_AT_ONCE] for i in range(0, len(batch), READS_AT_ONCE)]
        again: list[Partition] = []
        in_flight: deque[tuple[Sequence[Partition], list[str], int, PendingReads]] = deque()
        watches: list[tuple[Sequence[Partition], PendingWatches]] = []
        for chunk in chunks:
            if len(in_flight) >= CHUNKS_IN_FLIGHT:
                self._finish(*in_flight.popleft(), watches, again)
            paths = [z.partition_state_path(*tp) for tp in chunk]
            # the zxid seen before the read: the least the watches are set
            # relative to (a change the read may have missed fires its watch
            # at once); _finish raises it to what the read saw
            in_flight.append((chunk, paths, seen_zxid(self._zk), send_reads(self._zk, paths)))
        while in_flight:
            self._finish(*in_flight.popleft(), watches, again)
        for chunk, pending in watches:
            try:
                pending.get(timeout=READ_TIMEOUT_S)
            except (KazooException, KazooTimeoutError):
                again += chunk  # its watches may not be set: read (and watch) it again
        return again, len(chunks)

    def _finish(self, chunk: Sequence[Partition], paths: list[str], relative: int,
                reads: PendingReads,
                watches: list[tuple[Sequence[Partition], PendingWatches]],
                again: list[Partition]) -> None:
        """One chunk's answers: its watches sent (one SetWatches: multi_read.py),
        its news handed over."""
        try:
            # One deadline per answer: kazoo can drop requests queued as a session is lost.
            found = reads.get(timeout=READ_TIMEOUT_S)
            # Relative to the read itself where it is later than the zxid seen
            # before it: a change by another session that the read saw (the
            # change that fired the watch, as a rule) was made after that zxid,
            # and fired the watch again at once, to be read twice.
            relative = max(relative, reads.read_at)
            watches.append((chunk, send_watches(
                self._zk, relative, [p for p, f in zip(paths, found) if f is not None],
                [p for p, f in zip(paths, found) if f is None], self._on_event)))
        except (KazooException, KazooTimeoutError):
            again += chunk
            return
        read: list[StateRead] = [(tp, None, None) if f is None else (tp, f[0], f[1])
                                 for tp, f in zip(chunk, found)]
        began = time.monotonic()
        news = self._hand_over(read, reads.read_zxids)
        if news:
            oldest = min((stat.mtime for _, _, stat in news if stat is not None), default=None)
            if oldest is not None and (self._oldest_news_ms is None or oldest < self._oldest_news_ms):
                self._oldest_news_ms = oldest
            self._delivering_s += time.monotonic() - began

    def _hand_over(self, reads: list[StateRead], read_zxids: Sequence[int] = ()
                   ) -> list[StateRead]:
        """Of ``reads``, the news handed over (and returned)."""
        with self._handing_over:
            with self._lock:
                news = self._reads.news(reads, read_zxids)
            if news:
                try:
                    self._deliver(news)
                except Exception:  # noqa: BLE001
                    log.exception("handing over partition states failed")
        return news
