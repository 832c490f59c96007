"""Keeps this broker's logs in line with the cluster's metadata, off the
ZooKeeper event thread.

ZooKeeper watches fire on kazoo's event thread, which must not do disk work
(creating a partition directory, deleting a topic's logs): they only wake
this worker, which then reconciles once for however many changes arrived
meanwhile (a topic of 1,000 partitions is 1,000 state znodes, one pass).
"""
from __future__ import annotations

import logging
import threading
from typing import Callable

log = logging.getLogger("broker.cluster.local_replicas")

RETRY_S = 1.0  # after a failed pass (a log dir that refused a new partition, say)


class LocalReplicaSync:
    def __init__(self, reconcile: Callable[[], None], name: str = "samsa-local-replicas") -> None:
        self._reconcile = reconcile
        self._wake = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def changed(self, *_args: object) -> None:
        """Something in the metadata changed (callable from any thread)."""
        self._wake.set()

    def stop(self) -> None:
        self._stopped = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while True:
            self._wake.wait()
            if self._stopped:
                return
            self._wake.clear()
            try:
                self._reconcile()
            except Exception:  # noqa: BLE001 - tried again shortly
                log.exception("bringing local logs in line with the metadata failed; "
                              "trying again in %.0f s", RETRY_S)
                if self._wake.wait(RETRY_S) and self._stopped:
                    return
                self._wake.set()
