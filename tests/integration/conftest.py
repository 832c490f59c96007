"""Fixtures shared by the cluster tests."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from tests.conftest import _test_failed
from tests.support.cluster import Cluster
from tests.support.zookeeper import zookeeper_installed


def require_zookeeper() -> None:
    if not zookeeper_installed():
        pytest.fail("ZooKeeper is not installed (Debian package 'zookeeper'; "
                    "scripts/setup.sh --test installs it)")


@pytest.fixture
def cluster_factory(request):
    """``make(**Cluster kwargs)``: a started cluster of this test's own (3 brokers
    unless told), stopped at the end; every broker's log tail is printed when
    the test failed."""
    require_zookeeper()
    made: list[tuple[Cluster, Path]] = []

    def make(**kwargs) -> Cluster:
        work = Path(tempfile.mkdtemp(prefix="samsa-cluster-"))
        cluster = Cluster(work, **{"size": 3, **kwargs})
        made.append((cluster, work))
        return cluster.start()

    try:
        yield make
    finally:
        failed = _test_failed(request)
        for cluster, work in made:
            try:
                if failed:
                    cluster.print_log_tails()
                cluster.stop()
            finally:
                shutil.rmtree(work, ignore_errors=True)
