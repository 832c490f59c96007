"""Calling the group coordinator from handlers that run on other event loops
(see broker/loop_bridge.py). The coordinator shields its own state from a
cancelled call (a member stays "waiting" the way Kafka keeps a dropped
JoinGroup in purgatory).
"""
from __future__ import annotations

import asyncio

from ..loop_bridge import LoopBridge
from .coordinator import GroupCoordinator

_FORWARDED = frozenset({
    "join_group", "sync_group", "heartbeat", "leave_group", "describe_groups",
    "list_groups", "delete_groups", "commit_offsets", "fetch_offsets",
    "delete_offsets", "expire_offsets", "commit_txn_offsets", "complete_txn_offsets",
})


class CoordinatorBridge(LoopBridge):
    """Same async API as GroupCoordinator, callable from any event loop/thread."""

    def __init__(self, coordinator: GroupCoordinator,
                 loop: asyncio.AbstractEventLoop | None = None):
        loop = loop or coordinator._loop
        if loop is None:
            raise RuntimeError("start the coordinator (or pass its loop) before bridging")
        super().__init__(coordinator, loop, _FORWARDED)
        self.coordinator = coordinator
