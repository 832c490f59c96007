"""The group coordinator's time: what time it is and a way to be called back
later. Injected, so the membership rules run in virtual time in tests (a
test's clock fires the timers that are due when it is advanced)."""
from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock milliseconds (they are written in records)."""

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        """Run ``callback`` on the coordinator's loop in ``delay_ms``."""


def wall_ms() -> int:
    return int(time.time() * 1000)


class LoopClock:
    """Wall time, timers on the coordinator's event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 time_ms: Callable[[], int] = wall_ms):
        self._loop = loop
        self.now_ms = time_ms

    def call_later(self, delay_ms: int, callback: Callable[[], None]) -> Cancellable:
        return self._loop.call_later(delay_ms / 1000, callback)
