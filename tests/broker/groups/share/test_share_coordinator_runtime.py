"""The share coordinator's runtime (broker/groups/share/share_coordinator.py)
over the real machine: the state partition's log is a list here, the ISR's
confirmation a future the test settles, the log replay a future too."""
from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

from samsa.broker.coordinator_errors import CoordinatorWriteError
from samsa.broker.groups.share.coordinator import ShareState
from samsa.broker.groups.share.partition import StateBatch
from samsa.broker.groups.share.share_coordinator import ShareCoordinator
from samsa.broker.groups.share.state_log import decode_state
from samsa.protocol.errors import ErrorCode

T = uuid.UUID(int=9)
KEY = ("g", T, 0)


class _Log:
    """The state partition: appends land at once; each one's ISR
    confirmation waits for the test (``confirm``/``fail``)."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []
        self.waits: list[asyncio.Future[None]] = []

    def append(self, _partition: int, records: list[tuple[bytes, bytes | None]]
               ) -> asyncio.Future[None]:
        self.records.extend(records)
        wait: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waits.append(wait)
        return wait

    def confirm(self) -> None:
        self.waits.pop(0).set_result(None)

    def fail(self) -> None:
        self.waits.pop(0).set_exception(
            CoordinatorWriteError("the ISR did not take it", ErrorCode.NOT_ENOUGH_REPLICAS))

    def leader_epoch_written(self) -> int:
        value = self.records[-1][1]
        assert value is not None
        return decode_state(value).leader_epoch


async def _settled(task: asyncio.Task[object], log: _Log, waits: int) -> None:
    """Run the loop until ``task`` is done or has ``waits`` appends waiting."""
    for _ in range(100):
        if task.done() or len(log.waits) >= waits:
            return
        await asyncio.sleep(0)
    raise AssertionError("neither done nor waiting")


async def _now(fn: Callable[[], object]) -> object:
    return fn()


async def _loaded(log: _Log) -> ShareCoordinator:
    coordinator = ShareCoordinator(lambda key: 0, log.append, lambda p: list(log.records), _now)
    await coordinator.load_partition(0)
    return coordinator


async def _initialized(log: _Log) -> ShareCoordinator:
    """Loaded, with KEY's state written (and confirmed) at leader epoch 1."""
    coordinator = await _loaded(log)
    write = asyncio.ensure_future(coordinator.write(KEY, 0, 1, 0, []))
    await _settled(write, log, 1)
    log.confirm()
    assert await write == ErrorCode.NONE
    return coordinator


async def test_a_retried_read_after_an_unconfirmed_epoch_bump_waits_for_it_again():
    log = _Log()
    coordinator = await _initialized(log)
    first = asyncio.ensure_future(coordinator.read(KEY, 2))
    await _settled(first, log, 1)
    log.fail()  # the bump to leader epoch 2 was appended but not confirmed
    assert (await first)[0] == ErrorCode.COORDINATOR_NOT_AVAILABLE
    # the new share-partition leader retries: not answered from the
    # unconfirmed bump, the bump is appended again and answered once kept
    retry = asyncio.ensure_future(coordinator.read(KEY, 2))
    await _settled(retry, log, 1)
    assert not retry.done()
    assert log.leader_epoch_written() == 2
    log.confirm()
    code, state = await retry
    assert code == ErrorCode.NONE and state is not None and state.leader_epoch == 2
    # confirmed now: the next read answers at once, with nothing appended
    appended = len(log.records)
    assert (await coordinator.read(KEY, 2))[0] == ErrorCode.NONE
    assert len(log.records) == appended


async def test_a_retry_whose_second_append_fails_too_answers_the_error():
    log = _Log()
    coordinator = await _initialized(log)
    first = asyncio.ensure_future(coordinator.read(KEY, 2))
    await _settled(first, log, 1)
    log.fail()
    await first
    retry = asyncio.ensure_future(coordinator.summary(KEY))
    await _settled(retry, log, 1)
    log.fail()
    assert await retry == (ErrorCode.COORDINATOR_NOT_AVAILABLE, None)


async def test_a_read_while_a_write_awaits_the_isr_waits_for_it():
    log = _Log()
    coordinator = await _loaded(log)
    write = asyncio.ensure_future(coordinator.write(KEY, 0, 1, 0, [StateBatch(0, 4, 2, 1)]))
    await _settled(write, log, 1)
    read = asyncio.ensure_future(coordinator.read(KEY, 1))
    await _settled(read, log, 2)
    assert not read.done()
    log.confirm()
    log.confirm()
    assert await write == ErrorCode.NONE
    code, state = await read
    assert code == ErrorCode.NONE and state is not None and state.batches == (
        StateBatch(0, 4, 2, 1),)


async def test_a_later_write_confirms_the_unconfirmed_one():
    log = _Log()
    coordinator = await _initialized(log)
    first = asyncio.ensure_future(coordinator.read(KEY, 2))
    await _settled(first, log, 1)
    log.fail()
    await first
    write = asyncio.ensure_future(coordinator.write(KEY, 0, 2, 0, [StateBatch(0, 0, 2, 1)]))
    await _settled(write, log, 1)
    log.confirm()
    assert await write == ErrorCode.NONE
    appended = len(log.records)
    assert (await coordinator.read(KEY, 2))[0] == ErrorCode.NONE
    assert len(log.records) == appended


async def test_a_stale_replay_finishing_late_does_not_replace_the_current_load():
    """Leadership of the state partition lost and taken up again while the
    first load's replay ran: the first replay, finishing first, is not
    served (it may miss what the partition's log has now), the second is."""
    log = _Log()
    replays: list[asyncio.Future[object]] = []

    def off_loop(_fn: Callable[[], object]) -> asyncio.Future[object]:
        replays.append(asyncio.get_running_loop().create_future())
        return replays[-1]

    coordinator = ShareCoordinator(lambda key: 0, log.append, lambda p: [], off_loop)
    old = asyncio.ensure_future(coordinator.load_partition(0))
    await asyncio.sleep(0)
    coordinator.unload_partition(0)
    new = asyncio.ensure_future(coordinator.load_partition(0))
    await asyncio.sleep(0)
    replays[0].set_result({KEY: ShareState(0, 1, 10, ())})
    await old
    assert (await coordinator.read(KEY, 1))[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    replays[1].set_result({KEY: ShareState(0, 5, 100, ())})
    await new
    assert coordinator.machine.states[KEY] == ShareState(0, 5, 100, ())
    assert (await coordinator.read(KEY, 1))[0] == ErrorCode.FENCED_LEADER_EPOCH

