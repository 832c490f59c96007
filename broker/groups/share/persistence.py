"""The share-partition leader's side of the durable state: between the share
service (service.py) and the share coordinator (persister.py).

- ``ensure_loaded``: before a share-partition is first served here, its state
  is read from the coordinator (with the partition's leader epoch, which
  fences the previous leader) and installed in the service;
- ``flush``: each change the handlers made (acknowledgements, releases, lock
  expiry, archiving) is written before it is answered, as Kafka answers an
  acknowledgement only after its WriteShareGroupState succeeded;
- ``write_state``/``reset``/``delete``: the one way for anything else
  (AlterShareGroupOffsets, DeleteShareGroupOffsets, DeleteGroups) to change
  a share-partition's durable state.

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
from .persister import SharePersister
from .service import ShareKey, ShareService

log = logging.getLogger("broker.groups.share")

_T = TypeVar("_T")

# a fenced write: this broker's copy of the share-partition is stale
_FENCED = (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH)


class SharePersistence:
    def __init__(self, service: ShareService, persister: SharePersister,
                 leader_epoch: Callable[[uuid.UUID, int], int | None],
                 loop: asyncio.AbstractEventLoop) -> None:
        self._service = service
        self._persister = persister
        self._leader_epoch = leader_epoch
        self._loop = loop
        self._locks: dict[ShareKey, asyncio.Lock] = {}

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
                return code or ErrorCode.UNKNOWN_SERVER_ERROR
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
            return code

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
