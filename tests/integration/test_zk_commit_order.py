"""A 0.8-era consumer's pipelined OffsetCommit v0 requests (offsets kept in
ZooKeeper, /consumers/<group>/offsets/...) land in the order it sent them,
and an OffsetFetch v0 sent right behind them reads the last, as Kafka,
reading one request of a connection at a time, answers them.

samsa wrote each v0 commit to ZooKeeper on a worker thread of its own, so
pipelined commits raced: an older offset could be written last, and the
group would start over from it (records consumed again)."""
from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from samsa.client.aio import KafkaConnection
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import OffsetCommitRequest, OffsetFetchRequest
from samsa.protocol.model import ApiKey
from samsa.testing.waiting import wait_until
from tests.support.broker_process import BrokerProcess

CHROOT = "/samsa"
COMMITS = 30


@pytest.fixture
def zk_broker(zookeeper):
    work = Path(tempfile.mkdtemp(prefix="samsa-zkorder-"))
    broker = BrokerProcess(work / "b0", broker_id=0, overrides={
        "zookeeper.connect": zookeeper.connect + CHROOT,
        "offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "1"})
    try:
        broker.start()
        # The broker answers before it is elected controller; librdkafka's
        # AdminClient, told "no controller" by its first Metadata answer, may not
        # ask again before the create below times out (CI, on a loaded machine).
        zk = KazooClient(hosts=zookeeper.connect + CHROOT)
        zk.start(timeout=30)
        try:
            wait_until(lambda: zk.exists("/controller"), what="broker 0 elected controller")
        finally:
            zk.stop()
            zk.close()
        yield broker, zookeeper.connect + CHROOT
    finally:
        try:
            broker.stop()
        finally:
            print(f"\n--- broker log tail ({broker.log_path}) ---\n{broker.log_tail(40)}")
            shutil.rmtree(work, ignore_errors=True)


async def _pipeline(port: int, group: str, topic: str) -> tuple:
    conn = await KafkaConnection.connect("127.0.0.1", port, client_id="old-consumer")
    try:
        C = OffsetCommitRequest
        commits = [conn.call(C(group_id=group, topics=[C.OffsetCommitRequestTopic(
            name=topic, partitions=[C.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=offset, committed_metadata="")])]),
            api_key=ApiKey.OFFSET_COMMIT, version=0) for offset in range(1, COMMITS + 1)]
        fetch = conn.call(OffsetFetchRequest(group_id=group, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]),
            api_key=ApiKey.OFFSET_FETCH, version=0)
        # gather starts each call in this order: the frames go out back to back
        *committed, fetched = await asyncio.gather(*commits, fetch)
        return committed, fetched
    finally:
        await conn.close()


def test_pipelined_v0_commits_land_in_order_and_a_fetch_behind_them_reads_the_last(zk_broker):
    broker, zk_connect = zk_broker
    topic, group = f"old-{uuid.uuid4().hex[:8]}", f"old-group-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    committed, fetched = asyncio.run(_pipeline(broker.port, group, topic))
    assert [c.topics[0].partitions[0].error_code for c in committed] == \
        [ErrorCode.NONE] * COMMITS
    assert [(p.partition_index, p.committed_offset) for t in fetched.topics
            for p in t.partitions] == [(0, COMMITS)]
    zk = KazooClient(hosts=zk_connect)
    zk.start(timeout=30)
    try:
        data, _ = zk.get(f"/consumers/{group}/offsets/{topic}/0")
    finally:
        zk.stop()
        zk.close()
    assert int(data) == COMMITS
