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

    async def store_offsets(self, group, entries, *producer):
        self.writing.set()
        await self.release.wait()
        await self.inner.store_offsets(group, entries, *producer)

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


class FirstWriteHeldStore(SlowStore):
    """The first offset write is held until `release`; later ones go at once
    (the first one's replication answered after the second's: an ISR shrunk
    between the two writes)."""

    def __init__(self):
        super().__init__()
        self.writes = 0

    async def store_offsets(self, group, entries, *producer):
        self.writes += 1
        if self.writes == 1:
            await super().store_offsets(group, entries, *producer)
        else:
            await self.inner.store_offsets(group, entries, *producer)


async def test_two_commits_are_applied_in_the_order_written_whichever_is_stored_first():
    store = FirstWriteHeldStore()
    coord = GroupCoordinator(store, make_config())
    await coord.start()
    try:
        older = asyncio.create_task(coord.commit_offsets("g", -1, "", None, [("t", 0, 5, -1, "")]))
        await asyncio.wait_for(store.writing.wait(), 5)
        newer = asyncio.create_task(coord.commit_offsets("g", -1, "", None, [("t", 0, 9, -1, "")]))
        for _ in range(5):
            await asyncio.sleep(0)
        assert store.writes == 2 and not newer.done()  # stored, applied only after the older
        store.release.set()
        assert [r.error_code for r in await asyncio.wait_for(older, 5)] == [0]
        assert [r.error_code for r in await asyncio.wait_for(newer, 5)] == [0]
        result = await coord.fetch_offsets("g", [("t", 0)])
        assert [(o.partition, o.offset) for o in result.partitions] == [(0, 9)]
    finally:
        await coord.shutdown()


async def test_a_transactional_commit_written_after_a_plain_one_stays_newer():
    """A plain commit, then a transaction's commit of the same partition; the
    plain one's write is answered last. The transaction's offset is the newer
    (written later): its COMMIT marker makes it the group's offset."""
    store = FirstWriteHeldStore()
    coord = GroupCoordinator(store, make_config())
    await coord.start()
    try:
        plain = asyncio.create_task(coord.commit_offsets("g", -1, "", None, [("t", 0, 5, -1, "")]))
        await asyncio.wait_for(store.writing.wait(), 5)
        txn = asyncio.create_task(coord.commit_txn_offsets("g", 7, 0, -1, "", None,
                                                           [("t", 0, 9, -1, "")]))
        for _ in range(5):
            await asyncio.sleep(0)
        assert store.writes == 2 and not txn.done()  # stored, applied after the plain one
        store.release.set()
        assert [r.error_code for r in await asyncio.wait_for(plain, 5)] == [0]
        assert [r.error_code for r in await asyncio.wait_for(txn, 5)] == [0]
        await coord.complete_txn_offsets(store.inner.partition_for("g"), 7, True)
        result = await coord.fetch_offsets("g", [("t", 0)])
        assert [(o.partition, o.offset) for o in result.partitions] == [(0, 9)]
    finally:
        await coord.shutdown()


class DeletionHeldStore(SlowStore):
    """Offset deletions are held until `release`; commits go at once."""

    async def store_offsets(self, group, entries, *producer):
        await self.inner.store_offsets(group, entries, *producer)

    async def delete_offsets(self, group, partitions):
        self.writing.set()
        await self.release.wait()
        await self.inner.delete_offsets(group, partitions)


async def test_a_commit_written_after_an_offset_deletion_outlives_it():
    """OffsetDelete's tombstone, then a commit of the same partition answered
    first: the commit is newer and stays, as it does in the log."""
    store = DeletionHeldStore()
    coord = GroupCoordinator(store, make_config())
    await coord.start()
    try:
        await coord.commit_offsets("g", -1, "", None, [("t", 0, 5, -1, "")])
        delete = asyncio.create_task(coord.delete_offsets("g", [("t", 0)]))
        await asyncio.wait_for(store.writing.wait(), 5)
        commit = asyncio.create_task(coord.commit_offsets("g", -1, "", None, [("t", 0, 9, -1, "")]))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not commit.done()  # written, applied after the deletion
        store.release.set()
        deleted = await asyncio.wait_for(delete, 5)
        assert deleted.error_code == 0 and [p.error_code for p in deleted.partitions] == [0]
        assert [r.error_code for r in await asyncio.wait_for(commit, 5)] == [0]
        result = await coord.fetch_offsets("g", [("t", 0)])
        assert [(o.partition, o.offset) for o in result.partitions] == [(0, 9)]
    finally:
        await coord.shutdown()


async def test_a_deletion_behind_a_commit_being_stored_deletes_it():
    """OffsetDelete and DeleteGroups handed in behind a commit still being
    written find it: the group's offsets are deleted, the commit's with them."""
    store = SlowStore()
    coord = GroupCoordinator(store, make_config())
    await coord.start()
    try:
        commit = asyncio.create_task(coord.commit_offsets("g", -1, "", None, [("t", 0, 5, -1, "")]))
        await asyncio.wait_for(store.writing.wait(), 5)
        delete = asyncio.create_task(coord.delete_offsets("g", [("t", 0)]))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not delete.done()  # waits for the commit
        store.release.set()
        await asyncio.wait_for(commit, 5)
        deleted = await asyncio.wait_for(delete, 5)
        assert deleted.error_code == 0 and [p.error_code for p in deleted.partitions] == [0]
        result = await coord.fetch_offsets("g", [("t", 0)])
        assert [(o.partition, o.offset) for o in result.partitions] == [(0, -1)]

        store.release.clear()
        store.writing.clear()
        commit = asyncio.create_task(coord.commit_offsets("h", -1, "", None, [("t", 0, 7, -1, "")]))
        await asyncio.wait_for(store.writing.wait(), 5)
        dropped = asyncio.create_task(coord.delete_groups(["h"]))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not dropped.done()
        store.release.set()
        await asyncio.wait_for(commit, 5)
        assert await asyncio.wait_for(dropped, 5) == [("h", 0)]
        result = await coord.fetch_offsets("h", [("t", 0)])
        assert [(o.partition, o.offset) for o in result.partitions] == [(0, -1)]
    finally:
        await coord.shutdown()
    # and what the log keeps: read back by the next coordinator, nothing of either
    again = GroupCoordinator(store.inner, make_config())
    await again.start()
    try:
        for group in ("g", "h"):
            result = await again.fetch_offsets(group, [("t", 0)])
            assert [(o.partition, o.offset) for o in result.partitions] == [(0, -1)], group
    finally:
        await again.shutdown()


async def test_the_retention_pass_keeps_a_group_whose_first_commit_is_being_written():
    """A simple group exists, with no offsets, from its first commit on: the
    retention pass must not drop it as empty while that commit is written
    (the commit would answer NONE and be lost until the next load)."""
    store = SlowStore()
    coord = GroupCoordinator(store, make_config())
    await coord.start()
    try:
        commit = asyncio.create_task(coord.commit_offsets("g", -1, "", None, [("t", 0, 5, -1, "")]))
        await asyncio.wait_for(store.writing.wait(), 5)
        await coord.expire_offsets(now_ms=10 ** 15)  # far past any retention
        store.release.set()
        assert [r.error_code for r in await asyncio.wait_for(commit, 5)] == [0]
        result = await coord.fetch_offsets("g", [("t", 0)])
        assert [(o.partition, o.offset) for o in result.partitions] == [(0, 5)]
    finally:
        await coord.shutdown()
