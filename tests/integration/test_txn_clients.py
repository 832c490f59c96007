"""Transactions with real clients: librdkafka (confluent-kafka) commit, abort,
zombie fencing, the coordinator's timeout abort, transactional offsets; the
Java client's exactly-once consume-transform-produce loop killed with SIGKILL
and restarted; a broker killed with transactions open and completing."""
from __future__ import annotations

import random
import selectors
import signal
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.client.blocking import SimpleClient
from samsa.protocol.messages import DescribeTransactionsRequest, ListTransactionsRequest
from tests.support.txn_wire import TxnWire
from tests.support.waiting import wait_until


@pytest.fixture
def broker(module_broker):
    """One broker for the module (tests/conftest.py): every test has topics, groups and
    transactional ids of its own (uuid names); those that kill a broker start their own."""
    return module_broker


def _topic(prefix: str = "tx") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def _producer(bootstrap: str, tid: str, **extra) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                     "linger.ms": 1, **extra})


def _read(bootstrap: str, topic: str, isolation: str, partitions: int = 1,
          expect: int | None = None, idle_s: float = 3.0) -> list[bytes]:
    """Every value in ``topic`` as a consumer with ``isolation`` sees it: read
    until ``expect`` values came (or nothing new for ``idle_s``)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": isolation})
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        last = time.monotonic()
        while time.monotonic() - last < idle_s:
            if expect is not None and len(values) >= expect:
                break
            for m in consumer.consume(1000, 0.3):
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        continue
                    raise AssertionError(m.error())
                values.append(m.value())
                last = time.monotonic()
    finally:
        consumer.close()
    return values


def _send_all(producer: Producer, topic: str, values: list[bytes]) -> None:
    for v in values:
        producer.produce(topic, value=v)
    assert producer.flush(30) == 0


def test_commit_and_abort_with_librdkafka(broker):
    topic = _topic()
    _create(broker.bootstrap, topic)
    p = _producer(broker.bootstrap, f"t-{uuid.uuid4().hex[:6]}")
    p.init_transactions(30)
    p.begin_transaction()
    _send_all(p, topic, [b"a%d" % i for i in range(5)])
    p.abort_transaction(30)
    p.begin_transaction()
    _send_all(p, topic, [b"c%d" % i for i in range(7)])
    p.commit_transaction(30)

    committed = _read(broker.bootstrap, topic, "read_committed", expect=7)
    assert committed == [b"c%d" % i for i in range(7)]
    # read_uncommitted sees the aborted records too (the markers are not records)
    everything = _read(broker.bootstrap, topic, "read_uncommitted", expect=12)
    assert everything == [b"a%d" % i for i in range(5)] + [b"c%d" % i for i in range(7)]


def test_a_new_instance_fences_the_zombie(broker):
    topic = _topic()
    _create(broker.bootstrap, topic)
    tid = f"z-{uuid.uuid4().hex[:6]}"
    zombie = _producer(broker.bootstrap, tid)
    zombie.init_transactions(30)
    zombie.begin_transaction()
    _send_all(zombie, topic, [b"zombie-%d" % i for i in range(3)])

    # A second instance with the same id: its init aborts the zombie's open
    # transaction (with the epoch bumped) before it is answered.
    fresh = _producer(broker.bootstrap, tid)
    fresh.init_transactions(30)
    fresh.begin_transaction()
    _send_all(fresh, topic, [b"fresh-%d" % i for i in range(4)])
    fresh.commit_transaction(30)

    with pytest.raises(KafkaException) as failure:
        zombie.produce(topic, value=b"late")
        zombie.flush(10)
        zombie.commit_transaction(10)
    err = failure.value.args[0]
    assert err.fatal() or err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                         KafkaError.INVALID_PRODUCER_EPOCH), err

    assert _read(broker.bootstrap, topic, "read_committed", expect=4) == \
        [b"fresh-%d" % i for i in range(4)]


def test_the_coordinator_aborts_a_transaction_past_its_timeout(broker_factory):
    broker = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": 200})
    topic = _topic()
    _create(broker.bootstrap, topic)
    stuck = _producer(broker.bootstrap, f"slow-{uuid.uuid4().hex[:6]}",
                      **{"transaction.timeout.ms": 1500})
    stuck.init_transactions(30)
    stuck.begin_transaction()
    _send_all(stuck, topic, [b"never-%d" % i for i in range(3)])

    other = _producer(broker.bootstrap, f"ok-{uuid.uuid4().hex[:6]}")
    other.init_transactions(30)
    other.begin_transaction()
    _send_all(other, topic, [b"later-%d" % i for i in range(2)])
    other.commit_transaction(30)

    # The open transaction holds the last stable offset back until the
    # coordinator aborts it; then read_committed gets past it.
    got = wait_until(lambda: _read(broker.bootstrap, topic, "read_committed", expect=2,
                                   idle_s=1.0) or None, timeout=30,
                     what="the timed-out transaction to be aborted")
    assert got == [b"later-%d" % i for i in range(2)]
    with pytest.raises(KafkaException):
        stuck.commit_transaction(10)


def test_transactional_offsets_show_only_after_commit(broker):
    topic = _topic()
    _create(broker.bootstrap, topic)
    group = f"g-{uuid.uuid4().hex[:6]}"
    p = _producer(broker.bootstrap, f"o-{uuid.uuid4().hex[:6]}")
    p.init_transactions(30)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        metadata = consumer.consumer_group_metadata()

        def committed_offset() -> int:
            return consumer.committed([TopicPartition(topic, 0)], 10)[0].offset

        p.begin_transaction()
        p.send_offsets_to_transaction([TopicPartition(topic, 0, 11)], metadata, 30)
        p.abort_transaction(30)
        assert committed_offset() < 0  # the aborted commit never shows

        p.begin_transaction()
        p.send_offsets_to_transaction([TopicPartition(topic, 0, 42)], metadata, 30)
        p.commit_transaction(30)
        assert wait_until(lambda: committed_offset() == 42 or None, timeout=15,
                          what="the transactional commit")
    finally:
        consumer.close()


def test_describe_and_list_transactions(broker):
    topic = _topic()
    _create(broker.bootstrap, topic)
    tid = f"d-{uuid.uuid4().hex[:6]}"
    p = _producer(broker.bootstrap, tid, **{"transaction.timeout.ms": 45000})
    p.init_transactions(30)
    p.begin_transaction()
    _send_all(p, topic, [b"x"])
    with SimpleClient(broker.bootstrap) as client:
        def described_once_loaded():
            # the partitions of __transaction_state load as they open, right
            # after the first producer asked: COORDINATOR_LOAD_IN_PROGRESS (14)
            # until then, which clients retry
            states = client.call(65, DescribeTransactionsRequest(
                transactional_ids=[tid, "never-seen"])).transaction_states
            return None if any(s.error_code == 14 for s in states) else states
        described = wait_until(described_once_loaded, what="every partition loaded")
        assert [(s.transactional_id, s.error_code) for s in described] == [
            (tid, 0), ("never-seen", 105)]  # TRANSACTIONAL_ID_NOT_FOUND
        mine = described[0]
        assert mine.transaction_state == "Ongoing" and mine.transaction_timeout_ms == 45000
        assert [(t.topic, list(t.partitions)) for t in mine.topics] == [(topic, [0])]
        listed = client.call(66, ListTransactionsRequest(
            state_filters=["Ongoing", "NoSuchState"], producer_id_filters=[],
            duration_filter=-1, transactional_id_pattern=None))
        assert listed.error_code == 0 and listed.unknown_state_filters == ["NoSuchState"]
        assert tid in [s.transactional_id for s in listed.transaction_states]
    p.commit_transaction(30)
    with SimpleClient(broker.bootstrap) as client:
        state = wait_until(lambda: client.call(65, DescribeTransactionsRequest(
            transactional_ids=[tid])).transaction_states[0].transaction_state
            == "CompleteCommit" or None, what="CompleteCommit")
        assert state


def test_broker_killed_with_transactions_open_and_committing(broker_factory):
    """kill -9 with one transaction committed (EndTxn answered, markers maybe
    not written) and one open: after the restart the committed one is visible
    to read_committed readers and the open one is aborted by its timeout."""
    broker = broker_factory({"transaction.abort.timed.out.transaction.cleanup.interval.ms": 200})
    topic = _topic()
    _create(broker.bootstrap, topic, partitions=3)
    committing = _producer(broker.bootstrap, f"c-{uuid.uuid4().hex[:6]}")
    committing.init_transactions(30)
    committing.begin_transaction()
    values = [b"kept-%d" % i for i in range(30)]
    for i, v in enumerate(values):
        committing.produce(topic, value=v, partition=i % 3)
    assert committing.flush(30) == 0
    opened_id = f"o-{uuid.uuid4().hex[:6]}"
    opened = _producer(broker.bootstrap, opened_id, **{"transaction.timeout.ms": 2000})
    opened.init_transactions(30)
    opened.begin_transaction()
    for i in range(6):
        opened.produce(topic, value=b"lost-%d" % i, partition=i % 3)
    assert opened.flush(30) == 0
    committing.commit_transaction(30)
    broker.kill()
    broker.start()

    got = wait_until(lambda: (lambda v: v if len(v) >= 30 else None)(
        _read(broker.bootstrap, topic, "read_committed", partitions=3, expect=30,
              idle_s=1.0)), timeout=60, what="the committed transaction after the restart")
    assert sorted(got) == sorted(values)
    everything = _read(broker.bootstrap, topic, "read_uncommitted", partitions=3, expect=36)
    assert sorted(everything) == sorted(values + [b"lost-%d" % i for i in range(6)])
    # the open one ends aborted (its timeout): markers in every partition, so
    # read_committed readers get to the end of each
    with SimpleClient(broker.bootstrap) as c:
        wait_until(lambda: c.call(65, DescribeTransactionsRequest(transactional_ids=[opened_id]))
                   .transaction_states[0].transaction_state == "CompleteAbort" or None,
                   timeout=30, what="the open transaction aborted")
    with TxnWire(broker.bootstrap) as wire:
        for p in range(3):
            assert wire.latest(topic, 1, partition=p) == wire.latest(topic, 0, partition=p)


# ------------------------------------------------------------------ the Java client

def _produce_input(bootstrap: str, topic: str, n: int) -> list[bytes]:
    values = [b"in-%05d" % i for i in range(n)]
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i, v in enumerate(values):
        p.produce(topic, key=b"%d" % (i % 13), value=v)
    assert p.flush(30) == 0
    return values


def _wait_for_progress(proc, commits: int, timeout: float) -> None:
    """Until the loop printed its "progress N" line for N = ``commits``."""
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if selector.select(timeout=1.0):
            line = proc.stdout.readline()
            if line.startswith("progress ") and int(line.split()[1]) >= commits:
                return
            if not line:
                break  # the process ended
    raise AssertionError(f"{commits} transactions not committed within {timeout}s")


def test_java_exactly_once_loop_survives_sigkill(broker_factory, java_tools):
    """Kafka's consume-transform-produce loop (sendOffsetsToTransaction), killed
    with SIGKILL at random points while it works and restarted: read_committed
    output holds every input record exactly once; every 4th transaction is
    aborted on purpose, so a read_uncommitted reader sees more than that. The
    Java 4.3 producer speaks transactions v2 here (the broker finalizes
    transaction.version 2): EndTxn v5 with an epoch bump per transaction, no
    AddPartitionsToTxn / AddOffsetsToTxn of its own."""
    broker = broker_factory({"group.initial.rebalance.delay.ms": 0})
    src, dst = _topic("eos-in"), _topic("eos-out")
    _create(broker.bootstrap, src, partitions=2)
    _create(broker.bootstrap, dst, partitions=2)
    n = 3000
    inputs = _produce_input(broker.bootstrap, src, n)
    args = ["--bootstrap-server", broker.bootstrap, "--input", src, "--output", dst,
            "--group", "eos-group", "--transactional-id", "eos-app", "--abort-every", "4",
            "--max-poll-records", "10"]
    rng = random.Random(20261124)
    killed_mid_stream = 0
    for _ in range(3):
        proc = java_tools.popen("Eos", *args, "--idle-ms", "60000")
        try:
            # wait for its first commits (a restart waits out the killed
            # member's session first), then kill it a random moment later
            # killed after a random number of its transactions: always mid-stream
            # (three runs commit at most 3 x 40 of the ~300), whatever the speed
            _wait_for_progress(proc, commits=rng.randint(5, 40), timeout=120)
        finally:
            proc.send_signal(signal.SIGKILL)
            out, _ = proc.communicate(timeout=30)
        killed_mid_stream += "committed " not in out
    final = java_tools.run("Eos", *args, "--idle-ms", "8000", timeout=240).check()
    assert final.lines[-2].startswith("committed ")
    assert killed_mid_stream == 3
    assert int(final.lines[-2].split()[1]) > 0  # the kills left work for the last run

    out = _read(broker.bootstrap, dst, "read_committed", partitions=2, expect=n, idle_s=5.0)
    expected = sorted(b"out:" + v for v in inputs)
    assert len(out) == n and sorted(out) == expected, (len(out), len(set(out)), n)
    raw = _read(broker.bootstrap, dst, "read_uncommitted", partitions=2, idle_s=3.0)
    assert len(raw) > n and set(raw) == set(expected)
    # every run's producer ended its transactions with EndTxn v5
    assert broker.log_path.read_text().count("ends its transactions with EndTxn v5") >= 4


def test_java_producer_keeps_the_classic_protocol_when_the_feature_is_off(broker_factory,
                                                                          java_tools):
    """transaction.version=0 (Kafka: the feature at level 0): the Java 4.3
    producer sees no transaction.version in ApiVersions and speaks the classic
    protocol (AddPartitionsToTxn, AddOffsetsToTxn, EndTxn v4), exactly once
    still; no EndTxn v5 reaches the broker."""
    broker = broker_factory({"group.initial.rebalance.delay.ms": 0, "transaction.version": 0})
    src, dst = _topic("eos-in"), _topic("eos-out")
    _create(broker.bootstrap, src)
    _create(broker.bootstrap, dst)
    inputs = _produce_input(broker.bootstrap, src, 200)
    final = java_tools.run("Eos", "--bootstrap-server", broker.bootstrap, "--input", src,
                           "--output", dst, "--group", "eos-classic", "--transactional-id",
                           "eos-classic", "--abort-every", "3", "--idle-ms", "4000",
                           timeout=120).check()
    assert final.lines[-1] != "aborted 0"
    out = _read(broker.bootstrap, dst, "read_committed", expect=len(inputs), idle_s=5.0)
    assert sorted(out) == sorted(b"out:" + v for v in inputs)
    assert "EndTxn v5" not in broker.log_path.read_text()


# ------------------------------------------------------------------ KIP-890 part 1

def _txn_produce(client, tid: str, topic: str, partition: int, pid: int, epoch: int, seq: int,
                 value: bytes, version: int = 9):
    from samsa.protocol.messages import ProduceRequest
    from samsa.protocol.records import build_batch
    batch = build_batch([(None, value, [], int(time.time() * 1000))], producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq, is_transactional=True)
    r = client.call(0, ProduceRequest(acks=-1, timeout_ms=10000, transactional_id=tid,
                                      topic_data=[ProduceRequest.TopicProduceData(
                                          name=topic, partition_data=[
                                              ProduceRequest.PartitionProduceData(
                                                  index=partition, records=batch)])]),
                    highest=version)
    return r.responses[0].partition_responses[0]


def test_leaders_refuse_transactional_writes_the_coordinator_does_not_know(broker):
    """A transactional batch for a partition not added to the producer's open
    transaction (or arriving after it ended) is refused with INVALID_TXN_STATE
    and not written: it would open a transaction no marker ever closes, and
    read_committed readers of the partition would stop there for good."""
    from samsa.protocol.messages import (AddPartitionsToTxnRequest, EndTxnRequest,
                                   InitProducerIdRequest)
    topic = _topic()
    _create(broker.bootstrap, topic, partitions=2)
    tid = f"v-{uuid.uuid4().hex[:6]}"
    # a producer finds its coordinator first (this creates __transaction_state)
    _producer(broker.bootstrap, f"warm-{uuid.uuid4().hex[:6]}").init_transactions(30)
    with SimpleClient(broker.bootstrap) as c:
        init = wait_until(lambda: (lambda r: r if r.error_code == 0 else None)(
            c.call(22, InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000,
                                             producer_id=-1, producer_epoch=-1))))
        pid, epoch = init.producer_id, init.producer_epoch
        A = AddPartitionsToTxnRequest
        added = c.call(24, A(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                             v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                                 A.AddPartitionsToTxnTopic(name=topic, partitions=[0])]),
                       highest=3)
        assert added.results_by_topic_v3_and_below[0].results_by_partition[0] \
            .partition_error_code == 0
        assert _txn_produce(c, tid, topic, 0, pid, epoch, 0, b"in").error_code == 0
        stray = _txn_produce(c, tid, topic, 1, pid, epoch, 0, b"not added")
        assert stray.error_code == 48  # INVALID_TXN_STATE
        # the classic protocol (EndTxn v4): the epoch stays, the coordinator says no
        assert c.call(26, EndTxnRequest(transactional_id=tid, producer_id=pid,
                                        producer_epoch=epoch, committed=True),
                      highest=4).error_code == 0
        # a late batch once the commit is complete (its markers written: until
        # then the partition's transaction is still open, and a write joins it)
        wait_until(lambda: c.call(65, DescribeTransactionsRequest(transactional_ids=[tid]))
                   .transaction_states[0].transaction_state == "CompleteCommit" or None,
                   what="CompleteCommit")
        late = wait_until(lambda: (lambda r: r if r.error_code != 6 else None)(
            _txn_produce(c, tid, topic, 0, pid, epoch, 1, b"late")))
        assert late.error_code == 48
    assert _read(broker.bootstrap, topic, "read_committed", partitions=2, expect=1) == [b"in"]
    # nothing hangs: the last stable offset of both partitions is their end
    assert sorted(_read(broker.bootstrap, topic, "read_uncommitted", partitions=2,
                        expect=1)) == [b"in"]


def _wire_init(c, tid: str) -> tuple[int, int]:
    from samsa.protocol.messages import InitProducerIdRequest
    init = wait_until(lambda: (lambda r: r if r.error_code == 0 else None)(
        c.call(22, InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000,
                                         producer_id=-1, producer_epoch=-1))))
    return init.producer_id, init.producer_epoch


def test_txn_offset_commit_needs_add_offsets_first(broker):
    """TxnOffsetCommit (v4: a classic producer) for a group whose offsets
    partition the producer never added (AddOffsetsToTxn) is INVALID_TXN_STATE,
    and nothing stays pending: a read_committed consumer of the group is not
    held up. (v5, transactions v2, adds the partition itself.)"""
    from samsa.protocol.messages import TxnOffsetCommitRequest as T
    topic = _topic()
    _create(broker.bootstrap, topic)
    _producer(broker.bootstrap, f"warm-{uuid.uuid4().hex[:6]}").init_transactions(30)
    tid, group = f"o-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    with SimpleClient(broker.bootstrap) as c:
        pid, epoch = _wire_init(c, tid)
        r = c.call(28, T(transactional_id=tid, group_id=group, producer_id=pid,
                         producer_epoch=epoch, generation_id=-1, member_id="",
                         group_instance_id=None, topics=[T.TxnOffsetCommitRequestTopic(
                             name=topic, partitions=[T.TxnOffsetCommitRequestPartition(
                                 partition_index=0, committed_offset=5,
                                 committed_leader_epoch=-1, committed_metadata="")])]),
                   highest=4)
        assert r.topics[0].partitions[0].error_code == 48  # INVALID_TXN_STATE
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        assert consumer.committed([TopicPartition(topic, 0)], 10)[0].offset < 0
    finally:
        consumer.close()


def test_a_plain_commit_after_a_transactional_one_wins(broker):
    """Kafka applies a transaction's offsets on COMMIT only when they are newer
    than the group's last commit: a reset made meanwhile stands."""
    topic = _topic()
    _create(broker.bootstrap, topic)
    group, tid = f"g-{uuid.uuid4().hex[:6]}", f"o-{uuid.uuid4().hex[:6]}"
    p = _producer(broker.bootstrap, tid)
    p.init_transactions(30)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        p.begin_transaction()
        p.send_offsets_to_transaction([TopicPartition(topic, 0, 42)],
                                      consumer.consumer_group_metadata(), 30)
        consumer.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
        p.commit_transaction(30)
        with SimpleClient(broker.bootstrap) as c:  # its markers are all written
            wait_until(lambda: c.call(65, DescribeTransactionsRequest(transactional_ids=[tid]))
                       .transaction_states[0].transaction_state == "CompleteCommit" or None,
                       what="CompleteCommit")
        assert consumer.committed([TopicPartition(topic, 0)], 10)[0].offset == 7
    finally:
        consumer.close()


def test_old_request_versions_hear_invalid_producer_epoch_not_producer_fenced(broker):
    from samsa.protocol.messages import EndTxnRequest
    _producer(broker.bootstrap, f"warm-{uuid.uuid4().hex[:6]}").init_transactions(30)
    tid = f"f-{uuid.uuid4().hex[:6]}"
    with SimpleClient(broker.bootstrap) as c:
        pid, epoch = _wire_init(c, tid)
        _wire_init(c, tid)  # a newer instance: epoch + 1
        stale = EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                              committed=True)
        assert c.call(26, stale, highest=1).error_code == 47  # INVALID_PRODUCER_EPOCH
        assert c.call(26, stale, highest=2).error_code == 90  # PRODUCER_FENCED


# ------------------------------------------------------------------ KIP-890 part 2

def test_a_v2_producers_partitions_join_on_its_first_write(broker):
    """Transactions v2 on the wire, as the Java 4.x producer speaks it: no
    AddPartitionsToTxn, the partitions of a Produce v12 join the transaction;
    EndTxn v5 answers the epoch bumped for the next transaction, so a late
    write of an ended transaction is refused; read_committed readers see the
    committed transaction only."""
    from samsa.protocol.messages import EndTxnRequest
    topic = _topic()
    _create(broker.bootstrap, topic, partitions=2)
    _producer(broker.bootstrap, f"warm-{uuid.uuid4().hex[:6]}").init_transactions(30)
    tid = f"v2-{uuid.uuid4().hex[:6]}"

    def produce(c, partition, epoch, seq, value):
        # NOT_ENOUGH_REPLICAS (19): the coordinator could not answer yet, retried
        return wait_until(lambda: (lambda r: r if r.error_code != 19 else None)(
            _txn_produce(c, tid, topic, partition, pid, epoch, seq, value, version=12)))

    def end(c, epoch, commit):
        return wait_until(lambda: (lambda r: r if r.error_code != 51 else None)(  # CONCURRENT
            c.call(26, EndTxnRequest(transactional_id=tid, producer_id=pid,
                                     producer_epoch=epoch, committed=commit), highest=5)))

    with SimpleClient(broker.bootstrap) as c:
        pid, epoch = _wire_init(c, tid)
        assert produce(c, 0, epoch, 0, b"aborted-0").error_code == 0
        assert produce(c, 1, epoch, 0, b"aborted-1").error_code == 0
        described = c.call(65, DescribeTransactionsRequest(transactional_ids=[tid]))
        state = described.transaction_states[0]
        assert state.transaction_state == "Ongoing"
        assert sorted((t.topic, p) for t in state.topics for p in t.partitions) == [
            (topic, 0), (topic, 1)]
        aborted = end(c, epoch, commit=False)
        assert (aborted.error_code, aborted.producer_id, aborted.producer_epoch) == (
            0, pid, epoch + 1)
        # the next transaction at the bumped epoch, its sequences from 0 again
        assert produce(c, 0, epoch + 1, 0, b"committed").error_code == 0
        committed = end(c, epoch + 1, commit=True)
        assert (committed.error_code, committed.producer_epoch) == (0, epoch + 2)
        # a retried EndTxn (its answer lost) gets the same answer once complete
        wait_until(lambda: c.call(65, DescribeTransactionsRequest(transactional_ids=[tid]))
                   .transaction_states[0].transaction_state == "CompleteCommit" or None,
                   what="CompleteCommit")
        again = end(c, epoch + 1, commit=True)
        assert (again.error_code, again.producer_id, again.producer_epoch) == (
            0, pid, epoch + 2)
        # a late write of the ended transaction: its epoch is fenced
        late = produce(c, 1, epoch + 1, 0, b"late")
        assert late.error_code == 47  # INVALID_PRODUCER_EPOCH
    assert _read(broker.bootstrap, topic, "read_committed", partitions=2,
                 expect=1) == [b"committed"]
    assert sorted(_read(broker.bootstrap, topic, "read_uncommitted", partitions=2,
                        expect=3)) == [b"aborted-0", b"aborted-1", b"committed"]
