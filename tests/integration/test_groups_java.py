"""Consumer groups driven by the Apache Kafka Java client (what Kafka's own tools run on):
our ConsoleConsumer with --group (subscribe + commitSync of exactly what it printed)
and the ConsumerGroups admin program (kafka-consumer-groups look-alike).
"""
from __future__ import annotations

import re
import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(240)

OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "5"}
SESSION = ["--consumer-property", "session.timeout.ms=6000",
           "--consumer-property", "heartbeat.interval.ms=500"]
WAIT_S = 60  # harness safety net, not a performance assertion


def _name(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def _create_topic(bootstrap, topic, partitions):
    admin = _admin(bootstrap)  # keep the handle alive until the result is in
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)


def _produce(bootstrap, topic, values_by_partition):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for part, values in values_by_partition.items():
        for v in values:
            p.produce(topic, v.encode(), partition=part)
    assert p.flush(30) == 0


def _phase(tag, partitions, per_partition):
    return {p: [f"{tag}-p{p}-{i}" for i in range(per_partition)] for p in range(partitions)}


def _assignment(bootstrap, group):
    """{member_id: set(partitions)} from DescribeGroups (confluent admin)."""
    admin = _admin(bootstrap)
    d = admin.describe_consumer_groups([group])[group].result(timeout=30)
    return {m.member_id: {tp.partition for tp in m.assignment.topic_partitions}
            for m in d.members}


def _wait_assignment(bootstrap, group, cond, what):
    last = {}

    def reached():
        last["a"] = a = _assignment(bootstrap, group)
        return (a,) if cond(a) else None    # a tuple: an empty assignment is an answer too

    return wait_until(reached, WAIT_S, lambda: f"{what}; assignment {last.get('a')}",
                      interval=0.1)[0]


def _parse(lines):
    """ConsoleConsumer lines "Partition:N<TAB>value" -> [(N, value)]."""
    out = []
    for line in lines:
        m = re.fullmatch(r"Partition:(\d+)\t(.*)", line)
        assert m, f"unexpected output line {line!r}"
        out.append((int(m.group(1)), m.group(2)))
    return out


def _finish(proc, what):
    try:
        out, err = proc.communicate(timeout=WAIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"{what} did not finish\n--- stdout ---\n{out[-3000:]}\n"
                             f"--- stderr ---\n{err[-3000:]}") from None
    assert proc.returncode == 0, f"{what} exited {proc.returncode}\n{err[-3000:]}"
    return out.splitlines()


def test_console_consumers_split_leave_and_resume_after_restarts(broker_factory, java_tools):
    broker = broker_factory(OVERRIDES)
    b = broker.bootstrap
    topic, group = _name("cc"), _name("console")
    _create_topic(b, topic, 6)

    def consumer(max_messages):
        return java_tools.popen("ConsoleConsumer", "--bootstrap-server", b, "--topic", topic,
                                "--group", group, "--from-beginning", "--property",
                                "print.partition=true", "--max-messages", max_messages, *SESSION)

    # 1. two members split six partitions 3 and 3
    first = consumer(30 + 60)  # its 3 partitions of phase 1, then all 6 of phase 2
    second = consumer(30)      # its 3 partitions of phase 1, then it leaves
    procs = [first, second]
    try:
        split = _wait_assignment(b, group, lambda a: len(a) == 2 and all(
            len(ps) == 3 for ps in a.values()), "a 3/3 split")
        assert set().union(*split.values()) == set(range(6))
        phase1 = _phase("one", 6, 10)
        _produce(b, topic, phase1)
        got2 = _parse(_finish(second, "second consumer"))
        parts2 = {p for p, _ in got2}
        assert parts2 in list(split.values())
        assert sorted(v for _, v in got2) == sorted(v for p in parts2 for v in phase1[p])

        # 2. the second left (LeaveGroup on close): the first owns all six
        _wait_assignment(b, group, lambda a: len(a) == 1 and list(a.values())[0] == set(range(6)),
                         "the remaining member to own all 6 partitions")
        phase2 = _phase("two", 6, 10)
        _produce(b, topic, phase2)
        got1 = _parse(_finish(first, "first consumer"))
        expected1 = [v for p in set(range(6)) - parts2 for v in phase1[p]]
        expected1 += [v for vs in phase2.values() for v in vs]
        assert sorted(v for _, v in got1) == sorted(expected1)  # nothing twice, nothing lost

        # 3. consumer and broker restart: resume exactly after the committed offsets
        phase3 = _phase("three", 6, 5)
        _produce(b, topic, phase3)
        broker.restart()
        phase4 = _phase("four", 6, 5)
        _produce(b, topic, phase4)
        third = consumer(60)
        procs.append(third)
        got3 = _parse(_finish(third, "consumer after the restart"))
        assert sorted(v for _, v in got3) == sorted(
            v for ph in (phase3, phase4) for vs in ph.values() for v in vs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()


def _rows(result, group):
    """--describe output rows for the group: {partition: (current, end, lag, consumer, host, client)}."""
    rows = {}
    for line in result.lines[1:]:
        f = line.split()
        assert f[0] == group, line
        rows[int(f[2])] = tuple(f[3:])
    return rows


def test_consumer_groups_tool_list_describe_reset_delete(broker_factory, java_tools):
    broker = broker_factory(OVERRIDES)
    b = broker.bootstrap
    topic, group = _name("cg"), _name("tool")
    _create_topic(b, topic, 3)
    _produce(b, topic, _phase("r", 3, 10))

    c = Consumer({"bootstrap.servers": b, "group.id": group, "client.id": "described",
                  "enable.auto.commit": False, "session.timeout.ms": 10000,
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        end = time.monotonic() + WAIT_S
        while len(c.assignment()) < 3:
            assert time.monotonic() < end, "no assignment"
            c.poll(0.1)
        c.commit(offsets=[TopicPartition(topic, p, 4 + p) for p in range(3)], asynchronous=False)

        listed = java_tools.consumer_groups(b, "--list").check()
        assert group in listed.lines

        described = java_tools.consumer_groups(b, "--describe", "--group", group).check()
        rows = _rows(described, group)
        assert set(rows) == {0, 1, 2}
        member_ids = set(_assignment(b, group))
        for p, (current, log_end, lag, consumer_id, host, client_id) in rows.items():
            assert (int(current), int(log_end), int(lag)) == (4 + p, 10, 6 - p)
            assert consumer_id in member_ids
            assert host == "/127.0.0.1"
            assert client_id == "described"

        state = java_tools.consumer_groups(b, "--describe", "--group", group, "--state").check()
        fields = state.lines[1].split()
        assert fields[0] == group
        assert fields[2:] == ["range", "Stable", "1"]
    finally:
        c.close()

    reset = java_tools.consumer_groups(b, "--reset-offsets", "--group", group, "--topic", topic,
                                       "--to-earliest", "--execute").check()
    assert reset.lines[1:] == [f"{group} {topic} {p} 0" for p in range(3)]
    described = java_tools.consumer_groups(b, "--describe", "--group", group).check()
    assert _rows(described, group) == {p: ("0", "10", "10", "-", "-", "-") for p in range(3)}

    java_tools.consumer_groups(b, "--delete", "--group", group).check()
    assert group not in java_tools.consumer_groups(b, "--list").check().lines


def test_crashed_console_consumer_is_expired_after_its_session_timeout(broker_factory,
                                                                        java_tools):
    """A member that dies without LeaveGroup (SIGKILL) is evicted when its session
    timeout passes; the survivor then owns every partition and reads all of them."""
    broker = broker_factory(OVERRIDES)
    b = broker.bootstrap
    topic, group = _name("crash"), _name("console")
    _create_topic(b, topic, 6)

    def consumer(max_messages):
        return java_tools.popen("ConsoleConsumer", "--bootstrap-server", b, "--topic", topic,
                                "--group", group, "--from-beginning", "--property",
                                "print.partition=true", "--max-messages", max_messages, *SESSION)

    survivor, victim = consumer(60), consumer(60)
    try:
        _wait_assignment(b, group, lambda a: len(a) == 2 and all(
            len(ps) == 3 for ps in a.values()), "a 3/3 split")
        victim.kill()
        victim.communicate()
        _wait_assignment(b, group, lambda a: len(a) == 1 and list(a.values())[0] == set(range(6)),
                         "the survivor to own all 6 partitions")
        records = _phase("after", 6, 10)
        _produce(b, topic, records)
        got = _parse(_finish(survivor, "surviving consumer"))
        assert sorted(v for _, v in got) == sorted(v for vs in records.values() for v in vs)
    finally:
        for p in (survivor, victim):
            if p.poll() is None:
                p.kill()
                p.communicate()
