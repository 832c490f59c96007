"""Rebalance time: a fourth member joins a group of three, with the classic
protocol (JoinGroup/SyncGroup, librdkafka's default eager range assignor)
against the KIP-848 consumer protocol (server-side uniform assignor), same
broker, same run.

Usage: python bench/bench_group_rebalance.py [--rounds 5] [--partitions 12]

Each round: three confluent-kafka members (one polling thread each) reach a
covering assignment; the clock starts as the fourth subscribes and stops when
the four hold disjoint, non-empty sets of partitions covering the topic.
Both protocols hear of a rebalance at the same pace: the classic members
heartbeat every 500 ms, the broker tells consumer-protocol members the same
interval (group.consumer.heartbeat.interval.ms). Reported: median and worst
over the rounds per protocol, and their ratio.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

HEARTBEAT_MS = 500


class Member:
    """One consumer polling on its own thread; ``held`` is its assignment now."""

    def __init__(self, bootstrap: str, group: str, topic: str, protocol: str):
        from confluent_kafka import Consumer
        conf = {"bootstrap.servers": bootstrap, "group.id": group,
                "auto.offset.reset": "earliest", "enable.auto.commit": False}
        if protocol == "consumer":
            conf["group.protocol"] = "consumer"
        else:
            conf.update({"heartbeat.interval.ms": HEARTBEAT_MS, "session.timeout.ms": 10000})
        self.consumer = Consumer(conf)
        self.topic = topic
        self.held: frozenset[int] = frozenset()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Member:
        self.consumer.subscribe([self.topic])
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(0.02)
            self.held = frozenset(tp.partition for tp in self.consumer.assignment())
        self.consumer.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)


def _covering(members: list[Member], partitions: int) -> bool:
    held = [m.held for m in members]
    return all(held) and sum(map(len, held)) == partitions and \
        frozenset().union(*held) == frozenset(range(partitions))


def _wait(members: list[Member], partitions: int, timeout: float = 120.0) -> float:
    start = time.perf_counter()
    while not _covering(members, partitions):
        if time.perf_counter() - start > timeout:
            raise TimeoutError(f"no covering assignment after {timeout:.0f} s: "
                               f"{[sorted(m.held) for m in members]}")
        time.sleep(0.005)
    return time.perf_counter() - start


def one_round(bootstrap: str, topic: str, partitions: int, protocol: str) -> float:
    group = f"bench-{protocol}-{uuid.uuid4().hex[:8]}"
    members = [Member(bootstrap, group, topic, protocol).start() for _ in range(3)]
    try:
        _wait(members, partitions)
        members.append(Member(bootstrap, group, topic, protocol).start())
        return _wait(members, partitions)
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--partitions", type=int, default=12)
    args = ap.parse_args()
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.support.broker_process import BrokerProcess
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp), overrides={
            "offsets.topic.num.partitions": "1",
            "group.consumer.heartbeat.interval.ms": str(HEARTBEAT_MS),
            "group.consumer.min.heartbeat.interval.ms": "100"}).start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            admin.create_topics([NewTopic("rebalance", args.partitions, 1)])["rebalance"].result(30)
            times: dict[str, list[float]] = {"classic": [], "consumer": []}
            for _ in range(args.rounds):
                for protocol in times:  # interleaved, so drift hits both alike
                    times[protocol].append(one_round(broker.bootstrap, "rebalance",
                                                     args.partitions, protocol))
        finally:
            broker.stop()
    for protocol, ts in times.items():
        print(f"{protocol}: a 4th member joining 3: median {statistics.median(ts) * 1000:.0f} ms, "
              f"worst {max(ts) * 1000:.0f} ms over {len(ts)} rounds")
    ratio = statistics.median(times["consumer"]) / statistics.median(times["classic"])
    print(f"consumer/classic (median): {ratio:.2f}")


if __name__ == "__main__":
    main()
