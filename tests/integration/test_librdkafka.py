"""librdkafka: confluent-kafka's idempotent producer and assign-based consumer, and kcat."""
from __future__ import annotations

import subprocess
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

N = 100_000


def test_confluent_idempotent_round_trip(broker):
    topic = f"rdk-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)

    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
                         "linger.ms": 5, "compression.type": "zstd"})

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    for i in range(N):
        while True:
            try:
                producer.produce(topic, value=b"%d" % i, key=b"%d" % (i % 97),
                                 on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    assert errors == []

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
        seen = {0: [], 1: []}
        total = 0
        idle = 0
        while total < N and idle < 30:
            msgs = consumer.consume(10000, 1.0)
            if not msgs:
                idle += 1
                continue
            idle = 0
            for m in msgs:
                assert m.error() is None, m.error()
                seen[m.partition()].append((m.offset(), int(m.value())))
                total += 1
    finally:
        consumer.close()
    assert total == N
    values = sorted(v for p in seen.values() for _, v in p)
    assert values == list(range(N))  # every record exactly once
    for p, items in seen.items():
        assert [o for o, _ in items] == list(range(len(items)))
        # a producer's records keep their order within a partition
        assert [v for _, v in items] == sorted(v for _, v in items)


def _kcat(*args, input=None, timeout=60):
    return subprocess.run(["kcat", *args], input=input, capture_output=True, timeout=timeout)


def test_kcat_list_produce_consume(broker):
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    lines = [f"line {i}" for i in range(100)]
    p = _kcat("-b", broker.bootstrap, "-P", "-t", topic, "-z", "snappy",
              input="\n".join(lines).encode() + b"\n")
    assert p.returncode == 0, p.stderr.decode()
    c = _kcat("-b", broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q")
    assert c.returncode == 0, c.stderr.decode()
    assert c.stdout.decode().splitlines() == lines
    meta = _kcat("-b", broker.bootstrap, "-L", "-t", topic)
    assert meta.returncode == 0, meta.stderr.decode()
    out = meta.stdout.decode()
    assert f'topic "{topic}" with 1 partitions' in out
    assert "broker 0 at" in out
