"""Self-test of the test harness: the Java tool look-alikes and the process helpers.

These tests do NOT test samsa. They run our Java programs (tests/java, real Apache
Kafka client 4.3.0) against Tansu 0.6, an independent Kafka-protocol broker, so that
when a samsa integration test fails we know the tool is not the one to blame.

What Tansu 0.6 (in-memory storage) lacks or gets wrong, found while writing these;
the tests below avoid relying on it, and say so where it matters:
- CreatePartitions is not advertised (Topics --alter fails with UnsupportedVersion:
  asserted as the tool's error path).
- DescribeConfigs reports a topic's create-time configs with source DEFAULT_CONFIG,
  so kafka-topics-style "Configs:" (dynamic overrides only) is empty; broker configs
  come back empty.
- ListOffsets(latest) answers wrong offsets (1 on a partition holding 4 records), so
  nothing here seeks to the end or checks lag/log-end offsets.
- Consumer groups: a subscribe()d console consumer (--group) joined but received no
  records within 8 s, and the group's assignment strategy comes back as the member id.
  So group consumption is not smoke-tested here; the offset APIs (OffsetCommit via
  --reset-offsets, OffsetFetch via --describe, DeleteGroups) are.
- Produce to an unknown topic auto-creates it.
- A Produce with acks=0 gets a response, which Kafka never sends (librdkafka logs
  "Response for unknown CorrId" for each one). The Java producer meets that stray
  response at random points; once in a CI run its console producer never exited. So
  acks=0 is not run against Tansu; test_java_clients runs it against samsa.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.java_client import JavaTools
from tests.support.kafka_wire import free_port, probe_api_versions
from tests.support.process import ManagedProcess, ProcessStartError
from tests.support.tansu import TansuProcess

pytestmark = [pytest.mark.harness_selftest, pytest.mark.timeout(120)]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def peer():
    """One Tansu for the module (topics get unique names), to keep the module fast."""
    work_dir = Path(tempfile.mkdtemp(prefix="samsa-tansu-smoke-"))
    t = TansuProcess(work_dir)
    try:
        yield t.start()
    finally:
        t.stop()
        shutil.rmtree(work_dir, ignore_errors=True)


def test_produce_then_consume_100_lines_in_order(java_tools: JavaTools, peer):
    b = peer.bootstrap
    java_tools.topics(b, "--create", "--topic", "smoke", "--partitions", 1, "--replication-factor", 1).check()
    lines = [f"line-{i:03d} ünïcode" for i in range(100)]
    java_tools.produce(b, "smoke", lines).check()

    # No --group: assign() + seekToBeginning, the path that needs no group APIs.
    res = java_tools.consume(b, "smoke", "--from-beginning", "--max-messages", 100, "--timeout-ms", 20000).check()
    assert res.lines == lines
    assert "Processed a total of 100 messages" in res.stderr


def test_keys_partitions_and_explicit_offset(java_tools: JavaTools, peer):
    b = peer.bootstrap
    java_tools.topics(b, "--create", "--topic", "keyed", "--partitions", 3).check()
    sent = [f"k{i % 5}:v{i}" for i in range(30)]
    java_tools.produce(b, "keyed", sent, "--property", "parse.key=true", "--property", "key.separator=:").check()

    res = java_tools.consume(b, "keyed", "--from-beginning", "--max-messages", 30, "--timeout-ms", 20000,
                             "--property", "print.partition=true", "--property", "print.offset=true",
                             "--property", "print.key=true").check()
    rows = [line.split("\t") for line in res.lines]
    assert all(len(r) == 4 and r[0].startswith("Partition:") and r[1].startswith("Offset:") for r in rows)
    assert sorted(f"{k}:{v}" for _, _, k, v in rows) == sorted(sent)
    # Every partition was read (assign over partitionsFor), and per key the order survives.
    by_key: dict[str, list[str]] = {}
    for _, _, k, v in rows:
        by_key.setdefault(k, []).append(v)
    for k, values in by_key.items():
        assert values == [s.split(":")[1] for s in sent if s.startswith(k + ":")]
    partition_of_k0 = next(r[0].split(":")[1] for r in rows if r[2] == "k0")

    # the partition's records from offset 1 on, waited for by count (a short
    # --timeout-ms failed on a loaded machine before the first fetch answered)
    in_partition = sum(1 for r in rows if r[0].split(":")[1] == partition_of_k0)
    res = java_tools.consume(b, "keyed", "--partition", partition_of_k0, "--offset", 1,
                             "--max-messages", in_partition - 1, "--timeout-ms", 60000,
                             "--property", "print.offset=true").check()
    offsets = [int(line.split("\t")[0].split(":")[1]) for line in res.lines]
    assert offsets == list(range(1, in_partition))


def test_compression_codecs_and_acks(java_tools: JavaTools, peer):
    # One topic, one producer run per setting, one consumer at the end: fewer JVM starts.
    b = peer.bootstrap
    java_tools.topics(b, "--create", "--topic", "codecs", "--partitions", 1).check()
    expected = []
    for codec in CODECS:
        lines = [f"{codec}-{i}-" + "x" * (i % 50) for i in range(50)]
        java_tools.produce(b, "codecs", lines, "--compression-type", codec).check()
        expected += lines
    # acks=1 switches idempotence off (the client refuses it without acks=all); no
    # acks=0 here: Tansu answers it (see above)
    lines = [f"acks1-{i}" for i in range(5)]
    java_tools.produce(b, "codecs", lines, "--acks", "1").check()
    expected += lines
    res = java_tools.consume(b, "codecs", "--from-beginning", "--max-messages", len(expected),
                             "--timeout-ms", 20000).check()
    assert res.lines == expected


def test_topics_create_list_describe_delete(java_tools: JavaTools, peer):
    b = peer.bootstrap
    res = java_tools.topics(b, "--create", "--topic", "admin-t", "--partitions", 2, "--replication-factor", 1,
                            "--config", "retention.ms=12345").check()
    assert res.stdout.strip() == "Created topic admin-t."

    again = java_tools.topics(b, "--create", "--topic", "admin-t", "--partitions", 2)
    assert again.rc == 1 and "TopicExistsException" in again.stderr
    java_tools.topics(b, "--create", "--topic", "admin-t", "--partitions", 2, "--if-not-exists").check()

    assert "admin-t" in java_tools.topics(b, "--list").check().lines

    described = java_tools.topics(b, "--describe", "--topic", "admin-t").check().lines
    assert re.fullmatch(r"Topic: admin-t\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 2\tReplicationFactor: 1"
                        r"\tConfigs: .*", described[0]), described
    leader = r"(\d+)"
    for p, line in enumerate(described[1:]):
        m = re.fullmatch(rf"\tTopic: admin-t\tPartition: {p}\tLeader: {leader}\tReplicas: (\d+)\tIsr: (\d+)", line)
        assert m and m.group(1) == m.group(2) == m.group(3), line
    assert len(described) == 3

    configs = java_tools.admin_info(b, "--describe-configs", "--entity-type", "topics",
                                    "--entity-name", "admin-t").check().lines
    assert "retention.ms=12345" in configs

    # Tansu 0.6 does not implement CreatePartitions: this checks --alter reports that.
    alter = java_tools.topics(b, "--alter", "--topic", "admin-t", "--partitions", 3)
    assert alter.rc == 1 and "CREATE_PARTITIONS" in alter.stderr, alter

    java_tools.topics(b, "--delete", "--topic", "admin-t").check()
    assert "admin-t" not in java_tools.topics(b, "--list").check().lines
    gone = java_tools.topics(b, "--delete", "--topic", "admin-t")
    assert gone.rc == 1 and "UnknownTopicOrPartitionException" in gone.stderr
    java_tools.topics(b, "--delete", "--topic", "admin-t", "--if-exists").check()


def test_admin_describe_cluster(java_tools: JavaTools, peer):
    lines = java_tools.admin_info(peer.bootstrap, "--describe-cluster").check().lines
    assert lines[0] == "Cluster ID: tansu_cluster"
    controller = re.fullmatch(r"Controller: (\d+)", lines[1])
    assert controller
    assert lines[2:] == [f"Node: {controller.group(1)}\t{peer.bootstrap}\track: null"]


def test_consumer_group_offsets(java_tools: JavaTools, peer):
    b = peer.bootstrap
    java_tools.topics(b, "--create", "--topic", "grp-t", "--partitions", 2).check()
    java_tools.produce(b, "grp-t", [f"m{i}" for i in range(6)]).check()

    res = java_tools.consumer_groups(b, "--reset-offsets", "--group", "g1", "--topic", "grp-t",
                                     "--to-offset", 2, "--execute").check()
    assert res.lines == ["GROUP TOPIC PARTITION NEW-OFFSET", "g1 grp-t 0 2", "g1 grp-t 1 2"]

    rows = [line.split() for line in java_tools.consumer_groups(b, "--describe", "--group", "g1").check().lines]
    assert rows[0][:4] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET"]
    assert [(r[0], r[1], r[2], r[3], r[6]) for r in rows[1:]] == [("g1", "grp-t", "0", "2", "-"),
                                                                  ("g1", "grp-t", "1", "2", "-")]

    java_tools.consumer_groups(b, "--delete", "--group", "g1").check()
    assert "g1" not in java_tools.consumer_groups(b, "--list").check().lines


def test_tool_failures_are_reported(java_tools: JavaTools):
    usage = java_tools.topics("127.0.0.1:1", "--list", "--describe")
    assert usage.rc == 2 and "USAGE ERROR" in usage.stderr

    # Nothing listens on a fresh free port: the producer must fail, not hang or exit 0.
    dead = f"127.0.0.1:{free_port()}"
    res = java_tools.produce(dead, "t", ["x"], "--producer-property", "max.block.ms=1500")
    assert res.rc == 1 and "ERROR" in res.stderr, res


def test_process_helpers_stop_kill_restart(tmp_path):
    t = TansuProcess(tmp_path).start()
    try:
        port = t.port
        assert probe_api_versions(t.host, port) == 0
        assert t.kill() == -9
        with pytest.raises(OSError):
            probe_api_versions(t.host, port, timeout=0.5)
        t.start()  # same port after a crash
        assert t.port == port and probe_api_versions(t.host, port) == 0
        t.restart()
        assert probe_api_versions(t.host, port) == 0
    finally:
        t.stop()
    assert not t.is_running()
    assert "==== starting" in t.log_tail()


def test_process_start_failure_shows_log(tmp_path):
    argv = [sys.executable, "-c", "import sys; print('config key foo.bar is bad', file=sys.stderr); sys.exit(3)"]
    p = ManagedProcess("fake broker", argv, "127.0.0.1", free_port(), tmp_path / "fake.log")
    with pytest.raises(ProcessStartError) as err:
        p.start()
    assert "exited with code 3" in str(err.value) and "foo.bar is bad" in str(err.value)
    assert not p.is_running()
