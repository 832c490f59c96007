"""KIP-932 share groups with confluent-kafka 2.16's ShareConsumer (librdkafka's
share consumer, "preview"): two members on one partition, explicit
acknowledgements (accept, release, reject) and the delivery-count limit; the
group, with no members left, kept across a restart (its records in
__consumer_offsets) for `samsa share-groups` to list, describe and delete; a
member killed with SIGKILL while it holds records (a process of its own,
tests/support/confluent_share_holder.py) has them come back to the others
once the lock its group config sets runs out; every record acknowledged once
across a broker restart.

One broker for the module: its default lock is Kafka's longest (60 s), so a
record comes back within a test only by the lock a group sets
(share.record.lock.duration.ms on the GROUP resource) or by a restart."""
from __future__ import annotations

import contextlib
import io
import time
from collections import Counter

import pytest
from confluent_kafka import AcknowledgeType, ShareConsumer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ResourceType)

from samsa.client.blocking import SimpleClient
from samsa.protocol.messages import (DescribeShareGroupOffsetsRequest, FindCoordinatorRequest,
                                     ListGroupsRequest, ShareGroupDescribeRequest)
from samsa.protocol.model import ApiKey
from samsa.tools import share_groups
from tests.conftest import module_broker_with
from tests.integration.test_share_groups_java import (OVERRIDES, WAIT_S, _create_topic,
                                                      _described_members, _members_assigned,
                                                      _name, _produce)
from tests.support.confluent_share_holder import start as start_holder
from tests.support.process_lines import ProcessLines
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(180)

LOCK_MS = 2000  # the groups' own share.record.lock.duration.ms


@pytest.fixture(scope="module")
def sbroker(request):
    yield from module_broker_with(request, {
        **OVERRIDES, "group.share.record.lock.duration.ms": "60000",
        "group.share.min.record.lock.duration.ms": "1000"})


def _set_lock(bootstrap: str, group: str, ms: int) -> None:
    """The group's share.record.lock.duration.ms, through confluent-kafka's admin
    client (IncrementalAlterConfigs on a GROUP resource)."""
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
        "share.record.lock.duration.ms", str(ms), incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until answered
    admin.incremental_alter_configs([res])[res].result(timeout=30)


def _member(bootstrap: str, group: str, topic: str) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit", "max.poll.records": 5})
    c.subscribe([topic])
    return c


def _held(holder: ProcessLines) -> set[str]:
    """The values the holder printed (once it printed "holding")."""
    wait_until(lambda: holder.has("holding"), WAIT_S,
               lambda: f"the holder to get records; it printed {holder.lines}"
               f"\n{holder.stderr()[-3000:]}")
    return set(holder.values())


def _share_offsets(bootstrap: str, group: str) -> list[tuple[int, int, int]]:
    """(partition, start offset, lag) of each of the group's share-partitions."""
    R = DescribeShareGroupOffsetsRequest
    with SimpleClient(bootstrap) as c:
        resp = c.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, R(groups=[
            R.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]))
    [g] = resp.groups
    return [(p.partition_index, p.start_offset, p.lag) for t in g.topics for p in t.partitions
            if p.error_code == 0]


class Accepting:
    """Live members that accept every record they are given (committed per
    poll), each delivery noted: (member, value, delivery count, when)."""

    def __init__(self, members: list[ShareConsumer]) -> None:
        self.members = members
        self.deliveries: list[tuple[int, str, int, float]] = []

    def poll(self) -> None:
        for i, c in enumerate(self.members):
            records = [m for m in c.poll(0.1) if m.error() is None]
            for m in records:
                self.deliveries.append((i, m.value().decode(), m.delivery_count(),
                                        time.monotonic()))
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            if records:
                c.commit_sync()

    def values(self) -> list[str]:
        return [v for _, v, *_ in self.deliveries]

    def close(self) -> None:
        for c in self.members:
            c.close()


def test_two_share_consumers_split_a_partition_and_archive_a_poison_record(sbroker):
    broker = sbroker
    b = broker.bootstrap
    topic, group = _name("sq"), _name("share")
    _create_topic(b, topic)
    _set_lock(b, group, LOCK_MS)
    members = [ShareConsumer({"bootstrap.servers": b, "group.id": group,
                              "share.acknowledgement.mode": "explicit",
                              "max.poll.records": 5}) for _ in range(2)]
    received: list[tuple[int, str]] = []  # (member, value), in order
    actions: Counter[tuple[str, str]] = Counter()

    def poll_all() -> None:
        for i, c in enumerate(members):
            msgs = [m for m in c.poll(0.1) if m.error() is None]
            for m in msgs:
                value = m.value().decode()
                received.append((i, value))
                kind = ("release" if value.startswith("poison") else
                        "reject" if value.startswith("bad") else "accept")
                actions[(value, kind)] += 1
                c.acknowledge(m, {"release": AcknowledgeType.RELEASE,
                                  "reject": AcknowledgeType.REJECT,
                                  "accept": AcknowledgeType.ACCEPT}[kind])
            if msgs:
                c.commit_sync()

    try:
        for c in members:
            c.subscribe([topic])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # join (heartbeats need polls)
            poll_all()
            try:
                _members_assigned(b, group, 2)
                break
            except AssertionError:
                continue
        oks = [f"ok-{i}" for i in range(30)]
        _produce(b, topic, [*oks[:15], "poison-0", "bad-0", *oks[15:]])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
                actions[("poison-0", "release")] >= 3 and all(actions[(v, "accept")] for v in oks)
                and actions[("bad-0", "reject")]):
            poll_all()
        settle = time.monotonic() + 2 * LOCK_MS / 1000
        while time.monotonic() < settle:  # nothing more may come
            poll_all()
        _state_and_members_are_kafkas_lines(b, group, topic)
    finally:
        for c in members:
            c.close()
    counts = Counter(v for _, v in received)
    assert {v: counts[v] for v in oks} == {v: 1 for v in oks}  # each to one member, once
    assert counts["bad-0"] == 1                                 # rejected: never again
    assert counts["poison-0"] == 3                              # the limit, then archived
    assert len({m for m, _ in received}) == 2                   # both members got records

    _the_empty_group_outlives_a_restart(broker, topic, group)


def test_a_killed_members_records_come_back_to_the_others_after_its_lock(sbroker):
    """test_share_groups_java's test of the same name with confluent-kafka members:
    the holder alone first (it gets records before the live members exist),
    then two live members, then the holder killed with SIGKILL."""
    b = sbroker.bootstrap
    topic, group = _name("sq"), _name("share")
    _create_topic(b, topic)
    _set_lock(b, group, LOCK_MS)
    holder = start_holder(b, group, topic)
    live = Accepting([])
    values = [f"r-{i}" for i in range(60)]
    try:
        _members_assigned(b, group, 1)
        produced_at = time.monotonic()
        _produce(b, topic, values[:5])
        held = _held(holder)
        assert held
        live.members = [_member(b, group, topic) for _ in range(2)]
        live.poll()  # (a live member may get the holder's records back already)
        _members_assigned(b, group, 3)
        _produce(b, topic, values[5:])
        holder.stop()  # kill -9
        wait_until(lambda: live.poll() or set(live.values()) >= set(values), WAIT_S,
                   lambda: f"every record delivered; missing "
                   f"{sorted(set(values) - set(live.values()))}", interval=0)
        # every record acknowledged in the end: the start offset past them all
        wait_until(lambda: live.poll() or _share_offsets(b, group) == [(0, 60, 0)], WAIT_S,
                   lambda: f"every record acknowledged; {_share_offsets(b, group)}",
                   interval=0)
    finally:
        holder.stop()
        live.close()
    deliveries: dict[str, list[int]] = {}
    for _, v, count, _ in live.deliveries:
        deliveries.setdefault(v, []).append(count)
    assert set(deliveries) == set(values)
    assert {m for m, *_ in live.deliveries} == {0, 1}  # both got a share
    # never to two members at once: a record delivered again (a member slower
    # than the lock on a loaded machine) comes with a higher count each time
    assert all(len(set(counts)) == len(counts) for counts in deliveries.values()), {
        v: c for v, c in deliveries.items() if len(set(c)) != len(c)}
    # what the dead member held came back as a redelivery, and not before its
    # lock (taken once they were produced) ran out
    for _, v, count, when in live.deliveries:
        if v in held:
            assert count >= 2, (v, count)
            assert when - produced_at >= LOCK_MS / 1000, (v, when - produced_at)


def test_every_record_acknowledged_once_across_a_broker_restart(sbroker):
    """test_share_groups_java's test of the same name with confluent-kafka members:
    acknowledgements live in __share_group_state, so after a restart nothing
    acknowledged comes back, and what a killed member held unacknowledged does
    (at once: acquisitions are not kept, and the group's lock is the broker's 60 s)."""
    b = sbroker.bootstrap
    topic, group = _name("sq"), _name("share")
    _create_topic(b, topic)
    first_half = [f"r-{i}" for i in range(20)]
    second_half = [f"r-{i}" for i in range(20, 40)]
    reader = Accepting([_member(b, group, topic)])
    try:
        reader.poll()
        _members_assigned(b, group, 1)
        _produce(b, topic, first_half)
        wait_until(lambda: reader.poll() or set(reader.values()) >= set(first_half), WAIT_S,
                   "the first reader to get the first half", interval=0)
    finally:
        reader.close()  # its acknowledgements committed, and it leaves
    assert Counter(reader.values()) == Counter(first_half)
    holder = start_holder(b, group, topic)
    after = Accepting([])
    try:
        _members_assigned(b, group, 1)
        _produce(b, topic, second_half)
        assert _held(holder)
        holder.stop()  # killed: it never leaves
        before = _described_members(b, group)
        assert len(before) == 1  # the holder (the first reader left)
        sbroker.restart()
        # the group's member records bring the dead holder back, as Kafka's load does
        assert _described_members(b, group) == before
        after.members = [_member(b, group, topic)]
        wait_until(lambda: after.poll() or (set(after.values()) >= set(second_half)
                                            and _share_offsets(b, group) == [(0, 40, 0)]),
                   WAIT_S, lambda: f"the second half read and acknowledged; read "
                   f"{sorted(after.values())}, offsets {_share_offsets(b, group)}", interval=0)
    finally:
        holder.stop()
        after.close()
    # the first half was acknowledged before the restart: never again; the
    # second half (part of it held, none acknowledged) exactly once
    assert Counter(after.values()) == Counter(second_half)
    with SimpleClient(b) as c:
        listed = c.call(ApiKey.LIST_GROUPS, ListGroupsRequest(states_filter=[],
                                                              types_filter=["share"]))
    assert (group, "share") in [(x.group_id, x.group_type) for x in listed.groups]


def _share_groups(*args: str) -> list[str]:
    """`samsa share-groups ARGS`' lines (in this process: the tool's own
    output is tests/tools/test_share_groups_cli.py's, here it is what the
    broker answers after a restart)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert share_groups.main(list(args)) == 0
    return out.getvalue().split("\n")


def _state_and_members_are_kafkas_lines(bootstrap: str, group: str, topic: str) -> None:
    """`--describe --state/--members --verbose` of the two members, as
    ShareGroupCommand.printStates/printMembers print them: "%-Gs %-Cs %-15s
    %-12s %-17s %s" (the coordinator "host:port  (id)", at least 25 wide) and
    "%-Gs %-Is %-Hs %-Ls %-12s %-13s %s" (consumer id, host, client id as wide
    as the longest, at least 15), each after a blank line."""
    with SimpleClient(bootstrap) as c:
        coord = c.call(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key=group, key_type=0),
                       highest=3)
        [g] = c.call(ApiKey.SHARE_GROUP_DESCRIBE, ShareGroupDescribeRequest(
            group_ids=[group], include_authorized_operations=False)).groups
    coordinator = f"{coord.host}:{coord.port}  ({coord.node_id})"
    gw, cw = max(15, len(group)), max(25, len(coordinator))
    assert _share_groups("--bootstrap-server", bootstrap, "--describe", "--group", group,
                         "--state", "--verbose") == [
        "",
        f"{'GROUP'.ljust(gw)} {'COORDINATOR (ID)'.ljust(cw)} {'STATE'.ljust(15)} "
        f"{'GROUP-EPOCH'.ljust(12)} {'ASSIGNMENT-EPOCH'.ljust(17)} #MEMBERS",
        f"{group.ljust(gw)} {coordinator.ljust(cw)} {'Stable'.ljust(15)} "
        f"{str(g.group_epoch).ljust(12)} {str(g.assignment_epoch).ljust(17)} 2", ""]
    members = sorted(g.members, key=lambda m: m.member_id)
    iw = max(15, *(len(m.member_id) for m in members))
    hw = max(15, *(len(m.client_host) for m in members))
    lw = max(15, *(len(m.client_id) for m in members))
    assert _share_groups("--bootstrap-server", bootstrap, "--describe", "--group", group,
                         "--members", "--verbose") == [
        "",
        f"{'GROUP'.ljust(gw)} {'CONSUMER-ID'.ljust(iw)} {'HOST'.ljust(hw)} "
        f"{'CLIENT-ID'.ljust(lw)} {'#PARTITIONS'.ljust(12)} {'MEMBER-EPOCH'.ljust(13)} ASSIGNMENT",
        *(f"{group.ljust(gw)} {m.member_id.ljust(iw)} {m.client_host.ljust(hw)} "
          f"{m.client_id.ljust(lw)} {'1'.ljust(12)} {str(m.member_epoch).ljust(13)} {topic}:0"
          for m in members), ""]


def _the_empty_group_outlives_a_restart(broker, topic: str, group: str) -> None:
    """Nothing of the group is in memory after a restart (no member, no
    share-partition served): its records bring it back, Empty, with its
    offsets (every one of the 32 records acknowledged or archived)."""
    broker.restart()
    b = ("--bootstrap-server", broker.bootstrap)
    assert group in _share_groups(*b, "--list")
    widths = (15, 15, 10, 13)
    row = " ".join([*(str(v).ljust(w) for v, w in zip((group, topic, 0, 32), widths)), "0"])
    assert _share_groups(*b, "--describe", "--group", group)[2:] == [row, ""]
    # --verbose adds the LEADER-EPOCH of the state (ShareGroupCommand.printOffsets:
    # "%-Gs %-Ts %-10s %-13s %-13s %s"); the topic's leader never changed: 0
    assert _share_groups(*b, "--describe", "--group", group, "--offsets", "--verbose") == [
        "",
        " ".join([*(v.ljust(w) for v, w in zip(("GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH",
                                                 "START-OFFSET"), (*widths[:3], 13, 13))),
                  "LAG"]),
        " ".join([*(str(v).ljust(w) for v, w in zip((group, topic, 0, 0, 32),
                                                     (*widths[:3], 13, 13))), "0"]), ""]
    assert _share_groups(*b, "--delete", "--group", group) == [
        f"Deletion of requested share groups ('{group}') was successful.", ""]
    assert group not in _share_groups(*b, "--list")
    assert _share_groups(*b, "--describe", "--group", group) == [
        "", f"Error: Share group '{group}' does not exist.", ""]
