"""Which broker coordinates a key: the leader of the key's partition of an
internal topic: ``__consumer_offsets`` for groups, ``__transaction_state`` for
transactional ids (Kafka's rule, so a coordinator's state and the coordinator
live together, and the coordinator moves with that leadership).

On the embedded store this broker leads every partition, so it coordinates
every group. In a cluster the topic is created on first need (Kafka creates
it when the first FindCoordinator arrives, once brokers have registered, so
its partitions spread over them rather than landing on the first broker up);
until its partitions have leaders the answer is COORDINATOR_NOT_AVAILABLE,
which clients retry.
"""
from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Callable

from samsa.protocol.errors import ErrorCode

from ..metadata import BrokerEndpoint
from ..partitions import PartitionLayer
from .log_format import partition_for
from .store import OFFSETS_TOPIC

log = logging.getLogger("broker.groups.locator")


@dataclasses.dataclass(frozen=True)
class CoordinatorAnswer:
    error: ErrorCode
    node: BrokerEndpoint | None = None


class CoordinatorLocator:
    def __init__(self, partitions: PartitionLayer, offsets_partitions: Callable[[], int | None],
                 create_offsets_topic: Callable[[], None], default_partitions: int,
                 topic: str = OFFSETS_TOPIC) -> None:
        """offsets_partitions(): the partition count of the internal ``topic``,
        None while it does not exist; create_offsets_topic(): create it
        (idempotent)."""
        self.topic = topic
        self._partitions = partitions
        self._count = offsets_partitions
        self._create = create_offsets_topic
        self._default = default_partitions
        self._creating = False
        self._creating_lock = threading.Lock()

    def _create_in_background(self) -> None:
        """Create the topic off the network loop (ZooKeeper round trips), once at
        a time; the clients asking meanwhile retry FindCoordinator."""
        with self._creating_lock:
            if self._creating:
                return
            self._creating = True

        def create() -> None:
            try:
                self._create()
            except Exception as e:  # noqa: BLE001 - the next FindCoordinator tries again
                log.warning("could not create %s: %s", self.topic, e)
            finally:
                with self._creating_lock:
                    self._creating = False
        threading.Thread(target=create, name=f"samsa-create-{self.topic}", daemon=True).start()

    def partition_count(self) -> int:
        """How many partitions keys are spread over: the topic's, or the
        configured count it will be created with."""
        return self._count() or self._default

    def partition_of(self, key: str) -> int:
        return partition_for(key, self.partition_count())

    def owns(self, key: str) -> bool:
        """Whether this broker is the key's coordinator now: it leads the
        key's partition, and has taken that leadership up."""
        return self._partitions.leader_log(self.topic, self.partition_of(key)).ok

    def locate(self, key: str) -> CoordinatorAnswer:
        if self._count() is None:
            self._create_in_background()
            return CoordinatorAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        meta = self._partitions.partition(self.topic, self.partition_of(key))
        if meta is None or meta.leader < 0:
            return CoordinatorAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        node = self._partitions.endpoint(meta.leader)
        if node is None:
            return CoordinatorAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return CoordinatorAnswer(ErrorCode.NONE, node)
