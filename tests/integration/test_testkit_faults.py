"""Faults injected into a test broker (samsa.testing, broker/faults/), and real clients
reacting to them as they react to Kafka: librdkafka and the Java client retry a
retriable error, an idempotent producer survives a connection lost after its batch was
written (no duplicate) where a plain one writes it twice, a delivery timeout fires on a
slow broker, a client waits out refused connections and a paused broker."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

RETRIABLE = ["NOT_LEADER_OR_FOLLOWER", "REQUEST_TIMED_OUT"]


def _fault_lines(broker, text: str) -> list[str]:
    return [line for line in broker.log_text().splitlines() if "broker.faults" in line and text in line]


def _high_watermark(broker, topic: str, partition: int = 0) -> int:
    c = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "hw"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)[1]
    finally:
        c.close()


def _produce(config: dict, topic: str, values: list[bytes], flush_each: bool = False) -> list:
    p = Producer(config)
    reports = []
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, msg: reports.append((err, msg.offset())))
        if flush_each:
            assert p.flush(60) == 0
    assert p.flush(60) == 0
    return reports


@pytest.mark.parametrize("error", RETRIABLE)
def test_librdkafka_retries_an_injected_retriable_error(samsa_broker, error):
    samsa_broker.create_topic("t")
    samsa_broker.inject_errors("Produce", error, count=3)
    reports = _produce({"bootstrap.servers": samsa_broker.bootstrap_servers, "retry.backoff.ms": 20,
                        "enable.idempotence": False}, "t", [b"only-once"])
    assert reports == [(None, 0)]
    assert len(_fault_lines(samsa_broker, f"with {error}")) == 3
    assert _high_watermark(samsa_broker, "t") == 1  # the failed attempts wrote nothing


@pytest.mark.parametrize("error", RETRIABLE)
def test_the_java_client_retries_an_injected_retriable_error(samsa_broker, java_tools, error):
    samsa_broker.create_topic("t")
    samsa_broker.inject_errors("Produce", error, count=2)
    result = java_tools.produce(samsa_broker.bootstrap_servers, "t", ["only-once"], "--acks", "all",
                                "--producer-property", "retry.backoff.ms=20",
                                "--print-metric", "record-retry-total").check()
    retries = [line for line in result.stderr.splitlines() if line.startswith("record-retry-total=")]
    assert retries and float(retries[-1].partition("=")[2]) >= 2, result.stderr
    assert len(_fault_lines(samsa_broker, f"with {error}")) == 2
    assert _high_watermark(samsa_broker, "t") == 1


def test_an_error_on_one_partition_fails_that_partition_alone(samsa_broker):
    # As a broker that lost the leadership of t-0 only: one Produce request carries
    # both partitions, t-1's record is written at once, t-0's after the retries.
    samsa_broker.create_topic("t", partitions=2)
    samsa_broker.inject_errors("Produce", "NOT_LEADER_OR_FOLLOWER", count=3, topic="t", partition=0)
    p = Producer({"bootstrap.servers": samsa_broker.bootstrap_servers, "enable.idempotence": False,
                  "linger.ms": 50, "retry.backoff.ms": 200, "retry.backoff.max.ms": 200})
    delivered = []
    for partition in (0, 1):
        p.produce("t", f"to-{partition}".encode(), partition=partition,
                  on_delivery=lambda err, msg: delivered.append((err, msg.partition(), msg.offset())))
    assert p.flush(60) == 0
    assert delivered == [(None, 1, 0), (None, 0, 0)]  # t-1 first: it was never retried
    hit = _fault_lines(samsa_broker, "with NOT_LEADER_OR_FOLLOWER on t-0")
    assert len(hit) == 3 and not _fault_lines(samsa_broker, "t-1")
    # a resent t-1 would show twice (the producer is not idempotent); t-0 failed attempts wrote nothing
    assert _high_watermark(samsa_broker, "t", 1) == 1 and _high_watermark(samsa_broker, "t", 0) == 1


def test_an_error_on_one_partition_of_a_read(samsa_broker):
    # ListOffsets answered per partition: kafka-python takes t-1's offset from the
    # first answer and asks again for t-0 alone until the injected errors run out
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

    samsa_broker.create_topic("t", partitions=2)
    p = Producer({"bootstrap.servers": samsa_broker.bootstrap_servers})
    for value in (b"x", b"y"):
        p.produce("t", value, partition=0)
    assert p.flush(30) == 0
    samsa_broker.inject_errors("ListOffsets", "NOT_LEADER_OR_FOLLOWER", count=2, topic="t", partition=0)
    c = KafkaConsumer(bootstrap_servers=samsa_broker.bootstrap_servers, retry_backoff_ms=50)
    try:
        tps = [KafkaTopicPartition("t", 0), KafkaTopicPartition("t", 1)]
        assert c.end_offsets(tps) == {tps[0]: 2, tps[1]: 0}
    finally:
        c.close()
    assert len(_fault_lines(samsa_broker, "with NOT_LEADER_OR_FOLLOWER on t-0")) == 2
    assert not _fault_lines(samsa_broker, "t-1")


def test_an_error_on_one_partition_of_a_commit_commits_the_others(samsa_broker):
    # OffsetCommit answered per partition: t-0's offset is refused (and not stored), t-1's kept
    samsa_broker.create_topic("t", partitions=2)
    samsa_broker.inject_errors("OffsetCommit", "OFFSET_METADATA_TOO_LARGE", topic="t", partition=0)
    c = Consumer({"bootstrap.servers": samsa_broker.bootstrap_servers, "group.id": "g",
                  "enable.auto.commit": False})
    try:
        with pytest.raises(Exception) as failed:
            c.commit(offsets=[TopicPartition("t", 0, 5), TopicPartition("t", 1, 7)], asynchronous=False)
        assert "OFFSET_METADATA_TOO_LARGE" in str(failed.value) or "too large" in str(failed.value).lower()
        committed = c.committed([TopicPartition("t", 0), TopicPartition("t", 1)], timeout=30)
        assert [(tp.partition, tp.offset) for tp in committed] == [(0, -1001), (1, 7)]
    finally:
        c.close()
    assert len(_fault_lines(samsa_broker, "with OFFSET_METADATA_TOO_LARGE on t-0")) == 1


def test_an_error_on_one_partition_of_a_fetch(samsa_broker):
    # librdkafka reads t-1 while t-0's fetches fail, then t-0 once the errors run out
    samsa_broker.create_topic("t", partitions=2)
    p = Producer({"bootstrap.servers": samsa_broker.bootstrap_servers})
    for partition in (0, 1):
        p.produce("t", f"in-{partition}".encode(), partition=partition)
    assert p.flush(30) == 0
    samsa_broker.inject_errors("Fetch", "NOT_LEADER_OR_FOLLOWER", count=3, topic="t", partition=0)
    c = Consumer({"bootstrap.servers": samsa_broker.bootstrap_servers, "group.id": "f",
                  "topic.metadata.refresh.interval.ms": 1000})
    try:
        c.assign([TopicPartition("t", 0, 0), TopicPartition("t", 1, 0)])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < 2 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.partition())
    finally:
        c.close()
    assert got == [1, 0]  # t-1 first: its fetches were answered while t-0's failed
    assert len(_fault_lines(samsa_broker, "with NOT_LEADER_OR_FOLLOWER on t-0")) == 3
    assert not _fault_lines(samsa_broker, "t-1")


@pytest.mark.parametrize("idempotent", [True, False])
def test_a_lost_connection_after_a_written_batch(samsa_broker, idempotent):
    samsa_broker.create_topic("t")
    samsa_broker.disconnect_after(0, api="Produce", times=3)
    values = [f"r{i}".encode() for i in range(5)]
    reports = _produce({"bootstrap.servers": samsa_broker.bootstrap_servers, "retry.backoff.ms": 20,
                        "enable.idempotence": idempotent, "acks": "all"}, "t", values, flush_each=True)
    assert [err for err, _ in reports] == [None] * 5
    assert len(_fault_lines(samsa_broker, "instead of answering")) == 3
    # each lost answer was for a batch the broker had written: the producer sends it
    # again; with idempotence the broker knows its sequence number and writes it once
    written = _high_watermark(samsa_broker, "t")
    assert written == (5 if idempotent else 8)


def test_a_delivery_timeout_fires_when_the_broker_answers_too_late(samsa_broker):
    samsa_broker.create_topic("t")
    samsa_broker.delay(3000, api="Produce")
    p = Producer({"bootstrap.servers": samsa_broker.bootstrap_servers, "message.timeout.ms": 1000,
                  "request.timeout.ms": 900})
    reports = []
    p.produce("t", b"late", on_delivery=lambda err, msg: reports.append(err))
    p.flush(30)
    assert len(reports) == 1 and reports[0] is not None
    assert reports[0].code() in (KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT), reports[0]
    assert _fault_lines(samsa_broker, "delaying the answer to Produce")


def test_a_client_waits_out_refused_connections_and_a_paused_broker(samsa_broker):
    samsa_broker.create_topic("t")
    samsa_broker.refuse_connections(1.5)
    started = time.monotonic()
    config = {"bootstrap.servers": samsa_broker.bootstrap_servers, "reconnect.backoff.ms": 50,
              "reconnect.backoff.max.ms": 200}
    assert _produce(config, "t", [b"after-refusal"]) == [(None, 0)]
    assert time.monotonic() - started >= 1.0
    assert "fault: refusing a connection" in samsa_broker.log_text()

    p = Producer(config)
    reports = []
    p.produce("t", b"warm-up", on_delivery=lambda err, msg: reports.append(err))
    assert p.flush(30) == 0
    samsa_broker.pause()
    p.produce("t", b"while-paused", on_delivery=lambda err, msg: reports.append(err))
    assert p.flush(1.0) == 1  # held: no answer while paused
    samsa_broker.resume()
    assert p.flush(30) == 0 and reports == [None, None]
    assert _fault_lines(samsa_broker, "holding a request")
