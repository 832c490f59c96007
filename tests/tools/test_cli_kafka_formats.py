"""The `samsa` tools print what Kafka's tools print for the same state, byte for
byte where Kafka's format is fixed, and fail the same way everywhere: broker
down, unknown topic, bad flag -> one line, a non-zero exit, no traceback.

The expected lines are written from Kafka's tool sources, not from samsa's:
TopicCommand (TopicDescription/PartitionDescription.printDescription),
ConsumerGroupCommand (printOffsetFormat, printOffsetsToReset,
shouldPrintMemberState), ConfigCommand (describeResourceConfig,
getResourceConfig). Where Kafka's own versions differ, the newest wins:
kafka-topics 3.7+ ends a partition line with the eligible leader replicas,
"N/A" for a ZooKeeper-mode cluster.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import REPO_ROOT

# Every tool runs as a `python -m samsa ...` child process, as a user runs it.
pytestmark = pytest.mark.integration

DOWN = "127.0.0.1:1"  # nothing listens on port 1


def _samsa(*args, input=None):
    return subprocess.run([sys.executable, "-m", "samsa", *args], capture_output=True,
                          text=True, timeout=90, cwd=REPO_ROOT, input=input)


def _ok(*args):
    p = _samsa(*args)
    assert p.returncode == 0, p.stderr
    return p


def _create(bootstrap, topic: NewTopic) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result
    admin.create_topics([topic])[topic.topic].result(30)


@pytest.fixture
def kafka_like(broker_factory):
    """A broker with a topic key set in its static config, as Kafka's default
    server.properties sets log.segment.bytes."""
    return broker_factory({"log.segment.bytes": "1073741824"})


def test_topics_describe_is_kafka_topics_layout(kafka_like):
    b = kafka_like.bootstrap
    _ok("topics", "--bootstrap-server", b, "--create", "--topic", "fmt", "--partitions", "2",
        "--config", "retention.ms=60000")
    out = _ok("topics", "--bootstrap-server", b, "--describe", "--topic", "fmt").stdout
    lines = out.split("\n")
    # "Configs:" is every key not at its default, the static broker one included
    assert re.fullmatch(r"Topic: fmt\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 2\t"
                        r"ReplicationFactor: 1\tConfigs: retention.ms=60000,"
                        r"segment.bytes=1073741824", lines[0]), lines[0]
    assert lines[1:] == [
        f"\tTopic: fmt\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0\tElr: N/A\t"
        "LastKnownElr: N/A" for p in (0, 1)] + [""]


def _kafka_describe_line(widths, values):
    """ConsumerGroupCommand.printOffsetFormat's printf, in Python."""
    g, t, c, h = widths
    return (f"{values[0]:<{g}} {values[1]:<{t}} {values[2]:<10} {values[3]:<15} "
            f"{values[4]:<15} {values[5]:<15} {values[6]:<{c}} {values[7]:<{h}} {values[8]}")


def test_consumer_groups_show_consumer_protocol_groups(broker):
    """A KIP-848 group (group.protocol=consumer): --describe's table as for a
    classic group, and --list --type's GROUP/TYPE columns
    (ConsumerGroupCommand.printGroupInfo: the group 10 wider than the longest
    id, at least 15, then the type padded to 20)."""
    b = broker.bootstrap
    _create(b, NewTopic("cg-848", 2, 1))
    producer = Producer({"bootstrap.servers": b})
    for i in range(4):
        producer.produce("cg-848", b"v", partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": b, "group.id": "new-group",
                         "client.id": "new-client", "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    classic = Consumer({"bootstrap.servers": b, "group.id": "old-group",
                        "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe(["cg-848"])
        classic.subscribe(["cg-848"])
        seen, deadline = 0, time.monotonic() + 60
        while seen < 4 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            seen += m is not None and not m.error()
            classic.poll(0)
        assert seen == 4
        consumer.commit(asynchronous=False)
        member = consumer.memberid()
        p = _ok("consumer-groups", "--bootstrap-server", b, "--describe", "--group", "new-group")
        while time.monotonic() < deadline and not classic.assignment():
            classic.poll(0.2)
        listed = _ok("consumer-groups", "--bootstrap-server", b, "--list", "--type").stdout
        only = _ok("consumer-groups", "--bootstrap-server", b, "--list", "--type",
                   "consumer").stdout
    finally:
        consumer.close()
        classic.close()
    widths = (15, 15, max(15, len(member)), 15)
    header = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
              "CONSUMER-ID", "HOST", "CLIENT-ID")
    assert p.stdout.split("\n") == ["", _kafka_describe_line(widths, header)] + [
        _kafka_describe_line(widths, ("new-group", "cg-848", str(part), "2", "2", "0",
                                      member, "/127.0.0.1", "new-client"))
        for part in (0, 1)] + [""]
    assert listed.split("\n") == [f"{'GROUP':<25} {'TYPE':<20}",
                                   f"{'new-group':<25} {'Consumer':<20}",
                                   f"{'old-group':<25} {'Classic':<20}", ""]
    assert only.split("\n") == [f"{'GROUP':<25} {'TYPE':<20}",
                                 f"{'new-group':<25} {'Consumer':<20}", ""]


def test_consumer_groups_members_and_state_of_a_consumer_protocol_group(broker):
    """--describe --members [--verbose] and --describe --state [--verbose] of a
    KIP-848 group, line by line as ConsumerGroupCommand.printMembers/printStates
    print them: the member columns (group, consumer id, host, client id padded
    to at least 15, #PARTITIONS to 15 and a space), with --verbose the member
    epoch, the current and target assignments ("topic:p,p", at least 20 wide)
    and the target assignment epoch; the state row with the coordinator as
    "host:port  (id)" (at least 25), the assignor and state (20 each), with
    --verbose the group epoch (15) and target assignment epoch (25)."""
    b = broker.bootstrap
    _create(b, NewTopic("cg-members", 2, 1))
    consumer = Consumer({"bootstrap.servers": b, "group.id": "m-group",
                         "client.id": "m-client", "group.protocol": "consumer",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe(["cg-members"])
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert len(consumer.assignment()) == 2
        member = consumer.memberid()
        args = ("consumer-groups", "--bootstrap-server", b, "--describe", "--group", "m-group")
        members = _ok(*args, "--members").stdout
        verbose = _ok(*args, "--members", "--verbose").stdout
        state = _ok(*args, "--state").stdout
        state_verbose = _ok(*args, "--state", "--verbose").stdout
        epoch = re.search(r"^m-group\s+\S+\s+\S+\s+\S+\s+\S+\s+(\d+)",
                          state_verbose, re.M).group(1)
    finally:
        consumer.close()
    c = max(15, len(member))
    head = f"{'GROUP':<15} {'CONSUMER-ID':<{c}} {'HOST':<15} {'CLIENT-ID':<15} {'#PARTITIONS':<15} "
    row = f"{'m-group':<15} {member:<{c}} {'/127.0.0.1':<15} {'m-client':<15} {'2':<15} "
    assert members.split("\n") == ["", head, row, ""]
    assert verbose.split("\n") == [
        "", head + f"{'CURRENT-EPOCH':<15} {'CURRENT-ASSIGNMENT':<20} {'TARGET-EPOCH':<15} "
                   f"{'TARGET-ASSIGNMENT':<20}",
        row + f"{epoch:<15} {'cg-members:0,1':<20} {epoch:<15} {'cg-members:0,1':<20}", ""]
    host, port = b.rsplit(":", 1)
    coordinator = f"{host}:{port}  (0)"
    w = max(25, len(coordinator))
    assert state.split("\n") == [
        "", f"{'GROUP':<15} {'COORDINATOR (ID)':<{w}} {'ASSIGNMENT-STRATEGY':<20} {'STATE':<20} "
            "#MEMBERS",
        f"{'m-group':<15} {coordinator:<{w}} {'uniform':<20} {'Stable':<20} 1", ""]
    assert state_verbose.split("\n") == [
        "", f"{'GROUP':<15} {'COORDINATOR (ID)':<{w}} {'ASSIGNMENT-STRATEGY':<20} {'STATE':<20} "
            f"{'GROUP-EPOCH':<15} {'TARGET-ASSIGNMENT-EPOCH':<25} #MEMBERS",
        f"{'m-group':<15} {coordinator:<{w}} {'uniform':<20} {'Stable':<20} {epoch:<15} "
        f"{epoch:<25} 1", ""]


def test_consumer_groups_describe_is_kafkas_table(broker):
    b = broker.bootstrap
    _create(b, NewTopic("cg-fmt", 2, 1))
    producer = Producer({"bootstrap.servers": b})
    for i in range(6):
        producer.produce("cg-fmt", b"v", partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": b, "group.id": "fmt-group",
                         "client.id": "fmt-client", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    try:
        consumer.subscribe(["cg-fmt"])
        seen, deadline = 0, time.monotonic() + 60
        while seen < 6 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            seen += m is not None and not m.error()
        assert seen == 6
        consumer.commit(offsets=[TopicPartition("cg-fmt", 0, 1), TopicPartition("cg-fmt", 1, 3)],
                        asynchronous=False)
        member = consumer.memberid()
        p = _ok("consumer-groups", "--bootstrap-server", b, "--describe", "--group", "fmt-group")
    finally:
        consumer.close()
    widths = (15, 15, max(15, len(member)), 15)
    header = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
              "CONSUMER-ID", "HOST", "CLIENT-ID")
    assert p.stdout.split("\n") == ["", _kafka_describe_line(widths, header)] + [
        _kafka_describe_line(widths, ("fmt-group", "cg-fmt", str(part), str(off), "3",
                                      str(3 - off), member, "/127.0.0.1", "fmt-client"))
        for part, off in ((0, 1), (1, 3))] + [""]
    assert p.stderr == ""

    # Nobody left: Kafka's note on stderr, the offsets without owners.
    p = _ok("consumer-groups", "--bootstrap-server", b, "--describe", "--group", "fmt-group")
    assert p.stderr == "\nConsumer group 'fmt-group' has no active members.\n"
    widths = (15, 15, 15, 15)
    assert p.stdout.split("\n") == ["", _kafka_describe_line(widths, header)] + [
        _kafka_describe_line(widths, ("fmt-group", "cg-fmt", str(part), str(off), "3",
                                      str(3 - off), "-", "-", "-"))
        for part, off in ((0, 1), (1, 3))] + [""]

    # --reset-offsets: fixed widths, padding to the end of the line (Kafka's
    # "%-30s %-30s %-10s %-15s"), a blank line first.
    p = _ok("consumer-groups", "--bootstrap-server", b, "--group", "fmt-group",
            "--reset-offsets", "--to-earliest", "--topic", "cg-fmt", "--dry-run")
    row = "{:<30} {:<30} {:<10} {:<15}".format
    assert p.stdout.split("\n") == ["", row("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
                                    row("fmt-group", "cg-fmt", "0", "0"),
                                    row("fmt-group", "cg-fmt", "1", "0"), ""]


def test_configs_describe_lines_are_kafka_configs(kafka_like):
    b = kafka_like.bootstrap
    _create(b, NewTopic("cfg-fmt", 1, 1, config={"segment.bytes": "1000000"}))
    p = _ok("configs", "--bootstrap-server", b, "--entity-type", "topics", "--entity-name",
            "cfg-fmt", "--describe")
    # Synonyms highest precedence first: the topic's, the static broker key's, the default.
    assert p.stdout.split("\n") == [
        "Dynamic configs for topic cfg-fmt are:",
        "  segment.bytes=1000000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:segment.bytes="
        "1000000, STATIC_BROKER_CONFIG:log.segment.bytes=1073741824, DEFAULT_CONFIG:"
        "log.segment.bytes=1073741824}", ""]


# ------------------------------------------------------------------ error paths

def _one_line_failure(p, rc=1):
    assert p.returncode == rc, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, p.stderr
    return lines[0]


_EVERY_TOOL = [
    ("topics", "--list"),
    ("topics", "--describe", "--topic", "t"),
    ("consumer-groups", "--list"),
    ("consumer-groups", "--describe", "--group", "g"),
    ("configs", "--entity-type", "topics", "--entity-name", "t", "--describe"),
    ("get-offsets", "--topic", "t"),
    ("reassign-partitions", "--list"),
    ("leader-election", "--election-type", "preferred", "--all-topic-partitions"),
    ("console-producer", "--topic", "t"),
    ("console-consumer", "--topic", "t", "--from-beginning"),
]


@pytest.mark.parametrize("args", _EVERY_TOOL, ids=lambda a: " ".join(a[:2]))
def test_every_tool_says_in_one_line_that_the_broker_is_down(args):
    line = _one_line_failure(_samsa(args[0], "--bootstrap-server", DOWN, *args[1:],
                                    input="x\n"))
    assert line.startswith(f"samsa {args[0]}: cannot reach the broker at {DOWN}"), line


@pytest.mark.parametrize("args", _EVERY_TOOL, ids=lambda a: " ".join(a[:2]))
def test_every_tool_refuses_an_unknown_flag_in_one_line(args):
    p = _samsa(args[0], "--bootstrap-server", DOWN, *args[1:], "--no-such-flag")
    line = _one_line_failure_usage(p)
    assert "unrecognized arguments: --no-such-flag" in line


def _one_line_failure_usage(p):
    """argparse's way, as Kafka's tools print their usage: exit 2, one error line."""
    assert p.returncode == 2 and "Traceback" not in p.stderr, (p.returncode, p.stderr)
    errors = [line for line in p.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, p.stderr
    return errors[0]


def test_unknown_topic_is_one_line_in_every_tool_that_names_one(broker, tmp_path):
    b = broker.bootstrap
    line = _one_line_failure(_samsa("topics", "--bootstrap-server", b, "--describe",
                                     "--topic", "nope"))
    assert "nope" in line and "UNKNOWN_TOPIC_OR_PARTITION" in line, line
    for action in (("--delete",), ("--alter", "--partitions", "3")):
        line = _one_line_failure(_samsa("topics", "--bootstrap-server", b, *action,
                                        "--topic", "nope"))
        assert "UNKNOWN_TOPIC_OR_PARTITION" in line, line
    line = _one_line_failure(_samsa("configs", "--bootstrap-server", b, "--entity-type",
                                    "topics", "--entity-name", "nope", "--describe"))
    assert "UNKNOWN_TOPIC_OR_PARTITION" in line and "nope" in line, line
    line = _one_line_failure(_samsa("get-offsets", "--bootstrap-server", b, "--topic", "nope"))
    assert "UNKNOWN_TOPIC_OR_PARTITION" in line, line
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "nope", "partition": 0, "replicas": [0]}]}))
    line = _one_line_failure(_samsa("reassign-partitions", "--bootstrap-server", b,
                                    "--execute", "--reassignment-json-file", str(plan)))
    assert "nope" in line, line
    # console-consumer: tests/tools/test_console_tools.py (its error line is
    # followed by Kafka's "Processed a total of 0 messages", as Kafka's is).
    # leader-election: a single broker without ZooKeeper has no controller to
    # ask; tests/integration/test_reassignment.py covers it on a cluster.
