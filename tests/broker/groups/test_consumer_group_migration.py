"""A classic group upgraded online to a KIP-848 consumer group and back
(group.consumer.migration.policy), through the coordinator runtime in
virtual time: the classic members keep their partitions and offsets across
the conversion, are told to rejoin for the server's assignment, and the
group converts back when its last consumer-protocol member leaves."""
from __future__ import annotations

import asyncio
import uuid

from samsa.broker.groups import GroupCoordinator
from samsa.broker.groups.consumer import ConsumerGroupConfig, Heartbeat
from samsa.broker.groups.consumer_protocol import assignment_partitions, encode_assignment
from samsa.protocol.errors import ErrorCode as E
from tests.broker.groups.test_groups import MemoryLog, advance_until_done, join, make_config
from tests.support.virtual_clock import VirtualClock, settle

T = uuid.UUID(int=9)
TOPICS = {"t": (T, 4)}
SESSION = 10_000


def subscription(owned: dict[str, list[int]] | None = None) -> bytes:
    """A version-1 ConsumerProtocolSubscription of topic "t" (what Java sends)."""
    import struct
    out = struct.pack(">hih", 1, 1, 1) + b"t" + struct.pack(">i", -1)
    owned = owned or {}
    out += struct.pack(">i", len(owned))
    for name, parts in owned.items():
        out += struct.pack(">h", len(name)) + name.encode() + struct.pack(">i", len(parts))
        out += b"".join(struct.pack(">i", p) for p in parts)
    return out


async def start(mlog, clock, policy="bidirectional"):
    c = GroupCoordinator(mlog.store(), make_config(), clock=clock, topics=lambda: TOPICS,
                         consumer_config=ConsumerGroupConfig(migration_policy=policy))
    await c.start()
    return c


async def classic_join(c, member_id="", owned=None):
    res = await join(c, "g", member_id, protocols=[("range", subscription(owned))],
                     session=SESSION)
    if res.error_code == E.MEMBER_ID_REQUIRED:
        res = await join(c, "g", res.member_id, protocols=[("range", subscription(owned))],
                         session=SESSION)
    return res


async def classic_group(c, clock):
    """Two classic members, holding partitions 0,1 and 2,3 at generation 1."""
    joins = asyncio.gather(classic_join(c), classic_join(c))
    await advance_until_done(clock, joins)
    a, b = joins.result()
    leader, other = (a, b) if a.leader == a.member_id else (b, a)
    plan = [(leader.member_id, encode_assignment({"t": [0, 1]})),
            (other.member_id, encode_assignment({"t": [2, 3]}))]
    s1 = asyncio.ensure_future(c.sync_group("g", leader.generation_id, leader.member_id, None,
                                            "consumer", "range", plan))
    s2 = asyncio.ensure_future(c.sync_group("g", other.generation_id, other.member_id, None,
                                            "consumer", "range", []))
    assert (await s1).error_code == (await s2).error_code == 0
    return leader, other


def held(result) -> list[int]:
    return assignment_partitions(result.assignment).get("t", [])


async def test_a_consumer_member_upgrades_the_group_and_the_classic_members_follow():
    mlog, clock = MemoryLog(), VirtualClock()
    c = await start(mlog, clock)
    a, b = await classic_group(c, clock)
    await c.commit_offsets("g", a.generation_id, a.member_id, None, [("t", 0, 7, -1, "")])

    x = await c.consumer_group_heartbeat("g", Heartbeat("x", 0, rebalance_timeout_ms=30_000,
                                                        subscribed_topic_names=["t"]))
    assert x.error_code == 0
    [d] = await c.consumer_group_describe(["g"])
    assert d.error_code == 0 and len(d.members) == 3
    # the classic members kept what they held; the new one waits for it
    assert x.assignment == {}
    assert (await c.fetch_offsets("g", [("t", 0)])).partitions[0].offset == 7
    [listed] = (await c.list_groups())[1]
    assert listed.group_type == "consumer"

    # the classic members hear of the new epoch, rejoin giving up what moves
    assert await c.heartbeat("g", a.generation_id, a.member_id) == E.REBALANCE_IN_PROGRESS
    a2 = await classic_join(c, a.member_id)  # eager: owns nothing as it rejoins
    b2 = await classic_join(c, b.member_id)
    assert a2.generation_id == b2.generation_id == x.member_epoch
    assert a2.leader == "" and a2.protocol_name == "range"
    sa = await c.sync_group("g", a2.generation_id, a2.member_id, None, "consumer", "range", [])
    sb = await c.sync_group("g", b2.generation_id, b2.member_id, None, "consumer", "range", [])
    x = await c.consumer_group_heartbeat("g", Heartbeat("x", x.member_epoch, owned=[]))
    assert sorted(held(sa) + held(sb) + x.assignment.get(T, [])) == [0, 1, 2, 3]
    assert held(sa) and held(sb) and x.assignment[T]
    assert await c.heartbeat("g", a2.generation_id, a2.member_id) == 0
    # a stale generation is told so
    assert await c.heartbeat("g", a.generation_id, a.member_id) == E.ILLEGAL_GENERATION
    await c.shutdown()


async def test_the_last_consumer_member_leaving_downgrades_the_group():
    mlog, clock = MemoryLog(), VirtualClock()
    c = await start(mlog, clock)
    a, b = await classic_group(c, clock)
    await c.commit_offsets("g", a.generation_id, a.member_id, None, [("t", 1, 9, -1, "")])
    x = await c.consumer_group_heartbeat("g", Heartbeat("x", 0, rebalance_timeout_ms=30_000,
                                                        subscribed_topic_names=["t"]))
    left = await c.consumer_group_heartbeat("g", Heartbeat("x", -1))
    assert left.error_code == 0
    [d] = await c.describe_groups(["g"])
    assert d.error_code == 0 and d.state == "PreparingRebalance"
    assert sorted(m.member_id for m in d.members) == sorted([a.member_id, b.member_id])
    assert (await c.fetch_offsets("g", [("t", 1)])).partitions[0].offset == 9
    assert await c.heartbeat("g", x.member_epoch + 1, a.member_id) == E.REBALANCE_IN_PROGRESS
    # the members rebalance as a classic group again
    joins = asyncio.gather(classic_join(c, a.member_id), classic_join(c, b.member_id))
    await advance_until_done(clock, joins)
    j1, j2 = joins.result()
    assert j1.error_code == j2.error_code == 0
    assert j1.leader in (a.member_id, b.member_id)
    await settle()
    await c.shutdown()
    # and a restart finds the classic group
    c = await start(mlog, clock)
    [d] = await c.describe_groups(["g"])
    assert d.error_code == 0
    await c.shutdown()


async def test_the_policy_can_refuse_either_way():
    mlog, clock = MemoryLog(), VirtualClock()
    c = await start(mlog, clock, policy="disabled")
    await classic_group(c, clock)
    refused = await c.consumer_group_heartbeat("g", Heartbeat(
        "x", 0, rebalance_timeout_ms=30_000, subscribed_topic_names=["t"]))
    assert refused.error_code == E.GROUP_ID_NOT_FOUND
    await c.shutdown()

    mlog, clock = MemoryLog(), VirtualClock()
    c = await start(mlog, clock, policy="upgrade")
    await classic_group(c, clock)
    await c.consumer_group_heartbeat("g", Heartbeat("x", 0, rebalance_timeout_ms=30_000,
                                                    subscribed_topic_names=["t"]))
    await c.consumer_group_heartbeat("g", Heartbeat("x", -1))
    [d] = await c.consumer_group_describe(["g"])
    assert d.error_code == 0 and len(d.members) == 2  # stays a consumer group
    await c.shutdown()


async def test_a_silent_classic_member_is_fenced_after_its_own_session_timeout():
    mlog, clock = MemoryLog(), VirtualClock()
    c = await start(mlog, clock, policy="upgrade")
    a, b = await classic_group(c, clock)
    x = await c.consumer_group_heartbeat("g", Heartbeat("x", 0, rebalance_timeout_ms=30_000,
                                                        subscribed_topic_names=["t"]))
    for _ in range(SESSION // 2000 + 1):
        clock.advance(2000)
        await c.heartbeat("g", a.generation_id, a.member_id)
        x = await c.consumer_group_heartbeat("g", Heartbeat("x", x.member_epoch))
        await settle()
    [d] = await c.consumer_group_describe(["g"])
    assert sorted(m.member_id for m in d.members) == sorted(["x", a.member_id])
    await c.shutdown()


async def test_a_restart_mid_migration_keeps_the_classic_members_classic():
    """The member records carry Kafka's ClassicMemberMetadata (tag 0): after
    a coordinator restart the classic members still heartbeat and sync, under
    their own session timeout."""
    mlog, clock = MemoryLog(), VirtualClock()
    c = await start(mlog, clock)
    a, b = await classic_group(c, clock)
    await c.consumer_group_heartbeat("g", Heartbeat("x", 0, rebalance_timeout_ms=30_000,
                                                    subscribed_topic_names=["t"]))
    a2 = await classic_join(c, a.member_id)
    await settle()
    await c.shutdown()

    c = await start(mlog, clock)
    [d] = await c.consumer_group_describe(["g"])
    assert len(d.members) == 3
    assert {m.member_id: m.classic for m in d.members} == {
        a.member_id: True, b.member_id: True, "x": False}
    assert await c.heartbeat("g", a2.generation_id, a.member_id) == 0
    sync = await c.sync_group("g", a2.generation_id, a.member_id, None, "consumer", "range", [])
    assert sync.error_code == 0 and held(sync)
    # b says nothing: it goes after its own session timeout (10 s), not the
    # consumer protocol's 45 s
    for _ in range(6):
        clock.advance(2000)
        await c.heartbeat("g", a2.generation_id, a.member_id)
        await c.consumer_group_heartbeat("g", Heartbeat("x", await _epoch(c, "x")))
        await settle()
    [d] = await c.consumer_group_describe(["g"])
    assert b.member_id not in {m.member_id for m in d.members}
    await c.shutdown()


async def _epoch(c, member_id):
    [d] = await c.consumer_group_describe(["g"])
    return next(m.member_epoch for m in d.members if m.member_id == member_id)


async def test_a_classic_member_of_a_consumer_group_is_told_illegal_generation():
    """Kafka's validateMemberEpoch: in an upgraded group, a member still speaking the
    classic protocol that commits or fetches at a wrong epoch gets ILLEGAL_GENERATION
    (what its client rejoins on), a consumer-protocol member STALE_MEMBER_EPOCH."""
    mlog, clock = MemoryLog(), VirtualClock()
    c = await start(mlog, clock)
    a, _b = await classic_group(c, clock)
    x = await c.consumer_group_heartbeat("g", Heartbeat("x", 0, rebalance_timeout_ms=30_000,
                                                        subscribed_topic_names=["t"]))
    assert x.error_code == 0
    stale = await _epoch(c, a.member_id) + 7  # (its epoch is its classic generation)
    [commit] = await c.commit_offsets("g", stale, a.member_id, None, [("t", 0, 3, -1, "")])
    assert commit.error_code == E.ILLEGAL_GENERATION
    fetched = await c.fetch_offsets("g", [("t", 0)], member_id=a.member_id, member_epoch=stale)
    assert fetched.error_code == E.ILLEGAL_GENERATION
    [commit] = await c.commit_offsets("g", x.member_epoch + 5, "x", None, [("t", 0, 3, -1, "")])
    assert commit.error_code == E.STALE_MEMBER_EPOCH
    fetched = await c.fetch_offsets("g", [("t", 0)], member_id="x", member_epoch=x.member_epoch + 5)
    assert fetched.error_code == E.STALE_MEMBER_EPOCH
    await c.shutdown()
