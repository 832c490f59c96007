"""Offset commits per second, one consumer committing after every record.

A consumer's commits on one connection take effect in the order sent
(broker/request_order.py), as Kafka reads one request of a connection at a
time. Made to wait each for the one before to be written to
__consumer_offsets (replicated 3 times in a cluster), pipelined commits cost
one round of replication each; handed to the group coordinator in order,
they are written in order and replicated together. This measures a consumer
that commits every record asynchronously (librdkafka's
``commit(asynchronous=True)``), next to the same consumer committing
synchronously (one round trip at a time), on one broker or a 3-broker
cluster:

    python bench/bench_commits.py                 # one broker
    python bench/bench_commits.py --brokers 3     # a ZooKeeper cluster
    PYTHONPATH=/work/old python bench/bench_commits.py   # another tree's brokers

It checks what it measures: every commit answered without error, and the
group's committed offset at the end is the last one sent.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench.brokers import cpu_seconds  # noqa: E402

TOPIC = "commits"


def _produce(bootstrap: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(TOPIC, b"r%d" % i, partition=0)
        if i % 1000 == 0:
            p.poll(0)
    if p.flush(120):
        raise SystemExit("records were not all acknowledged")


def _read_all(consumer: Consumer, n: int) -> list:
    got: list = []
    deadline = time.monotonic() + 120
    while len(got) < n:
        if time.monotonic() > deadline:
            raise SystemExit(f"read {len(got)} of {n} records")
        got.extend(m for m in consumer.consume(1000, 1.0) if m.error() is None)
    return got


def _committing(bootstrap: str, group: str, n: int, asynchronous: bool,
                pids: list[int]) -> tuple[float, float]:
    """(commits/s, broker CPU-s per 1,000 commits) for one consumer committing
    each of ``n`` records."""
    answered: list[int] = []
    errors: list[object] = []

    def on_commit(err, partitions):
        if err is not None:
            errors.append(err)
        answered.append(1)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "on_commit": on_commit})
    try:
        c.assign([TopicPartition(TOPIC, 0, 0)])
        records = _read_all(c, n)
        cpu0 = sum(cpu_seconds(p) or 0.0 for p in pids)
        t0 = time.monotonic()
        for m in records:
            if asynchronous:
                c.commit(message=m, asynchronous=True)
                c.poll(0)  # serves the commit callbacks
            else:
                c.commit(message=m, asynchronous=False)
        while asynchronous and len(answered) < n:
            if time.monotonic() - t0 > 300:
                raise SystemExit(f"{len(answered)} of {n} commits answered")
            c.poll(0.01)
        elapsed = time.monotonic() - t0
        cpu = sum(cpu_seconds(p) or 0.0 for p in pids) - cpu0
        if errors:
            raise SystemExit(f"{len(errors)} commits failed, first: {errors[0]}")
        committed = c.committed([TopicPartition(TOPIC, 0)], timeout=30)[0].offset
        if committed != records[-1].offset() + 1:
            raise SystemExit(f"committed {committed}, the last commit sent was "
                             f"{records[-1].offset() + 1}")
        return n / elapsed, cpu / n * 1000
    finally:
        c.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", type=int, choices=(1, 3), default=1)
    ap.add_argument("--commits", type=int, default=3000)
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    import samsa
    print(f"brokers from {os.path.dirname(os.path.dirname(samsa.__file__))}")
    with tempfile.TemporaryDirectory(prefix="samsa-bench-commits-") as work:
        if args.brokers == 1:
            from tests.support.broker_process import BrokerProcess
            broker = BrokerProcess(Path(work) / "b", overrides={
                "group.initial.rebalance.delay.ms": "0"}).start()
            bootstrap, pids, stop = broker.bootstrap, [broker.pid], broker.stop
        else:
            from samsa.testing.cluster import ClusterProcesses
            cluster = ClusterProcesses(Path(work), 3, offsets_partitions=3, overrides={
                "offsets.topic.replication.factor": "3",
                "group.initial.rebalance.delay.ms": "0"})
            cluster.start()
            bootstrap, stop = cluster.bootstrap, cluster.stop
            pids = [b.pid for b in cluster.brokers]
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic(TOPIC, 1, args.brokers)])[TOPIC].result(60)
            _produce(bootstrap, args.commits)
            for run in range(args.runs):
                rates = {}
                for mode in ("sync", "async"):
                    rate, cpu = _committing(bootstrap, f"g-{mode}-{run}", args.commits,
                                            mode == "async", pids)
                    rates[mode] = rate
                    print(f"run {run + 1} {mode:5}: {rate:7.0f} commits/s, "
                          f"brokers' CPU {cpu:.3f} s per 1,000 commits", flush=True)
                print(f"run {run + 1} async/sync: {rates['async'] / rates['sync']:.2f}")
        finally:
            stop()


if __name__ == "__main__":
    main()
