"""Share-group throughput against a consumer group's, as ratios measured in
one run on one broker.

One topic of 4 partitions holds ``--records`` records of ``--size`` bytes.
It is read whole, from the start, by a share group of 1, 2 and 4
confluent-kafka ShareConsumers (implicit acknowledgement: each poll accepts
the previous poll's records, so every record is acquired and acknowledged)
and by a consumer group of as many confluent-kafka Consumers, alternating,
``--repeats`` of each; a fresh group each time (share.auto.offset.reset=
earliest as its GROUP config). Records/s over the last nine tenths of the
records (joining and the clients' first prefetch are not counted), medians,
and the ratio share / consumer for each member count.

    python bench/bench_share_groups.py [--records 200000] [--size 100] [--repeats 2]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.brokers import create_topic, running

PARTITIONS = 4
OVERRIDES = {"group.initial.rebalance.delay.ms": 0,"share.coordinator.state.topic.num.partitions": 3,
             "offsets.topic.num.partitions": 3,
             "group.share.heartbeat.interval.ms": 500,
             "group.share.min.heartbeat.interval.ms": 500}


def _fill(bootstrap: str, topic: str, records: int, size: int) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    value = b"x" * size
    for i in range(records):
        while True:
            try:
                p.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.01)
    if p.flush(60):
        raise RuntimeError("records left unsent")


def _read(make, poll, records: int, members: int) -> float:
    """Records/s: ``members`` clients made by ``make()``, each polled on its own
    thread by ``poll(client)`` (returns how many records it got), until all
    ``records`` are in."""
    clients = [make() for _ in range(members)]
    lock = threading.Lock()
    got = [0]
    done = threading.Event()
    deadline = time.monotonic() + 300

    first: list[tuple[float, int]] = []  # when the first tenth was in, and how many

    def run(c) -> None:
        while not done.is_set() and time.monotonic() < deadline:
            n = poll(c)
            with lock:
                got[0] += n
                if not first and got[0] >= records // 10:
                    first.append((time.monotonic(), got[0]))
                if got[0] >= records:
                    done.set()
    threads = [threading.Thread(target=run, args=(c,), daemon=True) for c in clients]
    for t in threads:
        t.start()
    done.wait(300)
    end = time.monotonic()
    for t in threads:
        t.join(30)
    for c in clients:
        c.close()
    if got[0] < records or not first:
        raise RuntimeError(f"read {got[0]}/{records}")
    t0, before = first[0]
    return (got[0] - before) / (end - t0)


def _share(bootstrap: str, topic: str, records: int, members: int) -> float:
    from confluent_kafka import ShareConsumer
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                       ConfigResource, ResourceType)
    group = f"bench-share-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(timeout=30)

    def make():
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                           "max.poll.records": 500})
        c.subscribe([topic])
        return c
    return _read(make, lambda c: sum(1 for m in c.poll(0.2) if m.error() is None),
                 records, members)


def _consumer(bootstrap: str, topic: str, records: int, members: int) -> float:
    from confluent_kafka import Consumer
    group = f"bench-cg-{uuid.uuid4().hex[:8]}"

    def make():
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                      "auto.offset.reset": "earliest", "enable.auto.commit": True})
        c.subscribe([topic])
        return c
    return _read(make, lambda c: sum(1 for m in c.consume(500, 0.2) if m.error() is None),
                 records, members)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    results: dict[tuple[str, int], list[float]] = {}
    with running("samsa", overrides=OVERRIDES) as broker:
        b = broker.bootstrap
        topic = f"bench-share-{uuid.uuid4().hex[:8]}"
        create_topic(b, topic, PARTITIONS)
        _fill(b, topic, args.records, args.size)
        for _ in range(args.repeats):
            for members in (1, 2, 4):
                for kind, fn in (("consumer", _consumer), ("share", _share)):
                    results.setdefault((kind, members), []).append(
                        fn(b, topic, args.records, members))
    med = statistics.median
    print(f"records={args.records} size={args.size} partitions={PARTITIONS} "
          f"repeats={args.repeats}")
    for members in (1, 2, 4):
        c, s = med(results[("consumer", members)]), med(results[("share", members)])
        print(f"{members} member(s): consumer group {c:9.0f} rec/s  share group {s:9.0f} rec/s"
              f"  ratio share/consumer {s / c:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
