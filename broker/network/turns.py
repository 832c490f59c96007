"""Requests of one connection going on in the order they arrived, at the points
where that order matters and a request may wait before it gets there.

Kafka reads one request of a connection at a time, so a client's pipelined
requests take effect in the order it sent them: a producer's (up to
max.in.flight.requests.per.connection, 5 with idempotence) append in sequence,
a consumer's async commits land oldest first. samsa handles a connection's
requests concurrently, which keeps that order only while no request waits
before it takes effect. Where one may, each request takes a turn while still
in arrival order (before its first await) and goes on only once every earlier
turn has ended:

- The request types listed in request_order.py (which types, and where each
  one's turn ends, is said there and only there), each turn taken by the
  dispatcher in one sequence per connection. A Produce that waited on the
  transaction coordinator let the next one of the same producer append
  before it: that batch was out of sequence and refused, and the Java
  producer failed both, so a transaction it went on to abort had lost
  records (CI: 13 of 15).
- Requests held back before they are handled, by a throttle's mute
  (quotas/enforcement.py) or the test kit's pause (faults/injector.py): each
  held request took its own timer, and timers that end together fire in no set
  order. They are let go in arrival order, and a request arriving while some
  are still held goes after them.

A turn may end early (answered without appending, cancelled): later turns still
wait for every turn before them. In the common case every earlier turn has
ended and nothing waits.
"""
from __future__ import annotations

import asyncio
from typing import Callable


async def held_in_order(turns: Turns, wait_s: Callable[[], float]) -> None:
    """Hold a request while ``wait_s()`` (seconds to wait before looking
    again, 0 when it may go) says so, and until every request held before it
    has gone on; a hold set again while it waited for its turn is waited out
    too. The turn is taken before the first await (in arrival order, when
    awaited at once), and ended however the wait ends: the next request wakes
    once this one has started (its first step runs before the loop gets to
    the next)."""
    turn = turns.take()
    try:
        while True:
            while (delay := wait_s()) > 0:
                await asyncio.sleep(delay)
            await turns.wait_for(turn)
            if wait_s() <= 0:
                return
    finally:
        turns.end(turn)


class Turns:
    """One connection's turns at one point, numbered from 1 in arrival order."""

    __slots__ = ("_taken", "_through", "_ended_early", "_waiting")

    def __init__(self) -> None:
        self._taken = 0
        self._through = 0  # every turn up to this one has ended
        # (both rarely used: made when first needed, a connection's turns stay small)
        self._ended_early: set[int] | None = None
        self._waiting: dict[int, asyncio.Future[None]] | None = None

    def take(self) -> int:
        self._taken += 1
        return self._taken

    def is_turn(self, turn: int) -> bool:
        """Every turn before ``turn`` has ended."""
        return self._through >= turn - 1

    def holding(self) -> bool:
        """Some turn taken has not ended: one arriving now would wait."""
        return self._through < self._taken

    async def wait_for(self, turn: int) -> None:
        """Until every turn before ``turn`` has ended."""
        if self.is_turn(turn):
            return
        future = asyncio.get_running_loop().create_future()
        if self._waiting is None:
            self._waiting = {}
        self._waiting[turn] = future
        try:
            await future
        finally:
            self._waiting.pop(turn, None)

    def end(self, turn: int) -> None:
        """``turn`` has gone on, or will not; ending it again does nothing."""
        if turn <= self._through:
            return
        if turn != self._through + 1:
            if self._ended_early is None:
                self._ended_early = set()
            self._ended_early.add(turn)
            return
        through = turn
        early = self._ended_early
        while early and through + 1 in early:
            through += 1
            early.discard(through)
        self._through = through
        # only the turn right after may go now (the ones up to it have ended)
        future = self._waiting.get(through + 1) if self._waiting else None
        if future is not None and not future.done():
            future.set_result(None)
