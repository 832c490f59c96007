"""Calling the coordinator from handlers that run on other event loops.

The network layer runs handlers on N processor loops, each in its own thread,
but the coordinator's timers and futures must all live on one loop (the one
`GroupCoordinator.start()` ran on). `CoordinatorBridge` forwards each call to
that loop and lets the caller await the answer on its own loop. A caller that
is cancelled (its connection closed) cancels the forwarded call; the
coordinator shields its own state from that (a member stays "waiting" the way
Kafka keeps a dropped JoinGroup in purgatory).
"""
from __future__ import annotations

import asyncio
import functools

from .coordinator import GroupCoordinator

_FORWARDED = frozenset({
    "join_group", "sync_group", "heartbeat", "leave_group", "describe_groups",
    "list_groups", "delete_groups", "commit_offsets", "fetch_offsets",
    "delete_offsets", "expire_offsets",
})


class CoordinatorBridge:
    """Same async API as GroupCoordinator, callable from any event loop/thread."""

    def __init__(self, coordinator: GroupCoordinator,
                 loop: asyncio.AbstractEventLoop | None = None):
        self.coordinator = coordinator
        self.loop = loop or coordinator._loop
        if self.loop is None:
            raise RuntimeError("start the coordinator (or pass its loop) before bridging")

    async def call(self, name: str, *args, **kwargs):
        if name not in _FORWARDED:
            raise AttributeError(name)
        method = getattr(self.coordinator, name)
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            return await method(*args, **kwargs)
        cfut = asyncio.run_coroutine_threadsafe(method(*args, **kwargs), self.loop)
        return await asyncio.wrap_future(cfut)

    def __getattr__(self, name: str):
        if name in _FORWARDED:
            return functools.partial(self.call, name)
        raise AttributeError(name)
