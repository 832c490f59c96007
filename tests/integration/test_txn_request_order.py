"""A transactional producer's pipelined requests take effect in the order it
sent them, as Kafka, reading one request of a connection at a time, takes
them, also where the transaction coordinator's write waits for its followers
(a cluster):

- TxnOffsetCommit: the first of a transaction, which waits on the coordinator
  to add the group's offsets partition (KIP-890, transactions v2), holds back
  the ones behind it, which then find the partition added. Without that, the
  second asked the coordinator while the first one's write was in flight and
  was refused (CONCURRENT_TRANSACTIONS, answered as NOT_ENOUGH_REPLICAS); a
  client retrying it would have committed its offset after the third's.
- EndTxn right behind an AddPartitionsToTxn (librdkafka sends an abort that
  way when the registration is still unanswered): it met the registration's
  write in flight and was refused CONCURRENT_TRANSACTIONS."""
from __future__ import annotations

import asyncio
import uuid

from confluent_kafka.admin import AdminClient, NewTopic

from samsa.client.aio import KafkaConnection
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (AddPartitionsToTxnRequest, EndTxnRequest,
                                     OffsetFetchRequest,
                                     TxnOffsetCommitRequest)
from samsa.protocol.model import ApiKey
from tests.support.coordinators import (COORDINATOR_MOVING, GROUP_KEY, TRANSACTION_KEY,
                                       coordinator_port)
from tests.integration.test_produce_order import _init_transactional

TXN_OFFSET_COMMIT_V2 = 5  # a transactions-v2 producer's TxnOffsetCommit (KIP-890 part 2)
END_TXN_V2 = 5
COMMITS = 4


async def _pipeline(port: int, topic: str, group: str, tid: str) -> tuple:
    txn_conn = await KafkaConnection.connect(
        "127.0.0.1", await coordinator_port(port, tid, TRANSACTION_KEY), client_id="pipelined-txn")
    conn = await KafkaConnection.connect(
        "127.0.0.1", await coordinator_port(port, group, GROUP_KEY), client_id="pipelined-txn")
    try:
        pid, epoch = await _init_transactional(txn_conn, tid)
        T = TxnOffsetCommitRequest
        commits = [conn.call(T(
            transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
            generation_id=-1, member_id="", group_instance_id=None, topics=[
                T.TxnOffsetCommitRequestTopic(name=topic, partitions=[
                    T.TxnOffsetCommitRequestPartition(
                        partition_index=0, committed_offset=10 * (i + 1),
                        committed_leader_epoch=-1, committed_metadata="")])]),
            api_key=ApiKey.TXN_OFFSET_COMMIT, version=TXN_OFFSET_COMMIT_V2)
            for i in range(COMMITS)]
        # gather starts each call in this order: the frames go out back to back
        committed = await asyncio.gather(*commits)
        ended = await txn_conn.call(EndTxnRequest(transactional_id=tid, producer_id=pid,
                                                  producer_epoch=epoch, committed=True),
                                    api_key=ApiKey.END_TXN, version=END_TXN_V2)
        while True:  # (the commit marker reaches the offsets partition after EndTxn)
            r = await conn.call(OffsetFetchRequest(group_id=group, topics=[
                OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])],
                require_stable=True), api_key=ApiKey.OFFSET_FETCH, version=7)
            if r.error_code in COORDINATOR_MOVING:
                # (a loaded machine: the offsets partition's leadership moved or
                # is loading; a client asks the coordinator again, as here)
                await conn.close()
                conn = await KafkaConnection.connect(
                    "127.0.0.1", await coordinator_port(port, group, GROUP_KEY),
                    client_id="pipelined-txn")
                continue
            assert r.error_code == ErrorCode.NONE, r
            (p,) = r.topics[0].partitions
            if p.error_code != ErrorCode.UNSTABLE_OFFSET_COMMIT:
                return committed, ended, (p.error_code, p.committed_offset)
            await asyncio.sleep(0.05)
    finally:
        await conn.close()
        await txn_conn.close()


def test_pipelined_txn_offset_commits_take_effect_in_the_order_sent(cluster_factory):
    cluster = cluster_factory()
    topic = f"txn-commits-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    group, tid = f"txn-group-{uuid.uuid4().hex[:8]}", f"txn-{uuid.uuid4().hex}"
    committed, ended, fetched = asyncio.run(
        _pipeline(cluster.brokers[0].port, topic, group, tid))
    assert [c.topics[0].partitions[0].error_code for c in committed] == \
        [ErrorCode.NONE] * COMMITS
    assert ended.error_code == ErrorCode.NONE, ended
    assert fetched == (ErrorCode.NONE, 10 * COMMITS)


async def _add_then_end(port: int, topic: str, tid: str) -> tuple:
    conn = await KafkaConnection.connect(
        "127.0.0.1", await coordinator_port(port, tid, TRANSACTION_KEY), client_id="pipelined-txn")
    try:
        pid, epoch = await _init_transactional(conn, tid)
        A = AddPartitionsToTxnRequest
        add = conn.call(A(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                          v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                              A.AddPartitionsToTxnTopic(name=topic, partitions=[0])]),
                        api_key=ApiKey.ADD_PARTITIONS_TO_TXN, version=3)
        end = conn.call(EndTxnRequest(transactional_id=tid, producer_id=pid,
                                      producer_epoch=epoch, committed=False),
                        api_key=ApiKey.END_TXN, version=3)
        # gather starts each call in this order: the frames go out back to back
        return tuple(await asyncio.gather(add, end))
    finally:
        await conn.close()


def test_an_abort_right_behind_the_registration_of_a_partition_ends_the_transaction(
        cluster_factory):
    cluster = cluster_factory()
    topic = f"txn-abort-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    added, ended = asyncio.run(_add_then_end(cluster.brokers[0].port, topic,
                                             f"txn-{uuid.uuid4().hex}"))
    assert [p.partition_error_code for t in added.results_by_topic_v3_and_below
            for p in t.results_by_partition] == [ErrorCode.NONE]
    assert ended.error_code == ErrorCode.NONE, ended
