"""What transactions cost, as ratios measured in one run on one broker.

1. Transactional produce against idempotent produce: one librdkafka producer
   writes ``--records`` records of ``--size`` bytes (1 KiB) to a fresh topic
   of one partition, idempotent (acks=all) in one run and transactional with
   ``--per-txn`` records per transaction (100) in the other; runs alternate,
   ``--repeats`` of each, medians of MB/s and the ratio transactional /
   idempotent. A transaction adds two coordinator round trips (AddPartitionsToTxn
   on its first record, EndTxn) and a marker per partition, so the ratio is
   what those cost per 100 records.
2. read_committed against read_uncommitted: the transactional topic of run 1
   read from the start by one consumer with each isolation level (alternating,
   medians): MB/s and the ratio. read_committed stops at the last stable offset
   and drops aborted transactions (none here), so the ratio is the cost of the
   bookkeeping (aborted-transaction lists, control batches skipped by the client).

    python bench/bench_transactions.py [--records 100000] [--size 1024] [--per-txn 100]
                                      [--repeats 3]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.brokers import create_topic, running


def _produce(bootstrap: str, topic: str, records: int, size: int, per_txn: int) -> float:
    """Seconds to write ``records`` (per_txn 0: idempotent, no transactions)."""
    from confluent_kafka import Producer
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True,
            "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 20}
    if per_txn:
        conf["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    p = Producer(conf)
    if per_txn:
        p.init_transactions(30)
    value = b"x" * size
    t0 = time.monotonic()
    sent = 0
    while sent < records:
        n = min(per_txn or records, records - sent)
        if per_txn:
            p.begin_transaction()
        for _ in range(n):
            while True:
                try:
                    p.produce(topic, value=value)
                    break
                except BufferError:
                    p.poll(0.01)
        if per_txn:
            p.commit_transaction(60)  # flushes, then EndTxn
        sent += n
    if p.flush(60):
        raise RuntimeError("records left unsent")
    return time.monotonic() - t0


def _consume(bootstrap: str, topic: str, isolation: str, expected: int) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"b-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "fetch.max.bytes": 64 << 20, "max.partition.fetch.bytes": 8 << 20,
                  "queued.max.messages.kbytes": 256 << 10})
    c.list_topics(topic, timeout=30)
    t0 = time.monotonic()
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    deadline = t0 + 300
    while got < expected:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{isolation}: read {got}/{expected}")
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                got += 1
    elapsed = time.monotonic() - t0
    c.close()
    return elapsed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--per-txn", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    mb = args.records * args.size / 1e6
    idem, txn, committed, uncommitted = [], [], [], []
    with running("samsa") as broker:
        bootstrap = broker.bootstrap
        last_txn_topic = None
        for _ in range(args.repeats):
            for per_txn, out in ((0, idem), (args.per_txn, txn)):
                topic = f"bench-tx-{uuid.uuid4().hex[:8]}"
                create_topic(bootstrap, topic)
                out.append(mb / _produce(bootstrap, topic, args.records, args.size, per_txn))
                if per_txn:
                    last_txn_topic = topic
        for _ in range(args.repeats):
            for isolation, out in (("read_uncommitted", uncommitted),
                                   ("read_committed", committed)):
                out.append(mb / _consume(bootstrap, last_txn_topic, isolation, args.records))
    med = statistics.median
    print(f"records={args.records} size={args.size} per_txn={args.per_txn} "
          f"repeats={args.repeats}")
    print(f"produce idempotent      {med(idem):8.1f} MB/s  (runs: "
          f"{', '.join(f'{x:.1f}' for x in idem)})")
    print(f"produce transactional   {med(txn):8.1f} MB/s  (runs: "
          f"{', '.join(f'{x:.1f}' for x in txn)})")
    print(f"ratio transactional/idempotent      {med(txn) / med(idem):.2f}")
    print(f"fetch read_uncommitted  {med(uncommitted):8.1f} MB/s")
    print(f"fetch read_committed    {med(committed):8.1f} MB/s")
    print(f"ratio read_committed/read_uncommitted {med(committed) / med(uncommitted):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
