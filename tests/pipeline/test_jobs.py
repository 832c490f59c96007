"""The activity pipeline end to end (pipeline/jobs): generated events -> the streaming job
(Parquet by date, window counts to a topic) -> the rebuild of one day. Real Spark, real broker;
the expected output is computed from the generator's own (deterministic) events.
"""
from __future__ import annotations

import collections
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from samsa.pipeline.jobs.__main__ import main
from samsa.pipeline.jobs.generate import Event, events, produce_events
from samsa.pipeline.jobs.parquet_sink import ParquetBatchSink

from .conftest import consume_all

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]
START = "2026-11-23T23:50:00Z"
START_MS = int(dt.datetime(2026, 11, 23, 23, 50, tzinfo=dt.timezone.utc).timestamp() * 1000)
COUNT, SEED, INTERVAL_MS = 600, 7, 2000          # 20 minutes of events across midnight


def minute(ms: int) -> str:
    t = dt.datetime.fromtimestamp(ms // 60_000 * 60, dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def parquet_rows(spark, path, day=None):
    df = spark.read.parquet(str(path))
    if day:
        df = df.where(f"date = DATE'{day}'")
    return sorted((r.user, r.page, r.action, r.ms, r.topic, r.partition, r.offset, str(r.date))
                  for r in df.selectExpr("*", "unix_millis(event_time) AS ms").collect())


def test_generator_is_deterministic():
    a = events(50, 3, START_MS, 1000)
    assert a == events(50, 3, START_MS, 1000) and a != events(50, 4, START_MS, 1000)
    assert all(START_MS + i * 1000 <= e.timestamp_ms < START_MS + (i + 1) * 1000 for i, e in enumerate(a))
    assert json.loads(a[0].to_json()) == {"user": a[0].user, "page": a[0].page, "action": a[0].action,
                                          "timestamp": a[0].iso_time()}


def test_parquet_sink_publishes_a_batch_once(spark, tmp_path):
    df = spark.createDataFrame([(i, "2026-11-23" if i % 2 else "2026-11-24") for i in range(20)],
                               "n int, date string")
    sink = ParquetBatchSink(str(tmp_path / "out"))
    sink(df.repartition(3), 4)
    sink(df.coalesce(1), 4)             # the same batch run again (a retry): replaces, never adds
    sink(df.where("n < 5"), 5)
    got = sorted(r.n for r in spark.read.parquet(str(tmp_path / "out")).collect())
    assert got == sorted(list(range(20)) + list(range(5)))
    assert not os.listdir(tmp_path / "out" / "_staging")


def test_pipeline_end_to_end(spark, broker, tmp_path):
    b = broker.bootstrap
    out, cp = tmp_path / "events", tmp_path / "checkpoints"
    # The generator, through its command.
    gen = subprocess.run([sys.executable, "-m", "samsa.pipeline.jobs", "generate", "--bootstrap-servers", b,
                          "--count", str(COUNT), "--seed", str(SEED), "--start", START,
                          "--interval-ms", str(INTERVAL_MS), "--partitions", "3"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert gen.returncode == 0, gen.stderr
    expected = events(COUNT, SEED, START_MS, INTERVAL_MS)
    stream_args = ["stream", "--bootstrap-servers", b, "--output", str(out), "--checkpoint", str(cp),
                   "--window", "1 minute", "--watermark", "2 minutes", "--available-now"]
    main(stream_args, spark=spark)

    # Every event once, with the record it came from; two dates.
    rows = parquet_rows(spark, out)
    assert len(rows) == COUNT
    assert sorted(r[:4] for r in rows) == sorted((e.user, e.page, e.action, e.timestamp_ms) for e in expected)
    assert len({r[4:7] for r in rows}) == COUNT
    per_partition = collections.Counter(r[5] for r in rows)
    for p, n in per_partition.items():
        assert sorted(r[6] for r in rows if r[5] == p) == list(range(n))      # every offset, no gap
    assert {r[7] for r in rows} == {"2026-11-23", "2026-11-24"}
    assert all(r[7] == dt.datetime.fromtimestamp(r[3] / 1000, dt.timezone.utc).date().isoformat() for r in rows)

    # A later event moves the watermark past every generated window: each is written once.
    closing = Event("user-9999", "/", "view", START_MS + 40 * 60_000)
    produce_events(b, "events", [closing])
    main(stream_args, spark=spark)
    counts = {}
    for key, value, *_ in consume_all(b, "activity-per-window", include_headers=False):
        v = json.loads(value)
        assert key.decode() == f"{v['window_start']}|{v['action']}"
        assert (v["window_start"], v["action"]) not in counts, "a window written twice"
        counts[(v["window_start"], v["action"])] = v["events"]
        assert 1 <= v["users"] <= v["events"]
    want = collections.Counter((minute(e.timestamp_ms), e.action) for e in expected)
    assert counts == dict(want)
    assert len(parquet_rows(spark, out)) == COUNT + 1

    # Rebuild one day after losing some of its files: the same rows; the other day untouched.
    day = "2026-11-23"
    before = parquet_rows(spark, out, day)
    assert len(before) == sum(1 for e in expected if e.iso_time().startswith(day))
    day_dir, other_dir = out / f"date={day}", out / "date=2026-11-24"
    other_files = {f: os.stat(other_dir / f).st_mtime_ns for f in os.listdir(other_dir)}
    os.remove(day_dir / sorted(f for f in os.listdir(day_dir) if f.endswith(".parquet"))[0])
    assert len(parquet_rows(spark, out, day)) < len(before)
    main(["rebuild", "--bootstrap-servers", b, "--output", str(out), "--date", day], spark=spark)
    assert parquet_rows(spark, out, day) == before
    assert {f: os.stat(other_dir / f).st_mtime_ns for f in os.listdir(other_dir)} == other_files
