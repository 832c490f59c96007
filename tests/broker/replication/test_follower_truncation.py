"""A follower's truncation against its leader (broker/replication/fetcher.py,
KIP-101/279): over real logs, the follower asks the leader where its latest
epoch ends, rounds as Kafka's fetcher does, and ends with a log that agrees
with the leader's up to its own end."""
from __future__ import annotations

import pytest

from samsa.broker.replication.fetcher import ReplicaFetcher, _Followed
from samsa.config.topic import TopicConfig
from samsa.storage.log import AppendOrigin, Log
from tests.storage.helpers import batch_of


def _log(path, epochs):
    """A log whose leader epochs start where ``epochs`` says: [(epoch, records)]."""
    lg = Log.open(str(path), TopicConfig())
    for epoch, records in epochs:
        for _ in range(records):
            lg.append(batch_of(1, size=8 + epoch, timestamp=1000), epoch,
                      origin=AppendOrigin.CLIENT)
    lg.update_high_watermark(0)
    return lg


def _converge(follower, leader):
    """Rounds of OffsetForLeaderEpoch until the follower is done; returns the rounds."""
    f = _Followed(follower, leader=1, leader_epoch=9)
    for rounds in range(1, 10):
        answer = leader.end_offset_for_epoch(follower.leader_epochs.latest_epoch)
        if ReplicaFetcher._truncate_one(f, *answer):
            return rounds
    raise AssertionError("truncation did not converge")


def _agrees(follower, leader):
    a = b"".join(r.read_bytes() for r in follower.read(0, 1 << 20).regions)
    b = b"".join(r.read_bytes() for r in leader.read(0, 1 << 20).regions)
    return b.startswith(a)


@pytest.mark.parametrize("leader_epochs, follower_epochs, end, rounds", [
    # same history, follower behind: nothing to cut
    ([(1, 5), (2, 5)], [(1, 5), (2, 2)], 7, 1),
    # the follower led epoch 2 longer than the leader kept it
    ([(1, 5), (2, 2), (3, 4)], [(1, 5), (2, 6)], 7, 1),
    # the follower has an epoch the leader never had (4), and the leader one the
    # follower never had (3): a second round finds where epoch 2 ends
    ([(1, 5), (2, 2), (3, 5), (5, 2)], [(1, 5), (2, 5), (4, 3)], 7, 2),
])
def test_the_follower_ends_where_it_agrees_with_the_leader(tmp_path, leader_epochs,
                                                           follower_epochs, end, rounds):
    leader = _log(tmp_path / "a" / "t-0", leader_epochs)
    follower = _log(tmp_path / "b" / "t-0", follower_epochs)
    try:
        assert _converge(follower, leader) == rounds
        assert follower.log_end_offset == end
        assert _agrees(follower, leader)
    finally:
        leader.close()
        follower.close()
