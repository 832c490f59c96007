"""Transactions across a 3-broker ZooKeeper cluster: the broker coordinating a
transaction is killed with SIGKILL while the transaction is open, and again
right after the producer's commit was answered (markers in flight); another
broker takes over its partition of __transaction_state and ends both."""
from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.client.blocking import SimpleClient
from samsa.protocol.messages import (DescribeTransactionsRequest, FindCoordinatorRequest,
                               MetadataRequest)
from tests.support.waiting import wait_until

TXN_OVERRIDES = {
    "transaction.state.log.num.partitions": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
}


def _live(cluster) -> str:
    """host:port of a broker that is running."""
    return next(b.bootstrap for b in cluster.brokers if b.is_running())


def _coordinator_of(cluster, tid: str) -> int:
    def found():
        with SimpleClient(_live(cluster), timeout=10) as c:
            r = c.call(10, FindCoordinatorRequest(key_type=1, coordinator_keys=[tid]))
        x = r.coordinators[0]
        return (x.node_id,) if x.error_code == 0 else None  # broker 0 is not "not found"
    return wait_until(found, timeout=30, what=f"the coordinator of {tid}")[0]


def _state_on(cluster, tid: str) -> str | None:
    coordinator = _coordinator_of(cluster, tid)
    with SimpleClient(_live(cluster), timeout=10) as c:
        address = c.call(3, MetadataRequest(topics=[], allow_auto_topic_creation=False))
    node = next(b for b in address.brokers if b.node_id == coordinator)
    with SimpleClient(f"{node.host}:{node.port}", timeout=10) as c:
        s = c.call(65, DescribeTransactionsRequest(transactional_ids=[tid])).transaction_states[0]
    return s.transaction_state if s.error_code == 0 else None


def _read_committed(bootstrap: str, topic: str, partitions: int, expect: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 60
        while len(values) < expect and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                if m.error() is None:
                    values.append(m.value())
                elif m.error().code() != KafkaError._PARTITION_EOF:
                    raise AssertionError(m.error())
    finally:
        consumer.close()
    return values


def test_coordinator_killed_with_a_transaction_open_and_committing(cluster_factory):
    cluster = cluster_factory(offsets_partitions=3, overrides=TXN_OVERRIDES)
    bootstrap = cluster.bootstrap
    topic = f"txc-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})])[
        topic].result(30)
    cluster.wait_for_leaders(topic, 3)
    tid = f"cl-{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                         "linger.ms": 1, "transaction.timeout.ms": 60000,
                         "reconnect.backoff.max.ms": 500})
    producer.init_transactions(60)

    # 1. killed while the transaction is open: the producer's commit goes to
    #    the broker that took the partition of __transaction_state over
    producer.begin_transaction()
    first = [b"open-%d" % i for i in range(30)]
    for i, v in enumerate(first):
        producer.produce(topic, value=v, partition=i % 3)
    assert producer.flush(30) == 0
    victim = _coordinator_of(cluster, tid)
    cluster.kill(victim)
    producer.commit_transaction(90)
    assert wait_until(lambda: _coordinator_of(cluster, tid) != victim or None, timeout=30)
    cluster.restart(victim)

    # 2. killed right after the commit was answered: the markers are (partly)
    #    written by the old coordinator, the new one finds PrepareCommit and
    #    writes them all
    cluster.wait_for_leaders(topic, 3)
    producer.begin_transaction()
    second = [b"committing-%d" % i for i in range(30)]
    for i, v in enumerate(second):
        producer.produce(topic, value=v, partition=i % 3)
    assert producer.flush(30) == 0
    victim = _coordinator_of(cluster, tid)
    producer.commit_transaction(60)
    cluster.kill(victim)

    got = _read_committed(bootstrap, topic, 3, expect=60)
    assert sorted(got) == sorted(first + second)
    assert wait_until(lambda: _state_on(cluster, tid) == "CompleteCommit" or None,
                      timeout=60, what="CompleteCommit on the new coordinator")


def test_java_transactions_v2_across_brokers(cluster_factory, java_tools):
    """The Java 4.3 producer's exactly-once loop on a 3-broker cluster speaks
    transactions v2: the leaders of its output partitions (mostly not its
    transaction coordinator) add them to its transaction over the wire
    (AddPartitionsToTxn v5), the group coordinator adds the offsets partition
    for TxnOffsetCommit v5, and the markers go out with the bumped epoch."""
    from tests.integration.test_txn_clients import _produce_input
    cluster = cluster_factory(offsets_partitions=3, overrides=TXN_OVERRIDES)
    bootstrap = cluster.bootstrap
    src, dst = f"v2in-{uuid.uuid4().hex[:6]}", f"v2out-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for topic in (src, dst):
        admin.create_topics([NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})])[
            topic].result(30)
        cluster.wait_for_leaders(topic, 3)
    inputs = _produce_input(bootstrap, src, 300)
    final = java_tools.run("Eos", "--bootstrap-server", bootstrap, "--input", src, "--output",
                           dst, "--group", "v2-group", "--transactional-id", "v2-app",
                           "--abort-every", "5", "--idle-ms", "5000", timeout=180).check()
    assert final.lines[-1] != "aborted 0"
    got = _read_committed(bootstrap, dst, 3, expect=len(inputs))
    assert sorted(got) == sorted(b"out:" + v for v in inputs)
    coordinator = _coordinator_of(cluster, "v2-app")
    log = cluster.brokers[coordinator].log_path.read_text()
    assert "ends its transactions with EndTxn v5" in log
