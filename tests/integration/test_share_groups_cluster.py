"""KIP-932 share groups in a 3-broker ZooKeeper cluster: the share-group state
lives with the share coordinator (the leader of the key's __share_group_state
partition, RF 3), so a kill -9 of the share-partition leader loses no
acknowledgement. The Java client 4.3's KafkaShareConsumer
(tests/java/ShareConsume.java) reads with explicit acknowledgements and
ends each poll with "committed" once the broker confirmed its acknowledgements
(else "not committed"); the
member killed while holding records is confluent-kafka's share consumer.
After the kill the group's new coordinator is not the share-partition's new
leader, so the lag it describes is counted to the end the leader gives it.
"""
from __future__ import annotations

import subprocess
import time
import uuid
from collections import defaultdict

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.broker.groups.log_format import partition_for
from samsa.client.blocking import SimpleClient
from samsa.protocol.messages import DescribeShareGroupOffsetsRequest, FindCoordinatorRequest
from samsa.protocol.model import ApiKey
from tests.integration.test_share_groups_java import _members_assigned
from tests.support.confluent_share_holder import start as start_holder
from tests.support.process_lines import ProcessLines
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(240)

LOCK_MS = 2000
OVERRIDES = {"share.coordinator.state.topic.num.partitions": "3",
             "share.coordinator.state.topic.replication.factor": "3",
             "group.share.record.lock.duration.ms": str(LOCK_MS),
             "group.share.heartbeat.interval.ms": "500",
             "group.share.session.timeout.ms": "30000",
             # a killed follower leaves the ISR soon, so acks=all writes go on
             "replica.lag.time.max.ms": "3000"}
WAIT_S = 90  # harness safety net, not a performance assertion
# a consumer that never gets a record exits saying so, before WAIT_S runs out
FIRST_RECORD_MS = 60_000


def _coordinator(bootstrap: str, group: str) -> int:
    """The group's coordinator (once __consumer_offsets has its leaders)."""
    def found() -> tuple[int] | None:  # (a tuple: broker 0 is a falsy id)
        with SimpleClient(bootstrap) as c:
            resp = c.call(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key=group, key_type=0),
                          highest=3)
        return (resp.node_id,) if resp.error_code == 0 else None
    return wait_until(found, WAIT_S, f"a coordinator for {group}", interval=0.2)[0]


def _started(bootstrap: str, group: str, topic: str) -> None:
    """Until the group's share-partition exists on its leader (``bootstrap``):
    from then on what is produced is delivered (share.auto.offset.reset=latest)."""
    def started() -> bool:
        with SimpleClient(bootstrap) as c:
            resp = c.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, DescribeShareGroupOffsetsRequest(
                groups=[DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(
                    group_id=group, topics=None)]))
        [g] = resp.groups
        return g.error_code == 0 and any(t.topic_name == topic and t.partitions
                                         for t in g.topics)
    wait_until(started, WAIT_S, f"the share-partition of {group} on {topic}", interval=0.2)


def _offsets(bootstrap: str, group: str, topic: str) -> tuple[int, int] | None:
    """(start offset, lag) of the group's share-partition on ``topic``, as
    DescribeShareGroupOffsets v1 answers it; None while not answered."""
    R = DescribeShareGroupOffsetsRequest
    with SimpleClient(bootstrap) as c:
        resp = c.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, R(groups=[
            R.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]), highest=1)
    [g] = resp.groups
    found = [(p.start_offset, p.lag) for t in g.topics if t.topic_name == topic
             for p in t.partitions if p.error_code == 0] if g.error_code == 0 else []
    return found[0] if found else None


def _polls(lines: list[str]) -> list[tuple[list[tuple[str, int]], bool]]:
    """The reader's polls in order: ([(value, delivery count)], confirmed).
    Each poll ends with a line of its own, confirmed or not: a poll whose
    acknowledgement died with the leader must not be taken for part of the
    next, confirmed one (its records do come again, and rightly)."""
    polls: list[tuple[list[tuple[str, int]], bool]] = []
    current: list[tuple[str, int]] = []
    for line in lines:
        if line in ("committed", "not committed"):
            polls.append((current, line == "committed"))
            current = []
        elif "\t" in line:
            value, _offset, count, _action = line.split("\t")
            current.append((value, int(count)))
    if current:
        polls.append((current, False))
    return polls


def _all_confirmed(lines: list[str], values: list[str]) -> bool:
    last: dict[str, bool] = {}
    for records, confirmed in _polls(list(lines)):
        for value, _count in records:
            last[value] = confirmed
    return all(last.get(v) for v in values)


def test_no_acknowledgement_is_lost_when_the_share_partition_leader_is_killed(
        cluster_factory, java_tools):
    cluster = cluster_factory(offsets_partitions=3, overrides=OVERRIDES)
    b = cluster.bootstrap
    topic, group = f"sq-{uuid.uuid4().hex[:8]}", f"share-{uuid.uuid4().hex[:8]}"
    # The partition is led by the group's coordinator, so share.auto.offset.reset
    # (latest) takes effect as the members are assigned, before anything is produced.
    leader = _coordinator(cluster.broker(0).bootstrap, group)
    at_leader = cluster.broker(leader).bootstrap  # ShareGroupDescribe goes to the coordinator
    # after the kill the group's coordinator is the next replica of its
    # __consumer_offsets partition (the first alive in its assignment), and
    # the share-partition's leader the other broker: its lag is asked of it
    offsets_replicas = cluster.assignment("__consumer_offsets")["partitions"][
        partition_for(group, 3)]
    next_coordinator = next(r for r in offsets_replicas if r != leader)
    others = sorted((i for i in range(3) if i != leader), key=lambda i: i == next_coordinator)
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics(
        [NewTopic(topic, 1, -1, replica_assignment=[[leader, *others]])])[topic].result(timeout=30)
    cluster.wait_for_leaders(topic, 1)
    first = [f"r-{i}" for i in range(30)]
    second: list[str] = []  # produced until the holder holds some of them
    third = [f"t-{i}" for i in range(10)]
    producer = Producer({"bootstrap.servers": b, "acks": "all", "linger.ms": 5})

    def produce(values: list[str]) -> None:
        for v in values:
            producer.produce(topic, v.encode(), partition=0)
        assert producer.flush(30) == 0

    def consumer(*args: object) -> subprocess.Popen:
        return java_tools.popen("ShareConsume", "--bootstrap-server", b, "--group", group,
                                "--topic", topic, "--first-record-ms", FIRST_RECORD_MS, *args)
    procs: list[ProcessLines] = []
    try:
        # explicit acknowledgement (a --reject prefix no record has), committed per poll
        reader = ProcessLines(consumer("--reject", "none-", "--max-records", "5",
                                       "--idle-ms", "120000"))
        procs.append(reader)
        _members_assigned(at_leader, group, 1)
        _started(at_leader, group, topic)
        produce(first)
        wait_until(lambda: set(first) <= set(reader.values()), WAIT_S,
                   "the reader to get the first records")
        # the member that dies holding records is confluent-kafka's (librdkafka
        # 2.16's ShareConsumer, tests/support/confluent_share_holder.py): what
        # it held comes back to the Java reader through the failover. Its
        # output read by a thread, so the wait's limit holds even if it never
        # prints (a readline here would block past it)
        holder = start_holder(b, group, topic)
        procs.append(holder)
        _members_assigned(at_leader, group, 2)

        topped_up = [0.0]

        def holding() -> bool:
            # thirty records, then ten more every two seconds the holder has
            # none: the reader, fetching already, may take them all before
            # the holder's first fetch
            if holder.has("holding"):
                return True
            if time.monotonic() - topped_up[0] >= 2:
                n = 30 if not second else 10
                batch = [f"r-{i}" for i in range(30 + len(second), 30 + len(second) + n)]
                produce(batch)
                second.extend(batch)
                topped_up[0] = time.monotonic()
            return False
        wait_until(holding, WAIT_S, "the holder to get records", interval=0.05)
        holder.stop()  # what it holds is acquired and never acknowledged
        before_kill = len(reader.lines)
        cluster.kill(leader)  # the share-partition leader (and the group's coordinator)
        # Records produced once the new leader serves, until the reader's
        # acknowledgement of them is confirmed. A share-partition hands out its
        # lowest available offsets first, and the new leader reads the state
        # from the coordinator (acquisitions are not kept): whatever of the
        # first records was not acknowledged -- the holder's, and the reader's
        # whose acknowledgement died with the leader -- comes again before
        # these. (A poll whose acknowledgement was written but whose
        # confirmation died with the leader stays unconfirmed and never comes
        # again: so the wait is on these, not on every record's last delivery.)
        produce(third)
        wait_until(lambda: _all_confirmed(reader.lines, third), WAIT_S,
                   "the records produced after the kill acknowledged")
        lines = reader.stop()
        coordinator = _coordinator(cluster.broker(others[0]).bootstrap, group)
        assert (coordinator, cluster.leaders(topic)[0]) == (next_coordinator, others[0])
        # the lag: the records from the start offset to the end not yet
        # acknowledged; -1 (unknown) was answered for a leader elsewhere
        end = len(first) + len(second) + len(third)
        start, lag = wait_until(
            lambda: _offsets(cluster.broker(coordinator).bootstrap, group, topic), WAIT_S,
            "the share-partition's offsets from the new coordinator", interval=0.2)
        assert 0 <= start <= end and 0 <= lag <= end - start, (start, lag, end)
    finally:
        for p in procs:
            p.stop()
    polls = _polls(lines)
    seen: dict[str, list[tuple[int, bool]]] = defaultdict(list)  # value -> [(count, confirmed)]
    for records, confirmed in polls:
        for value, count in records:
            seen[value].append((count, confirmed))
    # every record in the end, none acknowledged twice: once a poll's
    # acknowledgement is confirmed, its records never come again (so what
    # came again -- the holder's records, and the reader's whose
    # acknowledgement died with the leader -- had been acquired, not acknowledged)
    assert set(seen) == set(first) | set(second) | set(third)
    twice = {v: s for v, s in seen.items() if any(c for _, c in s[:-1])}
    assert not twice, f"acknowledged records delivered again: {twice}"
    assert before_kill < len(lines)  # the reader went on after the kill
