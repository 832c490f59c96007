"""The ``samsa`` Spark data source against one plain confluent-kafka consumer and against
Spark's own cost (issues 13 and 27).

Starts a samsa broker and, for each value size of ``--value-sizes`` (default 1 KiB and 100 B),
fills a topic of 4 partitions with ``--records`` keyed records, then, in the same run, ``--runs``
times each, the order of the Spark reads turning round from run to run:
  - consumer: one confluent-kafka Consumer in this process, all partitions assigned from the
    beginning, no group, ``consume()`` batches and fetch settings as large as help it (below),
    counting records and key+value bytes until every partition reaches its end offset;
  - floor: the same query over as many rows of the same shape from bench/spark_floor.py, a
    Python source yielding one prebuilt Arrow batch again and again (no broker, no client): what
    Spark itself costs to take these rows from any Python data source;
  - wire: the samsa source with its default reader (samsa's wire client and the compiled
    decoder straight into Arrow; pipeline/wire_reader.py);
  - librdkafka: the samsa source with its confluent-kafka reader (bench/spark_reader_choice.py).
The query: ``count(*)`` and ``sum(length(key) + length(value))``, both checked against the
topic (PySpark's Python data source scan turns every Arrow row into an UnsafeRow of all
columns, copying keys and values, whatever the query uses).
Reported per reader: CPU seconds (Spark's JVM, its Python workers and this process, the broker's
apart; bench/cpu_time.py), the CPU the source adds on top of the floor's in the same run, and
that as a ratio of the floor's CPU (issue 27's target: at most 0.5); rows/s and the consumer's
wall time over Spark's, run by run (information). Medians, [min-max] across runs.
Then, with ``--latency-seconds`` > 0, the streaming end-to-end latency at a steady
``--latency-rate`` (bench/bench_streaming.py's readStream samsa -> writeStream samsa, beside a
plain consumer-producer pipe), in the same Spark session.

``--readers`` instead reads every offset range with ``pipeline.client.read_range`` in this
process, alternating its two readers (``SAMSA_SPARK_READER=wire``: samsa's wire client and the
compiled decoder; ``librdkafka``: confluent-kafka), ``--runs`` times each: the CPU seconds of
this process per million rows, and the wire reader's CPU as a ratio of librdkafka's, run by run.

``--profile`` instead reads every offset range with ``pipeline.client.read_range`` in this
process under cProfile (what one Spark task does, without Spark) and prints where the time goes.

Usage: ``PYTHONPATH=$PWD python bench/bench_spark.py [--records 200000] [--runs 3]
[--value-sizes 1024,100] [--latency-seconds 15] [--profile | --readers]``
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

TOPIC_PREFIX = "bench-spark"
PARTITIONS = 4
MB = 1_000_000
KEY_SIZE = 12  # b"key-%08d"

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
# The Spark reads of each run, by the data source they read with; their order turns each run.
SPARK_READS = {"floor": "samsa_floor", "wire": "samsa", "librdkafka": "samsa_librdkafka"}


def topic_of(value_size: int) -> str:
    return f"{TOPIC_PREFIX}-{value_size}"


def fill(bootstrap: str, records: int, value_size: int) -> int:
    """Produce ``records`` keyed values of ``value_size`` bytes round-robin over the
    partitions of ``topic_of(value_size)``; key+value bytes."""
    topic = topic_of(value_size)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        fut.result(timeout=60)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                  "queue.buffering.max.kbytes": 262144, "compression.type": "none"})
    payload = bytes(range(256)) * (value_size // 256 + 1)
    errors: list = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)

    total = 0
    for i in range(records):
        key = b"key-%08d" % i
        value = (payload[:value_size - 8] + b"%08d" % i)[-value_size:]
        total += len(key) + len(value)
        while True:
            try:
                p.produce(topic, value=value, key=key, partition=i % PARTITIONS, on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(300) == 0, "records left undelivered"
    assert not errors, errors[:3]
    return total


def end_offsets(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-spark-offsets"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
                for p in range(PARTITIONS)}
    finally:
        c.close()


def run_consumer(bootstrap: str, topic: str, offsets: dict) -> tuple[float, int, int]:
    """One plain consumer, as fast as it goes: (seconds, records, key+value bytes).

    Done when every partition's last record (end offset - 1) has been seen. Not on
    partition EOF: ``consume(n, timeout)`` keeps waiting for ``n`` messages after the
    EOF events arrive, which would add up to ``timeout`` to the figure.
    """
    t0 = time.perf_counter()
    c = Consumer(CONSUMER_CONFIG | {"bootstrap.servers": bootstrap})
    last = {p: high - 1 for p, (low, high) in offsets.items() if high > low}
    c.assign([TopicPartition(topic, p, offsets[p][0]) for p in last])
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


def register_bench_sources(spark) -> None:
    # The Python workers import what their PYTHONPATH holds, which need not include bench/:
    # the modules go to them by value.
    from pyspark import cloudpickle

    from bench import spark_floor, spark_reader_choice
    for module in (spark_floor, spark_reader_choice):
        cloudpickle.register_pickle_by_value(module)
    spark.dataSource.register(spark_floor.FloorDataSource)
    spark.dataSource.register(spark_reader_choice.LibrdkafkaDataSource)


def spark_df(spark, read: str, bootstrap: str, records: int, value_size: int):
    fmt = SPARK_READS[read]
    if read == "floor":
        return (spark.read.format(fmt).option("rows", records).option("partitions", PARTITIONS)
                .option("valueSize", value_size).load())
    return (spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic_of(value_size)).option("startingOffsets", "earliest")
            .option("endingOffsets", "latest").load())


def run_spark_sum(spark, read: str, bootstrap: str, records: int,
                  value_size: int) -> tuple[float, int, int]:
    """count(*) and sum(length(key) + length(value)): (seconds, rows, key+value bytes)."""
    t0 = time.perf_counter()
    row = spark_df(spark, read, bootstrap, records, value_size).selectExpr(
        "count(*) AS n", "sum(length(key) + length(value)) AS b").collect()[0]
    return time.perf_counter() - t0, row["n"], row["b"]


def read_options(bootstrap: str, topic: str):
    from samsa.pipeline.options import parse_read_options
    return parse_read_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                               "startingOffsets": "earliest"})


def profile_read(bootstrap: str, topic: str, top: int) -> dict:
    """cProfile of read_range over every range, in this process (Spark's task work minus Spark)."""
    from samsa.pipeline import client

    opts = read_options(bootstrap, topic)
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


def compare_readers(bootstrap: str, topic: str, records: int, runs: int) -> dict:
    """CPU of read_range over every range, the wire reader and the librdkafka one alternated."""
    from samsa.pipeline import client
    from samsa.pipeline.wire_reader import READER_ENV

    opts = read_options(bootstrap, topic)
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


def spread(xs: list[float], digits: int = 2) -> dict:
    return {"median": round(statistics.median(xs), digits), "min": round(min(xs), digits),
            "max": round(max(xs), digits)}


def measure_size(spark, broker, records: int, value_size: int, runs: int) -> dict:
    """One value size: the consumer and the three Spark reads, ``runs`` times, interleaved."""
    bootstrap = broker.bootstrap
    topic = topic_of(value_size)
    t0 = time.perf_counter()
    nbytes = fill(bootstrap, records, value_size)
    out: dict = {"value_bytes": value_size, "fill_s": round(time.perf_counter() - t0, 2),
                 "topic_MB": round(nbytes / MB, 1)}
    offsets = end_offsets(bootstrap, topic)
    assert sum(h - lo for lo, h in offsets.values()) == records, offsets
    floor_bytes = records * (KEY_SIZE + value_size)
    # One untimed round first: Python workers, class loading, JIT.
    for read in SPARK_READS:
        run_spark_sum(spark, read, bootstrap, records, value_size)
    names = ["consumer", *SPARK_READS]
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    broker_cpu: dict[str, list[float]] = {n: [] for n in names}

    def measured(name: str, action):
        # CPU seconds: the consumer's process; Spark's JVM, its Python workers and this
        # process (py4j); the broker apart. Less disturbed than wall time by others' work.
        b0, t0, c0 = tree_cpu(broker.pid), tree_cpu(os.getpid()), time.process_time()
        w0 = time.perf_counter()
        result = action()
        wall[name].append(time.perf_counter() - w0)
        b1, t1, c1 = tree_cpu(broker.pid), tree_cpu(os.getpid()), time.process_time()
        if b0 is not None:
            broker_cpu[name].append(b1 - b0)
            cpu[name].append(c1 - c0 if name == "consumer" else (t1 - t0) - (b1 - b0))
        return result

    reads = list(SPARK_READS)
    for run in range(runs):
        _, n, b = measured("consumer", lambda: run_consumer(bootstrap, topic, offsets))
        assert (n, b) == (records, nbytes), (n, b)
        for read in reads[run % len(reads):] + reads[:run % len(reads)]:
            _, n, b = measured(read, lambda: run_spark_sum(spark, read, bootstrap, records,
                                                           value_size))
            assert (n, b) == (records, floor_bytes if read == "floor" else nbytes), (read, n, b)
    per_m = 1e6 / records
    for name in names:
        fig: dict = {"rows_per_s": spread([records / t for t in wall[name]], 0),
                     "wall_s": [round(t, 2) for t in wall[name]]}
        if cpu[name]:
            fig["cpu_s_per_1M_rows"] = spread([c * per_m for c in cpu[name]])
            fig["broker_cpu_s_per_1M_rows"] = round(statistics.median(broker_cpu[name]) * per_m, 2)
        if name != "consumer":
            fig["ratio_to_consumer"] = spread([c / s for c, s in zip(wall["consumer"], wall[name])])
        if name in ("wire", "librdkafka") and cpu[name]:
            added = [(c - f) for c, f in zip(cpu[name], cpu["floor"])]
            fig["added_cpu_s_per_1M_rows"] = spread([a * per_m for a in added])
            fig["added_over_floor"] = spread([a / f for a, f in zip(added, cpu["floor"])])
        out[name] = fig
    return out


def measure_latency(spark, broker, rate: float, seconds: float) -> dict:
    """bench_streaming's steady-rate end-to-end latency, Spark's and a plain pipe's."""
    from bench import bench_streaming

    args = argparse.Namespace(rate=rate, seconds=seconds, warmup=5.0, trigger="0 seconds")
    work = Path(tempfile.mkdtemp(prefix="samsa-bench-spark-latency-"))
    try:
        bench_streaming.create_topics(broker.bootstrap)
        out = {"rate_per_s": rate, "seconds": seconds,
               "spark": bench_streaming.run_spark(spark, broker.bootstrap, args, work),
               "pipe": bench_streaming.run_pipe(broker.bootstrap, args)}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--value-sizes", default="1024,100",
                    help="value sizes in bytes, comma-separated (--readers/--profile: the first)")
    ap.add_argument("--latency-seconds", type=float, default=15.0,
                    help="streaming latency measured for this long (0: not measured)")
    ap.add_argument("--latency-rate", type=float, default=200.0, help="records/s, steady")
    ap.add_argument("--profile", action="store_true", help="cProfile read_range instead of running Spark")
    ap.add_argument("--readers", action="store_true",
                    help="the two read_range readers' CPU, alternated, instead of running Spark")
    ap.add_argument("--top", type=int, default=25, help="rows of the profile to print")
    args = ap.parse_args()
    sizes = [int(v) for v in args.value_sizes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="samsa-bench-spark-"))
    broker = BrokerProcess(work, startup_timeout=120)
    out: dict = {"records": args.records, "partitions": PARTITIONS, "cpus": os.cpu_count(),
                 "runs": args.runs}
    spark = None
    try:
        broker.start()
        if args.readers or args.profile:
            topic = topic_of(sizes[0])
            out["value_bytes"] = sizes[0]
            fill(broker.bootstrap, args.records, sizes[0])
            if args.readers:
                out.update(compare_readers(broker.bootstrap, topic, args.records, args.runs))
            else:
                offsets = end_offsets(broker.bootstrap, topic)
                secs, n, _ = run_consumer(broker.bootstrap, topic, offsets)
                out["consumer_s"] = round(secs, 3)
                out["consumer_rows_per_s"] = round(n / secs)
                out.update(profile_read(broker.bootstrap, topic, args.top))
                out["ratio_read_range_over_consumer"] = round(secs / out["read_range_s"], 2)
            print(json.dumps(out, indent=1))
            return
        t0 = time.perf_counter()
        spark = start_spark()
        register_bench_sources(spark)
        out["spark_start_s"] = round(time.perf_counter() - t0, 2)
        out["sizes"] = [measure_size(spark, broker, args.records, size, args.runs)
                        for size in sizes]
        if args.latency_seconds > 0:
            out["streaming_latency"] = measure_latency(spark, broker, args.latency_rate,
                                                       args.latency_seconds)
    finally:
        if spark is not None:
            spark.stop()
        broker.stop(timeout=60)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out, indent=1))
    print(result_lines(out))


def result_lines(out: dict) -> str:
    """One line per figure: what goes into a note or the README."""
    lines = [f"{out['records']:,} records per size, {out['partitions']} partitions, "
             f"{out['cpus']} CPUs, local[2], {out['runs']} runs; medians [min-max] across runs; "
             "CPU-s per 1M rows (broker apart)"]
    for fig in out["sizes"]:
        lines.append(f"-- {fig['value_bytes']} B values (topic {fig['topic_MB']} MB)")
        for name in ("consumer", *SPARK_READS):
            f = fig[name]
            r = f["rows_per_s"]
            line = f"{name:10s} {r['median']:>9,.0f} rows/s [{r['min']:,.0f}-{r['max']:,.0f}]"
            if "cpu_s_per_1M_rows" in f:
                c = f["cpu_s_per_1M_rows"]
                line += f"  CPU {c['median']:.2f} [{c['min']:.2f}-{c['max']:.2f}]"
            if "ratio_to_consumer" in f:
                q = f["ratio_to_consumer"]
                line += f"  vs consumer {q['median']:.2f} [{q['min']:.2f}-{q['max']:.2f}]"
            if "added_over_floor" in f:
                a, q = f["added_cpu_s_per_1M_rows"], f["added_over_floor"]
                line += (f"  added {a['median']:.2f} CPU-s, added/floor {q['median']:.2f} "
                         f"[{q['min']:.2f}-{q['max']:.2f}]")
            lines.append(line)
    lat = out.get("streaming_latency")
    if lat:
        s, p = lat["spark"], lat["pipe"]
        lines.append(f"streaming at {lat['rate_per_s']:.0f} records/s for {lat['seconds']:.0f} s: "
                     f"spark p50 {s['p50_ms']} ms p99 {s['p99_ms']} ms max {s['max_ms']} ms "
                     f"({s['delivered']}/{s['expected']}); plain pipe p50 {p['p50_ms']} ms "
                     f"p99 {p['p99_ms']} ms")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
