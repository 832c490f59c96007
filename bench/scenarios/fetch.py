"""Fetch throughput: data written first (untimed), then one consumer reads the whole
topic, then four consumer processes each read the whole topic at the same time
(four independent readers, as four consumer groups would). Limit: sendfile."""

from __future__ import annotations

from ..brokers import create_topic
from ..load import aggregate, consume_worker, fill_topic, run_workers
from .common import Ctx, Row, on_both_median, with_cpu

SIZE = 1024


def measure(broker, records: int, consumers_list: list[int]) -> dict:
    bootstrap = broker.bootstrap
    create_topic(bootstrap, "fetch", 1)
    fill_topic(bootstrap, "fetch", SIZE, records)
    out = {}
    for n in consumers_list:
        out[n] = with_cpu(broker, lambda: aggregate(run_workers(
            consume_worker, [(bootstrap, "fetch", [0], records)] * n, timeout=600)))
    return out


def run(ctx: Ctx) -> list[Row]:
    records = ctx.count(150_000, 20_000)
    consumers_list = ctx.pick([1, 4], [1, 4])
    reps = ctx.repeats
    ctx.log(f"- fetch {records} x 1KiB, consumers {consumers_list}" + (f" (median of {reps})" if reps > 1 else ""))
    res = on_both_median(ctx, "fetch", lambda b: measure(b, records, consumers_list),
                         key=lambda r: r[consumers_list[0]]["mb_s"], repeats=reps)
    rows = []
    for n in consumers_list:
        s = res.get("samsa") and res["samsa"][n]
        t = res.get("tansu") and res["tansu"][n]
        rows.append(Row(f"fetch 1KiB consumers={n}", "MB/s", s and s["mb_s"], t and t["mb_s"],
                        limit="sendfile_loopback",
                        detail={"samsa": s, "tansu": t, "records": records,
                                # consumers=1 MB/s of every try, samsa and peer (median run reported)
                                "runs": {k: (res.get(k) or {}).get("runs") for k in ("samsa", "tansu")}}))
    return rows
