"""The ``samsa`` Spark data source against one plain confluent-kafka consumer (issue 13).

Starts a samsa broker, fills a topic of 4 partitions with ``--records`` keyed records of
1 KiB values, then, in the same run and alternating, ``--runs`` times each:
  - consumer: one confluent-kafka Consumer in this process, all partitions assigned from the
    beginning, no group, ``consume()`` batches and fetch settings as large as help it (below),
    counting records and key+value bytes until every partition reaches its end offset;
  - spark sum (the headline): ``count(*)`` and ``sum(length(key) + length(value))``, both checked
    against the topic: every key and value is read by the query itself. (PySpark 4.3's Python
    data source scan turns every Arrow row into an UnsafeRow of all columns, copying keys and
    values, whatever the query uses: no column is skipped in any of these actions.)
  - spark noop: every column of every row written to Spark's ``noop`` sink;
  - spark count: ``load().count()``;
  - spark floor: the noop write of as many rows of the same shape from bench/spark_floor.py, a
    Python source yielding one prebuilt Arrow batch again and again (no broker, no client): what
    Spark itself costs to take these rows from any Python data source;
  - spark fixed cost: count() of one record per partition (planning, tasks, Python workers),
    to tell the per-query cost from the per-record one.
The Spark session is started (and timed) before the first run and reused; one untimed query
warms it (Python workers, JIT). Each figure is rows/s and MB/s (key+value bytes of the topic over
the wall time of the read/action). Ratios are Spark over the consumer, taken run by run (each
Spark action against the consumer run just before it), reported as median and range. Beside
them, the CPU seconds of each side (bench/cpu_time.py): the consumer's process, or Spark's JVM
and Python workers; the broker's apart. On a shared machine they move far less than wall time.
The target in the issue is a ratio of at least 1.0 with local[2].

``--readers`` instead reads every offset range with ``pipeline.client.read_range`` in this
process, alternating its two readers (``SAMSA_SPARK_READER=wire``: samsa's wire client and the
compiled decoder; ``librdkafka``: confluent-kafka), ``--runs`` times each: the CPU seconds of
this process per million rows, and the wire reader's CPU as a ratio of librdkafka's, run by run.

``--profile`` instead reads every offset range with ``pipeline.client.read_range`` in this
process under cProfile (what one Spark task does, without Spark) and prints where the time goes.

Usage: ``python bench/bench_spark.py [--records 200000] [--runs 3] [--profile | --readers]``
(not part of the test run; figures are noisy on a busy machine: read them as ratios).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.cpu_time import tree_cpu
from tests.support.broker_process import BrokerProcess
from tests.support.spark import local_session

TOPIC = "bench-spark"
PARTITIONS = 4
VALUE_SIZE = 1024
MB = 1_000_000

# The plain consumer, as fast as it goes here. fetch.queue.backoff.ms: with librdkafka's 1 s
# default, a full prefetch queue stalls the partition's fetches for up to a second after the
# consumer has drained it (seen: 1.2 s runs beside 0.3 s ones); the executors set it too.
CONSUMER_CONFIG = {"group.id": "bench-spark-plain", "enable.auto.commit": False,
                   "enable.partition.eof": False, "fetch.max.bytes": 52_428_800,
                   "max.partition.fetch.bytes": 10_485_760, "queued.max.messages.kbytes": 262_144,
                   "fetch.wait.max.ms": 10, "fetch.queue.backoff.ms": 10}
# consume() batch: 500 costs this consumer less CPU than 10k (1.7-1.8 against 2.0-2.1 CPU-s for
# 1M records of 1 KiB: the messages are walked while still in the CPU cache), as it does the
# executors (pipeline.client.CONSUME_BATCH).
CONSUMER_BATCH = 500


def fill(bootstrap: str, records: int) -> int:
    """Produce ``records`` keyed 1 KiB values round-robin over the partitions; key+value bytes."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
        fut.result(timeout=60)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                  "queue.buffering.max.kbytes": 262144, "compression.type": "none"})
    payload = bytes(range(256)) * (VALUE_SIZE // 256)
    errors: list = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)

    total = 0
    for i in range(records):
        key = b"key-%08d" % i
        value = payload[:VALUE_SIZE - 8] + b"%08d" % i
        total += len(key) + len(value)
        while True:
            try:
                p.produce(TOPIC, value=value, key=key, partition=i % PARTITIONS, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(300) == 0, "records left undelivered"
    assert not errors, errors[:3]
    return total


def end_offsets(bootstrap: str) -> dict[int, tuple[int, int]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-spark-offsets"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)
                for p in range(PARTITIONS)}
    finally:
        c.close()


def run_consumer(bootstrap: str, offsets: dict) -> tuple[float, int, int]:
    """One plain consumer, as fast as it goes: (seconds, records, key+value bytes).

    Done when every partition's last record (end offset - 1) has been seen. Not on
    partition EOF: ``consume(n, timeout)`` keeps waiting for ``n`` messages after the
    EOF events arrive, which would add up to ``timeout`` to the figure.
    """
    t0 = time.perf_counter()
    c = Consumer(CONSUMER_CONFIG | {"bootstrap.servers": bootstrap})
    last = {p: high - 1 for p, (low, high) in offsets.items() if high > low}
    c.assign([TopicPartition(TOPIC, p, offsets[p][0]) for p in last])
    remaining = sum(high - low for low, high in offsets.values())
    records = nbytes = 0
    deadline = time.monotonic() + 600
    while last:
        assert time.monotonic() < deadline, "consumer: no end within 600 s"
        for m in c.consume(num_messages=min(CONSUMER_BATCH, remaining - records), timeout=1.0):
            if m.error() is not None:
                raise RuntimeError(f"consumer: {m.error()}")
            records += 1
            nbytes += len(m.value()) + len(m.key())
            if m.offset() >= last.get(m.partition(), 1 << 62):
                del last[m.partition()]
    c.close()
    return time.perf_counter() - t0, records, nbytes


def start_spark():
    return local_session("samsa-bench-spark", driver_memory="2g")


def spark_df(spark, bootstrap: str, ending: str = "latest"):
    return (spark.read.format("samsa")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", TOPIC)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", ending)
            .load())


def run_spark_tiny(spark, bootstrap: str, offsets: dict) -> float:
    """count() of one record per partition: the fixed cost of a query (plan, tasks, workers)."""
    ending = json.dumps({TOPIC: {str(p): low + 1 for p, (low, high) in offsets.items()}})
    t0 = time.perf_counter()
    assert spark_df(spark, bootstrap, ending).count() == len(offsets)
    return time.perf_counter() - t0


def run_spark_count(spark, bootstrap: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    n = spark_df(spark, bootstrap).count()
    return time.perf_counter() - t0, n


def run_spark_noop(spark, bootstrap: str) -> float:
    """Every column of every row into Spark's noop sink (the rows are counted by the other actions)."""
    t0 = time.perf_counter()
    spark_df(spark, bootstrap).write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t0


def run_spark_floor(spark, records: int) -> float:
    """The noop write of the same number of rows from bench.spark_floor: Spark's own cost."""
    t0 = time.perf_counter()
    (spark.read.format("samsa_floor").option("rows", records).option("partitions", PARTITIONS)
     .option("valueSize", VALUE_SIZE).load().write.format("noop").mode("overwrite").save())
    return time.perf_counter() - t0


def register_floor(spark) -> None:
    # The Python workers import what their PYTHONPATH holds, which need not include bench/:
    # the module goes to them by value.
    from pyspark import cloudpickle

    from bench import spark_floor
    cloudpickle.register_pickle_by_value(spark_floor)
    spark.dataSource.register(spark_floor.FloorDataSource)


def run_spark_sum(spark, bootstrap: str) -> tuple[float, int, int]:
    """count(*) and sum(length(key) + length(value)): (seconds, rows, key+value bytes)."""
    t0 = time.perf_counter()
    row = spark_df(spark, bootstrap).selectExpr(
        "count(*) AS n", "sum(length(key) + length(value)) AS b").collect()[0]
    return time.perf_counter() - t0, row["n"], row["b"]


def profile_read(bootstrap: str, top: int) -> dict:
    """cProfile of read_range over every range, in this process (Spark's task work minus Spark)."""
    from samsa.pipeline import client
    from samsa.pipeline.options import parse_read_options

    opts = parse_read_options({"kafka.bootstrap.servers": bootstrap, "subscribe": TOPIC,
                               "startingOffsets": "earliest"})
    ranges = client.plan_batch(opts)
    rows = 0
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for rng in ranges:
        for batch in client.read_range(opts, rng):
            rows += batch.num_rows
    prof.disable()
    elapsed = time.perf_counter() - t0
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("tottime").print_stats(top)
    print(buf.getvalue())
    # And once more without the profiler, for a figure comparable with the consumer's.
    t0 = time.perf_counter()
    plain_rows = sum(b.num_rows for rng in ranges for b in client.read_range(opts, rng))
    plain = time.perf_counter() - t0
    return {"read_range_rows": rows, "read_range_profiled_s": round(elapsed, 2),
            "read_range_s": round(plain, 3), "read_range_rows_per_s": round(plain_rows / plain)}


def compare_readers(bootstrap: str, records: int, runs: int) -> dict:
    """CPU of read_range over every range, the wire reader and the librdkafka one alternated."""
    from samsa.pipeline import client
    from samsa.pipeline.options import parse_read_options
    from samsa.pipeline.wire_reader import READER_ENV

    opts = parse_read_options({"kafka.bootstrap.servers": bootstrap, "subscribe": TOPIC,
                               "startingOffsets": "earliest"})
    ranges = client.plan_batch(opts)
    cpu: dict[str, list[float]] = {"wire": [], "librdkafka": []}
    for _ in range(runs):
        for reader in cpu:
            os.environ[READER_ENV] = reader
            c0 = time.process_time()
            rows = sum(b.num_rows for rng in ranges for b in client.read_range(opts, rng))
            cpu[reader].append(time.process_time() - c0)
            assert rows == records, (reader, rows)
    ratios = [w / r for w, r in zip(cpu["wire"], cpu["librdkafka"])]
    out: dict = {f"{reader}_cpu_s_per_1M_rows": round(statistics.median(xs) * 1e6 / records, 3)
                 for reader, xs in cpu.items()}
    out["ratio_wire_over_librdkafka"] = round(statistics.median(ratios), 2)
    out["ratio_range"] = [round(min(ratios), 2), round(max(ratios), 2)]
    return out


def summarize(times: list[float], rows: int, nbytes: int) -> dict:
    med = statistics.median(times)
    return {"runs_s": [round(t, 3) for t in times],
            "median_rows_per_s": round(rows / med), "median_MB_per_s": round(nbytes / med / MB, 1),
            "rows_per_s_range": [round(rows / max(times)), round(rows / min(times))]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="cProfile read_range instead of running Spark")
    ap.add_argument("--readers", action="store_true",
                    help="the two read_range readers' CPU, alternated, instead of running Spark")
    ap.add_argument("--top", type=int, default=25, help="rows of the profile to print")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="samsa-bench-spark-"))
    broker = BrokerProcess(work, startup_timeout=120)
    out: dict = {"records": args.records, "partitions": PARTITIONS, "value_bytes": VALUE_SIZE,
                 "cpus": os.cpu_count()}
    spark = None
    try:
        broker.start()
        t0 = time.perf_counter()
        nbytes = fill(broker.bootstrap, args.records)
        out["fill_s"] = round(time.perf_counter() - t0, 2)
        out["topic_MB"] = round(nbytes / MB, 1)
        offsets = end_offsets(broker.bootstrap)
        assert sum(h - lo for lo, h in offsets.values()) == args.records, offsets
        if args.readers:
            out.update(compare_readers(broker.bootstrap, args.records, args.runs))
            print(json.dumps(out, indent=1))
            return
        if args.profile:
            secs, n, _ = run_consumer(broker.bootstrap, offsets)
            out["consumer_s"] = round(secs, 3)
            out["consumer_rows_per_s"] = round(n / secs)
            out.update(profile_read(broker.bootstrap, args.top))
            out["ratio_read_range_over_consumer"] = round(secs / out["read_range_s"], 2)
            print(json.dumps(out, indent=1))
            return
        t0 = time.perf_counter()
        spark = start_spark()
        out["spark_start_s"] = round(time.perf_counter() - t0, 2)
        # One untimed query first: Python worker start-up, class loading, JIT.
        t0 = time.perf_counter()
        assert run_spark_count(spark, broker.bootstrap)[1] == args.records
        run_spark_noop(spark, broker.bootstrap)
        register_floor(spark)
        run_spark_floor(spark, args.records)
        out["spark_first_query_s"] = round(time.perf_counter() - t0, 2)
        times: dict[str, list[float]] = {"consumer": [], "spark_sum": [], "spark_noop": [], "spark_count": [],
                                         "spark_floor": []}
        # CPU seconds per run: the consumer's process; Spark's JVM, its Python workers and this
        # process (py4j); the broker apart. Less disturbed than wall time by others' work.
        cpu: dict[str, list[float]] = {name: [] for name in times}
        broker_cpu: dict[str, list[float]] = {name: [] for name in times}
        ratios: dict[str, list[float]] = {name: [] for name in times if name != "consumer"}
        tiny: list[float] = []

        def measured(name: str, action):
            b0, t0, c0 = tree_cpu(broker.pid), tree_cpu(os.getpid()), time.process_time()
            result = action()
            b1, t1, c1 = tree_cpu(broker.pid), tree_cpu(os.getpid()), time.process_time()
            if b0 is not None:
                broker_cpu[name].append(b1 - b0)
                cpu[name].append(c1 - c0 if name == "consumer" else (t1 - t0) - (b1 - b0))
            return result

        for _ in range(args.runs):
            tiny.append(run_spark_tiny(spark, broker.bootstrap, offsets))
            for name in ratios:
                # Each Spark action right after a consumer run: a ratio within one stretch of
                # the machine's load (it is shared).
                secs, n, b = measured("consumer", lambda: run_consumer(broker.bootstrap, offsets))
                assert (n, b) == (args.records, nbytes), (n, b)
                times["consumer"].append(secs)
                consumer_secs = secs
                if name == "spark_sum":
                    secs, n, b = measured(name, lambda: run_spark_sum(spark, broker.bootstrap))
                    assert (n, b) == (args.records, nbytes), (n, b)
                elif name == "spark_count":
                    secs, n = measured(name, lambda: run_spark_count(spark, broker.bootstrap))
                    assert n == args.records, n
                elif name == "spark_floor":
                    secs = measured(name, lambda: run_spark_floor(spark, args.records))
                else:
                    secs = measured(name, lambda: run_spark_noop(spark, broker.bootstrap))
                times[name].append(secs)
                ratios[name].append(consumer_secs / secs)
        out["spark_query_fixed_cost_s"] = {"runs_s": [round(t, 3) for t in tiny],
                                           "median_s": round(statistics.median(tiny), 3)}
        for name, ts in times.items():
            out[name] = summarize(ts, args.records, nbytes)
            if cpu[name]:
                out[name]["cpu_s_median"] = round(statistics.median(cpu[name]), 2)
                out[name]["broker_cpu_s_median"] = round(statistics.median(broker_cpu[name]), 2)
        for name, rs in ratios.items():
            out[f"ratio_{name}_over_consumer"] = {
                "median": round(statistics.median(rs), 2), "min": round(min(rs), 2), "max": round(max(rs), 2),
                "runs": [round(r, 2) for r in rs]}
    finally:
        if spark is not None:
            spark.stop()
        broker.stop(timeout=60)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out, indent=1))
    if not args.profile:
        print(result_lines(out))


def result_lines(out: dict) -> str:
    """One line per figure: what goes into a note or the README."""
    lines = [f"{out['records']} records x {out['value_bytes']} B values, {out['partitions']} partitions, "
             f"{out['cpus']} CPUs, local[2]; medians of the runs, [min-max] across them"]
    for name in ("consumer", "spark_sum", "spark_noop", "spark_count", "spark_floor"):
        fig = out[name]
        line = (f"{name:12s} {fig['median_rows_per_s']:>9,} rows/s {fig['median_MB_per_s']:>7.1f} MB/s "
                f"[{fig['rows_per_s_range'][0]:,}-{fig['rows_per_s_range'][1]:,} rows/s]")
        ratio = out.get(f"ratio_{name}_over_consumer")
        if ratio:
            line += f"  ratio {ratio['median']:.2f} [{ratio['min']:.2f}-{ratio['max']:.2f}]"
        if "cpu_s_median" in fig:
            line += f"  CPU {fig['cpu_s_median']:.2f} s + broker {fig['broker_cpu_s_median']:.2f} s"
        lines.append(line)
    lines.append(f"spark fixed cost per query (1 record per partition): "
                 f"{out['spark_query_fixed_cost_s']['median_s']:.3f} s median")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
