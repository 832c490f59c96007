"""The state watch against a real ZooKeeper: many partitions' states read in
chunks with several in flight, each handed over as it comes, and every watch
re-armed (a later change, a deletion, a creation each handed over again)."""
from __future__ import annotations

import threading
from typing import Any, Callable, Iterator

import pytest
from kazoo.client import KazooClient

from samsa.broker.metadata import zk_layout as z
from samsa.broker.metadata.zookeeper import state_watch
from samsa.broker.metadata.zookeeper.session import _WatchReadPool
from samsa.broker.metadata.zookeeper.state_watch import PartitionStateWatch
from tests.support.waiting import wait_until

PARTITIONS = 230


def _state(epoch: int) -> bytes:
    return z.encode_partition_state(z.PartitionState(1, epoch, (1,), 1))


def test_states_read_in_chunks_in_flight_and_their_watches_fire_again(zookeeper, monkeypatch):
    monkeypatch.setattr(state_watch, "READS_AT_ONCE", 20)   # 12 chunks, 3 in flight
    monkeypatch.setattr(state_watch, "CHUNKS_IN_FLIGHT", 3)
    admin = KazooClient(hosts=zookeeper.connect)
    admin.start(timeout=20)
    # the store's handler: its socket reads ahead, and this watch's watcher
    # runs on kazoo's connection thread
    client = KazooClient(hosts=zookeeper.connect, handler=_WatchReadPool())
    client.start(timeout=20)
    got: list[list[tuple[tuple[str, int], bytes | None]]] = []
    lock = threading.Lock()
    closed = False

    def deliver(reads):
        with lock:
            got.append([(tp, data) for tp, data, _ in reads])

    def latest() -> dict[tuple[str, int], bytes | None]:
        with lock:
            return {tp: data for chunk in got for tp, data in chunk}

    watch = PartitionStateWatch(client, deliver, lambda: closed)
    try:
        admin.ensure_path(z.partitions_path("t"))
        tx = admin.transaction()
        for p in range(PARTITIONS):   # the last one's state is not written yet
            tx.create(z.partition_path("t", p))
            if p < PARTITIONS - 1:
                tx.create(z.partition_state_path("t", p), _state(0))
        assert not any(isinstance(r, Exception) for r in tx.commit())
        watch.start()
        watch.follow("t", range(PARTITIONS))
        wait_until(lambda: len(latest()) == PARTITIONS, what="every first read")
        with lock:
            chunks = len(got)
        assert chunks > 1   # handed over a chunk at a time, not at the end
        first = latest()
        assert first[("t", PARTITIONS - 1)] is None
        assert all(first[("t", p)] == _state(0) for p in range(PARTITIONS - 1))

        # Every watch was re-armed: a change, a deletion and a creation each come.
        for p in range(0, PARTITIONS - 1, 7):
            admin.set(z.partition_state_path("t", p), _state(1))
        admin.delete(z.partition_state_path("t", 1))
        admin.create(z.partition_state_path("t", PARTITIONS - 1), _state(2))
        wanted = {("t", p): _state(1) for p in range(0, PARTITIONS - 1, 7)}
        wanted[("t", 1)] = None
        wanted[("t", PARTITIONS - 1)] = _state(2)
        wait_until(lambda: all(latest()[tp] == data for tp, data in wanted.items()),
                   what="the changes handed over")
    finally:
        closed = True
        client.stop()
        admin.stop()


class Harness:
    """A PartitionStateWatch on a client of its own (the store's handler: its
    socket reads ahead, and the watch's watcher runs on kazoo's connection
    thread), an admin client writing as other brokers do, what the watch
    handed over, and every state path it asked ZooKeeper for. ``wrap``, when
    set, wraps each read sent (a PendingReads)."""

    def __init__(self, connect: str) -> None:
        self.admin = KazooClient(hosts=connect)
        self.admin.start(timeout=20)
        self.client = KazooClient(hosts=connect, handler=_WatchReadPool())
        self.client.start(timeout=20)
        self.lock = threading.Lock()
        self.got: dict[tuple[str, int], bytes | None] = {}
        self.delivered: list[tuple[tuple[str, int], bytes | None]] = []  # in order
        self.read: list[str] = []
        self.wrap: Callable[[Any], Any] | None = None
        self.closed = False
        self.watch = PartitionStateWatch(self.client, self._deliver, lambda: self.closed)

    def send_reads(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def sending(zk, paths, *args, **kwargs):
            with self.lock:
                self.read.extend(paths)
            pending = real(zk, paths, *args, **kwargs)
            return pending if self.wrap is None else self.wrap(pending)
        return sending

    def _deliver(self, reads) -> None:
        with self.lock:
            self.got.update((tp, data) for tp, data, _ in reads)
            self.delivered += [(tp, data) for tp, data, _ in reads]

    def latest(self, tp: tuple[str, int]) -> bytes | None:
        with self.lock:
            return self.got.get(tp)

    def reads_of(self, partition: int) -> int:
        with self.lock:
            return self.read.count(z.partition_state_path("t", partition))

    def close(self) -> None:
        self.closed = True
        self.client.stop()
        self.admin.stop()


@pytest.fixture
def harness(zookeeper, monkeypatch) -> Iterator[Harness]:
    h = Harness(zookeeper.connect)
    monkeypatch.setattr(state_watch, "send_reads", h.send_reads(state_watch.send_reads))
    try:
        yield h
    finally:
        h.close()


def test_states_this_session_writes_are_handed_over_not_read_back_and_stay_watched(harness):
    """The controller's fenced writes go to its own broker's snapshot as they
    are committed; their watches, fired by those very writes, are set again
    without reading the states back, and a later change by someone else (a
    leader's ISR write) still comes. A write refused for its version is read."""
    from samsa.broker.metadata.zookeeper.writes import SetData, ZooKeeperWrites
    admin, watch, latest = harness.admin, harness.watch, harness.latest
    writes = ZooKeeperWrites(harness.client, written=watch.written, writing=watch.writing)
    admin.create(z.CONTROLLER_EPOCH, b"1", makepath=True)
    admin.ensure_path(z.partitions_path("t"))
    tx = admin.transaction()
    for p in range(PARTITIONS):
        tx.create(z.partition_path("t", p))
        tx.create(z.partition_state_path("t", p), _state(0))
    assert not any(isinstance(r, Exception) for r in tx.commit())
    watch.start()
    watch.follow("t", range(PARTITIONS))
    wait_until(lambda: all(latest(("t", p)) == _state(0) for p in range(PARTITIONS)),
               what="every first read")
    # Every first read's watch armed: a change to the last chunk's comes.
    admin.set(z.partition_state_path("t", PARTITIONS - 1), _state(9))
    wait_until(lambda: latest(("t", PARTITIONS - 1)) == _state(9), what="a change")
    with harness.lock:
        harness.read.clear()

    # Ours: one partition's version is stale (someone wrote it meanwhile).
    admin.set(z.partition_state_path("t", 0), _state(5))
    outcomes = writes.commit_fenced_each(0, [
        [SetData(z.partition_state_path("t", p), _state(1), 1 if p == PARTITIONS - 1 else 0)]
        for p in range(PARTITIONS)], together=20, in_flight=4)
    assert sum(isinstance(o, Exception) for o in outcomes) == 1
    assert all(latest(("t", p)) == _state(1) for p in range(1, PARTITIONS))
    wait_until(lambda: latest(("t", 0)) == _state(5), what="the refused one read")
    with harness.lock:
        read_back = {path for path in harness.read if path != z.partition_state_path("t", 0)}
    assert not read_back, f"{len(read_back)} of our own writes read back"

    # Still watched: a leader's later change to any of them comes.
    for p in range(1, PARTITIONS, 11):
        admin.set(z.partition_state_path("t", p), _state(2))
    wait_until(lambda: all(latest(("t", p)) == _state(2) for p in range(1, PARTITIONS, 11)),
               what="changes after our writes handed over")


def test_a_change_by_another_session_is_read_once(harness):
    """The read a fired watch makes sets the watch again relative to what it
    read: set relative to the zxid this session had seen before the read
    (older than the change that fired it), the watch fired again at once
    and every state another broker changed was read twice."""
    admin, latest = harness.admin, harness.latest
    admin.ensure_path(z.partitions_path("t"))
    for p in range(2):
        admin.create(z.partition_state_path("t", p), _state(0), makepath=True)
    harness.watch.start()
    harness.watch.follow("t", range(2))
    wait_until(lambda: latest(("t", 0)) == latest(("t", 1)) == _state(0), what="the first reads")
    for epoch in (1, 2, 3):
        admin.set(z.partition_state_path("t", 0), _state(epoch))
        wait_until(lambda: latest(("t", 0)) == _state(epoch), what="the change read")
    # A change to the other one, read after any second read of the first
    # (one reader, in order).
    admin.set(z.partition_state_path("t", 1), _state(1))
    wait_until(lambda: latest(("t", 1)) == _state(1), what="the other change read")
    reads = [harness.reads_of(p) for p in range(2)]
    assert reads == [1 + 3, 1 + 1], f"{reads} reads for 1 + 3 and 1 + 1 versions"


def test_a_change_made_between_a_read_and_its_watch_set_again_is_read(harness):
    """The other side of reading once: a change made after the read was
    answered and before its watch was set again fires that watch at once."""
    admin, latest = harness.admin, harness.latest
    change_after_read = threading.Event()
    path = z.partition_state_path("t", 0)

    class ChangedAfterItsAnswer:
        def __init__(self, pending):
            self.pending = pending

        def get(self, timeout=None):
            found = self.pending.get(timeout)
            if change_after_read.is_set():
                change_after_read.clear()
                admin.set(path, _state(2))  # answered: the watch is set after this
            return found

        def __getattr__(self, name):   # what the read saw (read_at, read_zxids)
            return getattr(self.pending, name)
    harness.wrap = ChangedAfterItsAnswer
    admin.create(path, _state(0), makepath=True)
    harness.watch.start()
    harness.watch.follow("t", [0])
    wait_until(lambda: latest(("t", 0)) == _state(0), what="the first read")
    change_after_read.set()
    admin.set(path, _state(1))  # read; then state 2 comes before the watch is set
    wait_until(lambda: latest(("t", 0)) == _state(2), what="the change after the read")


def test_a_read_that_found_no_znode_answered_before_our_own_write_does_not_undo_it(harness):
    """A new topic's state read before its znode was created, answered (no
    znode) and only then handed over, after this broker's controller wrote
    the state and handed its write over: the read is older than the write,
    so the partition does not vanish from the snapshot until a watch fires."""
    from samsa.broker.metadata.zookeeper.writes import SetData, ZooKeeperWrites
    admin, watch = harness.admin, harness.watch
    writes = ZooKeeperWrites(harness.client, written=watch.written, writing=watch.writing)
    admin.create(z.CONTROLLER_EPOCH, b"1", makepath=True)
    path = z.partition_state_path("t", 0)
    admin.ensure_path(z.partition_path("t", 0))

    class OurWriteHandedOverFirst:
        def __init__(self, pending):
            self.pending = pending

        def get(self, timeout=None):
            found = self.pending.get(timeout)
            if found == [None] and not harness.delivered:
                # answered "no znode"; before it is handed over, the state is
                # created and this broker's controller writes it
                admin.create(path, _state(0))
                writes.commit_fenced(0, [SetData(path, _state(1), 0)])
            return found

        def __getattr__(self, name):   # what the read saw (read_at, read_zxids)
            return getattr(self.pending, name)
    harness.wrap = OurWriteHandedOverFirst
    watch.start()
    watch.follow("t", [0])
    wait_until(lambda: harness.latest(("t", 0)) == _state(1), what="our write handed over")
    admin.set(path, _state(2))   # read after whatever came before it
    wait_until(lambda: harness.latest(("t", 0)) == _state(2), what="a later change")
    with harness.lock:
        delivered = [data for tp, data in harness.delivered if tp == ("t", 0)]
    assert delivered == [_state(1), _state(2)], "the stale read was handed over"
