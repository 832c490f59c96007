"""Keeps this broker's logs in line with the cluster's metadata, off the
ZooKeeper event thread.

ZooKeeper watches fire on kazoo's event thread, which must not do disk work
(creating a partition directory, deleting a topic's logs): they only note what
changed and wake this worker, which then reconciles once for however many
changes arrived meanwhile (a topic of 1,000 partitions is 1,000 state znodes,
one pass).

A pass looks only at what changed (``ReplicaChanges``): the topics whose
assignment or config changed (or that were deleted) and the partitions whose
state changed. Looking at every local log each time made the work per pass
grow with the broker's partitions and the number of passes with the changes:
at 30,000 partitions each pass took a second, and creating topics or moving
leaders made hundreds of them. Everything is looked at on start and after a
failed pass.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, NamedTuple

from ..replication.manager import RolesNotTakenUp

log = logging.getLogger("broker.cluster.local_replicas")

RETRY_S = 1.0  # after a failed pass (a log dir that refused a new partition, say)
LOGGED_FROM = 1000  # a pass over this many changed partitions or more logs its time

Partition = tuple[str, int]


class ReplicaChanges(NamedTuple):
    """What a pass looks at: everything, or the topics and partitions named."""
    everything: bool
    topics: frozenset[str]
    partitions: frozenset[Partition]

    def merged(self, other: "ReplicaChanges") -> "ReplicaChanges":
        return ReplicaChanges(self.everything or other.everything, self.topics | other.topics,
                              self.partitions | other.partitions)


NOTHING = ReplicaChanges(False, frozenset(), frozenset())


class LocalReplicaSync:
    def __init__(self, reconcile: Callable[[ReplicaChanges], None],
                 name: str = "samsa-local-replicas") -> None:
        self._reconcile = reconcile
        self._wake = threading.Event()
        self._lock = threading.Lock()  # guards the three below
        self._everything = False
        self._topics: set[str] = set()
        self._partitions: set[Partition] = set()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def changed(self, *_args: object) -> None:
        """Anything may have changed: the next pass looks at everything
        (callable from any thread)."""
        with self._lock:
            self._everything = True
        self._wake.set()

    def topic_changed(self, topic: str) -> None:
        """A topic's assignment or config changed, or it was deleted."""
        with self._lock:
            self._topics.add(topic)
        self._wake.set()

    def partition_changed(self, topic: str, partition: int, *_state: object) -> None:
        """A partition's leader, epoch or ISR changed."""
        with self._lock:
            self._partitions.add((topic, partition))
        self._wake.set()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _take(self) -> ReplicaChanges:
        with self._lock:
            changes = ReplicaChanges(self._everything, frozenset(self._topics),
                                     frozenset(self._partitions))
            self._everything = False
            self._topics.clear()
            self._partitions.clear()
        return changes

    def _run(self) -> None:
        while True:
            self._wake.wait()
            if self._stopped:
                return
            self._wake.clear()
            changes = self._take()
            if changes == NOTHING:
                continue
            started = time.monotonic()
            try:
                self._reconcile(changes)
                if changes.everything or len(changes.partitions) >= LOGGED_FROM:
                    log.info("local replicas in line with the metadata in %.2f s (%s)",
                             time.monotonic() - started, "every partition" if changes.everything
                             else f"{len(changes.partitions)} partitions changed")
            except RolesNotTakenUp as e:
                # the rest of the pass is done: only these are tried again (each was
                # logged); a log that stays broken costs a look a second, not a pass
                if self._wake.wait(RETRY_S) and self._stopped:
                    return
                for topic, partition in e.partitions:
                    self.partition_changed(topic, partition)
            except Exception:  # noqa: BLE001 - tried again shortly
                log.exception("bringing local logs in line with the metadata failed; "
                              "trying again in %.0f s", RETRY_S)
                if self._wake.wait(RETRY_S) and self._stopped:
                    return
                self.changed()  # whatever the failed pass left undone: everything again
