"""The storage stop of many just-written logs: ``LogManager.shutdown`` wall and CPU.

N logs (default 10,000) under one started LogManager, each given one small
batch as fast as one thread can (a produce burst), then at once the clean
shutdown, timed: wall seconds, and the process's CPU seconds (every thread:
user + system). Also reported: how many active segments still lacked their
index files when the stop began (the scheduler had not got to them).

Usage: ``python bench/bench_storage_stop.py [--logs 10000] [--dir DIR]
[--threads N] [--settle]`` (``--threads``: close_threads_per_dir, which a stop owing
many index files overrides with a worker per CPU: it cannot reproduce the single-thread
close of before; not part of the test run).
"""
from __future__ import annotations

import argparse
import logging
import os
import resource
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.filesystem import describe
from samsa.config.topic import TopicConfig
from samsa.protocol.records import build_batch
from samsa.storage.checkpoints import durable_batch
from samsa.storage.manager import LogManager


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--logs", type=int, default=10_000)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--settle", action="store_true",
                    help="wait for every index file before the stop (the scheduler caught up)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("samsa.storage.manager").setLevel(logging.INFO)
    root = tempfile.mkdtemp(prefix="samsa-stop-", dir=args.dir)
    print(describe(root), flush=True)
    try:
        cfg = TopicConfig()
        lm = LogManager(root, cfg, 1, "c", close_threads_per_dir=args.threads)
        lm.startup()
        batch = build_batch([(None, b"x" * 100, (), int(time.time() * 1000))])
        logs = []
        t0 = time.monotonic()
        with durable_batch():   # (as the broker creates a topic's partitions)
            for p in range(args.logs):
                lg = lm.create_log("t", p, config=cfg)
                lg.begin_leader_epoch(0)
                logs.append(lg)
        t1 = time.monotonic()
        for lg in logs:
            lg.append(batch, 0)
        t2 = time.monotonic()
        while args.settle and not all(os.path.exists(lg.segments[-1].time_index_path)
                                      for lg in logs):
            time.sleep(0.5)
        missing = sum(1 for lg in logs
                      if not os.path.exists(lg.segments[-1].index_path))
        w0, c0 = time.monotonic(), cpu()
        failures = lm.shutdown()
        w1, c1 = time.monotonic(), cpu()
        assert failures == [], failures
        left = sum(1 for lg in logs if not (os.path.exists(lg.segments[-1].index_path)
                                          and os.path.exists(lg.segments[-1].time_index_path)))
        assert left == 0, f"{left} logs without index files after the stop"
        print(f"logs={args.logs} create={t1 - t0:.2f}s appends={t2 - t1:.2f}s "
              f"without_index_at_stop={missing} "
              f"shutdown_wall={w1 - w0:.2f}s shutdown_cpu={c1 - c0:.2f}s", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
