"""An admin client's pipelined group requests take effect in the order it
sent them, as Kafka, reading one request of a connection at a time, takes
them: an OffsetFetch behind an OffsetDelete reads no offset for the
partition deleted (the group keeps the other one's), a DescribeGroups
behind a DeleteGroups of two groups finds the second gone too. librdkafka's AdminClient sends them
back to back when the first future is not waited on.

In a cluster the coordinator's write of a deletion waits for its followers,
and the group lost its offsets (the next group of a DeleteGroups: itself)
only then: the request behind, decided at once, read what was there before."""
from __future__ import annotations

import asyncio
import uuid

from confluent_kafka.admin import AdminClient, NewTopic

from samsa.client.aio import KafkaConnection
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (DeleteGroupsRequest, DescribeGroupsRequest,
                                     OffsetCommitRequest,
                                     OffsetDeleteRequest, OffsetFetchRequest)
from samsa.protocol.model import ApiKey
from tests.support.coordinators import coordinator_port



async def _commit(conn: KafkaConnection, group: str, topic: str) -> None:
    C = OffsetCommitRequest
    committed = await conn.call(C(group_id=group, generation_id_or_member_epoch=-1,
                                  member_id="", group_instance_id=None, topics=[
                                      C.OffsetCommitRequestTopic(name=topic, partitions=[
                                          C.OffsetCommitRequestPartition(
                                              partition_index=p, committed_offset=5,
                                              committed_metadata="")
                                          for p in (0, 1)])]),
                                api_key=ApiKey.OFFSET_COMMIT, version=8)
    assert [p.error_code for p in committed.topics[0].partitions] == [ErrorCode.NONE] * 2


async def _pipeline(port: int, topic: str, groups: list[str]) -> tuple:
    """Both groups coordinated by one broker (the caller picks them so)."""
    conn = await KafkaConnection.connect("127.0.0.1", await coordinator_port(port, groups[0]),
                                         client_id="pipelined-admin")
    try:
        for group in groups:
            await _commit(conn, group, topic)
        D = OffsetDeleteRequest
        delete = conn.call(D(group_id=groups[0], topics=[D.OffsetDeleteRequestTopic(
            name=topic, partitions=[D.OffsetDeleteRequestPartition(partition_index=0)])]),
            api_key=ApiKey.OFFSET_DELETE)
        fetch = conn.call(OffsetFetchRequest(group_id=groups[0], topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0, 1])]),
            api_key=ApiKey.OFFSET_FETCH, version=7)
        drop = conn.call(DeleteGroupsRequest(groups_names=groups), api_key=ApiKey.DELETE_GROUPS)
        describe = conn.call(DescribeGroupsRequest(groups=[groups[1]]),
                             api_key=ApiKey.DESCRIBE_GROUPS)
        # gather starts each call in this order: the frames go out back to back
        return tuple(await asyncio.gather(delete, fetch, drop, describe))
    finally:
        await conn.close()


async def _two_groups_of_one_coordinator(port: int) -> list[str]:
    first = f"ga-group-{uuid.uuid4().hex[:8]}"
    where = await coordinator_port(port, first)
    while True:
        other = f"ga-group-{uuid.uuid4().hex[:8]}"
        if await coordinator_port(port, other) == where:
            return [first, other]


def test_a_fetch_or_describe_behind_a_deletion_sees_it(cluster_factory):
    cluster = cluster_factory()
    topic = f"ga-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 3)])[topic].result(30)
    port = cluster.brokers[0].port
    groups = asyncio.run(_two_groups_of_one_coordinator(port))
    deleted, fetched, dropped, described = asyncio.run(_pipeline(port, topic, groups))
    assert deleted.error_code == ErrorCode.NONE, deleted
    assert [(p.partition_index, p.error_code) for t in deleted.topics
            for p in t.partitions] == [(0, ErrorCode.NONE)]
    assert [(p.partition_index, p.committed_offset) for t in fetched.topics
            for p in t.partitions] == [(0, -1), (1, 5)]
    assert [(r.group_id, r.error_code) for r in dropped.results] == \
        [(g, ErrorCode.NONE) for g in groups]
    (g,) = described.groups
    assert (g.error_code, g.group_state) == (ErrorCode.GROUP_ID_NOT_FOUND, "Dead"), described


COMMITS = 30


async def _pipelined_commits(port: int, topic: str, group: str) -> tuple:
    conn = await KafkaConnection.connect("127.0.0.1", await coordinator_port(port, group),
                                         client_id="pipelined-consumer")
    C = OffsetCommitRequest
    try:
        commits = [conn.call(C(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                               group_instance_id=None, topics=[C.OffsetCommitRequestTopic(
                                   name=topic, partitions=[C.OffsetCommitRequestPartition(
                                       partition_index=0, committed_offset=i + 1,
                                       committed_metadata="")])]),
                             api_key=ApiKey.OFFSET_COMMIT, version=8)
                   for i in range(COMMITS)]
        fetch = conn.call(OffsetFetchRequest(group_id=group, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]),
            api_key=ApiKey.OFFSET_FETCH, version=7)
        # gather starts each call in this order: the frames go out back to back
        *committed, fetched = await asyncio.gather(*commits, fetch)
        # and once all is answered, what the group keeps
        again = await conn.call(OffsetFetchRequest(group_id=group, topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]),
            api_key=ApiKey.OFFSET_FETCH, version=7)
        return committed, fetched, again
    finally:
        await conn.close()


def test_a_consumers_pipelined_commits_land_oldest_first_and_a_fetch_behind_reads_the_last(
        cluster_factory):
    """librdkafka's async commits go out back to back on one connection; each
    commit is written to the group's offsets partition (replicated to 3
    brokers) in the order sent and applied in that order, and an OffsetFetch
    sent right behind them reads the last one, as in Kafka (where each is
    read only once the one before was answered)."""
    cluster = cluster_factory()
    topic = f"gc-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    group = f"gc-group-{uuid.uuid4().hex[:8]}"
    committed, fetched, again = asyncio.run(
        _pipelined_commits(cluster.brokers[0].port, topic, group))
    assert [c.topics[0].partitions[0].error_code for c in committed] == [ErrorCode.NONE] * COMMITS
    for answer in (fetched, again):
        assert answer.error_code == ErrorCode.NONE, answer
        assert answer.topics[0].partitions[0].committed_offset == COMMITS
