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

from protocol.errors import ErrorCode
from protocol.messages import WriteTxnMarkersRequest

from ..aio_client import ConnectionClosedError, KafkaConnection
from ..metadata import BrokerEndpoint, PartitionMeta

log = logging.getLogger("broker.transactions.markers")

WRITE_TXN_MARKERS = 27
Partition = tuple[str, int]
_FIRST_BACKOFF_S = 0.05
_MAX_BACKOFF_S = 1.0


class ClusterView(Protocol):
    def partition(self, topic: str, partition: int) -> PartitionMeta | None: ...
    def broker(self, broker_id: int) -> BrokerEndpoint | None: ...


class MarkerSender:
    def __init__(self, cluster: ClusterView, request_timeout_s: float = 30.0) -> None:
        self._cluster = cluster
        self._timeout = request_timeout_s
        self._connections: dict[int, KafkaConnection] = {}
        self._connecting: dict[int, asyncio.Lock] = {}

    async def close(self) -> None:
        for conn in self._connections.values():
            await conn.close()
        self._connections.clear()

    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool,
                            coordinator_epoch: int, partitions: frozenset[Partition],
                            still_wanted: Callable[[], bool]) -> None:
        remaining = set(partitions)
        backoff = _FIRST_BACKOFF_S
        while remaining and still_wanted():
            by_leader: dict[int, list[Partition]] = {}
            for tp in list(remaining):
                meta = self._cluster.partition(*tp)
                if meta is None:
                    log.info("dropping the marker for %s-%d: the partition is gone", *tp)
                    remaining.discard(tp)
                elif meta.leader >= 0:
                    by_leader.setdefault(meta.leader, []).append(tp)
            results = await asyncio.gather(*(
                self._send(leader, tps, producer_id, producer_epoch, commit, coordinator_epoch)
                for leader, tps in by_leader.items()))
            for done in results:
                remaining -= done
            if remaining:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF_S)

    async def _send(self, leader: int, partitions: list[Partition], producer_id: int,
                    producer_epoch: int, commit: bool, coordinator_epoch: int) -> set[Partition]:
        """The partitions whose marker ``leader`` has written (or that are gone)."""
        by_topic: dict[str, list[int]] = {}
        for topic, p in partitions:
            by_topic.setdefault(topic, []).append(p)
        W = WriteTxnMarkersRequest
        request = W(markers=[W.WritableTxnMarker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            topics=[W.WritableTxnMarkerTopic(name=t, partition_indexes=ps)
                    for t, ps in by_topic.items()],
            coordinator_epoch=coordinator_epoch)])
        try:
            conn = await self._connection(leader)
            response = await asyncio.wait_for(
                conn.call(request, api_key=WRITE_TXN_MARKERS, version=1), self._timeout)
        except (ConnectionClosedError, OSError, asyncio.TimeoutError) as e:
            log.info("markers to broker %d not sent (%s); retrying", leader, e)
            self._drop(leader)
            return set()
        done: set[Partition] = set()
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
                    else:
                        log.debug("marker for %s-%d on broker %d: %s; retrying", *tp,
                                  leader, ErrorCode(code).name)
        return done

    async def _connection(self, broker_id: int) -> KafkaConnection:
        conn = self._connections.get(broker_id)
        if conn is not None and not conn.closed:
            return conn
        lock = self._connecting.setdefault(broker_id, asyncio.Lock())
        async with lock:
            conn = self._connections.get(broker_id)
            if conn is not None and not conn.closed:
                return conn
            endpoint = self._cluster.broker(broker_id)
            if endpoint is None:
                raise ConnectionClosedError(f"broker {broker_id} is not registered")
            conn = await KafkaConnection.connect(endpoint.host, endpoint.port,
                                                 client_id="samsa-txn-markers",
                                                 timeout=self._timeout)
            self._connections[broker_id] = conn
            return conn

    def _drop(self, broker_id: int) -> None:
        conn = self._connections.pop(broker_id, None)
        if conn is not None:
            asyncio.get_running_loop().create_task(conn.close())
