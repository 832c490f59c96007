"""Per-record errors in Produce responses (KIP-467; issue 15, item 3).

When records of a batch break a rule (no key on a compacted topic, a
timestamp outside the topic's window), the whole request is refused and
nothing is appended, but the response names each record at fault by its
index, so clients fail exactly those.

A record whose framing is broken inside a batch with a correct CRC (a
"poison pill") is refused with INVALID_RECORD on every topic, as Kafka's
LogValidator refuses it (DefaultRecord's InvalidRecordException; producers do
not retry it as they retry CORRUPT_MESSAGE), so it never reaches the log and
its readers (issue 24, item 10)."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka.record import MemoryRecordsBuilder

from samsa.client.blocking import SimpleClient
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import ListOffsetsRequest, ProduceRequest
from tests.protocol.test_walker import poison_batch
from tests.support.waiting import wait_until

DAY_MS = 24 * 3600 * 1000


def _batch(records):
    """records: (key, value, timestamp or None)"""
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for key, value, ts in records:
        builder.append(timestamp=ts, key=key, value=value, headers=[])
    builder.close()
    return bytes(builder.buffer())


def _produce(client, topic, payload, version=9):
    resp = client._call(0, version, ProduceRequest(acks=-1, timeout_ms=5000, transactional_id=None,
                                                   topic_data=[ProduceRequest.TopicProduceData(
                                                       name=topic, partition_data=[
                                                           ProduceRequest.PartitionProduceData(
                                                               index=0, records=payload)])]))
    return resp.responses[0].partition_responses[0]


def _log_end(client, topic):
    resp = client._call(2, 5, ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=0, current_leader_epoch=-1,
                                                    timestamp=-1)])]))
    return resp.topics[0].partitions[0].offset


@pytest.fixture
def broker(module_broker):
    """One broker for the module (tests/conftest.py): every test has topics of its own
    names; the poison-pill test starts brokers of its own (a walker each)."""
    return module_broker


@pytest.fixture
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _topic(admin, name, **config):
    admin.create_topics([NewTopic(name, 1, 1, config={k.replace("_", "."): str(v)
                                                       for k, v in config.items()})])[
        name].result(30)


def test_keyless_records_on_a_compacted_topic_are_named(broker, admin):
    _topic(admin, "compacted", cleanup_policy="compact")
    with SimpleClient(broker.bootstrap) as client:
        part = _produce(client, "compacted", _batch([(None, b"a", None), (b"k", b"b", None),
                                                     (None, b"c", None)]))
        assert part.error_code == ErrorCode.INVALID_RECORD
        assert [e.batch_index for e in part.record_errors] == [0, 2]
        assert all("without key" in e.batch_index_error_message for e in part.record_errors)
        assert "2 record errors" in part.error_message
        assert _log_end(client, "compacted") == 0  # nothing of the request appended
        # Before KIP-467 (v7) the error code alone.
        old = _produce(client, "compacted", _batch([(None, b"a", None)]), version=7)
        assert old.error_code == ErrorCode.INVALID_RECORD and old.record_errors == []
        ok = _produce(client, "compacted", _batch([(b"k", b"v", None)]))
        assert ok.error_code == ErrorCode.NONE and _log_end(client, "compacted") == 1


def test_timestamps_outside_the_window_are_named(broker, admin):
    _topic(admin, "recent", message_timestamp_before_max_ms=DAY_MS,
           message_timestamp_after_max_ms=DAY_MS)
    now = int(time.time() * 1000)
    with SimpleClient(broker.bootstrap) as client:
        part = _produce(client, "recent", _batch([(b"1", b"ok", now), (b"2", b"old", now - 3 * DAY_MS),
                                                  (b"3", b"ok", now), (b"4", b"future", now + 2 * DAY_MS)]))
        assert part.error_code == ErrorCode.INVALID_TIMESTAMP
        assert [e.batch_index for e in part.record_errors] == [1, 3]
        assert "out of range" in part.record_errors[0].batch_index_error_message
        assert _log_end(client, "recent") == 0
        assert _produce(client, "recent", _batch([(b"1", b"ok", now)])).error_code == ErrorCode.NONE


def test_the_older_difference_key_bounds_both_sides(broker, admin):
    _topic(admin, "diff", message_timestamp_difference_max_ms=DAY_MS)
    now = int(time.time() * 1000)
    with SimpleClient(broker.bootstrap) as client:
        part = _produce(client, "diff", _batch([(b"1", b"old", now - 2 * DAY_MS)]))
        assert part.error_code == ErrorCode.INVALID_TIMESTAMP
        assert [e.batch_index for e in part.record_errors] == [0]


def test_librdkafka_reports_the_refusal_to_the_application(broker, admin):
    _topic(admin, "compacted2", cleanup_policy="compact")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50,
                         "message.timeout.ms": 20000})
    reports = []
    producer.produce("compacted2", key=b"k1", value=b"kept?", on_delivery=lambda e, m: reports.append(e))
    producer.produce("compacted2", value=b"keyless", on_delivery=lambda e, m: reports.append(e))
    producer.flush(30)
    # Both records travelled in one batch that the broker refused: librdkafka
    # fails the batch with INVALID_RECORD and the broker's reason.
    assert len(reports) == 2 and all(e is not None for e in reports)
    assert all(e.code() == KafkaError.INVALID_RECORD for e in reports)
    with SimpleClient(broker.bootstrap) as client:
        assert _log_end(client, "compacted2") == 0


@pytest.mark.parametrize("walker", ["compiled", "python"])
def test_a_poison_pill_is_refused_and_readers_get_the_next_record(broker_factory, walker,
                                                                   monkeypatch):
    if walker == "python":
        monkeypatch.setenv("SAMSA_PURE_PYTHON_RECORDS", "1")
    broker = broker_factory()
    if walker == "python":   # the broker says so, once
        assert broker.log_path.read_text().count("validated in Python") == 1
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    _topic(admin, "poison")
    with SimpleClient(broker.bootstrap) as client:
        part = _produce(client, "poison", bytes(poison_batch()))
        assert part.error_code == ErrorCode.INVALID_RECORD
        assert "1073741824" in part.error_message
        assert _log_end(client, "poison") == 0  # nothing appended
        good = _produce(client, "poison", _batch([(b"k", b"after the pill", None)]))
        assert good.error_code == ErrorCode.NONE and good.base_offset == 0
    # librdkafka used to stall silently before the good record, kafka-python
    # to raise CorruptRecordError: both now read it.
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "poison-rd",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe(["poison"])
        msg = wait_until(lambda: consumer.poll(0.5), 30, "librdkafka to read the record")
        assert msg.error() is None and msg.value() == b"after the pill" and msg.offset() == 0
    finally:
        consumer.close()
    kp = KafkaConsumer("poison", bootstrap_servers=broker.bootstrap, group_id="poison-kp",
                       auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        batches = wait_until(lambda: kp.poll(500), 30, "kafka-python to read the record")
        (records,) = batches.values()
        assert [(r.offset, r.value) for r in records] == [(0, b"after the pill")]
    finally:
        kp.close()
    if walker == "python":
        assert broker.log_tail(400).count("records are validated in Python") == 1
