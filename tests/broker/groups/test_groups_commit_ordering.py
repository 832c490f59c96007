"""An offset commit accepted before a rebalance is visible to the partition's next
owner, even while the commit is still being written to the offset store."""
from __future__ import annotations

import asyncio

from samsa.broker.groups import GroupCoordinator

from .test_groups import MemoryLog, make_config


class SlowStore:
    """The real offset store, with each offset write held until `release` is set."""

    def __init__(self):
        self.inner = MemoryLog().store()
        self.release = asyncio.Event()
        self.writing = asyncio.Event()

    async def load(self):
        return await self.inner.load()

    async def store_offsets(self, group, entries):
        self.writing.set()
        await self.release.wait()
        await self.inner.store_offsets(group, entries)

    def __getattr__(self, name):  # store_group, delete_offsets, delete_group
        return getattr(self.inner, name)


async def test_fetch_waits_for_a_commit_that_is_being_stored():
    store = SlowStore()
    coord = GroupCoordinator(store, make_config())
    await coord.start()
    try:
        # a simple (generation -1) commit: accepted, then parked inside the store write
        commit = asyncio.create_task(coord.commit_offsets(
            "g", -1, "", None, [("t", 4, 16666, -1, "")]))
        await asyncio.wait_for(store.writing.wait(), 5)
        fetch = asyncio.create_task(coord.fetch_offsets("g", [("t", 4)]))
        # A fetch issued after it, of a group with nothing being stored, answered: tasks
        # run in order, so a fetch of "g" not waiting for the commit would be done by now.
        await asyncio.create_task(coord.fetch_offsets("other", [("t", 4)]))
        assert not fetch.done()  # answering now would hand out "no offset" for partition 4
        store.release.set()
        assert [r.error_code for r in await asyncio.wait_for(commit, 5)] == [0]
        result = await asyncio.wait_for(fetch, 5)
        assert [(o.partition, o.offset) for o in result.partitions] == [(4, 16666)]
    finally:
        await coord.shutdown()
