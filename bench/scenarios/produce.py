"""Produce throughput: librdkafka producers (linger.ms=5), 100 B and 1 KiB values,
acks=1 and acks=all, one and four producer processes, one partition."""

from __future__ import annotations

from ..brokers import create_topic
from ..load import aggregate, produce_worker, run_workers
from .common import Ctx, Row, on_both_median, with_cpu

# The summary's case comes first so --max-cases 1 (the smoke test) still measures it.
FULL = [(1024, "1", 1), (1024, "1", 4), (1024, "all", 1), (1024, "all", 4),
        (100, "1", 1), (100, "1", 4), (100, "all", 1), (100, "all", 4)]
QUICK = [(1024, "1", 1), (1024, "1", 4), (1024, "all", 1), (100, "1", 1)]


def size_label(size: int) -> str:
    return f"{size // 1024}KiB" if size % 1024 == 0 else f"{size}B"


def case_name(size: int, acks: str, producers: int) -> str:
    return f"produce {size_label(size)} acks={acks} producers={producers}"


def measure(broker, size: int, acks: str, producers: int, seconds: float, partitions: int = 1,
            topic: str = "produce") -> dict:
    bootstrap = broker.bootstrap
    create_topic(bootstrap, topic, partitions)
    return with_cpu(broker, lambda: aggregate(run_workers(
        produce_worker, [(bootstrap, topic, size, acks, seconds)] * producers, timeout=seconds + 180)))


def row(name: str, res: dict, limit: str | None = "tcp_loopback_1MiB") -> Row:
    s, t = res.get("samsa"), res.get("tansu")
    return Row(name, "MB/s", s and s["mb_s"], t and t["mb_s"], limit=limit,
               detail={"samsa": s, "tansu": t})


def run(ctx: Ctx) -> list[Row]:
    secs = ctx.seconds(4.0, 1.0)
    rows = []
    for i, (size, acks, n) in enumerate(ctx.pick(FULL, QUICK)):
        name = case_name(size, acks, n)
        # The first case is the summary's: median of several alternating runs.
        reps = ctx.repeats if i == 0 else 1
        ctx.log(f"- {name}" + (f" (median of {reps})" if reps > 1 else ""))
        res = on_both_median(ctx, name, lambda b: measure(b, size, acks, n, secs),
                             key=lambda r: r["mb_s"], repeats=reps)
        rows.append(row(name, res))
    return rows
