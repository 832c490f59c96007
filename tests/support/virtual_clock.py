"""Virtual time for code that takes a clock (now_ms() and call_later(ms, fn)),
such as the group coordinator: the test advances the time and the timers due
by then fire in due order, at once; nothing sleeps."""
from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable


class _Timer:
    __slots__ = ("callback", "cancelled", "due", "seq")

    def __init__(self, due: int, seq: int, callback: Callable[[], None]):
        self.due, self.seq, self.callback, self.cancelled = due, seq, callback, False

    def __lt__(self, other: _Timer) -> bool:
        return (self.due, self.seq) < (other.due, other.seq)

    def cancel(self) -> None:
        self.cancelled = True


class VirtualClock:
    def __init__(self, start_ms: int = 1_700_000_000_000):
        self.now = start_ms
        self._timers: list[_Timer] = []
        self._seq = itertools.count()

    def now_ms(self) -> int:
        return self.now

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> _Timer:
        timer = _Timer(self.now + max(0, int(delay_ms)), next(self._seq), callback)
        heapq.heappush(self._timers, timer)
        return timer

    def advance(self, ms: int) -> None:
        """Move the time on by ``ms``, firing every timer due meanwhile (and
        those they set that fall due too) at its due time."""
        end = self.now + ms
        while self._timers and self._timers[0].due <= end:
            timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                self.now = timer.due
                timer.callback()
        self.now = end


async def settle(rounds: int = 20) -> None:
    """Let the event loop run what is ready (answers handed to waiting
    requests, writes to an in-memory store) without letting any time pass."""
    for _ in range(rounds):
        await asyncio.sleep(0)
