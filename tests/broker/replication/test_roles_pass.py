"""A pass over the local logs' roles is not held back by one log that fails: after
a kill -9, a partition directory that cannot be loaded used to stop the start-up
pass at that log, and the partitions after it were never led or followed. Nor
does the pass recover the logs a kill left: each role waits for its log's load."""
from __future__ import annotations

import os
import threading
from typing import Callable

from samsa.broker.metadata import PartitionMeta
from samsa.broker.replication.manager import ReplicaManager
from samsa.config.topic import TopicConfig
from samsa.storage.manager import LogManager
from tests.storage.helpers import batch_of
from tests.support.waiting import wait_until

CFG = TopicConfig()


class LeadsEverything:
    """The metadata's answer for every partition: this broker (0) leads at epoch 1."""

    def partition(self, topic: str, partition: int) -> PartitionMeta:
        return PartitionMeta((0,), 0, 1, (0,))

    def partition_version(self, topic: str, partition: int) -> int:
        return 0


def _leading(data: str, store, partitions: int) -> tuple[LogManager, ReplicaManager]:
    """Logs of ``partitions`` partitions of topic t (two records each) in
    ``data``, and a replica manager on ``store`` that has taken no role yet."""
    logs = LogManager([data], CFG, 0, "cid", log_cleaner_enable=False)
    logs.startup()
    for p in range(partitions):
        logs.create_log("t", p, CFG).append(batch_of(2))
    return logs, ReplicaManager(store, logs, 0, lambda t, p, events=3, followers=(): None,
                                lag_time_max_ms=lambda: 10_000)


def _pass_held_at_partition_one(data: str, partitions: int, hold: Callable[[], object]
                                ) -> tuple[LogManager, ReplicaManager, threading.Thread]:
    """A role pass over ``partitions`` logs in ``data``, running on a thread of
    its own and held where it asks the metadata for partition 1, until
    ``hold()`` returns; returned once it is held there."""
    asked = threading.Event()

    class HeldAtPartitionOne(LeadsEverything):
        def partition(self, topic: str, partition: int) -> PartitionMeta:
            if partition == 1:
                asked.set()
                hold()
            return super().partition(topic, partition)

    logs, replicas = _leading(data, HeldAtPartitionOne(), partitions)
    passing = threading.Thread(target=replicas.sync_roles, daemon=True)
    passing.start()
    assert asked.wait(30)
    return logs, replicas, passing


def test_after_a_kill_the_pass_leaves_each_role_to_its_logs_load(tmp_path):
    data = str(tmp_path / "data")
    logs = LogManager([data], CFG, 0, "cid", log_cleaner_enable=False)
    logs.startup()
    for topic in ("a", "b", "c"):
        logs.create_log(topic, 0, CFG).append(batch_of(2))
    logs.shutdown(clean=False)   # as a kill -9: every log is recovered on its load
    epochs = os.path.join(data, "b-0", "leader-epoch-checkpoint")
    if os.path.exists(epochs):
        os.unlink(epochs)
    os.mkdir(epochs)             # b-0 cannot be loaded

    logs, replicas = _leading(data, LeadsEverything(), 0)
    try:
        # The pass loads none of them (each is recovered on its load): their
        # roles wait for the loader, which takes each up as it loads it.
        # (the logs' own schedules may load one meanwhile: then its role is taken)
        loaded_before = {k for k, lg in logs.all_logs().items() if lg.loaded}
        replicas.sync_roles()
        assert {k for k, lg in logs.all_logs().items() if lg.loaded} == loaded_before
        assert replicas.deferred() == 3 - len(loaded_before)
        logs.start_background_load(on_loaded=replicas.log_loaded)
        wait_until(lambda: replicas.deferred() == 1, what="the loadable logs' roles")
        assert replicas.leader("a", 0) is not None and replicas.leader("c", 0) is not None
        assert replicas.leader("b", 0) is None
    finally:
        replicas.stop()
        logs.shutdown(clean=False)



def test_a_pass_of_many_roles_makes_their_epochs_durable_apart_and_stop_waits(tmp_path,
                                                                              monkeypatch):
    """A pass of many roles takes them all up, then leaves the leader-epoch
    checkpoints' commit to a thread of its own; stopping waits for it, so the
    files hold the new epoch before the logs close."""
    from samsa.broker.replication import manager
    from samsa.storage.checkpoints import read_leader_epoch_checkpoint
    monkeypatch.setattr(manager, "COMMITTED_APART_FROM", 5)
    data = str(tmp_path / "data")
    logs, replicas = _leading(data, LeadsEverything(), 8)
    try:
        replicas.sync_roles()
        assert all(replicas.leader("t", p).leader_epoch == 1 for p in range(8))
    finally:
        replicas.stop()
        logs.shutdown()
    for p in range(8):
        assert read_leader_epoch_checkpoint(
            os.path.join(data, f"t-{p}", "leader-epoch-checkpoint"))[-1] == (1, 2)


def test_a_leader_epoch_a_pass_deferred_is_written_before_the_log_grows(tmp_path):
    """A role pass begins a leader epoch in memory and writes the file apart:
    an append at the new epoch first writes it, so records never come to the
    disk before the epoch that names them."""
    from samsa.storage.checkpoints import read_leader_epoch_checkpoint
    data = str(tmp_path / "data")
    logs = LogManager([data], CFG, 0, "cid", log_cleaner_enable=False)
    logs.startup()
    try:
        lg = logs.create_log("t", 0, CFG)
        lg.append(batch_of(2), leader_epoch=0)
        path = os.path.join(data, "t-0", "leader-epoch-checkpoint")
        lg.begin_leader_epoch(3, defer_flush=True)
        assert lg.leader_epochs.latest_epoch == 3            # in memory at once
        assert read_leader_epoch_checkpoint(path)[-1:] == [(0, 0)]
        lg.append(batch_of(2), leader_epoch=3)
        assert read_leader_epoch_checkpoint(path)[-1] == (3, 2)
    finally:
        logs.shutdown()


def test_stop_waits_for_a_running_pass_which_takes_up_no_more_roles(tmp_path):
    """A stop that comes while a pass is taking up roles (the worker running
    it gives up its join after a while) waits for the pass: the role being
    taken up is finished and its leader epoch is in its file when the stop
    returns, so nothing is written into the logs once they are closed; and
    the pass takes up no more roles, so the stop does not wait for the rest."""
    from samsa.storage.checkpoints import read_leader_epoch_checkpoint

    stopping = threading.Event()
    stop_returned = threading.Event()

    def stall_while_the_stop_begins() -> None:
        # (for as long as the stop lets the pass stall: at most a while)
        stopping.wait()
        stop_returned.wait(timeout=3)

    data = str(tmp_path / "data")
    logs, replicas, passing = _pass_held_at_partition_one(data, 4, stall_while_the_stop_begins)
    try:
        stopping.set()
        replicas.stop()
        stop_returned.set()
        epochs = [read_leader_epoch_checkpoint(os.path.join(data, f"t-{p}",
                                                            "leader-epoch-checkpoint"))
                  for p in range(4)]
        assert [e[-1:] for e in epochs[:2]] == [[(1, 2)], [(1, 2)]]   # taken up, written
        assert replicas.leader("t", 1) is not None
        assert replicas.leader("t", 2) is None and replicas.leader("t", 3) is None
    finally:
        stopping.set()
        stop_returned.set()
        passing.join(30)
        logs.shutdown()


def test_a_log_opened_after_the_stop_takes_no_role_and_writes_no_epoch(tmp_path):
    """A log opened or loaded once the stop has begun (a reconcile that outlived
    the role worker's join opens logs, a request takes a role up) is given no
    role: nothing writes a leader epoch into the logs the stop is closing."""
    from samsa.storage.checkpoints import read_leader_epoch_checkpoint

    data = str(tmp_path / "data")
    logs, replicas = _leading(data, LeadsEverything(), 0)
    try:
        replicas.stop()
        late = logs.create_log("t", 0, CFG)
        replicas.log_opened(late)
        assert replicas.take_up("t", 0) is None
        assert replicas.leader("t", 0) is None
        path = os.path.join(data, "t-0", "leader-epoch-checkpoint")
        assert not os.path.exists(path) or read_leader_epoch_checkpoint(path) == []
    finally:
        logs.shutdown()


def test_a_pass_stuck_past_the_stops_limit_leaves_the_logs_to_be_recovered(tmp_path):
    """A role pass that does not end (a disk that stopped answering) does not
    hang the stop: past its limit the stop goes on, says so, and the logs get
    no clean-shutdown marker, so the next start recovers them (the stuck pass
    may still write into them)."""

    from samsa.storage.checkpoints import CLEAN_SHUTDOWN_MARKER

    release = threading.Event()
    data = str(tmp_path / "data")
    logs, replicas, passing = _pass_held_at_partition_one(data, 3, release.wait)
    try:
        assert replicas.stop(timeout=0.2) is False
        assert logs.shutdown(withhold_marker=True) == []   # every write made, no marker
        assert not os.path.exists(os.path.join(data, CLEAN_SHUTDOWN_MARKER))
    finally:
        release.set()
        passing.join(30)
        logs.shutdown()


def test_a_stop_after_every_pass_ended_is_clean(tmp_path):
    from samsa.storage.checkpoints import CLEAN_SHUTDOWN_MARKER

    data = str(tmp_path / "data")
    logs, replicas = _leading(data, LeadsEverything(), 2)
    replicas.sync_roles()
    assert replicas.stop() is True
    assert logs.shutdown() == []
    assert os.path.exists(os.path.join(data, CLEAN_SHUTDOWN_MARKER))
