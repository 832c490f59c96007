"""Fixtures for the data source tests: one real Spark (local mode) for the whole run, and
plain confluent-kafka clients to write test data and to read back what Spark wrote.

The broker is the ``broker`` fixture of tests/conftest.py (a real samsa process per test).
"""

from __future__ import annotations

import time

import pytest

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.spark import local_session
from tests.support.waiting import wait_until


@pytest.fixture(scope="session")
def spark():
    """A small local Spark with the samsa data source registered. It takes ~10 s to start,
    so one serves every module: the tests only read and write through it (queries are
    stopped, temporary views are not left behind), which a shared session allows."""
    session = local_session("samsa-pipeline-tests")
    try:
        yield session
    finally:
        session.stop()


def create_topic(bootstrap: str, name: str, partitions: int, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, partitions, 1, config=config or {})]).values():
        fut.result(timeout=30)


def produce(bootstrap: str, records) -> None:
    """records: dicts with topic, value and optionally key, partition, headers, timestamp."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    errors = []
    for r in records:
        p.produce(on_delivery=lambda err, msg: errors.append(err) if err else None, **r)
    assert p.flush(30) == 0
    assert not errors, errors


def consume_all(bootstrap: str, topic: str, *, include_headers: bool = True,
                isolation: str = "read_uncommitted") -> list[tuple]:
    """Every record of ``topic`` read by a plain consumer, as the source's row tuples.
    read_committed: the records of committed transactions (none may be open: it waits for the
    end of each partition, which an open transaction holds back)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "plain-reader",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "isolation.level": isolation,
                  # A fetch long-polls on the connection the next ListOffsets waits behind.
                  "fetch.wait.max.ms": 10})
    try:
        parts = sorted(c.list_topics(topic, timeout=10).topics[topic].partitions)
        if isolation == "read_committed":
            _wait_for_markers(bootstrap, c, topic, parts)
        rows = []
        for p in parts:
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high <= low:
                continue
            c.assign([TopicPartition(topic, p, low)])
            done = False
            deadline = time.monotonic() + 30
            while not done:
                assert time.monotonic() < deadline, f"{topic}-{p}: no end of partition within 30 s"
                # consume() waits its whole timeout when fewer records than asked for remain.
                for m in c.consume(high - low + 1, 0.05):
                    if m.error():
                        assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                        done = m.offset() >= high
                        continue
                    rows.append(message_row(m, include_headers))
                    done = m.offset() + 1 >= high
        return rows
    finally:
        c.close()


def _wait_for_markers(bootstrap: str, committed: Consumer, topic: str, parts) -> None:
    """Until every partition's last stable offset is its high watermark. EndTxn is
    answered before the coordinator has written the markers (as in Kafka), so right
    after a commit a read_committed reader may still see the transaction open."""
    plain = Consumer({"bootstrap.servers": bootstrap, "group.id": "plain-reader"})
    try:
        deadline = time.monotonic() + 30     # one for every partition
        for p in parts:
            tp = TopicPartition(topic, p)
            wait_until(lambda tp=tp: committed.get_watermark_offsets(tp, timeout=10)[1] >=
                       plain.get_watermark_offsets(tp, timeout=10)[1],
                       max(0.0, deadline - time.monotonic()),
                       f"{topic}-{p}: the end of its open transaction")
    finally:
        plain.close()


def message_row(m, include_headers: bool) -> tuple:
    ts_type, ts = m.timestamp()
    row = (m.key(), m.value(), m.topic(), m.partition(), m.offset(), ts, ts_type - 1)
    if include_headers:
        row += (list(m.headers()) if m.headers() else None,)
    return row


# The same columns from Spark (timestamp as epoch milliseconds, so no time zone is involved).
ROW_COLUMNS = ["key", "value", "topic", "partition", "offset", "unix_millis(timestamp) AS ts",
               "timestampType"]


def spark_rows(df, *, include_headers: bool = False) -> list[tuple]:
    cols = ROW_COLUMNS + (["headers"] if include_headers else [])
    out = []
    for r in df.selectExpr(*cols).collect():
        row = (r.key, r.value, r.topic, r.partition, r.offset, r.ts, r.timestampType)
        if include_headers:
            row += ([(h.key, h.value) for h in r.headers] if r.headers is not None else None,)
        out.append(tuple(bytes(v) if isinstance(v, bytearray) else v for v in row))
    return sorted(out, key=lambda t: (t[2], t[3], t[4]))
