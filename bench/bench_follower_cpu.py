"""Broker CPU a 3-broker cluster spends on replication at partition scale.

Starts a real ZooKeeper and three samsa brokers (samsa.testing.cluster), creates
``--partitions`` partitions at RF 3 (topics of 1,000), lets them settle (every
follower's fetch session incremental), then reports each broker's CPU seconds
per second while idle (what the followers' long polls cost their leaders), and
each broker's CPU seconds over ``--seconds`` of 10,000 acks=all records/s (1 KiB)
to one RF 3 partition beside them, with that produce's p50/p99 latency. CPU
time, not wall time: it stays meaningful on a shared machine. Compare two trees
by running it from each (``PYTHONPATH`` at the tree).

Usage: ``python bench/bench_follower_cpu.py [--partitions 6000] [--idle-seconds 20]``
(not part of the test run).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.brokers import cpu_seconds, create_topic
from bench.scenarios.latency import measure
from samsa.testing.cluster import ClusterProcesses

PER_TOPIC = 1000
SETTLE_S = 20.0  # after every partition has a leader: ISRs full, sessions incremental


def _cpu(cluster: ClusterProcesses) -> list[float]:
    return [cpu_seconds(b.pid) or 0.0 for b in cluster.brokers]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=6000)
    ap.add_argument("--idle-seconds", type=float, default=20.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="samsa-bench-follower-cpu-"))
    cluster = ClusterProcesses(work, size=3)
    cluster.start()
    try:
        topics = [f"idle-{i}" for i in range(max(1, args.partitions // PER_TOPIC))]
        for topic in topics:
            create_topic(cluster.bootstrap, topic, PER_TOPIC, replication_factor=3, timeout=600)
        for topic in topics:
            cluster.wait_for_leaders(topic, PER_TOPIC, timeout=600)
        time.sleep(SETTLE_S)
        before, start = _cpu(cluster), time.monotonic()
        time.sleep(args.idle_seconds)
        after, elapsed = _cpu(cluster), time.monotonic() - start
        print(f"idle, {len(topics) * PER_TOPIC} partitions RF 3: CPU s per s per broker "
              f"{[round((b - a) / elapsed, 3) for a, b in zip(before, after)]} "
              f"(load {os.getloadavg()[0]:.1f})", flush=True)
        before = _cpu(cluster)
        res = measure(cluster.bootstrap, 10_000, args.seconds, "all", replication_factor=3)
        after = _cpu(cluster)
        print(f"10,000/s acks=all RF 3 for {args.seconds:g} s beside them: CPU s per broker "
              f"{[round(b - a, 2) for a, b in zip(before, after)]}, produce p50/p99 "
              f"{res['ack_p50']:.1f}/{res['ack_p99']:.1f} ms (load {os.getloadavg()[0]:.1f})",
              flush=True)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
