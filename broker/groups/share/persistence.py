"""The share-partition leader's side of the durable state: between the share
service (service.py) and the share coordinator (persister.py).

- ``ensure_loaded``: before a share-partition is first served here, its state
  is read from the coordinator (with the partition's leader epoch, which
  fences the previous leader) and installed in the service;
- ``flush``: each change the handlers made (acknowledgements, releases, lock
  expiry, archiving) is written before it is answered, as Kafka answers an
  acknowledgement only after its WriteShareGroupState succeeded;
- both answer the share coordinator's failures as Kafka's share-partition
  leader does (``persister_error``), not as the coordinator gave them;
- ``write_state``/``reset``/``delete``: the one way for anything else
  (AlterShareGroupOffsets, DeleteShareGroupOffsets, DeleteGroups) to change
  a share-partition's durable state;
- ``summaries``: the state of share-partitions not served here, as their
  coordinator has it (DescribeShareGroupOffsets at the group's coordinator);
- ``partition_ends``: the high watermarks of share-partitions, here or
  asked of their leaders (partition_ends.py), that their lag counts to;
- ``flush_group``: the group coordinator's side: a share group's own records
  in __consumer_offsets (records.py: its epoch, its share-partitions) written
  as they changed, one write of a group at a time.

Handlers call from their processor loops; the work runs on the broker's main
loop, where the persister's connections and the coordinator live. Writes of
one share-partition go one at a time, each taking the latest change, so a
write answers every change made before it.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from samsa.protocol.errors import ErrorCode

from .partition import StateBatch
from .partition_ends import PartitionEnds
from .persister import StatePersister
from .service import ShareKey, ShareService

log = logging.getLogger("broker.groups.share")

_T = TypeVar("_T")

# a fenced write: this broker's copy of the share-partition is stale
_FENCED = (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH)

# the share coordinator's answers a ShareFetch/ShareAcknowledge passes on as
# they are (Kafka's SharePartition.fetchPersisterError); the others below
_PASSED_ON = frozenset({ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        ErrorCode.FENCED_STATE_EPOCH})
_COORDINATOR_GONE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                               ErrorCode.COORDINATOR_LOAD_IN_PROGRESS})


def persister_error(code: ErrorCode) -> ErrorCode:
    """A failed read or write of the share coordinator as the share-partition
    leader answers it to the client, as Kafka's SharePartition does: the
    coordinator moving or loading is COORDINATOR_NOT_AVAILABLE, a fenced
    leader epoch NOT_LEADER_OR_FOLLOWER (this broker no longer leads the
    share-partition), anything not meant for the client UNKNOWN_SERVER_ERROR."""
    if code is ErrorCode.NONE or code in _PASSED_ON:
        return code
    if code in _COORDINATOR_GONE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code is ErrorCode.FENCED_LEADER_EPOCH:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    return ErrorCode.UNKNOWN_SERVER_ERROR


# writes a group's records to __consumer_offsets (None: a tombstone); raises if it could not
GroupStore = Callable[[str, list[tuple[bytes, bytes | None]]], Awaitable[None]]


class SharePersistence:
    def __init__(self, service: ShareService, persister: StatePersister,
                 leader_epoch: Callable[[uuid.UUID, int], int | None],
                 loop: asyncio.AbstractEventLoop,
                 group_store: GroupStore | None = None,
                 ends: PartitionEnds | None = None) -> None:
        self._service = service
        self._ends = ends
        self._persister = persister
        self._leader_epoch = leader_epoch
        self._loop = loop
        self._group_store = group_store
        self._locks: dict[ShareKey, asyncio.Lock] = {}
        self._group_locks: dict[str, asyncio.Lock] = {}

    # ------------------------------------------------------------ for the handlers

    async def ensure_loaded(self, keys: Iterable[ShareKey]) -> dict[ShareKey, ErrorCode]:
        """Read the state of those not served here yet; the ones that failed."""
        wanted = [k for k in keys if self._service.needs_state(k)]
        if not wanted:
            return {}
        return await self._on_main(self._load_all(wanted))

    async def flush(self, keys: Iterable[ShareKey]) -> dict[ShareKey, ErrorCode]:
        """Write every change made so far to these share-partitions; the
        ones whose write failed."""
        wanted = {k: self._service.progress(k)[0] for k in keys}
        wanted = {k: v for k, v in wanted.items() if self._service.progress(k)[1] < v}
        if not wanted:
            return {}
        return await self._on_main(self._flush_all(wanted))

    async def flush_group(self, group_id: str) -> bool:
        """Write the group's records if they changed; False when that write
        failed (logged, and left for the next change to carry)."""
        if self._group_store is None or not self._service.group_records(group_id):
            return True
        return await self._on_main(self._flush_group(group_id))

    async def summaries(self, keys: Sequence[ShareKey]
                        ) -> dict[ShareKey, tuple[int, int] | None]:
        """Each share-partition's (start offset, records done with in flight)
        as its share coordinator keeps it; None: no state there (or not read)."""
        async def one(key: ShareKey) -> tuple[int, int] | None:
            code, state = await self._persister.read(key, -1)
            if code or state is None or state.start_offset < 0:
                return None
            return state.start_offset, sum(b.last_offset - b.first_offset + 1
                                           for b in state.batches if b.state in (2, 4))

        async def run() -> dict[ShareKey, tuple[int, int] | None]:
            found = await asyncio.gather(*(one(k) for k in keys))
            return dict(zip(keys, found))
        return await self._on_main(run())

    async def partition_ends(self, partitions: Sequence[tuple[str, int]]
                             ) -> dict[tuple[str, int], int]:
        """The high watermark of each (topic, partition) found: read here, or
        asked of its leader; none without a way to ask."""
        if self._ends is None or not partitions:
            return {}
        return await self._on_main(self._ends.ends(partitions))

    # ------------------------------------------------------------ for admin requests

    async def write_state(self, key: ShareKey, start_offset: int,
                          batches: Sequence[StateBatch]) -> ErrorCode:
        """Write a share-partition's state as given (its current epochs); the
        copy served here, if any, is forgotten and read again."""
        async def run() -> ErrorCode:
            state_epoch, leader_epoch = await self._epochs(key)
            self._service.forget(key)
            return await self._persister.write(key, state_epoch, leader_epoch, start_offset,
                                               batches)
        return await self._on_main(run())

    async def reset(self, key: ShareKey, start_offset: int) -> ErrorCode:
        """Start the share-partition over at ``start_offset`` under a new
        state epoch (AlterShareGroupOffsets): its leader's later writes are
        fenced, and it reads the new state."""
        async def run() -> ErrorCode:
            state_epoch, _leader_epoch = await self._epochs(key)
            self._service.forget(key)
            return await self._persister.initialize(key, state_epoch + 1, start_offset)
        return await self._on_main(run())

    async def delete(self, key: ShareKey) -> ErrorCode:
        """Forget the share-partition's state (DeleteShareGroupOffsets, DeleteGroups)."""
        async def run() -> ErrorCode:
            self._service.forget(key)
            return await self._persister.delete(key)
        return await self._on_main(run())

    # ------------------------------------------------------------ on the main loop

    async def _epochs(self, key: ShareKey) -> tuple[int, int]:
        code, state = await self._persister.read(key, -1)
        if code or state is None:
            return 0, -1
        return state.state_epoch, state.leader_epoch

    async def _load_all(self, keys: list[ShareKey]) -> dict[ShareKey, ErrorCode]:
        results = await asyncio.gather(*(self._load(k) for k in keys))
        return {k: code for k, code in zip(keys, results) if code}

    async def _load(self, key: ShareKey) -> ErrorCode:
        async with self._lock(key):
            if not self._service.needs_state(key):
                return ErrorCode.NONE
            epoch = self._leader_epoch(key[1], key[2])
            if epoch is None:
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            code, state = await self._persister.read(key, epoch)
            if code or state is None:
                log.info("share-partition %s: state not read: %s", key, code.name)
                return persister_error(code) if code else ErrorCode.UNKNOWN_SERVER_ERROR
            self._service.install(key, state.state_epoch, epoch, state.start_offset,
                                  state.batches)
            return ErrorCode.NONE

    async def _flush_all(self, wanted: dict[ShareKey, int]) -> dict[ShareKey, ErrorCode]:
        keys = list(wanted)
        results = await asyncio.gather(*(self._flush(k, wanted[k]) for k in keys))
        return {k: code for k, code in zip(keys, results) if code}

    async def _flush(self, key: ShareKey, version: int) -> ErrorCode:
        async with self._lock(key):
            if self._service.progress(key)[1] >= version:
                return ErrorCode.NONE  # a write since took this change along
            pending = self._service.pending(key)
            if pending is None:
                # forgotten meanwhile (leadership moved): the change is lost here
                return ErrorCode.NOT_LEADER_OR_FOLLOWER
            code = await self._persister.write(key, pending.state_epoch, pending.leader_epoch,
                                               pending.start_offset, pending.batches)
            if code in _FENCED:
                log.info("share-partition %s: write fenced (%s), reading it again",
                         key, code.name)
                self._service.forget(key)
            elif not code:
                self._service.written(key, pending.version)
            return persister_error(code)

    async def _flush_group(self, group_id: str) -> bool:
        assert self._group_store is not None
        lock = self._group_locks.setdefault(group_id, asyncio.Lock())
        async with lock:
            entries = self._service.group_records(group_id)
            if not entries:
                return True
            try:
                await self._group_store(group_id, entries)
            except Exception as e:  # noqa: BLE001 - the group goes on; its next change writes
                log.warning("share group %s: records not written: %s", group_id, e)
                return False
            self._service.group_records_written(group_id, entries)
            return True

    def _lock(self, key: ShareKey) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    def _on_main(self, coro: Coroutine[Any, Any, _T]) -> Awaitable[_T]:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            return coro
        return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))
