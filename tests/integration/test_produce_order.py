"""A producer's pipelined Produce requests on one connection append in the order
it sent them, as Kafka, reading one request of a connection at a time, appends
them; also when the earlier request has to wait before it may append (KIP-890:
the transaction coordinator adds the partition a transactions-v2 write opens a
transaction in).

Found in CI: the Java producer's request holding a transaction's first batch for
one partition waited on the coordinator while its next request, for a partition
already in the transaction, appended first; that batch was out of sequence and
refused, and the producer failed both, so records of a transaction it then
aborted never reached the log."""
from __future__ import annotations

import asyncio
import uuid

from confluent_kafka.admin import AdminClient, NewTopic

from samsa.client.aio import KafkaConnection
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (EndTxnRequest, FindCoordinatorRequest, InitProducerIdRequest,
                                     ProduceRequest)
from samsa.protocol.model import ApiKey
from tests.storage.helpers import build_batch
from tests.support.txn_wire import READ_COMMITTED, READ_UNCOMMITTED, TxnWire, data_records
from tests.support.waiting import wait_until

PRODUCE_TXN_V2 = 12  # the Produce version of a transactions-v2 producer (KIP-890 part 2)
ROUNDS = 10          # (each a pair of partitions)


async def _init_transactional(conn: KafkaConnection, tid: str) -> tuple[int, int]:
    """(producer id, epoch), once the transaction coordinator is up."""
    while True:
        await conn.call(FindCoordinatorRequest(key=tid, key_type=1, coordinator_keys=[tid]),
                        api_key=ApiKey.FIND_COORDINATOR)
        r = await conn.call(InitProducerIdRequest(transactional_id=tid,
                                                  transaction_timeout_ms=60000),
                            api_key=ApiKey.INIT_PRODUCER_ID)
        if r.error_code == ErrorCode.NONE:
            return r.producer_id, r.producer_epoch
        assert r.error_code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                ErrorCode.COORDINATOR_LOAD_IN_PROGRESS), r
        await asyncio.sleep(0.1)


async def _pipeline(port: int, topic: str, tid: str) -> list[list[tuple[int, int]]]:
    """Per round, the (partition, error) answers of two pipelined requests: X
    writes on in partition a (already in the transaction) and opens partition b;
    Y writes on in a. The values say partition and sequence."""
    conn = await KafkaConnection.connect("127.0.0.1", port, client_id="pipelined-producer")
    try:
        pid, epoch = await _init_transactional(conn, tid)

        def produce(*writes: tuple[int, int, int]):
            R = ProduceRequest
            return conn.call(R(acks=-1, timeout_ms=30000, transactional_id=tid, topic_data=[
                R.TopicProduceData(name=topic, partition_data=[R.PartitionProduceData(
                    index=p, records=build_batch(
                        [f"{p}:{seq + i}".encode() for i in range(n)], producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq, transactional=True))
                    for p, seq, n in writes])]),
                api_key=ApiKey.PRODUCE, version=PRODUCE_TXN_V2)

        answers = []
        for r in range(ROUNDS):
            a, b = 2 * r, 2 * r + 1
            opened = await produce((a, 0, 2))
            assert opened.responses[0].partition_responses[0].error_code == ErrorCode.NONE
            x, y = await asyncio.gather(produce((a, 2, 2), (b, 0, 2)), produce((a, 4, 2)))
            answers.append([(p.index, p.error_code) for resp in (x, y)
                            for p in resp.responses[0].partition_responses])
        ended = await conn.call(EndTxnRequest(transactional_id=tid, producer_id=pid,
                                              producer_epoch=epoch, committed=True),
                                api_key=ApiKey.END_TXN, version=5)
        assert ended.error_code == ErrorCode.NONE, ended
        return answers
    finally:
        await conn.close()


def test_pipelined_requests_append_in_order_when_the_first_waits_for_the_coordinator(
        module_broker):
    b = module_broker.bootstrap
    topic = f"order-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic(topic, 2 * ROUNDS, 1)])[topic].result(30)
    answers = asyncio.run(_pipeline(module_broker.port, topic, f"order-{uuid.uuid4().hex}"))
    assert answers == [[(2 * r, 0), (2 * r + 1, 0), (2 * r, 0)] for r in range(ROUNDS)]
    with TxnWire(b) as wire:
        for r in range(ROUNDS):
            a, other = 2 * r, 2 * r + 1
            assert [v for _, v in data_records(wire.fetch(topic, 0, READ_UNCOMMITTED,
                                                          partition=a))] == \
                [f"{a}:{s}".encode() for s in range(6)]
            assert [v for _, v in data_records(wire.fetch(topic, 0, READ_UNCOMMITTED,
                                                          partition=other))] == \
                [f"{other}:{s}".encode() for s in range(2)]
        # committed: read_committed readers get them too, once the markers are written
        wait_until(lambda: all(wire.latest(topic, READ_COMMITTED, p) ==
                               wire.latest(topic, READ_UNCOMMITTED, p)
                               for p in range(2 * ROUNDS)), 30, "the commit markers")


async def _open_two(port: int, txn_port: int, topic: str, tid: str) -> list[tuple[int, int]]:
    """The (partition, error) answers of two pipelined requests of a v2 producer's
    transaction, each the first write to a partition of its own."""
    txn_conn = await KafkaConnection.connect("127.0.0.1", txn_port, client_id="txn")
    conn = await KafkaConnection.connect("127.0.0.1", port, client_id="pipelined-producer")
    try:
        pid, epoch = await _init_transactional(txn_conn, tid)

        def produce(p: int):
            R = ProduceRequest
            return conn.call(R(acks=-1, timeout_ms=30000, transactional_id=tid, topic_data=[
                R.TopicProduceData(name=topic, partition_data=[R.PartitionProduceData(
                    index=p, records=build_batch([f"{p}:0".encode()], producer_id=pid,
                                                 producer_epoch=epoch, base_sequence=0,
                                                 transactional=True))])]),
                api_key=ApiKey.PRODUCE, version=PRODUCE_TXN_V2)
        x, y = await asyncio.gather(produce(0), produce(1))
        ended = await txn_conn.call(EndTxnRequest(transactional_id=tid, producer_id=pid,
                                                  producer_epoch=epoch, committed=True),
                                    api_key=ApiKey.END_TXN, version=5)
        assert ended.error_code == ErrorCode.NONE, ended
        return [(p.index, p.error_code) for resp in (x, y)
                for p in resp.responses[0].partition_responses]
    finally:
        await conn.close()
        await txn_conn.close()


def test_pipelined_requests_each_opening_a_partition_are_both_added_in_a_cluster(
        cluster_factory):
    """Each asks the coordinator to add its partition (KIP-890 part 2); in a
    cluster the coordinator's write waits for its followers, and the second
    request, asking while the first one's write was in flight, was refused
    (CONCURRENT_TRANSACTIONS, answered NOT_ENOUGH_REPLICAS) where Kafka, reading
    it only after the first was answered, adds its partition too."""
    cluster = cluster_factory()
    topic = f"order-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    # both partitions led by broker 0: the two requests go on one connection
    admin.create_topics([NewTopic(topic, 2, replica_assignment=[[0, 1, 2], [0, 1, 2]])])[
        topic].result(30)
    tid = f"order-{uuid.uuid4().hex}"

    async def scenario() -> list[tuple[int, int]]:
        conn = await KafkaConnection.connect("127.0.0.1", cluster.brokers[0].port)
        try:
            while True:
                r = await conn.call(FindCoordinatorRequest(key=tid, key_type=1,
                                                           coordinator_keys=[tid]),
                                    api_key=ApiKey.FIND_COORDINATOR)
                if r.coordinators[0].error_code == ErrorCode.NONE:
                    break
                await asyncio.sleep(0.1)
        finally:
            await conn.close()
        return await _open_two(cluster.brokers[0].port, r.coordinators[0].port, topic, tid)
    assert asyncio.run(scenario()) == [(0, ErrorCode.NONE), (1, ErrorCode.NONE)]
