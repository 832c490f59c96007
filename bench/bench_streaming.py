"""Streaming end-to-end latency through Spark: produce -> readStream samsa -> writeStream samsa.

Starts a samsa broker, an input topic of 4 partitions and two output topics with
``message.timestamp.type=LogAppendTime``, so an output record's timestamp is the instant the
broker appended it (the sink's write), on the same clock as the input record's CreateTime (the
producer's send time: this process). Then, in the same run:
  - spark: ``readStream.format("samsa")`` (latest) -> ``selectExpr(key, value, timestamp)`` ->
    ``writeStream.format("samsa")`` with ``--trigger`` (default 0 s: the next micro-batch starts as
    soon as the previous one ends), fed ``--rate`` records/s for ``--seconds`` after a warm-up;
  - pipe (the peer): one confluent-kafka consumer and producer in a loop doing the same copy,
    fed the same way: what a plain client pays, so the Spark figure reads as a ratio.
Latency of a record = output LogAppendTime - input CreateTime (the input's timestamp is carried
in the value, so the output's own timestamp stays the broker's). Reported: p50/p95/p99/max in ms,
records delivered, and for Spark the micro-batches and their median duration.

Usage: ``python bench/bench_streaming.py [--rate 200] [--seconds 30] [--trigger "0 seconds"]``
(not part of the test run; a busy machine moves the figures: read them as ratios).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess
from tests.support.spark import local_session

IN, OUT_SPARK, OUT_PIPE = "latency-in", "latency-out-spark", "latency-out-pipe"
PARTITIONS = 4
PAD = b"x" * 200


def create_topics(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(IN, PARTITIONS, 1)] + [
        NewTopic(t, PARTITIONS, 1, config={"message.timestamp.type": "LogAppendTime"})
        for t in (OUT_SPARK, OUT_PIPE)]
    for fut in admin.create_topics(topics).values():
        fut.result(timeout=60)


def feed(bootstrap: str, rate: float, seconds: float, tag: int) -> int:
    """``rate`` records/s for ``seconds``, steady; each value = (tag, send time in us) + padding."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True})
    n = int(rate * seconds)
    began = time.monotonic()
    for i in range(n):
        due = began + i / rate
        while (now := time.monotonic()) < due:
            p.poll(min(due - now, 0.01))
        sent_us = time.time_ns() // 1000
        p.produce(IN, key=str(i).encode(), value=struct.pack(">qq", tag, sent_us) + PAD, timestamp=sent_us // 1000)
        p.poll(0)
    assert p.flush(60) == 0
    return n


def collect(bootstrap: str, topic: str, tag: int, expected: int, timeout: float) -> list[float]:
    """Latencies (ms) of the ``expected`` output records carrying ``tag``."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"latency-{topic}-{tag}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.wait.max.ms": 10})
    c.subscribe([topic])
    out: list[float] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < expected and time.monotonic() < deadline:
            for m in c.consume(1000, 0.2):
                if m.error():
                    continue
                got_tag, sent_us = struct.unpack(">qq", m.value()[:16])
                if got_tag == tag:
                    out.append(m.timestamp()[1] - sent_us / 1000)
    finally:
        c.close()
    return out


def pipe(bootstrap: str, stop: threading.Event) -> None:
    """The peer: consume IN from the latest offsets, produce each record to OUT_PIPE at once."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "latency-pipe", "auto.offset.reset": "latest",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 10})
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "enable.idempotence": True})
    c.assign([TopicPartition(IN, part, -1) for part in range(PARTITIONS)])
    try:
        while not stop.is_set():
            msgs = c.consume(1000, 0.05)
            for m in msgs:
                if m.error() is None:
                    p.produce(OUT_PIPE, key=m.key(), value=m.value())
            p.poll(0)
        p.flush(30)
    finally:
        c.close()


def summarize(lat: list[float], expected: int) -> dict:
    lat = sorted(lat)
    pct = lambda q: round(lat[min(len(lat) - 1, int(q * len(lat)))], 1)
    return {"delivered": len(lat), "expected": expected, "p50_ms": pct(0.50), "p95_ms": pct(0.95),
            "p99_ms": pct(0.99), "max_ms": round(lat[-1], 1), "mean_ms": round(statistics.fmean(lat), 1)}


def run_spark(spark, bootstrap: str, args, work: Path) -> dict:
    df = (spark.readStream.format("samsa").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", IN).option("startingOffsets", "latest").load())
    q = (df.selectExpr("key", "value").writeStream.format("samsa")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", OUT_SPARK)
         .option("checkpointLocation", str(work / "cp"))
         .trigger(processingTime=args.trigger).start())
    try:
        # Warm-up: Python workers, class loading, the first micro-batches are not measured.
        deadline = time.monotonic() + 120
        while len(q.recentProgress) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        n = feed(bootstrap, args.rate, args.warmup, tag=0)
        collect(bootstrap, OUT_SPARK, 0, n, timeout=120)
        first_batch = len(q.recentProgress)
        n = feed(bootstrap, args.rate, args.seconds, tag=1)
        lat = collect(bootstrap, OUT_SPARK, 1, n, timeout=120)
        progress = [p for p in q.recentProgress[first_batch:] if p["numInputRows"] > 0]
        assert q.exception() is None, q.exception()
    finally:
        q.stop()
    out = summarize(lat, n)
    if progress:
        out["micro_batches"] = len(progress)
        out["median_batch_ms"] = statistics.median(p["durationMs"]["triggerExecution"] for p in progress)
        out["median_rows_per_batch"] = statistics.median(p["numInputRows"] for p in progress)
        # Where a micro-batch's time goes (Spark's own phases: latestOffset, getBatch, addBatch...).
        phases = sorted({k for p in progress for k in p["durationMs"]})
        out["median_phase_ms"] = {k: statistics.median(p["durationMs"].get(k, 0) for p in progress)
                                  for k in phases}
    return out


def run_pipe(bootstrap: str, args) -> dict:
    stop = threading.Event()
    t = threading.Thread(target=pipe, args=(bootstrap, stop), daemon=True)
    t.start()
    try:
        time.sleep(2)       # assignment and the first fetch
        n = feed(bootstrap, args.rate, args.seconds, tag=2)
        lat = collect(bootstrap, OUT_PIPE, 2, n, timeout=60)
    finally:
        stop.set()
        t.join(30)
    return summarize(lat, n)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=200.0, help="records per second, steady")
    ap.add_argument("--seconds", type=float, default=30.0, help="measured feeding time")
    ap.add_argument("--warmup", type=float, default=5.0, help="unmeasured feeding time first")
    ap.add_argument("--trigger", default="0 seconds", help="Spark processingTime trigger")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="samsa-bench-streaming-"))
    broker = BrokerProcess(work / "broker", startup_timeout=120)
    out: dict = {"rate_per_s": args.rate, "seconds": args.seconds, "trigger": args.trigger,
                 "partitions": PARTITIONS, "cpus": os.cpu_count()}
    spark = None
    try:
        broker.start()
        create_topics(broker.bootstrap)
        spark = local_session("samsa-bench-streaming")
        out["spark"] = run_spark(spark, broker.bootstrap, args, work)
        out["pipe"] = run_pipe(broker.bootstrap, args)
        out["ratio_p50_spark_over_pipe"] = round(out["spark"]["p50_ms"] / max(out["pipe"]["p50_ms"], 0.1), 1)
    finally:
        if spark is not None:
            spark.stop()
        broker.stop(timeout=60)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
