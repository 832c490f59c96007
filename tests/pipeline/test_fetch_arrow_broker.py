"""The Arrow decoder against a real broker: topics written by confluent-kafka (librdkafka) and
by the Java producer with every codec, headers, null keys and values, transactions committed and
aborted (by both clients, the Java one in every codec), and topics compacted by the broker's own
log cleaner (offsets with gaps, tombstones; written by either client), fetched with samsa's own wire client (Fetch v12,
read_uncommitted and read_committed, the response's aborted transactions handed to the decoder)
and through the executors' wire reader, decoded straight into Arrow, and compared field by field
with what a plain confluent-kafka consumer reads (and the confluent-kafka reader's tables)."""

from __future__ import annotations

import random
import re
import threading
from collections import Counter

import pyarrow as pa
import pytest
from confluent_kafka import Producer

from samsa.client.blocking import Cluster, SimpleClient
from samsa.pipeline import wire_reader
from samsa.pipeline.client import read_range, read_range_librdkafka
from samsa.pipeline.fetch_arrow import columns_to_batch
from samsa.pipeline.options import parse_read_options
from samsa.pipeline.ranges import OffsetRange
from samsa.protocol.messages import FetchRequest
from samsa.protocol.model import ApiKey
from samsa.protocol.records import iter_batch_headers
from samsa.protocol.records.columns import PartitionDecoder

from tests.conftest import module_broker_with
from tests.support.waiting import wait_until

from .conftest import consume_all, create_topic, produce

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.fixture(scope="module")
def module_broker(request):
    """One broker for the module: every test here uses topics and transactional ids of names
    of its own (a parametrized test, one per parameter). Its log cleaner looks for dirty
    compacted logs every 200 ms (Kafka's default, 15 s, would be most of a test's time)."""
    yield from module_broker_with(request, {"log.cleaner.backoff.ms": "200"})


@pytest.fixture
def broker(module_broker):
    return module_broker


def fetch(client: SimpleClient, topic: str, partition: int, offset: int, *, committed: bool,
          part_bytes: int):
    """One Fetch v12 of one partition: the response's partition."""
    F = FetchRequest
    req = F(replica_id=-1, max_wait_ms=10, min_bytes=1, max_bytes=1 << 20,
            isolation_level=1 if committed else 0, session_id=0, session_epoch=-1,
            forgotten_topics_data=[], rack_id="",
            topics=[F.FetchTopic(topic=topic, partitions=[F.FetchPartition(
                partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=part_bytes)])])
    (pd,) = client.call(ApiKey.FETCH, req, highest=12).responses[0].partitions
    assert pd.error_code == 0, pd
    return pd


def fetch_rows(bootstrap: str, topic: str, partitions: int, *, committed: bool) -> list[tuple]:
    """Every record of ``topic`` through Fetch and the decoder, as conftest's row tuples."""
    rows = []
    with SimpleClient(bootstrap, client_id="fetch-arrow-test") as client:
        for p in range(partitions):
            decoder = PartitionDecoder(topic, p, with_headers=True, read_committed=committed)
            offset, end = 0, None
            while end is None or offset < end:
                # small: responses end inside batches, fetched again from there
                pd = fetch(client, topic, p, offset, committed=committed, part_bytes=3000)
                end = pd.last_stable_offset if committed else pd.high_watermark
                aborted = [(a.producer_id, a.first_offset)
                           for a in pd.aborted_transactions or ()]
                offset = decoder.decode(bytes(pd.records or b""), offset, aborted)
            rows += arrow_rows(columns_to_batch(decoder.take(), topic, p))
    return rows


def batch_headers(bootstrap: str, topic: str, partition: int) -> list:
    """The headers of every batch in a partition, fetched up to its high watermark (a Fetch
    answers from one segment at a time, as Kafka's does)."""
    out: list = []
    with SimpleClient(bootstrap, client_id="fetch-arrow-test") as client:
        offset, end = 0, None
        while end is None or offset < end:
            pd = fetch(client, topic, partition, offset, committed=False, part_bytes=1 << 20)
            end = pd.high_watermark
            out += [h for _, h in iter_batch_headers(pd.records or b"")]
            offset = out[-1].next_offset
    return out


def arrow_rows(batch: pa.RecordBatch | pa.Table) -> list[tuple]:
    """An Arrow batch of the source's schema (headers on) as conftest's row tuples."""
    millis = batch.column("timestamp").cast(pa.int64()).to_pylist()
    return [(r["key"], r["value"], r["topic"], r["partition"], r["offset"], ts // 1000,
             r["timestampType"],
             [(h["key"], h["value"]) for h in r["headers"]] if r["headers"] is not None else None)
            for r, ts in zip(batch.to_pylist(), millis)]


def by_offset(rows: list[tuple]) -> list[tuple]:
    return sorted(rows, key=lambda t: (t[3], t[4]))


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
def test_java_topics_read_back_like_a_plain_consumer(broker, java_tools, monkeypatch, codec):
    """Written by the Apache Kafka Java producer (its own batching and codecs): keys, values
    and header values null or empty, headers or none; through Fetch and the decoder, and
    through the executors' wire reader, the rows of a plain consumer and the confluent-kafka
    reader's table."""
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
    plain = by_offset(consume_all(b, topic))
    assert by_offset(got) == plain
    assert by_offset(read_whole(monkeypatch, b, topic, 2, "read_uncommitted",
                                librdkafka_too=True)) == plain


@pytest.mark.parametrize("codec", CODECS)
def test_librdkafka_topics_read_back_like_a_plain_consumer(broker, monkeypatch, codec):
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
    plain = by_offset(consume_all(b, topic))
    assert by_offset(got) == plain
    assert by_offset(read_whole(monkeypatch, b, topic, 2, "read_uncommitted",
                                librdkafka_too=True)) == plain


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


def test_the_librdkafka_reader_ends_a_range_whose_last_offsets_hold_no_record_at_once(broker):
    """The confluent-kafka reader (the fallback: no compiled decoder, or
    SAMSA_SPARK_READER=librdkafka) reads ranges that end on a transaction's marker, mid-log
    and at the log's end, or on aborted records under read_committed: it ends each as soon
    as librdkafka has passed the range's last offset, with the wire reader's rows. Given an
    hour to wait for a record in each consume() and a broker that holds an empty Fetch 50 s
    (fetch.wait.max.ms; the end-of-partition event comes no sooner), each read still returns
    within 30 s: neither wait ended it. (It used to wait out a 1 s consume() per such range,
    which stalled streaming micro-batches over transactional topics.)"""
    b = broker.bootstrap
    topic = "arrow-markers"
    create_topic(b, topic, 1)
    produce(b, [{"topic": topic, "partition": 0, "value": b"plain-%d" % i} for i in range(5)])
    txn = Producer({"bootstrap.servers": b, "transactional.id": topic, "linger.ms": 5})
    txn.init_transactions(30)
    for tag, commit in [("one", True), ("two", False), ("three", True)]:
        txn.begin_transaction()
        for i in range(5):
            txn.produce(topic, partition=0, value=b"%s-%d" % (tag.encode(), i))
        assert txn.flush(30) == 0
        txn.commit_transaction(30) if commit else txn.abort_transaction(30)
    del txn
    consume_all(b, topic, isolation="read_committed")  # (waits for the markers)
    # 0-4 plain, 5-9 committed, 10 its marker, 11-15 aborted, 16 its marker, 17-21 committed,
    # 22 its marker and the log's end
    assert [r[4] for r in consume_all(b, topic)] == [*range(10), *range(11, 16), *range(17, 22)]
    assert log_ends(b, topic, 1) == {0: 23}
    expected = {"read_committed": {(0, 11): 10, (0, 17): 10, (11, 17): 0, (17, 23): 5, (10, 11): 0},
                "read_uncommitted": {(0, 11): 10, (0, 17): 15, (11, 17): 5, (17, 23): 5, (10, 11): 0}}
    for isolation, ranges in expected.items():
        opts = parse_read_options({"kafka.bootstrap.servers": b, "subscribe": topic,
                                   "includeHeaders": "true", "kafka.isolation.level": isolation,
                                   "kafka.fetch.wait.max.ms": "50000"})
        for (start, end), rows in ranges.items():
            rng = OffsetRange(topic, 0, start, end)
            got = rows_within(30, lambda: read_range_librdkafka(opts, rng, 1000, wait_s=3600))
            assert len(got) == rows, (isolation, rng)
            wire = [row for batch in wire_reader.read_range_wire(opts, rng, 1000)
                    for row in arrow_rows(batch)]
            assert got == wire, (isolation, rng)


def rows_within(seconds: float, read) -> list[tuple]:
    """The rows of the Arrow batches ``read()`` yields, read in a thread that must be done
    within ``seconds`` (a read stuck in a wait is left behind, and fails the test)."""
    out: list = []

    def run():
        try:
            out.append([row for batch in read() for row in arrow_rows(batch)])
        except BaseException as e:  # (handed to the test)
            out.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert out, f"the read did not end within {seconds} s"
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


def _read(monkeypatch, reader: str, opts, rng, batch_rows: int) -> pa.Table:
    monkeypatch.setenv("SAMSA_SPARK_READER", reader)
    batches = list(read_range(opts, rng, batch_rows))
    assert all(b.num_rows <= batch_rows for b in batches)
    return pa.Table.from_batches(batches, schema=batches[0].schema)


def read_whole(monkeypatch, bootstrap: str, topic: str, partitions: int, isolation: str,
               *, librdkafka_too: bool = False, **options: str) -> list[tuple]:
    """Every record of ``topic`` through the executors' wire reader (read_range, one range per
    partition up to its end), as row tuples. ``librdkafka_too``: the confluent-kafka reader's
    tables must be the same."""
    opts = parse_read_options({"kafka.bootstrap.servers": bootstrap, "subscribe": topic,
                               "includeHeaders": "true", "kafka.isolation.level": isolation,
                               **options})
    rows = []
    for p, end in log_ends(bootstrap, topic, partitions).items():
        rng = OffsetRange(topic, p, 0, end)
        wire = _read(monkeypatch, "wire", opts, rng, 1000)
        if librdkafka_too:
            assert wire.equals(_read(monkeypatch, "librdkafka", opts, rng, 1000))
        rows += arrow_rows(wire)
    return rows


def log_ends(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """Each partition's high watermark."""
    cluster = Cluster(SimpleClient(bootstrap, client_id="fetch-arrow-test"))
    try:
        ends = cluster.list_offsets({(topic, p): -1 for p in range(partitions)})
    finally:
        cluster.close()
    return {p: ends[(topic, p)] for p in range(partitions)}


def _java_txn_lines(producer: int, tag: str, n: int) -> list[str]:
    """TxnProducer's lines: every record's header txn names its transaction; null and empty
    keys and values, a null header value."""
    out = []
    for i in range(n):
        headers = f"txn:{tag},null:NULL" if i % 2 else f"txn:{tag}"
        key = "NULL" if i % 3 == 0 else f"{tag}-k{i}"
        value = "NULL" if i % 7 == 3 else ("" if i % 11 == 5 else f"{tag}-{i} " * 25)
        out.append(f"{producer}\t{headers}\t{key}\t{value}")
    return out


def test_java_transactions_with_aborts_read_back_like_a_plain_consumer(broker, java_tools,
                                                                        monkeypatch):
    """Five Java transactional producers (Kafka 4.3's client), one per codec, whose
    transactions overlap in the same partitions, each producer's one committed and one
    aborted, between plain records: read_committed rows hold every committed record and no
    aborted one, read_uncommitted rows all of them, and no control record is ever a row; the
    wire reader's rows, and the confluent-kafka reader's, equal a plain consumer's at the same
    isolation level, field by field."""
    b = broker.bootstrap
    topic = "arrow-java-txn"
    create_topic(b, topic, 2, {"compression.type": "producer"})
    produce(b, _records(topic, 20, "before"))
    L = _java_txn_lines
    script = []
    for i, codec in enumerate(CODECS):  # producer i writes with codec i
        j = (i + 1) % len(CODECS)        # (whose transaction of this turn is aborted)
        script += (L(i, f"c-{codec}", 15) + L(j, f"a-{CODECS[j]}", 15) + L(i, f"c-{codec}", 10)
                   + [f"{j} ABORT"] + L(i, f"c-{codec}", 5) + [f"{i} COMMIT"])
    script += L(0, "a-end", 20) + L(3, "c-end", 20) + ["0 ABORT"]  # c-end: committed at the end
    sent = Counter(m.group(1) for m in map(re.compile(r"txn:([^,\t]+)").search, script) if m)
    result = java_tools.run("TxnProducer", "--bootstrap-server", b, "--topic", topic,
                            "--transactional-id", topic, "--producers", len(CODECS),
                            "--compression-type", ",".join(CODECS),
                            "--property", "parse.headers=true",
                            "--property", "parse.key=true", "--property", "null.marker=NULL",
                            input="\n".join(script) + "\n").check()
    assert result.stdout.split() == ["committed", "6", "aborted", "6"]
    # every codec's batches are in the log
    assert {h.codec for p in range(2) for h in batch_headers(b, topic, p)} == set(range(len(CODECS)))
    produce(b, _records(topic, 10, "after"))

    def txns(rows):
        tags = [dict(r[7] or ()).get("txn") for r in rows]
        return {t.decode(): tags.count(t) for t in set(tags) if t is not None}

    committed = consume_all(b, topic, isolation="read_committed")  # (waits for the markers)
    assert txns(committed) == {t: n for t, n in sent.items() if t.startswith("c")}
    assert len(committed) == 20 + 170 + 10
    uncommitted = consume_all(b, topic)
    assert txns(uncommitted) == sent and len(uncommitted) == 20 + 265 + 10
    # the markers take offsets no row has (one per transaction and partition it wrote to)
    assert sum(log_ends(b, topic, 2).values()) > len(uncommitted)
    assert by_offset(fetch_rows(b, topic, 2, committed=True)) == by_offset(committed)
    assert by_offset(fetch_rows(b, topic, 2, committed=False)) == by_offset(uncommitted)
    assert by_offset(read_whole(monkeypatch, b, topic, 2, "read_committed",
                                librdkafka_too=True)) == by_offset(committed)
    assert by_offset(read_whole(monkeypatch, b, topic, 2, "read_uncommitted", librdkafka_too=True,
                                **{"kafka.max.partition.fetch.bytes": "3000"})) == \
        by_offset(uncommitted)


def _compaction_plan() -> list[tuple[bytes, bytes | None, bytes | None]]:
    """What the compacted-topic test writes, in order: (key, value, its header round's value)."""
    rand = random.Random(27)  # (random hex: values lz4 barely shrinks, the segments must fill)
    plan = []
    for round_ in range(8):
        # key k is written in rounds 0 to k % 8: the last records of keys lie between others'
        for k in range(30):
            if k % 8 < round_:
                continue
            # some keys end deleted (a tombstone last), some deleted and written again
            value = None if (k % 5 == 0 and round_ == k % 8) or (k % 5 == 1 and round_ == 0 < k % 8) \
                else b"%d-%d " % (k, round_) + rand.randbytes(100).hex().encode()
            plan.append((b"key-%d" % k, value, b"%d" % round_ if k % 2 else None))
    # keys written once, to fill segments past the last round: the cleaner never cleans the
    # active segment, and these leave nothing in it that a cleaned one could have lost
    plan += [(b"filler-%d" % i, rand.randbytes(350).hex().encode(), None) for i in range(60)]
    return plan


def _write_with_librdkafka(bootstrap: str, topic: str, plan) -> list[int]:
    """The plan's records through confluent-kafka (lz4, small batches): their offsets."""
    p = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 5,
                  "batch.size": 4096, "enable.idempotence": True})
    offsets: list[int] = [-1] * len(plan)
    errors = []

    def sent(i):
        def report(err, msg):
            if err:
                errors.append(err)
            else:
                offsets[i] = msg.offset()
        return report

    for i, (key, value, round_) in enumerate(plan):
        p.produce(topic, key=key, value=value, on_delivery=sent(i),
                  headers=[("round", round_)] if round_ is not None else None)
    assert p.flush(30) == 0 and not errors
    return offsets


def _write_with_java(bootstrap: str, topic: str, plan, java_tools) -> list[int]:
    """The plan's records through the Java producer (ConsoleProducer: lz4, small batches):
    their offsets, as its acknowledgements give them."""
    text = lambda v: "NULL" if v is None else v.decode()  # noqa: E731
    lines = [f"{'round:' + round_.decode() if round_ is not None else ''}\t{key.decode()}\t{text(value)}"
             for key, value, round_ in plan]
    result = java_tools.run("ConsoleProducer", "--bootstrap-server", bootstrap, "--topic", topic,
                            "--compression-type", "lz4", "--producer-property", "batch.size=4096",
                            "--property", "parse.headers=true", "--property", "parse.key=true",
                            "--property", "null.marker=NULL", "--print-acks",
                            input="\n".join(lines) + "\n").check()
    acks = sorted((int(off), shown) for _, off, shown in
                  (line.split("\t") for line in result.stdout.splitlines()))
    # (one idempotent producer, one partition: offsets in the order written)
    assert acks == [(i, text(value)) for i, (_, value, _) in enumerate(plan)]
    return [off for off, _ in acks]


@pytest.mark.parametrize("writer", ["librdkafka", "java"])
def test_a_topic_compacted_by_the_broker_reads_back_like_a_plain_consumer(broker, monkeypatch,
                                                                          request, writer):
    """The broker's log cleaner compacts a topic (small segments, any dirty ratio) written by
    confluent-kafka or by the Java producer: what is left has offset gaps between and inside
    batches, and tombstones (delete.retention.ms is a day); the wire reader and the decoder
    read exactly what a plain consumer reads, field by field, whole and in ranges that start
    and end in gaps, and so does the confluent-kafka reader."""
    b = broker.bootstrap
    topic = f"arrow-compacted-{writer}"
    create_topic(b, topic, 1, {"cleanup.policy": "compact", "segment.bytes": "16384",
                               "min.cleanable.dirty.ratio": "0.01"})
    plan = _compaction_plan()
    if writer == "java":
        offsets = _write_with_java(b, topic, plan, request.getfixturevalue("java_tools"))
    else:
        offsets = _write_with_librdkafka(b, topic, plan)
    latest: dict[bytes, int] = {}  # key -> the offset of its last record
    for (key, _, _), offset in zip(plan, offsets):
        latest[key] = max(latest.get(key, -1), offset)
    total = len(plan)
    kept = sorted(latest.values())
    assert len(kept) == 30 + 60

    def compacted():
        rows = consume_all(b, topic)
        return rows if [r[4] for r in rows] == kept else None

    plain = wait_until(compacted, 60, f"the cleaner to leave only the last record of each key "
                                      f"({len(kept)} of {total} records)", interval=0.3)
    assert sum(1 for r in plain if r[1] is None) == 6  # the tombstones of 6 keys remain
    with SimpleClient(b) as client:
        records = fetch(client, topic, 0, 0, committed=False, part_bytes=1 << 20).records
    headers = [h for _, h in iter_batch_headers(records)]
    assert any(0 < h.records_count < h.last_offset_delta + 1 for h in headers)  # gaps inside
    assert by_offset(read_whole(monkeypatch, b, topic, 1, "read_uncommitted",
                                librdkafka_too=True)) == by_offset(plain)
    assert by_offset(fetch_rows(b, topic, 1, committed=False)) == by_offset(plain)
    # ranges that start and end in gaps, or on kept records, read as the confluent-kafka reader
    # (small fetches: many responses end inside a batch)
    opts = parse_read_options({"kafka.bootstrap.servers": b, "subscribe": topic,
                               "includeHeaders": "true",
                               "kafka.max.partition.fetch.bytes": "2000"})
    gaps = sorted(set(range(kept[-1])) - set(kept))
    for start, end in [(gaps[0], gaps[-1]), (kept[1], kept[10]), (gaps[3], kept[-2])]:
        wire = _read(monkeypatch, "wire", opts, OffsetRange(topic, 0, start, end), 7)
        assert wire.equals(_read(monkeypatch, "librdkafka", opts, OffsetRange(topic, 0, start, end), 7))
        assert arrow_rows(wire) == [r for r in plain if start <= r[4] < end]


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
