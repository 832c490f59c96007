"""The replication checker against network partitions: ZooKeeper and each broker in
a network namespace of its own (tests/support/netns.py), one round of each network
nemesis (a leader cut from ZooKeeper and its peers but not its clients, a follower
cut off, the cluster split in halves, ZooKeeper cut from a majority, a one-way cut,
a slow link), then every acknowledged acks=all value read back exactly once, in
order, replicas byte-identical, nothing acknowledged while the side with ZooKeeper
was short of min.insync.replicas, and acks=1 losses only where a fault allows
them. bench/bench_nemesis_network.py runs it for 100 rounds.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from tests.conftest import _test_failed
from tests.integration.conftest import require_zookeeper
from tests.support.checker import NETWORK_NEMESES, run_checker
from tests.support.net_cluster import NetCluster
from tests.support.netns import require_test_network

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


@pytest.fixture
def net_cluster(request):
    require_test_network()
    require_zookeeper()
    work = Path(tempfile.mkdtemp(prefix="samsa-netcluster-"))
    cluster = NetCluster(work, size=3, session_timeout_ms=3000, offsets_partitions=3,
                         overrides={"replica.lag.time.max.ms": "4000"})
    try:
        yield cluster.start()
    finally:
        try:
            if _test_failed(request):
                cluster.print_log_tails()
            cluster.stop()
        finally:
            shutil.rmtree(work, ignore_errors=True)


def test_nothing_acknowledged_is_lost_through_every_network_partition(net_cluster, java_tools):
    result = run_checker(net_cluster, rounds=len(NETWORK_NEMESES), nemeses=NETWORK_NEMESES,
                         seed=1, partitions=3, replicas=3, min_insync=2, acks1_producers=1,
                         java_tools=java_tools)
    assert result.ok, result.summary()
    assert len(result.rounds) == len(NETWORK_NEMESES), result.summary()
    # The halves and the ZooKeeper cut each left a side too small to take writes.
    assert len(result.refusal_windows) == 2, result.summary()
    assert result.acks1_acked > 0, result.summary()
