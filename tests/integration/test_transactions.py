"""Transactions on a partition leader (KIP-98's data plane), driven without a
transaction coordinator: transactional batches and WriteTxnMarkers over the
wire, read back with read_committed and read_uncommitted by the wire, by
librdkafka (confluent-kafka) and by kafka-python, before and after a kill."""
from __future__ import annotations

import threading
import time
import uuid

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

from samsa.protocol.errors import ErrorCode
import pytest

from tests.conftest import module_broker_with
from tests.support.txn_wire import (NO_VERIFICATION, READ_COMMITTED, READ_UNCOMMITTED, TxnWire,
                                    data_records)


@pytest.fixture(scope="module")
def _module_broker(request):
    yield from module_broker_with(request, NO_VERIFICATION)


@pytest.fixture
def broker(_module_broker):
    """Partitions driven without a coordinator: no KIP-890 verification. One broker for the
    module: every test here has a topic of its own; the one that kills it starts it again."""
    return _module_broker


def _topic(bootstrap: str) -> str:
    name = f"txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)], operation_timeout=30)[name].result(30)
    return name


def _scenario(w: TxnWire, topic: str):
    """Offsets: 0-1 committed txn of A, 2 plain, 3-4 aborted txn of B, 5 A's
    COMMIT, 6 B's ABORT, 7 A's next txn (left open), 8 plain."""
    a, ea = w.init_pid()
    b, eb = w.init_pid()
    ok = ErrorCode.NONE
    assert w.produce(topic, [b"c0", b"c1"], pid=a, epoch=ea, seq=0, transactional=True).error_code == ok
    assert w.produce(topic, [b"p0"]).error_code == ok
    assert w.produce(topic, [b"x0", b"x1"], pid=b, epoch=eb, seq=0, transactional=True).error_code == ok
    assert w.marker(topic, a, ea, commit=True) == {0: ok}
    assert w.marker(topic, b, eb, commit=False) == {0: ok}
    assert w.produce(topic, [b"o0"], pid=a, epoch=ea, seq=2, transactional=True).base_offset == 7
    assert w.produce(topic, [b"p1"]).base_offset == 8
    return a, ea, b, eb


def _consume(consumer_poll, want: int, deadline_s: float = 30) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + deadline_s
    while len(got) < want and time.monotonic() < deadline:
        got += consumer_poll()
    return got


def _confluent(bootstrap, topic, isolation):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "isolation.level": isolation})
    c.assign([TopicPartition(topic, 0, 0)])

    def poll():
        return [(m.offset(), m.value()) for m in c.consume(100, timeout=0.5)
                if m.error() is None]
    return c, poll


def _kafka_python(bootstrap, topic, isolation):
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                      isolation_level=isolation, auto_offset_reset="earliest")
    tp = KTopicPartition(topic, 0)
    c.assign([tp])
    c.seek(tp, 0)

    def poll():
        return [(m.offset, m.value) for msgs in c.poll(timeout_ms=500).values() for m in msgs]
    return c, poll


def test_read_committed_wire_view(broker):
    topic = _topic(broker.bootstrap)
    with TxnWire(broker.bootstrap) as w:
        a, ea, b, eb = _scenario(w, topic)
        everything = w.fetch(topic, 0, READ_UNCOMMITTED)
        assert everything.high_watermark == 9 and everything.last_stable_offset == 7
        assert everything.aborted_transactions is None
        assert [v for _, v in data_records(everything)] == [b"c0", b"c1", b"p0", b"x0", b"x1",
                                                            b"o0", b"p1"]
        committed = w.fetch(topic, 0, READ_COMMITTED)
        assert committed.last_stable_offset == 7
        assert [o for o, _ in data_records(committed)] == [0, 1, 2, 3, 4]   # batches below the LSO
        assert [(t.producer_id, t.first_offset) for t in committed.aborted_transactions] == [(b, 3)]
        # from inside B's transaction on, its abort still applies; past the LSO: nothing
        later = w.fetch(topic, 5, READ_COMMITTED)
        assert [(t.producer_id, t.first_offset) for t in later.aborted_transactions] == [(b, 3)]
        beyond = w.fetch(topic, 7, READ_COMMITTED)
        assert data_records(beyond) == [] and beyond.aborted_transactions == []
        assert w.latest(topic, READ_UNCOMMITTED) == 9
        assert w.latest(topic, READ_COMMITTED) == 7
        desc = {p.producer_id: p for p in w.producers(topic).active_producers}
        assert desc[a].current_txn_start_offset == 7 and desc[a].last_sequence == 2
        assert desc[b].current_txn_start_offset == -1 and desc[b].producer_epoch == eb
        # A commits: the LSO moves to the end
        assert w.marker(topic, a, ea, commit=True) == {0: ErrorCode.NONE}
        assert w.latest(topic, READ_COMMITTED) == 10
        done = w.fetch(topic, 7, READ_COMMITTED)
        assert data_records(done) == [(7, b"o0"), (8, b"p1")] and done.aborted_transactions == []


def test_read_committed_clients_skip_aborted_and_wait_for_open(broker):
    topic = _topic(broker.bootstrap)
    consumers = []
    try:
        with TxnWire(broker.bootstrap) as w:
            a, ea, _, _ = _scenario(w, topic)
            committed = [_confluent(broker.bootstrap, topic, "read_committed"),
                         _kafka_python(broker.bootstrap, topic, "read_committed")]
            uncommitted = [_confluent(broker.bootstrap, topic, "read_uncommitted"),
                           _kafka_python(broker.bootstrap, topic, "read_uncommitted")]
            consumers = [c for c, _ in committed + uncommitted]
            before = [_consume(poll, 3) for _, poll in committed]
            for got in before:   # up to the open transaction, without the aborted one
                assert got == [(0, b"c0"), (1, b"c1"), (2, b"p0")]
            for _, poll in uncommitted:
                assert _consume(poll, 7) == [(0, b"c0"), (1, b"c1"), (2, b"p0"), (3, b"x0"),
                                             (4, b"x1"), (7, b"o0"), (8, b"p1")]
            assert w.marker(topic, a, ea, commit=True) == {0: ErrorCode.NONE}
            for got, (_, poll) in zip(before, committed):
                assert got + _consume(poll, 2) == [(0, b"c0"), (1, b"c1"), (2, b"p0"),
                                                   (7, b"o0"), (8, b"p1")]
    finally:
        for c in consumers:
            c.close()


def test_read_committed_long_poll_wakes_on_marker(broker):
    topic = _topic(broker.bootstrap)
    with TxnWire(broker.bootstrap) as w:
        a, ea = w.init_pid()
        w.produce(topic, [b"t0"], pid=a, epoch=ea, seq=0, transactional=True)
        result = {}
        # The fetch may wait two minutes; its client gives up after 30 s: only
        # the marker moving the LSO wakes it in between.
        waiter = TxnWire(broker.bootstrap, timeout=30)

        def fetch():
            try:
                result["part"] = waiter.fetch(topic, 0, READ_COMMITTED, max_wait_ms=120_000,
                                              min_bytes=1)
            except Exception as e:  # reported below
                result["error"] = e

        t = threading.Thread(target=fetch)
        t.start()
        try:
            # Until the fetch answers: a marker without an open transaction
            # (after the first) changes nothing but is allowed, as in Kafka.
            while t.is_alive() and not result:
                assert w.marker(topic, a, ea, commit=True) == {0: ErrorCode.NONE}
                t.join(2)
            t.join(35)
        finally:
            waiter.close()
    assert "error" not in result, result.get("error")
    assert data_records(result["part"]) == [(0, b"t0")]


def test_markers_and_produce_refused_as_kafka_refuses_them(broker):
    topic = _topic(broker.bootstrap)
    with TxnWire(broker.bootstrap) as w:
        a, ea = w.init_pid()
        assert w.marker(f"nope-{topic}", a, ea, commit=True) == {0: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert w.marker(topic, a, ea, commit=True, partitions=(5,)) == {
            5: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        assert w.produce(topic, [b"t"], pid=a, epoch=ea + 1, seq=0,
                         transactional=True).error_code == ErrorCode.NONE
        # a transactional write from the older epoch: fenced
        assert w.produce(topic, [b"z"], pid=a, epoch=ea, seq=1,
                         transactional=True).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        # a non-transactional write while its transaction is open
        assert w.produce(topic, [b"i"], pid=a, epoch=ea + 1, seq=1).error_code == \
            ErrorCode.INVALID_TXN_STATE
        assert w.marker(topic, a, ea, commit=True) == {0: ErrorCode.INVALID_PRODUCER_EPOCH}
        assert w.marker(topic, a, ea + 1, commit=False, coordinator_epoch=4) == {0: ErrorCode.NONE}
        assert w.marker(topic, a, ea + 1, commit=False, coordinator_epoch=3) == {
            0: ErrorCode.TRANSACTION_COORDINATOR_FENCED}
        assert w.latest(topic, READ_COMMITTED) == w.latest(topic, READ_UNCOMMITTED) == 2


def test_transactional_batches_need_a_transactional_id(broker_factory):
    """Kafka refuses a Produce holding transactional batches without a
    transactional id, even with no authorizer: such a batch belongs to no
    transaction a coordinator could end, and would hold read_committed
    readers at its offset for ever."""
    broker = broker_factory()   # defaults: verification on, no authorizer
    topic = _topic(broker.bootstrap)
    with TxnWire(broker.bootstrap) as w:
        pid, epoch = w.init_pid()
        refused = w.produce(topic, [b"orphan"], pid=pid, epoch=epoch, seq=0, transactional=True,
                            transactional_id=None)
        assert refused.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert w.produce(topic, [b"plain"]).error_code == ErrorCode.NONE
        after = w.fetch(topic, 0, READ_COMMITTED)
        assert after.high_watermark == 1 and after.last_stable_offset == 1
        assert [v for _, v in data_records(after)] == [b"plain"]


def test_transactions_survive_a_kill(broker):
    topic = _topic(broker.bootstrap)
    with TxnWire(broker.bootstrap) as w:
        _scenario(w, topic)
        before = w.fetch(topic, 0, READ_COMMITTED)
    txnindex = sorted((broker.data_dir / f"{topic}-0").glob("*.txnindex"))
    assert [f.stat().st_size for f in txnindex] == [34]
    index_bytes = txnindex[0].read_bytes()
    broker.kill()
    txnindex[0].unlink()   # recovery must write it again, the same
    broker.start()
    with TxnWire(broker.bootstrap) as w:
        after = w.fetch(topic, 0, READ_COMMITTED)
        assert after.last_stable_offset == 7
        assert data_records(after) == data_records(before)
        assert after.aborted_transactions == before.aborted_transactions
        assert w.latest(topic, READ_COMMITTED) == 7
    assert txnindex[0].read_bytes() == index_bytes


def test_java_consumer_read_committed(broker, java_tools):
    topic = _topic(broker.bootstrap)
    with TxnWire(broker.bootstrap) as w:
        a, ea, _, _ = _scenario(w, topic)
        assert w.marker(topic, a, ea, commit=True) == {0: ErrorCode.NONE}

    def consume(isolation, n):
        res = java_tools.consume(
            broker.bootstrap, topic, "--from-beginning", "--max-messages", n, "--timeout-ms", 30000,
            "--consumer-property", f"isolation.level={isolation}",
            "--property", "print.offset=true", timeout=90).check()
        return [tuple(line.split("\t", 1)) for line in res.lines]

    # Kafka's own consumer drops the aborted transaction's records by the
    # aborted_transactions list and skips the markers
    assert consume("read_committed", 5) == [
        ("Offset:0", "c0"), ("Offset:1", "c1"), ("Offset:2", "p0"), ("Offset:7", "o0"),
        ("Offset:8", "p1")]
    assert [v for _, v in consume("read_uncommitted", 7)] == ["c0", "c1", "p0", "x0", "x1",
                                                             "o0", "p1"]


def test_java_admin_describe_producers(broker, java_tools):
    topic = _topic(broker.bootstrap)
    with TxnWire(broker.bootstrap) as w:
        a, ea, b, eb = _scenario(w, topic)
        assert w.marker(topic, b, eb, commit=False, coordinator_epoch=6) == {0: ErrorCode.NONE}
    lines = java_tools.admin_info(broker.bootstrap, "--describe-producers", "--topic", topic,
                                  "--partition", 0).check().lines
    rows = [dict(kv.split(": ", 1) for kv in line.split("\t")) for line in lines]
    assert [(int(r["ProducerId"]), int(r["Epoch"]), int(r["LastSequence"]),
             int(r["CoordinatorEpoch"]), int(r["CurrentTransactionStartOffset"])) for r in rows] == [
        (a, ea, 2, 0, 7), (b, eb, 1, 6, -1)]
    assert all(int(r["LastTimestamp"]) > 0 for r in rows)
