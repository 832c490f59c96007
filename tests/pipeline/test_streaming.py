"""Streaming read and write through ``readStream``/``writeStream.format("samsa")``: real Spark
(local[2]) against a real samsa broker.

Micro-batches are observed with ``foreachBatch`` (which runs in this process), keyed by batch id:
Spark may run a batch again after a stop or a failure, with the same offsets, and the batch id
says which run replaced which. Every wait has a deadline; queries are stopped in ``finally``.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.support.cluster import Cluster
from tests.support.waiting import wait_until
from tests.support.zookeeper import zookeeper_installed

from .conftest import consume_all, create_topic, produce

pytestmark = pytest.mark.timeout(240)

QUERY_TIMEOUT = 120     # seconds a query gets to finish what it was given


@pytest.fixture
def broker(module_broker):
    """One broker for the module (tests/conftest.py): every test here uses topics of names of
    its own (a parametrized test, one per parameter)."""
    return module_broker


def stream(spark, bootstrap, **opts):
    r = spark.readStream.format("samsa").option("kafka.bootstrap.servers", bootstrap)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


class Batches:
    """foreachBatch sink: the (topic, partition, offset) of each batch id's rows; a batch run again
    replaces its earlier run, as a sink keyed by batch id would."""

    def __init__(self, columns=("topic", "partition", "offset")):
        self.columns = list(columns)
        self.lock = threading.Lock()
        self.by_id: dict[int, list] = {}

    def __call__(self, df, batch_id):
        rows = [tuple(bytes(v) if isinstance(v, bytearray) else v for v in r)
                for r in df.select(*self.columns).collect()]
        with self.lock:
            self.by_id[batch_id] = rows

    def sizes(self) -> list[int]:
        with self.lock:
            return [len(self.by_id[i]) for i in sorted(self.by_id)]

    def rows(self) -> list:
        with self.lock:
            return [r for i in sorted(self.by_id) for r in self.by_id[i]]

    def count(self) -> int:
        return len(self.rows())


def run_available_now(df, sink: Batches, checkpoint: str):
    """Trigger.AvailableNow: everything there is when the query starts, then the query stops."""
    q = df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint) \
        .trigger(availableNow=True).start()
    try:
        assert q.awaitTermination(QUERY_TIMEOUT), "availableNow query did not finish"
    finally:
        q.stop()
    return q


def fill(bootstrap, topic, counts: dict[int, int]):
    produce(bootstrap, [{"topic": topic, "partition": p, "value": f"{p}-{i}".encode()}
                        for p, n in counts.items() for i in range(n)])


def error_of(action) -> str:
    with pytest.raises(Exception) as e:
        action()
    return str(e.value)


def every_offset(counts: dict[int, int], topic: str, first: dict[int, int] | None = None) -> list:
    first = first or {}
    return sorted((topic, p, o) for p, n in counts.items() for o in range(first.get(p, 0), n))


# ---------------------------------------------------------------------------------------------
# Read

def test_max_offsets_per_trigger_batches(spark, broker, tmp_path):
    b = broker.bootstrap
    create_topic(b, "paced", 2)
    fill(b, "paced", {0: 40, 1: 20})
    sink = Batches()
    run_available_now(stream(spark, b, subscribe="paced", startingOffsets="earliest", maxOffsetsPerTrigger="30"),
                      sink, str(tmp_path / "cp"))
    # 30 shared by backlog: 20 + 10, then the remaining 20 + 10.
    assert sink.sizes() == [30, 30]
    first = sink.by_id[min(sink.by_id)]
    assert sorted(first) == [("paced", 0, o) for o in range(20)] + [("paced", 1, o) for o in range(10)]
    assert sorted(sink.rows()) == every_offset({0: 40, 1: 20}, "paced")

    # Uneven: a partition whose share is below one still gets one record per batch.
    create_topic(b, "skewed", 2)
    fill(b, "skewed", {0: 19, 1: 1})
    sink = Batches()
    run_available_now(stream(spark, b, subscribe="skewed", startingOffsets="earliest", maxOffsetsPerTrigger="10"),
                      sink, str(tmp_path / "cp2"))
    assert sink.sizes() == [10, 10]             # 9 + 1 (0.5 rounds up), then the other 10
    assert sorted(sink.rows()) == every_offset({0: 19, 1: 1}, "skewed")


def test_restart_from_checkpoint_reads_each_record_once(spark, broker, tmp_path):
    b = broker.bootstrap
    create_topic(b, "resumed", 2)
    fill(b, "resumed", {0: 30, 1: 30})
    checkpoint = str(tmp_path / "cp")
    sink = Batches()
    df = stream(spark, b, subscribe="resumed", startingOffsets="earliest", maxOffsetsPerTrigger="6")
    q = df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint) \
        .trigger(processingTime="200 milliseconds").start()
    try:
        # Stopped part way: some batches done, most records not read yet.
        wait_until(lambda: len(sink.by_id) >= 2, QUERY_TIMEOUT, "two micro-batches")
    finally:
        q.stop()
    first_run = sink.count()
    assert 12 <= first_run < 60
    fill(b, "resumed", {0: 5, 1: 5})            # produced while the query is down
    # startingOffsets is for new queries only: the restart resumes from the checkpoint.
    run_available_now(stream(spark, b, subscribe="resumed", startingOffsets="latest", maxOffsetsPerTrigger="25"),
                      sink, checkpoint)
    got = sink.rows()
    assert len(got) == len(set(got)) == 70
    assert sorted(got) == every_offset({0: 35, 1: 35}, "resumed")


def test_new_partitions_are_read_from_earliest(spark, broker, tmp_path):
    b = broker.bootstrap
    create_topic(b, "growing", 1)
    sink = Batches()
    df = stream(spark, b, subscribe="growing")          # latest: only what comes after the start
    q = df.writeStream.foreachBatch(sink).option("checkpointLocation", str(tmp_path / "cp")) \
        .trigger(processingTime="200 milliseconds").start()
    try:
        wait_until(lambda: q.lastProgress is not None, QUERY_TIMEOUT, "the first trigger")
        fill(b, "growing", {0: 5})
        wait_until(lambda: sink.count() == 5, QUERY_TIMEOUT, "the first partition's records")
        admin = AdminClient({"bootstrap.servers": b})
        for fut in admin.create_partitions([NewPartitions("growing", 3)]).values():
            fut.result(timeout=30)
        # Produced before the query sees the new partitions: still read (new partitions start at earliest).
        fill(b, "growing", {1: 4, 2: 3})
        wait_until(lambda: sink.count() >= 12, QUERY_TIMEOUT, "the new partitions' records")
        assert q.exception() is None
    finally:
        q.stop()
    assert sorted(sink.rows()) == every_offset({0: 5, 1: 4, 2: 3}, "growing")


def test_fail_on_data_loss(spark, broker, tmp_path):
    b = broker.bootstrap
    create_topic(b, "aged", 1)
    fill(b, "aged", {0: 3})
    checkpoint = tmp_path / "cp"
    sink = Batches()
    df = stream(spark, b, subscribe="aged", startingOffsets="earliest")
    run_available_now(df, sink, str(checkpoint))
    assert sink.count() == 3
    # While the query is down, records it has not read are removed (as retention would).
    fill(b, "aged", {0: 7})
    admin = AdminClient({"bootstrap.servers": b})
    for fut in admin.delete_records([TopicPartition("aged", 0, 8)]).values():
        fut.result(timeout=30)

    import shutil
    shutil.copytree(checkpoint, tmp_path / "cp-copy")
    msg = error_of(lambda: run_available_now(df, Batches(), str(checkpoint)))
    assert "Some data may have been lost" in msg and "topic-partition aged-0" in msg
    assert "offsets [3, 10) were to be read, the partition now holds [8, 10)" in msg

    sink = Batches()
    run_available_now(stream(spark, b, subscribe="aged", startingOffsets="earliest", failOnDataLoss="false"),
                      sink, str(tmp_path / "cp-copy"))
    assert sorted(sink.rows()) == [("aged", 0, 8), ("aged", 0, 9)]


@pytest.mark.parametrize("opts, message", [
    ({"endingOffsets": "latest"}, "ending offset not valid in streaming queries (option 'endingOffsets')"),
    ({"endingTimestamp": "1"}, "ending timestamp not valid in streaming queries (option 'endingTimestamp')"),
    ({"maxOffsetsPerTrigger": "0"}, "Invalid value '0' for option 'maxOffsetsPerTrigger'"),
    ({"maxTriggerDelay": "soon"}, "Invalid value 'soon' for option 'maxTriggerDelay'"),
])
def test_bad_streaming_options(spark, broker, tmp_path, opts, message):
    topic = f"bad-options-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, topic, 1)
    msg = error_of(lambda: run_available_now(stream(spark, broker.bootstrap, subscribe=topic, **opts),
                                             Batches(), str(tmp_path / "cp")))
    assert message in msg


@pytest.fixture
def cluster():
    """Three samsa brokers and a ZooKeeper (tests/support/cluster.py), min.insync.replicas=2."""
    if not zookeeper_installed():
        pytest.fail("ZooKeeper is not installed (Debian package 'zookeeper'; scripts/setup.sh --test installs it)")
    work = Path(tempfile.mkdtemp(prefix="samsa-cluster-"))
    c = Cluster(work, size=3, overrides={"min.insync.replicas": "2"})
    try:
        yield c.start()
    finally:
        c.stop()
        shutil.rmtree(work, ignore_errors=True)


def test_broker_killed_mid_stream(spark, cluster, tmp_path):
    """RF=3, min.insync.replicas=2, acks=all: the leader of a partition is killed (SIGKILL) while
    records flow; the query keeps running and reads every acknowledged record exactly once."""
    b = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    for fut in admin.create_topics([NewTopic("replicated", 3, 3)]).values():
        fut.result(timeout=30)
    cluster.wait_for_leaders("replicated", 3)

    acked: list[bytes] = []
    failed: list = []
    stop = threading.Event()

    def produce_steadily():
        p = Producer({"bootstrap.servers": b, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
                      "message.timeout.ms": 60_000})
        on_delivery = lambda err, msg: (failed if err else acked).append(err or msg.value())
        i = 0
        while not stop.is_set():
            p.produce("replicated", key=str(i % 7).encode(), value=f"r{i}".encode(), on_delivery=on_delivery)
            p.poll(0.01)
            i += 1
        p.flush(90)

    sink = Batches(columns=("partition", "offset", "value"))
    q = stream(spark, b, subscribe="replicated", startingOffsets="earliest").writeStream.foreachBatch(sink) \
        .option("checkpointLocation", str(tmp_path / "cp")).trigger(processingTime="300 milliseconds").start()
    producer = threading.Thread(target=produce_steadily, daemon=True)
    producer.start()
    try:
        wait_until(lambda: sink.count() >= 300, QUERY_TIMEOUT, "records before the kill")
        victim = cluster.leaders("replicated")[0]
        cluster.kill(victim)
        wait_until(lambda: all(l not in (-1, victim) for l in cluster.leaders("replicated").values()),
                   60, "new leaders")
        seen = sink.count()
        wait_until(lambda: sink.count() >= seen + 300, QUERY_TIMEOUT, "records after the kill")
        stop.set()
        producer.join(120)
        assert not producer.is_alive()
        want = set(acked)
        wait_until(lambda: want <= {r[2] for r in sink.rows()}, QUERY_TIMEOUT, "every acknowledged record")
        assert q.isActive and q.exception() is None
    finally:
        stop.set()
        q.stop()
    rows = sink.rows()
    assert len({r[:2] for r in rows}) == len(rows), "a record read twice"
    values = [r[2] for r in rows]
    assert len(set(values)) == len(values)
    assert not failed, failed[:3]


# ---------------------------------------------------------------------------------------------
# Write

@pytest.mark.parametrize("sink", [{}, {"exactlyOnce": "true"}], ids=["at-least-once", "exactly-once"])
def test_stream_write_reads_back_identical(spark, broker, tmp_path, sink):
    b = broker.bootstrap
    suffix = "eos" if sink else "alo"
    source_topic, copy_topic = f"source-{suffix}", f"copy-{suffix}"
    create_topic(b, source_topic, 2)
    create_topic(b, copy_topic, 2)
    records = []
    for i in range(50):
        r = {"topic": source_topic, "partition": i % 2, "value": f"v{i}".encode(), "timestamp": 1_700_000_000_000 + i}
        if i % 3:
            r["key"] = f"k{i}".encode()
        if i % 4 == 0:
            r["headers"] = [("h", f"{i}".encode()), ("none", None)]
        records.append(r)
    produce(b, records)
    df = stream(spark, b, subscribe=source_topic, startingOffsets="earliest", includeHeaders="true",
                maxOffsetsPerTrigger="20")
    q = df.selectExpr("key", "value", "partition", "headers", "timestamp") \
        .writeStream.format("samsa").option("kafka.bootstrap.servers", b).option("topic", copy_topic) \
        .options(**sink).option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True).start()
    try:
        assert q.awaitTermination(QUERY_TIMEOUT)
        assert len(q.recentProgress) >= 3       # 50 records at 20 per trigger
    finally:
        q.stop()
    source = consume_all(b, source_topic)
    copied = consume_all(b, copy_topic, isolation="read_committed")
    # Identical but for the topic: key, value, partition, offset (order kept per partition),
    # timestamp, timestamp type, headers. Exactly once, the order is kept but not the offsets:
    # each transaction's commit marker takes an offset of its own.
    if sink:
        assert [r[:2] + r[3:4] + r[5:] for r in copied] == [r[:2] + r[3:4] + r[5:] for r in source]
    else:
        assert [r[:2] + r[3:] for r in copied] == [r[:2] + r[3:] for r in source]


def test_stream_write_schema_error(spark, broker, tmp_path):
    create_topic(broker.bootstrap, "src", 1)
    df = stream(spark, broker.bootstrap, subscribe="src").selectExpr("key")
    w = df.writeStream.format("samsa").option("kafka.bootstrap.servers", broker.bootstrap) \
        .option("topic", "x").option("checkpointLocation", str(tmp_path / "cp")).trigger(availableNow=True)

    def run():
        q = w.start()
        try:
            q.awaitTermination(QUERY_TIMEOUT)
        finally:
            q.stop()
    assert "Required attribute 'value' not found" in error_of(run)


def test_exactly_once_option_errors(spark, broker, tmp_path):
    b = broker.bootstrap
    create_topic(b, "eos-src", 1)
    df = stream(spark, b, subscribe="eos-src").selectExpr("value")

    def run(**opts):
        w = df.writeStream.format("samsa").option("kafka.bootstrap.servers", b) \
            .option("checkpointLocation", str(tmp_path / "cp")).options(**opts).trigger(availableNow=True)

        def go():
            q = w.start()
            try:
                q.awaitTermination(QUERY_TIMEOUT)
            finally:
                q.stop()
        return error_of(go)
    msg = run(topic="no-such-output", exactlyOnce="true")
    assert "Option 'topic': the exactly-once sink keeps its committed batch ids on partition 0 of " \
           "topic 'no-such-output', which does not exist" in msg
    assert "Option 'transactionalIdPrefix' is only used with 'exactlyOnce' set to 'true'" in \
        run(topic="eos-src", transactionalIdPrefix="p")
    batch = spark.range(1).selectExpr("CAST(id AS STRING) AS value").write.format("samsa") \
        .option("kafka.bootstrap.servers", b).option("topic", "eos-src").option("exactlyOnce", "true").mode("append")
    assert "Option 'exactlyOnce' is for streaming writes (writeStream)" in error_of(batch.save)
