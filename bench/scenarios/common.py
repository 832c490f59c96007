"""What every scenario shares: the run context, one result row, "run this on both brokers"."""

from __future__ import annotations

import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from ..brokers import BROKERS, cpu_seconds, peak_rss_bytes, running


@dataclass
class Row:
    """One figure for samsa and the peer. ``limit`` names a machine limit (same unit)
    the samsa figure is divided by; ``better`` says which direction is good."""

    name: str
    unit: str
    samsa: float | None
    tansu: float | None = None
    limit: str | None = None
    better: str = "higher"
    detail: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Ctx:
    quick: bool
    work_root: Path
    scale: float = 1.0           # multiplies durations and record counts (the smoke test shrinks them)
    max_cases: int = 0           # >0: only the first N cases of each scenario
    limits: dict = field(default_factory=dict)
    peak_rss: dict = field(default_factory=dict)   # broker kind -> max VmHWM bytes seen
    rss_by_case: dict = field(default_factory=dict)  # case label -> {kind: VmHWM bytes}
    errors: list = field(default_factory=list)
    log: Callable[[str], None] = print
    brokers: tuple[str, ...] = BROKERS  # which of samsa and the peer the scenarios run on

    def seconds(self, full: float, quick: float) -> float:
        return max(0.3, (quick if self.quick else full) * self.scale)

    def count(self, full: int, quick: int) -> int:
        return max(100, int((quick if self.quick else full) * self.scale))

    @property
    def repeats(self) -> int:
        """Runs of a headline case (median reported)."""
        return 1 if self.quick or self.scale < 1 else 3

    def pick(self, full: list, quick: list) -> list:
        cases = quick if self.quick else full
        return cases[: self.max_cases] if self.max_cases else cases


def on_both(ctx: Ctx, label: str, fn: Callable, samsa_overrides: dict | None = None,
            brokers: tuple[str, ...] | None = None) -> dict:
    """``fn(broker)`` on a fresh samsa and a fresh peer (``brokers``, by default those
    ``ctx.brokers`` names); a failure becomes None plus an error line (one broker lacking a
    feature must not sink the whole run)."""
    out = {}
    for kind in brokers or ctx.brokers:
        try:
            with running(kind, ctx.work_root, samsa_overrides if kind == "samsa" else None) as b:
                try:
                    out[kind] = fn(b)
                finally:
                    rss = peak_rss_bytes(b.pid)
                    if rss:
                        ctx.peak_rss[kind] = max(ctx.peak_rss.get(kind, 0), rss)
                        ctx.rss_by_case.setdefault(label, {})[kind] = rss
        except Exception as e:
            out[kind] = None
            ctx.errors.append(f"{label} [{kind}]: {type(e).__name__}: {str(e)[:500]}")
            ctx.log(f"  ! {label} [{kind}] failed: {type(e).__name__}: {str(e)[:300]}")
            if ctx.log is print:
                traceback.print_exc(limit=3)
    return out


def with_cpu(broker, fn: Callable[[], dict]) -> dict:
    """``fn()`` (a dict with the timed window's ``seconds``) plus the broker's CPU use:
    ``broker_cpu_pct`` = CPU seconds of the broker process over the call / timed seconds
    (100 = one core busy). It tells whether the broker or the load generator was the
    bottleneck: a broker far below 100% per busy thread was waiting for its clients."""
    c0 = cpu_seconds(broker.pid)
    r = fn()
    c1 = cpu_seconds(broker.pid)
    if c0 is not None and c1 is not None and r.get("seconds"):
        r["broker_cpu_s"] = c1 - c0
        r["broker_cpu_pct"] = 100.0 * (c1 - c0) / r["seconds"]
    return r


def get(res: dict, kind: str, key: str):
    r = res.get(kind)
    return None if r is None else r.get(key)


def on_both_median(ctx: Ctx, label: str, fn: Callable, key: Callable[[dict], float], repeats: int,
                   **kw) -> dict:
    """``on_both`` ``repeats`` times, samsa and peer alternating, and per broker the run
    whose ``key`` is the median. For the headline figures: on a shared 2-core VM one
    try of a few seconds swings by tens of percent, alternation spreads the swings over
    both brokers. Every run's key value is kept under ``runs``."""
    tries: dict[str, list] = {}
    for i in range(repeats):
        for kind, r in on_both(ctx, label if repeats == 1 else f"{label} #{i + 1}", fn, **kw).items():
            if r is not None:
                tries.setdefault(kind, []).append(r)
    out = {}
    for kind in kw.get("brokers") or ctx.brokers:
        rs = sorted(tries.get(kind, []), key=key)
        if not rs:
            out[kind] = None
            continue
        med = rs[(len(rs) - 1) // 2]
        med["runs"] = [round(key(r), 3) for r in tries[kind]]
        out[kind] = med
    return out
