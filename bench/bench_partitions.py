"""Many partitions: descriptors held and start-up time of a real broker process.

Creates ``--topics`` x ``--per-topic`` partitions (default 10 x 1,000), writes
one record to every ``--touch``-th partition, then measures:
  - descriptors the broker holds (from /proc/<pid>/fd), idle and after the writes;
  - start-up time after a clean stop (SIGTERM) and after kill -9: from process
    start to the port answering ApiVersions;
  - descriptors right after each start;
  - with ``--fetch``: every written partition read back by one consumer, and
    the descriptors held then.
``--open-files-max`` sets samsa.log.open.segment.files.max (issue 29: 30,000
partitions holding data under a cap of 4,000 segment files).
The limit a user needs is the descriptor count, against RLIMIT_NOFILE.

Usage: ``python bench/bench_partitions.py [--topics 10] [--per-topic 1000]``
(not part of the test run).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def timed_start(broker: BrokerProcess) -> float:
    t0 = time.monotonic()
    broker.start()
    return time.monotonic() - t0


def read_back(bootstrap: str, names: list[str], args: argparse.Namespace) -> int:
    """Partitions whose record one consumer got back (each written one has one)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-partitions",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    want = {(n, p) for n in names for p in range(0, args.per_topic, args.touch)}
    consumer.assign([TopicPartition(n, p, 0) for n, p in want])
    seen: set[tuple[str, int]] = set()
    deadline = time.monotonic() + 600
    try:
        while seen < want and time.monotonic() < deadline:
            for msg in consumer.consume(10000, 1.0):
                if not msg.error():
                    seen.add((msg.topic(), msg.partition()))
    finally:
        consumer.close()
    return len(seen)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, default=10)
    ap.add_argument("--per-topic", type=int, default=1000)
    ap.add_argument("--touch", type=int, default=10, help="write to every Nth partition")
    ap.add_argument("--open-files-max", type=int, default=None,
                    help="samsa.log.open.segment.files.max for the broker")
    ap.add_argument("--fetch", action="store_true", help="read every written partition back")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="samsa-bench-partitions-"))
    overrides = ({"samsa.log.open.segment.files.max": args.open_files_max}
                 if args.open_files_max else None)
    broker = BrokerProcess(work, startup_timeout=600, overrides=overrides)
    out: dict = {"partitions": args.topics * args.per_topic,
                 "open_files_max": args.open_files_max}
    try:
        out["first_start_s"] = round(timed_start(broker), 2)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 300000})
        t0 = time.monotonic()
        names = [f"bench-{i}" for i in range(args.topics)]
        for name, fut in admin.create_topics([NewTopic(n, args.per_topic, 1) for n in names],
                                             operation_timeout=600).items():
            fut.result(900)
        out["create_s"] = round(time.monotonic() - t0, 1)
        out["fds_idle"] = fds(broker.pid)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
        touched = 0
        for name in names:
            for p in range(0, args.per_topic, args.touch):
                producer.produce(name, b"x", partition=p)
                touched += 1
        left = producer.flush(300)
        out["partitions_written"] = touched - left
        out["fds_after_writes"] = fds(broker.pid)
        if args.fetch:
            t0 = time.monotonic()
            out["partitions_read"] = read_back(broker.bootstrap, names, args)
            out["read_s"] = round(time.monotonic() - t0, 1)
            out["fds_after_reads"] = fds(broker.pid)
        broker.stop(timeout=300)
        out["start_after_clean_stop_s"] = round(timed_start(broker), 2)
        out["fds_after_clean_start"] = fds(broker.pid)
        broker.kill()
        out["start_after_kill9_s"] = round(timed_start(broker), 2)
        out["fds_after_kill9_start"] = fds(broker.pid)
    finally:
        broker.stop(timeout=300)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
