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

Per row: MB/s, partition-batches/s, the broker's CPU seconds per 1,000 batches and per
MB, and the producers' CPU seconds per MB (they share the two cores with the broker).
Batches are counted in the topic's log after the run (bench/log_batches.py), not by the
clients: librdkafka's statistics, the only count it gives, cost the producers more CPU the
more partitions there are, and so slowed the MB/s they were measured beside. With one
record per batch the records acked are the count.

Then the ratios the issue's targets are stated in, per load and broker: CPU per batch at N
partitions over that at 1 partition (target at 10,000: <= 1.5), MB/s at N over 1 partition
(sticky, target up to 1,000: >= 0.9). The sticky load's 1 and 1,000 partitions are measured
as alternated pairs and the target row is the median of the pairs' ratios (see ``_pairs``);
every other cell is the median of ``ctx.repeats`` runs.
"""

from __future__ import annotations

import os

from ..brokers import create_topic, wait_quiet
from ..load import aggregate, produce_batches_worker, run_workers
from ..log_batches import count_batches_since
from .common import Ctx, Row, get, on_both, on_both_median, with_cpu

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

# The sticky MB/s target's ends, measured as alternated pairs, and how many pairs (the
# full run's; --quick and --scale < 1 run one).
PAIRED = (1, 1000)
PAIRS = 5


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
    res["load_avg"] = os.getloadavg()
    if res["batches"] is None:
        # Counted in the log, after the broker's CPU was read: see bench/log_batches.py.
        counted = count_batches_since(broker.bootstrap, topic, partitions, res["since_ms"])
        res["records_in_log_minus_acked"] = counted.records - res["records"]
        # (a failed delivery may still have been appended: then only say so)
        if counted.records != res["records"] and not res.get("failed"):
            raise RuntimeError(f"{topic}: the batches counted from the timed window's start hold "
                               f"{counted.records} records, the producers had {res['records']} acked")
        res["batches"] = counted.batches
        res["batch_count_s"] = counted.seconds
    mb = res["bytes"] / 1e6
    res["batches_s"] = res["batches"] / res["seconds"]
    if res.get("broker_cpu_s") is not None and res["batches"] and mb:
        res["cpu_s_per_1k_batches"] = 1000 * res["broker_cpu_s"] / res["batches"]
        res["cpu_s_per_mb"] = res["broker_cpu_s"] / mb
    if res.get("client_cpu_s") is not None and mb:
        res["client_cpu_s_per_mb"] = res["client_cpu_s"] / mb
    res["quiet_wait_s"] = res_quiet
    return res


def _ratio(a, b):
    return None if a is None or not b else a / b


def _median(values: list) -> float | None:
    vs = sorted(v for v in values if v is not None)
    if not vs:
        return None
    mid = len(vs) // 2
    return vs[mid] if len(vs) % 2 else (vs[mid - 1] + vs[mid]) / 2


def _cell_rows(name: str, res: dict) -> list[Row]:
    """The figures of one (load, partitions) cell, samsa and the peer."""
    detail = {"samsa": res.get("samsa"), "tansu": res.get("tansu")}
    return [
        Row(f"{name} MB/s", "MB/s", get(res, "samsa", "mb_s"), get(res, "tansu", "mb_s"),
            limit="tcp_loopback_1MiB", detail=detail),
        Row(f"{name} batches/s", "1/s", get(res, "samsa", "batches_s"), get(res, "tansu", "batches_s")),
        Row(f"{name} broker CPU per 1,000 batches", "cpu s", get(res, "samsa", "cpu_s_per_1k_batches"),
            get(res, "tansu", "cpu_s_per_1k_batches"), better="lower"),
        Row(f"{name} broker CPU per MB", "cpu s", get(res, "samsa", "cpu_s_per_mb"),
            get(res, "tansu", "cpu_s_per_mb"), better="lower"),
        Row(f"{name} producers' CPU per MB", "cpu s", get(res, "samsa", "client_cpu_s_per_mb"),
            get(res, "tansu", "client_cpu_s_per_mb"), better="lower"),
    ]


def _ratio_rows(name: str, load: str, res: dict, base: dict) -> list[Row]:
    cpu = {k: _ratio(get(res, k, "cpu_s_per_1k_batches"), get(base, k, "cpu_s_per_1k_batches"))
           for k in ("samsa", "tansu")}
    rows = [Row(f"{name} CPU per batch / at 1 partition (target <= 1.5 at 10,000)", "x",
                cpu["samsa"], cpu["tansu"], better="lower")]
    if load == "sticky":
        mbs = {k: _ratio(get(res, k, "mb_s"), get(base, k, "mb_s")) for k in ("samsa", "tansu")}
        rows.append(Row(f"{name} MB/s / at 1 partition (target >= 0.9 up to 1,000)", "x",
                        mbs["samsa"], mbs["tansu"]))
    return rows


def _grid(ctx: Ctx, load: str, partition_counts: list[int], secs: float, base: dict) -> list[Row]:
    """Each partition count the median of ``ctx.repeats`` runs, alternating brokers; the
    ratios against ``base`` (the 1-partition cell: the first count when it is 1 and
    ``base`` is empty; no ratios without one)."""
    rows: list[Row] = []
    for parts in partition_counts:
        name = f"partition-scale {load} partitions={parts}"
        ctx.log(f"- {name} (load average {os.getloadavg()[0]:.1f})")
        # Median of several runs (alternating brokers): at 10,000 partitions a sticky
        # run of librdkafka's now and then stalls for seconds, whichever the broker.
        # (at a fixed rate every run has the same MB/s: the median of the CPU per batch)
        key = (lambda r: r.get("cpu_s_per_1k_batches") or 0.0) if LOADS[load][2] \
            else (lambda r: r["mb_s"])
        res = on_both_median(ctx, name, lambda b: measure(b, parts, load, secs),
                             key=key, repeats=ctx.repeats)
        rows += _cell_rows(name, res)
        if not base:
            if parts == 1:  # (no 1-partition cell: no ratios, rather than ones to another)
                base = res
            continue
        rows += _ratio_rows(name, load, res, base)
    return rows


def _pairs(ctx: Ctx, secs: float) -> tuple[list[Row], dict]:
    """The sticky MB/s target's two ends, 1 and 1,000 partitions, measured as alternated
    pairs (1, 1,000, 1, 1,000, ...): a single run swings by 15-20% on the shared machine,
    and cells measured minutes apart compare two different machines. The target row is the
    median of the per-pair ratios, every pair listed in its detail. Also returns the
    1-partition cell (its median run) for the other partition counts' ratios."""
    low, high = PAIRED
    pairs = PAIRS if ctx.repeats > 1 else 1
    runs: dict[str, dict[int, list]] = {k: {low: [], high: []} for k in ctx.brokers}
    for i in range(pairs):
        for parts in PAIRED:
            name = f"partition-scale sticky partitions={parts}"
            ctx.log(f"- {name} pair {i + 1}/{pairs} (load average {os.getloadavg()[0]:.1f})")
            res = on_both(ctx, f"{name} pair {i + 1}", lambda b: measure(b, parts, "sticky", secs))
            for kind, r in res.items():
                runs[kind][parts].append(r)
    rows: list[Row] = []
    cells: dict[int, dict] = {}
    for parts in PAIRED:
        cell: dict = {}
        for kind in ctx.brokers:
            done = sorted((r for r in runs[kind][parts] if r is not None), key=lambda r: r["mb_s"])
            if done:
                cell[kind] = done[(len(done) - 1) // 2]
                cell[kind]["runs"] = [r and round(r["mb_s"], 3) for r in runs[kind][parts]]
        cells[parts] = cell
        rows += _cell_rows(f"partition-scale sticky partitions={parts}", cell)
    medians: dict[str, dict] = {}
    details: dict[str, list] = {}
    for kind in ctx.brokers:
        listed = []
        for r1, rn in zip(runs[kind][low], runs[kind][high]):
            listed.append({
                f"mb_s_{low}": r1 and r1["mb_s"], f"mb_s_{high}": rn and rn["mb_s"],
                "mb_s_ratio": r1 and rn and _ratio(rn["mb_s"], r1["mb_s"]),
                "cpu_per_batch_ratio": r1 and rn and _ratio(rn.get("cpu_s_per_1k_batches"),
                                                            r1.get("cpu_s_per_1k_batches")),
                f"cpu_s_per_mb_{low}": r1 and r1.get("cpu_s_per_mb"),
                f"cpu_s_per_mb_{high}": rn and rn.get("cpu_s_per_mb"),
                "load_avg": [r and r["load_avg"] for r in (r1, rn)]})
        details[kind] = listed
        medians[kind] = {key: _median([p[key] for p in listed])
                         for key in ("mb_s_ratio", "cpu_per_batch_ratio")}
    name = f"partition-scale sticky partitions={high}"
    rows.append(Row(f"{name} CPU per batch / at 1 partition, median of {pairs} alternated pairs", "x",
                    medians.get("samsa", {}).get("cpu_per_batch_ratio"),
                    medians.get("tansu", {}).get("cpu_per_batch_ratio"), better="lower",
                    detail={"pairs": details}))
    rows.append(Row(f"{name} MB/s / at 1 partition, median of {pairs} alternated pairs "
                    f"(target >= 0.9 up to 1,000)", "x",
                    medians.get("samsa", {}).get("mb_s_ratio"), medians.get("tansu", {}).get("mb_s_ratio"),
                    detail={"pairs": details}))
    return rows, cells[low]


def run(ctx: Ctx) -> list[Row]:
    secs = ctx.seconds(3.0, 1.5)
    rows: list[Row] = []
    for load in ctx.pick(list(LOADS), list(LOADS)):
        if load == "sticky":
            cases = ctx.pick([PAIRED, 100, 10000], [PAIRED, 10000])
            base: dict = {}
            if PAIRED in cases:
                paired_rows, base = _pairs(ctx, secs)
                rows += paired_rows
            rows += _grid(ctx, load, [c for c in cases if c != PAIRED], secs, base)
        else:
            rows += _grid(ctx, load, ctx.pick([1, 100, 1000, 10000], [1, 1000, 10000]), secs, {})
    return rows
