"""Storage benchmarks, reported as ratios against a physical baseline in the same run.

1. Append throughput: ``Log.append`` of pre-built v2 batches (16 KiB and 1 MiB)
   vs. plain ``os.write`` of the same bytes to a file in the same directory.
   Target: ratio >= 0.8 for 16 KiB batches.
2. Start-up: ``LogManager.startup()`` over 1,000 partitions of 3 segments each,
   after a clean shutdown. Target: < 2 s.

Usage: ``python bench/bench_storage.py [--dir DIR] [--mib 512] [--partitions 1000]``
(not part of the test run).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from samsa.config.topic import TopicConfig
from samsa.protocol.records import build_batch
from samsa.storage.log import Log
from samsa.storage.manager import LogManager


def make_batch(batch_bytes: int) -> bytes:
    """A v2 batch of ~1 KiB records whose total size is ``batch_bytes``."""
    n = max(1, batch_bytes // 1024)
    per_record = (batch_bytes - 61) // n
    value_len = per_record - 8   # record overhead: length, attrs, deltas, key/value lens, headers
    for _ in range(20):
        b = build_batch([(None, os.urandom(value_len), (), 1_700_000_000_000)] * n)
        if len(b) == batch_bytes:
            return b
        value_len += (batch_bytes - len(b)) // n or (1 if len(b) < batch_bytes else -1)
    return b


def bench_raw(path: str, batch: bytes, count: int) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    t = time.perf_counter()
    for _ in range(count):
        os.write(fd, batch)
    dt = time.perf_counter() - t
    os.fsync(fd)          # untimed: start the next run without dirty pages in flight
    os.close(fd)
    os.unlink(path)
    return dt


def bench_log(d: str, batch: bytes, count: int) -> float:
    cfg = TopicConfig(segment_bytes=1 << 30)
    lg = Log(os.path.join(d, "bench-0"), "bench", 0, cfg)
    t = time.perf_counter()
    for _ in range(count):
        lg.append(batch)
    dt = time.perf_counter() - t
    lg.close()            # untimed: flush + close, as above
    shutil.rmtree(os.path.join(d, "bench-0"))
    return dt


def append_throughput(d: str, batch_bytes: int, total_mib: int, rounds: int = 5) -> dict:
    """Alternate raw and Log runs (ABBA...) so both see the same disk/page-cache
    conditions; report the median of the per-pair ratios."""
    batch = make_batch(batch_bytes)
    count = max(10, total_mib * (1 << 20) // len(batch))
    raw, lg = [], []
    for i in range(rounds):
        if i % 2 == 0:
            raw.append(bench_raw(os.path.join(d, "raw.bin"), batch, count))
            lg.append(bench_log(d, batch, count))
        else:
            lg.append(bench_log(d, batch, count))
            raw.append(bench_raw(os.path.join(d, "raw.bin"), batch, count))
    mb = count * len(batch) / 1e6
    ratios = sorted(r / l for r, l in zip(raw, lg))
    return {"batch": len(batch), "count": count, "raw_MBps": mb / statistics.median(raw),
            "log_MBps": mb / statistics.median(lg), "ratio": statistics.median(ratios),
            "ratios": ratios}


def startup_time(d: str, partitions: int, segments: int = 3) -> dict:
    cfg = TopicConfig(segment_bytes=16 * 1024)
    batch = make_batch(4096)
    per_seg = max(1, (16 * 1024) // len(batch))
    lm = LogManager([d], cfg, 0, "bench")
    lm.startup()
    for p in range(partitions):
        lg = lm.create_log("startup", p, cfg)
        while len(lg.segments) < segments:
            lg.append(batch)
        for _ in range(per_seg // 2):
            lg.append(batch)
    lm.shutdown()
    lm2 = LogManager([d], cfg, 0, "bench")
    t = time.perf_counter()
    lm2.startup()
    dt = time.perf_counter() - t
    n = len(lm2.all_logs())
    nseg = sum(len(lg.segments) for lg in lm2.all_logs().values())
    lm2.shutdown()
    return {"partitions": n, "segments": nseg, "seconds": dt}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=None)
    ap.add_argument("--mib", type=int, default=64, help="data per append run")
    ap.add_argument("--partitions", type=int, default=1000)
    args = ap.parse_args()
    base = tempfile.mkdtemp(prefix="samsa-bench-", dir=args.dir)
    try:
        for size in (16 * 1024, 1 << 20):
            r = append_throughput(base, size, args.mib)
            print(f"append {r['batch']:>8} B batches x{r['count']}: raw os.write "
                  f"{r['raw_MBps']:.0f} MB/s, Log.append {r['log_MBps']:.0f} MB/s, "
                  f"ratio {r['ratio']:.2f} (per round: "
                  + ", ".join(f"{x:.2f}" for x in r["ratios"]) + ")")
        s = startup_time(os.path.join(base, "startup"), args.partitions)
        print(f"startup after clean stop: {s['partitions']} partitions, {s['segments']} segments "
              f"in {s['seconds']:.2f} s")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
