"""Handler time as Kafka's request quota counts it: time a handler spends
running on its thread, not time it spends waiting (a long-polling fetch
waits up to max.wait.ms and must not count that as work)."""
from __future__ import annotations

import time
from typing import Any, Coroutine, Generator


class BusyTime:
    """Awaits ``coro`` and adds up the time of each of its steps (the spans
    between its suspensions) in ``seconds``."""

    __slots__ = ("_coro", "seconds")

    def __init__(self, coro: Coroutine) -> None:
        self._coro = coro
        self.seconds = 0.0

    def close(self) -> None:
        """For a BusyTime never awaited (its request was cancelled first)."""
        self._coro.close()

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self._coro
        clock = time.perf_counter
        send, error = None, None
        try:
            while True:
                started = clock()
                try:
                    if error is not None:
                        yielded = coro.throw(error)
                    else:
                        yielded = coro.send(send)
                except StopIteration as done:
                    return done.value
                finally:
                    self.seconds += clock() - started
                send, error = None, None
                try:
                    send = yield yielded
                except BaseException as e:  # cancellation and friends go to the handler
                    error = e
        finally:
            coro.close()
