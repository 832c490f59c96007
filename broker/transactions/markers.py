"""Sending transaction markers (Kafka's TransactionMarkerChannelManager):
WriteTxnMarkers to the leader of every partition of a transaction.

Markers go over the wire to every leader, this broker included, as Kafka's
coordinator sends them: the leader appends the control batch through its own
produce path (epochs, replication, the last stable offset), whichever broker
it is. A partition is done when its leader answered NONE, or when its topic
is gone (nothing left to end). Anything else (leader moving, not yet known,
the ISR short) is retried after a back-off, for as long as the coordinator
still wants this transaction completed.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable, Protocol

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import WriteTxnMarkersRequest
from samsa.protocol.model import TopicPartition
from samsa.protocol.model import ApiKey

from samsa.client.aio import ConnectionClosedError
from ..metadata import BrokerEndpoint, PartitionMeta
from ..security.inter_broker import PLAINTEXT, InterBrokerSecurity
from .connections import BrokerConnections

log = logging.getLogger("broker.transactions.markers")

_STALE = {ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED}
_MOVING = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
           ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH}
_FIRST_BACKOFF_S = 0.05
_MAX_BACKOFF_S = 1.0


class ClusterView(Protocol):
    def partition(self, topic: str, partition: int) -> PartitionMeta | None: ...
    def broker(self, broker_id: int) -> BrokerEndpoint | None: ...


class MarkerSender:
    def __init__(self, cluster: ClusterView, request_timeout_s: float = 30.0,
                 security: InterBrokerSecurity = PLAINTEXT) -> None:
        self._cluster = cluster
        self._timeout = request_timeout_s
        self._connections = BrokerConnections("samsa-txn-markers", request_timeout_s, security)

    async def close(self) -> None:
        await self._connections.close()

    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool,
                            coordinator_epoch: int, partitions: frozenset[TopicPartition],
                            still_wanted: Callable[[], bool], *,
                            transaction_version: int = 0) -> bool:
        """True once every partition has its marker (or is gone); False when
        this coordinator stopped: no longer wanted, or a partition refused the
        marker as from a deposed coordinator or an older producer epoch (a
        newer coordinator owns the transaction then, as Kafka concludes).
        ``transaction_version`` 2 goes as WriteTxnMarkers v2's
        TransactionVersion: the marker's epoch is the one bumped at the end of
        the transaction (KIP-890 part 2)."""
        remaining = set(partitions)
        backoff = _FIRST_BACKOFF_S
        while remaining:
            if not still_wanted():
                return False
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in list(remaining):
                meta = self._cluster.partition(*tp)
                if meta is None:
                    log.info("dropping the marker for %s-%d: the partition is gone", *tp)
                    remaining.discard(tp)
                elif meta.leader >= 0:
                    by_leader.setdefault(meta.leader, []).append(tp)
            results = await asyncio.gather(*(
                self._send(leader, tps, producer_id, producer_epoch, commit, coordinator_epoch,
                           transaction_version)
                for leader, tps in by_leader.items()))
            for done, stale in results:
                if stale:
                    return False
                remaining -= done
            if remaining:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_S)
        return True

    async def _send(self, leader: int, partitions: list[TopicPartition], producer_id: int,
                    producer_epoch: int, commit: bool, coordinator_epoch: int,
                    transaction_version: int = 0) -> tuple[set[TopicPartition], bool]:
        """(the partitions whose marker ``leader`` has written or that are gone,
        whether a partition refused it as stale)."""
        by_topic: dict[str, list[int]] = {}
        for topic, p in partitions:
            by_topic.setdefault(topic, []).append(p)
        W = WriteTxnMarkersRequest
        request = W(markers=[W.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            topics=[W.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()],
            coordinator_epoch=coordinator_epoch, transaction_version=transaction_version)])
        conn = None
        try:
            conn = await self._connections.get(self._cluster.broker(leader), leader)
            response = await asyncio.wait_for(
                conn.call(request, api_key=ApiKey.WRITE_TXN_MARKERS,
                          version=2 if transaction_version >= 2 else 1), self._timeout)
        except (ConnectionClosedError, OSError, asyncio.TimeoutError) as e:
            log.info("markers to broker %d not sent (%s); retrying", leader, e)
            self._connections.drop(leader, conn)
            return set(), False
        done: set[TopicPartition] = set()
        stale = False
        for marker in response.markers:
            for topic in marker.topics:
                for part in topic.partitions:
                    tp = (topic.name, part.partition_index)
                    code = part.error_code
                    if code == ErrorCode.NONE:
                        done.add(tp)
                    elif (code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                          and self._cluster.partition(*tp) is None):
                        done.add(tp)  # deleted meanwhile: nothing to end
                    elif code in _STALE:
                        log.warning("marker for %s-%d refused by broker %d (%s): producer %d "
                                    "epoch %d is another coordinator's now; stopping", *tp,
                                    leader, ErrorCode(code).name, producer_id, producer_epoch)
                        stale = True
                    else:
                        # leaders moving, an ISR short: expected for a while, retried
                        log.log(logging.DEBUG if code in _MOVING else logging.INFO,
                                "marker for %s-%d on broker %d: %s; retrying", *tp, leader,
                                ErrorCode(code).name)
        return done, stale
