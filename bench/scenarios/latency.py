"""End-to-end latency: one producer at a steady rate (1 KiB values, acks=1,
linger.ms=0 so the client adds no deliberate delay), one consumer polling the
partition; latency = receive time - send time carried in the value (one
machine-wide monotonic clock)."""

from __future__ import annotations

from ..brokers import create_topic
from ..load import latency_consumer, latency_producer, run_workers
from .common import Ctx, Row, on_both

SIZE = 1024


def percentile(sorted_values: list[int], q: float) -> float:
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, int(round(q * len(sorted_values))) - 1))
    return sorted_values[i]


def measure(bootstrap: str, rate: int, seconds: float, acks: str = "1") -> dict:
    topic = f"latency-{rate}-acks{acks}"
    create_topic(bootstrap, topic, 1)
    expected = int(rate * seconds)
    results = run_workers(None, [(latency_consumer, bootstrap, topic, expected, seconds + 30),
                                 (latency_producer, bootstrap, topic, SIZE, rate, seconds, acks)],
                          timeout=seconds + 90)
    lat = sorted(next(r for r in results if "latencies_ns" in r)["latencies_ns"])
    if len(lat) < expected * 0.99:
        raise RuntimeError(f"consumer saw {len(lat)} of {expected} records")
    return {"received": len(lat), "expected": expected,
            **{k: percentile(lat, q) / 1e6 for k, q in (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999))},
            "max": lat[-1] / 1e6}


def run(ctx: Ctx) -> list[Row]:
    secs = ctx.seconds(10.0, 2.0)
    rows = []
    # (acks=all at 1,000/s too: on one broker it must cost what acks=1 does)
    for rate, acks in ctx.pick([(1000, "1"), (1000, "all"), (10000, "1")],
                               [(1000, "1"), (1000, "all"), (10000, "1")]):
        label = "" if acks == "1" else f" acks={acks}"
        ctx.log(f"- latency 1KiB @ {rate}/s{label} for {secs:.1f}s")
        res = on_both(ctx, f"latency {rate}/s{label}",
                      lambda b: measure(b.bootstrap, rate, secs, acks))
        for q in ("p50", "p99", "p99.9"):
            s, t = res.get("samsa"), res.get("tansu")
            rows.append(Row(f"latency 1KiB @{rate}/s{label} {q}", "ms", s and s[q], t and t[q],
                            better="lower", detail={"samsa": s, "tansu": t} if q == "p50" else {}))
    return rows
