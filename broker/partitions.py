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
state znodes) as the replica manager has taken it up: a partition is led here
once its ``LeaderReplica`` exists at the epoch the metadata names. This is the
one place that decides "am I the leader", and the one place leaders append,
so the high watermark and the produces waiting for acks=all follow every
append.
"""
from __future__ import annotations

import asyncio
from typing import Callable, NamedTuple, Protocol

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages.wire import Buf
from samsa.storage import AppendOrigin, AppendResult

from .metadata import BrokerEndpoint, MetadataStore, PartitionMeta
from .partition_log import PartitionLog
from .replication.leader import LeaderReplica
from .replication.manager import ReplicaManager
from .replication.selector import ReplicaView, select_rack_aware

NO_EPOCH = -1  # a client that does not say which epoch it believes in


READ_UNCOMMITTED, READ_COMMITTED = 0, 1   # Fetch/ListOffsets isolation_level


def fetch_upper_bound(log: PartitionLog, isolation_level: int) -> int:
    """Where a consumer's reads stop (exclusive), as Kafka's fetch isolation
    says: the high watermark for read_uncommitted, the last stable offset for
    read_committed (no record of an undecided transaction is handed out).
    ListOffsets' "latest" answers the same bound."""
    return log.last_stable_offset if isolation_level == READ_COMMITTED else log.high_watermark


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
    replica: LeaderReplica | None = None

    @property
    def ok(self) -> bool:
        return self.error == ErrorCode.NONE

    @property
    def found_log(self) -> PartitionLog:
        """The log of a lookup that is ``ok`` (one always has its log)."""
        if self.log is None:
            raise RuntimeError(f"a partition lookup answered {self.error!r} has no log")
        return self.log

    @property
    def found_replica(self) -> LeaderReplica:
        """The leader replica of a lookup that leader_log answered ``ok`` (a
        follower's copy, from consumer_log, has none: only a leader appends)."""
        if self.replica is None:
            raise RuntimeError(f"a partition lookup answered {self.error!r} has no leader replica")
        return self.replica


def _leads_at(replica: LeaderReplica | None, meta: PartitionMeta) -> bool:
    """Whether ``replica`` leads at the epoch ``meta`` (naming this broker
    leader) gives, and has not been fenced."""
    return replica is not None and replica.leader_epoch == meta.leader_epoch and not replica.fenced


def epoch_error(believed: int, current: int) -> ErrorCode:
    """Kafka's check of the leader epoch a client believes in."""
    if believed == NO_EPOCH or believed == current:
        return ErrorCode.NONE
    return ErrorCode.FENCED_LEADER_EPOCH if believed < current else ErrorCode.UNKNOWN_LEADER_EPOCH


class PartitionLayer:
    def __init__(self, store: MetadataStore, logs: LocalLogs, broker_id: int,
                 replicas: ReplicaManager, *,
                 rack_aware: Callable[[], bool] = lambda: False) -> None:
        self._store = store
        self._logs = logs
        self.broker_id = broker_id
        self.replicas = replicas
        self._rack_aware = rack_aware  # replica.selector.class is set (read live)

    def partition(self, topic: str, partition: int) -> PartitionMeta | None:
        return self._store.partition(topic, partition)

    def endpoint(self, broker_id: int) -> BrokerEndpoint | None:
        return self._store.broker(broker_id)

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
        replica = self.replicas.leader(topic, partition)
        if not _leads_at(replica, meta):
            # Named leader at an epoch the role worker has not reached: take it
            # up now rather than refuse until the worker's next pass.
            replica = self.replicas.take_up(topic, partition)
        if replica is None or not _leads_at(replica, meta):
            # Still not taken up (the log is not opened yet, or fenced at this
            # epoch): not a leader until it is, as in Kafka.
            return LeaderLookup(ErrorCode.NOT_LEADER_OR_FOLLOWER, leader_epoch=meta.leader_epoch)
        return LeaderLookup(ErrorCode.NONE, replica.log, meta.leader_epoch, replica=replica)

    def still_leads(self, replica: LeaderReplica) -> bool:
        """Whether the metadata still names this broker leader of ``replica``'s
        partition at its epoch, as leader_log found it (a replica is fenced
        only when the role worker gets to the change)."""
        meta = self._store.partition(replica.topic, replica.partition)
        return meta is not None and meta.leader == self.broker_id and _leads_at(replica, meta)

    def replica_log(self, topic: str, partition: int, current_leader_epoch: int,
                    replica_id: int) -> LeaderLookup:
        """A follower's fetch: the leader's log, when ``replica_id`` is one of
        the partition's replicas (Kafka answers any other broker
        NOT_LEADER_OR_FOLLOWER: it is not a valid replica of the partition)."""
        found = self.leader_log(topic, partition, current_leader_epoch)
        if found.ok and replica_id not in found.found_replica.replicas:
            return LeaderLookup(ErrorCode.NOT_LEADER_OR_FOLLOWER, leader_epoch=found.leader_epoch)
        return found

    def consumer_log(self, topic: str, partition: int, current_leader_epoch: int = NO_EPOCH,
                     may_read_follower: bool = False) -> LeaderLookup:
        """A consumer's fetch: the leader's log; with ``may_read_follower``
        (Fetch v11+, KIP-392) also this broker's follower copy, which it
        serves up to its own high watermark (what the leader told it is
        committed)."""
        found = self.leader_log(topic, partition, current_leader_epoch)
        if found.error != ErrorCode.NOT_LEADER_OR_FOLLOWER or not may_read_follower:
            return found
        meta = self._store.partition(topic, partition)
        if (meta is None or meta.leader < 0 or meta.leader == self.broker_id
                or self.broker_id not in meta.replicas):
            return found
        code = epoch_error(current_leader_epoch, meta.leader_epoch)
        if code:
            return LeaderLookup(code, leader_epoch=meta.leader_epoch)
        log = self._logs.get_log(topic, partition)
        if log is None:
            return found
        return LeaderLookup(ErrorCode.NONE, log, meta.leader_epoch)

    def preferred_read_replica(self, found: LeaderLookup, fetch_offset: int,
                               client_rack: str) -> int:
        """KIP-392 on the leader: the in-sync replica a consumer in
        ``client_rack`` should read from instead of this one (-1: here).
        Only with replica.selector.class set, as in Kafka."""
        if not client_rack or found.replica is None or not self._rack_aware():
            return -1
        own = self.endpoint(self.broker_id)
        leader = ReplicaView(self.broker_id, own.rack if own else None,
                             found.replica.log.log_end_offset, float("inf"))
        followers = []
        for broker_id, end, caught_up in found.replica.in_sync_followers_holding(fetch_offset):
            endpoint = self.endpoint(broker_id)
            if endpoint is not None:  # registered, so the client can reach it
                followers.append(ReplicaView(broker_id, endpoint.rack, end, caught_up))
        chosen = select_rack_aware(client_rack, leader, followers)
        return -1 if chosen == self.broker_id else chosen

    # ------------------------------------------------------------ writes

    def append(self, found: LeaderLookup, payload: Buf, origin: AppendOrigin = AppendOrigin.CLIENT,
               acks: int = 1, txn_version: int = 0) -> AppendResult:
        """Append to a partition this broker leads (``found`` from leader_log):
        stamped with the leader epoch, then the high watermark follows. acks=-1
        is refused before writing when the ISR is below min.insync.replicas
        (NotEnoughReplicasError); a leadership lost since the lookup is
        NotLeaderError. Both carry their Kafka error code. ``txn_version``:
        a transaction marker's TransactionVersion (WriteTxnMarkers v2)."""
        min_isr = found.found_log.config.min_insync_replicas if acks == -1 else None
        return found.found_replica.append(payload, origin, min_isr, txn_version)

    def transaction_open(self, found: LeaderLookup, producer_id: int, epoch: int) -> bool:
        """Whether the partition (``found`` from leader_log) has the producer's
        transaction open at ``epoch``: its next transactional batches join it."""
        return found.found_log.transaction_open(producer_id, epoch)

    def follower_fetched(self, found: LeaderLookup, replica_id: int, fetch_offset: int,
                         log_start_offset: int = -1) -> None:
        """A follower's fetch: its log end is ``fetch_offset``, its log start
        ``log_start_offset`` (-1: the request does not say, before v5)."""
        replica = found.found_replica
        join = replica.follower_fetched(replica_id, fetch_offset, log_start_offset)
        if join is not None:
            self.replicas.propose_isr(replica, join)

    async def wait_replicated(self, pending: list[tuple[LeaderLookup, int, int]],
                              timeout_ms: int) -> list[ErrorCode]:
        """acks=all: per (partition, end offset, min.insync.replicas), the error
        once the high watermark reaches the end offset, or REQUEST_TIMED_OUT."""
        leaders = [found.found_replica for found, _, _ in pending]  # appended to: leader lookups
        known = [leader.replicated(end, min_isr) for leader, (_, end, min_isr) in zip(leaders, pending)]
        answered = [code for code in known if code is not None]
        if len(answered) == len(known):  # one replica, or the followers were quick
            return answered
        loop = asyncio.get_running_loop()
        futures = [leader.wait_for(end, min_isr, loop) for leader, (_, end, min_isr) in zip(leaders, pending)]
        undone = [f for f in futures if not f.done()]
        if undone:
            # One timer answers those still waiting then (the leader never
            # answers REQUEST_TIMED_OUT itself): cheaper than asyncio.wait's
            # callbacks on each future, and this runs for every acks=all Produce.
            timer = loop.call_later(max(0, timeout_ms) / 1000, _time_out, undone)
            try:
                for f in undone:
                    await f
            finally:
                timer.cancel()
        codes: list[ErrorCode] = []
        for leader, fut in zip(leaders, futures):
            code = fut.result()
            if code == ErrorCode.REQUEST_TIMED_OUT:
                leader.forget(fut)
            codes.append(code)
        return codes


def _time_out(futures: list[asyncio.Future[ErrorCode]]) -> None:
    for fut in futures:
        if not fut.done():
            fut.set_result(ErrorCode.REQUEST_TIMED_OUT)
