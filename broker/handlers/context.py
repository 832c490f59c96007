"""What a handler gets: the request header, its connection, and the broker's services."""
from __future__ import annotations

import asyncio
import dataclasses
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, TypeVar

from samsa.protocol.messages import RequestHeader

from ..quotas.mutation import UNBOUNDED, MutationQuota
from .services import Connection, Services

T = TypeVar("T")

# Where handlers' blocking parts run: one pool for the broker process, sized
# apart from the processor loops. Each loop's default executor has
# min(32, cores + 4) threads, so one loop (num.network.threads' default) would
# have left 6 on a 2-core machine for every CreateTopics waiting for its
# leaders, controlled shutdown, reassignment and ZooKeeper write at once.
# Threads start only when work comes.
_BLOCKING = ThreadPoolExecutor(max_workers=32, thread_name_prefix="samsa-blocking")


@dataclasses.dataclass
class RequestContext:
    header: RequestHeader
    conn: Connection
    broker: Services
    # What CreateTopics, DeleteTopics and CreatePartitions charge their
    # partition mutations to (the dispatcher sets it when a quota applies)
    mutation_quota: MutationQuota = UNBOUNDED
    # The request's place in the order its connection's requests take effect
    # in (0: none, request_order.py); the dispatcher takes it in the order the
    # frames arrived
    turn: int = 0

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def listener(self) -> str:
        """The listener the request came in on: broker addresses in answers are
        that listener's."""
        return self.conn.listener_name

    def may_append(self) -> bool:
        """Every earlier request of this connection that takes a turn has
        gone on (a Produce: appended, or answered without): a producer's
        pipelined requests append in the order it sent them (network/turns.py)."""
        return not self.turn or self.conn.turns.is_turn(self.turn)

    async def wait_to_append(self) -> bool:
        """Until ``may_append``; False when the client went meanwhile (closed,
        or sent its FIN): Kafka, reading one request of a connection at a
        time, never read this one, so none of it may take effect (as for the
        requests that wait their whole turn: dispatcher._in_turn)."""
        await self.conn.turns.wait_for(self.turn)
        return not self.conn.peer_gone

    def appended(self) -> None:
        """This request's appends are done: the next one may append."""
        if self.turn:
            self.conn.turns.end(self.turn)


async def off_loop(fn: Callable[..., T], *args: object) -> T:
    """Run a handler's blocking part (metadata store writes: ZooKeeper round
    trips, waiting for the controller) on a worker thread, so the processor
    loop keeps serving its other connections meanwhile."""
    return await asyncio.get_running_loop().run_in_executor(_BLOCKING, fn, *args)
