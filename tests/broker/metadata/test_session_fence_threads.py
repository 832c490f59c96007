"""The ZooKeeper session's fence (broker/metadata/zookeeper/session.py) on its
threads: kazoo's connection states fed to the session's state callback, the
presumed-expiry timer firing on its own thread, and the replica manager told
to cut off and resume as a broker's is. No ZooKeeper: the session's client is
never started; what is under test is how the decisions reach the manager.
"""
from __future__ import annotations

import threading

import pytest
from kazoo.client import KazooState

from samsa.broker.metadata.zookeeper.session import ZooKeeperSession
from samsa.broker.replication.manager import ReplicaManager
from tests.support.waiting import wait_until

SESSION_MS = 300  # the timer fires 100 ms after SUSPENDED (session_fence.py)
WATCH = "samsa-zk-cut-off"


class _StoppedClient:
    """The kazoo client close() stops: none was started."""

    def stop(self) -> None:
        pass

    def close(self) -> None:
        pass


class _SeenLock:
    """The session's fence lock, noting when a thread has to wait for it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.waited = threading.Event()

    def __enter__(self) -> _SeenLock:
        if not self._lock.acquire(blocking=False):
            self.waited.set()
            self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class _Crossing:
    """The session's fence executor, except that while the first decision
    (the timer's FENCE) is being handed to it, kazoo's thread reports
    CONNECTED: the two threads cross."""

    def __init__(self, session: ZooKeeperSession, lock: _SeenLock) -> None:
        self.inner = session._fence_calls
        self.session, self.lock = session, lock
        self.crossed = False

    def submit(self, fn):
        if not self.crossed:
            self.crossed = True
            kazoo = threading.Thread(target=self.session._on_state,
                                     args=(KazooState.CONNECTED,), daemon=True)
            kazoo.start()
            # CONNECTED decided and handed over, or held back by the fence lock
            wait_until(lambda: not kazoo.is_alive() or self.lock.waited.is_set(),
                       what="kazoo's thread to decide, or to wait for the fence lock")
        return self.inner.submit(fn)

    def shutdown(self, **kwargs) -> None:
        self.inner.shutdown(**kwargs)


@pytest.fixture
def broker():
    """A session fed states by hand, and the replica manager it fences."""
    session = ZooKeeperSession.__new__(ZooKeeperSession)
    session.broker_id, session.closed = 0, False
    session._registered, session._session_lost = True, False
    session.zk = _StoppedClient()
    session._init_fence(SESSION_MS)
    manager = ReplicaManager(None, None, 0, lambda t, p, events=3, followers=(): None, lag_time_max_ms=lambda: 10_000)
    calls: list[str] = []

    def fence() -> None:
        calls.append("fence")
        manager.cut_off(silent_ms=SESSION_MS)

    def resume() -> None:
        calls.append("resume")
        manager.resume()

    session.on_fence(fence, resume)
    before = _watches()  # another test's, ending

    def watching() -> bool:
        """This manager's cut-off watch runs."""
        return bool(_watches() - before)
    try:
        yield session, watching, calls
    finally:
        session.close()
        manager.stop()  # ends a watch thread left running (a failing test)


def _watches() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == WATCH and t.is_alive()}


def test_cut_off_past_the_session_fences_and_a_connection_back_resumes(broker):
    session, watching, calls = broker
    for cycle in (1, 2):  # the timer is armed again for the next cut-off
        session._on_state(KazooState.SUSPENDED)
        wait_until(lambda: calls == ["fence", "resume"] * (cycle - 1) + ["fence"],
                   what=lambda: f"the timer's fence (calls {calls})")
        wait_until(watching, what="the cut-off watch")
        session._on_state(KazooState.CONNECTED)
        wait_until(lambda: calls == ["fence", "resume"] * cycle,
                   what=lambda: f"resume after the fence (calls {calls})")
        wait_until(lambda: not watching(), what="the cut-off watch to end")
        assert session._fence_timer is None


def test_connected_while_the_fence_is_being_handed_over_resumes_after_it(broker):
    """The timer's thread decides FENCE and kazoo's decides RESUME at the same
    moment: the manager is told in the order decided, or it would stay cut off
    for good, fencing leaders whose followers are merely slow."""
    session, watching, calls = broker
    lock = _SeenLock()
    session._fence_lock = lock
    session._fence_calls = crossing = _Crossing(session, lock)
    session._on_state(KazooState.SUSPENDED)
    wait_until(lambda: crossing.crossed, what="the timer's fence")
    wait_until(lambda: len(calls) == 2, what=lambda: f"both calls (calls {calls})")
    assert calls == ["fence", "resume"]
    wait_until(lambda: not watching(), what="the cut-off watch to end")


def test_a_closed_session_fences_nothing(broker):
    session, watching, calls = broker
    session._fence.session_timeout_ms = 60_000  # closed long before the timer is due
    session._on_state(KazooState.SUSPENDED)
    timer = session._fence_timer
    assert timer is not None
    session.close()
    timer.join(timeout=10)  # cancelled: ends at once
    assert not timer.is_alive()
    assert calls == [] and not watching()
