"""aiokafka producer and consumer against samsa."""
from __future__ import annotations

import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition


async def test_aiokafka_round_trip(broker):
    topic = f"aio-{uuid.uuid4().hex[:8]}"
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="lz4",
                                linger_ms=5)
    await producer.start()
    try:
        for i in range(1000):
            await producer.send(topic, b"aio-%d" % i, key=b"%d" % i)
        await producer.flush()
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        got = []
        while len(got) < 1000:
            batch = await consumer.getmany(tp, timeout_ms=10000)
            assert batch, f"no records after {len(got)}"
            got.extend(batch[tp])
    finally:
        await consumer.stop()
    assert [m.value for m in got] == [b"aio-%d" % i for i in range(1000)]
    assert [m.offset for m in got] == list(range(1000))
