"""A group's offset changes (commits, plain and transactional, and deletions)
while they are being written: a commit accepted before a rebalance is visible
to the partition's next owner, requests behind a change find it, and the
offsets in memory end as the log has them, whichever write is answered first."""
from __future__ import annotations

import asyncio
import contextlib

from samsa.broker.groups import GroupCoordinator

from .test_groups import MemoryLog, make_config


class HeldStore:
    """The real offset store over an in-memory log. Each offset write appends
    at once, as the broker's log does; those ``held(kind, n)`` picks (kind
    "commit" or "delete", n the write's number from 1) are then answered only
    once ``release`` is set, as a write whose replication is answered late."""

    def __init__(self, held=lambda kind, n: True):
        self.log = MemoryLog()
        self.inner = self.log.store()
        self.release = asyncio.Event()
        self.writing = asyncio.Event()  # a held write is waiting
        self.writes = 0
        self._held = held

    async def load(self):
        return await self.inner.load()

    async def _answer(self, kind):
        self.writes += 1
        if self._held(kind, self.writes):
            self.writing.set()
            await self.release.wait()

    async def store_offsets(self, group, entries, *producer):
        await self.inner.store_offsets(group, entries, *producer)
        await self._answer("commit")

    async def delete_offsets(self, group, partitions):
        await self.inner.delete_offsets(group, partitions)
        await self._answer("delete")

    def __getattr__(self, name):  # store_group, delete_group, partition_for
        return getattr(self.inner, name)


async def until(condition):
    while not condition():
        await asyncio.sleep(0)


async def offset_of(coord, group, tp=("t", 0)):
    result = await coord.fetch_offsets(group, [tp])
    return [o.offset for o in result.partitions][0]


@contextlib.asynccontextmanager
async def running(store):
    """A group coordinator over ``store``, started, and stopped after."""
    coord = GroupCoordinator(store, make_config())
    await coord.start()
    try:
        yield coord
    finally:
        await coord.shutdown()


async def offset_in_the_log(store, group, tp=("t", 0)):
    """The group's offset as the next coordinator reads it back from the log."""
    async with running(store.inner) as again:
        return await offset_of(again, group, tp)


async def test_fetch_waits_for_a_commit_that_is_being_stored():
    store = HeldStore()
    async with running(store) as coord:
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


async def test_two_commits_are_applied_in_the_order_written_whichever_is_stored_first():
    # the first write answered after the second's: an ISR shrunk between the two
    store = HeldStore(held=lambda kind, n: n == 1)
    async with running(store) as coord:
        older = asyncio.create_task(coord.commit_offsets("g", -1, "", None, [("t", 0, 5, -1, "")]))
        await asyncio.wait_for(store.writing.wait(), 5)
        newer = asyncio.create_task(coord.commit_offsets("g", -1, "", None, [("t", 0, 9, -1, "")]))
        await asyncio.wait_for(until(lambda: store.writes == 2), 5)
        store.release.set()
        assert [r.error_code for r in await asyncio.wait_for(older, 5)] == [0]
        assert [r.error_code for r in await asyncio.wait_for(newer, 5)] == [0]
        assert await offset_of(coord, "g") == 9
    assert await offset_in_the_log(store, "g") == 9


async def test_a_transactional_commit_written_after_a_plain_one_stays_newer():
    """A plain commit, then a transaction's commit of the same partition; the
    plain one's write is answered last. The transaction's offset is the newer
    (written later): its COMMIT marker makes it the group's offset."""
    store = HeldStore(held=lambda kind, n: n == 1)
    async with running(store) as coord:
        plain = asyncio.create_task(coord.commit_offsets("g", -1, "", None, [("t", 0, 5, -1, "")]))
        await asyncio.wait_for(store.writing.wait(), 5)
        txn = asyncio.create_task(coord.commit_txn_offsets("g", 7, 0, -1, "", None,
                                                           [("t", 0, 9, -1, "")]))
        await asyncio.wait_for(until(lambda: store.writes == 2), 5)
        store.release.set()
        assert [r.error_code for r in await asyncio.wait_for(plain, 5)] == [0]
        assert [r.error_code for r in await asyncio.wait_for(txn, 5)] == [0]
        await coord.complete_txn_offsets(store.partition_for("g"), 7, True)
        assert await offset_of(coord, "g") == 9


async def test_a_commit_written_after_an_offset_deletion_outlives_it():
    """OffsetDelete's tombstone, then a commit of the same partition answered
    first: the commit is newer and stays, as it does in the log."""
    store = HeldStore(held=lambda kind, n: kind == "delete")
    async with running(store) as coord:
        await coord.commit_offsets("g", -1, "", None, [("t", 0, 5, -1, "")])
        delete = asyncio.create_task(coord.delete_offsets("g", [("t", 0)]))
        await asyncio.wait_for(store.writing.wait(), 5)
        commit = asyncio.create_task(coord.commit_offsets("g", -1, "", None, [("t", 0, 9, -1, "")]))
        await asyncio.wait_for(until(lambda: store.writes == 3), 5)
        store.release.set()
        deleted = await asyncio.wait_for(delete, 5)
        assert deleted.error_code == 0 and [p.error_code for p in deleted.partitions] == [0]
        assert [r.error_code for r in await asyncio.wait_for(commit, 5)] == [0]
        assert await offset_of(coord, "g") == 9
    assert await offset_in_the_log(store, "g") == 9


async def test_an_offset_deletion_drops_an_older_pending_transactional_offset():
    """Commit, a transaction's commit, OffsetDelete, then the transaction's
    COMMIT: the deletion came after the transaction's offset, so the group
    has no offset (as the log's replay has it: store.py drops a pending
    transactional offset on any later record of its partition)."""
    store = HeldStore(held=lambda kind, n: False)
    async with running(store) as coord:
        await coord.commit_offsets("g", -1, "", None, [("t", 0, 3, -1, "")])
        await coord.commit_txn_offsets("g", 7, 0, -1, "", None, [("t", 0, 5, -1, "")])
        deleted = await coord.delete_offsets("g", [("t", 0)])
        assert deleted.error_code == 0 and [p.error_code for p in deleted.partitions] == [0]
        await coord.complete_txn_offsets(store.partition_for("g"), 7, True)
        assert await offset_of(coord, "g") == -1


async def test_a_deletion_behind_a_commit_being_stored_deletes_it():
    """OffsetDelete and DeleteGroups handed in behind a commit still being
    written find it: the group's offsets are deleted, the commit's with them."""
    store = HeldStore(held=lambda kind, n: kind == "commit")
    async with running(store) as coord:
        commit = asyncio.create_task(coord.commit_offsets("g", -1, "", None, [("t", 0, 5, -1, "")]))
        await asyncio.wait_for(store.writing.wait(), 5)
        delete = asyncio.create_task(coord.delete_offsets("g", [("t", 0)]))
        store.release.set()
        await asyncio.wait_for(commit, 5)
        deleted = await asyncio.wait_for(delete, 5)
        assert deleted.error_code == 0 and [p.error_code for p in deleted.partitions] == [0]
        assert await offset_of(coord, "g") == -1

        store.release.clear()
        store.writing.clear()
        commit = asyncio.create_task(coord.commit_offsets("h", -1, "", None, [("t", 0, 7, -1, "")]))
        await asyncio.wait_for(store.writing.wait(), 5)
        dropped = asyncio.create_task(coord.delete_groups(["h"]))
        store.release.set()
        await asyncio.wait_for(commit, 5)
        assert await asyncio.wait_for(dropped, 5) == [("h", 0)]
        assert await offset_of(coord, "h") == -1
    # and what the log keeps: read back by the next coordinator, nothing of either
    for group in ("g", "h"):
        assert await offset_in_the_log(store, group) == -1, group


async def test_the_retention_pass_keeps_a_group_whose_first_commit_is_being_written():
    """A simple group exists, with no offsets, from its first commit on: the
    retention pass must not drop it as empty while that commit is written
    (the commit would answer NONE and be lost until the next load)."""
    store = HeldStore()
    async with running(store) as coord:
        commit = asyncio.create_task(coord.commit_offsets("g", -1, "", None, [("t", 0, 5, -1, "")]))
        await asyncio.wait_for(store.writing.wait(), 5)
        await coord.expire_offsets(now_ms=10 ** 15)  # far past any retention
        store.release.set()
        assert [r.error_code for r in await asyncio.wait_for(commit, 5)] == [0]
        assert await offset_of(coord, "g") == 5
    assert await offset_in_the_log(store, "g") == 5
