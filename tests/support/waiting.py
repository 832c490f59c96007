"""Waiting for a condition in tests: poll with a deadline, never a bare sleep."""
from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float = 30.0, what: str = "condition",
               interval: float = 0.05) -> T:
    """The first truthy value of ``predicate()``; AssertionError naming
    ``what`` when ``timeout`` seconds pass without one."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
