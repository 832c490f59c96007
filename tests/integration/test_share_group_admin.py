"""The admin side of KIP-932 share groups against real clients: the Java
client 4.3's Admin (alterShareGroupOffsets, deleteShareGroupOffsets,
deleteShareGroups, listShareGroupOffsets, describeShareGroups through
tests/java/ShareAdmin.java, one long-lived JVM per test answering a command
a line: a JVM per call made a test of ~25 JVMs, minutes on a loaded machine) and confluent-kafka's AdminClient for the share.*
GROUP configs, with a KafkaShareConsumer (tests/java/ShareConsume.java)
showing that what was set takes effect.
"""
from __future__ import annotations

import subprocess
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   NewTopic, ResourceType)

from samsa.client.blocking import SimpleClient
from samsa.protocol.messages import ListConfigResourcesRequest
from tests.support.kafka_wire import free_port
from tests.support.metrics import sample, scrape
from tests.support.process_lines import ProcessLines
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(300)

OVERRIDES = {"offsets.topic.num.partitions": "3",
             "share.coordinator.state.topic.num.partitions": "3",
             "group.share.heartbeat.interval.ms": "500",
             "group.share.min.heartbeat.interval.ms": "500",
             "group.share.session.timeout.ms": "6000",
             "group.share.min.session.timeout.ms": "6000"}
WAIT_S = 60  # harness safety net, not a performance assertion
FIRST_RECORD_MS = 45_000  # a ShareConsume that never gets a record says so, within WAIT_S


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _topic(bootstrap: str, partitions: int) -> str:
    topic = _name("sqa")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=30)
    return topic


def _produce(bootstrap: str, topic: str, per_partition: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for part in range(partitions):
        for i in range(per_partition):
            p.produce(topic, f"p{part}-{i}".encode(), partition=part)
    assert p.flush(30) == 0


class _ShareAdmin:
    """``ShareAdmin BOOTSTRAP serve``: one Admin client, a call per stdin line,
    each answered by its lines and "END". Call it as ``admin("describe", group)``."""

    def __init__(self, java_tools, bootstrap: str) -> None:
        self._out = ProcessLines(java_tools.popen("ShareAdmin", bootstrap, "serve",
                                                  stdin=subprocess.PIPE))
        self._read = 0  # lines of answers already returned

    def __call__(self, *args: str) -> list[str]:
        proc = self._out.proc
        assert proc.stdin is not None
        proc.stdin.write(" ".join(args) + "\n")
        proc.stdin.flush()

        def answered() -> tuple[list[str]] | None:  # (a tuple: an answer may be no lines)
            lines = list(self._out.lines)[self._read:]
            if "END" in lines:
                end = lines.index("END")
                self._read += end + 1
                return (lines[:end],)
            assert proc.poll() is None, f"ShareAdmin exited {proc.returncode}: " \
                f"{self._out.stderr()[-3000:]}"
            return None
        return wait_until(answered, 90, lambda: f"ShareAdmin to answer {args}: "
                          f"{self._out.lines[self._read:]}\n{self._out.stderr()[-3000:]}",
                          interval=0.1)[0]

    def close(self) -> None:
        proc = self._out.proc
        if proc.poll() is None:
            assert proc.stdin is not None
            proc.stdin.close()  # end of its stdin: it closes the Admin client and exits
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def share_admin(java_tools):
    """``share_admin(bootstrap)``: a ShareAdmin session, closed after the test."""
    sessions: list[_ShareAdmin] = []

    def start(bootstrap: str) -> _ShareAdmin:
        sessions.append(_ShareAdmin(java_tools, bootstrap))
        return sessions[-1]
    yield start
    for session in sessions:
        session.close()


def _consume(java_tools, bootstrap: str, group: str, topic: str) -> list[str]:
    """Values a share consumer reads until idle (then it closes: the group is Empty)."""
    out = java_tools.run("ShareConsume", "--bootstrap-server", bootstrap, "--group", group,
                         "--topic", topic, "--idle-ms", "3000",
                         "--first-record-ms", str(FIRST_RECORD_MS), timeout=180).check().lines
    return sorted(line.split("\t")[0] for line in out if "\t" in line)


def test_java_admin_alters_deletes_offsets_and_groups_with_kafkas_answers(
        broker_factory, java_tools, share_admin):
    port = free_port()
    broker = broker_factory({**OVERRIDES, "metrics.port": str(port),
                             "metrics.host": "127.0.0.1"})
    b = broker.bootstrap
    java_admin = share_admin(b)  # one Admin client, across both broker restarts too
    topic, other, group = _topic(b, 2), _topic(b, 1), _name("share")
    _produce(b, topic, 5, 2)
    _produce(b, other, 2, 1)
    # a group positioned before any member joins: it is created, Empty
    assert java_admin("alter", group, f"{topic}:0=3", f"{topic}:1=0",
                  f"{other}:0=2", "no-such-topic:0=1") == [*sorted([
                      f"{other}-0 OK", f"{topic}-0 OK", f"{topic}-1 OK",
                      "no-such-topic-0 ERROR UnknownTopicOrPartitionException"]),
                  "ERROR UnknownTopicOrPartitionException"]
    assert java_admin("describe", group) == ["Empty 0"]
    assert java_admin("offsets", group) == sorted([
        f"{other} 0 2 0", f"{topic} 0 3 2", f"{topic} 1 0 5"])
    # the share consumer starts where the offsets were set
    assert _consume(java_tools, b, group, topic) == sorted(
        [f"p0-{i}" for i in range(3, 5)] + [f"p1-{i}" for i in range(5)])
    # the metrics under Kafka's names: one share group (Empty again), 7 records
    # acquired and accepted (implicit acknowledgement)
    text = scrape(port)
    sg = "kafka_server_share_group_metrics_"
    assert sample(text, "kafka_server_group_coordinator_metrics_group_count",
                  '{protocol="share"}') == 1
    assert sample(text, "kafka_server_group_coordinator_metrics_share_group_count",
                  '{state="empty"}') == 1
    assert sample(text, sg + "record_acknowledgement_count", '{ack_type="Accept"}') == 7
    assert sample(text, sg + "record_acknowledgement_count", '{ack_type="Reject"}') == 0
    assert sample(text, sg + "share_acknowledgement_count", "") == 7
    assert sample(text, sg + "share_acknowledgement_rate", "") > 0
    assert sample(text, "samsa_share_records_acquired_count", "") == 7
    # a member: the group is not empty, and every change is refused
    # (it never gets a record: a member to be killed, so it waits longer than the test)
    holder = java_tools.popen("ShareConsume", "--bootstrap-server", b, "--group", group,
                              "--topic", topic, "--hold", "--first-record-ms", "600000")
    try:
        wait_until(lambda: java_admin("describe", group) == ["Stable 1"], WAIT_S,
                   "the holder to join", interval=0.5)
        assert java_admin("alter", group, f"{topic}:0=0")[-1] == \
            "ERROR GroupNotEmptyException"
        assert java_admin("delete-offsets", group, topic)[-1] == \
            "ERROR GroupNotEmptyException"
        assert java_admin("delete", group) == ["ERROR GroupNotEmptyException"]
    finally:
        holder.kill()
        holder.communicate()
    wait_until(lambda: java_admin("describe", group) == ["Empty 0"], WAIT_S,
               "the killed member's session to end", interval=0.5)
    assert java_admin("delete-offsets", group, other, "no-such-topic") == [
        *sorted(["no-such-topic ERROR UnknownTopicOrPartitionException", f"{other} OK"]),
        "ERROR UnknownTopicOrPartitionException"]
    assert java_admin("offsets", group) == [f"{topic} 0 5 0", f"{topic} 1 5 0"]
    # from here on a share-partition without state starts at the log start
    admin = AdminClient({"bootstrap.servers": b})
    _alter_group(admin, group, ConfigEntry("share.auto.offset.reset", "earliest",
                                           incremental_operation=AlterConfigOpType.SET))
    broker.restart()
    # the deleted state stays deleted (it was set past both records of `other`)
    assert _consume(java_tools, b, group, other) == ["p0-0", "p0-1"]
    # the kept state is kept: only a record written since is delivered
    late = Producer({"bootstrap.servers": b})
    late.produce(topic, b"late-0", partition=0)
    assert late.flush(30) == 0
    assert _consume(java_tools, b, group, topic) == ["late-0"]
    assert java_admin("delete", group) == ["OK"]
    assert java_admin("delete", group) == ["ERROR GroupIdNotFoundException"]
    assert java_admin("delete-offsets", group, topic)[-1] == \
        "ERROR GroupIdNotFoundException"
    broker.restart()
    assert java_admin("describe", group) == ["ERROR GroupIdNotFoundException"]
    # deleted with its state: the topic is read from the start again
    assert _consume(java_tools, b, group, topic) == sorted(
        ["late-0"] + [f"p{p}-{i}" for p in range(2) for i in range(5)])


def _alter_group(admin: AdminClient, group: str, *entries: ConfigEntry) -> None:
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=list(entries))
    admin.incremental_alter_configs([res])[res].result(timeout=30)


def test_share_group_configs_through_confluent_kafkas_admin_client_take_effect(
        broker_factory, java_tools):
    broker = broker_factory(OVERRIDES)
    b = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    topic, group = _topic(b, 1), _name("share")
    _produce(b, topic, 4, 1)
    _alter_group(admin, group, ConfigEntry("share.auto.offset.reset", "earliest",
                                           incremental_operation=AlterConfigOpType.SET),
                 ConfigEntry("share.record.lock.duration.ms", "20000",
                             incremental_operation=AlterConfigOpType.SET))
    res = ConfigResource(ResourceType.GROUP, group)
    described = admin.describe_configs([res])[res].result(timeout=30)
    assert (described["share.auto.offset.reset"].value,
            described["share.auto.offset.reset"].is_default) == ("earliest", False)
    assert described["share.record.lock.duration.ms"].value == "20000"
    assert (described["share.delivery.count.limit"].value,
            described["share.delivery.count.limit"].is_default) == ("5", True)
    # earliest: the records produced before the group existed are delivered
    assert _consume(java_tools, b, group, topic) == [f"p0-{i}" for i in range(4)]
    # out of the broker's bounds: Kafka's INVALID_CONFIG, nothing changed
    with pytest.raises(Exception) as refused:
        _alter_group(admin, group, ConfigEntry("share.record.lock.duration.ms", "100",
                                               incremental_operation=AlterConfigOpType.SET))
    assert "INVALID_CONFIG" in str(refused.value) or "at least 1000" in str(refused.value)
    assert admin.describe_configs([res])[res].result(timeout=30)[
        "share.record.lock.duration.ms"].value == "20000"
    # ListConfigResources (KIP-1142) lists the group, a share group with configs
    configured = _name("configured-only")
    _alter_group(admin, configured, ConfigEntry("share.isolation.level", "read_committed",
                                                incremental_operation=AlterConfigOpType.SET))
    with SimpleClient(b) as client:
        listed = client.call(74, ListConfigResourcesRequest(resource_types=[32]), highest=1)
    assert sorted(r.resource_name for r in listed.config_resources) == sorted([group, configured])


def test_share_isolation_level_read_committed_skips_aborted_and_open_transactions(
        broker_factory, java_tools):
    broker = broker_factory(OVERRIDES)
    b = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    topic = _topic(b, 1)
    p = Producer({"bootstrap.servers": b, "transactional.id": _name("tx")})
    p.init_transactions(30)
    for values, commit in ((["c-0", "c-1"], True), (["a-0", "a-1"], False), (["c-2"], True)):
        p.begin_transaction()
        for v in values:
            p.produce(topic, v.encode(), partition=0)
        if commit:
            p.commit_transaction(30)
        else:
            assert p.flush(30) == 0  # written, then aborted (librdkafka drops unsent ones)
            p.abort_transaction(30)
    p.begin_transaction()  # left open: past the last stable offset
    p.produce(topic, b"open-0", partition=0)
    p.flush(30)
    groups = {}
    for level in ("read_committed", "read_uncommitted"):
        groups[level] = _name(level.replace("_", "-"))
        _alter_group(admin, groups[level],
                     ConfigEntry("share.auto.offset.reset", "earliest",
                                 incremental_operation=AlterConfigOpType.SET),
                     ConfigEntry("share.isolation.level", level,
                                 incremental_operation=AlterConfigOpType.SET))
    assert _consume(java_tools, b, groups["read_committed"], topic) == ["c-0", "c-1", "c-2"]
    assert _consume(java_tools, b, groups["read_uncommitted"], topic) == [
        "a-0", "a-1", "c-0", "c-1", "c-2", "open-0"]
    p.abort_transaction(30)
