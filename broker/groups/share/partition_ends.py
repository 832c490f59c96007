"""The end of a share-partition's log (its high watermark), which its lag is
counted to (DescribeShareGroupOffsets v1, `share-groups --describe`): read
from the log when this broker leads the partition, else asked of its leader
with ListOffsets (latest, read uncommitted: the high watermark), one request
per leader, as Kafka's group coordinator asks the partition leaders.

Lives on the broker's main loop (its connections are loop-bound).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from samsa.client.aio import ConnectionClosedError
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import ListOffsetsRequest, ListOffsetsResponse
from samsa.protocol.model import ApiKey

from ...metadata import BrokerEndpoint, PartitionMeta
from ...security.inter_broker import PLAINTEXT, InterBrokerSecurity
from ...transactions.connections import BrokerConnections

log = logging.getLogger("broker.groups.share")

TopicPartition = tuple[str, int]
LATEST = -1  # ListOffsets' timestamp for the end of the log
READ_UNCOMMITTED = 0
# the first version with isolation_level and current_leader_epoch (not flexible)
_LIST_OFFSETS_VERSION = 4


class ClusterView(Protocol):
    def partition(self, topic: str, partition: int) -> PartitionMeta | None: ...
    def broker(self, broker_id: int) -> BrokerEndpoint | None: ...


class PartitionEnds:
    def __init__(self, broker_id: int, cluster: ClusterView,
                 local_end: Callable[[str, int], int | None], timeout_s: float,
                 security: InterBrokerSecurity = PLAINTEXT) -> None:
        """local_end(topic, partition): its high watermark when this broker
        leads it, else None."""
        self._me = broker_id
        self._cluster = cluster
        self._local_end = local_end
        self._timeout = timeout_s
        self._connections = BrokerConnections("samsa-share-lag", timeout_s, security)

    async def close(self) -> None:
        await self._connections.close()

    async def ends(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """The high watermark of each partition found (led here, or answered
        by its leader); a partition without a leader, or whose leader did not
        answer, is left out (its lag unknown)."""
        found: dict[TopicPartition, int] = {}
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            end = self._local_end(*tp)
            if end is not None:
                found[tp] = end
                continue
            meta = self._cluster.partition(*tp)
            if meta is not None and meta.leader >= 0 and meta.leader != self._me:
                by_leader.setdefault(meta.leader, []).append(tp)
        answers = await asyncio.gather(*(self._ask(leader, tps)
                                         for leader, tps in by_leader.items()))
        for answer in answers:
            found.update(answer)
        return found

    async def _ask(self, leader: int, partitions: Sequence[TopicPartition]
                   ) -> Mapping[TopicPartition, int]:
        R = ListOffsetsRequest
        by_topic: dict[str, list[int]] = {}
        for topic, p in partitions:
            by_topic.setdefault(topic, []).append(p)
        request = R(replica_id=-1, isolation_level=READ_UNCOMMITTED, topics=[
            R.ListOffsetsTopic(name=topic, partitions=[
                R.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1,
                                       timestamp=LATEST) for p in parts])
            for topic, parts in by_topic.items()])
        conn = None
        try:
            conn = await self._connections.get(self._cluster.broker(leader), leader)
            resp: ListOffsetsResponse = await asyncio.wait_for(
                conn.call(request, api_key=ApiKey.LIST_OFFSETS, version=_LIST_OFFSETS_VERSION),
                self._timeout)
        except (ConnectionClosedError, OSError, asyncio.TimeoutError) as e:
            self._connections.drop(leader, conn)
            log.info("partition leader %d not reached for the ends of %s: %s",
                     leader, partitions, e)
            return {}
        return {(t.name, p.partition_index): p.offset
                for t in resp.topics for p in t.partitions
                if p.error_code == ErrorCode.NONE and p.offset >= 0}
