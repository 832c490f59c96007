"""The partition layer: between the request handlers and the logs.

Handlers never look a log up themselves. They ask this layer for the
partition they are about to read or write, and get either the local log with
the leader epoch to stamp on appends, or the error Kafka answers with:

- UNKNOWN_TOPIC_OR_PARTITION: no such topic or partition in the metadata;
- NOT_LEADER_OR_FOLLOWER: the partition exists, another broker leads it (the
  answer carries that leader, for the v12+/v16+ hint fields), or nobody does;
- FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH: the client believes in an older
  / newer leader epoch than the metadata says (KIP-320);
- NOT_LEADER_OR_FOLLOWER also while this broker is named leader but has not
  opened its replica yet (just placed here).

Leadership comes from the metadata store (the embedded store leads every
partition at epoch 0; the ZooKeeper store follows the controller's partition
state znodes), so this is the one place that decides "am I the leader".
"""
from __future__ import annotations

from typing import NamedTuple, Protocol

from protocol.errors import ErrorCode

from .metadata import BrokerEndpoint, MetadataStore, PartitionMeta

NO_EPOCH = -1  # a client that does not say which epoch it believes in


class PartitionLog(Protocol):
    """What handlers use of a storage.Log (kept narrow on purpose)."""
    log_start_offset: int
    log_end_offset: int
    high_watermark: int


class LocalLogs(Protocol):
    """The logs this broker holds (storage.LogManager)."""
    def get_log(self, topic: str, partition: int) -> PartitionLog | None: ...


class LeaderLookup(NamedTuple):
    """A partition resolved for a read or write: its log when this broker leads
    it, else the error to answer and who leads it now (if anyone). A tuple:
    one is made per partition of every Produce and Fetch."""
    error: ErrorCode
    log: PartitionLog | None = None
    leader_epoch: int = NO_EPOCH
    leader: BrokerEndpoint | None = None

    @property
    def ok(self) -> bool:
        return self.error == ErrorCode.NONE


def epoch_error(believed: int, current: int) -> ErrorCode:
    """Kafka's check of the leader epoch a client believes in."""
    if believed == NO_EPOCH or believed == current:
        return ErrorCode.NONE
    return ErrorCode.FENCED_LEADER_EPOCH if believed < current else ErrorCode.UNKNOWN_LEADER_EPOCH


class PartitionLayer:
    def __init__(self, store: MetadataStore, logs: LocalLogs, broker_id: int) -> None:
        self._store = store
        self._logs = logs
        self.broker_id = broker_id

    def partition(self, topic: str, partition: int) -> PartitionMeta | None:
        return self._store.partition(topic, partition)

    def endpoint(self, broker_id: int) -> BrokerEndpoint | None:
        for b in self._store.brokers():
            if b.node_id == broker_id:
                return b
        return None

    def is_leader(self, topic: str, partition: int) -> bool:
        meta = self.partition(topic, partition)
        return meta is not None and meta.leader == self.broker_id

    def leader_log(self, topic: str, partition: int,
                   current_leader_epoch: int = NO_EPOCH) -> LeaderLookup:
        """The partition's local log, if this broker leads it at the epoch the
        client believes in."""
        meta = self._store.partition(topic, partition)
        if meta is None:
            return LeaderLookup(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if meta.leader != self.broker_id:
            leader = self.endpoint(meta.leader) if meta.leader >= 0 else None
            return LeaderLookup(ErrorCode.NOT_LEADER_OR_FOLLOWER, leader_epoch=meta.leader_epoch,
                                leader=leader)
        if current_leader_epoch != NO_EPOCH:
            code = epoch_error(current_leader_epoch, meta.leader_epoch)
            if code:
                return LeaderLookup(code, leader_epoch=meta.leader_epoch)
        log = self._logs.get_log(topic, partition)
        if log is None:
            # Named leader, but its replica is not open here yet (the metadata
            # worker is creating it): not a leader until it is, as in Kafka.
            return LeaderLookup(ErrorCode.NOT_LEADER_OR_FOLLOWER, leader_epoch=meta.leader_epoch)
        return LeaderLookup(ErrorCode.NONE, log, meta.leader_epoch)
