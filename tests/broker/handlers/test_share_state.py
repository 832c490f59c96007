"""The share coordinator's inter-broker APIs over a real share coordinator
(its machine and runtime; the state partition's log is a list here), and
FindCoordinator's share key type."""
from __future__ import annotations

import uuid
from collections.abc import Callable

from samsa.broker.groups.share.share_coordinator import ShareCoordinator
from samsa.broker.groups.share.state_log import decode_key, decode_state
from samsa.broker.handlers.groups import handle_find_coordinator
from samsa.broker.handlers.share_state import (handle_delete_share_group_state,
                                               handle_initialize_share_group_state,
                                               handle_read_share_group_state,
                                               handle_read_share_group_state_summary,
                                               handle_write_share_group_state)
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (DeleteShareGroupStateRequest, FindCoordinatorRequest,
                                     InitializeShareGroupStateRequest,
                                     ReadShareGroupStateRequest,
                                     ReadShareGroupStateSummaryRequest,
                                     WriteShareGroupStateRequest)
from samsa.protocol.model import ApiKey
from samsa.storage.checkpoints import topic_id_to_str

from .fakes import FakeLocator, FakeServices, context

T = uuid.UUID(int=42)


async def _now(fn: Callable[[], object]) -> object:
    return fn()


def _services() -> tuple[FakeServices, ShareCoordinator, list[tuple[bytes, bytes | None]]]:
    written: list[tuple[bytes, bytes | None]] = []

    def append(_p: int, records: list[tuple[bytes, bytes | None]]) -> None:
        written.extend(records)
    coordinator = ShareCoordinator(lambda key: 0, append, lambda p: list(written), _now)
    services = FakeServices()
    services.share_coordinator = coordinator
    return services, coordinator, written


def _read(partition_leader_epoch: int = 1) -> ReadShareGroupStateRequest:
    R = ReadShareGroupStateRequest
    return R(group_id="g", topics=[R.ReadStateData(topic_id=T, partitions=[
        R.PartitionData(partition=0, leader_epoch=partition_leader_epoch)])])


def _write(leader_epoch: int, start: int, batches: list[tuple[int, int, int, int]]
           ) -> WriteShareGroupStateRequest:
    R = WriteShareGroupStateRequest
    return R(group_id="g", topics=[R.WriteStateData(topic_id=T, partitions=[
        R.PartitionData(partition=0, state_epoch=0, leader_epoch=leader_epoch,
                        start_offset=start, state_batches=[
                            R.StateBatch(first_offset=f, last_offset=last, delivery_state=s,
                                         delivery_count=c) for f, last, s, c in batches])])])


async def test_a_partition_not_loaded_here_answers_not_coordinator():
    services, _coordinator, _written = _services()
    resp = await handle_read_share_group_state(
        context(services, ApiKey.READ_SHARE_GROUP_STATE, 0), _read())
    assert resp.results[0].partitions[0].error_code == ErrorCode.NOT_COORDINATOR
    services.share_coordinator = None
    resp2 = await handle_write_share_group_state(
        context(services, ApiKey.WRITE_SHARE_GROUP_STATE, 0), _write(1, 0, []))
    assert resp2.results[0].partitions[0].error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE


async def test_written_state_is_read_back_and_kept_in_the_log():
    services, coordinator, written = _services()
    await coordinator.load_partition(0)
    resp = await handle_read_share_group_state(
        context(services, ApiKey.READ_SHARE_GROUP_STATE, 0), _read())
    p = resp.results[0].partitions[0]
    assert (p.error_code, p.start_offset, p.state_batches) == (0, -1, [])  # nothing yet
    w = await handle_write_share_group_state(
        context(services, ApiKey.WRITE_SHARE_GROUP_STATE, 0),
        _write(1, 10, [(10, 14, 2, 1), (15, 15, 0, 3)]))
    assert w.results[0].partitions[0].error_code == 0
    p = (await handle_read_share_group_state(
        context(services, ApiKey.READ_SHARE_GROUP_STATE, 0), _read())).results[0].partitions[0]
    assert (p.start_offset, [(b.first_offset, b.last_offset, b.delivery_state,
                              b.delivery_count) for b in p.state_batches]) == (
        10, [(10, 14, 2, 1), (15, 15, 0, 3)])
    # the records are the state: a new coordinator replays the same
    assert decode_key(written[-1][0]) == ("g", T, 0)
    value = written[-1][1]
    assert value is not None and decode_state(value).start_offset == 10
    coordinator.unload_partition(0)
    await coordinator.load_partition(0)
    s = (await handle_read_share_group_state_summary(
        context(services, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0),
        ReadShareGroupStateSummaryRequest(group_id="g", topics=[
            ReadShareGroupStateSummaryRequest.ReadStateSummaryData(topic_id=T, partitions=[
                ReadShareGroupStateSummaryRequest.PartitionData(partition=0, leader_epoch=1)])])
    )).results[0].partitions[0]
    assert (s.error_code, s.start_offset, s.leader_epoch) == (0, 10, 1)


async def test_an_old_leader_is_fenced_then_initialize_and_delete():
    services, coordinator, _written = _services()
    await coordinator.load_partition(0)
    ctx = context(services, ApiKey.WRITE_SHARE_GROUP_STATE, 0)
    assert (await handle_write_share_group_state(ctx, _write(3, 0, []))
            ).results[0].partitions[0].error_code == 0
    assert (await handle_write_share_group_state(ctx, _write(2, 0, []))
            ).results[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH
    R = InitializeShareGroupStateRequest
    init = await handle_initialize_share_group_state(
        context(services, ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0),
        R(group_id="g", topics=[R.InitializeStateData(topic_id=T, partitions=[
            R.PartitionData(partition=0, state_epoch=1, start_offset=7)])]))
    assert init.results[0].partitions[0].error_code == 0
    # a write of the old state epoch: fenced
    assert (await handle_write_share_group_state(ctx, _write(3, 9, []))
            ).results[0].partitions[0].error_code == ErrorCode.FENCED_STATE_EPOCH
    D = DeleteShareGroupStateRequest
    gone = await handle_delete_share_group_state(
        context(services, ApiKey.DELETE_SHARE_GROUP_STATE, 0),
        D(group_id="g", topics=[D.DeleteStateData(topic_id=T, partitions=[
            D.PartitionData(partition=0)])]))
    assert gone.results[0].partitions[0].error_code == 0
    p = (await handle_read_share_group_state(
        context(services, ApiKey.READ_SHARE_GROUP_STATE, 0), _read(4))).results[0].partitions[0]
    assert p.start_offset == -1


async def test_find_coordinator_of_a_share_partition_key():
    services = FakeServices()
    services.share_coordinators = FakeLocator()

    async def find(key: str) -> tuple[int, int]:
        resp = await handle_find_coordinator(
            context(services, ApiKey.FIND_COORDINATOR, 4),
            FindCoordinatorRequest(key_type=2, coordinator_keys=[key]))
        c = resp.coordinators[0]
        return c.error_code, c.node_id
    code, node = await find(f"g:{topic_id_to_str(T)}:3")
    assert code == 0 and node >= 0
    assert (await find("g:not-an-id:3"))[0] == ErrorCode.INVALID_REQUEST
    assert (await find(f"g:{topic_id_to_str(T)}:x"))[0] == ErrorCode.INVALID_REQUEST
    services.share_coordinators = None
    assert (await find(f"g:{topic_id_to_str(T)}:3"))[0] == ErrorCode.COORDINATOR_NOT_AVAILABLE

