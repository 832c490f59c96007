"""The share-partition leader's durable path (broker/groups/share/persistence.py)
over the real share service and a persister fake that keeps the state in a
real share coordinator machine: what is read before a share-partition is
served, what a flush writes, and how the coordinator's failures are answered
(Kafka's SharePartition.fetchPersisterError)."""
from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

import pytest

from samsa.broker.groups.share.config import ShareDefaults
from samsa.broker.groups.share.coordinator import ShareCoordinatorState, ShareState
from samsa.broker.groups.share.partition import StateBatch
from samsa.broker.groups.share.persistence import SharePersistence, persister_error
from samsa.broker.groups.share.persister import StatePersister
from samsa.broker.groups.share.service import Bounds, ShareKey, ShareService
from samsa.protocol.errors import ErrorCode

T = uuid.UUID(int=11)
KEY: ShareKey = ("g", T, 0)
ACCEPT = 1


class FakePersister:
    """The share coordinator's answers without the wire: its real machine,
    every change kept at once; ``fail`` scripts the next answers' errors."""

    def __init__(self) -> None:
        self.machine = ShareCoordinatorState(lambda key: 0)
        self.machine.loaded(0, {}, self.machine.loading(0))
        self.fail: list[ErrorCode] = []
        self.calls: list[str] = []

    def _scripted(self, name: str) -> ErrorCode:
        self.calls.append(name)
        return self.fail.pop(0) if self.fail else ErrorCode.NONE

    async def read(self, key: ShareKey, leader_epoch: int
                   ) -> tuple[ErrorCode, ShareState | None]:
        if code := self._scripted("read"):
            return code, None
        planned = self.machine.read(key, leader_epoch)
        if planned.write is not None:
            self.machine.apply(key, planned.write)
        return planned.error, planned.state

    async def write(self, key: ShareKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: Sequence[StateBatch]) -> ErrorCode:
        if code := self._scripted("write"):
            return code
        planned = self.machine.write(key, state_epoch, leader_epoch, start_offset, batches)
        if planned.write is not None:
            self.machine.apply(key, planned.write)
        return planned.error

    async def initialize(self, key: ShareKey, state_epoch: int, start_offset: int) -> ErrorCode:
        if code := self._scripted("initialize"):
            return code
        planned = self.machine.initialize(key, state_epoch, start_offset)
        if planned.write is not None:
            self.machine.apply(key, planned.write)
        return planned.error

    async def delete(self, key: ShareKey) -> ErrorCode:
        if code := self._scripted("delete"):
            return code
        planned = self.machine.delete(key)
        if planned.delete:
            self.machine.apply(key, None)
        return planned.error


def _typed(persister: FakePersister) -> StatePersister:
    return persister  # mypy checks the fake against the persister's interface


class Leader:
    """This broker as the share-partition's leader at ``epoch``."""

    def __init__(self, persister: FakePersister, epoch: int | None = 3) -> None:
        self.epoch = epoch
        self.service = ShareService(ShareDefaults(), lambda: 1000,
                                    lambda _t, _p: Bounds(0, 0), durable=True)
        self.persistence = SharePersistence(self.service, _typed(persister),
                                            lambda _t, _p: self.epoch,
                                            asyncio.get_running_loop())

    def acknowledge(self, first: int, last: int) -> None:
        """m1 takes offsets from ``first`` on and accepts up to ``last``."""
        assert self.service.acquire(KEY, "m1", last - first + 1, first, last + 1)
        assert self.service.acknowledge(KEY, "m1", [(first, last, [ACCEPT])]) == ErrorCode.NONE


@pytest.mark.parametrize(("coordinator", "client"), [
    (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE),
    (ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.GROUP_ID_NOT_FOUND),
    (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_STATE_EPOCH),
    (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.UNKNOWN_SERVER_ERROR),
    (ErrorCode.INVALID_REQUEST, ErrorCode.UNKNOWN_SERVER_ERROR),
    (ErrorCode.NONE, ErrorCode.NONE),
])
async def test_the_coordinator_errors_are_answered_as_kafka_share_partition_does(
        coordinator: ErrorCode, client: ErrorCode) -> None:
    assert persister_error(coordinator) == client
    if not coordinator:
        return
    persister = FakePersister()
    leader = Leader(persister)
    persister.fail = [coordinator]
    assert await leader.persistence.ensure_loaded([KEY]) == {KEY: client}
    assert leader.service.needs_state(KEY)  # read again next time
    assert await leader.persistence.ensure_loaded([KEY]) == {}
    leader.acknowledge(0, 4)
    persister.fail = [coordinator]
    assert await leader.persistence.flush([KEY]) == {KEY: client}


async def test_state_is_read_once_with_the_leader_epoch_before_it_is_served() -> None:
    persister = FakePersister()
    persister.machine.apply(KEY, ShareState(0, 1, 40, (StateBatch(40, 44, 2, 1),)))
    leader = Leader(persister, epoch=3)
    assert leader.service.needs_state(KEY)
    assert leader.service.fetch_position(KEY) is None  # not served unread
    assert await leader.persistence.ensure_loaded([KEY]) == {}
    assert leader.service.fetch_position(KEY) == 45  # 40-44 acknowledged already
    assert persister.machine.states[KEY].leader_epoch == 3  # the old leader is fenced
    assert await leader.persistence.ensure_loaded([KEY]) == {}
    assert persister.calls == ["read"]


async def test_a_partition_not_led_here_is_not_read() -> None:
    persister = FakePersister()
    leader = Leader(persister, epoch=None)
    assert await leader.persistence.ensure_loaded([KEY]) == {
        KEY: ErrorCode.NOT_LEADER_OR_FOLLOWER}
    assert persister.calls == []


async def test_flush_writes_every_change_once_and_a_failed_one_again() -> None:
    persister = FakePersister()
    leader = Leader(persister)
    await leader.persistence.ensure_loaded([KEY])
    leader.acknowledge(0, 4)
    assert await leader.persistence.flush([KEY]) == {}
    assert persister.machine.states[KEY].start_offset == 5
    calls = len(persister.calls)
    assert await leader.persistence.flush([KEY]) == {}  # nothing new: nothing written
    assert len(persister.calls) == calls
    leader.acknowledge(5, 9)
    persister.fail = [ErrorCode.NOT_COORDINATOR]
    assert await leader.persistence.flush([KEY]) == {KEY: ErrorCode.COORDINATOR_NOT_AVAILABLE}
    assert persister.machine.states[KEY].start_offset == 5
    assert await leader.persistence.flush([KEY]) == {}  # the change is still pending
    assert persister.machine.states[KEY].start_offset == 10


async def test_a_write_fenced_by_a_reset_reads_the_new_state_again() -> None:
    """Another broker reset the share-partition (a newer state epoch): this
    leader's write is fenced, it forgets its copy and serves the new one."""
    persister = FakePersister()
    leader = Leader(persister)
    await leader.persistence.ensure_loaded([KEY])
    leader.acknowledge(0, 4)
    assert await leader.persistence.flush([KEY]) == {}
    assert await persister.initialize(KEY, 1, 60) == ErrorCode.NONE
    leader.acknowledge(5, 9)
    assert await leader.persistence.flush([KEY]) == {KEY: ErrorCode.FENCED_STATE_EPOCH}
    assert leader.service.needs_state(KEY)
    assert await leader.persistence.ensure_loaded([KEY]) == {}
    assert leader.service.fetch_position(KEY) == 60
    leader.acknowledge(60, 61)
    assert await leader.persistence.flush([KEY]) == {}
    state = persister.machine.states[KEY]
    assert (state.state_epoch, state.start_offset) == (1, 62)


async def test_a_deposed_leader_is_fenced_and_answers_not_leader() -> None:
    persister = FakePersister()
    persister.machine.apply(KEY, ShareState(0, 1, 0, ()))
    old = Leader(persister, epoch=3)
    await old.persistence.ensure_loaded([KEY])
    new = Leader(persister, epoch=4)
    assert await new.persistence.ensure_loaded([KEY]) == {}
    old.acknowledge(0, 4)
    assert await old.persistence.flush([KEY]) == {KEY: ErrorCode.NOT_LEADER_OR_FOLLOWER}
    assert old.service.needs_state(KEY)  # its copy is gone
    assert persister.machine.states[KEY].start_offset == 0  # its acknowledgement not kept
