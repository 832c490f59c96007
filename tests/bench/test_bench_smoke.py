"""`python -m bench` end to end at toy size: one produce case and the fetch scenario
against samsa and the Tansu peer. Asserts that figures come out (numbers, JSON,
the summary line), never how fast anything is: speed is bench/'s business."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent

# Runs the bench (brokers, a peer) as a child process.
pytestmark = pytest.mark.integration

SUMMARY = re.compile(r"^summary: produce_vs_peer=(\S+) fetch_vs_peer=(\S+) p99_ms=(\S+)$")


def test_tiny_bench_run_reports_figures_for_samsa_and_peer(tmp_path):
    results = tmp_path / "results"
    cmd = [sys.executable, "-m", "bench", "--quick", "--only", "produce,fetch", "--max-cases", "1",
           "--scale", "0.25", "--no-limits", "--results-dir", str(results), "--work-dir", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"

    lines = proc.stdout.strip().splitlines()
    m = SUMMARY.match(lines[-1])
    assert m, f"last line is not the summary: {lines[-1]!r}"
    produce_ratio, fetch_ratio, p99 = m.groups()
    assert float(produce_ratio) > 0 and float(fetch_ratio) > 0
    assert p99 == "n/a"  # the latency scenario was not selected

    (out,) = results.glob("*.json")
    doc = json.loads(out.read_text())
    assert doc["errors"] == []
    rows = {r["name"]: r for r in doc["rows"]}
    for name in ("produce 1KiB acks=1 producers=1", "fetch 1KiB consumers=1"):
        row = rows[name]
        for kind in ("samsa", "tansu"):
            assert isinstance(row[kind], float) and math.isfinite(row[kind]) and row[kind] > 0, (name, kind, row)
        assert row["samsa_vs_peer"] > 0
        assert row["detail"]["samsa"]["records"] > 0
    rss = rows["peak RSS of the broker (max over all scenarios)"]
    assert rss["samsa"] > 0 and rss["tansu"] > 0
    assert "samsa/tansu" in proc.stdout  # the table was printed
