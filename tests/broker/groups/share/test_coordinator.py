"""The share coordinator's machine (broker/groups/share/coordinator.py):
what it serves when, how writes merge, and Kafka's fencing."""
from __future__ import annotations

import uuid

from samsa.broker.groups.share.coordinator import (UNINITIALIZED, ShareCoordinatorState,
                                                   ShareState, merge_batches)
from samsa.broker.groups.share.partition import StateBatch
from samsa.broker.groups.share.state_log import (decode_state, encode_state, replay_states,
                                                 snapshot_record)
from samsa.protocol.errors import ErrorCode

T = uuid.UUID(int=7)
KEY = ("g", T, 0)
OTHER = ("g", T, 1)  # kept in partition 1 below


def _loaded(*partitions: int) -> ShareCoordinatorState:
    machine = ShareCoordinatorState(lambda key: key[2])
    for p in partitions:
        machine.loading(p)
        machine.loaded(p, {})
    return machine


def _commit(machine: ShareCoordinatorState, key, planned):
    assert planned.error == ErrorCode.NONE
    return machine.apply(key, None if planned.delete else planned.write)


def test_a_partition_not_led_or_still_loading_is_not_served():
    machine = ShareCoordinatorState(lambda key: key[2])
    assert machine.read(KEY, 0).error == ErrorCode.NOT_COORDINATOR
    machine.loading(0)
    assert machine.write(KEY, 0, 0, 5, []).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    machine.loaded(0, {KEY: ShareState(0, 1, 5, ()), OTHER: ShareState(0, 1, 9, ())})
    assert machine.read(KEY, 1).state == ShareState(0, 1, 5, ())
    # a key of another partition in the replayed log is not this partition's to serve
    assert OTHER not in machine.states
    machine.unload(0)
    assert machine.read(KEY, 1).error == ErrorCode.NOT_COORDINATOR
    assert not machine.states


def test_loading_that_lost_the_leadership_meanwhile_serves_nothing():
    machine = ShareCoordinatorState(lambda key: key[2])
    machine.loading(0)
    machine.unload(0)
    machine.loaded(0, {KEY: ShareState(0, 1, 5, ())})
    assert machine.read(KEY, 1).error == ErrorCode.NOT_COORDINATOR


def test_an_unknown_share_partition_reads_as_uninitialized():
    planned = _loaded(0).read(KEY, 0)
    assert (planned.error, planned.state, planned.write) == (ErrorCode.NONE, UNINITIALIZED, None)
    assert planned.state is not None and planned.state.start_offset == -1


def test_writes_merge_newer_runs_over_older_and_drop_what_is_below_the_start():
    machine = _loaded(0)
    _commit(machine, KEY, machine.write(KEY, 0, 3, 10, [
        StateBatch(10, 19, 0, 1), StateBatch(20, 29, 2, 1)]))
    stored = _commit(machine, KEY, machine.write(KEY, 0, 3, 12, [StateBatch(15, 22, 4, 5)]))
    assert stored is not None
    assert stored.start_offset == 12
    assert stored.batches == (StateBatch(12, 14, 0, 1), StateBatch(15, 22, 4, 5),
                              StateBatch(23, 29, 2, 1))
    # -1 keeps the start offset; the snapshot epoch counts the snapshots
    again = _commit(machine, KEY, machine.write(KEY, 0, 3, -1, [StateBatch(12, 14, 2, 1)]))
    assert again is not None and again.start_offset == 12 and again.snapshot_epoch == 2


def test_merge_joins_neighbours_of_one_state():
    assert merge_batches([StateBatch(0, 4, 2, 1)], [StateBatch(5, 9, 2, 1)], 0) == (
        StateBatch(0, 9, 2, 1),)


def test_an_older_leader_epoch_is_fenced_and_a_newer_read_fences_the_old_leader():
    machine = _loaded(0)
    _commit(machine, KEY, machine.write(KEY, 0, 3, 0, []))
    assert machine.write(KEY, 0, 2, 0, []).error == ErrorCode.FENCED_LEADER_EPOCH
    assert machine.read(KEY, 2).error == ErrorCode.FENCED_LEADER_EPOCH
    planned = machine.read(KEY, 4)  # the partition's new leader takes it up
    assert planned.write is not None and planned.write.leader_epoch == 4
    _commit(machine, KEY, planned)
    assert machine.write(KEY, 0, 3, 5, []).error == ErrorCode.FENCED_LEADER_EPOCH


def test_initialize_starts_over_under_a_newer_state_epoch_and_fences_older_writes():
    machine = _loaded(0)
    _commit(machine, KEY, machine.write(KEY, 0, 1, 0, [StateBatch(0, 3, 2, 1)]))
    assert machine.initialize(KEY, 0, 50).error == ErrorCode.FENCED_STATE_EPOCH
    stored = _commit(machine, KEY, machine.initialize(KEY, 1, 50))
    assert stored is not None and (stored.start_offset, stored.batches) == (50, ())
    assert machine.write(KEY, 0, 1, 4, []).error == ErrorCode.FENCED_STATE_EPOCH
    assert machine.initialize(KEY, 2, -3).error == ErrorCode.INVALID_REQUEST


def test_delete_and_bad_batches():
    machine = _loaded(0)
    assert machine.delete(KEY).delete is False  # nothing to delete
    _commit(machine, KEY, machine.write(KEY, 0, 1, 0, []))
    _commit(machine, KEY, machine.delete(KEY))
    assert machine.read(KEY, 1).state == UNINITIALIZED
    assert machine.write(KEY, 0, 1, 0, [StateBatch(5, 4, 2, 1)]).error == ErrorCode.INVALID_REQUEST
    assert machine.write(KEY, 0, 1, 0, [StateBatch(5, 6, 1, 1)]).error == ErrorCode.INVALID_REQUEST


def test_the_records_carry_the_whole_state_and_replay_to_the_last():
    state = ShareState(2, 7, 40, (StateBatch(40, 41, 4, 5), StateBatch(45, 45, 0, 2)), 9)
    assert decode_state(encode_state(state)) == state
    k, v = snapshot_record(KEY, state)
    older = snapshot_record(KEY, ShareState(1, 1, 0, ()))
    gone = snapshot_record(OTHER, None)
    assert replay_states([older, (k, v), snapshot_record(OTHER, state), gone]) == {KEY: state}
