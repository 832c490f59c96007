"""`samsa console-producer`, `console-consumer`, `consumer-groups --reset-offsets
/ --delete` and `topics --describe` filters: Kafka's names, flags and output,
run as a user runs them, against a real broker, checked with librdkafka."""
from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.tools.console_consumer import Formatter
from samsa.tools.console_producer import (LineFormat, LineError, ProducerError, RetryPolicy,
                                          Sender, murmur2)
from samsa.client.blocking import Cluster, SimpleClient
from samsa.protocol.messages import ListGroupsRequest, MetadataRequest, MetadataResponse
from tests.support.broker_process import REPO_ROOT
from tests.support.waiting import wait_until

MR = MetadataResponse


@pytest.fixture
def broker(module_broker):
    """One broker for the module (tests/conftest.py): every test here uses topics and groups
    of names of its own (--all-topics resets cover the group's own topics only)."""
    return module_broker


def _samsa(*args, input=None):
    return subprocess.run([sys.executable, "-m", "samsa", *args], capture_output=True,
                          text=True, timeout=90, cwd=REPO_ROOT, input=input)


def _topic(broker, name, partitions=1, **config):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config)])[name].result(30)


def _produce(broker, topic, text, *args):
    p = _samsa("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
               *args, input=text)
    assert p.returncode == 0, p.stderr
    return p


def _consume(broker, topic, *args):
    p = _samsa("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", topic,
               *args)
    assert p.returncode == 0, p.stderr
    return p


def _groups(broker, *args):
    return _samsa("consumer-groups", "--bootstrap-server", broker.bootstrap, *args)


def _committed(broker, group, topic, partitions):
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        got = c.committed([TopicPartition(topic, p) for p in partitions], timeout=30)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def _commit(broker, group, topic, offsets):
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()],
                 asynchronous=False)
    finally:
        c.close()


def _offsets_partition(group, partitions):
    """Kafka's GroupMetadataManager.partitionFor: Utils.abs(String.hashCode) % partitions."""
    h = 0
    units = group.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# ------------------------------------------------------------------ pure parts

def test_murmur2_matches_kafkas_partitioner():
    # values Kafka's own tests give for its murmur2
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"abc") == 479470107


def test_line_format_and_default_message_format():
    fmt = LineFormat.from_properties({"parse.key": "true", "key.separator": "::",
                                      "null.marker": "NULL"})
    assert fmt.parse(b"k::v::w", 1) == (b"k", b"v::w")
    assert fmt.parse(b"NULL::v", 2) == (None, b"v")
    with pytest.raises(LineError, match="No key separator found on line number 3: 'x'"):
        fmt.parse(b"x", 3)
    out = Formatter.from_properties({"print.timestamp": "true", "print.key": "true",
                                     "print.partition": "true", "print.offset": "true",
                                     "print.headers": "true"})
    assert out.format(2, 7, 0, 1234, [("h", b"1")], None, b"v") == \
        b"CreateTime:1234\tPartition:2\tOffset:7\th:1\tnull\tv\n"
    assert Formatter().format(0, 0, 1, 5, [], b"k", None) == b"null\n"


def test_describe_filters_select_partitions(capsys):
    from types import SimpleNamespace

    from samsa.tools.topics import _partition_filter, _print_partitions

    topic = MR.MetadataResponseTopic(name="t", partitions=[
        MR.MetadataResponsePartition(partition_index=0, leader_id=1, replica_nodes=[1, 2, 3],
                                     isr_nodes=[1, 2, 3]),
        MR.MetadataResponsePartition(partition_index=1, leader_id=2, replica_nodes=[1, 2, 3],
                                     isr_nodes=[2, 3]),
        MR.MetadataResponsePartition(partition_index=2, leader_id=-1, replica_nodes=[1],
                                     isr_nodes=[])])
    for under, unavailable in ((True, False), (False, True)):
        keep = _partition_filter(SimpleNamespace(under_replicated_partitions=under,
                                                 unavailable_partitions=unavailable))
        _print_partitions(topic, [p for p in topic.partitions if keep(p)])
    # a partition with an empty ISR is under-replicated as well as unavailable
    elr = "\tElr: N/A\tLastKnownElr: N/A"
    no_leader = "\tTopic: t\tPartition: 2\tLeader: none\tReplicas: 1\tIsr: " + elr
    assert capsys.readouterr().out.splitlines() == [
        "\tTopic: t\tPartition: 1\tLeader: 2\tReplicas: 1,2,3\tIsr: 2,3" + elr, no_leader,
        no_leader]


# ------------------------------------------------------------------ against a broker

def test_round_trip_with_keys_separators_and_timestamps(broker):
    _topic(broker, "rt")
    before = int(time.time() * 1000)
    _produce(broker, "rt", "a:1\nb:two:2\n\nno-key\n:empty-key\nlast:no-newline",
             "--property", "parse.key=true", "--property", "key.separator=:",
             "--property", "ignore.error=true", "--producer-property", "acks=all")
    after = int(time.time() * 1000)
    p = _consume(broker, "rt", "--from-beginning", "--max-messages", "6",
                 "--property", "print.key=true", "--property", "print.timestamp=true",
                 "--property", "key.separator=|")
    lines = p.stdout.splitlines()
    assert [line.split("|", 1)[1] for line in lines] == [
        "a|1", "b|two:2", "null|", "null|no-key", "|empty-key", "last|no-newline"]
    for line in lines:
        ts = int(re.fullmatch(r"CreateTime:(\d+)\|.*", line).group(1))
        assert before <= ts <= after
    assert p.stderr.strip().splitlines()[-1] == "Processed a total of 6 messages"
    # the default format: values only, one per line
    p = _consume(broker, "rt", "--from-beginning", "--max-messages", "2")
    assert p.stdout.splitlines() == ["1", "two:2"]


def test_keys_land_where_librdkafka_puts_them(broker):
    _topic(broker, "ours", partitions=5)
    _topic(broker, "theirs", partitions=5)
    keys = [f"key-{i}" for i in range(30)]
    _produce(broker, "ours", "".join(f"{k}\tv\n" for k in keys), "--property", "parse.key=true")
    producer = Producer({"bootstrap.servers": broker.bootstrap,
                         "partitioner": "murmur2_random"})  # the Java client's partitioner
    for k in keys:
        producer.produce("theirs", b"v", key=k.encode())
    assert producer.flush(30) == 0

    def placement(topic):
        p = _consume(broker, topic, "--from-beginning", "--max-messages", str(len(keys)),
                     "--property", "print.key=true", "--property", "print.partition=true",
                     "--property", "print.value=false")
        return dict(reversed(line.split("\t")) for line in p.stdout.splitlines())
    ours = placement("ours")
    assert ours == placement("theirs")
    assert len(set(ours.values())) > 1


def test_reads_what_librdkafka_wrote(broker):
    _topic(broker, "lib", partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(6):
        producer.produce("lib", f"v{i}".encode(), key=None if i == 0 else f"k{i}".encode(),
                         partition=i % 2, timestamp=1_000_000 + i, headers=[("h", b"x")])
    assert producer.flush(30) == 0
    p = _consume(broker, "lib", "--from-beginning", "--max-messages", "6",
                 "--property", "print.key=true", "--property", "print.timestamp=true",
                 "--property", "print.partition=true", "--property", "print.offset=true",
                 "--property", "print.headers=true")
    assert sorted(p.stdout.splitlines()) == sorted(
        f"CreateTime:{1_000_000 + i}\tPartition:{i % 2}\tOffset:{i // 2}\th:x\t"
        f"{'null' if i == 0 else f'k{i}'}\tv{i}" for i in range(6))
    p = _consume(broker, "lib", "--partition", "1", "--offset", "1", "--max-messages", "2")
    assert p.stdout.splitlines() == ["v3", "v5"]
    # Without --from-beginning a consumer starts at the end: the first record it
    # prints is one written after it started (written until it prints one, since
    # when it has found the end is not seen from here), never one of the six.
    proc = subprocess.Popen([sys.executable, "-m", "samsa", "console-consumer",
                             "--bootstrap-server", broker.bootstrap, "--topic", "lib",
                             "--max-messages", "1", "--timeout-ms", "30000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    try:
        def printed_one():
            producer.produce("lib", b"late", partition=0)
            producer.flush(30)
            return proc.poll() is not None
        wait_until(printed_one, 60, "the consumer to print a record", interval=0.2)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and out == "late\n", (out, err)


def test_acks_zero_and_compression(broker):
    _topic(broker, "fast")
    _produce(broker, "fast", "".join(f"{i}\n" for i in range(100)),
             "--producer-property", "acks=0", "--compression-codec", "lz4")
    p = _consume(broker, "fast", "--from-beginning", "--max-messages", "100",
                 "--timeout-ms", "20000")
    assert p.stdout.splitlines() == [str(i) for i in range(100)]


def test_group_resumes_where_the_last_run_stopped(broker):
    _topic(broker, "resume", partitions=2)
    _produce(broker, "resume", "".join(f"k{i}\tv{i}\n" for i in range(10)),
             "--property", "parse.key=true")
    first = _consume(broker, "resume", "--group", "console", "--from-beginning",
                     "--max-messages", "4").stdout.splitlines()
    assert len(first) == 4
    second = _consume(broker, "resume", "--group", "console", "--max-messages", "6",
                      "--timeout-ms", "30000").stdout.splitlines()
    assert sorted(first + second) == sorted(f"v{i}" for i in range(10))
    committed = _committed(broker, "console", "resume", [0, 1])
    assert sum(committed.values()) == 10
    # Committed offsets win over --from-beginning: the first record read is one
    # written after the commit, never one read before it.
    _produce(broker, "resume", "k10\tafter-the-commit\n", "--property", "parse.key=true")
    third = _consume(broker, "resume", "--group", "console", "--from-beginning",
                     "--max-messages", "1", "--timeout-ms", "30000")
    assert third.stdout == "after-the-commit\n"


def test_ctrl_c_commits_and_reports(broker):
    _topic(broker, "sigint")
    _produce(broker, "sigint", "".join(f"{i}\n" for i in range(5)))
    proc = subprocess.Popen([sys.executable, "-m", "samsa", "console-consumer",
                             "--bootstrap-server", broker.bootstrap, "--topic", "sigint",
                             "--group", "interrupted", "--from-beginning"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO_ROOT)
    try:
        seen = b""
        deadline = time.monotonic() + 60
        while seen.count(b"\n") < 5 and time.monotonic() < deadline:
            if select.select([proc.stdout], [], [], 1)[0]:
                seen += os.read(proc.stdout.fileno(), 4096)
        assert seen.splitlines() == [str(i).encode() for i in range(5)]
        proc.send_signal(signal.SIGINT)  # while it long-polls for more
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and b"Traceback" not in err
    assert err.decode().strip().splitlines()[-1] == "Processed a total of 5 messages"
    assert _committed(broker, "interrupted", "sigint", [0]) == {0: 5}


def test_ctrl_c_between_printing_and_counting_a_record(broker, capsys):
    """SIGINT right after a record went out on stdout (the window in which the
    test above used to see 5 lines and a report of 4): the record is counted
    and committed, the ones after it are neither printed nor committed."""
    import argparse

    from samsa.tools import console_consumer as cc
    from samsa.client.blocking import run_cluster_tool
    _topic(broker, "sigint-window")
    _produce(broker, "sigint-window", "".join(f"{i}\n" for i in range(5)))

    class Out:
        def __init__(self):
            self.lines = []

        def write(self, data):
            self.lines.append(data)
            if len(self.lines) == 3:
                os.kill(os.getpid(), signal.SIGINT)  # handled before write returns to the loop

        def flush(self):
            pass

    out, handler = Out(), signal.getsignal(signal.SIGINT)
    args = argparse.Namespace(topic="sigint-window", from_beginning=True, partition=None,
                              offset=None, max_messages=None, timeout_ms=None, group="window")
    code = run_cluster_tool(cc.PROG, broker.bootstrap,
                            lambda cluster: cc._consume(cluster, args, cc.Formatter(), out))
    assert code == 0 and out.lines == [b"0\n", b"1\n", b"2\n"]
    assert capsys.readouterr().err.strip().splitlines()[-1] == "Processed a total of 3 messages"
    assert _committed(broker, "window", "sigint-window", [0]) == {0: 3}
    assert signal.getsignal(signal.SIGINT) is handler


def test_a_call_cut_short_does_not_poison_the_connection(broker):
    """An exception after the answer's bytes left the socket but before they
    were parsed (Ctrl-C in the old console consumer) loses them; the next call
    must not take another request's answer for its own."""
    req = MetadataRequest(allow_auto_topic_creation=False, topics=[])
    with SimpleClient(broker.bootstrap) as client:
        receive_frame = client.core.receive_frame

        def interrupted(frame):
            client.core.receive_frame = receive_frame
            raise KeyboardInterrupt

        client.core.receive_frame = interrupted
        with pytest.raises(KeyboardInterrupt):
            client.call(3, req)
        assert [b.port for b in client.call(3, req).brokers] == [broker.port]


def test_reset_offsets_dry_run_and_execute(broker):
    _topic(broker, "rs", partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("rs", b"v", partition=i % 2, timestamp=1_000_000 + i)
    assert producer.flush(30) == 0
    _commit(broker, "rs-group", "rs", {0: 4, 1: 3})

    p = _groups(broker, "--group", "rs-group", "--reset-offsets", "--to-earliest",
                "--topic", "rs", "--dry-run")
    assert p.returncode == 0, p.stderr
    assert [line.split() for line in p.stdout.strip().splitlines()] == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
        ["rs-group", "rs", "0", "0"], ["rs-group", "rs", "1", "0"]]
    assert _committed(broker, "rs-group", "rs", [0, 1]) == {0: 4, 1: 3}

    p = _groups(broker, "--group", "rs-group", "--reset-offsets", "--to-latest",
                "--topic", "rs")  # neither flag: a dry run, with a warning
    assert p.returncode == 0 and "WARN" in p.stderr and "--execute" in p.stderr
    assert _committed(broker, "rs-group", "rs", [0, 1]) == {0: 4, 1: 3}

    p = _groups(broker, "--group", "rs-group", "--reset-offsets", "--shift-by", "-2",
                "--topic", "rs:1", "--execute")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split()[-4:] == ["rs-group", "rs", "1", "1"]
    assert _committed(broker, "rs-group", "rs", [0, 1]) == {0: 4, 1: 1}

    p = _groups(broker, "--group", "rs-group", "--reset-offsets", "--to-offset", "99",
                "--all-topics", "--execute")
    assert p.returncode == 0 and "Value will be set to 5" in p.stderr
    assert _committed(broker, "rs-group", "rs", [0, 1]) == {0: 5, 1: 5}

    # partition 0 holds timestamps 1_000_000, +2, +4...: +3 is at its offset 2
    p = _groups(broker, "--group", "rs-group", "--reset-offsets", "--to-datetime",
                "1970-01-01T00:16:40.003Z", "--all-topics", "--execute")
    assert p.returncode == 0, p.stderr
    assert _committed(broker, "rs-group", "rs", [0, 1]) == {0: 2, 1: 1}

    # a group that has never committed may be given offsets too
    p = _groups(broker, "--group", "fresh", "--reset-offsets", "--to-latest", "--topic", "rs",
                "--execute")
    assert p.returncode == 0, p.stderr
    assert _committed(broker, "fresh", "rs", [0, 1]) == {0: 5, 1: 5}


def test_reset_and_delete_refused_while_a_member_is_active(broker):
    _topic(broker, "busy")
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "busy-group",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["busy"])
    try:
        deadline = time.monotonic() + 60
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert consumer.assignment()
        p = _groups(broker, "--group", "busy-group", "--reset-offsets", "--to-earliest",
                    "--all-topics", "--execute")
        assert p.returncode == 1
        assert p.stderr.strip() == ("Error: Assignments can only be reset if the group "
                                    "'busy-group' is inactive, but the current state is Stable.")
        p = _groups(broker, "--delete", "--group", "busy-group")
        assert p.returncode == 1 and "NON_EMPTY_GROUP" in p.stderr
        # a console consumer's simple commit is refused while the group has members
        _produce(broker, "busy", "x\n")
        p = _samsa("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", "busy",
                   "--group", "busy-group", "--from-beginning", "--max-messages", "1")
        assert p.returncode == 1 and "committing offsets of group busy-group" in p.stderr
        assert "Traceback" not in p.stderr
    finally:
        consumer.close()
    p = _groups(broker, "--delete", "--group", "busy-group")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == ("Deletion of requested consumer groups ('busy-group') "
                                "was successful.")
    p = _groups(broker, "--describe", "--group", "busy-group")
    assert p.returncode == 1 and "does not exist" in p.stderr
    p = _groups(broker, "--delete", "--group", "busy-group")
    assert p.returncode == 1 and "GROUP_ID_NOT_FOUND" in p.stderr


class _Clock:
    """The producer's clock, moved on by its sleeps: its retries are counted, not waited."""

    def __init__(self, on_sleep=lambda sleeps: None):
        self.now, self.sleeps, self._on_sleep = 0.0, 0, on_sleep

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1
        self._on_sleep(self.sleeps)


def _sender(broker, topic, clock, **retry):
    cluster = Cluster(SimpleClient(broker.bootstrap))
    return cluster, Sender(cluster, topic, acks=-1, codec=0, retry=RetryPolicy(**retry),
                           clock=clock, sleep=clock.sleep)


def test_a_retriable_error_is_retried_until_the_delivery_timeout(broker):
    """Too few replicas in sync (min.insync.replicas 2 of one) is retriable: the
    producer sends again, backing off, until delivery.timeout.ms, as Kafka's;
    once the topic takes acks=all again the records go in."""
    _topic(broker, "few-in-sync", **{"min.insync.replicas": "2"})
    clock = _Clock()
    cluster, sender = _sender(broker, "few-in-sync", clock, delivery_timeout_s=30.0)
    try:
        with pytest.raises(ProducerError, match="NOT_ENOUGH_REPLICAS"):
            sender.send({0: [(None, b"lost", (), 0)]})
        # 100 ms doubling to 1 s (±20%) fills 30 s with about thirty sends; the
        # last error is final once the deadline has passed, not before
        assert clock.sleeps >= 20 and clock.now == pytest.approx(30.0)

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})

        def allow_one_replica(sleeps):
            if sleeps == 8:  # past the five sends the tool used to give up after
                from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry,
                                                   ConfigResource, ResourceType)
                res = ConfigResource(ResourceType.TOPIC, "few-in-sync", incremental_configs=[
                    ConfigEntry("min.insync.replicas", "1",
                                incremental_operation=AlterConfigOpType.SET)])
                admin.incremental_alter_configs([res])[res].result(30)
        cluster.close()
        clock = _Clock(allow_one_replica)
        cluster, sender = _sender(broker, "few-in-sync", clock)
        sender.send({0: [(None, b"kept", (), 0)]})
        assert clock.sleeps >= 8
    finally:
        cluster.close()
    p = _samsa("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic",
               "few-in-sync", "--from-beginning", "--max-messages", "1", "--timeout-ms", "20000")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["kept"]


def test_broker_errors_are_one_line(broker):
    _topic(broker, "small", **{"max.message.bytes": "200"})
    p = _samsa("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", "small",
               input="x" * 1000 + "\n")
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.count("\n") == 1 and "MESSAGE_TOO_LARGE" in p.stderr
    p = _samsa("console-producer", "--bootstrap-server", broker.bootstrap, "--topic", "small",
               "--property", "parse.key=true", input="no separator\n")
    assert p.returncode == 1
    assert p.stderr.strip().endswith("No key separator found on line number 1: 'no separator'")
    p = _samsa("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", "nope",
               "--timeout-ms", "100")
    assert p.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in p.stderr
    assert "Traceback" not in p.stderr
    p = _samsa("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", "small",
               "--partition", "3")
    assert p.returncode == 1 and "no partition 3" in p.stderr
    p = _groups(broker, "--group", "g", "--reset-offsets", "--to-earliest", "--topic", "nope")
    assert p.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in p.stderr
    p = _samsa("topics", "--bootstrap-server", broker.bootstrap, "--describe",
               "--under-replicated-partitions")
    assert p.returncode == 0 and p.stdout == ""  # one healthy broker: nothing to report
    p = _samsa("topics", "--bootstrap-server", broker.bootstrap, "--describe", "--topic",
               "small", "--unavailable-partitions")
    assert p.returncode == 0 and p.stdout == ""


@pytest.mark.integration
@pytest.mark.parametrize("args", [
    ("console-producer", "--topic", "t"),
    ("console-consumer", "--topic", "t", "--from-beginning"),
    ("consumer-groups", "--group", "g", "--reset-offsets", "--to-earliest", "--all-topics"),
    ("consumer-groups", "--delete", "--group", "g"),
])
def test_a_broker_that_is_down_is_one_line(args):
    p = _samsa(args[0], "--bootstrap-server", "127.0.0.1:1", *args[1:], input="x\n")
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert "cannot reach the broker at 127.0.0.1:1" in p.stderr


@pytest.mark.integration
@pytest.mark.parametrize("args, message", [
    (("console-consumer", "--topic", "t", "--offset", "5"), "partition is required"),
    (("console-consumer", "--topic", "t", "--partition", "0", "--offset", "soon"),
     "expected earliest, latest or an offset"),
    (("console-producer", "--topic", "t", "--producer-property", "acks=7"), "acks must be"),
    (("console-producer", "--topic", "t", "--property", "parse.key"), "expects key=value"),
    (("console-producer", "--topic", "t", "--producer-property", "delivery.timeout.ms=soon"),
     "delivery.timeout.ms must be"),
    (("consumer-groups", "--group", "g", "--reset-offsets", "--all-topics"), "needs one of"),
    (("consumer-groups", "--group", "g", "--reset-offsets", "--to-latest"), "--all-topics"),
    (("consumer-groups", "--group", "g", "--reset-offsets", "--to-datetime", "yesterday",
      "--all-topics"), "expected a date"),
    (("topics", "--list", "--unavailable-partitions"), "go with --describe"),
])
def test_a_bad_flag_is_one_error_line(args, message):
    p = _samsa(args[0], "--bootstrap-server", "127.0.0.1:1", *args[1:])
    assert p.returncode == 2 and "Traceback" not in p.stderr
    errors = [line for line in p.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and message in errors[0]


@pytest.mark.integration
def test_a_cluster_is_reached_through_one_broker(tmp_path):
    """Three brokers (ZooKeeper mode), partitions led by each of them, the
    tools given one broker's address: records go to and come from every
    leader, the group's offsets to its coordinator."""
    import shutil

    from tests.support.cluster import Cluster
    from tests.support.waiting import wait_until
    from tests.support.zookeeper import zookeeper_installed

    if not zookeeper_installed():
        pytest.fail("ZooKeeper is not installed (scripts/setup.sh --test installs it)")
    cluster = Cluster(tmp_path / "cluster", size=3, offsets_partitions=6)
    try:
        cluster.start()
        one = cluster.broker(0).bootstrap
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("spread", 6, 1)])["spread"].result(30)
        # created is not yet led: broker 0 learns the topic, and each leader takes
        # its role up, a moment after the controller writes it to ZooKeeper
        cluster.wait_until_led("spread", 6)

        def describe(*extra):
            p = _samsa("topics", "--bootstrap-server", one, "--describe", "--topic", "spread",
                       *extra)
            assert p.returncode == 0, p.stderr
            return [line for line in p.stdout.splitlines() if "Partition:" in line]
        leaders = {int(re.search(r"Partition: (\d+)", line).group(1)):
                   int(re.search(r"Leader: (\d+)", line).group(1)) for line in describe()}
        assert len(set(leaders.values())) > 1

        p = subprocess.run([sys.executable, "-m", "samsa", "console-producer",
                            "--bootstrap-server", one, "--topic", "spread",
                            "--property", "parse.key=true"], capture_output=True, text=True,
                           timeout=90, cwd=REPO_ROOT,
                           input="".join(f"k{i}\tv{i}\n" for i in range(30)))
        assert p.returncode == 0, p.stderr
        p = subprocess.run([sys.executable, "-m", "samsa", "console-consumer",
                            "--bootstrap-server", one, "--topic", "spread", "--group", "spread-g",
                            "--from-beginning", "--max-messages", "30"],
                           capture_output=True, text=True, timeout=90, cwd=REPO_ROOT)
        assert p.returncode == 0, p.stderr
        assert sorted(p.stdout.splitlines()) == sorted(f"v{i}" for i in range(30))
        p = _samsa("consumer-groups", "--bootstrap-server", one, "--describe", "--group",
                   "spread-g")
        assert p.returncode == 0, p.stderr
        rows = [line.split() for line in p.stdout.strip().splitlines()[1:]]
        assert len(rows) == 6 and sum(int(r[3]) for r in rows) == 30

        # each broker's ListGroups names only the groups it coordinates: --list asks them all
        coordinators = cluster.wait_for_leaders("__consumer_offsets", 6)
        groups = {}  # group id -> its coordinator, one group per broker leading offsets
        for i in range(1000):
            leader = coordinators[_offsets_partition(f"listed-{i}", 6)]
            if leader not in groups.values():
                groups[f"listed-{i}"] = leader
        assert len(set(groups.values())) > 1, coordinators
        for g in groups:
            _commit(cluster.broker(0), g, "spread", {0: 1})
        with SimpleClient(one) as c:  # the broker given alone does not know them all
            alone = {g.group_id for g in c.call(16, ListGroupsRequest(
                states_filter=[], types_filter=[])).groups}
        assert not set(groups) <= alone
        p = _groups(cluster.broker(0), "--list")
        assert p.returncode == 0, p.stderr
        assert sorted(p.stdout.split()) == sorted([*groups, "spread-g"])

        victim = max(set(leaders.values()) - {0})  # not the broker the tools are given
        cluster.kill(victim)
        gone = sorted(p for p, leader in leaders.items() if leader == victim)
        # the controller writes one partition state at a time: wait for all of them
        unavailable = wait_until(
            lambda: (lambda lines: lines if len(lines) >= len(gone) else None)(
                describe("--unavailable-partitions")),
            timeout=60, what=f"partitions led by broker {victim} to lose it")
        assert [int(re.search(r"Partition: (\d+)", line).group(1))
                for line in unavailable] == gone
        assert all("Leader: none" in line for line in unavailable)
    finally:
        try:
            cluster.stop()
        finally:
            shutil.rmtree(tmp_path / "cluster", ignore_errors=True)
