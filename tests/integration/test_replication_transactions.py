"""Transactions on a replicated partition (3 brokers, a real ZooKeeper):
followers open, close and index transactions exactly as their leader does, so
every replica's .log and .txnindex are byte-identical; a follower that takes
over serves read_committed consumers the same view; markers go to leaders only.
Driven without a transaction coordinator (tests/support/txn_wire.py)."""
from __future__ import annotations

from samsa.protocol.errors import ErrorCode
from tests.integration.test_replication import _leader, _topic, cluster_factory  # noqa: F401
from tests.support.cluster import Cluster
from tests.support.txn_wire import NO_VERIFICATION, READ_COMMITTED, TxnWire, data_records
from tests.support.waiting import wait_until


def _files(cluster: Cluster, broker: int, topic: str, suffix: str) -> bytes:
    d = cluster.broker(broker).data_dir / f"{topic}-0"
    return b"".join(f.read_bytes() for f in sorted(d.glob(f"*{suffix}")))


def _identical(cluster: Cluster, topic: str, brokers) -> bool:
    for suffix in (".log", ".txnindex"):
        copies = [_files(cluster, b, topic, suffix) for b in brokers]
        if any(c != copies[0] for c in copies[1:]):
            return False
    return True


def test_replicas_write_the_leaders_txnindex_and_serve_read_committed(cluster_factory):
    cluster = cluster_factory(overrides=NO_VERIFICATION)
    topic = _topic(cluster, partitions=1)
    leader = _leader(cluster, topic, 0)
    follower = next(b for b in range(3) if b != leader)
    ok = ErrorCode.NONE
    with TxnWire(cluster.broker(leader).bootstrap) as w:
        a, ea = w.init_pid()
        b, eb = w.init_pid()
        assert w.produce(topic, [b"c0", b"c1"], pid=a, epoch=ea, seq=0,
                         transactional=True).error_code == ok                      # 0-1
        assert w.produce(topic, [b"x0"], pid=b, epoch=eb, seq=0,
                         transactional=True).error_code == ok                      # 2
        assert w.marker(topic, a, ea, commit=False) == {0: ok}                     # 3 abort A (B open)
        assert w.produce(topic, [b"p0"]).error_code == ok                          # 4
        assert w.marker(topic, b, eb, commit=False) == {0: ok}                     # 5 abort B
        assert w.produce(topic, [b"c2"], pid=a, epoch=ea, seq=2,
                         transactional=True).error_code == ok                      # 6
        assert w.marker(topic, a, ea, commit=True) == {0: ok}                      # 7
        assert w.produce(topic, [b"o0"], pid=b, epoch=eb, seq=1,
                         transactional=True).error_code == ok                      # 8 open
        view = w.fetch(topic, 0, READ_COMMITTED)
    assert view.last_stable_offset == 8
    assert [(t.producer_id, t.first_offset) for t in view.aborted_transactions] == [(a, 0), (b, 2)]
    with TxnWire(cluster.broker(follower).bootstrap) as w:
        # only the leader writes markers; the coordinator is told to go there
        assert w.marker(topic, b, eb, commit=True) == {0: ErrorCode.NOT_LEADER_OR_FOLLOWER}
    wait_until(lambda: _identical(cluster, topic, range(3)), 60,
               f"every replica of {topic} with the leader's .log and .txnindex")
    # two 34-byte Kafka AbortedTxn entries: A aborted while B was open (LSO 2), then B
    assert len(_files(cluster, leader, topic, ".txnindex")) == 68

    cluster.kill(leader)
    # a 1-tuple: broker 0 is a leader, not "not yet"
    (new_leader,) = wait_until(lambda: (lambda l: (l,) if l not in (-1, leader) else None)(
        _leader(cluster, topic, 0)), 60, f"a new leader for {topic}-0")
    with TxnWire(cluster.broker(new_leader).bootstrap) as w:
        def same_view():
            try:
                part = w.fetch(topic, 0, READ_COMMITTED)
            except Exception:  # the new leader may not answer yet
                return None
            return part if part.error_code == 0 and part.last_stable_offset == 8 else None
        taken_over = wait_until(same_view, 60, "the new leader's read_committed view")
        assert data_records(taken_over) == data_records(view)
        assert taken_over.aborted_transactions == view.aborted_transactions
        # the open transaction survives the failover: its commit completes it there
        # (retried on NOT_LEADER_OR_FOLLOWER, as the coordinator does: on a loaded
        # machine the new leader may briefly lose its ZooKeeper connection and stop
        # leading until it is back, its dead follower still in the ISR)
        def committed():
            answer = w.marker(topic, b, eb, commit=True, coordinator_epoch=1)
            assert answer in ({0: ok}, {0: ErrorCode.NOT_LEADER_OR_FOLLOWER}), answer
            return answer == {0: ok}
        wait_until(committed, 60, "the commit marker written on the new leader")
        wait_until(lambda: w.latest(topic, READ_COMMITTED) == 10, 60,
                   "the last stable offset past the committed transaction")
