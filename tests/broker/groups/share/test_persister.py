"""The persister's retries (broker/groups/share/persister.py) in virtual time:
a coordinator that is not there yet or still loading is asked again until
it answers or the deadline passes; an answer that is not about the
coordinator is returned at once. The coordinator is the real one (its log a
list), located on this broker."""
from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

from samsa.broker.groups.locator import CoordinatorAnswer
from samsa.broker.groups.share.coordinator import ShareState
from samsa.broker.groups.share.persister import SharePersister
from samsa.broker.groups.share.service import ShareKey
from samsa.broker.groups.share.share_coordinator import ShareCoordinator
from samsa.broker.metadata.store import BrokerEndpoint
from samsa.protocol.errors import ErrorCode

T = uuid.UUID(int=13)
KEY: ShareKey = ("g", T, 0)
ME = BrokerEndpoint(1, "localhost", 9092)


class Clock:
    """Virtual time: the persister's sleeps move it on; ``on_sleep`` runs
    after each (the world changing while the persister waits)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps = 0
        self.on_sleep: Callable[[int], None] = lambda n: None

    def monotonic(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1
        self.on_sleep(self.sleeps)
        await asyncio.sleep(0)


class Locator:
    def __init__(self) -> None:
        self.answer = CoordinatorAnswer(ErrorCode.NONE, ME)

    def locate(self, key: str) -> CoordinatorAnswer:
        return self.answer


async def _now(fn: Callable[[], object]) -> object:
    return fn()


def _coordinator() -> ShareCoordinator:
    written: list[tuple[bytes, bytes | None]] = []

    def append(_p: int, records: list[tuple[bytes, bytes | None]]) -> None:
        written.extend(records)
    return ShareCoordinator(lambda key: 0, append, lambda p: list(written), _now)


def _persister(clock: Clock, locator: Locator, coordinator: Callable[[], ShareCoordinator | None]
               ) -> SharePersister:
    return SharePersister(1, locator, coordinator, timeout_s=2.0, backoff_s=0.1,
                          monotonic=clock.monotonic, sleep=clock.sleep)


async def test_a_loading_coordinator_is_asked_again_until_it_has_loaded() -> None:
    clock, locator, coordinator = Clock(), Locator(), _coordinator()
    token = coordinator.machine.loading(0)

    def load_on_third(n: int) -> None:
        if n == 3:
            coordinator.machine.loaded(0, {KEY: ShareState(2, 1, 50, ())}, token)
    clock.on_sleep = load_on_third
    persister = _persister(clock, locator, lambda: coordinator)
    code, state = await persister.read(KEY, 1)
    assert (code, state) == (ErrorCode.NONE, ShareState(2, 1, 50, ()))
    assert clock.sleeps == 3


async def test_no_coordinator_yet_is_retried_then_found() -> None:
    clock, locator, coordinator = Clock(), Locator(), _coordinator()
    await coordinator.load_partition(0)
    locator.answer = CoordinatorAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    here: list[ShareCoordinator] = []

    def appear(n: int) -> None:
        if n == 2:
            locator.answer = CoordinatorAnswer(ErrorCode.NONE, ME)  # located, not started yet
        if n == 4:
            here.append(coordinator)
    clock.on_sleep = appear
    persister = _persister(clock, locator, lambda: here[0] if here else None)
    assert await persister.initialize(KEY, 1, 7) == ErrorCode.NONE
    assert clock.sleeps == 4
    assert coordinator.machine.states[KEY].start_offset == 7


async def test_the_retries_stop_at_the_deadline_with_the_last_answer() -> None:
    clock, locator, coordinator = Clock(), Locator(), _coordinator()
    coordinator.machine.loading(0)  # never loads
    persister = _persister(clock, locator, lambda: coordinator)
    start = clock.now
    assert await persister.write(KEY, 0, 1, 0, []) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert 2.0 - 0.1 <= clock.now - start <= 2.0
    locator.answer = CoordinatorAnswer(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    start = clock.now
    assert await persister.read(KEY, 1) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, None)
    assert 2.0 - 0.1 <= clock.now - start <= 2.0


async def test_an_answer_about_the_share_partition_is_not_retried() -> None:
    clock, locator, coordinator = Clock(), Locator(), _coordinator()
    await coordinator.load_partition(0)
    persister = _persister(clock, locator, lambda: coordinator)
    assert await persister.initialize(KEY, 3, 0) == ErrorCode.NONE
    assert await persister.write(KEY, 2, 1, 0, []) == ErrorCode.FENCED_STATE_EPOCH
    assert await persister.read(KEY, 5) == (ErrorCode.NONE, ShareState(3, 5, 0, ()))
    assert await persister.read(KEY, 4) == (ErrorCode.FENCED_LEADER_EPOCH, None)
    assert clock.sleeps == 0
