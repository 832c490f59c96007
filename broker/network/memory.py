"""The memory budget for large requests being received or handled.

Kafka's ``queued.max.request.bytes``: every processor thread takes
reservations from one shared budget. A connection pays for what it has
actually been sent, not for what a size prefix claims: a frame larger than
the receive chunk reserves each receive buffer it grows into (see
connection.py) before allocating it, and the reservation goes with the
finished frame to its handler and comes back when the handler is done (or
the connection closes). So a client that declares 100 MB and sends four
bytes costs no reservation at all, and what the budget holds is memory that
clients really sent. When the budget is used up, a connection that needs
more stops reading and waits in line (first come, first served); the
kernel's socket buffer and TCP flow control hold the rest of its frame, and
frames up to the receive chunk on other connections are served as usual.

Like Kafka's non-strict pool, a reservation is granted whenever anything is
left, even if it is bigger than what is left: one frame larger than the
whole budget must still be servable.

Paying as bytes arrive has one hazard that reserving declared sizes did not:
connections holding half-received frames could all wait for memory that
none of them will give back. So one owner at a time may overdraw: an owner
that already holds memory (it is growing a frame) and finds the budget used
up gets what it asks for beyond the budget, and keeps doing so until it
next gives memory back (its frame was handled); then the next such owner
may. A frame in progress can therefore always finish, and the memory held
stays bounded by the budget plus about two frames (the last grant that
overshot it, and the overdrawing owner's frame). An owner that overdraws and
then stops sending is closed by the receive timeout like any other (see
processor.py), which gives its memory back.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from typing import Callable, Hashable

Granted = Callable[[int], None]


class _Waiter:
    __slots__ = ("loop", "owner", "size", "on_granted", "cancelled")

    def __init__(self, loop: asyncio.AbstractEventLoop, owner: Hashable, size: int,
                 on_granted: Granted) -> None:
        self.loop = loop
        self.owner = owner
        self.size = size
        self.on_granted = on_granted
        self.cancelled = False


class RequestMemoryPool:
    """A byte budget shared by all processor threads (thread-safe).

    Every reservation has an owner (a connection). ``try_reserve(owner, n)``
    grants at once or returns False; ``wait(loop, owner, n, cb)`` queues the
    caller and later calls ``cb(n)`` on ``loop`` once the reservation is made
    on its behalf; ``release(owner, n)`` gives bytes back and grants queued
    waiters while anything is left.
    """

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError("capacity must be positive")
        self.capacity = capacity
        self._used = 0
        self._lock = threading.Lock()
        self._waiters: collections.deque[_Waiter] = collections.deque()
        self._held: dict[Hashable, int] = {}  # owner -> bytes it holds
        self._overdraft: Hashable | None = None  # the one owner allowed past the budget

    @property
    def used(self) -> int:
        """Bytes reserved right now (a reading for metrics and tests)."""
        return self._used

    @property
    def waiting(self) -> int:
        """Connections waiting for a reservation."""
        with self._lock:  # read from the metrics thread while processors change it
            return sum(1 for w in self._waiters if not w.cancelled)

    def try_reserve(self, owner: Hashable, size: int) -> bool:
        with self._lock:
            # Waiters are served in order: nobody jumps the queue, except an
            # owner finishing a frame while the budget is used up.
            if self._used < self.capacity and not self._waiters:
                self._take(owner, size)
                return True
            if self._may_overdraw(owner):
                self._take(owner, size)
                self._overdraft = owner
                return True
            return False

    def wait(self, loop: asyncio.AbstractEventLoop, owner: Hashable, size: int,
             on_granted: Granted) -> _Waiter:
        """Queue for ``size`` bytes; ``on_granted(size)`` runs on ``loop`` once
        reserved. The caller owns the reservation from then on (it must
        release it even if it no longer wants it)."""
        waiter = _Waiter(loop, owner, size, on_granted)
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

    def release(self, owner: Hashable, size: int) -> None:
        if size <= 0:
            return
        with self._lock:
            self._used -= size
            left = self._held.get(owner, 0) - size
            if left > 0:
                self._held[owner] = left
            else:
                self._held.pop(owner, None)
            if self._overdraft is owner:
                self._overdraft = None  # its frame was handled (or it closed)
        self._grant_waiters()

    # Under the lock:

    def _may_overdraw(self, owner: Hashable) -> bool:
        return owner in self._held and (self._overdraft is None or self._overdraft is owner)

    def _take(self, owner: Hashable, size: int) -> None:
        self._used += size
        self._held[owner] = self._held.get(owner, 0) + size

    def _grant_waiters(self) -> None:
        granted: list[_Waiter] = []
        with self._lock:
            waiters = self._waiters
            while waiters and (waiters[0].cancelled or self._used < self.capacity):
                w = waiters.popleft()
                if not w.cancelled:
                    self._take(w.owner, w.size)
                    granted.append(w)
            # The budget is used up. If a connection in line is growing a
            # frame, let it finish, so half-received frames never wait on
            # each other for memory none of them gives back.
            for w in waiters:
                if not w.cancelled and self._may_overdraw(w.owner):
                    waiters.remove(w)
                    self._take(w.owner, w.size)
                    self._overdraft = w.owner
                    granted.append(w)
                    break
        for w in granted:
            try:
                w.loop.call_soon_threadsafe(w.on_granted, w.size)
            except RuntimeError:  # that loop has closed: nobody will use it
                self.release(w.owner, w.size)
