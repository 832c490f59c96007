"""Leader epochs written in a durable batch (a role pass makes the epochs of
thousands of new leaders durable together, on a thread of its own): until the
batch commits, the file on disk does not hold them, so what is appended or
truncated meanwhile must not trust that it does."""
from __future__ import annotations

import os
import shutil
import threading

from samsa.config.topic import TopicConfig
from samsa.storage.checkpoints import durable_batch, read_leader_epoch_checkpoint
from samsa.storage.leader_epoch import LeaderEpochCache
from samsa.storage.loader import load_log
from samsa.storage.manager import LogManager
from tests.storage.helpers import batch_of

CFG = TopicConfig()


class _HeldBatch:
    """A durable batch on its own thread, held open after ``write`` ran in it
    (its syncfs and the pass's renames take seconds under load)."""

    def __init__(self, write):
        self.written, self.go = threading.Event(), threading.Event()

        def run() -> None:
            with durable_batch():
                write()
                self.written.set()
                assert self.go.wait(30)
        self.thread = threading.Thread(target=run)

    def __enter__(self):
        self.thread.start()
        assert self.written.wait(30)
        return self

    def __exit__(self, *exc):
        self.go.set()
        self.thread.join()


def test_an_append_while_the_batch_is_open_writes_its_epoch_itself(tmp_path):
    data = str(tmp_path / "data")
    logs = LogManager([data], CFG, 0, "cid", log_cleaner_enable=False)
    logs.startup()
    try:
        lg = logs.create_log("t", 0, CFG)
        lg.append(batch_of(2), leader_epoch=0)
        lg.begin_leader_epoch(3, defer_flush=True)   # the role pass: in memory
        with _HeldBatch(lg.flush_leader_epochs):
            lg.append(batch_of(2), leader_epoch=3)   # a producer at the new epoch
            # what a kill -9 now leaves: records at epoch 3, and the file?
            crashed = str(tmp_path / "crashed" / "t-0")
            shutil.copytree(os.path.join(data, "t-0"), crashed,
                            ignore=shutil.ignore_patterns("*.tmp"))
        loaded = load_log(crashed, CFG, recovery_point=0, log_start_offset=0,
                          high_watermark=None, clean_shutdown=False)
        assert loaded.log_end_offset == 4
        assert loaded.leader_epochs.entries == [(0, 0), (3, 2)]
    finally:
        logs.shutdown()


def test_a_batch_write_superseded_by_a_truncation_does_not_claim_the_file(tmp_path):
    """Restarted after a kill -9 (a load's deferred truncation), led at epoch 3
    by the pass, demoted and truncated before the pass's batch committed, then
    epoch 3's records fetched back from the new leader: the file must say so."""
    d = tmp_path / "t-0"
    d.mkdir()
    cache = LeaderEpochCache.new(str(d))
    cache.assign(0, 0)
    cache.assign(1, 5)
    cache.truncate_from_end(2, defer_flush=True)
    cache.assign(3, 2, defer_flush=True)
    with _HeldBatch(cache.flush_deferred):
        cache.truncate_from_end(2)   # a follower now: written at once
    cache.assign(3, 2)
    assert cache.entries == [(0, 0), (3, 2)]
    assert read_leader_epoch_checkpoint(os.path.join(str(d), "leader-epoch-checkpoint")) == [
        (0, 0), (3, 2)]
