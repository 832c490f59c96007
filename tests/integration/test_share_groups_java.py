"""KIP-932 share groups driven by the Apache Kafka Java client 4.3's
KafkaShareConsumer (tests/java/ShareConsume.java, one line per record it is
given: value, offset, delivery count, how it acknowledged it).

confluent-kafka 2.16's ShareConsumer (librdkafka's, in preview) has its own
test beside this one (test_share_groups_confluent.py).
"""
from __future__ import annotations

import subprocess
import sys
import uuid
from collections import Counter

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.client.blocking import SimpleClient
from samsa.protocol.messages import (DescribeShareGroupOffsetsRequest, ListGroupsRequest,
                                     ShareGroupDescribeRequest)
from samsa.protocol.model import ApiKey
from tests.support.broker_process import REPO_ROOT
from tests.support.process_lines import ProcessLines
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(240)

LOCK_MS = 2000
OVERRIDES = {"offsets.topic.num.partitions": "3",
             "share.coordinator.state.topic.num.partitions": "3",
             "group.share.record.lock.duration.ms": str(LOCK_MS),
             "group.share.delivery.count.limit": "3",
             "group.share.heartbeat.interval.ms": "500",
             "group.share.session.timeout.ms": "30000"}
WAIT_S = 60  # harness safety net, not a performance assertion
# a consumer that never gets a record exits with "no record within ..." before
# the tests' own WAIT_S runs out (counted from its start, so a fair bit below)
FIRST_RECORD_MS = 45_000


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)


def _produce(bootstrap: str, topic: str, values: list[str]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for v in values:
        p.produce(topic, v.encode(), partition=0)
    assert p.flush(30) == 0


def _members_assigned(bootstrap: str, group: str, count: int) -> None:
    """Wait until ``count`` members hold the partition and its share-partition has
    started (share.auto.offset.reset=latest starts it at the end): from then on
    what is produced is delivered. (The share-partition starts as the assignment
    is made, but the assignment is answered without waiting for it longer than a
    few seconds: on a loaded machine it can start after the members hold it.)"""
    last: dict[str, object] = {}

    def assigned() -> bool:
        with SimpleClient(bootstrap) as c:
            resp = c.call(ApiKey.SHARE_GROUP_DESCRIBE, ShareGroupDescribeRequest(
                group_ids=[group], include_authorized_operations=False))
        g = resp.groups[0]
        last["g"] = g
        return g.error_code == 0 and len(g.members) == count and all(
            m.assignment.topic_partitions for m in g.members)
    wait_until(assigned, WAIT_S, lambda: f"{count} assigned members; saw {last.get('g')}",
               interval=0.2)
    g = last["g"]
    held = {(t.topic_name, p) for m in g.members  # type: ignore[attr-defined]
            for t in m.assignment.topic_partitions for p in t.partitions}

    def started() -> bool:
        with SimpleClient(bootstrap) as c:
            resp = c.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, DescribeShareGroupOffsetsRequest(
                groups=[DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(
                    group_id=group, topics=None)]))
        [d] = resp.groups
        return d.error_code == 0 and held <= {(t.topic_name, p.partition_index)
                                              for t in d.topics for p in t.partitions
                                              if p.error_code == 0 and p.start_offset >= 0}
    wait_until(started, WAIT_S, f"the share-partitions {sorted(held)} of {group} to start",
               interval=0.2)


def _consumer(java_tools, bootstrap: str, group: str, topic: str, *args: object
              ) -> subprocess.Popen:
    return java_tools.popen("ShareConsume", "--bootstrap-server", bootstrap, "--group", group,
                            "--topic", topic, "--first-record-ms", FIRST_RECORD_MS, *args)


def _finish(proc: subprocess.Popen, what: str) -> list[tuple[str, int, int, str]]:
    try:
        out, err = proc.communicate(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"{what} did not finish\n{out[-3000:]}\n{err[-3000:]}") from None
    assert proc.returncode == 0, f"{what} exited {proc.returncode}\n{err[-3000:]}"
    return _parse(out.splitlines())


def _described_members(bootstrap: str, group: str
                       ) -> list[tuple[str, int, list[tuple[str, list[int]]]]]:
    """The group's members as ShareGroupDescribe answers (once the group's
    records are loaded): (member id, epoch, [(topic, partitions)])."""
    def described():  # type: ignore[no-untyped-def]
        with SimpleClient(bootstrap) as c:
            resp = c.call(ApiKey.SHARE_GROUP_DESCRIBE, ShareGroupDescribeRequest(
                group_ids=[group], include_authorized_operations=False))
        [g] = resp.groups
        return g if g.error_code == 0 else None
    g = wait_until(described, WAIT_S, f"ShareGroupDescribe of {group}", interval=0.2)
    return sorted((m.member_id, m.member_epoch, [(t.topic_name, sorted(t.partitions))
                                                 for t in m.assignment.topic_partitions])
                  for m in g.members)


def _parse(lines: list[str]) -> list[tuple[str, int, int, str]]:
    out = []
    for line in lines:
        if line in ("holding", "committed", "not committed"):
            continue
        value, offset, count, action = line.split("\t")
        out.append((value, int(offset), int(count), action))
    return out


def _reap(procs: list[subprocess.Popen | ProcessLines]) -> None:
    for p in procs:
        if isinstance(p, ProcessLines):
            p.stop()  # its threads own the pipes
            continue
        if p.poll() is None:
            p.kill()
        p.communicate()


def test_members_share_one_partition_and_a_dead_members_records_come_back(
        broker_factory, java_tools):
    broker = broker_factory(OVERRIDES)
    b = broker.bootstrap
    topic, group = _name("sq"), _name("share")
    _create_topic(b, topic)
    # the holder alone first: it gets records before the live members exist
    # (once they do, nothing says it would get any before they take them all)
    holder = ProcessLines(_consumer(java_tools, b, group, topic, "--hold", "--max-records", "5"))
    procs: list[subprocess.Popen | ProcessLines] = [holder]
    try:
        _members_assigned(b, group, 1)
        values = [f"r-{i}" for i in range(60)]
        _produce(b, topic, values[:5])
        # it prints what it got, then hangs holding it (without acknowledging)
        wait_until(lambda: holder.has("holding"), WAIT_S,
                   lambda: f"the holder to get records; it printed {holder.lines}"
                   f"\n{holder.stderr()[-3000:]}")
        held = {v for v, *_ in _parse(list(holder.lines))}
        assert held
        # (a live member may get the holder's records back as its lock runs out,
        # before the rest is produced: its idle wait outlasts the others joining)
        live = [_consumer(java_tools, b, group, topic, "--max-records", "5", "--idle-ms",
                          "15000") for _ in range(2)]
        procs += live
        _members_assigned(b, group, 3)
        _produce(b, topic, values[5:])
        tool = subprocess.run([sys.executable, "-m", "samsa", "share-groups",
                               "--bootstrap-server", b, "--describe", "--group", group,
                               "--members"], capture_output=True, text=True, timeout=60,
                              cwd=REPO_ROOT)
        lines = tool.stdout.splitlines()
        assert lines[0] == "" and lines[1].split() == [
            "GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"], tool
        assert [(r.split()[0], r.split()[2], r.split()[-2:]) for r in lines[2:]] == [
            (group, "/127.0.0.1", ["1", f"{topic}:0"])] * 3, tool
        holder.stop()  # kill -9
        got = [_finish(p, f"live member {i}") for i, p in enumerate(live)]
    finally:
        _reap(procs)
    values_per_member = [[v for v, *_ in g] for g in got]
    deliveries: dict[str, list[int]] = {}
    for v, _offset, count, _ in (r for g in got for r in g):
        deliveries.setdefault(v, []).append(count)
    # every record reached a live member; both got a share
    assert set(deliveries) == set(values)
    assert all(action == "accept" for g in got for *_, action in g)
    assert all(values_per_member)
    # never to two members at once: a record delivered again (a member slower than
    # the 2 s lock on a loaded machine: at-least-once, as in Kafka) comes with a
    # higher delivery count each time, never the same one twice
    assert all(len(set(counts)) == len(counts) for counts in deliveries.values()), {
        v: c for v, c in deliveries.items() if len(set(c)) != len(c)}
    # what the dead member held came back after its lock ran out, as a redelivery
    for v, _offset, count, _ in (r for g in got for r in g):
        if v in held:
            assert count >= 2, (v, count)


def test_explicit_release_and_reject_and_a_poison_record_archived(broker_factory, java_tools):
    broker = broker_factory(OVERRIDES)
    b = broker.bootstrap
    topic, group = _name("sq"), _name("share")
    _create_topic(b, topic)
    consumer = _consumer(java_tools, b, group, topic, "--release", "poison", "--reject", "bad",
                         "--idle-ms", "3000")
    try:
        _members_assigned(b, group, 1)
        _produce(b, topic, ["ok-0", "poison-0", "bad-0", "ok-1"])
        got = _finish(consumer, "the consumer")
    finally:
        _reap([consumer])
    by_value: dict[str, list[tuple[int, str]]] = {}
    for v, _offset, count, action in got:
        by_value.setdefault(v, []).append((count, action))
    assert by_value["ok-0"] == [(1, "accept")]
    assert by_value["ok-1"] == [(1, "accept")]
    assert by_value["bad-0"] == [(1, "reject")]  # rejected: never offered again
    # released each time, offered again until the delivery-count limit (3), then archived
    assert by_value["poison-0"] == [(1, "release"), (2, "release"), (3, "release")]


def test_every_record_acknowledged_once_across_a_broker_restart(broker_factory, java_tools):
    """Acknowledgements live in __share_group_state: after a restart nothing
    acknowledged comes back, and what a member held unacknowledged does."""
    broker = broker_factory(OVERRIDES)
    b = broker.bootstrap
    topic, group = _name("sq"), _name("share")
    _create_topic(b, topic)
    first_half = [f"r-{i}" for i in range(20)]
    second_half = [f"r-{i}" for i in range(20, 40)]
    procs: list[subprocess.Popen | ProcessLines] = []
    try:
        reader = _consumer(java_tools, b, group, topic, "--idle-ms", "2500")
        procs.append(reader)
        _members_assigned(b, group, 1)
        _produce(b, topic, first_half)
        assert sorted(v for v, *_ in _finish(reader, "the first reader")) == sorted(first_half)
        holder = ProcessLines(_consumer(java_tools, b, group, topic, "--hold",
                                        "--max-records", "5"))
        procs.append(holder)
        _members_assigned(b, group, 1)
        _produce(b, topic, second_half)
        wait_until(lambda: holder.has("holding"), WAIT_S,
                   lambda: f"the holder to get records; it printed {holder.lines}"
                   f"\n{holder.stderr()[-3000:]}")
        holder.stop()  # killed: it never leaves
        before = _described_members(b, group)
        assert len(before) == 1  # the holder (the first reader left)
        broker.restart()
        # the group's member records bring the dead holder back, as Kafka's
        # load does, until its session (30 s from the load) runs out
        assert _described_members(b, group) == before
        after = _consumer(java_tools, b, group, topic, "--idle-ms", "3000")
        procs.append(after)
        got = _finish(after, "the reader after the restart")
    finally:
        _reap(procs)
    # the first half was acknowledged before the restart: never again; the
    # second half (part of it held, none acknowledged) exactly once
    assert Counter(v for v, *_ in got) == Counter(second_half)
    # the group's state as admin clients see it: start offset past everything, no lag
    with SimpleClient(b) as c:
        offsets = c.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, DescribeShareGroupOffsetsRequest(
            groups=[DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(
                group_id=group, topics=None)]))
        listed = c.call(ApiKey.LIST_GROUPS, ListGroupsRequest(states_filter=[],
                                                              types_filter=["share"]))
    [g] = offsets.groups
    [t] = g.topics
    assert (t.topic_name, [(p.partition_index, p.start_offset, p.lag, p.error_code)
                           for p in t.partitions]) == (topic, [(0, 40, 0, 0)])
    assert [(x.group_id, x.group_type) for x in listed.groups] == [(group, "share")]
    # and as kafka-share-groups prints it
    tool = subprocess.run([sys.executable, "-m", "samsa", "share-groups", "--bootstrap-server", b,
                           "--describe", "--group", group], capture_output=True, text=True,
                          timeout=60, cwd=REPO_ROOT)
    width = max(15, len(group))
    assert tool.stdout.splitlines() == [
        "",
        f"{'GROUP'.ljust(width)} {'TOPIC'.ljust(15)} {'PARTITION'.ljust(10)} "
        f"{'START-OFFSET'.ljust(13)} LAG",
        f"{group.ljust(width)} {topic.ljust(15)} {'0'.ljust(10)} {'40'.ljust(13)} 0"], tool
    tool = subprocess.run([sys.executable, "-m", "samsa", "share-groups", "--bootstrap-server", b,
                           "--list", "--state"], capture_output=True, text=True, timeout=60,
                          cwd=REPO_ROOT)
    # Stable while the restored holder's session lasts, Empty after
    assert tool.stdout.splitlines()[0] == f"{'GROUP'.ljust(width)} STATE", tool
    assert tool.stdout.splitlines()[1].split() in ([group, "Stable"], [group, "Empty"]), tool
