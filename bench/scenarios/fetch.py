"""Fetch throughput: data written first (untimed), then one consumer reads the whole
topic, then four consumer processes each read the whole topic at the same time
(four independent readers, as four consumer groups would). Limit: sendfile.

Two kinds of case:

- 1 KiB values with the plain consumer (the summary's fetch_vs_peer case). At this
  size the confluent-kafka Python loop (one Message object per record) is the
  bottleneck, not the broker: the broker's CPU stays far below one core.
- Large values (64 KiB, 512 KiB) with a consumer tuned for throughput
  (``load.consume_bulk_worker``): per-record Python cost is spread over many bytes,
  so the figure is what the broker can push, and samsa/sendfile-limit says how close
  the fetch path gets to the machine's floor. 512 KiB rather than 1 MiB because a
  1 MiB value does not fit librdkafka's default message.max.bytes (1,000,000) nor
  Kafka's default max.message.bytes (1,048,588) once batch overhead is added.
  First full run (2026-11-22, sendfile limit 2,252 MB/s): 64 KiB one consumer
  1,414 MB/s = 0.63 of the limit (tansu 302), 512 KiB 1,141 = 0.51 (tansu 370),
  with samsa at 22-29% of a core: even the tuned client is still the larger cost.
"""

from __future__ import annotations

from ..brokers import create_topic
from ..load import aggregate, consume_bulk_worker, consume_worker, fill_topic, run_workers
from .common import Ctx, Row, on_both_median, with_cpu
from .produce import size_label

SIZE = 1024
LARGE = [64 * 1024, 512 * 1024]


def measure(broker, size: int, records: int, consumers_list: list[int], worker=consume_worker,
            topic: str = "fetch", reads: int = 1) -> dict:
    """Fill once, then per consumer count read the topic ``reads`` times and keep the
    median try (all tries' MB/s under ``reads_mb_s``): re-reading costs no refill, and
    single reads of ~1 GiB on this VM swing by tens of percent."""
    bootstrap = broker.bootstrap
    create_topic(bootstrap, topic, 1)
    fill_topic(bootstrap, topic, size, records)
    out = {}
    for n in consumers_list:
        tries = [with_cpu(broker, lambda: aggregate(run_workers(
            worker, [(bootstrap, topic, [0], records)] * n, timeout=600))) for _ in range(reads)]
        med = sorted(tries, key=lambda r: r["mb_s"])[(reads - 1) // 2]
        if reads > 1:
            med["reads_mb_s"] = [round(r["mb_s"], 1) for r in tries]
        out[n] = med
    return out


def _rows(res: dict, label: str, consumers_list: list[int], records: int) -> list[Row]:
    rows = []
    for n in consumers_list:
        s = res.get("samsa") and res["samsa"][n]
        t = res.get("tansu") and res["tansu"][n]
        rows.append(Row(f"{label} consumers={n}", "MB/s", s and s["mb_s"], t and t["mb_s"],
                        limit="sendfile_loopback",
                        detail={"samsa": s, "tansu": t, "records": records,
                                # consumers=1 MB/s of every try, samsa and peer (median run reported)
                                "runs": {k: (res.get(k) or {}).get("runs") for k in ("samsa", "tansu")}}))
    return rows


def run(ctx: Ctx) -> list[Row]:
    records = ctx.count(150_000, 20_000)
    consumers_list = ctx.pick([1, 4], [1, 4])
    reps = ctx.repeats
    ctx.log(f"- fetch {records} x 1KiB, consumers {consumers_list}" + (f" (median of {reps})" if reps > 1 else ""))
    res = on_both_median(ctx, "fetch", lambda b: measure(b, SIZE, records, consumers_list),
                         key=lambda r: r[consumers_list[0]]["mb_s"], repeats=reps)
    rows = _rows(res, "fetch 1KiB", consumers_list, records)

    # Large values: a topic of about 1 GiB per size (quick: 512 MiB; on smaller
    # topics the fixed start-up cost of a read dominates the figure).
    total = ctx.count(1 << 30, 512 << 20)
    # --max-cases N counts the 1 KiB case first (the smoke test keeps just that one).
    sizes = LARGE if not ctx.max_cases else LARGE[:max(0, ctx.max_cases - 1)]
    for size in sizes:
        n_rec = max(16, total // size)
        label = f"fetch {size_label(size)} bulk"
        ctx.log(f"- {label}: {n_rec} x {size_label(size)}, tuned consumer, consumers {consumers_list}"
                + (f" (median of {reps} reads)" if reps > 1 else ""))
        res = on_both_median(ctx, label, lambda b: measure(b, size, n_rec, consumers_list,
                                                            consume_bulk_worker, topic="fetchbig",
                                                            reads=reps),
                             key=lambda r: r[consumers_list[0]]["mb_s"], repeats=1)
        rows += _rows(res, label, consumers_list, n_rec)
    return rows
