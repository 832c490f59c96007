"""The exactly-once streaming sink's throughput as a ratio of the at-least-once sink's, same run.

Starts a samsa broker, fills an input topic of ``--partitions`` partitions with ``--records``
records of ``--size`` bytes, then copies it with a streaming query (``readStream.format("samsa")``
from earliest, ``maxOffsetsPerTrigger`` = ``--per-batch``, Trigger.AvailableNow ->
``writeStream.format("samsa")``) into a fresh output topic, alternating the at-least-once sink
and ``exactlyOnce=true``, ``--repeats`` runs of each in one Spark session (``local[2]``).
Reported per sink: the median records/s and MB/s from the query's start to its end (reading
included: the same for both), the micro-batches; then the ratio exactly-once / at-least-once.
Then, without Spark, one task's cost alone: ``--tasks`` calls of each sink's task function
(``write_exactly_once``, batch ids 0, 1, ...; ``client.write_batches``) with ``--task-rows``
rows each, median milliseconds per task and their ratio.

What the ratio holds: per task, a new transactional producer and its ``init_transactions``, an
offset fetch for the batch id, AddPartitionsToTxn, AddOffsetsToTxn + TxnOffsetCommit, EndTxn and
the markers; the at-least-once sink keeps its idempotent producers between batches. Fewer,
larger micro-batches (``--per-batch``) make it smaller.

    python bench/bench_eos_sink.py [--records 200000] [--size 256] [--per-batch 50000] [--repeats 3]

(not part of the test run; a busy machine moves the figures: read them as ratios)
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess
from tests.support.spark import local_session

IN = "eos-bench-in"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        fut.result(timeout=60)


def fill(bootstrap: str, records: int, size: int, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    pad = b"x" * size
    for i in range(records):
        while True:
            try:
                p.produce(IN, value=pad, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(120) == 0


def copy(spark, bootstrap: str, out: str, work: Path, args, exactly_once: bool) -> dict:
    create_topic(bootstrap, out, args.partitions)
    df = (spark.readStream.format("samsa").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", IN).option("startingOffsets", "earliest")
          .option("maxOffsetsPerTrigger", str(args.per_batch)).load().selectExpr("value"))
    w = (df.writeStream.format("samsa").option("kafka.bootstrap.servers", bootstrap).option("topic", out)
         .option("checkpointLocation", str(work / out)).trigger(availableNow=True))
    if exactly_once:
        w = w.option("exactlyOnce", "true")
    began = time.monotonic()
    q = w.start()
    try:
        q.awaitTermination()
    finally:
        q.stop()
    seconds = time.monotonic() - began
    rows = sum(p["numInputRows"] for p in q.recentProgress)
    assert rows == args.records, f"{out}: {rows} of {args.records} rows"
    return {"seconds": seconds, "batches": len([p for p in q.recentProgress if p["numInputRows"]])}


def task_costs(bootstrap: str, args) -> dict:
    """Median ms per task of each sink, same rows, no Spark: the exactly-once sink's fixed cost."""
    import pyarrow as pa

    from samsa.pipeline import client
    from samsa.pipeline.eos import TaskBatch
    from samsa.pipeline.eos_writer import write_exactly_once
    from samsa.pipeline.options import parse_write_options

    create_topic(bootstrap, "eos-bench-tasks", 1)
    batch = pa.record_batch([pa.array([b"x" * args.size] * args.task_rows, pa.binary())], names=["value"])
    base = {"kafka.bootstrap.servers": bootstrap, "topic": "eos-bench-tasks"}
    plain = parse_write_options(base)
    eos = parse_write_options({**base, "exactlyOnce": "true", "transactionalIdPrefix": "eos-bench"})
    times: dict[str, list] = {"at_least_once": [], "exactly_once": []}
    client.write_batches(plain, [batch])        # the cached idempotent producer: made once
    for i in range(args.tasks):
        t = time.perf_counter()
        client.write_batches(plain, [batch])
        times["at_least_once"].append(time.perf_counter() - t)
        t = time.perf_counter()
        assert write_exactly_once(eos, TaskBatch("bench", i, 0), [batch]).records == args.task_rows
        times["exactly_once"].append(time.perf_counter() - t)
    out = {name: round(statistics.median(ts) * 1000, 1) for name, ts in times.items()}
    return {"task_rows": args.task_rows, "median_ms_per_task": out,
            "ratio_exactly_once_to_at_least_once": round(out["exactly_once"] / out["at_least_once"], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=256, help="value bytes")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--per-batch", type=int, default=50_000, help="maxOffsetsPerTrigger")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=20, help="task-alone calls per sink")
    ap.add_argument("--task-rows", type=int, default=1000)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-eos-"))
    broker = BrokerProcess(work / "broker").start()
    spark = None
    try:
        b = broker.bootstrap
        create_topic(b, IN, args.partitions)
        fill(b, args.records, args.size, args.partitions)
        spark = local_session("bench-eos-sink")
        copy(spark, b, "warmup", work, args, exactly_once=True)      # JVM, workers, coordinator
        runs: dict[str, list] = {"at_least_once": [], "exactly_once": []}
        for i in range(args.repeats):
            for name in runs:
                runs[name].append(copy(spark, b, f"out-{name}-{i}", work, args, name == "exactly_once"))
        result = {"records": args.records, "size": args.size, "partitions": args.partitions,
                  "per_batch": args.per_batch}
        for name, rs in runs.items():
            s = statistics.median(r["seconds"] for r in rs)
            result[name] = {"records_per_s": round(args.records / s), "mb_per_s": round(args.records * args.size / s / 1e6, 2),
                            "median_s": round(s, 2), "batches": rs[0]["batches"],
                            "all_s": [round(r["seconds"], 2) for r in rs]}
        result["ratio_exactly_once_to_at_least_once"] = round(
            result["exactly_once"]["records_per_s"] / result["at_least_once"]["records_per_s"], 3)
        result["task_alone"] = task_costs(b, args)
        print(json.dumps(result, indent=2))
    finally:
        if spark is not None:
            spark.stop()
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
