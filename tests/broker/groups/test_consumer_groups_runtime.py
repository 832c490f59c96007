"""KIP-848 consumer groups through the coordinator runtime, in virtual time,
with `__consumer_offsets` as an in-memory list: heartbeats, the records
written and loaded back, offsets under member epochs, and the classic APIs
meeting a consumer group."""
from __future__ import annotations

import uuid

import pytest

from samsa.broker.groups import GroupCoordinator
from samsa.broker.groups.consumer import Heartbeat
from samsa.protocol.errors import ErrorCode as E
from tests.broker.groups.test_groups import MemoryLog, join, make_config
from tests.support.virtual_clock import VirtualClock, settle

T = uuid.UUID(int=9)
TOPICS = {"t": (T, 4)}


async def start(mlog, clock):
    c = GroupCoordinator(mlog.store(), make_config(), clock=clock, topics=lambda: TOPICS)
    await c.start()
    return c


def first(member_id, **kw):
    return Heartbeat(member_id, 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["t"], **kw)


async def test_a_group_survives_a_coordinator_restart_with_its_offsets():
    mlog, clock = MemoryLog(), VirtualClock()
    c = await start(mlog, clock)
    a = await c.consumer_group_heartbeat("g", first("a"))
    b = await c.consumer_group_heartbeat("g", first("b"))
    assert a.error_code == b.error_code == 0
    a = await c.consumer_group_heartbeat("g", Heartbeat("a", a.member_epoch,
                                                        owned=[(T, [0, 1, 2, 3])]))
    a = await c.consumer_group_heartbeat("g", Heartbeat("a", a.member_epoch,
                                                        owned=[(T, sorted(a.assignment[T]))]))
    b = await c.consumer_group_heartbeat("g", Heartbeat("b", b.member_epoch))
    assert sorted(a.assignment[T] + b.assignment[T]) == [0, 1, 2, 3]
    commit = await c.commit_offsets("g", b.member_epoch, "b", None, [("t", 3, 42, -1, "")])
    assert commit[0].error_code == 0
    stale = await c.commit_offsets("g", b.member_epoch - 2, "b", None, [("t", 3, 7, -1, "")])
    assert stale[0].error_code == E.STALE_MEMBER_EPOCH
    [before] = await c.consumer_group_describe(["g"])
    await settle()
    await c.shutdown()

    c = await start(mlog, clock)
    [after] = await c.consumer_group_describe(["g"])
    assert (after.state, after.group_epoch, after.assignment_epoch) == \
        (before.state, before.group_epoch, before.assignment_epoch)
    assert {m.member_id: m.assignment for m in after.members} == \
        {m.member_id: m.assignment for m in before.members}
    fetched = await c.fetch_offsets("g", [("t", 3)])
    assert fetched.partitions[0].offset == 42
    # the members carry on with their epochs
    again = await c.consumer_group_heartbeat("g", Heartbeat("b", b.member_epoch))
    assert (again.error_code, again.member_epoch) == (0, b.member_epoch)
    # and their sessions run again: silent members are fenced
    clock.advance(46_000)
    [empty] = await c.consumer_group_describe(["g"])
    assert empty.state == "Empty"
    await c.shutdown()


async def test_classic_apis_meet_a_consumer_group():
    mlog, clock = MemoryLog(), VirtualClock()
    c = await start(mlog, clock)
    await c.consumer_group_heartbeat("g", first("a"))
    res = await join(c, "g")
    assert res.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    [d] = await c.describe_groups(["g"])
    assert d.error_code == E.GROUP_ID_NOT_FOUND
    _, listed = await c.list_groups(types_filter=["consumer"])
    assert [(g.group_id, g.group_type, g.state) for g in listed] == [("g", "consumer", "Stable")]
    _, classic = await c.list_groups(types_filter=["classic"])
    assert classic == []
    assert await c.delete_groups(["g"]) == [("g", E.NON_EMPTY_GROUP)]
    # once empty, a classic member may take the group over
    await c.consumer_group_heartbeat("g", Heartbeat("a", -1))
    res = await join(c, "g")
    assert res.error_code == E.MEMBER_ID_REQUIRED
    await c.shutdown()


@pytest.mark.parametrize("epoch", [3, -1])
async def test_unknown_groups_and_members(epoch):
    c = await start(MemoryLog(), VirtualClock())
    res = await c.consumer_group_heartbeat("nope", Heartbeat("a", epoch))
    assert res.error_code == E.UNKNOWN_MEMBER_ID
    [d] = await c.consumer_group_describe(["nope"])
    assert d.error_code == E.GROUP_ID_NOT_FOUND
    await c.shutdown()


async def test_a_coordinator_taking_over_the_partition_loads_the_group():
    """A coordinator move (ZooKeeper cluster): the broker that leads the
    group's __consumer_offsets partition now reads the group from it."""
    mlog, clock = MemoryLog(), VirtualClock()
    old = await start(mlog, clock)
    a = await old.consumer_group_heartbeat("g", first("a"))
    partition = old.store.partition_for("g")
    new = GroupCoordinator(mlog.store(), make_config(), clock=clock, topics=lambda: TOPICS)
    await new.start()
    # this broker led nothing yet: its copy was loaded, then dropped
    new.unload_partition(partition)
    assert "g" not in new.groups
    await settle()
    old.unload_partition(partition)
    await new.load_partition(partition)
    [d] = await new.consumer_group_describe(["g"])
    assert [m.member_id for m in d.members] == ["a"]
    again = await new.consumer_group_heartbeat("g", Heartbeat("a", a.member_epoch))
    assert (again.error_code, again.member_epoch) == (0, a.member_epoch)
    await old.shutdown()
    await new.shutdown()


async def test_offset_fetch_checks_the_member_as_kafka_does():
    """OffsetFetch v9+: a consumer group's member names itself and its epoch;
    without either (an admin client, a classic consumer) anyone may read."""
    mlog, clock = MemoryLog(), VirtualClock()
    c = await start(mlog, clock)
    a = await c.consumer_group_heartbeat("g", first("a"))
    await c.commit_offsets("g", a.member_epoch, "a", None, [("t", 0, 5, -1, "")])
    mine = await c.fetch_offsets("g", [("t", 0)], member_id="a", member_epoch=a.member_epoch)
    assert (mine.error_code, mine.partitions[0].offset) == (0, 5)
    admin = await c.fetch_offsets("g", [("t", 0)])
    assert (admin.error_code, admin.partitions[0].offset) == (0, 5)
    stale = await c.fetch_offsets("g", [("t", 0)], member_id="a",
                                  member_epoch=a.member_epoch - 1)
    assert (stale.error_code, stale.partitions) == (E.STALE_MEMBER_EPOCH, [])
    unknown = await c.fetch_offsets("g", [("t", 0)], member_id="zz", member_epoch=1)
    assert unknown.error_code == E.UNKNOWN_MEMBER_ID
    # a classic group asks nothing of the one reading
    classic = await c.fetch_offsets("nogroup", [("t", 0)], member_id="x", member_epoch=3)
    assert (classic.error_code, classic.partitions[0].offset) == (0, -1)
    await c.shutdown()
