"""kafka-python against samsa: the current protocol and the legacy formats.

Pinned to api_version (0, 8, 2) the client speaks Produce v0 / Fetch v0 with
message format v0; at (0, 10) Produce v2 / Fetch v2 with format v1. samsa stores
v2 batches, so these tests cross the up- and down-conversion paths both ways.
"""
from __future__ import annotations

import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic


@pytest.fixture
def broker(module_broker):
    """One broker for the module (tests/conftest.py): every test has topics of its own."""
    return module_broker


def _topic(prefix="kp"):
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create(bootstrap, topic, partitions=1):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def _produce(bootstrap, topic, values, **cfg):
    producer = KafkaProducer(bootstrap_servers=bootstrap, **cfg)
    try:
        futures = [producer.send(topic, value=v, key=b"k%d" % i) for i, v in enumerate(values)]
        producer.flush()
        return [f.get(timeout=30) for f in futures]
    finally:
        producer.close()


def _consume(bootstrap, topic, count, partitions=1, **cfg):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=15000, auto_offset_reset="earliest", **cfg)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        got = []
        for msg in consumer:
            got.append(msg)
            if len(got) >= count:
                break
        return got
    finally:
        consumer.close()


def test_current_protocol_round_trip(broker):
    topic = _topic()
    _create(broker.bootstrap, topic, partitions=3)
    values = [b"value-%d" % i for i in range(500)]
    metas = _produce(broker.bootstrap, topic, values, linger_ms=5)
    assert {m.topic for m in metas} == {topic}
    got = _consume(broker.bootstrap, topic, len(values), partitions=3)
    assert sorted(m.value for m in got) == sorted(values)
    # Within a partition, offsets are contiguous from 0 and order is kept.
    for p in range(3):
        offsets = [m.offset for m in got if m.partition == p]
        assert offsets == list(range(len(offsets)))


@pytest.mark.parametrize("api_version", [(0, 8, 2), (0, 10)])
@pytest.mark.parametrize("compression", [None, "gzip", "snappy", "lz4"])
def test_legacy_formats_round_trip(broker, api_version, compression):
    topic = _topic("legacy")
    _create(broker.bootstrap, topic)
    values = [b"legacy-%d" % i for i in range(200)]
    _produce(broker.bootstrap, topic, values, api_version=api_version,
             compression_type=compression, linger_ms=5)
    got = _consume(broker.bootstrap, topic, len(values), api_version=api_version)
    assert [m.value for m in got] == values
    assert [m.key for m in got] == [b"k%d" % i for i in range(len(values))]
    assert [m.offset for m in got] == list(range(len(values)))


def test_v2_records_read_by_010_client(broker):
    topic = _topic("down")
    _create(broker.bootstrap, topic)
    values = [b"modern-%d" % i for i in range(100)]
    _produce(broker.bootstrap, topic, values, compression_type="gzip")
    got = _consume(broker.bootstrap, topic, len(values), api_version=(0, 10))
    assert [m.value for m in got] == values
    assert all(m.timestamp > 0 for m in got)  # v1 format carries the v2 timestamps


def test_082_records_read_by_current_client(broker):
    topic = _topic("up")
    _create(broker.bootstrap, topic)
    values = [b"old-%d" % i for i in range(100)]
    _produce(broker.bootstrap, topic, values, api_version=(0, 8, 2), compression_type="gzip")
    got = _consume(broker.bootstrap, topic, len(values))
    assert [m.value for m in got] == values
