"""samsa driven by the real Apache Kafka Java client (4.3.0), through our tool look-alikes.

What a user does first with a Kafka-compatible broker: console producer and consumer
with every compression codec, kafka-topics (create, list, describe, alter, delete) and
the Admin client's cluster and config questions. One broker serves the whole module
(each test uses its own topic names) because every tool run costs a JVM start.

The broker runs with one static override (log.retention.ms) so the config answers can
be told apart from built-in defaults.
"""

from __future__ import annotations

import re
import socket
import struct
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import module_broker_with
from tests.support.java_client import JavaTools
from tests.support.kafka_wire import free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(180)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
# Record batch v2 attributes bits 0-2, as Kafka numbers them.
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
LINES = 10_000
STATIC_RETENTION_MS = "7200000"


METRICS_PORT = free_port()


@pytest.fixture(scope="module")
def module_broker(request):
    """One samsa broker for the module, stopped and its directory removed at the end."""
    yield from module_broker_with(request, {"log.retention.ms": STATIC_RETENTION_MS,
                                            "metrics.host": "127.0.0.1",
                                            "metrics.port": str(METRICS_PORT)})


@pytest.fixture(autouse=True)
def _log_tail_on_failure(request, module_broker):
    """Like the shared fixtures: a failed test shows the broker's last log lines."""
    yield
    reports = (getattr(request.node, f"_samsa_report_{when}", None) for when in ("setup", "call"))
    if any(getattr(r, "failed", False) for r in reports):
        print(f"\n--- samsa broker {module_broker.bootstrap} log tail ({module_broker.log_path}) ---\n"
              f"{module_broker.log_tail(80)}", file=sys.stderr)


def _lines_for(codec: str) -> list[str]:
    # Repetitive enough to compress, varied enough that a mix-up of records shows.
    return [f"{codec}-{i:05d}-" + "abcdefghij"[i % 10] * (i % 37) for i in range(LINES)]


def _batch_codecs(segment: Path) -> set[int]:
    """Codec ids of every batch in a segment file, read by hand (not with samsa's code)."""
    data = segment.read_bytes()
    pos, codecs = 0, set()
    while pos + 61 <= len(data):
        (batch_length,) = struct.unpack_from(">i", data, pos + 8)
        (attributes,) = struct.unpack_from(">h", data, pos + 21)
        codecs.add(attributes & 0x7)
        pos += 12 + batch_length
    assert pos == len(data), f"{segment}: trailing bytes after the last whole batch"
    return codecs


@pytest.mark.parametrize("codec", CODECS)
def test_10000_lines_each_codec_consumed_in_order(java_tools: JavaTools, module_broker, codec):
    b = module_broker.bootstrap
    topic = f"codec-{codec}"
    lines = _lines_for(codec)
    # No topic created first: the producer's Metadata request auto-creates it.
    java_tools.produce(b, topic, lines, "--compression-type", codec).check()

    res = java_tools.consume(b, topic, "--from-beginning", "--max-messages", LINES, "--timeout-ms", 30000,
                             "--property", "print.offset=true", timeout=90).check()
    rows = [line.split("\t", 1) for line in res.lines]
    assert [v for _, v in rows] == lines
    assert [o for o, _ in rows] == [f"Offset:{i}" for i in range(LINES)]
    assert f"Processed a total of {LINES} messages" in res.stderr

    # The batches were stored as the producer compressed them (compression.type=producer).
    segment = module_broker.data_dir / f"{topic}-0" / "00000000000000000000.log"
    assert _batch_codecs(segment) == {CODEC_IDS[codec]}


def _incremental_fetches() -> float:
    """Incremental Fetch requests the broker served (KIP-227), from its /metrics."""
    series = 'samsa_fetch_session_requests{kind="incremental"} '
    with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(series):
                return float(line.split()[-1])
    return 0.0


def test_consumer_reads_through_a_fetch_session_every_record_once_as_partitions_grow(
        java_tools: JavaTools, module_broker):
    """The Java consumer opens a fetch session and fetches incrementally; the
    partitions added to its assignment join the session; it reads every record once."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    b = module_broker.bootstrap
    topic, total = "fetch-session", 600
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic(topic, 3, 1)])[topic].result(30)
    before = _incremental_fetches()
    consumer = java_tools.popen(
        "ConsoleConsumer", "--bootstrap-server", b, "--topic", topic, "--group", "fetch-session",
        "--consumer-property", "auto.offset.reset=earliest",
        "--consumer-property", "metadata.max.age.ms=500",
        "--max-messages", total, "--timeout-ms", 60000,
        "--property", "print.partition=true", "--property", "print.offset=true")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(consumer.stdout), daemon=True)
    reader.start()
    try:
        producer = Producer({"bootstrap.servers": b})
        for i in range(300):
            producer.produce(topic, b"first-%d" % i, partition=i % 3)
        assert producer.flush(30) == 0
        wait_until(lambda: len(lines) >= 300, timeout=60, what="the first 300 records consumed")
        assert _incremental_fetches() > before
        admin.create_partitions([NewPartitions(topic, 6)])[topic].result(30)
        wait_until(lambda: len(producer.list_topics(topic, timeout=10).topics[topic].partitions)
                   == 6, timeout=30, what="the producer to see 6 partitions")
        for i in range(300):
            producer.produce(topic, b"second-%d" % i, partition=i % 6)
        assert producer.flush(30) == 0
        assert consumer.wait(timeout=90) == 0, consumer.stderr.read() if consumer.stderr else ""
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    reader.join(timeout=10)
    rows = [line.rstrip("\n").split("\t") for line in lines]
    # (Partition:N, Offset:N, value), each once: nothing skipped, nothing twice
    assert len(rows) == total and len({tuple(r) for r in rows}) == total
    by_partition = {}
    for part, _, value in rows:
        by_partition.setdefault(part, []).append(value)
    assert {p: len(v) for p, v in by_partition.items()} == {
        **{f"Partition:{p}": 150 for p in range(3)}, **{f"Partition:{p}": 50 for p in range(3, 6)}}
    assert sorted(v for vs in by_partition.values() for v in vs) == sorted(
        [f"first-{i}" for i in range(300)] + [f"second-{i}" for i in range(300)])


def test_acks_1_and_acks_0_producers_write_every_record_and_exit(java_tools: JavaTools, module_broker):
    # acks=0 gets no response: a broker that answered one anyway would hand the Java
    # client a response it has no request for (Tansu does; its producer then hung once)
    b = module_broker.bootstrap
    topic = "acks-levels"
    expected = []
    for acks in ["1", "0"]:
        lines = [f"acks{acks}-{i:04d}" for i in range(2000)]
        java_tools.produce(b, topic, lines, "--acks", acks, "--producer-property", "batch.size=4096").check()
        expected += lines
    res = java_tools.consume(b, topic, "--from-beginning", "--max-messages", len(expected),
                             "--timeout-ms", 30000, timeout=90).check()
    assert res.lines == expected


def test_topics_create_list_describe_alter_delete(java_tools: JavaTools, module_broker):
    b = module_broker.bootstrap
    res = java_tools.topics(b, "--create", "--topic", "admin-t", "--partitions", 2, "--replication-factor", 1,
                            "--config", "retention.ms=12345", "--config", "cleanup.policy=compact").check()
    assert res.stdout.strip() == "Created topic admin-t."

    again = java_tools.topics(b, "--create", "--topic", "admin-t", "--partitions", 2)
    assert again.rc == 1 and "TopicExistsException" in again.stderr, again

    assert "admin-t" in java_tools.topics(b, "--list").check().lines

    described = java_tools.topics(b, "--describe", "--topic", "admin-t").check().lines
    assert re.fullmatch(r"Topic: admin-t\tTopicId: [A-Za-z0-9_-]{22}\tPartitionCount: 2\tReplicationFactor: 1"
                        r"\tConfigs: cleanup.policy=compact,retention.ms=12345", described[0]), described
    topic_id = described[0].split("\t")[1]
    assert described[1:] == [f"\tTopic: admin-t\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0" for p in (0, 1)]

    java_tools.topics(b, "--alter", "--topic", "admin-t", "--partitions", 3).check()
    described = java_tools.topics(b, "--describe", "--topic", "admin-t").check().lines
    assert described[0].split("\t")[1] == topic_id  # same topic, grown in place
    assert "PartitionCount: 3" in described[0]
    assert described[1:] == [f"\tTopic: admin-t\tPartition: {p}\tLeader: 0\tReplicas: 0\tIsr: 0"
                             for p in (0, 1, 2)]
    assert (module_broker.data_dir / "admin-t-2").is_dir()
    shrink = java_tools.topics(b, "--alter", "--topic", "admin-t", "--partitions", 2)
    assert shrink.rc == 1 and "InvalidPartitionsException" in shrink.stderr, shrink

    java_tools.topics(b, "--delete", "--topic", "admin-t").check()
    assert "admin-t" not in java_tools.topics(b, "--list").check().lines
    gone = java_tools.topics(b, "--delete", "--topic", "admin-t")
    assert gone.rc == 1 and "UnknownTopicOrPartitionException" in gone.stderr, gone


def _metadata_v2(host: str, port: int) -> tuple[list[tuple[int, str, int]], str | None, int]:
    """(brokers, cluster_id, controller_id) from a hand-built Metadata v2 request.

    Hand-built so that the expected cluster id does not come from the Java client under test
    nor from samsa's own protocol code.
    """
    body = struct.pack(">hhih", 3, 2, 42, 5) + b"tests" + struct.pack(">i", 0)  # no topics
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
            chunk = sock.recv(65536)
            assert chunk, "connection closed before the Metadata response was complete"
            buf += chunk
    pos = 4
    (correlation_id, n) = struct.unpack_from(">ii", buf, pos)
    assert correlation_id == 42
    pos += 8

    def string() -> str | None:
        nonlocal pos
        (length,) = struct.unpack_from(">h", buf, pos)
        pos += 2
        if length < 0:
            return None
        pos += length
        return buf[pos - length:pos].decode()

    brokers = []
    for _ in range(n):
        (node_id,) = struct.unpack_from(">i", buf, pos)
        pos += 4
        host_ = string()
        (port_,) = struct.unpack_from(">i", buf, pos)
        pos += 4
        string()  # rack
        brokers.append((node_id, host_, port_))
    cluster_id = string()
    (controller_id,) = struct.unpack_from(">i", buf, pos)
    return brokers, cluster_id, controller_id


def test_admin_describe_cluster(java_tools: JavaTools, module_broker):
    brokers, cluster_id, controller_id = _metadata_v2(module_broker.host, module_broker.port)
    assert cluster_id and brokers == [(0, "127.0.0.1", module_broker.port)] and controller_id == 0
    # Kafka's meta.properties in the log dir holds the same id (it survives restarts).
    meta = dict(line.split("=", 1) for line in (module_broker.data_dir / "meta.properties").read_text().splitlines()
                if "=" in line and not line.startswith("#"))
    assert meta.get("cluster.id") == cluster_id

    lines = java_tools.admin_info(module_broker.bootstrap, "--describe-cluster").check().lines
    assert lines == [f"Cluster ID: {cluster_id}", "Controller: 0",
                     f"Node: 0\t127.0.0.1:{module_broker.port}\track: null"]


def _configs(lines: list[str]) -> dict[str, tuple[str, str]]:
    """name -> (value, source) from AdminInfo --describe-configs --with-source output."""
    out = {}
    for line in lines:
        m = re.fullmatch(r"([^=\t]+)=(.*)\tsource=([A-Z_]+)", line)
        assert m, line
        out[m.group(1)] = (m.group(2), m.group(3))
    return out


def test_admin_describe_configs_topics_and_brokers(java_tools: JavaTools, module_broker):
    b = module_broker.bootstrap
    java_tools.topics(b, "--create", "--topic", "cfg-t", "--partitions", 1,
                      "--config", "max.message.bytes=2000000").check()
    # AdminInfo has one resource per run; the JVM start dominates, so three runs it is.
    topic = _configs(java_tools.admin_info(b, "--describe-configs", "--entity-type", "topics",
                                           "--entity-name", "cfg-t", "--with-source").check().lines)
    broker = _configs(java_tools.admin_info(b, "--describe-configs", "--entity-type", "brokers",
                                            "--entity-name", "0", "--with-source").check().lines)

    # The create-time override is a dynamic topic config; the static broker setting
    # log.retention.ms is what the topic inherits; the rest are Kafka's defaults.
    assert topic["max.message.bytes"] == ("2000000", "DYNAMIC_TOPIC_CONFIG")
    assert topic["retention.ms"][0] == STATIC_RETENTION_MS  # Kafka: inherited static value, source STATIC_BROKER_CONFIG
    assert topic["retention.ms"][1] == "STATIC_BROKER_CONFIG", topic["retention.ms"]
    assert topic["cleanup.policy"] == ("delete", "DEFAULT_CONFIG")
    assert topic["segment.bytes"] == ("1073741824", "DEFAULT_CONFIG")
    assert topic["compression.type"] == ("producer", "DEFAULT_CONFIG")
    assert [k for k, (_, s) in topic.items() if s == "DYNAMIC_TOPIC_CONFIG"] == ["max.message.bytes"]

    assert broker["broker.id"] == ("0", "STATIC_BROKER_CONFIG")
    assert broker["log.retention.ms"] == (STATIC_RETENTION_MS, "STATIC_BROKER_CONFIG")
    assert broker["listeners"] == (f"PLAINTEXT://127.0.0.1:{module_broker.port}", "STATIC_BROKER_CONFIG")
    assert broker["log.dirs"] == (str(module_broker.data_dir), "STATIC_BROKER_CONFIG")
    assert broker["log.retention.hours"] == ("168", "DEFAULT_CONFIG")
    assert broker["num.partitions"] == ("1", "DEFAULT_CONFIG")

    unknown = java_tools.admin_info(b, "--describe-configs", "--entity-type", "topics", "--entity-name", "no-such-t")
    assert unknown.rc == 1 and "UnknownTopicOrPartitionException" in unknown.stderr, unknown
