"""``python -m bench``: every scenario against samsa and Tansu, with machine limits, in one run.

Prints the machine limits, then one table of absolute figures with the ratios
samsa/peer and samsa/limit, writes everything to bench/results/<timestamp>.json,
and ends with exactly one line

    summary: produce_vs_peer=<ratio> fetch_vs_peer=<ratio> p99_ms=<ms>

for the 1 KiB acks=1 single-producer case (fetch: one consumer; p99: 1,000 records/s).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from . import limits as limits_mod
from .brokers import BROKERS, ensure_tansu
from .scenarios import SCENARIOS
from .scenarios.common import Ctx, Row

RESULTS_DIR = Path(__file__).resolve().parent / "results"

LIMIT_LABELS = {
    "tcp_loopback_100B": "TCP loopback, 100 B writes",
    "tcp_loopback_1KiB": "TCP loopback, 1 KiB writes",
    "tcp_loopback_1MiB": "TCP loopback, 1 MiB writes",
    "sendfile_loopback": "sendfile page-cached file -> loopback",
    "write_fsync_end": "sequential write, fsync at end",
    "write_fsync_per_mib": "sequential write, fsync every MiB",
}

SUMMARY_PRODUCE = "produce 1KiB acks=1 producers=1"
SUMMARY_FETCH = "fetch 1KiB consumers=1"
SUMMARY_P99 = "latency 1KiB @1000/s p99"


def _fmt(v, digits=1) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}" if abs(v) >= 1 else f"{v:.3f}"


def _ratio(a, b):
    if a is None or b is None or not b or (isinstance(a, float) and math.isnan(a)):
        return None
    return a / b


def _cpu(r: Row) -> str:
    """Broker CPU during the timed window, samsa/tansu, in % of one core."""
    vals = []
    for kind in ("samsa", "tansu"):
        d = r.detail.get(kind) if isinstance(r.detail, dict) else None
        v = d.get("broker_cpu_pct") if isinstance(d, dict) else None
        vals.append("-" if v is None else f"{v:.0f}")
    return "" if vals == ["-", "-"] else "/".join(vals)


def render(rows: list[Row], limits: dict) -> str:
    lines = ["machine limits (MB/s, measured in this run):"]
    for k, v in limits.items():
        lines.append(f"  {LIMIT_LABELS.get(k, k):<42} {_fmt(v):>10}")
    head = ("figure", "unit", "samsa", "tansu", "samsa/tansu", "limit", "samsa/limit", "cpu% s/t")
    table = [head]
    for r in rows:
        lim = limits.get(r.limit) if r.limit else None
        table.append((r.name + ("  (lower is better)" if r.better == "lower" else ""), r.unit,
                      _fmt(r.samsa), _fmt(r.tansu), _fmt(_ratio(r.samsa, r.tansu), 2),
                      f"{_fmt(lim)} ({r.limit})" if lim else "-", _fmt(_ratio(r.samsa, lim), 3),
                      _cpu(r)))
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    lines.append("")
    lines.append("cpu% s/t: CPU of the broker process while the load ran, samsa/tansu, 100 = one core "
                 "(far below 100 per busy thread: the load generator was the bottleneck)")
    for n, row in enumerate(table):
        lines.append("  ".join(c.ljust(widths[i]) if i < 2 else c.rjust(widths[i]) for i, c in enumerate(row)))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def summary(rows: list[Row]) -> str:
    by = {r.name: r for r in rows}

    def ratio(name):
        r = by.get(name)
        v = r and _ratio(r.samsa, r.tansu)
        return "n/a" if v is None else f"{v:.3f}"
    p99 = by.get(SUMMARY_P99)
    p99s = "n/a" if p99 is None or p99.samsa is None else f"{p99.samsa:.2f}"
    return f"summary: produce_vs_peer={ratio(SUMMARY_PRODUCE)} fetch_vs_peer={ratio(SUMMARY_FETCH)} p99_ms={p99s}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="reduced subset, small counts (< 3 minutes)")
    ap.add_argument("--only", default="", help=f"comma-separated scenarios, from: {', '.join(SCENARIOS)}")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply durations and record counts")
    ap.add_argument("--max-cases", type=int, default=0, help="only the first N cases of each scenario")
    ap.add_argument("--no-limits", action="store_true", help="skip the machine-limit measurements")
    ap.add_argument("--brokers", default=",".join(BROKERS),
                    help=f"comma-separated brokers to measure, from: {', '.join(BROKERS)} "
                         "(the peer's column stays empty without it)")
    ap.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    ap.add_argument("--work-dir", type=Path, default=None,
                    help="parent of the brokers' data dirs (default: the system temp dir); "
                         "the fsync limit is measured here too")
    args = ap.parse_args(argv)

    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        ap.error(f"unknown scenario(s) {unknown}; known: {', '.join(SCENARIOS)}")

    brokers = tuple(b.strip() for b in args.brokers.split(",") if b.strip())
    if not brokers or set(brokers) - set(BROKERS):
        ap.error(f"--brokers {args.brokers!r}; known: {', '.join(BROKERS)}")

    work_root = Path(tempfile.mkdtemp(prefix="samsa-bench-", dir=args.work_dir))
    ctx = Ctx(quick=args.quick, work_root=work_root, scale=args.scale, max_cases=args.max_cases,
              log=lambda m: print(m, flush=True), brokers=brokers)
    started = time.monotonic()
    rows: list[Row] = []
    try:
        if "tansu" in brokers:
            ensure_tansu()  # download once before any clock runs
        if not args.no_limits:
            print("measuring machine limits ...", flush=True)
            ctx.limits = limits_mod.measure_all(work_root, args.quick)
        for name in names:
            print(f"[{name}]", flush=True)
            t = time.monotonic()
            rows += SCENARIOS[name](ctx)
            print(f"  ({time.monotonic() - t:.1f}s)", flush=True)
    finally:
        shutil.rmtree(work_root, ignore_errors=True)
    for kind in ("samsa", "tansu"):
        ctx.peak_rss.setdefault(kind, None)
    rows.append(Row("peak RSS of the broker (max over all scenarios)", "MiB",
                    ctx.peak_rss["samsa"] and ctx.peak_rss["samsa"] / 2**20,
                    ctx.peak_rss["tansu"] and ctx.peak_rss["tansu"] / 2**20, better="lower"))

    print()
    print(render(rows, ctx.limits))
    if ctx.errors:
        print("\nerrors:")
        for e in ctx.errors:
            print(f"  {e}")
    stamp = dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    args.results_dir.mkdir(parents=True, exist_ok=True)
    out = args.results_dir / f"{stamp}.json"
    doc = {
        "started": stamp, "argv": sys.argv, "quick": args.quick, "scale": args.scale,
        "seconds": time.monotonic() - started,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": sys.version},
        "peer": "tansu 0.6.0 (memory storage)", "limits_mb_s": ctx.limits,
        "rows": [{**r.as_dict(), "samsa_vs_peer": _ratio(r.samsa, r.tansu),
                  "samsa_vs_limit": _ratio(r.samsa, ctx.limits.get(r.limit)) if r.limit else None}
                 for r in rows],
        "peak_rss_bytes_by_case": ctx.rss_by_case,
        "errors": ctx.errors,
    }
    out.write_text(json.dumps(doc, indent=1, default=str))
    print(f"\nresults: {out}  ({time.monotonic() - started:.0f}s)")
    print(summary(rows), flush=True)
    return 0
