"""The share-partition leader's client of the share coordinator (Kafka's
Persister): read, write, initialize and delete a share-partition's durable
state at whichever broker coordinates its key: directly when that is this
broker, else over the inter-broker connection
(Initialize/Read/Write/DeleteShareGroupState). One code path: a request is
located, sent and, on a coordinator error (not the coordinator, loading,
none yet) or a lost connection, located and sent again until the deadline,
as Kafka's persister retries.

Lives on the broker's main loop (its connections are loop-bound).
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, TypeVar

from samsa.client.aio import ConnectionClosedError
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (DeleteShareGroupStateRequest,
                                     InitializeShareGroupStateRequest,
                                     ReadShareGroupStateRequest,
                                     WriteShareGroupStateRequest)
from samsa.protocol.model import ApiKey

from ...metadata import BrokerEndpoint
from ...security.inter_broker import PLAINTEXT, InterBrokerSecurity
from ...transactions.connections import BrokerConnections
from .coordinator import ShareState
from .partition import StateBatch
from .service import ShareKey
from .share_coordinator import ShareCoordinator
from .state_log import coordinator_key

log = logging.getLogger("broker.groups.share")

# answers after which the coordinator is looked up and asked again
RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                       ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_ENOUGH_REPLICAS,
                       ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT,
                       ErrorCode.NOT_LEADER_OR_FOLLOWER})


class Locator(Protocol):
    def locate(self, key: str) -> _Answer: ...


class _Answer(Protocol):
    @property
    def error(self) -> ErrorCode: ...
    @property
    def node(self) -> BrokerEndpoint | None: ...


_T = TypeVar("_T")


class SharePersister:
    def __init__(self, broker_id: int, locator: Locator,
                 local: Callable[[], ShareCoordinator | None], timeout_s: float,
                 security: InterBrokerSecurity = PLAINTEXT, backoff_s: float = 0.1) -> None:
        self._me = broker_id
        self._locator = locator
        self._local = local
        self._timeout = timeout_s
        self._backoff = backoff_s
        self._connections = BrokerConnections("samsa-share-persister", timeout_s, security)

    async def close(self) -> None:
        await self._connections.close()

    async def read(self, key: ShareKey, leader_epoch: int) -> tuple[ErrorCode, ShareState | None]:
        async def local(c: ShareCoordinator) -> tuple[ErrorCode, ShareState | None]:
            return await c.read(key, leader_epoch)

        async def remote(node: BrokerEndpoint) -> tuple[ErrorCode, ShareState | None]:
            R = ReadShareGroupStateRequest
            resp = await self._call(node, ApiKey.READ_SHARE_GROUP_STATE, R(
                group_id=key[0], topics=[R.ReadStateData(topic_id=key[1], partitions=[
                    R.PartitionData(partition=key[2], leader_epoch=leader_epoch)])]))
            p = resp.results[0].partitions[0]
            if p.error_code:
                return ErrorCode(p.error_code), None
            return ErrorCode.NONE, ShareState(
                p.state_epoch, leader_epoch, p.start_offset,
                tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state,
                                 b.delivery_count) for b in p.state_batches))
        return await self._retrying(key, local, remote, lambda r: r[0], lambda c: (c, None))

    async def write(self, key: ShareKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: Sequence[StateBatch]) -> ErrorCode:
        async def local(c: ShareCoordinator) -> ErrorCode:
            return await c.write(key, state_epoch, leader_epoch, start_offset, batches)

        async def remote(node: BrokerEndpoint) -> ErrorCode:
            R = WriteShareGroupStateRequest
            resp = await self._call(node, ApiKey.WRITE_SHARE_GROUP_STATE, R(
                group_id=key[0], topics=[R.WriteStateData(topic_id=key[1], partitions=[
                    R.PartitionData(partition=key[2], state_epoch=state_epoch,
                                    leader_epoch=leader_epoch, start_offset=start_offset,
                                    state_batches=[R.StateBatch(
                                        first_offset=b.first_offset, last_offset=b.last_offset,
                                        delivery_state=b.state, delivery_count=b.delivery_count)
                                        for b in batches])])]))
            return ErrorCode(resp.results[0].partitions[0].error_code)
        return await self._retrying(key, local, remote, lambda r: r, lambda c: c)

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> ErrorCode:
        async def local(c: ShareCoordinator) -> ErrorCode:
            return await c.initialize(key, state_epoch, start_offset)

        async def remote(node: BrokerEndpoint) -> ErrorCode:
            R = InitializeShareGroupStateRequest
            resp = await self._call(node, ApiKey.INITIALIZE_SHARE_GROUP_STATE, R(
                group_id=key[0], topics=[R.InitializeStateData(topic_id=key[1], partitions=[
                    R.PartitionData(partition=key[2], state_epoch=state_epoch,
                                    start_offset=start_offset)])]))
            return ErrorCode(resp.results[0].partitions[0].error_code)
        return await self._retrying(key, local, remote, lambda r: r, lambda c: c)

    async def delete(self, key: ShareKey) -> ErrorCode:
        async def local(c: ShareCoordinator) -> ErrorCode:
            return await c.delete(key)

        async def remote(node: BrokerEndpoint) -> ErrorCode:
            R = DeleteShareGroupStateRequest
            resp = await self._call(node, ApiKey.DELETE_SHARE_GROUP_STATE, R(
                group_id=key[0], topics=[R.DeleteStateData(topic_id=key[1], partitions=[
                    R.PartitionData(partition=key[2])])]))
            return ErrorCode(resp.results[0].partitions[0].error_code)
        return await self._retrying(key, local, remote, lambda r: r, lambda c: c)

    # ------------------------------------------------------------ plumbing

    async def _retrying(self, key: ShareKey,
                        local: Callable[[ShareCoordinator], Awaitable[_T]],
                        remote: Callable[[BrokerEndpoint], Awaitable[_T]],
                        code_of: Callable[[_T], ErrorCode],
                        failed: Callable[[ErrorCode], _T]) -> _T:
        deadline = time.monotonic() + self._timeout
        while True:
            result: _T | None = None
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            answer = self._locator.locate(coordinator_key(key))
            node = answer.node
            if not answer.error and node is not None:
                if node.node_id == self._me:
                    coordinator = self._local()
                    if coordinator is not None:
                        result = await local(coordinator)
                        code = code_of(result)
                else:
                    try:
                        result = await remote(node)
                        code = code_of(result)
                    except (ConnectionClosedError, OSError, asyncio.TimeoutError,
                            IndexError) as e:
                        log.info("share coordinator %d not reached for %s: %s",
                                 node.node_id, key, e)
            if result is not None and code not in RETRIABLE:
                return result
            if time.monotonic() + self._backoff >= deadline:
                if result is not None:
                    return result
                return failed(code)
            await asyncio.sleep(self._backoff)

    async def _call(self, node: BrokerEndpoint, api_key: ApiKey, request: Any) -> Any:
        conn = None
        try:
            conn = await self._connections.get(node, node.node_id)
            return await asyncio.wait_for(conn.call(request, api_key=api_key, version=0),
                                          self._timeout)
        except (ConnectionClosedError, OSError, asyncio.TimeoutError):
            self._connections.drop(node.node_id, conn)
            raise
