"""Waiting for a condition in tests: poll with a deadline, never a bare sleep.

The one polling loop of the test suite: threads and processes use ``wait_until``, coroutines
``wait_until_async`` (which awaits the predicate when it returns an awaitable).
"""
from __future__ import annotations

import asyncio
import inspect
import time
from typing import Any, Callable, TypeVar

T = TypeVar("T")


def _timed_out(timeout: float, what: str | Callable[[], str]) -> AssertionError:
    # ``what`` may be a callable so that the message can show the last state seen.
    return AssertionError(f"timed out after {timeout:g} s waiting for "
                          f"{what() if callable(what) else what}")


def wait_until(predicate: Callable[[], T], timeout: float = 30.0,
               what: str | Callable[[], str] = "condition", interval: float = 0.05) -> T:
    """The first truthy value of ``predicate()``; AssertionError naming
    ``what`` when ``timeout`` seconds pass without one."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _timed_out(timeout, what)
        time.sleep(interval)


async def wait_until_async(predicate: Callable[[], Any], timeout: float = 30.0,
                           what: str | Callable[[], str] = "condition",
                           interval: float = 0.05) -> Any:
    """``wait_until`` for a coroutine: sleeps with ``asyncio.sleep`` so the loop runs on."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _timed_out(timeout, what)
        await asyncio.sleep(interval)
