"""Counts kept per thread: exact across the broker's network threads with no
lock on the request path.

Each thread adds to a tally of its own (one writer per tally loses nothing);
a reader adds the tallies up. The lock is taken once per thread, when its
tally is made, and by readers.
"""
from __future__ import annotations

import threading
from typing import Callable, Generic, TypeVar

T = TypeVar("T")


class PerThread(Generic[T]):
    """One ``make()`` per thread that asks for it."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._local = threading.local()
        self._all: list[T] = []
        self._lock = threading.Lock()

    def mine(self) -> T:
        """The calling thread's own."""
        try:
            return self._local.value  # type: ignore[no-any-return]
        except AttributeError:
            value = self._local.value = self._make()
            with self._lock:
                self._all.append(value)
            return value

    def every(self) -> list[T]:
        """Every thread's, as they are now."""
        with self._lock:
            return list(self._all)
