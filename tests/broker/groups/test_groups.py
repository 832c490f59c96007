"""GroupCoordinator: classic group membership, rebalances, offsets, persistence.

The coordinator runs for real on the test's event loop with a ConsumerOffsetsLog
over an in-memory record list. The tests of timeouts (session, rebalance,
initial delay) give it a VirtualClock and advance it: nothing sleeps. The
others use small real timeouts (initial delay 0-50 ms) and wait on outcomes
with generous deadlines, never asserting on elapsed time.
"""
from __future__ import annotations

import asyncio
import threading

import pytest

from samsa.broker.coordinator_errors import CoordinatorWriteError
from samsa.broker.groups import (
    ConsumerOffsetsLog,
    CoordinatorBridge,
    GroupCoordinator,
    GroupCoordinatorConfig,
)
from samsa.broker.groups.consumer_protocol import encode_subscription
from samsa.broker.groups.log_format import GroupKey, OffsetKey, decode_key
from samsa.protocol.errors import ErrorCode as E
from tests.support.virtual_clock import VirtualClock, settle
from tests.support.waiting import wait_until_async

# expiry tests use the short values; the rest use long ones so a slow
# machine cannot expire members the test still needs
SHORT_SESSION = 200
SHORT_REBALANCE = 300
SESSION = 5000
REBALANCE = 5000


class MemoryLog:
    """The `__consumer_offsets` topic as a list of (partition, key, value)."""

    def __init__(self):
        self.records: list[tuple[int, bytes, bytes | None]] = []

    def append(self, partition, entries, producer=None):
        # (a transaction's records are kept as plain ones: nothing here reads them back)
        self.records.extend((partition, k, v) for k, v in entries)

    def read_all(self):
        return [(k, v) for _, k, v in self.records]

    def store(self):
        return ConsumerOffsetsLog(self.append, self.read_all, num_partitions=50)


def make_config(**kw):
    base = dict(group_min_session_timeout_ms=10, group_initial_rebalance_delay_ms=0)
    base.update(kw)
    return GroupCoordinatorConfig(**base)


@pytest.fixture
def mlog():
    return MemoryLog()


@pytest.fixture
async def coord(mlog):
    c = GroupCoordinator(mlog.store(), make_config(group_initial_rebalance_delay_ms=50))
    await c.start()
    yield c
    await c.shutdown()


INITIAL_DELAY = 50


@pytest.fixture
def clock():
    return VirtualClock()


@pytest.fixture
async def vcoord(mlog, clock):
    """The coordinator in virtual time: its timers fire when the test advances ``clock``."""
    c = GroupCoordinator(mlog.store(), make_config(group_initial_rebalance_delay_ms=INITIAL_DELAY),
                         clock=clock)
    await c.start()
    yield c
    await c.shutdown()


async def join(c, group, member_id="", *, client="client", protocols=(("range", b"meta"),),
               instance=None, session=SESSION, rebalance=REBALANCE, ptype="consumer",
               require=True):
    return await c.join_group(group, member_id, instance, client, "/127.0.0.1", session,
                              rebalance, ptype, list(protocols), require, None)


async def join_fully(c, group, **kw):
    """A v4+ client: empty member id, MEMBER_ID_REQUIRED, then join with the given id."""
    first = await join(c, group, **kw)
    if first.error_code != E.MEMBER_ID_REQUIRED:
        return first
    return await join(c, group, first.member_id, **kw)


async def until_rebalancing(c, group):
    """Until ``group`` is PreparingRebalance: a join has started a rebalance."""
    async def preparing():
        [d] = await c.describe_groups([group])
        return d.state == "PreparingRebalance"
    await wait_until_async(preparing, 5, f"{group} to start rebalancing", interval=0.01)


async def advance_until_done(clock, fut, step=INITIAL_DELAY, steps=200):
    """Advance the virtual clock a step at a time until ``fut`` is answered
    (members arriving during the initial delay extend it by another delay)."""
    for _ in range(steps):
        await settle()
        if fut.done():
            return
        clock.advance(step)
    raise AssertionError("not answered in virtual time")


async def stable_group(c, group, n=2, metas=None, instances=None, clock=None, **kw):
    """n members join concurrently and sync; the leader assigns b'assign-<member_id>'.
    With a virtual ``clock``, the initial delay is advanced through."""
    metas = metas or [f"meta-{i}".encode() for i in range(n)]
    instances = instances or [None] * n
    joins = asyncio.gather(*[
        join_fully(c, group, client=f"c{i}", protocols=[("range", metas[i])],
                   instance=instances[i], **kw) for i in range(n)])
    if clock is not None:
        await advance_until_done(clock, joins)
    results = await asyncio.wait_for(joins, 5)
    assert all(r.error_code == E.NONE for r in results), results
    gens = {r.generation_id for r in results}
    assert len(gens) == 1
    leader = [r for r in results if r.leader == r.member_id]
    assert len(leader) == 1
    assignments = [(r.member_id, b"assign-" + r.member_id.encode()) for r in results]
    syncs = await asyncio.wait_for(asyncio.gather(*[
        c.sync_group(group, r.generation_id, r.member_id, instances[i], "consumer", "range",
                     assignments if r is leader[0] else [])
        for i, r in enumerate(results)]), 5)
    return results, syncs


# ------------------------------------------------------------------ join + sync


async def test_two_members_join_leader_sees_metadata_and_sync_hands_out_assignments(coord):
    m0, m1 = b"\x00\x01first\xff", b"\x00\x02second\x00"
    results, syncs = await stable_group(coord, "g", metas=[m0, m1])
    a, b = results
    assert a.generation_id == b.generation_id == 1
    assert a.protocol_type == "consumer" and a.protocol_name == "range"
    assert a.member_id.startswith("c0-") and b.member_id.startswith("c1-")
    leader, follower = (a, b) if a.leader == a.member_id else (b, a)
    assert follower.members == [] and follower.leader == leader.member_id
    assert sorted(leader.members) == sorted([(a.member_id, None, m0), (b.member_id, None, m1)])
    for r, s in zip(results, syncs):
        assert s.error_code == E.NONE
        assert s.assignment == b"assign-" + r.member_id.encode()
        assert (s.protocol_type, s.protocol_name) == ("consumer", "range")
    [d] = await coord.describe_groups(["g"])
    assert d.state == "Stable" and d.protocol == "range" and d.protocol_type == "consumer"
    assert {(m.member_id, m.metadata, m.assignment) for m in d.members} == {
        (a.member_id, m0, b"assign-" + a.member_id.encode()),
        (b.member_id, m1, b"assign-" + b.member_id.encode())}
    assert {m.client_id for m in d.members} == {"c0", "c1"}


async def test_member_id_required_then_join_without_requirement(coord):
    r = await join(coord, "g", client="cli")
    assert r.error_code == E.MEMBER_ID_REQUIRED and r.member_id.startswith("cli-")
    assert r.generation_id == -1
    # JoinGroup v0-v3: no MEMBER_ID_REQUIRED round trip
    r2 = await join(coord, "g2", client="old", require=False)
    assert r2.error_code == E.NONE and r2.generation_id == 1 and r2.leader == r2.member_id
    assert r2.members == [(r2.member_id, None, b"meta")]


async def test_follower_sync_waits_for_leader(coord):
    results = await asyncio.gather(join_fully(coord, "g", client="a"),
                                   join_fully(coord, "g", client="b"))
    leader = next(r for r in results if r.leader == r.member_id)
    follower = next(r for r in results if r is not leader)
    fsync = asyncio.ensure_future(coord.sync_group("g", 1, follower.member_id, None, None, None, []))
    # A request issued after the follower's SyncGroup and answered: tasks run in order, so
    # a SyncGroup answered without the leader's assignment would be done by now.
    [d] = await asyncio.ensure_future(coord.describe_groups(["g"]))
    assert not fsync.done()
    assert d.state == "CompletingRebalance" and all(m.assignment == b"" for m in d.members)
    lsync = await coord.sync_group("g", 1, leader.member_id, None, None, None,
                                   [(follower.member_id, b"F"), (leader.member_id, b"L")])
    assert lsync.assignment == b"L"
    assert (await asyncio.wait_for(fsync, 5)).assignment == b"F"


async def test_protocol_selected_by_votes_and_inconsistent_protocols(coord):
    protos = [[("range", b"r0"), ("roundrobin", b"rr0")],
              [("roundrobin", b"rr1"), ("range", b"r1")],
              [("sticky", b"s2"), ("roundrobin", b"rr2"), ("range", b"r2")]]
    results = await asyncio.gather(*[join_fully(coord, "g", client=f"c{i}", protocols=p)
                                     for i, p in enumerate(protos)])
    assert {r.protocol_name for r in results} == {"roundrobin"}
    leader = next(r for r in results if r.leader == r.member_id)
    assert sorted(m for _, _, m in leader.members) == [b"rr0", b"rr1", b"rr2"]
    # nothing in common with the group, or another protocol type
    bad = await join(coord, "g", protocols=[("other", b"")], require=False)
    assert bad.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    bad = await join(coord, "g", ptype="connect", protocols=[("range", b"")], require=False)
    assert bad.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    # an empty group needs a protocol type and at least one protocol
    bad = await join(coord, "new", ptype="", require=False)
    assert bad.error_code == E.INCONSISTENT_GROUP_PROTOCOL
    bad = await join(coord, "new", protocols=[], require=False)
    assert bad.error_code == E.INCONSISTENT_GROUP_PROTOCOL


async def test_join_validation_errors(coord):
    assert (await join(coord, "")).error_code == E.INVALID_GROUP_ID
    assert (await join(coord, "g", session=5)).error_code == E.INVALID_SESSION_TIMEOUT
    assert (await join(coord, "g", session=10**8)).error_code == E.INVALID_SESSION_TIMEOUT
    r = await join(coord, "nope", "some-member")
    assert r.error_code == E.UNKNOWN_MEMBER_ID and r.member_id == "some-member"


async def test_unchanged_follower_rejoin_in_stable_group_gets_current_generation(coord):
    results, _ = await stable_group(coord, "g")
    follower = next(r for r in results if r.leader != r.member_id)
    idx = results.index(follower)
    again = await join(coord, "g", follower.member_id, client=f"c{idx}",
                       protocols=[("range", f"meta-{idx}".encode())])
    assert again.error_code == E.NONE and again.generation_id == 1 and again.members == []
    [d] = await coord.describe_groups(["g"])
    assert d.state == "Stable"


# ------------------------------------------------------------------ leaving, timeouts


async def test_leave_triggers_rebalance_and_remaining_member_rejoins(coord):
    (a, b), _ = await stable_group(coord, "g")
    res = await coord.leave_group("g", [(b.member_id, None, "bye")])
    assert res.error_code == E.NONE
    assert [(m.member_id, m.error_code) for m in res.members] == [(b.member_id, E.NONE)]
    assert await coord.heartbeat("g", 1, a.member_id) == E.REBALANCE_IN_PROGRESS
    [d] = await coord.describe_groups(["g"])
    assert d.state == "PreparingRebalance"
    r = await asyncio.wait_for(join(coord, "g", a.member_id, client="c0",
                                    protocols=[("range", b"meta-0")]), 5)
    assert r.error_code == E.NONE and r.generation_id == 2 and r.leader == a.member_id
    assert [m[0] for m in r.members] == [a.member_id]
    s = await coord.sync_group("g", 2, a.member_id, None, None, None, [(a.member_id, b"all")])
    assert s.assignment == b"all"
    assert await coord.heartbeat("g", 2, a.member_id) == E.NONE
    # leaving twice / unknown members
    res = await coord.leave_group("g", [(b.member_id, None), ("ghost", None)])
    assert [m.error_code for m in res.members] == [E.UNKNOWN_MEMBER_ID] * 2
    res = await coord.leave_group("unknown-group", [("x", None)])
    assert res.error_code == E.NONE and res.members[0].error_code == E.UNKNOWN_MEMBER_ID


async def test_last_member_leaving_empties_the_group(coord):
    (a,), _ = await stable_group(coord, "g", n=1)
    await coord.leave_group("g", [(a.member_id, None)])
    [d] = await coord.describe_groups(["g"])
    assert d.state == "Empty" and d.members == []


async def test_session_timeout_evicts_silent_member(vcoord, clock):
    (a, b), _ = await stable_group(vcoord, "g", clock=clock, session=SHORT_SESSION)
    clock.advance(SHORT_SESSION // 2)
    assert await vcoord.heartbeat("g", 1, a.member_id) == E.NONE  # a stays, b is silent
    clock.advance(SHORT_SESSION // 2)
    assert await vcoord.heartbeat("g", 1, a.member_id) == E.REBALANCE_IN_PROGRESS
    r = await asyncio.wait_for(join(vcoord, "g", a.member_id, client="c0",
                                    protocols=[("range", b"meta-0")],
                                    session=SHORT_SESSION), 5)
    assert r.generation_id == 2 and [m[0] for m in r.members] == [a.member_id]
    assert await vcoord.heartbeat("g", 2, b.member_id) == E.UNKNOWN_MEMBER_ID


async def test_members_that_do_not_rejoin_are_removed_after_rebalance_timeout(vcoord, clock):
    (a, b), _ = await stable_group(vcoord, "g", clock=clock, rebalance=SHORT_REBALANCE)
    leader, follower = (a, b) if a.leader == a.member_id else (b, a)
    idx = [a, b].index(leader)
    # the leader rejoins (asks for a new assignment); the follower stays away
    rejoin = asyncio.ensure_future(join(vcoord, "g", leader.member_id, client=f"c{idx}",
                                        protocols=[("range", b"changed")],
                                        rebalance=SHORT_REBALANCE))
    await settle()
    clock.advance(SHORT_REBALANCE - 1)
    await settle()
    assert not rejoin.done()  # the follower still has time to rejoin
    clock.advance(1)
    r = await asyncio.wait_for(rejoin, 5)
    assert r.error_code == E.NONE and r.generation_id == 2
    assert [m[0] for m in r.members] == [leader.member_id]
    assert await vcoord.heartbeat("g", 1, follower.member_id) == E.UNKNOWN_MEMBER_ID


async def test_unsynced_member_is_dropped_after_rebalance_timeout(vcoord, clock):
    joins = asyncio.gather(join_fully(vcoord, "g", client="a", rebalance=SHORT_REBALANCE),
                           join_fully(vcoord, "g", client="b", rebalance=SHORT_REBALANCE))
    await advance_until_done(clock, joins)
    results = await asyncio.wait_for(joins, 5)
    leader = next(r for r in results if r.leader == r.member_id)
    follower = next(r for r in results if r is not leader)
    await vcoord.sync_group("g", 1, leader.member_id, None, None, None, [])
    clock.advance(SHORT_REBALANCE - 1)
    assert await vcoord.heartbeat("g", 1, leader.member_id) == E.NONE
    clock.advance(1)
    assert await vcoord.heartbeat("g", 1, leader.member_id) == E.REBALANCE_IN_PROGRESS
    assert await vcoord.heartbeat("g", 1, follower.member_id) == E.UNKNOWN_MEMBER_ID


async def test_pending_member_id_expires(vcoord, clock):
    r = await join(vcoord, "g", session=SHORT_SESSION)
    assert r.error_code == E.MEMBER_ID_REQUIRED
    clock.advance(SHORT_SESSION - 1)
    assert vcoord.groups["g"].pending_members
    clock.advance(1)
    assert not vcoord.groups["g"].pending_members
    assert (await join(vcoord, "g", r.member_id)).error_code == E.UNKNOWN_MEMBER_ID


async def test_heartbeat_errors(coord):
    assert await coord.heartbeat("nope", 1, "m") == E.UNKNOWN_MEMBER_ID
    assert await coord.heartbeat("", 1, "m") == E.INVALID_GROUP_ID
    (a, b), _ = await stable_group(coord, "g")
    assert await coord.heartbeat("g", 1, a.member_id) == E.NONE
    assert await coord.heartbeat("g", 7, a.member_id) == E.ILLEGAL_GENERATION
    assert await coord.heartbeat("g", 1, "stranger") == E.UNKNOWN_MEMBER_ID
    # a third member makes the group rebalance
    c = asyncio.ensure_future(join_fully(coord, "g", client="c2"))
    await until_rebalancing(coord, "g")
    assert await coord.heartbeat("g", 1, a.member_id) == E.REBALANCE_IN_PROGRESS
    s = await coord.sync_group("g", 1, a.member_id, None, None, None, [])
    assert s.error_code == E.REBALANCE_IN_PROGRESS
    await asyncio.gather(
        join(coord, "g", a.member_id, client="c0", protocols=[("range", b"meta-0")]),
        join(coord, "g", b.member_id, client="c1", protocols=[("range", b"meta-1")]), c)
    assert await coord.heartbeat("g", 2, a.member_id) == E.NONE  # CompletingRebalance
    assert await coord.heartbeat("g", 1, a.member_id) == E.ILLEGAL_GENERATION


async def test_sync_group_errors(coord):
    assert (await coord.sync_group("nope", 1, "m", None, None, None, [])).error_code \
        == E.UNKNOWN_MEMBER_ID
    (a, b), _ = await stable_group(coord, "g")
    assert (await coord.sync_group("g", 5, a.member_id, None, None, None, [])).error_code \
        == E.ILLEGAL_GENERATION
    assert (await coord.sync_group("g", 1, "x", None, None, None, [])).error_code \
        == E.UNKNOWN_MEMBER_ID
    assert (await coord.sync_group("g", 1, a.member_id, None, "connect", None, [])).error_code \
        == E.INCONSISTENT_GROUP_PROTOCOL
    assert (await coord.sync_group("g", 1, a.member_id, None, None, "sticky", [])).error_code \
        == E.INCONSISTENT_GROUP_PROTOCOL
    # stable: a repeated sync returns the current assignment
    s = await coord.sync_group("g", 1, b.member_id, None, "consumer", "range", [])
    assert s.error_code == E.NONE and s.assignment == b"assign-" + b.member_id.encode()


# ------------------------------------------------------------------ static membership


async def test_static_member_rejoin_replaces_member_without_rebalance(coord):
    (a, b), syncs = await stable_group(coord, "g", instances=["inst-a", "inst-b"])
    follower = a if a.leader != a.member_id else b
    inst = "inst-a" if follower is a else "inst-b"
    idx = [a, b].index(follower)
    assert follower.member_id.startswith(inst + "-")
    # the follower restarts: empty member id, same group.instance.id
    r = await join(coord, "g", instance=inst, client=f"c{idx}",
                   protocols=[("range", f"meta-{idx}".encode())])
    assert r.error_code == E.NONE
    assert r.generation_id == 1 and r.member_id != follower.member_id
    assert r.leader != r.member_id and r.members == [] and not r.skip_assignment
    [d] = await coord.describe_groups(["g"])
    assert d.state == "Stable"
    s = await coord.sync_group("g", 1, r.member_id, inst, None, None, [])
    assert s.error_code == E.NONE
    assert s.assignment == b"assign-" + follower.member_id.encode()  # the old one
    # the old incarnation is fenced
    assert await coord.heartbeat("g", 1, follower.member_id, inst) == E.FENCED_INSTANCE_ID
    assert (await coord.sync_group("g", 1, follower.member_id, inst, None, None, [])
            ).error_code == E.FENCED_INSTANCE_ID
    res = await coord.commit_offsets("g", 1, follower.member_id, inst, [("t", 0, 1, -1, "")])
    assert res[0].error_code == E.FENCED_INSTANCE_ID
    res = await coord.leave_group("g", [(follower.member_id, inst)])
    assert res.members[0].error_code == E.FENCED_INSTANCE_ID
    assert await coord.heartbeat("g", 1, r.member_id, inst) == E.NONE
    assert await coord.heartbeat("g", 1, follower.member_id) == E.UNKNOWN_MEMBER_ID


async def test_static_leader_rejoin_skips_assignment(coord):
    (a, b), _ = await stable_group(coord, "g", instances=["ia", "ib"])
    leader = a if a.leader == a.member_id else b
    inst, idx = ("ia", 0) if leader is a else ("ib", 1)
    r = await join(coord, "g", instance=inst, client=f"c{idx}",
                   protocols=[("range", f"meta-{idx}".encode())])
    assert r.error_code == E.NONE and r.generation_id == 1
    assert r.leader == r.member_id and r.skip_assignment
    assert len(r.members) == 2 and (r.member_id, inst, f"meta-{idx}".encode()) in r.members
    [d] = await coord.describe_groups(["g"])
    assert d.state == "Stable"


async def test_leave_by_instance_id_only(coord):
    (a, b), _ = await stable_group(coord, "g", instances=["ia", "ib"])
    res = await coord.leave_group("g", [("", "ib", "admin"), ("", "nobody", None)])
    assert [m.error_code for m in res.members] == [E.NONE, E.UNKNOWN_MEMBER_ID]
    [d] = await coord.describe_groups(["g"])
    assert d.state == "PreparingRebalance" and len(d.members) == 1


# ------------------------------------------------------------------ offsets


async def test_simple_consumer_commits_and_fetches(coord):
    res = await coord.commit_offsets("simple", -1, "", None,
                                     [("t", 0, 42, 3, "meta"), ("t", 1, 7, -1, None)])
    assert [(r.topic, r.partition, r.error_code) for r in res] == [("t", 0, 0), ("t", 1, 0)]
    f = await coord.fetch_offsets("simple", [("t", 0), ("t", 1), ("t", 2), ("u", 0)])
    assert f.error_code == E.NONE
    assert [tuple(x) for x in f.partitions] == [
        ("t", 0, 42, 3, "meta", 0), ("t", 1, 7, -1, "", 0),
        ("t", 2, -1, -1, "", 0), ("u", 0, -1, -1, "", 0)]
    f = await coord.fetch_offsets("simple", None)
    assert [(x.topic, x.partition, x.offset) for x in f.partitions] == [("t", 0, 42), ("t", 1, 7)]
    f = await coord.fetch_offsets("unknown", None)
    assert f.partitions == []
    # a later commit wins
    await coord.commit_offsets("simple", -1, "", None, [("t", 0, 50, 4, "")])
    f = await coord.fetch_offsets("simple", [("t", 0)])
    assert (f.partitions[0].offset, f.partitions[0].leader_epoch) == (50, 4)
    _, listed = await coord.list_groups()
    assert ("simple", "", "Empty") in [tuple(g)[:3] for g in listed]


async def test_commit_generation_and_member_checks(coord, caplog):
    caplog.set_level("INFO", logger="samsa.broker.groups.coordinator")
    res = await coord.commit_offsets("nogroup", 3, "m", None, [("t", 0, 1, -1, "")])
    assert res[0].error_code == E.ILLEGAL_GENERATION
    # the refusal says why in the broker's log, not only in the answer
    assert any("nogroup" in r.getMessage() and "ILLEGAL_GENERATION" in r.getMessage()
               for r in caplog.records)
    (a, b), _ = await stable_group(coord, "g")
    ok = await coord.commit_offsets("g", 1, a.member_id, None, [("t", 0, 10, -1, "x")])
    assert ok[0].error_code == E.NONE
    assert (await coord.commit_offsets("g", 2, a.member_id, None, [("t", 0, 11, -1, "")])
            )[0].error_code == E.ILLEGAL_GENERATION
    assert (await coord.commit_offsets("g", 1, "who", None, [("t", 0, 11, -1, "")])
            )[0].error_code == E.UNKNOWN_MEMBER_ID
    # outside the generation while the group has members
    assert (await coord.commit_offsets("g", -1, "", None, [("t", 0, 11, -1, "")])
            )[0].error_code == E.UNKNOWN_MEMBER_ID
    big = "x" * 5000
    res = await coord.commit_offsets("g", 1, b.member_id, None,
                                     [("t", 1, 5, -1, big), ("t", 2, 6, -1, "")])
    assert [r.error_code for r in res] == [E.OFFSET_METADATA_TOO_LARGE, E.NONE]
    f = await coord.fetch_offsets("g", [("t", 0), ("t", 1), ("t", 2)])
    assert [x.offset for x in f.partitions] == [10, -1, 6]
    # a new member makes the group rebalance: PreparingRebalance still commits
    newcomer = asyncio.ensure_future(join_fully(coord, "g", client="c2"))
    await until_rebalancing(coord, "g")
    assert (await coord.commit_offsets("g", 1, a.member_id, None, [("t", 0, 12, -1, "")])
            )[0].error_code == E.NONE
    await asyncio.gather(
        join(coord, "g", a.member_id, client="c0", protocols=[("range", b"meta-0")]),
        join(coord, "g", b.member_id, client="c1", protocols=[("range", b"meta-1")]), newcomer)
    # CompletingRebalance: the member knows generation 2 but has no assignment yet
    assert (await coord.commit_offsets("g", 2, a.member_id, None, [("t", 0, 13, -1, "")])
            )[0].error_code == E.REBALANCE_IN_PROGRESS
    f = await coord.fetch_offsets("g", [("t", 0)])
    assert f.partitions[0].offset == 12


async def test_delete_offsets_respects_subscriptions(coord):
    sub = encode_subscription(["orders"], b"ud")
    results = await asyncio.gather(join_fully(coord, "g", protocols=[("range", sub)]))
    r = results[0]
    await coord.sync_group("g", 1, r.member_id, None, None, None, [])
    await coord.commit_offsets("g", 1, r.member_id, None,
                               [("orders", 0, 5, -1, ""), ("old", 0, 9, -1, "")])
    res = await coord.delete_offsets("g", [("orders", 0), ("old", 0), ("old", 1)])
    assert res.error_code == E.NONE
    assert [tuple(p) for p in res.partitions] == [
        ("orders", 0, E.GROUP_SUBSCRIBED_TO_TOPIC), ("old", 0, E.NONE), ("old", 1, E.NONE)]
    f = await coord.fetch_offsets("g", None)
    assert [(x.topic, x.offset) for x in f.partitions] == [("orders", 5)]
    assert (await coord.delete_offsets("nope", [("t", 0)])).error_code == E.GROUP_ID_NOT_FOUND
    # once empty, everything can go, and the group with it
    await coord.leave_group("g", [(r.member_id, None)])
    res = await coord.delete_offsets("g", [("orders", 0)])
    assert res.partitions[0].error_code == E.NONE
    assert "g" not in coord.groups


async def test_delete_offsets_of_non_consumer_group_with_members(coord):
    r = await join(coord, "c", ptype="connect", require=False)
    assert r.error_code == E.NONE
    await coord.sync_group("c", 1, r.member_id, None, None, None, [])
    assert (await coord.delete_offsets("c", [("t", 0)])).error_code == E.NON_EMPTY_GROUP


# ------------------------------------------------------------------ admin


async def test_delete_groups(coord, mlog):
    await stable_group(coord, "busy", n=1)
    await coord.commit_offsets("idle", -1, "", None, [("t", 0, 1, -1, ""), ("t", 1, 2, -1, "")])
    out = await coord.delete_groups(["busy", "idle", "missing"])
    assert out == [("busy", E.NON_EMPTY_GROUP), ("idle", E.NONE),
                   ("missing", E.GROUP_ID_NOT_FOUND)]
    f = await coord.fetch_offsets("idle", [("t", 0)])
    assert f.partitions[0].offset == -1
    _, listed = await coord.list_groups()
    assert [g.group_id for g in listed] == ["busy"]
    tombstones = [(decode_key(k), p) for p, k, v in mlog.records if v is None]
    assert {k for k, _ in tombstones} == {OffsetKey("idle", "t", 0), OffsetKey("idle", "t", 1),
                                         GroupKey("idle")}
    assert {p for _, p in tombstones} == {coord.store.partition_for("idle")}
    assert (await coord.delete_groups(["idle"])) == [("idle", E.GROUP_ID_NOT_FOUND)]


async def test_list_groups_with_state_filter(coord):
    await stable_group(coord, "stable", n=1)
    await coord.commit_offsets("empty", -1, "", None, [("t", 0, 1, -1, "")])
    pending = asyncio.ensure_future(join_fully(coord, "preparing"))
    await asyncio.sleep(0)  # joined, initial delay running
    err, groups = await coord.list_groups()
    assert err == E.NONE
    assert sorted((g.group_id, g.protocol_type, g.state) for g in groups) == [
        ("empty", "", "Empty"), ("preparing", "consumer", "PreparingRebalance"),
        ("stable", "consumer", "Stable")]
    _, groups = await coord.list_groups(["Stable", "empty"])
    assert sorted(g.group_id for g in groups) == ["empty", "stable"]
    _, groups = await coord.list_groups(["PREPARINGREBALANCE"])
    assert [g.group_id for g in groups] == ["preparing"]
    _, groups = await coord.list_groups(None, ["consumer"])
    assert groups == []
    _, groups = await coord.list_groups(None, ["Classic"])
    assert len(groups) == 3 and {g.group_type for g in groups} == {"classic"}
    await asyncio.wait_for(pending, 5)


async def test_describe_unknown_and_rebalancing_groups(coord):
    [d] = await coord.describe_groups(["nope"])
    assert (d.error_code, d.state, d.members) == (E.GROUP_ID_NOT_FOUND, "Dead", [])
    [d] = await coord.describe_groups(["nope"], unknown_is_error=False)
    assert d.error_code == E.NONE and d.state == "Dead"
    results = await asyncio.gather(join_fully(coord, "g"))
    [d] = await coord.describe_groups(["g"])
    assert d.state == "CompletingRebalance" and d.protocol == ""
    assert [(m.member_id, m.metadata, m.assignment) for m in d.members] == [
        (results[0].member_id, b"", b"")]


async def test_not_loaded_answers_load_in_progress(mlog):
    c = GroupCoordinator(mlog.store(), make_config())
    assert (await join(c, "g")).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    assert await c.heartbeat("g", 1, "m") == E.COORDINATOR_LOAD_IN_PROGRESS
    assert (await c.fetch_offsets("g", None)).error_code == E.COORDINATOR_LOAD_IN_PROGRESS


# ------------------------------------------------------------------ persistence


async def test_reloaded_coordinator_sees_offsets_and_groups(mlog):
    c1 = GroupCoordinator(mlog.store(), make_config())
    await c1.start()
    (a, b), _ = await stable_group(c1, "g", instances=[None, "static-b"], session=5000)
    await c1.commit_offsets("g", 1, a.member_id, None, [("t", 0, 100, 2, "m0")])
    await c1.commit_offsets("g", 1, b.member_id, "static-b", [("t", 1, 200, -1, "")])
    await c1.commit_offsets("simple", -1, "", None, [("s", 3, 33, -1, "x")])
    await c1.commit_offsets("gone", -1, "", None, [("s", 0, 1, -1, "")])
    await c1.delete_groups(["gone"])
    (e,), _ = await stable_group(c1, "emptied", n=1)
    await c1.leave_group("emptied", [(e.member_id, None)])
    before = await c1.describe_groups(["g", "emptied"])
    await c1.shutdown()

    c2 = GroupCoordinator(mlog.store(), make_config())
    await c2.start()
    try:
        after = await c2.describe_groups(["g", "emptied"])
        assert after == before
        f = await c2.fetch_offsets("g", None)
        assert [tuple(x) for x in f.partitions] == [("t", 0, 100, 2, "m0", 0),
                                                    ("t", 1, 200, -1, "", 0)]
        f = await c2.fetch_offsets("simple", None)
        assert [tuple(x) for x in f.partitions] == [("s", 3, 33, -1, "x", 0)]
        assert (await c2.fetch_offsets("gone", None)).partitions == []
        _, listed = await c2.list_groups()
        assert sorted((g.group_id, g.state) for g in listed) == [
            ("emptied", "Empty"), ("g", "Stable"), ("simple", "Empty")]
        assert c2.groups["emptied"].generation_id == 2
        # loaded members keep working in their generation, with their static ids
        assert await c2.heartbeat("g", 1, a.member_id) == E.NONE
        assert await c2.heartbeat("g", 1, "x", "static-b") == E.FENCED_INSTANCE_ID
        s = await c2.sync_group("g", 1, b.member_id, "static-b", None, None, [])
        assert s.assignment == b"assign-" + b.member_id.encode()
    finally:
        await c2.shutdown()


async def test_loaded_members_that_stay_silent_expire(mlog, clock):
    c1 = GroupCoordinator(mlog.store(), make_config(), clock=clock)
    await c1.start()
    await stable_group(c1, "g", n=1, clock=clock, session=SHORT_SESSION)
    await c1.shutdown()
    c2 = GroupCoordinator(mlog.store(), make_config(), clock=clock)
    await c2.start()
    try:
        [d] = await c2.describe_groups(["g"])
        assert d.state == "Stable"  # as the log left it, with fresh session timers
        clock.advance(SHORT_SESSION)
        [d] = await c2.describe_groups(["g"])
        assert d.state == "Empty"
    finally:
        await c2.shutdown()


async def test_offset_expiry(mlog):
    now = [1_000_000]
    c = GroupCoordinator(mlog.store(), make_config(offsets_retention_ms=1000),
                         time_ms=lambda: now[0])
    await c.start()
    try:
        await c.commit_offsets("s", -1, "", None, [("t", 0, 1, -1, "")])
        await c.commit_offsets("s", -1, "", None, [("t", 1, 1, -1, "")], retention_ms=5000)
        now[0] += 1500
        assert await c.expire_offsets() == 1
        f = await c.fetch_offsets("s", None)
        assert [x.partition for x in f.partitions] == [1]
        now[0] += 5000
        assert await c.expire_offsets() == 1
        assert "s" not in c.groups
    finally:
        await c.shutdown()


async def test_store_failure_is_reported_not_applied(mlog):
    class Failing(ConsumerOffsetsLog):
        fail = False

        def store_offsets(self, group_id, entries):
            if self.fail:
                raise OSError("disk full")
            return super().store_offsets(group_id, entries)

    store = Failing(mlog.append, mlog.read_all)
    c = GroupCoordinator(store, make_config())
    await c.start()
    try:
        await c.commit_offsets("s", -1, "", None, [("t", 0, 1, -1, "")])
        store.fail = True
        res = await c.commit_offsets("s", -1, "", None, [("t", 0, 2, -1, "")])
        assert res[0].error_code == E.COORDINATOR_NOT_AVAILABLE
        assert (await c.fetch_offsets("s", [("t", 0)])).partitions[0].offset == 1
    finally:
        await c.shutdown()


async def test_async_store_methods_are_awaited(mlog):
    inner = mlog.store()

    class AsyncStore:
        async def load(self):
            await asyncio.sleep(0)
            return await inner.load()

        async def store_offsets(self, g, e):
            await asyncio.sleep(0)
            await inner.store_offsets(g, e)

        async def store_group(self, r):
            await asyncio.sleep(0)
            await inner.store_group(r)

        async def delete_offsets(self, g, p):
            await inner.delete_offsets(g, p)

        async def delete_group(self, g, p):
            await inner.delete_group(g, p)

    c = GroupCoordinator(AsyncStore(), make_config())
    await c.start()
    try:
        _, syncs = await stable_group(c, "g")
        assert all(s.error_code == E.NONE for s in syncs)
        await c.commit_offsets("s", -1, "", None, [("t", 0, 5, -1, "")])
        assert (await c.fetch_offsets("s", [("t", 0)])).partitions[0].offset == 5
    finally:
        await c.shutdown()


# ------------------------------------------------------------------ other loops


async def test_bridge_calls_from_another_thread(coord):
    bridge = CoordinatorBridge(coord)
    out = {}

    def other_thread():
        async def main():
            r = await bridge.join_group("g", "", None, "t", "h", SESSION, REBALANCE,
                                        "consumer", [("range", b"x")], False, None)
            s = await bridge.sync_group("g", r.generation_id, r.member_id, None, None, None,
                                        [(r.member_id, b"A")])
            out["r"], out["s"] = r, s
            out["c"] = await bridge.commit_offsets("g", r.generation_id, r.member_id, None,
                                                   [("t", 0, 1, -1, "")])
        asyncio.run(main())

    t = threading.Thread(target=other_thread)
    t.start()
    await asyncio.wait_for(asyncio.to_thread(t.join), 10)
    assert out["r"].error_code == E.NONE and out["s"].assignment == b"A"
    assert out["c"][0].error_code == E.NONE
    # and from the coordinator's own loop
    assert (await bridge.heartbeat("g", 1, out["r"].member_id)) == E.NONE


# ------------------------------------------------------------------ client loops


class SimConsumer:
    """What a classic consumer does: join, sync (assigning when leader), heartbeat,
    rejoin when told to, leave on close. The leader assigns each member the
    sorted list of member ids so followers can check they agree."""

    def __init__(self, c, group, name):
        self.c, self.group, self.name = c, group, name
        self.member_id = ""
        self.generation = -1
        self.assignment = b""
        self.stop = asyncio.Event()
        self.task = asyncio.ensure_future(self.run())

    async def run(self):
        while not self.stop.is_set():
            r = await join(self.c, self.group, self.member_id, client=self.name,
                           protocols=[("range", self.name.encode())])
            if r.error_code == E.MEMBER_ID_REQUIRED:
                self.member_id = r.member_id
                continue
            if r.error_code == E.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            assert r.error_code == E.NONE, r
            self.member_id = r.member_id
            plan = []
            if r.leader == r.member_id:
                ids = ",".join(sorted(m for m, _, _ in r.members)).encode()
                plan = [(m, ids) for m, _, _ in r.members]
            s = await self.c.sync_group(self.group, r.generation_id, r.member_id, None,
                                        "consumer", "range", plan)
            if s.error_code != E.NONE:
                continue
            self.generation, self.assignment = r.generation_id, s.assignment
            while not self.stop.is_set():
                code = await self.c.heartbeat(self.group, self.generation, self.member_id)
                if code != E.NONE:
                    break
                try:
                    await asyncio.wait_for(self.stop.wait(), 0.02)
                except asyncio.TimeoutError:
                    pass
        await self.c.leave_group(self.group, [(self.member_id, None, "closing")])

    async def close(self):
        self.stop.set()
        await asyncio.wait_for(self.task, 10)


async def converged(c, group, consumers):
    [d] = await c.describe_groups([group])
    ids = sorted(x.member_id for x in consumers)
    return (d.state == "Stable" and sorted(m.member_id for m in d.members) == ids
            and all(x.assignment == ",".join(ids).encode() for x in consumers)
            and len({x.generation for x in consumers}) == 1)


async def test_consumers_coming_and_going_converge(coord):
    a = SimConsumer(coord, "g", "a")
    await wait_until_async(lambda: converged(coord, "g", [a]), 5, "a alone", interval=0.01)
    b = SimConsumer(coord, "g", "b")
    c = SimConsumer(coord, "g", "c")
    await wait_until_async(lambda: converged(coord, "g", [a, b, c]), 5, "a, b, c converged",
                           interval=0.01)
    gen = a.generation
    await a.close()
    await wait_until_async(lambda: converged(coord, "g", [b, c]), 5, "b, c converged",
                           interval=0.01)
    assert b.generation > gen
    await b.close()
    await c.close()
    [d] = await coord.describe_groups(["g"])
    assert d.state == "Empty"


async def test_initial_delay_gathers_members_arriving_during_it(mlog, clock):
    # a long initial delay: members arriving during it share the first generation,
    # and each newcomer extends the wait by another delay
    c = GroupCoordinator(mlog.store(), make_config(group_initial_rebalance_delay_ms=400),
                         clock=clock)
    await c.start()
    try:
        first = asyncio.ensure_future(join(c, "g", client="a", require=False))
        await settle()
        clock.advance(200)
        second = asyncio.ensure_future(join(c, "g", client="b", require=False))
        await settle()
        clock.advance(200)
        await settle()
        assert not first.done() and not second.done()
        clock.advance(400)
        ra, rb = await asyncio.wait_for(asyncio.gather(first, second), 5)
        assert ra.generation_id == rb.generation_id == 1
        leader = ra if ra.leader == ra.member_id else rb
        assert len(leader.members) == 2
    finally:
        await c.shutdown()


def test_config_from_broker_config():
    from samsa.config import load_broker_config
    cfg = load_broker_config(None, overrides=["group.initial.rebalance.delay.ms=10",
                                              "group.min.session.timeout.ms=100",
                                              "offsets.retention.minutes=2"], environ={})
    gc = GroupCoordinatorConfig.from_broker_config(cfg)
    assert gc.group_initial_rebalance_delay_ms == 10
    assert gc.group_min_session_timeout_ms == 100
    assert gc.offsets_retention_ms == 120_000
    assert gc.group_max_session_timeout_ms == 1_800_000


async def test_group_max_size(mlog):
    c = GroupCoordinator(mlog.store(), make_config(group_max_size=1))
    await c.start()
    try:
        r = await join(c, "g", require=False)
        assert r.error_code == E.NONE
        assert (await join(c, "g", require=False)).error_code == E.GROUP_MAX_SIZE_REACHED
    finally:
        await c.shutdown()


@pytest.mark.parametrize("write_error,answer", [
    (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),       # moved: the client looks again
    (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),  # short ISR: it retries
    (E.MESSAGE_TOO_LARGE, E.INVALID_COMMIT_OFFSET_SIZE),
])
async def test_a_refused_offsets_write_is_answered_as_kafka_does(mlog, write_error, answer):
    class Refusing(ConsumerOffsetsLog):
        refuse = False

        def store_offsets(self, group_id, entries):
            if self.refuse:
                raise CoordinatorWriteError("__consumer_offsets-0: refused", write_error)
            return super().store_offsets(group_id, entries)

    store = Refusing(mlog.append, mlog.read_all)
    c = GroupCoordinator(store, make_config())
    await c.start()
    try:
        await c.commit_offsets("s", -1, "", None, [("t", 0, 1, -1, "")])
        store.refuse = True
        res = await c.commit_offsets("s", -1, "", None, [("t", 0, 2, -1, "")])
        assert res[0].error_code == answer
        assert (await c.fetch_offsets("s", [("t", 0)])).partitions[0].offset == 1
    finally:
        await c.shutdown()
