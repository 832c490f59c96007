"""Partitions a roles pass hands the replica fetcher reach its loop in one
batch per leader: one log line with a count and one wake-up, not one each
(30,000 followed partitions made as many lines, wake-ups and interrupted
long polls)."""
from __future__ import annotations

import asyncio
import logging
import types

from samsa.broker.replication.fetcher import ReplicaFetcher

_CONFIG = types.SimpleNamespace(broker_id=1, replica_fetch_backoff_ms=50)


def test_partitions_followed_together_are_handed_over_and_logged_once_per_leader(caplog):
    fetcher = ReplicaFetcher(lambda: _CONFIG, endpoint=lambda broker: None)
    loop = fetcher._loop
    try:
        with caplog.at_level(logging.INFO, logger="broker.replication.fetcher"):
            for p in range(40):  # (the loop's thread is not started: nothing runs yet)
                fetcher.follow(types.SimpleNamespace(topic="t", partition=p),
                               leader=2 + p % 2, leader_epoch=4)
            loop.run_until_complete(asyncio.sleep(0.01))
        lines = sorted(r.getMessage() for r in caplog.records
                       if r.getMessage().startswith("following"))
        assert lines == ["following 20 more partitions of leader 2 (t-0 at epoch 4, ...)",
                         "following 20 more partitions of leader 3 (t-1 at epoch 4, ...)"]
        assert set(fetcher._tasks) == {2, 3}  # each leader's loop, waiting for its endpoint
    finally:
        fetcher._stopped = True
        loop.run_until_complete(fetcher._cancel_all())
        loop.close()
