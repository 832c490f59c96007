"""A group member's commit takes effect before the LeaveGroup (or JoinGroup)
it sent after it on the same connection, as in Kafka, which reads one request
of a connection at a time.

A consumer closing with an asynchronous commit still unanswered sends its
LeaveGroup right behind it; rejoining after a rebalance, its JoinGroup. A
commit that must wait its turn (behind any request that waits its whole
turn: broker/request_order.py) was
overtaken by the membership request, which takes effect at once: the member
had left, and the commit was refused UNKNOWN_MEMBER_ID and lost, so the next
consumer of the group read those records again. Here a CreateTopics (handled
on a worker thread) holds the commit's turn, deterministically: the three
frames go out back to back and are read together."""
from __future__ import annotations

import asyncio
import uuid

from samsa.client.aio import KafkaConnection
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (CreateTopicsRequest, JoinGroupRequest, LeaveGroupRequest,
                                     OffsetCommitRequest, OffsetFetchRequest, SyncGroupRequest)
from samsa.protocol.model import ApiKey

COMMITTED = 42


async def _member(conn: KafkaConnection, group: str) -> tuple[str, int]:
    """Join ``group`` as its only member (JoinGroup v5: MEMBER_ID_REQUIRED first)
    and sync: (member id, generation)."""
    J = JoinGroupRequest
    join = J(group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000, member_id="",
             group_instance_id=None, protocol_type="consumer",
             protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"")])
    joined = await conn.call(join, api_key=ApiKey.JOIN_GROUP, version=5)
    if joined.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        join.member_id = joined.member_id
        joined = await conn.call(join, api_key=ApiKey.JOIN_GROUP, version=5)
    assert joined.error_code == ErrorCode.NONE, joined
    S = SyncGroupRequest
    synced = await conn.call(S(group_id=group, generation_id=joined.generation_id,
                               member_id=joined.member_id, group_instance_id=None,
                               assignments=[S.SyncGroupRequestAssignment(
                                   member_id=joined.member_id, assignment=b"")]),
                             api_key=ApiKey.SYNC_GROUP, version=3)
    assert synced.error_code == ErrorCode.NONE, synced
    return joined.member_id, joined.generation_id


async def _commit_then_leave(port: int, group: str, topic: str, slow_topic: str) -> tuple:
    conn = await KafkaConnection.connect("127.0.0.1", port, client_id="closing-consumer")
    try:
        created = await conn.call(CreateTopicsRequest(topics=[
            CreateTopicsRequest.CreatableTopic(name=topic, num_partitions=1, replication_factor=1,
                                               assignments=[], configs=[])],
            timeout_ms=30000, validate_only=False), api_key=ApiKey.CREATE_TOPICS)
        assert created.topics[0].error_code == ErrorCode.NONE, created
        member, generation = await _member(conn, group)
        # a request that waits its whole turn, on a worker thread
        slow = conn.call(CreateTopicsRequest(topics=[
            CreateTopicsRequest.CreatableTopic(name=slow_topic, num_partitions=200,
                                               replication_factor=1, assignments=[],
                                               configs=[])],
            timeout_ms=30000, validate_only=False), api_key=ApiKey.CREATE_TOPICS)
        C = OffsetCommitRequest
        commit = conn.call(C(group_id=group, generation_id_or_member_epoch=generation,
                             member_id=member, group_instance_id=None, topics=[
                                 C.OffsetCommitRequestTopic(name=topic, partitions=[
                                     C.OffsetCommitRequestPartition(
                                         partition_index=0, committed_offset=COMMITTED,
                                         committed_leader_epoch=-1,
                                         committed_metadata="")])]),
                           api_key=ApiKey.OFFSET_COMMIT, version=8)
        L = LeaveGroupRequest
        leave = conn.call(L(group_id=group, members=[L.MemberIdentity(member_id=member)]),
                          api_key=ApiKey.LEAVE_GROUP, version=4)
        # gather starts each call in this order: the frames go out back to back
        answers = await asyncio.gather(slow, commit, leave)
        R = OffsetFetchRequest
        fetched = await conn.call(R(groups=[R.OffsetFetchRequestGroup(
            group_id=group, topics=[R.OffsetFetchRequestTopics(name=topic,
                                                                partition_indexes=[0])])],
            require_stable=False), api_key=ApiKey.OFFSET_FETCH, version=8)
        return (*answers, fetched)
    finally:
        await conn.close()


def test_a_commit_takes_effect_before_the_leave_sent_behind_it(module_broker):
    suffix = uuid.uuid4().hex[:8]
    slow, committed, left, fetched = asyncio.run(_commit_then_leave(
        module_broker.port, f"member-order-{suffix}", f"member-order-{suffix}",
        f"member-order-slow-{suffix}"))
    assert slow.topics[0].error_code == ErrorCode.NONE, slow
    assert [p.error_code for t in committed.topics for p in t.partitions] == [ErrorCode.NONE], \
        committed
    assert left.error_code == ErrorCode.NONE, left
    assert [m.error_code for m in left.members] == [ErrorCode.NONE], left
    (topic,) = fetched.groups[0].topics
    assert [(p.partition_index, p.committed_offset) for p in topic.partitions] == \
        [(0, COMMITTED)], fetched
