"""Transactional produce verification (KIP-890 part 1,
`transaction.partition.verification.enable`).

A partition leader about to take a producer's first transactional batch of a
transaction asks the transaction coordinator whether that partition was added
to the producer's open transaction (AddPartitionsToTxn v4, verify-only) before
appending. Without it, a batch arriving after its transaction ended (a
delayed retry, a buggy client) opens a transaction no coordinator knows of:
its marker never comes, and the partition's last stable offset, so every
read_committed consumer, stops there for good ("hanging transaction").

The coordinator is asked in process when this broker is it, over the wire
otherwise. Its answers become the produce errors Kafka gives: a fenced
producer INVALID_PRODUCER_EPOCH, a partition not in the transaction
INVALID_TXN_STATE, and a coordinator that cannot answer now (moving, loading)
NOT_ENOUGH_REPLICAS, which producers retry.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Protocol

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import AddPartitionsToTxnRequest
from samsa.protocol.model import TopicPartition
from samsa.protocol.model import ApiKey

from samsa.client.aio import ConnectionClosedError
from ..groups.locator import CoordinatorAnswer
from ..metadata import BrokerEndpoint
from ..security.inter_broker import PLAINTEXT, InterBrokerSecurity
from .connections import BrokerConnections

log = logging.getLogger("broker.transactions.verification")

VERIFY_VERSION = 4  # the first version with verify_only (brokers only)
# what the producer may retry: the coordinator was not reachable or not ready
_RETRIABLE = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
              ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS,
              ErrorCode.REQUEST_TIMED_OUT}


class Locator(Protocol):
    def locate(self, key: str) -> CoordinatorAnswer: ...


LocalVerify = Callable[[str, int, int, list[TopicPartition]], Awaitable[dict[TopicPartition, ErrorCode]]]


def produce_error(code: int) -> ErrorCode:
    """The produce answer for a partition the coordinator answered ``code`` for."""
    code = ErrorCode(code)
    if code == ErrorCode.NONE:
        return code
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code in _RETRIABLE:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    return code


class TxnVerifier:
    """Lives on the transaction coordinator's loop (connections are loop-bound)."""

    def __init__(self, broker_id: int, locator: Locator, local_verify: LocalVerify,
                 timeout_s: float, security: InterBrokerSecurity = PLAINTEXT) -> None:
        self._broker_id = broker_id
        self._locator = locator
        self._local = local_verify
        self._timeout = timeout_s
        self._connections = BrokerConnections("samsa-txn-verify", timeout_s, security)

    async def close(self) -> None:
        await self._connections.close()

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        answer = self._locator.locate(transactional_id)
        if answer.error or answer.node is None:
            return {tp: ErrorCode.NOT_ENOUGH_REPLICAS for tp in partitions}
        if answer.node.node_id == self._broker_id:
            found = await self._local(transactional_id, producer_id, producer_epoch, partitions)
        else:
            found = await self._remote(answer.node, transactional_id, producer_id, producer_epoch,
                                       partitions)
        return {tp: produce_error(found.get(tp, ErrorCode.NOT_ENOUGH_REPLICAS))
                for tp in partitions}

    async def _remote(self, node: BrokerEndpoint, transactional_id: str, producer_id: int,
                      producer_epoch: int, partitions: list[TopicPartition]
                      ) -> dict[TopicPartition, ErrorCode]:
        R = AddPartitionsToTxnRequest
        by_topic: dict[str, list[int]] = {}
        for topic, p in partitions:
            by_topic.setdefault(topic, []).append(p)
        request = R(transactions=[R.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id,
            producer_epoch=producer_epoch, verify_only=True,
            topics=[R.AddPartitionsToTxnTopic(name=t, partitions=ps)
                    for t, ps in by_topic.items()])])
        conn = None
        try:
            conn = await self._connections.get(node, node.node_id)
            response = await asyncio.wait_for(
                conn.call(request, api_key=ApiKey.ADD_PARTITIONS_TO_TXN, version=VERIFY_VERSION),
                self._timeout)
        except (ConnectionClosedError, OSError, asyncio.TimeoutError) as e:
            log.info("verifying %s with coordinator %d failed: %s", transactional_id,
                     node.node_id, e)
            self._connections.drop(node.node_id, conn)
            return {}
        if response.error_code:
            return {tp: ErrorCode(response.error_code) for tp in partitions}
        out: dict[TopicPartition, ErrorCode] = {}
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for part in topic.results_by_partition:
                    out[(topic.name, part.partition_index)] = ErrorCode(part.partition_error_code)
        return out
