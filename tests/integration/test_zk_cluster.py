"""A samsa cluster through a real ZooKeeper: three broker processes, one ZooKeeper
server, real clients (librdkafka, kafka-python, the Java client, kcat, zkCli.sh).

What a user of a ZooKeeper-mode Kafka cluster notices: Kafka's znodes and JSON
as ZooKeeper tooling reads them, partitions spread over the brokers, clients
that bootstrap from one broker and find leaders and coordinators elsewhere,
NOT_LEADER_OR_FOLLOWER from a broker that does not lead, and the cluster
carrying on when a broker, the controller or ZooKeeper itself goes away.

The topics here have one replica, so a dead broker's partitions are offline
until it comes back; replication, failover and controlled shutdown are
tested in test_replication.py.

The read-only tests share one cluster (``zk_cluster``, each test with its own
topic and group names); every test that kills, pauses or stops something gets
a cluster of its own (``cluster_factory``).
"""
from __future__ import annotations

import base64
import collections
import json
import re
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import (Consumer, ConsumerGroupTopicPartitions, KafkaError, KafkaException,
                             Producer, TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.client.blocking import SimpleClient
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (FetchRequest, FindCoordinatorRequest, ListOffsetsRequest,
                               MetadataRequest, OffsetFetchRequest, ProduceRequest)
from samsa.protocol.records import build_batch
from tests.support.cluster import Cluster
from tests.support.process import ProcessStartError
from tests.support.waiting import wait_until
from tests.support.zk_relay import ZooKeeperRelay
from tests.support.zookeeper import zookeeper_installed

pytestmark = pytest.mark.timeout(240)

ZKCLI = Path("/usr/share/zookeeper/bin/zkCli.sh")
OFFSETS_PARTITIONS = 6
PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_FETCH, FIND_COORDINATOR = 0, 1, 2, 3, 9, 10
KAFKA_ID = re.compile(r"[A-Za-z0-9_-]{22}")


def _failed(request) -> bool:
    # conftest.py's makereport hook leaves each phase's report on the test item.
    return any(getattr(getattr(request.node, f"_samsa_report_{when}", None), "failed", False)
               for when in ("setup", "call"))


def _require_zookeeper():
    if not zookeeper_installed():
        pytest.fail("ZooKeeper is not installed (Debian package 'zookeeper'; "
                    "scripts/setup.sh --test installs it)")


@pytest.fixture(scope="module")
def _module_cluster():
    _require_zookeeper()
    work = Path(tempfile.mkdtemp(prefix="samsa-zk-cluster-"))
    cluster = Cluster(work, size=3, offsets_partitions=OFFSETS_PARTITIONS)
    try:
        yield cluster.start()
    finally:
        try:
            cluster.stop()
        finally:
            shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def zk_cluster(request, _module_cluster) -> Cluster:
    """The module's shared 3-broker cluster (do not kill or stop anything in it);
    a failed test prints every broker's log tail."""
    yield _module_cluster
    if _failed(request):
        _module_cluster.print_log_tails()


@pytest.fixture
def cluster_factory(cluster_factory):
    """This module's clusters: 3 brokers, OFFSETS_PARTITIONS offsets partitions."""
    return lambda **kwargs: cluster_factory(**{"offsets_partitions": OFFSETS_PARTITIONS,
                                               **kwargs})


# ---------------------------------------------------------------- helpers

def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=30)[topic].result(30)


def _java_hash(s: str) -> int:
    """Java's String.hashCode (UTF-16 code units, 32-bit signed wrap-around)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _offsets_partition(group: str) -> int:
    """Kafka's GroupMetadataManager.partitionFor: Utils.abs(hashCode) % partitions."""
    h = _java_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % OFFSETS_PARTITIONS


def _metadata(bootstrap: str, topics: list[str] | None):
    with SimpleClient(bootstrap) as c:
        return c.call(METADATA, MetadataRequest(
            allow_auto_topic_creation=False,
            topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=t)
                                                for t in topics]))


def _find_coordinator(bootstrap: str, group: str) -> tuple[int, int]:
    """(error code, node id) of FindCoordinator for ``group``, asked of one broker."""
    with SimpleClient(bootstrap) as c:
        if c.version_for(FIND_COORDINATOR) >= 4:
            r = c.call(FIND_COORDINATOR, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]))
            return r.coordinators[0].error_code, r.coordinators[0].node_id
        r = c.call(FIND_COORDINATOR, FindCoordinatorRequest(key=group, key_type=0))
        return r.error_code, r.node_id


def _offsets_topic_leaders(cluster: Cluster) -> dict[int, int]:
    """Create __consumer_offsets if needed (the first FindCoordinator does it) and
    wait until each of its partitions has a leader."""
    def answered():
        code, _ = _find_coordinator(cluster.broker(0).bootstrap, "any-group")
        return code == 0
    wait_until(answered, 30, "FindCoordinator to answer without error")
    return cluster.wait_for_leaders("__consumer_offsets", OFFSETS_PARTITIONS)


def _group_coordinated_by_other(cluster: Cluster, not_on: int, prefix: str) -> tuple[str, int]:
    """A fresh group id whose coordinator (leader of its __consumer_offsets partition)
    is not broker ``not_on``; returns (group, coordinator id)."""
    leaders = _offsets_topic_leaders(cluster)
    for i in range(1000):
        group = f"{prefix}-{uuid.uuid4().hex[:6]}-{i}"
        leader = leaders[_offsets_partition(group)]
        if leader != not_on:
            return group, leader
    raise AssertionError(f"every __consumer_offsets partition is led by {not_on}: {leaders}")


class Acks:
    """Delivery reports of a confluent-kafka producer: what was acknowledged, and errors."""

    def __init__(self):
        self.acked: list[tuple[int, int, bytes, bytes]] = []   # partition, offset, key, value
        self.errors: list[str] = []

    def __call__(self, err, msg):
        if err is None:
            self.acked.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
        else:
            self.errors.append(f"{msg.key()!r}->{msg.partition()}: {err}")


def _produce_keyed(bootstrap: str, topic: str, count: int, prefix: str = "",
                   **config) -> Acks:
    acks = Acks()
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, **config})
    for i in range(count):
        p.produce(topic, key=f"key-{i % 97}".encode(), value=f"{prefix}value-{i}".encode(),
                  on_delivery=acks)
        p.poll(0)
    remaining = p.flush(60)
    assert remaining == 0, f"{remaining} records still unacknowledged after flush"
    assert not acks.errors, acks.errors[:10]
    assert len(acks.acked) == count
    return acks


def _read_all(bootstrap: str, topic: str, partitions: int, timeout: float = 60) -> list[tuple]:
    """Every record of ``topic`` (assign + earliest, no group), as (partition, offset, key, value);
    reads up to each partition's high watermark as the leader reports it."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-reader",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(partitions)}
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[tuple] = []
        position = {p: 0 for p in range(partitions)}
        deadline = time.monotonic() + timeout
        while any(position[p] < ends[p] for p in ends):
            assert time.monotonic() < deadline, f"read {position}, high watermarks {ends}"
            msg = c.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None or msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
            if msg.error() is None:
                got.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
                position[msg.partition()] = msg.offset() + 1
        return got
    finally:
        c.close()


def _partition_errors(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """{partition: (error code, leader id)} as one broker's Metadata answer has them."""
    t = _metadata(bootstrap, [topic]).topics[0]
    return {p.partition_index: (p.error_code, p.leader_id) for p in t.partitions}


def _list_offsets(bootstrap: str, topic: str, partition: int):
    with SimpleClient(bootstrap) as c:
        r = c.call(LIST_OFFSETS, ListOffsetsRequest(replica_id=-1, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=partition, timestamp=-1)])]))
    return r.topics[0].partitions[0]


# ====================================================== the shared cluster

def test_znodes_are_kafkas_json(zk_cluster: Cluster):
    topic = _name("layout")
    _create_topic(zk_cluster.broker(0).bootstrap, topic, 3)
    # known to every broker, not only written to ZooKeeper: broker 1's Metadata
    # below carries the topic id only once its watch has brought the topic in
    leaders = zk_cluster.wait_until_led(topic, 3)
    zk = zk_cluster.zk_client()

    cluster_id = json.loads(zk.get("/cluster/id")[0])
    assert set(cluster_id) == {"version", "id"}
    assert cluster_id["version"] == "1"  # a string, as Kafka writes it
    assert KAFKA_ID.fullmatch(cluster_id["id"]), cluster_id
    # Clients see the same cluster id in Metadata, from any broker.
    for i in range(3):
        assert _metadata(zk_cluster.broker(i).bootstrap, []).cluster_id == cluster_id["id"]

    assert sorted(zk.get_children("/brokers/ids"), key=int) == ["0", "1", "2"]
    for i in range(3):
        b = zk_cluster.broker(i)
        data, stat = zk.get(f"/brokers/ids/{i}")
        assert stat.ephemeralOwner != 0  # ephemeral: goes with the broker's session
        reg = json.loads(data)
        assert reg["version"] == 5
        assert reg["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
        assert reg["endpoints"] == [f"PLAINTEXT://127.0.0.1:{b.port}"]
        assert reg["host"] == "127.0.0.1" and reg["port"] == b.port
        assert reg["jmx_port"] == -1
        assert isinstance(reg["timestamp"], str) and reg["timestamp"].isdigit()
        # epoch milliseconds (not seconds), stamped before the znode was created
        assert 10**12 < int(reg["timestamp"]) <= stat.ctime
        assert reg.get("rack") is None  # no broker.rack: no rack
        assert reg["features"] == {}
        assert set(reg) <= {"version", "host", "port", "jmx_port", "timestamp", "endpoints",
                            "listener_security_protocol_map", "rack", "features"}

    assignment = json.loads(zk.get(f"/brokers/topics/{topic}")[0])
    assert assignment["version"] == 3
    assert set(assignment["partitions"]) == {"0", "1", "2"}
    assert all(len(r) == 1 and r[0] in (0, 1, 2) for r in assignment["partitions"].values())
    assert assignment["adding_replicas"] == {} and assignment["removing_replicas"] == {}
    assert KAFKA_ID.fullmatch(assignment["topic_id"]), assignment
    # Metadata carries the same topic id (Kafka's base64url of the UUID bytes).
    md = _metadata(zk_cluster.broker(1).bootstrap, [topic]).topics[0]
    assert base64.urlsafe_b64encode(md.topic_id.bytes).rstrip(b"=").decode() == assignment["topic_id"]

    controller_epoch = int(zk.get("/controller_epoch")[0])
    assert controller_epoch >= 1
    assert sorted(zk.get_children(f"/brokers/topics/{topic}/partitions"), key=int) == ["0", "1", "2"]
    for p in range(3):
        state = json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{p}/state")[0])
        assert state["version"] == 1
        assert state["leader"] == assignment["partitions"][str(p)][0] == leaders[p]
        assert state["leader_epoch"] == 0  # new partition, first leader
        assert state["isr"] == [state["leader"]]
        assert 1 <= state["controller_epoch"] <= controller_epoch

    data, stat = zk.get("/controller")
    controller = json.loads(data)
    assert stat.ephemeralOwner != 0
    assert controller["version"] in (1, 2)
    assert controller["brokerid"] in (0, 1, 2)
    assert isinstance(controller["timestamp"], str) and controller["timestamp"].isdigit()
    if controller["version"] == 2:
        assert controller["kraftControllerEpoch"] == -1
    # Every broker names the same controller in Metadata.
    for i in range(3):
        assert _metadata(zk_cluster.broker(i).bootstrap, []).controller_id == controller["brokerid"]
    # /controller_epoch is a bare decimal.
    assert zk.get("/controller_epoch")[0] == str(controller_epoch).encode()


def test_zkcli_reads_the_registry(zk_cluster: Cluster):
    """Debian's zkCli.sh (ZooKeeper's own shell) sees the brokers and the controller."""
    assert ZKCLI.exists(), f"{ZKCLI} missing: the zookeeper package installs it"
    chroot = zk_cluster.chroot

    def zkcli(*command: str) -> str:
        proc = subprocess.run([str(ZKCLI), "-server", zk_cluster.zk.connect, *command],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc
        return proc.stdout

    assert "[0, 1, 2]" in zkcli("ls", f"{chroot}/brokers/ids").splitlines()
    controller_line = [line for line in zkcli("get", f"{chroot}/controller").splitlines()
                       if line.startswith("{")]
    assert len(controller_line) == 1
    assert json.loads(controller_line[0])["brokerid"] == zk_cluster.controller_id()
    broker_line = [line for line in zkcli("get", f"{chroot}/brokers/ids/2").splitlines()
                   if line.startswith("{")]
    assert json.loads(broker_line[0])["endpoints"] == [f"PLAINTEXT://{zk_cluster.broker(2).bootstrap}"]


def test_partitions_spread_over_brokers_and_kcat_sees_them(zk_cluster: Cluster):
    topic = _name("spread")
    _create_topic(zk_cluster.broker(2).bootstrap, topic, 6)
    leaders = zk_cluster.wait_for_leaders(topic, 6)
    assert sorted(collections.Counter(leaders.values()).items()) == [(0, 2), (1, 2), (2, 2)]

    one = zk_cluster.broker(1)

    def described() -> tuple[str, dict] | None:
        proc = subprocess.run(["kcat", "-L", "-b", one.bootstrap, "-t", topic, "-m", "20"],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc
        parts = {int(p): (int(l), r, i) for p, l, r, i in re.findall(
            r"^    partition (\d+), leader (-?\d+), replicas: ([\d,]*), isrs: ([\d,]*)",
            proc.stdout, re.M)}
        # Broker 1 learns the states from ZooKeeper a moment after they are
        # written there (on a loaded machine, after wait_for_leaders saw them).
        return (proc.stdout, parts) if {p: l for p, (l, _, _) in parts.items()} == leaders \
            else None
    out, parts = wait_until(described, 30, f"broker 1 to tell the leaders of {topic}")
    assert re.search(r"^ 3 brokers:$", out, re.M), out
    brokers = dict(re.findall(r"^  broker (\d+) at (\S+)", out, re.M))
    assert brokers == {str(i): zk_cluster.broker(i).bootstrap for i in range(3)}, out
    assert re.search(rf"^  broker {zk_cluster.controller_id()} at \S+ \(controller\)$", out, re.M), out
    assert f'topic "{topic}" with 6 partitions:' in out
    assert all(r == i == str(l) for l, r, i in parts.values()), out


def test_librdkafka_group_with_coordinator_on_another_broker(zk_cluster: Cluster):
    """3,000 keyed records in through broker 0 alone; a group whose coordinator is
    another broker reads every one exactly once and its commits are visible."""
    entry = zk_cluster.broker(0).bootstrap
    topic = _name("group")
    _create_topic(entry, topic, 6)
    zk_cluster.wait_for_leaders(topic, 6)
    acks = _produce_keyed(entry, topic, 3000)
    # Same key, same partition (librdkafka's default partitioner is murmur2-consistent).
    by_key = collections.defaultdict(set)
    for p, _, k, _ in acks.acked:
        by_key[k].add(p)
    assert all(len(ps) == 1 for ps in by_key.values())
    ends = collections.Counter()
    for p, off, _, _ in acks.acked:
        ends[p] = max(ends[p], off + 1)
    assert sum(ends.values()) == 3000 and len(ends) > 1

    group, coordinator = _group_coordinated_by_other(zk_cluster, not_on=0, prefix="cg")
    # Broker 0 learns the partition's leader through its ZooKeeper watch a
    # moment after the znode is written; meanwhile it answers
    # COORDINATOR_NOT_AVAILABLE, as Kafka does before its metadata cache has
    # the leader (failed once in a fresh clone's run), and clients ask again.
    found = wait_until(lambda: (f := _find_coordinator(entry, group))
                       != (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1) and f, 30,
                       "broker 0 to know the coordinator's partition leader")
    assert found == (0, coordinator)
    # The coordinator's neighbours say so with NOT_COORDINATOR.
    with SimpleClient(zk_cluster.broker(0).bootstrap) as c:
        r = c.call(OFFSET_FETCH, OffsetFetchRequest(group_id=group, topics=None), highest=7)
    assert r.error_code == ErrorCode.NOT_COORDINATOR

    consumer = Consumer({"bootstrap.servers": entry, "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 90
        while len(got) < 3000:
            assert time.monotonic() < deadline, f"consumed {len(got)} of 3000"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.partition(), msg.offset(), msg.key(), msg.value()))
        consumer.commit(asynchronous=False)
        # Nothing more is there to arrive: each partition's log ends where its last
        # acknowledged record does, and the group's consumer stands at that end.
        positions = {tp.partition: tp.offset for tp in consumer.position(consumer.assignment())}
        assert {p: positions[p] for p in ends} == dict(ends)
        assert {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in ends} == dict(ends)
    finally:
        consumer.close()
    assert collections.Counter(got) == collections.Counter(acks.acked)

    admin = AdminClient({"bootstrap.servers": entry})
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    committed = {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == topic}
    assert committed == dict(ends)


def test_kafka_python_through_one_broker(zk_cluster: Cluster):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic as KpNewTopic

    entry = zk_cluster.broker(2).bootstrap
    topic = _name("kp")
    admin = KafkaAdminClient(bootstrap_servers=entry)
    try:
        admin.create_topics([KpNewTopic(topic, 6, 1)])
    finally:
        admin.close()
    zk_cluster.wait_for_leaders(topic, 6)

    producer = KafkaProducer(bootstrap_servers=entry, acks="all", linger_ms=5)
    try:
        futures = [producer.send(topic, key=b"k%d" % (i % 31), value=b"kp-%d" % i) for i in range(600)]
        producer.flush()
        metas = [f.get(timeout=30) for f in futures]
    finally:
        producer.close()
    assert {m.partition for m in metas} == set(range(6))  # 31 keys hit every partition

    group, _ = _group_coordinated_by_other(zk_cluster, not_on=2, prefix="kp")
    consumer = KafkaConsumer(topic, bootstrap_servers=entry, group_id=group,
                             auto_offset_reset="earliest", enable_auto_commit=False,
                             consumer_timeout_ms=20000)
    try:
        values = []
        for msg in consumer:
            values.append(msg.value)
            if len(values) >= 600:
                break
        consumer.commit()
        committed = {p: consumer.committed(TopicPartitionKP(topic, p)) for p in range(6)}
    finally:
        consumer.close()
    assert sorted(values) == sorted(b"kp-%d" % i for i in range(600))
    ends = collections.Counter()
    for m in metas:
        ends[m.partition] = max(ends[m.partition], m.offset + 1)
    assert committed == dict(ends)


def TopicPartitionKP(topic, partition):  # kafka-python's type, imported lazily
    from kafka import TopicPartition as KpTopicPartition
    return KpTopicPartition(topic, partition)


def test_java_console_tools_through_one_broker(zk_cluster: Cluster, java_tools):
    topic = _name("java")
    _create_topic(zk_cluster.broker(0).bootstrap, topic, 6)
    zk_cluster.wait_for_leaders(topic, 6)
    lines = [f"java-{i:04d}" for i in range(1000)]
    # Keyed, so the records go to every partition (the Java client's sticky
    # partitioner would put unkeyed small records in one batch, one partition).
    java_tools.produce(zk_cluster.broker(1).bootstrap, topic,
                       [f"k{i % 31}\t{line}" for i, line in enumerate(lines)],
                       "--acks", "all", "--property", "parse.key=true").check()
    group, _ = _group_coordinated_by_other(zk_cluster, not_on=2, prefix="java")
    res = java_tools.consume(zk_cluster.broker(2).bootstrap, topic, "--from-beginning",
                             "--group", group, "--max-messages", 1000, "--timeout-ms", 30000,
                             "--property", "print.partition=true", timeout=120).check()
    rows = [line.split("\t", 1) for line in res.lines]
    assert sorted(v for _, v in rows) == lines
    assert {p for p, _ in rows} == {f"Partition:{p}" for p in range(6)}  # from all three brokers


def test_non_leader_answers_not_leader_or_follower(zk_cluster: Cluster):
    topic = _name("notleader")
    _create_topic(zk_cluster.broker(0).bootstrap, topic, 3)
    # Led, not just elected: the controller writes the leader to ZooKeeper
    # before the leader's own state watch has taken the role up (as in Kafka,
    # where LeaderAndIsr follows the znode write), and until then it too
    # answers NOT_LEADER_OR_FOLLOWER.
    leaders = zk_cluster.wait_until_led(topic, 3)
    partition = 0
    leader = leaders[partition]
    other = (leader + 1) % 3

    def produce(bootstrap):
        with SimpleClient(bootstrap) as c:
            r = c.call(PRODUCE, ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[
                ProduceRequest.TopicProduceData(name=topic, topic_id=md_topic_id, partition_data=[
                    ProduceRequest.PartitionProduceData(
                        index=partition, records=build_batch([(b"k", b"v", [], None)]))])]))
        return r.responses[0].partition_responses[0]

    def fetch(bootstrap):
        with SimpleClient(bootstrap) as c:
            r = c.call(FETCH, FetchRequest(
                replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                    topic=topic, topic_id=md_topic_id, partitions=[FetchRequest.FetchPartition(
                        partition=partition, fetch_offset=0, partition_max_bytes=1 << 20)])],
                forgotten_topics_data=[], rack_id=""))
        assert r.error_code == 0
        return r.responses[0].partitions[0]

    md_topic_id = _metadata(zk_cluster.broker(other).bootstrap, [topic]).topics[0].topic_id
    wrong = zk_cluster.broker(other).bootstrap
    right = zk_cluster.broker(leader).bootstrap
    assert produce(wrong).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert fetch(wrong).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert _list_offsets(wrong, topic, partition).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # Nothing was written by the refused produce; the leader takes it.
    assert _list_offsets(right, topic, partition).offset == 0
    ok = produce(right)
    assert (ok.error_code, ok.base_offset) == (0, 0)
    assert fetch(right).high_watermark == 1
    assert _list_offsets(right, topic, partition).offset == 1


def test_broker_id_already_registered_refuses_to_start(zk_cluster: Cluster):
    zk = zk_cluster.zk_client()
    before_data, before_stat = zk.get("/brokers/ids/1")
    work = Path(tempfile.mkdtemp(prefix="samsa-dup-id-"))
    try:
        dup = zk_cluster.broker_process(1, work_dir=work)
        with pytest.raises(ProcessStartError) as info:
            dup.start()
        assert dup.proc.returncode not in (None, 0)
        assert "broker.id 1 is already registered" in dup.log_path.read_text(), info.value
    finally:
        shutil.rmtree(work, ignore_errors=True)
    # The running broker 1 keeps its registration and keeps serving.
    data, stat = zk.get("/brokers/ids/1")
    assert (data, stat.ephemeralOwner) == (before_data, before_stat.ephemeralOwner)
    assert _metadata(zk_cluster.broker(1).bootstrap, []).brokers


# ====================================================== clusters of their own

def test_killed_broker_partitions_go_offline_and_come_back(cluster_factory):
    cluster = cluster_factory()
    topic = _name("kill")
    _create_topic(cluster.bootstrap, topic, 6)
    leaders = cluster.wait_for_leaders(topic, 6)
    before = _produce_keyed(cluster.bootstrap, topic, 1200)

    victim = next(i for i in range(3) if i != cluster.controller_id())
    survivor = next(i for i in range(3) if i not in (victim, cluster.controller_id()))
    lost = sorted(p for p, l in leaders.items() if l == victim)
    kept = sorted(p for p, l in leaders.items() if l != victim)
    epochs = {p: cluster.partition_state(topic, p)["leader_epoch"] for p in lost}
    cluster.kill(victim)

    # After its session times out the controller takes its partitions offline.
    cluster.wait_until_registered([i for i in range(3) if i != victim])
    wait_until(lambda: str(victim) not in cluster.zk_client().get_children("/brokers/ids"), 30,
               f"broker {victim}'s registration to expire")
    wait_until(lambda: all(cluster.partition_state(topic, p)["leader"] == -1 for p in lost), 30,
               f"partitions {lost} offline in ZooKeeper")
    for p in lost:
        state = cluster.partition_state(topic, p)
        assert state["leader"] == -1, state

    def metadata_offline():
        errors = _partition_errors(cluster.broker(survivor).bootstrap, topic)
        return all(errors[p] == (ErrorCode.LEADER_NOT_AVAILABLE, -1) for p in lost) and errors
    errors = wait_until(metadata_offline, 30, "Metadata to show the dead broker's partitions leaderless")
    assert all(errors[p] == (0, leaders[p]) for p in kept), errors
    # The live brokers and the partition states are separate znodes, each read
    # by its own watch: the list may trail the states by a re-read (a read that
    # failed on a loaded machine is read again 0.2 s later), so wait for it too.
    wait_until(lambda: victim not in {
        b.node_id for b in _metadata(cluster.broker(survivor).bootstrap, []).brokers}, 30,
        f"broker {victim} gone from the survivor's Metadata")

    # The others keep working: a produce to a partition led elsewhere succeeds.
    live = ",".join(cluster.broker(i).bootstrap for i in range(3) if i != victim)
    p = Producer({"bootstrap.servers": live, "acks": "all", "enable.idempotence": True})
    during = Acks()
    for i, part in enumerate(kept * 10):
        p.produce(topic, value=b"during-%d" % i, partition=part, on_delivery=during)
    assert p.flush(30) == 0
    assert not during.errors and len(during.acked) == 10 * len(kept)

    cluster.restart(victim)
    def led_again():
        states = {p: cluster.partition_state(topic, p) for p in lost}
        return all(s["leader"] == victim and s["leader_epoch"] > epochs[p] for p, s in states.items())
    wait_until(led_again, 30, f"broker {victim} to lead {lost} again with a higher leader epoch")
    wait_until(lambda: all(e == (0, leaders[p]) for p, e in
                           _partition_errors(cluster.broker(survivor).bootstrap, topic).items()),
               30, "Metadata to show every partition led again")
    cluster.wait_until_led(topic, 6)

    everything = _read_all(cluster.bootstrap, topic, 6)
    assert collections.Counter(everything) == collections.Counter(before.acked + during.acked)


def test_metadata_v0_leaves_a_dead_replica_out(cluster_factory):
    """Kafka's Metadata v0 (and only v0) lists just the replicas a client can
    reach and answers REPLICA_NOT_AVAILABLE for a partition missing one: the
    ZooKeeper-era health checks read a broker down from exactly that."""
    cluster = cluster_factory()
    topic = _name("v0")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 3, 2)], operation_timeout=30)[topic].result(30)
    cluster.wait_for_leaders(topic, 3)
    victim = next(i for i in range(3) if i != cluster.controller_id())
    survivor = cluster.broker(next(i for i in range(3) if i != victim)).bootstrap
    replicas = cluster.assignment(topic)["partitions"]
    hit = {p for p, r in replicas.items() if victim in r}
    assert hit and len(hit) < 3, replicas  # two replicas over three brokers
    cluster.kill(victim)

    def partitions(version):
        with SimpleClient(survivor) as c:
            resp = c.call(METADATA, MetadataRequest(topics=[
                MetadataRequest.MetadataRequestTopic(name=topic)]), highest=version)
        return {p.partition_index: p for p in resp.topics[0].partitions}, resp.brokers

    def victim_gone_and_led():
        parts, brokers = partitions(1)
        return (victim not in {b.node_id for b in brokers}
                and all(p.error_code == 0 for p in parts.values()) and parts)
    wait_until(victim_gone_and_led, 30, f"broker {victim} gone and every partition led")

    v0, _ = partitions(0)
    for p, meta in v0.items():
        assert victim not in meta.replica_nodes and victim not in meta.isr_nodes, (p, meta)
        if p in hit:
            assert meta.error_code == ErrorCode.REPLICA_NOT_AVAILABLE, (p, meta)
            assert meta.replica_nodes == [r for r in replicas[p] if r != victim]
        else:
            assert (meta.error_code, meta.replica_nodes) == (0, replicas[p]), (p, meta)
        assert meta.leader_id >= 0 and meta.leader_id != victim
    v1, _ = partitions(1)  # later versions still name every replica
    for p in hit:
        assert (v1[p].error_code, v1[p].replica_nodes) == (0, replicas[p]), v1[p]


def test_killed_controller_is_replaced_and_clients_carry_on(cluster_factory):
    cluster = cluster_factory()
    topic = _name("ctl")
    _create_topic(cluster.bootstrap, topic, 6)
    cluster.wait_for_leaders(topic, 6)
    old = cluster.controller_id()
    old_epoch = cluster.controller_epoch()
    cluster.kill(old)

    new = cluster.wait_for_controller(among=[i for i in range(3) if i != old])
    wait_until(lambda: cluster.controller_epoch() > old_epoch, 30, "/controller_epoch to grow")
    new_epoch = cluster.controller_epoch()
    survivors = [i for i in range(3) if i != old]
    for i in survivors:
        wait_until(lambda: _metadata(cluster.broker(i).bootstrap, []).controller_id == new, 30,
                   f"broker {i} to name controller {new} in Metadata")

    # The new controller does the controller's work: a new topic gets leaders,
    # on live brokers only, written under the new epoch.
    fresh = _name("after")
    _create_topic(cluster.broker(survivors[0]).bootstrap, fresh, 4)
    leaders = cluster.wait_for_leaders(fresh, 4)
    assert set(leaders.values()) <= set(survivors)
    assert all(cluster.partition_state(fresh, p)["controller_epoch"] == new_epoch for p in range(4))
    live = ",".join(cluster.broker(i).bootstrap for i in survivors)
    acked = _produce_keyed(live, fresh, 400)
    assert collections.Counter(_read_all(live, fresh, 4)) == collections.Counter(acked.acked)

    # The old controller comes back as an ordinary broker.
    cluster.restart(old)
    wait_until(lambda: all(l == old for p, l in cluster.leaders(topic).items()
                           if json.loads(cluster.zk_client().get(f"/brokers/topics/{topic}")[0])
                           ["partitions"][str(p)] == [old]), 30,
               f"broker {old}'s partitions of {topic} led by it again")
    assert cluster.controller_id() == new
    assert cluster.controller_epoch() == new_epoch


def test_sigterm_controller_resigns_at_once(cluster_factory):
    # A session timeout far longer than the test waits: a move of the controller
    # can only come from the resignation, not from the session expiring.
    cluster = cluster_factory(session_timeout_ms=40000)
    old = cluster.controller_id()
    old_epoch = cluster.controller_epoch()
    assert cluster.terminate(old) == 0
    # The process has exited: its session was closed on the way out, so its
    # registration and /controller (if still its own) are gone already.
    zk = cluster.zk_client()
    assert str(old) not in zk.get_children("/brokers/ids")
    assert cluster.controller_id() != old
    new = cluster.wait_for_controller(among=[i for i in range(3) if i != old], timeout=20)
    wait_until(lambda: cluster.controller_epoch() > old_epoch, 20, "/controller_epoch to grow")
    topic = _name("term")
    _create_topic(cluster.broker(new).bootstrap, topic, 2)
    assert set(cluster.wait_for_leaders(topic, 2, timeout=20).values()) <= {0, 1, 2} - {old}


def test_zookeeper_restart_under_a_running_producer(cluster_factory):
    """ZooKeeper is killed and stays down longer than the brokers' session timeout
    while an idempotent acks=all producer runs: the brokers keep serving the
    partitions they lead, register again once it is back, and every acknowledged
    record is there afterwards, once."""
    cluster = cluster_factory()
    topic = _name("zkdown")
    _create_topic(cluster.bootstrap, topic, 6)
    cluster.wait_for_leaders(topic, 6)
    acks = Acks()
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                  "enable.idempotence": True, "linger.ms": 2})
    sent = 0

    def produce_until(done, what, timeout=60):
        nonlocal sent
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, f"{what}: {len(acks.acked)} acked, errors {acks.errors[:5]}"
            p.produce(topic, key=b"k%d" % (sent % 50), value=b"r-%d" % sent, on_delivery=acks)
            sent += 1
            p.poll(0.005)

    produce_until(lambda: len(acks.acked) >= 300, "before the outage")
    cluster.zk.kill()
    down_since = time.monotonic()
    n = len(acks.acked)
    # Brokers keep serving what they lead while ZooKeeper is away; it stays away
    # past the session timeout.
    produce_until(lambda: len(acks.acked) >= n + 300
                  and time.monotonic() - down_since > 2 * cluster.session_timeout_ms / 1000,
                  "while ZooKeeper is down")
    assert all(b.is_running() for b in cluster.brokers)
    marks = cluster.log_marks()
    cluster.zk.start()
    # Each broker has a live session again: its old one resumed, or (when it came
    # back too late for it) a new one. Until then a broker's old session may still
    # expire, taking its partitions offline for a while.
    for i in range(3):
        cluster.wait_for_log(i, "Zookeeper connection established", since=marks[i])
    cluster.wait_until_registered(range(3))
    n = len(acks.acked)
    produce_until(lambda: len(acks.acked) >= n + 300, "after ZooKeeper came back")
    assert p.flush(60) == 0
    assert not acks.errors, acks.errors[:10]
    assert all(b.is_running() for b in cluster.brokers)
    cluster.wait_for_controller()
    cluster.wait_for_leaders(topic, 6)
    assert len(acks.acked) == sent
    cluster.wait_until_led(topic, 6)

    everything = _read_all(cluster.bootstrap, topic, 6)
    assert collections.Counter(everything) == collections.Counter(acks.acked)


def test_expired_session_broker_registers_again_and_serves(cluster_factory):
    """A broker that stops answering ZooKeeper (SIGSTOP) past its session timeout
    has its session expired by the server: registration gone, partitions
    offline. Resumed, it finds the session expired, registers again and leads
    its partitions again."""
    cluster = cluster_factory()
    topic = _name("expire")
    _create_topic(cluster.bootstrap, topic, 6)
    leaders = cluster.wait_for_leaders(topic, 6)
    before = _produce_keyed(cluster.bootstrap, topic, 600)
    victim = next(i for i in range(3) if i != cluster.controller_id())
    lost = sorted(p for p, l in leaders.items() if l == victim)
    zk = cluster.zk_client()
    old_owner = zk.get(f"/brokers/ids/{victim}")[1].ephemeralOwner
    epochs = {p: cluster.partition_state(topic, p)["leader_epoch"] for p in lost}

    cluster.pause(victim)
    try:
        wait_until(lambda: not zk.exists(f"/brokers/ids/{victim}"), 30,
                   f"ZooKeeper to expire broker {victim}'s session")
        wait_until(lambda: all(cluster.partition_state(topic, p)["leader"] == -1 for p in lost), 30,
                   f"partitions {lost} offline")
    finally:
        cluster.resume(victim)

    cluster.wait_until_registered([victim])
    assert zk.get(f"/brokers/ids/{victim}")[1].ephemeralOwner != old_owner  # a new session
    wait_until(lambda: all(cluster.partition_state(topic, p)["leader"] == victim
                           and cluster.partition_state(topic, p)["leader_epoch"] > epochs[p]
                           for p in lost), 30, f"broker {victim} to lead {lost} again")
    wait_until(lambda: all(code == 0 for code, _ in
                           _partition_errors(cluster.broker(victim).bootstrap, topic).values()),
               30, f"broker {victim}'s Metadata to show every partition led")
    after = _produce_keyed(cluster.broker(victim).bootstrap, topic, 600, prefix="after-")
    assert {p for p, _, _, _ in after.acked} >= set(lost)
    cluster.wait_until_led(topic, 6)
    everything = _read_all(cluster.bootstrap, topic, 6)
    assert collections.Counter(everything) == collections.Counter(before.acked + after.acked)


def test_a_session_expiry_does_not_start_a_thread_per_partition(cluster_factory):
    """Each ZooKeeper watch re-reads its znode when a new session begins, and a
    broker watches every partition's state: the re-reads share a few threads
    instead of one thread each (a broker with 1,000 partitions started ~1,000
    threads at every session expiry)."""
    cluster = cluster_factory(size=1)
    topic = _name("many")
    partitions = 300
    _create_topic(cluster.bootstrap, topic, partitions)
    cluster.wait_for_leaders(topic, partitions, timeout=120)
    broker = cluster.broker(0)
    zk = cluster.zk_client()
    tasks = Path(f"/proc/{broker.pid}/task")
    settled = len(list(tasks.iterdir()))
    cluster.pause(0)
    try:
        wait_until(lambda: not zk.exists("/brokers/ids/0"), 30,
                   "ZooKeeper to expire the paused broker's session")
    finally:
        cluster.resume(0)
    peak = settled
    done = False

    def sample() -> bool:
        nonlocal peak
        try:
            peak = max(peak, len(list(tasks.iterdir())))
        except OSError:  # a thread ending while listed
            pass
        return done
    # every 10 ms: a thread per partition lives far longer than that (each
    # re-reads a znode over the new session)
    sampler = threading.Thread(target=wait_until,
                               args=(sample, 600, "the test to end sampling", 0.01))
    sampler.start()
    try:
        cluster.wait_until_registered([0])
        wait_until(lambda: all(s["leader"] == 0 for s in (
            cluster.partition_state(topic, p) for p in range(partitions))), 60,
            "the broker leading its partitions again")
        wait_until(lambda: all(code == 0 for code, _ in
                               _partition_errors(broker.bootstrap, topic).values()),
                   60, "the broker's Metadata showing every partition led")
    finally:
        done = True
        sampler.join()
    assert peak - settled < partitions / 3, (settled, peak)


@pytest.mark.parametrize("fault", ["paused", "killed"])
def test_a_broker_starting_while_zookeeper_is_away_comes_up_when_it_is_back(cluster_factory,
                                                                             fault):
    """ZooKeeper stops answering (SIGSTOP) or dies (SIGKILL, then starts again)
    while a broker starts, for longer than the broker's session: the broker
    waits, takes the new session ZooKeeper gives it, and comes up and serves
    once ZooKeeper is back, as Kafka's does, instead of exiting on
    SessionExpiredError halfway through its start."""
    cluster = cluster_factory(size=1)
    topic = _name("restarted")
    _create_topic(cluster.bootstrap, topic, 3)
    cluster.wait_for_leaders(topic, 3)
    before = _produce_keyed(cluster.bootstrap, topic, 30)
    cluster.terminate(0)
    # The broker starts again through a relay that goes quiet right after the
    # broker's own session is set up (its first connection only checks the
    # chroot): its first request after that finds ZooKeeper away, whatever
    # the machine's speed. A pause timed from its log could come after the
    # broker had registered.
    relay = ZooKeeperRelay(cluster.zk.connect)
    cluster.broker_overrides[0] = {"zookeeper.connect": relay.connect + cluster.chroot}
    broker = cluster.brokers[0] = cluster.broker_process(0)
    relay.hold_after_handshake(2)
    since = broker.log_path.stat().st_size
    failures: list[BaseException] = []

    def start() -> None:
        try:
            broker.start()
        except BaseException as e:  # reported by the test
            failures.append(e)
    starting = threading.Thread(target=start)
    starting.start()
    try:
        wait_until(relay.held.is_set, 60, "the starting broker's session set up")
        if fault == "paused":
            cluster.zk.pause()
        else:
            cluster.zk.kill()
        # The broker's first request is held; it waits until ZooKeeper answers
        cluster.wait_for_log(0, "this broker waits for it to start", since)
        # The fault lasts past the broker's session, so ZooKeeper expires it.
        time.sleep(cluster.session_timeout_ms / 1000 * 2)
        if fault == "paused":
            cluster.zk.resume()
        else:
            cluster.zk.start()
        relay.release()
        starting.join(120)
        assert not starting.is_alive() and not failures, failures
    finally:
        relay.release()
    try:
        cluster.wait_until_registered([0])
        cluster.wait_for_leaders(topic, 3)
        after = _produce_keyed(cluster.bootstrap, topic, 30, prefix="after-")
        got = _read_all(cluster.bootstrap, topic, 3)
        assert len(got) == len(before.acked) + len(after.acked)
    finally:
        cluster.terminate(0)  # before its relay goes
        relay.close()


def test_paused_controller_is_replaced_and_fenced(cluster_factory):
    """The controller stops answering (SIGSTOP) past its session timeout: another
    broker takes over with a higher epoch. Resumed, the old one finds it is no
    longer controller, leaves the new controller's decisions standing, and gets
    its partitions back from the new controller."""
    cluster = cluster_factory()
    topic = _name("zombie")
    _create_topic(cluster.bootstrap, topic, 6)
    leaders = cluster.wait_for_leaders(topic, 6)
    old = cluster.controller_id()
    old_epoch = cluster.controller_epoch()
    lost = sorted(p for p, l in leaders.items() if l == old)
    epochs = {p: cluster.partition_state(topic, p)["leader_epoch"] for p in lost}

    cluster.pause(old)
    try:
        new = cluster.wait_for_controller(among=[i for i in range(3) if i != old])
        wait_until(lambda: cluster.controller_epoch() > old_epoch, 30, "/controller_epoch to grow")
        wait_until(lambda: all(cluster.partition_state(topic, p)["leader"] == -1 for p in lost), 30,
                   f"the paused controller's partitions {lost} offline")
    finally:
        cluster.resume(old)
    new_epoch = cluster.controller_epoch()

    cluster.wait_until_registered([old])
    wait_until(lambda: all(cluster.partition_state(topic, p)["leader"] == old
                           and cluster.partition_state(topic, p)["leader_epoch"] > epochs[p]
                           for p in lost), 30, f"broker {old} to lead {lost} again")
    wait_until(lambda: _metadata(cluster.broker(old).bootstrap, []).controller_id == new, 30,
               f"broker {old} to name broker {new} as controller")
    assert (cluster.controller_id(), cluster.controller_epoch()) == (new, new_epoch)
    for p in range(6):
        assert cluster.partition_state(topic, p)["controller_epoch"] <= new_epoch
    for p in lost:
        assert cluster.partition_state(topic, p)["controller_epoch"] == new_epoch
    acked = _produce_keyed(cluster.broker(old).bootstrap, topic, 300)
    cluster.wait_until_led(topic, 6)
    assert collections.Counter(_read_all(cluster.bootstrap, topic, 6)) == collections.Counter(acked.acked)


def test_committed_offsets_survive_a_coordinator_crash(cluster_factory):
    cluster = cluster_factory()
    topic = _name("coord")
    _create_topic(cluster.bootstrap, topic, 3)
    cluster.wait_for_leaders(topic, 3)
    acks = _produce_keyed(cluster.bootstrap, topic, 300)
    ends = collections.Counter()
    for p, off, _, _ in acks.acked:
        ends[p] = max(ends[p], off + 1)
    group, coordinator = _group_coordinated_by_other(cluster, not_on=cluster.controller_id(),
                                                     prefix="crash")
    offsets_partition = _offsets_partition(group)

    def consume(expect: int, commit: bool) -> list:
        # A short session: the first consumer's LeaveGroup makes the coordinator
        # write the group empty without waiting for the followers (as Kafka's
        # does); killed right after, the new coordinator may load the group with
        # that member still in it, and a join then waits out its session.
        c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False,
                      "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000})
        got = []
        try:
            c.subscribe([topic])
            deadline = time.monotonic() + 60
            while len(got) < expect:
                assert time.monotonic() < deadline, f"consumed {len(got)} of {expect}"
                msg = c.poll(0.5)
                if msg is not None:
                    assert msg.error() is None, msg.error()
                    got.append(msg.value())
            if commit:
                c.commit(asynchronous=False)
        finally:
            c.close()
        return got

    assert len(consume(300, commit=True)) == 300
    # __consumer_offsets has offsets.topic.replication.factor (Kafka's 3) replicas:
    # another in-sync replica of the group's partition takes the coordinator over
    cluster.kill(coordinator)
    other = next(i for i in range(3) if i != coordinator)

    def new_coordinator():
        code, node = _find_coordinator(cluster.broker(other).bootstrap, group)
        return (node,) if code == 0 and node != coordinator else None
    successor, = wait_until(new_coordinator, 30, f"a coordinator for {group} other than "
                                                 f"broker {coordinator}")
    assert cluster.partition_state("__consumer_offsets", offsets_partition)["leader"] == successor

    def committed():
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        try:
            result = admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group)])[group].result(30)
        except KafkaException:
            return None  # the new coordinator is still loading: retriable
        return {tp.partition: tp.offset for tp in result.topic_partitions}
    assert wait_until(committed, 30, "the committed offsets from the new coordinator") == dict(ends)
    # The group resumes where it committed: a marker written to a partition is the
    # first record the group reads of it (a record before one would be one delivered
    # again). The crashed broker's partitions (one replica each) stay offline until
    # it is back, and nothing of theirs can be read meanwhile.
    offline = sorted(p for p, replicas in cluster.assignment(topic)["partitions"].items()
                     if coordinator in replicas)
    online = [p for p in range(3) if p not in offline]

    def write_markers(partitions: list[int]) -> None:
        acks = Acks()
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for partition in partitions:
            producer.produce(topic, value=b"marker-%d" % partition, partition=partition,
                             on_delivery=acks)
        assert producer.flush(60) == 0 and not acks.errors, acks.errors

    write_markers(online)
    assert sorted(consume(len(online), commit=False)) == [b"marker-%d" % p for p in online]

    cluster.restart(coordinator)
    write_markers(offline)
    assert sorted(consume(3, commit=False)) == [b"marker-%d" % p for p in range(3)]


def test_a_deletion_marked_by_a_tool_is_carried_out(zk_cluster: Cluster):
    """What a ZooKeeper-era kafka-topics --delete writes: the marker under
    /admin/delete_topics. The controller deletes the topic, every broker deletes its
    logs, and the marker goes when the deletion is done."""
    topic = _name("marked")
    _create_topic(zk_cluster.broker(0).bootstrap, topic, 3)
    zk_cluster.wait_for_leaders(topic, 3)

    def replica_dirs():
        return [d for i in range(3) for d in zk_cluster.broker(i).data_dir.glob(f"{topic}-*")]
    # one replica per partition, spread over the brokers: each broker makes its log
    # when its own pass reaches the topic, which may come after the controller has
    # elected the leaders (as in Kafka, where LeaderAndIsr creates the log)
    wait_until(lambda: len(replica_dirs()) == 3, what="a log dir for each partition")
    dirs = replica_dirs()
    zk = zk_cluster.zk_client()
    marks = zk_cluster.log_marks()
    zk.create(f"/admin/delete_topics/{topic}", b"")
    wait_until(lambda: not zk.exists(f"/admin/delete_topics/{topic}"), what="the marker removed")
    assert not zk.exists(f"/brokers/topics/{topic}") and not zk.exists(f"/config/topics/{topic}")
    wait_until(lambda: all(topic not in {t.name for t in _metadata(
        zk_cluster.broker(i).bootstrap, None).topics} for i in range(3)),
        what="the topic gone from every broker's Metadata")
    wait_until(lambda: not any(d.exists() for d in dirs), what="every broker's logs deleted")
    for i, since in marks.items():  # a deleted topic is not reported as an unknown one
        zk_cluster.wait_for_log(i, f"topic {topic} was deleted", since)
        with open(zk_cluster.brokers[i].log_path, "rb") as f:
            f.seek(since)
            assert b"is not in the cluster's metadata" not in f.read()
    # internal topics are not deleted on a marker's say-so
    _offsets_topic_leaders(zk_cluster)
    zk.create("/admin/delete_topics/__consumer_offsets", b"")
    wait_until(lambda: not zk.exists("/admin/delete_topics/__consumer_offsets"),
               what="the internal topic's marker dropped")
    assert zk.exists("/brokers/topics/__consumer_offsets")


def test_a_topic_deleted_while_coming_online_leaves_its_name_usable(zk_cluster: Cluster):
    """DeleteTopics right after CreateTopics, while the controller is still writing
    the partitions' states: the deletion completes and the name can be used again
    (a controller write must never re-create the deleted topic's znode)."""
    admin = AdminClient({"bootstrap.servers": zk_cluster.bootstrap})
    zk = zk_cluster.zk_client()
    topic = _name("flash")
    for _ in range(3):
        admin.create_topics([NewTopic(topic, 60, 1)])[topic].result(30)
        admin.delete_topics([topic], operation_timeout=30)[topic].result(60)
        assert not zk.exists(f"/brokers/topics/{topic}")
        assert not zk.exists(f"/admin/delete_topics/{topic}")
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    assert zk_cluster.wait_for_leaders(topic, 2)


def test_create_partitions_with_an_assignment_keeps_the_replication_factor(zk_cluster: Cluster):
    """CreatePartitions with explicit replica lists on a topic of three replicas
    (librdkafka's admin client, as kafka-topics --alter --replica-assignment
    sends it): taken when the new partitions have three replicas too, and
    refused INVALID_REPLICA_ASSIGNMENT, naming both factors, when they do not."""
    from confluent_kafka.admin import NewPartitions
    admin = AdminClient({"bootstrap.servers": zk_cluster.bootstrap})
    topic = _name("grown")
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    admin.create_partitions([NewPartitions(topic, 3, replica_assignment=[[1, 2, 0], [2, 0, 1]])])[
        topic].result(30)
    partitions = zk_cluster.assignment(topic)["partitions"]
    assert (len(partitions[0]), partitions[1], partitions[2]) == (3, [1, 2, 0], [2, 0, 1])
    assert zk_cluster.wait_for_leaders(topic, 3) == {0: zk_cluster.leaders(topic)[0], 1: 1, 2: 2}
    with pytest.raises(KafkaException) as info:
        admin.create_partitions([NewPartitions(topic, 4, replica_assignment=[[0]])])[
            topic].result(30)
    err = info.value.args[0]
    assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert "partition 0 has 3" in err.str() and "[1]" in err.str(), err.str()
    assert len(zk_cluster.assignment(topic)["partitions"]) == 3


def test_a_tool_rewriting_a_topic_without_its_id_loses_no_data(zk_cluster: Cluster):
    """A Kafka 2.x tool (kafka-topics --zookeeper --alter) rewrites the topic's znode
    without topic_id: the topic keeps its id, and no broker takes its logs for
    another topic's."""
    topic = _name("rewritten")
    _create_topic(zk_cluster.broker(0).bootstrap, topic, 3)
    zk_cluster.wait_for_leaders(topic, 3)
    acks = _produce_keyed(zk_cluster.bootstrap, topic, 90)
    zk = zk_cluster.zk_client()
    before = json.loads(zk.get(f"/brokers/topics/{topic}")[0])
    zk.set(f"/brokers/topics/{topic}", json.dumps(
        {"version": 1, "partitions": before["partitions"]}).encode())
    wait_until(lambda: json.loads(zk.get(f"/brokers/topics/{topic}")[0]).get("topic_id")
               == before["topic_id"], what="the known topic id written back")
    # Every broker's metadata worker has passed over the change once it has opened
    # its log of a topic created after it (ZooKeeper tells each broker of changes in
    # their order): then no broker set the topic's logs aside, and every record reads.
    marker = _name("after-rewrite")
    zk.create(f"/brokers/topics/{marker}", json.dumps({"version": 1, "partitions": {"0": [0, 1, 2]}}).encode())
    wait_until(lambda: all((zk_cluster.broker(i).data_dir / f"{marker}-0").is_dir() for i in range(3)),
               30, f"every broker's log of {marker}")
    # (this topic's: other tests of the shared cluster may leave strays of their own)
    assert not [d for i in range(3) for d in zk_cluster.broker(i).data_dir.iterdir()
                if d.name.startswith(f"{topic}-") and d.name.endswith("-stray")]
    got = _read_all(zk_cluster.bootstrap, topic, 3)
    assert len(got) == len(acks.acked) == 90


def test_a_quota_set_through_one_broker_is_enforced_by_another(zk_cluster: Cluster):
    """AlterClientQuotas on broker 0 writes Kafka's /config/clients/<id> znode
    and change notice; the broker leading the partition throttles the client."""
    from samsa.protocol.messages import AlterClientQuotasRequest as Q
    topic, client_id = _name("quota"), _name("quota-client")
    _create_topic(zk_cluster.broker(0).bootstrap, topic, 3)
    # the leaders in ZooKeeper are not yet the leaders' own: a leader answers
    # UNKNOWN_TOPIC_OR_PARTITION until the controller's word reaches it
    leaders = zk_cluster.wait_until_led(topic, 3)
    partition, leader = next(((p, b) for p, b in sorted(leaders.items()) if b != 0),
                             sorted(leaders.items())[0])

    def alter(remove: bool) -> None:
        with SimpleClient(zk_cluster.broker(0).bootstrap) as c:
            r = c.call(49, Q(validate_only=False, entries=[Q.EntryData(
                entity=[Q.EntityData(entity_type="client-id", entity_name=client_id)],
                ops=[Q.OpData(key="producer_byte_rate", value=1000.0, remove=remove)])]))
        assert r.entries[0].error_code == 0

    def throttled() -> int:
        # a fresh connection each time: a throttled one is muted for a while
        with SimpleClient(zk_cluster.broker(leader).bootstrap, client_id=client_id) as c:
            r = c.call(PRODUCE, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
                ProduceRequest.TopicProduceData(name=topic, partition_data=[
                    ProduceRequest.PartitionProduceData(
                        index=partition, records=build_batch([(None, b"z" * 30_000, [], None)]))])]),
                highest=12)
        assert r.responses[0].partition_responses[0].error_code == 0
        return r.throttle_time_ms

    assert throttled() == 0
    alter(remove=False)
    try:
        data, _ = zk_cluster.zk_client().get(f"/config/clients/{client_id}")
        assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "1000"}}
        assert wait_until(throttled, 20, f"broker {leader} throttling {client_id}") > 0
    finally:
        alter(remove=True)


def test_a_dynamic_key_samsa_does_not_use_is_kept_in_zookeeper(zk_cluster: Cluster):
    """A key Kafka changes at run time but samsa does not use (Kerberos,
    thread counts) is accepted, written to Kafka's /config/brokers/<id>, and
    described as the broker's dynamic config."""
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ConfigSource, ResourceType)
    admin = AdminClient({"bootstrap.servers": zk_cluster.bootstrap})
    keys = {"sasl.kerberos.min.time.before.relogin": "60001", "background.threads": "11"}

    def alter(op):
        res = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
            ConfigEntry(k, v, incremental_operation=op) for k, v in keys.items()])
        admin.incremental_alter_configs([res])[res].result(30)
    alter(AlterConfigOpType.SET)
    try:
        stored = json.loads(zk_cluster.zk_client().get("/config/brokers/1")[0])
        assert {k: stored["config"].get(k) for k in keys} == keys
        res = ConfigResource(ResourceType.BROKER, "1")
        described = admin.describe_configs([res])[res].result(30)
        for k, v in keys.items():
            assert (described[k].value, described[k].source) == (
                v, ConfigSource.DYNAMIC_BROKER_CONFIG.value), described[k]
    finally:
        alter(AlterConfigOpType.DELETE)

    # a cluster-wide default set through broker 0 reaches broker 1's answers
    from samsa.protocol.messages import IncrementalAlterConfigsRequest as R

    def set_default(op, value=None):
        with SimpleClient(zk_cluster.broker(0).bootstrap) as c:
            r = c.call(44, R(validate_only=False, resources=[R.AlterConfigsResource(
                resource_type=4, resource_name="", configs=[R.AlterableConfig(
                    name="log.cleaner.threads", config_operation=op, value=value)])]))
        assert r.responses[0].error_code == 0, r

    def described_on_broker_1():
        res = ConfigResource(ResourceType.BROKER, "1")
        entry = admin.describe_configs([res])[res].result(30)["log.cleaner.threads"]
        return entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value and entry
    set_default(0, "3")
    try:
        assert wait_until(described_on_broker_1, 30, "broker 1 to describe the default").value \
            == "3"
    finally:
        set_default(1)
