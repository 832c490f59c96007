"""The ZooKeeper store's PartitionMeta across snapshots: a partition whose
state, replicas and live brokers did not change keeps its object (a snapshot is
replaced for every chunk of state changes; follower fetches and Metadata
answers look every partition up in each)."""
from __future__ import annotations

from samsa.broker.metadata import BrokerEndpoint, PartitionMeta
from samsa.broker.metadata.zk_layout import PartitionState
from samsa.broker.metadata.zookeeper.cache import _MetaCache

BROKERS = [BrokerEndpoint(i, "h", 9092 + i) for i in (1, 2, 3)]


def test_an_unchanged_partition_keeps_its_meta_and_a_changed_one_shows_its_change():
    assignments = {"t": {0: (1, 2, 3), 1: (2, 3, 1)}}
    states = {("t", 0): PartitionState(1, 4, (1, 2), 7), ("t", 1): PartitionState(2, 4, (2,), 7)}
    first = _MetaCache(assignments, states, BROKERS, {})
    before = [first.meta("t", p, r) for p, r in assignments["t"].items()]

    # a new snapshot: partition 1's state replaced, partition 0's the same object
    states2 = {**states, ("t", 1): PartitionState(2, 4, (2, 3, 1), 7)}
    second = _MetaCache(assignments, states2, BROKERS, first._made)
    after = [second.meta("t", p, r) for p, r in assignments["t"].items()]
    assert after[0] is before[0]
    assert after[1] == PartitionMeta((2, 3, 1), 2, 4, (2, 3, 1))

    # broker 3 gone: every partition names it offline
    third = _MetaCache(assignments, states2, BROKERS[:2], second._made)
    assert [third.meta("t", p, r).offline_replicas for p, r in assignments["t"].items()] \
        == [(3,), (3,)]
    # new replicas with the same state: rebuilt
    moved = {"t": {0: (1, 2), 1: (2, 3, 1)}}
    fourth = _MetaCache(moved, states2, BROKERS[:2], third._made)
    assert fourth.meta("t", 0, (1, 2)).replicas == (1, 2)


def test_a_deleted_topic_is_forgotten():
    assignments = {"t": {0: (1,)}}
    states = {("t", 0): PartitionState(1, 0, (1,), 1)}
    cache = _MetaCache(assignments, states, BROKERS, {})
    cache.meta("t", 0, (1,))
    cache.forget_topic("t")
    assert cache._made == {}
