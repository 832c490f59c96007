"""The transaction coordinator over an in-memory `__transaction_state`
partition and marker recorder (its I/O boundary), and the group store's
reading of transactional offset commits. The broker-level behaviour is
covered with real clients in tests/integration/test_txn_*.py; these cases
pin the rules a client cannot easily provoke (a reload finding a prepared
transaction, expiry, a failed write leaving the state unchanged)."""
from __future__ import annotations

import asyncio

import pytest

from samsa.broker.groups.log_format import OffsetAndMetadata, encode_offset_key, encode_offset_value
from samsa.broker.groups.store import ConsumerOffsetsLog, TxnMarker, TxnRecord
from samsa.broker.transactions.coordinator import (TransactionCoordinator, TxnCoordinatorConfig,
                                             TxnLogWriteError)
from samsa.broker.transactions.log_format import decode_value
from samsa.broker.transactions.state import TxnState
from samsa.protocol.errors import ErrorCode


class MemoryTxnLog:
    """One broker's partitions of __transaction_state, in memory."""

    def __init__(self) -> None:
        self.records: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self.epochs: dict[int, int] = {}
        self.fail_with: ErrorCode | None = None

    def leader_epoch(self, partition: int) -> int | None:
        return self.epochs.get(partition)

    def named_leader(self, partition: int) -> bool:
        return partition in self.epochs

    def read(self, partition: int):
        return list(self.records.get(partition, []))

    async def append(self, partition: int, key: bytes, value: bytes | None) -> None:
        if self.fail_with is not None:
            raise TxnLogWriteError(self.fail_with, "refused")
        self.records.setdefault(partition, []).append((key, value))


class RecordingMarkers:
    def __init__(self) -> None:
        self.sent: list[tuple[int, int, bool, int, frozenset]] = []
        self.release = asyncio.Event()
        self.release.set()

    async def write_markers(self, producer_id, producer_epoch, commit, coordinator_epoch,
                            partitions, still_wanted, *, transaction_version=0) -> None:
        await self.release.wait()
        if not still_wanted():
            return False
        self.sent.append((producer_id, producer_epoch, commit, coordinator_epoch, partitions))
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def _coordinator(log: MemoryTxnLog, markers: RecordingMarkers, clock: Clock,
                 **config) -> TransactionCoordinator:
    ids = iter(range(5000, 6000))

    async def allocate() -> int:
        return next(ids)
    cfg = TxnCoordinatorConfig(num_partitions=1, **{"abort_check_interval_ms": 10**7,
                                                    "expire_check_interval_ms": 10**7, **config})
    return TransactionCoordinator(log, markers, allocate, cfg, time_ms=clock)


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def _states(log: MemoryTxnLog) -> list[TxnState]:
    return [decode_value("t", v).state for _, v in log.records[0] if v is not None]


def test_a_commit_writes_prepare_then_markers_then_complete():
    async def run():
        log, markers, clock = MemoryTxnLog(), RecordingMarkers(), Clock()
        log.epochs[0] = 7
        c = _coordinator(log, markers, clock)
        await c.start()
        await c.load_partition(0)
        init = await c.init_producer_id("t", 60000, None)
        assert (init.error, init.producer_id, init.producer_epoch) == (0, 5000, 0)
        assert await c.add_partitions("t", 5000, 0, [("a", 0), ("b", 1)]) == 0
        assert (await c.end_transaction("t", 5000, 0, True)).error == 0
        await _settle()
        assert markers.sent == [(5000, 0, True, 7, frozenset({("a", 0), ("b", 1)}))]
        assert _states(log) == [TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_COMMIT,
                                TxnState.COMPLETE_COMMIT]
        await c.shutdown()
    asyncio.run(run())


def test_a_new_coordinator_finishes_a_prepared_transaction():
    async def run():
        log, markers, clock = MemoryTxnLog(), RecordingMarkers(), Clock()
        log.epochs[0] = 1
        old = _coordinator(log, markers, clock)
        await old.start()
        await old.load_partition(0)
        await old.init_producer_id("t", 60000, None)
        await old.add_partitions("t", 5000, 0, [("a", 0)])
        markers.release.clear()  # the old coordinator dies before its markers
        assert (await old.end_transaction("t", 5000, 0, False)).error == 0
        old.unload_partition(0)
        markers.release.set()
        await _settle()
        assert markers.sent == []  # the deposed one sends nothing
        await old.shutdown()

        log.epochs[0] = 2
        new = _coordinator(log, markers, clock)
        await new.start()
        await new.load_partition(0)
        await _settle()
        assert markers.sent == [(5000, 0, False, 2, frozenset({("a", 0)}))]
        assert _states(log)[-1] == TxnState.COMPLETE_ABORT
        (described,) = await new.describe(["t"])
        assert described.metadata.state == TxnState.COMPLETE_ABORT
        await new.shutdown()
    asyncio.run(run())


def test_a_refused_write_changes_nothing_and_is_answered_with_its_error():
    async def run():
        log, markers, clock = MemoryTxnLog(), RecordingMarkers(), Clock()
        log.epochs[0] = 0
        c = _coordinator(log, markers, clock)
        await c.start()
        await c.load_partition(0)
        await c.init_producer_id("t", 60000, None)
        log.fail_with = ErrorCode.COORDINATOR_NOT_AVAILABLE
        assert await c.add_partitions("t", 5000, 0, [("a", 0)]) == \
            ErrorCode.COORDINATOR_NOT_AVAILABLE
        (described,) = await c.describe(["t"])
        assert described.metadata.state == TxnState.EMPTY
        log.fail_with = None
        assert await c.add_partitions("t", 5000, 0, [("a", 0)]) == 0
        await c.shutdown()
    asyncio.run(run())


def test_not_leading_is_not_coordinator_and_a_timeout_abort_fences():
    async def run():
        log, markers, clock = MemoryTxnLog(), RecordingMarkers(), Clock()
        c = _coordinator(log, markers, clock)
        await c.start()
        assert (await c.init_producer_id("t", 60000, None)).error == ErrorCode.NOT_COORDINATOR
        log.epochs[0] = 0  # named leader, not loaded yet
        assert (await c.init_producer_id("t", 60000, None)).error == \
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await c.load_partition(0)
        assert (await c.init_producer_id("t", 0, None)).error == \
            ErrorCode.INVALID_TRANSACTION_TIMEOUT
        await c.init_producer_id("t", 1000, None)
        await c.add_partitions("t", 5000, 0, [("a", 0)])
        clock.now += 1001
        assert await c.abort_timed_out() == 1
        await _settle()
        assert markers.sent == [(5000, 1, False, 0, frozenset({("a", 0)}))]
        # the producer at epoch 0 is a zombie now
        assert (await c.end_transaction("t", 5000, 0, True)).error == ErrorCode.PRODUCER_FENCED
        await c.shutdown()
    asyncio.run(run())


def test_idle_ids_expire_with_a_tombstone():
    async def run():
        log, markers, clock = MemoryTxnLog(), RecordingMarkers(), Clock()
        log.epochs[0] = 0
        c = _coordinator(log, markers, clock, id_expiration_ms=5000)
        await c.start()
        await c.load_partition(0)
        await c.init_producer_id("t", 60000, None)
        clock.now += 4999
        assert await c.expire_ids() == 0
        clock.now += 1
        assert await c.expire_ids() == 1
        assert log.records[0][-1][1] is None
        (described,) = await c.describe(["t"])
        assert described.error == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        await c.shutdown()
    asyncio.run(run())


# ---------------------------------------------------------------- group offsets

def _offset(group: str, topic: str, partition: int, offset: int):
    return (encode_offset_key(group, topic, partition),
            encode_offset_value(OffsetAndMetadata(offset, -1, "", 1)))


@pytest.mark.parametrize("committed", [True, False])
def test_transactional_offsets_wait_for_their_marker_on_load(committed):
    key, value = _offset("g", "t", 0, 10)
    key2, value2 = _offset("g", "t", 0, 20)
    items = [(key, value), TxnRecord(key2, value2, 77), TxnMarker(77, committed)]
    store = ConsumerOffsetsLog(lambda *a: None, lambda: iter(items), 1)
    offsets, _, pending = store.replay()
    assert offsets["g"][("t", 0)].offset == (20 if committed else 10)
    assert pending == {}


def test_transactional_offsets_without_a_marker_load_as_pending():
    key, value = _offset("g", "t", 1, 5)
    store = ConsumerOffsetsLog(lambda *a: None, lambda: iter([TxnRecord(key, value, 9)]), 1)
    offsets, _, pending = store.replay()
    assert offsets == {} and pending["g"][9][("t", 1)].offset == 5


def test_a_leader_epoch_bump_keeping_the_leader_keeps_the_coordinator():
    """A follower of the __transaction_state partition dies: the controller
    bumps the leader epoch, the leader stays; its transactional ids go on
    being served, and later markers carry the newer epoch."""
    async def run():
        log, markers, clock = MemoryTxnLog(), RecordingMarkers(), Clock()
        log.epochs[0] = 7
        c = _coordinator(log, markers, clock)
        await c.start()
        await c.load_partition(0)
        await c.init_producer_id("t", 60000, None)
        log.epochs[0] = 8
        assert await c.add_partitions("t", 5000, 0, [("a", 0)]) == 0
        assert (await c.end_transaction("t", 5000, 0, True)).error == 0
        await _settle()
        assert markers.sent == [(5000, 0, True, 8, frozenset({("a", 0)}))]
        await c.shutdown()
    asyncio.run(run())


def test_a_load_that_gave_up_is_started_again_by_the_next_request():
    async def run():
        log, markers, clock = MemoryTxnLog(), RecordingMarkers(), Clock()
        c = _coordinator(log, markers, clock)
        await c.start()
        await c.load_partition(0, wait_s=0.05)   # never became leader in time
        log.epochs[0] = 3
        assert (await c.init_producer_id("t", 60000, None)).error == \
            ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        await _settle()
        assert (await c.init_producer_id("t", 60000, None)).error == ErrorCode.NONE
        await c.shutdown()
    asyncio.run(run())


def test_a_plain_commit_after_a_transactional_one_stands_on_load():
    key, value = _offset("g", "t", 0, 42)
    key2, value2 = _offset("g", "t", 0, 7)
    items = [TxnRecord(key, value, 5), (key2, value2), TxnMarker(5, True)]
    store = ConsumerOffsetsLog(lambda *a: None, lambda: iter(items), 1)
    offsets, _, pending = store.replay()
    assert offsets["g"][("t", 0)].offset == 7
