"""The stop's early write-back (checkpoints.start_write_back) must not swallow
a write-back error that its own barrier will then not see.

Linux (>= 4.13 for fsync, >= 5.8 for syncfs) reports a write-back error once
per file description: the superblock's errseq is marked seen by the first
syncfs(2) that reports it, and a file descriptor opened after that samples the
seen value, so a later syncfs on a fresh descriptor returns 0. The pages whose
write failed are marked clean, so the barrier has nothing left to write: the
records are not on disk, yet the stop writes the clean-shutdown marker.

The fake syncfs below models that rule (one pending error, reported to the
first caller only); the early write-back is that first caller.
"""
from __future__ import annotations

import ctypes
import threading

from samsa.config.topic import TopicConfig
from samsa.storage import checkpoints, manager
from samsa.storage.manager import LogManager
from tests.storage.helpers import batch_of

CFG = TopicConfig(file_delete_delay_ms=0)


def test_an_io_error_met_by_the_early_write_back_fails_the_stop_and_withholds_the_marker(
        tmp_path, monkeypatch):
    lm = LogManager(str(tmp_path), CFG, 1, "c", flush_check_interval_ms=3600_000)
    lm.startup()
    for p in range(4):
        lg = lm.create_log("t", p, config=CFG)
        lg.begin_leader_epoch(0)
        lg.append(batch_of(2, producer_id=p, producer_epoch=0, base_sequence=0), 0)
    unseen_error = [True]
    early_called = threading.Event()
    lock = threading.Lock()

    def syncfs(fd: int) -> int:
        if threading.current_thread().name == "samsa-write-back":
            early_called.set()
        else:
            early_called.wait(5)   # (as in a real stop: the early one runs first)
        with lock:
            if unseen_error[0]:
                unseen_error[0] = False   # seen: a descriptor opened later does not get it
                ctypes.set_errno(5)
                return -1
        return 0
    monkeypatch.setattr(checkpoints, "_SYNCFS", syncfs)
    monkeypatch.setattr(checkpoints, "_SYNCFS_FROM", 0)    # the barrier is a syncfs
    monkeypatch.setattr(manager, "_WRITE_BACK_FROM", 1)    # and the stop writes back early
    failures = lm.shutdown()
    assert early_called.is_set()
    assert failures, "an EIO during the stop's write-back was swallowed"
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
