"""The Arrow decoder against a real broker: topics written by confluent-kafka (librdkafka) and
by the Java producer with every codec, headers, null keys and values, and transactions committed and aborted, fetched with
samsa's own wire client (Fetch v12, read_uncommitted and read_committed, the response's aborted
transactions handed to the decoder), decoded straight into Arrow, and compared field by field with
what a plain confluent-kafka consumer reads."""

from __future__ import annotations

import pyarrow as pa
import pytest
from confluent_kafka import Producer

from samsa.client.blocking import SimpleClient
from samsa.pipeline import wire_reader
from samsa.pipeline.client import read_range
from samsa.pipeline.fetch_arrow import columns_to_batch
from samsa.pipeline.options import parse_read_options
from samsa.pipeline.ranges import OffsetRange
from samsa.protocol.messages import FetchRequest
from samsa.protocol.model import ApiKey
from samsa.protocol.records.columns import PartitionDecoder

from .conftest import consume_all, create_topic, produce

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture
def broker(module_broker):
    """One broker for the module (tests/conftest.py): every test here uses topics and
    transactional ids of names of its own (a parametrized test, one per parameter)."""
    return module_broker


def fetch_rows(bootstrap: str, topic: str, partitions: int, *, committed: bool) -> list[tuple]:
    """Every record of ``topic`` through Fetch and the decoder, as conftest's row tuples."""
    rows = []
    F = FetchRequest
    with SimpleClient(bootstrap, client_id="fetch-arrow-test") as client:
        for p in range(partitions):
            decoder = PartitionDecoder(topic, p, with_headers=True, read_committed=committed)
            offset, end = 0, None
            while end is None or offset < end:
                req = F(replica_id=-1, max_wait_ms=10, min_bytes=1, max_bytes=1 << 20,
                        isolation_level=1 if committed else 0, session_id=0, session_epoch=-1,
                        forgotten_topics_data=[], rack_id="",
                        topics=[F.FetchTopic(topic=topic, partitions=[F.FetchPartition(
                            partition=p, current_leader_epoch=-1, fetch_offset=offset,
                            last_fetched_epoch=-1, log_start_offset=-1,
                            # small: responses end inside batches, fetched again from there
                            partition_max_bytes=3000)])])
                resp = client.call(ApiKey.FETCH, req, highest=12)
                (pd,) = resp.responses[0].partitions
                assert pd.error_code == 0, pd
                end = pd.last_stable_offset if committed else pd.high_watermark
                aborted = [(a.producer_id, a.first_offset)
                           for a in pd.aborted_transactions or ()]
                offset = decoder.decode(bytes(pd.records or b""), offset, aborted)
            batch = columns_to_batch(decoder.take(), topic, p)
            millis = batch.column("timestamp").cast(pa.int64()).to_pylist()
            for r, ts in zip(batch.to_pylist(), millis):
                rows.append((r["key"], r["value"], r["topic"], r["partition"], r["offset"],
                             ts // 1000, r["timestampType"],
                             [(h["key"], h["value"]) for h in r["headers"]]
                             if r["headers"] is not None else None))
    return rows


def _records(topic: str, n: int, tag: str) -> list[dict]:
    out = []
    for i in range(n):
        r = {"topic": topic, "partition": i % 2,
             "value": None if i % 7 == 3 else (b"" if i % 11 == 5 else (b"%s-%d " % (tag.encode(), i)) * 30),
             "timestamp": 1_700_000_000_000 + i}
        if i % 3:
            r["key"] = b"k%d" % i
        if i % 2:
            r["headers"] = [("h", b"v%d" % i), ("null", None)]
        out.append(r)
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_java_topics_read_back_like_a_plain_consumer(broker, java_tools, codec):
    """The same, written by the Apache Kafka Java producer (its own batching and
    codecs): keys, values and header values null or empty, headers or none."""
    b = broker.bootstrap
    topic = f"arrow-java-{codec}"
    create_topic(b, topic, 2, {"compression.type": "producer"})
    lines = []
    for i in range(300):
        headers = f"h:v{i},null:NULL" if i % 2 else ""
        key = f"k{i}" if i % 3 else "NULL"
        value = "NULL" if i % 7 == 3 else ("" if i % 11 == 5 else f"{codec}-{i} " * 30)
        lines.append(f"{headers}\t{key}\t{value}")
    java_tools.run("ConsoleProducer", "--bootstrap-server", b, "--topic", topic,
                   "--compression-type", codec, "--property", "parse.headers=true",
                   "--property", "parse.key=true", "--property", "null.marker=NULL",
                   input="\n".join(lines) + "\n").check()
    got = fetch_rows(b, topic, 2, committed=False)
    assert len(got) == 300
    assert sum(1 for row in got if row[0] is None) == 100
    assert sum(1 for row in got if row[1] is None) == 43
    assert sum(1 for row in got if row[7]) == 150
    assert sorted(got, key=lambda t: (t[3], t[4])) == sorted(consume_all(b, topic),
                                                             key=lambda t: (t[3], t[4]))


@pytest.mark.parametrize("codec", CODECS)
def test_librdkafka_topics_read_back_like_a_plain_consumer(broker, codec):
    b = broker.bootstrap
    topic = f"arrow-{codec}"
    create_topic(b, topic, 2, {"compression.type": "producer"})
    p = Producer({"bootstrap.servers": b, "compression.type": codec, "linger.ms": 20})
    for r in _records(topic, 300, codec):
        p.produce(**r)
    assert p.flush(30) == 0
    del p
    got = fetch_rows(b, topic, 2, committed=False)
    assert len(got) == 300
    assert sorted(got, key=lambda t: (t[3], t[4])) == sorted(consume_all(b, topic),
                                                             key=lambda t: (t[3], t[4]))


def test_transactions_read_committed_and_uncommitted(broker):
    b = broker.bootstrap
    topic = "arrow-txn"
    create_topic(b, topic, 2)
    produce(b, _records(topic, 20, "plain"))
    txn = Producer({"bootstrap.servers": b, "transactional.id": "arrow-txn",
                    "compression.type": "lz4", "linger.ms": 5})
    txn.init_transactions(30)
    for tag, commit in [("one", True), ("two", False), ("three", True), ("four", False)]:
        txn.begin_transaction()
        for r in _records(topic, 40, tag):
            txn.produce(**r)
        assert txn.flush(30) == 0  # (an abort purges what was not sent yet)
        if commit:
            txn.commit_transaction(30)
        else:
            txn.abort_transaction(30)
    del txn  # (librdkafka's threads would go on calling the broker this test stops)
    produce(b, _records(topic, 10, "after"))
    key = lambda t: (t[3], t[4])  # noqa: E731
    committed = consume_all(b, topic, isolation="read_committed")
    assert len(committed) == 20 + 80 + 10
    assert sorted(fetch_rows(b, topic, 2, committed=True), key=key) == sorted(committed, key=key)
    uncommitted = consume_all(b, topic)
    assert len(uncommitted) == 20 + 160 + 10
    assert sorted(fetch_rows(b, topic, 2, committed=False), key=key) == sorted(uncommitted,
                                                                               key=key)


def _read(monkeypatch, reader: str, opts, rng, batch_rows: int) -> pa.Table:
    monkeypatch.setenv("SAMSA_SPARK_READER", reader)
    batches = list(read_range(opts, rng, batch_rows))
    assert all(b.num_rows <= batch_rows for b in batches)
    return pa.Table.from_batches(batches, schema=batches[0].schema)


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_wire_reader_reads_a_range_as_the_librdkafka_reader_does(broker, monkeypatch, isolation):
    """The executors' read of one offset range: the wire reader's Arrow table equals the
    confluent-kafka reader's, column by column (ranges inside the partition, headers on)."""
    b = broker.bootstrap
    topic = f"arrow-range-{isolation}"
    create_topic(b, topic, 2)
    p = Producer({"bootstrap.servers": b, "compression.type": "zstd", "linger.ms": 20})
    for r in _records(topic, 600, "range"):
        p.produce(**r)
    assert p.flush(30) == 0
    del p
    txn = Producer({"bootstrap.servers": b, "transactional.id": topic, "linger.ms": 5})
    txn.init_transactions(30)
    for commit in (False, True):
        txn.begin_transaction()
        for r in _records(topic, 30, "txn"):
            txn.produce(**r)
        assert txn.flush(30) == 0
        txn.commit_transaction(30) if commit else txn.abort_transaction(30)
    del txn
    consume_all(b, topic, isolation="read_committed")  # (waits for the markers)
    opts = parse_read_options({"kafka.bootstrap.servers": b, "subscribe": topic,
                               "includeHeaders": "true", "kafka.isolation.level": isolation})
    # small fetches: a range takes many, each sent before the one before it is decoded
    small = parse_read_options({"kafka.bootstrap.servers": b, "subscribe": topic,
                                "includeHeaders": "true", "kafka.isolation.level": isolation,
                                "kafka.max.partition.fetch.bytes": "2000"})
    for rng in (OffsetRange(topic, 0, 0, 332), OffsetRange(topic, 1, 17, 250)):
        wire = _read(monkeypatch, "wire", opts, rng, 100)
        rdkafka = _read(monkeypatch, "librdkafka", opts, rng, 100)
        assert wire.num_rows > 0 and wire.equals(rdkafka), (wire.num_rows, rdkafka.num_rows)
        assert _read(monkeypatch, "wire", small, rng, 100).equals(rdkafka)
        # a read given up after its first batch leaves a Fetch in flight on the pooled
        # connection: the next read skips its answer
        monkeypatch.setenv("SAMSA_SPARK_READER", "wire")
        partial = read_range(small, rng, 10)
        assert next(partial).num_rows == 10
        partial.close()
        assert _read(monkeypatch, "wire", small, rng, 100).equals(rdkafka)
    # the wire reader is the default
    monkeypatch.delenv("SAMSA_SPARK_READER")
    assert wire_reader.wanted()


@pytest.mark.integration
def test_the_wire_reader_reads_over_sasl_ssl_with_the_librdkafka_keys(monkeypatch):
    """kafka.security.protocol=SASL_SSL with librdkafka's keys (sasl.mechanism/username/
    password, ssl.ca.location): the wire reader takes the read (it is not handed to
    confluent-kafka) and gets the same table; a wrong password is a clear error, not a hang."""
    from samsa.pipeline.client import KafkaSourceError
    from samsa.testing import Broker

    with Broker(sasl_users={"alice": "alice-secret"}, tls=True) as b:
        config = b.client_config("alice")
        topic = "arrow-secure"
        b.create_topic(topic, partitions=2)
        p = Producer({**config, "linger.ms": 5})
        for r in _records(topic, 120, "secure"):
            p.produce(**r)
        assert p.flush(30) == 0
        del p
        kafka = {f"kafka.{k}": v for k, v in config.items()}
        opts = parse_read_options({**kafka, "subscribe": topic, "includeHeaders": "true"})
        assert wire_reader.unsupported(opts) is None
        rng = OffsetRange(topic, 0, 3, 55)  # partition 0 holds 60
        wire = _read(monkeypatch, "wire", opts, rng, 50)
        rdkafka = _read(monkeypatch, "librdkafka", opts, rng, 50)
        assert wire.num_rows == 52 and wire.equals(rdkafka)

        wrong = parse_read_options({**kafka, "kafka.sasl.password": "not-it", "subscribe": topic})
        monkeypatch.setenv("SAMSA_SPARK_READER", "wire")
        with pytest.raises(KafkaSourceError, match="(?i)authentication"):
            list(read_range(wrong, rng, 50))
