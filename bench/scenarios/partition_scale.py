"""Partition scale (issue 29): does a produce cost the broker the same whether the
topic has 1 or 10,000 partitions?

Two loads, each on topics of 1, 100, 1,000 and 10,000 partitions, 1 KiB keyless values,
acks=1, librdkafka producers in their own processes:

- sticky: several producers with librdkafka's sticky partitioner (keyless records go to
  one partition for ``sticky.partitioning.linger.ms``, then another), linger 10 ms and
  1 MB batches: large batches spread over all partitions in turn;
- one record per batch: ``batch.num.messages=1``, linger 0 and no stickiness (each record
  to a random partition), so every record is a partition-batch of its own: two producers as
  fast as they go, and one at a fixed 500 records/s (the same request rate at every
  partition count, see LOADS).

Per row: MB/s, partition-batches/s (counted by the clients, see
``load.produce_batches_worker``), and the broker's CPU seconds per 1,000 batches and per MB.
Then the ratios the issue's targets are stated in, per load and broker: CPU per batch at N
partitions over that at 1 partition (target at 10,000: <= 1.5), MB/s at N over 1 partition
(sticky, target up to 1,000: >= 0.9).
"""

from __future__ import annotations

import os

from ..brokers import create_topic, wait_quiet
from ..load import aggregate, produce_batches_worker, run_workers
from .common import Ctx, Row, get, on_both_median, with_cpu

SIZE = 1024

# (producers, their settings, records/s per producer or 0 for as fast as they go). The
# client's queue is bounded so the flush after the timed sending (inside the measured
# window) takes well under a second, whatever the broker's rate.
_ONE_RECORD = {"linger.ms": 0, "sticky.partitioning.linger.ms": 0, "batch.num.messages": 1,
               "queue.buffering.max.messages": 2000}
LOADS = {
    "sticky": (3, {"linger.ms": 10, "sticky.partitioning.linger.ms": 10, "batch.size": 1_000_000,
                   "queue.buffering.max.kbytes": 16 * 1024}, 0),
    "1rec/batch": (2, _ONE_RECORD, 0),
    # The same request rate at every partition count: at full speed the 1-partition case
    # runs several times the batches/s that librdkafka manages over 10,000 partitions (the
    # client is the limit there, for Tansu too), and a busier broker spreads each event-loop
    # wake-up over more requests, so only equal rates compare the cost of a partition-batch.
    "1rec/batch @500/s": (1, _ONE_RECORD, 500),
}


def measure(broker, partitions: int, load: str, seconds: float) -> dict:
    producers, conf, rate = LOADS[load]
    topic = f"scale-{partitions}"
    create_topic(broker.bootstrap, topic, partitions, timeout=600)
    # Untimed first: one record to every partition (see produce_batches_worker), in a run
    # of its own (inside the timed run's warm-up it left the other producers' first timed
    # seconds stalled on librdkafka's metadata refreshes at 10,000 partitions).
    run_workers(produce_batches_worker, [(broker.bootstrap, topic, SIZE, "1", 0.2, conf, partitions)],
                timeout=900)
    res_quiet = wait_quiet(broker.pid)
    args = [(broker.bootstrap, topic, SIZE, "1", seconds, conf, 0, rate)] * producers
    res = with_cpu(broker, lambda: aggregate(run_workers(produce_batches_worker, args,
                                                         timeout=seconds + 300)))
    mb = res["bytes"] / 1e6
    res["batches_s"] = res["batches"] / res["seconds"]
    if res.get("broker_cpu_s") is not None and res["batches"] and mb:
        res["cpu_s_per_1k_batches"] = 1000 * res["broker_cpu_s"] / res["batches"]
        res["cpu_s_per_mb"] = res["broker_cpu_s"] / mb
    res["load_avg_1m"] = os.getloadavg()[0]
    res["quiet_wait_s"] = res_quiet
    return res


def _ratio(a, b):
    return None if a is None or not b else a / b


def run(ctx: Ctx) -> list[Row]:
    secs = ctx.seconds(3.0, 1.5)
    rows: list[Row] = []
    for load in ctx.pick(list(LOADS), list(LOADS)):
        base: dict = {}
        for parts in ctx.pick([1, 100, 1000, 10000], [1, 1000, 10000]):
            name = f"partition-scale {load} partitions={parts}"
            ctx.log(f"- {name} (load average {os.getloadavg()[0]:.1f})")
            # Median of several runs (alternating brokers): at 10,000 partitions a sticky
            # run of librdkafka's now and then stalls for seconds, whichever the broker.
            # (at a fixed rate every run has the same MB/s: the median of the CPU per batch)
            key = (lambda r: r.get("cpu_s_per_1k_batches") or 0.0) if LOADS[load][2] \
                else (lambda r: r["mb_s"])
            res = on_both_median(ctx, name, lambda b: measure(b, parts, load, secs),
                                 key=key, repeats=ctx.repeats)
            detail = {"samsa": res.get("samsa"), "tansu": res.get("tansu")}
            rows.append(Row(f"{name} MB/s", "MB/s", get(res, "samsa", "mb_s"), get(res, "tansu", "mb_s"),
                            limit="tcp_loopback_1MiB", detail=detail))
            rows.append(Row(f"{name} batches/s", "1/s", get(res, "samsa", "batches_s"),
                            get(res, "tansu", "batches_s")))
            rows.append(Row(f"{name} broker CPU per 1,000 batches", "cpu s",
                            get(res, "samsa", "cpu_s_per_1k_batches"),
                            get(res, "tansu", "cpu_s_per_1k_batches"), better="lower"))
            rows.append(Row(f"{name} broker CPU per MB", "cpu s", get(res, "samsa", "cpu_s_per_mb"),
                            get(res, "tansu", "cpu_s_per_mb"), better="lower"))
            if not base:
                base = res
                continue
            cpu = {k: _ratio(get(res, k, "cpu_s_per_1k_batches"), get(base, k, "cpu_s_per_1k_batches"))
                   for k in ("samsa", "tansu")}
            rows.append(Row(f"{name} CPU per batch / at 1 partition (target <= 1.5 at 10,000)", "x",
                            cpu["samsa"], cpu["tansu"], better="lower"))
            if load == "sticky":
                mbs = {k: _ratio(get(res, k, "mb_s"), get(base, k, "mb_s")) for k in ("samsa", "tansu")}
                rows.append(Row(f"{name} MB/s / at 1 partition (target >= 0.9 up to 1,000)", "x",
                                mbs["samsa"], mbs["tansu"]))
    return rows
