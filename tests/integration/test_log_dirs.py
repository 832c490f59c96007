"""DescribeLogDirs (issue 15, item 6): per log dir, each partition's size on
disk, and the disk's total and usable bytes, through kafka-python's admin
client and the wire. AlterReplicaLogDirs (issue 24): moving a partition to
another log dir with the Java Admin client, seen in progress as a future
replica, all records readable during, after it and after a restart."""
from __future__ import annotations

import os
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient

from samsa.client.blocking import SimpleClient
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import AlterReplicaLogDirsRequest, DescribeLogDirsRequest
from tests.support.waiting import wait_until


def _segment_bytes(broker, topic, partition):
    d = broker.data_dir / f"{topic}-{partition}"
    return sum(os.path.getsize(d / f) for f in os.listdir(d) if f.endswith(".log"))


def _fill(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic("a", 2, 1), NewTopic("b", 1, 1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(300):
        producer.produce("a", b"v" * 100, partition=i % 2)
    producer.produce("b", b"w" * 5000, partition=0)
    producer.flush(30)


def test_sizes_match_the_files_and_the_disk(broker):
    _fill(broker)
    with SimpleClient(broker.bootstrap) as client:
        resp = client.call(35, DescribeLogDirsRequest(topics=None))
    assert resp.error_code == 0 and len(resp.results) == 1
    result = resp.results[0]
    assert result.error_code == 0 and result.log_dir == str(broker.data_dir)
    sizes = {(t.name, p.partition_index): p.partition_size
             for t in result.topics for p in t.partitions}
    for key in [("a", 0), ("a", 1), ("b", 0)]:
        assert sizes[key] == _segment_bytes(broker, *key) > 0
    assert all(p.offset_lag == 0 and not p.is_future_key
               for t in result.topics for p in t.partitions)
    st = os.statvfs(broker.data_dir)
    assert result.total_bytes == st.f_blocks * st.f_frsize
    assert 0 < result.usable_bytes <= result.total_bytes


def test_naming_topics_answers_only_those(broker):
    _fill(broker)
    with SimpleClient(broker.bootstrap) as client:
        resp = client.call(35, DescribeLogDirsRequest(topics=[
            DescribeLogDirsRequest.DescribableLogDirTopic(topic="a", partitions=[1])]))
    topics = resp.results[0].topics
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in topics] == [("a", [1])]


def test_kafka_python_admin_describes_log_dirs(broker):
    _fill(broker)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        answer = admin.describe_log_dirs()
    finally:
        admin.close()
    (only,) = answer
    assert only["broker"] == 0
    (log_dir,) = only["log_dirs"]
    assert log_dir["error_code"] == 0 and log_dir["log_dir"] == str(broker.data_dir)
    sizes = {(t["name"], p["partition_index"]): p["partition_size"]
             for t in log_dir["topics"] for p in t["partitions"]}
    assert sizes[("b", 0)] == _segment_bytes(broker, "b", 0) > 5000


# ---------------------------------------------------------------- AlterReplicaLogDirs

def _two_dir_broker(broker_factory, tmp_path, **overrides):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    b = broker_factory({"log.dirs": ",".join(map(str, dirs)), **overrides})
    return b, [str(d) for d in dirs]


def _where(dirs, name):
    return [d for d in dirs if os.path.isdir(os.path.join(d, name))]


def _produce(bootstrap, topic, start, n, size=1000):
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + n):
        producer.produce(topic, str(i).encode().ljust(size, b"."), partition=0)
    assert producer.flush(30) == 0


def _consume_all(bootstrap, topic, expected):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "log-dirs-check",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < expected and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and not msg.error():
                got.append(int(msg.value().rstrip(b".")))
        return got
    finally:
        consumer.close()


def _describe(bootstrap):
    with SimpleClient(bootstrap) as client:
        return client.call(35, DescribeLogDirsRequest(topics=None))


def _replicas(resp):
    """{(log dir, topic, partition, is future): (size, offset lag)}"""
    return {(r.log_dir, t.name, p.partition_index, p.is_future_key): (p.partition_size, p.offset_lag)
            for r in resp.results for t in r.topics for p in t.partitions}


def _set_move_rate(b, rate):
    """replica.alter.log.dirs.io.max.bytes.per.second in the broker's
    server.properties (read at its next start)."""
    key = "replica.alter.log.dirs.io.max.bytes.per.second"
    lines = [ln for ln in b.config_path.read_text().splitlines() if not ln.startswith(key)]
    b.config_path.write_text("\n".join(lines + [f"{key}={rate}"]) + "\n")


def test_java_admin_moves_a_partition_between_log_dirs(broker_factory, tmp_path, java_tools):
    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    b = broker_factory({"log.dirs": ",".join(dirs), "log.segment.delete.delay.ms": 0},
                       start=False)
    _set_move_rate(b, 2000)   # so slow that the move is still going when looked at
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("moved", 1, 1)])["moved"].result(30)
    _produce(b.bootstrap, "moved", 0, 600)
    (src,) = _where(dirs, "moved-0")
    (dst,) = [d for d in dirs if d != src]

    out = java_tools.run("LogDirs", "--bootstrap-server", b.bootstrap, "--alter", "--broker", 0,
                         "--dir", dst, "--partition", "moved:0").check()
    assert out.lines == ["moved-0\tOK"]
    _produce(b.bootstrap, "moved", 600, 100)   # while the copy is being made
    # the copy shows as the future replica in the destination, behind the current one
    described = java_tools.run("LogDirs", "--bootstrap-server", b.bootstrap, "--describe",
                               "--broker", 0).check().lines
    future = [ln for ln in described if ln.startswith(dst + "\tmoved-0\t")]
    current = [ln for ln in described if ln.startswith(src + "\tmoved-0\t")]
    assert len(future) == 1 and future[0].endswith("future=true"), described
    assert len(current) == 1 and current[0].endswith("future=false"), described
    lag = int(future[0].split("lag=")[1].split("\t")[0])
    assert 0 < lag <= 700, described
    replica = java_tools.run("LogDirs", "--bootstrap-server", b.bootstrap, "--describe-replica",
                             "--broker", 0, "--partition", "moved:0").check().lines
    assert replica[0].startswith(f"current={src}\tcurrentLag=0\tfuture={dst}\tfutureLag="), replica
    assert any(n.startswith("moved-0.") and n.endswith("-future") for n in os.listdir(dst))
    assert _consume_all(b.bootstrap, "moved", 700) == list(range(700))   # served meanwhile

    # killed mid-move, restarted without the throttle: the move goes on and ends
    b.kill()
    _set_move_rate(b, 10 ** 12)
    b.start()

    def moved():
        replicas = _replicas(_describe(b.bootstrap))
        return set(replicas) >= {(dst, "moved", 0, False)} and not any(
            k[1] == "moved" and (k[0] == src or k[3]) for k in replicas)
    wait_until(moved, timeout=60, what="the move to finish")
    assert _where(dirs, "moved-0") == [dst]
    assert any(n.endswith(".log") for n in os.listdir(os.path.join(dst, "moved-0")))
    wait_until(lambda: not any(n.startswith("moved-0") for n in os.listdir(src)),
               what="the old copy to be deleted")
    _produce(b.bootstrap, "moved", 700, 50)   # appends go on in the new dir
    assert _consume_all(b.bootstrap, "moved", 750) == list(range(750))
    replica = java_tools.run("LogDirs", "--bootstrap-server", b.bootstrap, "--describe-replica",
                             "--broker", 0, "--partition", "moved:0").check().lines
    assert replica == [f"current={dst}\tcurrentLag=0\tfuture=null\tfutureLag=-1"]

    b.stop()
    b.start()
    assert _where(dirs, "moved-0") == [dst]
    assert _consume_all(b.bootstrap, "moved", 750) == list(range(750))


def test_alter_replica_log_dirs_errors(broker_factory, tmp_path, java_tools):
    b, dirs = _two_dir_broker(broker_factory, tmp_path)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(30)
    _produce(b.bootstrap, "t", 0, 5)
    (here,) = _where(dirs, "t-0")
    (other,) = [d for d in dirs if d != here]

    def alter(path, *partitions):
        return java_tools.run("LogDirs", "--bootstrap-server", b.bootstrap, "--alter",
                              "--broker", 0, "--dir", path,
                              *[x for p in partitions for x in ("--partition", p)]).check().lines

    # where it already is: nothing to do
    assert alter(here, "t:0") == ["t-0\tOK"]
    assert _where(dirs, "t-0") == [here] and not any(n.endswith("-future") for n in os.listdir(other))
    # not one of log.dirs, or not given as an absolute path
    assert alter(str(tmp_path / "elsewhere"), "t:0") == ["t-0\tERROR LogDirNotFoundException"]
    assert alter(os.path.relpath(other), "t:0") == ["t-0\tERROR LogDirNotFoundException"]
    # a partition the cluster does not have
    assert alter(other, "nope:0", "t:5") == ["nope-0\tERROR UnknownTopicOrPartitionException",
                                              "t-5\tERROR UnknownTopicOrPartitionException"]
    # an offline dir (as a disk that went away)
    os.rename(other, other + ".gone")
    try:
        assert alter(other, "t:0") == ["t-0\tERROR KafkaStorageException"]
        resp = _describe(b.bootstrap)
        codes = {r.log_dir: r.error_code for r in resp.results}
        assert codes == {here: 0, other: ErrorCode.KAFKA_STORAGE_ERROR}
    finally:
        os.rename(other + ".gone", other)
    assert _consume_all(b.bootstrap, "t", 5) == list(range(5))


def test_alter_replica_log_dirs_v0_on_the_wire(broker_factory, tmp_path):
    """Version 0 (what pre-4.0 tools send) answers like v1."""
    b, dirs = _two_dir_broker(broker_factory, tmp_path)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic("w", 2, 1)])["w"].result(30)
    Q = AlterReplicaLogDirsRequest
    with SimpleClient(b.bootstrap) as client:
        resp = client.call(34, Q(dirs=[Q.AlterReplicaLogDir(path=dirs[1], topics=[
            Q.AlterReplicaLogDirTopic(name="w", partitions=[0, 1, 7])])]), highest=0)
    codes = {(t.topic_name, p.partition_index): p.error_code
             for t in resp.results for p in t.partitions}
    assert codes == {("w", 0): 0, ("w", 1): 0, ("w", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    wait_until(lambda: _where(dirs, "w-0") == [dirs[1]] and _where(dirs, "w-1") == [dirs[1]],
               what="both partitions in the second dir")


def test_follower_replica_moves_while_replicating(cluster_factory, tmp_path, java_tools):
    """In a ZooKeeper cluster: the Admin client routes the move to the broker
    named; a follower's log moves while the replica fetcher appends to it, and
    stays in sync; a partition the broker holds no replica of is
    REPLICA_NOT_AVAILABLE."""
    dirs = {i: [str(tmp_path / f"b{i}" / "d1"), str(tmp_path / f"b{i}" / "d2")] for i in (0, 1)}
    cluster = cluster_factory(size=2, overrides={"log.segment.delete.delay.ms": 0,
                                                 "replica.alter.log.dirs.io.max.bytes.per.second": 200000},
                              broker_overrides={i: {"log.dirs": ",".join(d)} for i, d in dirs.items()})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for f in admin.create_topics([NewTopic("r", 1, -1, replica_assignment=[[0, 1]]),
                                  NewTopic("only1", 1, -1, replica_assignment=[[1]])]).values():
        f.result(30)
    # led, not only elected: broker 1 makes its replica of only1, whose log dir
    # and AlterReplicaLogDirs are asked of it below, as it takes the role up
    for topic in ("r", "only1"):
        cluster.wait_until_led(topic, 1)
    _produce(cluster.bootstrap, "r", 0, 400)
    (src,) = _where(dirs[1], "r-0")
    (dst,) = [d for d in dirs[1] if d != src]

    def alter(broker, path, partition):
        return java_tools.run("LogDirs", "--bootstrap-server", cluster.bootstrap, "--alter",
                              "--broker", broker, "--dir", path, "--partition", partition).check().lines

    # broker 0 holds no replica of only1: REPLICA_NOT_AVAILABLE; broker 1 does
    q = AlterReplicaLogDirsRequest
    with SimpleClient(cluster.broker(0).bootstrap) as client:
        resp = client.call(34, q(dirs=[q.AlterReplicaLogDir(path=dirs[0][1], topics=[
            q.AlterReplicaLogDirTopic(name="only1", partitions=[0])])]))
    assert resp.results[0].partitions[0].error_code == ErrorCode.REPLICA_NOT_AVAILABLE
    (here,) = _where(dirs[1], "only1-0")
    assert alter(1, here, "only1:0") == ["only1-0\tOK"]

    assert alter(1, dst, "r:0") == ["r-0\tOK"]
    _produce(cluster.bootstrap, "r", 400, 200)   # replicated into the moving follower
    wait_until(lambda: _where(dirs[1], "r-0") == [dst], timeout=60, what="the follower's move")
    _produce(cluster.bootstrap, "r", 600, 100)
    wait_until(lambda: sorted(cluster.partition_state("r", 0)["isr"]) == [0, 1],
               what="both replicas in sync")
    # the moved follower holds every record: leading, it serves them all
    cluster.kill(0)
    wait_until(lambda: cluster.partition_state("r", 0)["leader"] == 1, what="broker 1 leading")
    assert _consume_all(cluster.broker(1).bootstrap, "r", 700) == list(range(700))
