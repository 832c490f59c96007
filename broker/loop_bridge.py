"""Calling an object that lives on one event loop from handlers on others.

The network layer runs handlers on N processor loops, each in its own thread,
but a coordinator's timers and futures must all live on one loop (the one it
started on). A LoopBridge forwards each call of a named async method to that
loop and lets the caller await the answer on its own loop. A caller that is
cancelled (its connection closed) cancels the forwarded call.
"""
from __future__ import annotations

import asyncio
import functools
from typing import Any


class LoopBridge:
    """The async methods named in ``forwarded`` of ``target``, callable from any
    event loop or thread; they run on ``loop``."""

    def __init__(self, target: Any, loop: asyncio.AbstractEventLoop,
                 forwarded: frozenset[str]) -> None:
        self.target = target
        self.loop = loop
        self._forwarded = forwarded

    async def call(self, name: str, *args, **kwargs):
        if name not in self._forwarded:
            raise AttributeError(name)
        method = getattr(self.target, name)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            return await method(*args, **kwargs)
        cfut = asyncio.run_coroutine_threadsafe(method(*args, **kwargs), self.loop)
        return await asyncio.wrap_future(cfut)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._forwarded:
            return functools.partial(self.call, name)
        raise AttributeError(name)
