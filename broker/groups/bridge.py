"""Calling the group coordinator from handlers that run on other event loops
(see broker/loop_bridge.py). The coordinator shields its own state from a
cancelled call (a member stays "waiting" the way Kafka keeps a dropped
JoinGroup in purgatory).
"""
from __future__ import annotations

import asyncio

from ..loop_bridge import LoopBridge, forward
from .coordinator import GroupCoordinator


class CoordinatorBridge(LoopBridge[GroupCoordinator]):
    """Same async API as GroupCoordinator, callable from any event loop/thread."""

    def __init__(self, coordinator: GroupCoordinator,
                 loop: asyncio.AbstractEventLoop | None = None):
        loop = loop or coordinator._loop
        if loop is None:
            raise RuntimeError("start the coordinator (or pass its loop) before bridging")
        super().__init__(coordinator, loop)
        self.coordinator = coordinator

    join_group = forward(GroupCoordinator.join_group)
    sync_group = forward(GroupCoordinator.sync_group)
    heartbeat = forward(GroupCoordinator.heartbeat)
    leave_group = forward(GroupCoordinator.leave_group)
    describe_groups = forward(GroupCoordinator.describe_groups)
    list_groups = forward(GroupCoordinator.list_groups)
    delete_groups = forward(GroupCoordinator.delete_groups)
    commit_offsets = forward(GroupCoordinator.commit_offsets)
    fetch_offsets = forward(GroupCoordinator.fetch_offsets)
    delete_offsets = forward(GroupCoordinator.delete_offsets)
    expire_offsets = forward(GroupCoordinator.expire_offsets)
    commit_txn_offsets = forward(GroupCoordinator.commit_txn_offsets)
    complete_txn_offsets = forward(GroupCoordinator.complete_txn_offsets)
    consumer_group_heartbeat = forward(GroupCoordinator.consumer_group_heartbeat)
    consumer_group_describe = forward(GroupCoordinator.consumer_group_describe)
