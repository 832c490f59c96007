"""Calling an object that lives on one event loop from handlers on others.

The network layer runs handlers on N processor loops, each in its own thread,
but a coordinator's timers and futures must all live on one loop (the one it
started on). A LoopBridge forwards each call of an async method to that loop
and lets the caller await the answer on its own loop. A caller that is
cancelled (only the broker's stop cancels a handler: a connection that
closes does not) cancels the forwarded call.

A bridge class names the methods it forwards with ``forward(Target.method)``,
so a type checker sees each with the target's own signature.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable, Concatenate, Coroutine, Generic, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class LoopBridge(Generic[T]):
    """Runs coroutines of ``target`` on ``loop``, awaited from any loop or thread."""

    def __init__(self, target: T, loop: asyncio.AbstractEventLoop) -> None:
        self.target = target
        self.loop = loop

    async def call(self, fn: Callable[P, Coroutine[Any, Any, R]], *args: P.args,
                   **kwargs: P.kwargs) -> R:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            return await fn(*args, **kwargs)
        cfut = asyncio.run_coroutine_threadsafe(fn(*args, **kwargs), self.loop)
        return await asyncio.wrap_future(cfut)


def forward(method: Callable[Concatenate[T, P], Coroutine[Any, Any, R]]
            ) -> Callable[Concatenate[LoopBridge[T], P], Coroutine[Any, Any, R]]:
    """A bridge method that runs ``method`` of the bridge's target on the target's
    loop: same parameters, same answer. The method is looked up on the target at
    each call (by name), as the target's own attribute would be."""
    name = method.__name__

    async def forwarded(self: LoopBridge[T], /, *args: P.args, **kwargs: P.kwargs) -> R:
        bound: Callable[P, Coroutine[Any, Any, R]] = getattr(self.target, name)
        return await self.call(bound, *args, **kwargs)

    forwarded.__name__ = name
    forwarded.__doc__ = method.__doc__
    return forwarded
