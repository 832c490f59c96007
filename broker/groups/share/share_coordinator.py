"""The share coordinator's runtime: the machine of coordinator.py on the
broker's main loop, its changes appended to the ``__share_group_state``
partition of the key as ShareSnapshot records, answered once the ISR has
them (acks=all, as the group coordinator's writes).

A state partition is loaded when this broker takes up its leadership (its
log replayed off the loop) and dropped when it gives it up. Each change is
taken up in memory as it is appended, so two requests for one key see each
other's changes in log order; a write that fails before the log has it is
undone, one that the ISR does not confirm answers its error (the partition
is then usually being taken over, and its next leader replays the log).
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence

from samsa.protocol.errors import ErrorCode

from ...coordinator_errors import CoordinatorWriteError, coordinator_write_error
from ...loop_bridge import LoopBridge, forward
from .coordinator import Planned, ShareCoordinatorState, ShareState
from .partition import StateBatch
from .service import ShareKey
from .state_log import replay_states, snapshot_record

log = logging.getLogger("broker.groups.share")

# append(partition, records): the records appended to the partition's log
# (CoordinatorWriteError if it is not led here); an awaitable while the ISR
# has not got them all
Append = Callable[[int, list[tuple[bytes, bytes | None]]], Awaitable[None] | None]


class ShareCoordinator:
    def __init__(self, partition_of: Callable[[ShareKey], int], append: Append,
                 read_partition: Callable[[int], Iterable[object]],
                 run_off_loop: Callable[[Callable[[], object]], Awaitable[object]]) -> None:
        self.machine = ShareCoordinatorState(partition_of)
        self._partition_of = partition_of
        self._append = append
        self._read_partition = read_partition
        self._off_loop = run_off_loop

    # ------------------------------------------------------------ leadership

    async def load_partition(self, partition: int) -> None:
        self.machine.loading(partition)
        try:
            replayed = await self._off_loop(
                lambda: replay_states(self._read_partition(partition)))
        except Exception:  # noqa: BLE001 - the partition stays unserved; leadership moves on
            log.exception("loading share state partition %d failed", partition)
            self.machine.unload(partition)
            return
        assert isinstance(replayed, dict)
        self.machine.loaded(partition, replayed)
        log.info("share coordinator: loaded %d share-partition state(s) of partition %d",
                 sum(1 for k in replayed if self._partition_of(k) == partition), partition)

    def unload_partition(self, partition: int) -> None:
        self.machine.unload(partition)

    # ------------------------------------------------------------ requests

    async def read(self, key: ShareKey, leader_epoch: int) -> tuple[ErrorCode, ShareState | None]:
        planned = self.machine.read(key, leader_epoch)
        code = await self._commit(key, planned)
        return code, planned.state if not code else None

    async def summary(self, key: ShareKey) -> tuple[ErrorCode, ShareState | None]:
        planned = self.machine.summary(key)
        return planned.error, planned.state

    async def write(self, key: ShareKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: Sequence[StateBatch]) -> ErrorCode:
        return await self._commit(key, self.machine.write(key, state_epoch, leader_epoch,
                                                          start_offset, batches))

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> ErrorCode:
        return await self._commit(key, self.machine.initialize(key, state_epoch, start_offset))

    async def delete(self, key: ShareKey) -> ErrorCode:
        return await self._commit(key, self.machine.delete(key))

    async def _commit(self, key: ShareKey, planned: Planned) -> ErrorCode:
        if planned.error or (planned.write is None and not planned.delete):
            return planned.error
        before = self.machine.states.get(key)
        stored = self.machine.apply(key, None if planned.delete else planned.write)
        partition = self._partition_of(key)
        try:
            waiting = self._append(partition, [snapshot_record(key, stored)])
        except CoordinatorWriteError as e:
            self._undo(key, before)
            return coordinator_write_error(e.error_code) or e.error_code
        except Exception:  # noqa: BLE001 - a disk error and the like: answered, not raised
            log.exception("writing the state of share-partition %s failed", key)
            self._undo(key, before)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        if waiting is not None:
            try:
                await waiting
            except CoordinatorWriteError as e:
                return coordinator_write_error(e.error_code) or e.error_code
        return ErrorCode.NONE

    def _undo(self, key: ShareKey, before: ShareState | None) -> None:
        if before is None:
            self.machine.states.pop(key, None)
        elif self.machine.serves(self._partition_of(key)):
            self.machine.states[key] = before


def run_off_loop(fn: Callable[[], object]) -> Awaitable[object]:
    return asyncio.get_running_loop().run_in_executor(None, fn)


class ShareCoordinatorBridge(LoopBridge[ShareCoordinator]):
    """The share coordinator's requests from the handlers' loops."""

    read = forward(ShareCoordinator.read)
    summary = forward(ShareCoordinator.summary)
    write = forward(ShareCoordinator.write)
    initialize = forward(ShareCoordinator.initialize)
    delete = forward(ShareCoordinator.delete)
