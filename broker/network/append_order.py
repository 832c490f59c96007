"""The order a connection's Produce requests append in: the order they were sent.

Kafka reads one request of a connection at a time, so a producer's pipelined
Produce requests (up to max.in.flight.requests.per.connection, 5 with
idempotence) append in the order it sent them, and its sequence numbers rely
on that. samsa handles a connection's requests concurrently, which keeps that
order only while a produce handler appends before it first waits. One that
waits first (KIP-890: the transaction coordinator's word on a partition the
request would open a transaction in; a throttled connection's mute) let a
later request of the same producer append before it: the later batch was out
of sequence and refused, and the Java producer then failed the records of
both, so a transaction it went on to abort had lost them (seen in CI as an
aborted transaction with 13 of its 15 records in the log).

So each Produce request takes a turn when it is dispatched, in the order its
frame arrived, and appends only once every earlier turn has ended: appended,
or answered without appending. Its turn ends right after its appends, before
any acks=all wait, so pipelined requests still wait for replication together.
In the common case every earlier turn has ended and nothing waits.
"""
from __future__ import annotations

import asyncio


class AppendOrder:
    """Turns of one connection, numbered from 1 in dispatch order. A turn may
    end early (answered without appending); later turns still wait for every
    turn before them."""

    __slots__ = ("_taken", "_through", "_ended_early", "_waiting")

    def __init__(self) -> None:
        self._taken = 0
        self._through = 0  # every turn up to this one has ended
        self._ended_early: set[int] = set()
        self._waiting: dict[int, asyncio.Future[None]] = {}

    def take(self) -> int:
        self._taken += 1
        return self._taken

    def is_turn(self, turn: int) -> bool:
        """Every turn before ``turn`` has ended."""
        return self._through >= turn - 1

    async def wait_for(self, turn: int) -> None:
        """Until every turn before ``turn`` has ended."""
        if self.is_turn(turn):
            return
        future = asyncio.get_running_loop().create_future()
        self._waiting[turn] = future
        try:
            await future
        finally:
            self._waiting.pop(turn, None)

    def end(self, turn: int) -> None:
        """``turn`` has appended, or will not; ending it again does nothing."""
        if turn <= self._through:
            return
        if turn != self._through + 1:
            self._ended_early.add(turn)
            return
        through = turn
        while through + 1 in self._ended_early:
            through += 1
            self._ended_early.discard(through)
        self._through = through
        # only the turn right after may go now (the ones up to it have ended)
        future = self._waiting.get(through + 1)
        if future is not None and not future.done():
            future.set_result(None)
