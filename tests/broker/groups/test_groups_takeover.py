"""A coordinator taking over and giving up partitions of __consumer_offsets,
as leadership of those partitions moves between brokers: the new coordinator
serves what the old one wrote, answers COORDINATOR_LOAD_IN_PROGRESS while it
reads, and the old one stops answering for the groups it gave up."""
from __future__ import annotations

from samsa.broker.groups import ConsumerOffsetsLog, GroupCoordinator, GroupCoordinatorConfig
from samsa.protocol.errors import ErrorCode as E
from tests.broker.groups.test_groups import MemoryLog

PARTITIONS = 4


class SharedLog(MemoryLog):
    """One copy of the offsets topic both coordinators read (in a cluster each
    broker has its own replica, identical up to the high watermark)."""

    def read_partition(self, partition):
        return [(k, v) for p, k, v in self.records if p == partition]

    def store(self, per_partition: bool):
        return ConsumerOffsetsLog(self.append, self.read_all, PARTITIONS,
                                  self.read_partition if per_partition else None)


async def _commit(coord, group, offset):
    res = await coord.commit_offsets(group, -1, "", None, [("t", 0, offset, -1, "")])
    return res[0].error_code


async def _fetched(coord, group):
    f = await coord.fetch_offsets(group, [("t", 0)])
    return f.error_code, f.partitions[0].offset if f.partitions else None


async def _takeover(per_partition: bool):
    log = SharedLog()
    led_by_a = set(range(PARTITIONS))
    a = GroupCoordinator(log.store(per_partition), GroupCoordinatorConfig(),
                         owns=lambda g: a.store.partition_for(g) in led_by_a)
    b_leads: set[int] = set()
    b = GroupCoordinator(log.store(per_partition), GroupCoordinatorConfig(),
                         owns=lambda g: b.store.partition_for(g) in b_leads)
    await a.start()
    await b.start()  # loads what exists now: nothing
    group = "moving-group"
    p = a.store.partition_for(group)
    other = next(g for g in (f"g{i}" for i in range(100)) if a.store.partition_for(g) != p)
    assert await _commit(a, group, 10) == E.NONE
    assert await _commit(a, other, 5) == E.NONE
    assert await _commit(a, group, 20) == E.NONE

    # leadership of p moves from a to b
    led_by_a.discard(p)
    a.unload_partition(p)
    b.loading(p)
    b_leads.add(p)
    assert (await _fetched(b, group))[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    await b.load_partition(p)
    assert await _fetched(b, group) == (E.NONE, 20)
    assert (await _fetched(a, group))[0] == E.NOT_COORDINATOR
    assert group not in a.groups
    # b loaded only the partition it took over
    assert other not in b.groups and other in a.groups
    assert await _commit(b, group, 30) == E.NONE

    # and back: a reads what b wrote meanwhile
    b_leads.discard(p)
    b.unload_partition(p)
    led_by_a.add(p)
    await a.load_partition(p)
    assert await _fetched(a, group) == (E.NONE, 30)
    await a.shutdown()
    await b.shutdown()


async def test_a_partition_taken_over_serves_what_the_old_coordinator_wrote():
    await _takeover(per_partition=True)


async def test_without_a_partition_reader_the_whole_log_is_filtered():
    await _takeover(per_partition=False)


async def test_leadership_lost_and_regained_before_the_loads_run_keeps_groups_loading():
    # The replica manager's thread tells: take over p, give it up, take it over
    # again; the coordinator's loop then runs the first load, the unload, and
    # only later the second load. In between, the group must not look empty.
    log = SharedLog()
    a = GroupCoordinator(log.store(True), GroupCoordinatorConfig())
    await a.start()
    group = "bouncing-group"
    p = a.store.partition_for(group)
    assert await _commit(a, group, 42) == E.NONE
    a.loading(p)
    a.loading(p)
    await a.load_partition(p)
    a.unload_partition(p)
    assert (await _fetched(a, group))[0] == E.COORDINATOR_LOAD_IN_PROGRESS
    await a.load_partition(p)
    assert await _fetched(a, group) == (E.NONE, 42)
    await a.shutdown()
