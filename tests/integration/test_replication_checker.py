"""The replication checker, short: one round of each nemesis against a fresh
3-broker cluster (real ZooKeeper, librdkafka and Java producers, a consumer
group), then every acknowledged value must be read exactly once, in order, and
the replicas must be byte-identical (tests/support/checker.py says what is
counted). bench/bench_nemesis.py runs the same checker for 100+ rounds.
"""
from __future__ import annotations

import pytest

from tests.support.checker import NEMESES, run_checker

pytestmark = pytest.mark.timeout(360)

# What an idempotent librdkafka producer reports for a value no ISR of
# min.insync.replicas could take: the broker's refusal, or (it is retriable)
# the message timeout that ends its retries.
REFUSED = {"NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "_MSG_TIMED_OUT",
           "REQUEST_TIMED_OUT"}


@pytest.fixture
def cluster(cluster_factory):
    # A short session so failover takes seconds; followers leave the ISR after 4 s.
    return cluster_factory(session_timeout_ms=3000, offsets_partitions=3,
                           overrides={"replica.lag.time.max.ms": "4000"})


def test_nothing_acknowledged_is_lost_through_every_nemesis(cluster, java_tools):
    result = run_checker(cluster, rounds=len(NEMESES), nemeses=NEMESES, seed=1,
                         partitions=3, replicas=3, min_insync=2, java_tools=java_tools)
    assert result.ok, result.summary()
    # With two of three brokers dead, acks=all writes stop: refused, not acknowledged.
    assert result.kill_two, result.summary()
    for window in result.kill_two:
        assert not window.acked, f"{window.label}: acked {window.acked[:10]}"
        assert REFUSED & set(window.rejections), \
            f"{window.label}: no producer error for a value sent while two brokers were down " \
            f"(errors: {dict(window.rejections)})\n{result.summary()}"
