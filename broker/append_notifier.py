"""Wakes long-polling fetches when a partition they wait on gets data.

Appends happen on whichever processor thread served the Produce; the waiting
Fetch sits on its own processor's event loop. Each waiter is a future plus the
loop that owns it, and an append completes it through call_soon_threadsafe.
"""
from __future__ import annotations

import asyncio
import threading


class AppendNotifier:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[tuple[str, int], set] = {}

    def wait_any(self, keys, loop: asyncio.AbstractEventLoop) -> asyncio.Future:
        """A future completed by the next append to any of `keys` (topic, partition)."""
        fut = loop.create_future()
        entry = (loop, fut)
        with self._lock:
            for key in keys:
                self._waiters.setdefault(key, set()).add(entry)
        fut.add_done_callback(lambda _f: self._forget(keys, entry))
        return fut

    def _forget(self, keys, entry) -> None:
        with self._lock:
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(entry)
                    if not waiters:
                        del self._waiters[key]

    def notify(self, topic: str, partition: int) -> None:
        with self._lock:
            waiting = self._waiters.get((topic, partition))
            if not waiting:
                return
            waiters = list(waiting)
        for loop, fut in waiters:
            try:
                loop.call_soon_threadsafe(_wake, fut)
            except RuntimeError:  # that loop is closed: the connection is gone
                pass


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)
