"""The local-replica worker hands each pass what changed since the last one:
the topics and partitions named by the watches, merged; everything on request
and after a failed pass."""
from __future__ import annotations

import threading

from samsa.broker.cluster.local_replicas import LocalReplicaSync, ReplicaChanges
from tests.support.waiting import wait_until


def test_a_pass_gets_what_changed_and_a_failed_pass_is_followed_by_everything():
    passes: list[ReplicaChanges] = []
    release = threading.Event()
    fail_next = [False]

    def reconcile(changes: ReplicaChanges) -> None:
        passes.append(changes)
        release.wait(10)
        if fail_next[0]:
            fail_next[0] = False
            raise OSError("a log dir refused")
    sync = LocalReplicaSync(reconcile, name="test-local-replicas")
    sync.start()
    try:
        sync.changed()  # start-up: everything
        wait_until(lambda: len(passes) == 1, what="the first pass")
        assert passes[0].everything
        # while that pass runs, changes pile up: one pass gets them all
        sync.topic_changed("a")
        sync.partition_changed("b", 1, object())
        sync.partition_changed("b", 2, None)
        sync.partition_changed("b", 1, None)
        release.set()
        wait_until(lambda: len(passes) == 2, what="the second pass")
        assert passes[1] == ReplicaChanges(False, frozenset({"a"}),
                                           frozenset({("b", 1), ("b", 2)}))
        fail_next[0] = True
        sync.partition_changed("c", 0)
        wait_until(lambda: len(passes) == 4, timeout=10, what="a pass after the failed one")
        assert passes[2].partitions == {("c", 0)} and passes[3].everything
    finally:
        release.set()
        sync.stop()
