"""The memory budget for large requests being received or handled.

Kafka's ``queued.max.request.bytes``: every processor thread takes
reservations from one shared budget. A connection that sees the size prefix
of a large frame reserves the whole declared size *before* it grows its
receive buffer for it, and gives it back when the request's handler is done
(or the connection closes). When the budget is used up the connection stops
reading and waits in line; the kernel's socket buffer and TCP flow control
hold the rest of the frame meanwhile.

Why reserve the declared size rather than what is actually buffered: a
connection that holds a reservation can always finish its frame, so
connections with half-received frames can never wait on each other for
memory none of them will give back. The buffer itself still grows only as
bytes arrive (see connection.py), so a client that declares 100 MB and sends
four bytes costs a reservation, not 100 MB of memory.

Like Kafka's non-strict pool, a reservation is granted whenever anything is
left, even if it is bigger than what is left: one frame larger than the
whole budget must still be servable. So the memory held is at most the
budget plus one frame.

Small frames (up to the receive chunk) never come here: they fit the
connection's own working buffer, so clients with ordinary requests keep
being served while large ones wait.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import Callable

Granted = Callable[[int], None]


class _Waiter:
    __slots__ = ("loop", "size", "on_granted", "cancelled")

    def __init__(self, loop: asyncio.AbstractEventLoop, size: int, on_granted: Granted) -> None:
        self.loop = loop
        self.size = size
        self.on_granted = on_granted
        self.cancelled = False


class RequestMemoryPool:
    """A byte budget shared by all processor threads (thread-safe).

    ``try_reserve(n)`` grants at once or returns False; ``wait(loop, n, cb)``
    queues the caller (first come, first served) and later calls ``cb(n)`` on
    ``loop`` once the reservation is made on its behalf; ``release(n)`` gives
    bytes back and grants queued waiters while anything is left.
    """

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError("capacity must be positive")
        self.capacity = capacity
        self._used = 0
        self._lock = threading.Lock()
        self._waiters: collections.deque[_Waiter] = collections.deque()

    @property
    def used(self) -> int:
        """Bytes reserved right now (a reading for metrics and tests)."""
        return self._used

    @property
    def waiting(self) -> int:
        """Connections waiting for a reservation."""
        with self._lock:  # read from the metrics thread while processors change it
            return sum(1 for w in self._waiters if not w.cancelled)

    def try_reserve(self, size: int) -> bool:
        with self._lock:
            # Waiters are served in order: nobody jumps the queue.
            if self._used < self.capacity and not self._waiters:
                self._used += size
                return True
            return False

    def wait(self, loop: asyncio.AbstractEventLoop, size: int, on_granted: Granted) -> _Waiter:
        """Queue for ``size`` bytes; ``on_granted(size)`` runs on ``loop`` once
        reserved. The caller owns the reservation from then on (it must
        release it even if it no longer wants it)."""
        waiter = _Waiter(loop, size, on_granted)
        with self._lock:
            self._waiters.append(waiter)
        self._grant_waiters()
        return waiter

    def cancel(self, waiter: _Waiter) -> None:
        """Leave the queue (a closing connection). A grant already on its way
        still arrives and must be released by its callback."""
        with self._lock:
            waiter.cancelled = True
            try:
                self._waiters.remove(waiter)
            except ValueError:
                pass  # already granted

    def release(self, size: int) -> None:
        if size <= 0:
            return
        with self._lock:
            self._used -= size
        self._grant_waiters()

    def _grant_waiters(self) -> None:
        granted: list[_Waiter] = []
        with self._lock:
            while self._waiters and self._used < self.capacity:
                w = self._waiters.popleft()
                if w.cancelled:
                    continue
                self._used += w.size
                granted.append(w)
        for w in granted:
            try:
                w.loop.call_soon_threadsafe(w.on_granted, w.size)
            except RuntimeError:  # that loop has closed: nobody will use it
                self.release(w.size)
