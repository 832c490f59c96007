"""A compacted topic, end to end: the broker's cleaner keeps the latest value per
key at its original offset, and a consumer from the beginning sees exactly that."""
from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.waiting import wait_until

KEYS, UPDATES = 200, 20_000


def _read_all(bootstrap, topic):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        out = []
        # Short calls: consume() waits its whole timeout when fewer records than asked
        # for are left, which the last call of every read is (10 s a read, seen).
        deadline = time.monotonic() + 10.0
        while True:
            msgs = consumer.consume(5000, 0.1)
            if msgs:
                deadline = time.monotonic() + 10.0
            assert time.monotonic() < deadline, "no record nor end-of-partition event within 10 s"
            for m in msgs:
                if m.error():
                    if m.error().code() == -191:  # _PARTITION_EOF
                        return out
                    raise AssertionError(m.error())
                out.append((m.offset(), m.key(), m.value()))
    finally:
        consumer.close()


def test_compacted_topic_keeps_latest_value_per_key(broker_factory):
    broker = broker_factory({"log.cleaner.backoff.ms": "200"})
    topic = f"compact-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": "32768",
        "min.cleanable.dirty.ratio": "0.01"})])[topic].result(30)

    # Batches must fit a segment (Kafka refuses larger ones with MESSAGE_TOO_LARGE too).
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                         "batch.size": 16384, "enable.idempotence": True})
    errors = []
    latest = {}
    for i in range(UPDATES):
        key = b"key-%d" % (i % KEYS)
        producer.produce(topic, key=key, value=b"%d" % i,
                         on_delivery=lambda err, _m: err and errors.append(err))
        latest[key] = i  # offset i holds update i: one producer, one partition
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    assert errors == []

    read = []

    def compacted():
        read.append(_read_all(broker.bootstrap, topic))
        return read[-1] if len(read[-1]) <= UPDATES // 4 else None
    records = wait_until(compacted, 90, lambda: f"the cleaner, which left {len(read[-1])} of {UPDATES} records",
                         interval=0.5)

    seen = {}
    for offset, key, value in records:
        assert int(value) == offset  # every kept record is still at its original offset
        seen[key] = offset
    assert seen == latest  # the last value of every key is there, nothing newer is lost
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    # After a restart the topic is still compacted and reads the same.
    broker.restart()
    again = {key: offset for offset, key, _ in _read_all(broker.bootstrap, topic)}
    assert again == latest
