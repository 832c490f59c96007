"""Group handlers: each request reaches the coordinator with what the client sent, and
the coordinator's answer (or the broker's refusal) reaches the client."""
from __future__ import annotations

from samsa.broker.handlers.groups import (handle_heartbeat, handle_join_group, handle_offset_commit,
                                    handle_sync_group)
from samsa.broker.security.acl import AclOperation, ResourceType
from samsa.broker.security.principal import user
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (HeartbeatRequest, JoinGroupRequest, OffsetCommitRequest,
                               SyncGroupRequest)
from samsa.protocol.model import ApiKey

from .acl_setup import allow
from .fakes import FakeAcls, FakeGroups, FakeServices, context


def _groups(services: FakeServices) -> FakeGroups:
    assert services.groups is not None
    return services.groups


async def test_join_goes_to_the_coordinator_with_the_client_and_its_timeouts():
    services = FakeServices()
    ctx = context(services, ApiKey.JOIN_GROUP, 5)
    resp = await handle_join_group(ctx, JoinGroupRequest(
        group_id="g", session_timeout_ms=10_000, rebalance_timeout_ms=60_000, member_id="",
        protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"m")]))
    assert _groups(services).calls == [
        ("join_group", ("g", "", "test-client", "/10.0.0.7", 10_000, 60_000, True))]
    assert (resp.error_code, resp.generation_id, resp.protocol_name, resp.leader,
            resp.member_id) == (0, 1, "range", "m-1", "m-1")
    assert [(m.member_id, m.metadata) for m in resp.members] == [("m-1", b"meta")]


async def test_join_v0_uses_the_session_timeout_as_the_rebalance_timeout():
    services = FakeServices()
    ctx = context(services, ApiKey.JOIN_GROUP, 0)
    await handle_join_group(ctx, JoinGroupRequest(group_id="g", session_timeout_ms=7_000,
                                                  member_id="", protocol_type="consumer",
                                                  protocols=[]))
    [(_, args)] = _groups(services).calls
    assert args[4:7] == (7_000, 7_000, False)


async def test_sync_and_heartbeat_answer_the_coordinators_word():
    services = FakeServices()
    sync = await handle_sync_group(context(services, ApiKey.SYNC_GROUP, 5), SyncGroupRequest(
        group_id="g", generation_id=1, member_id="m-1", assignments=[
            SyncGroupRequest.SyncGroupRequestAssignment(member_id="m-1", assignment=b"a")]))
    assert (sync.error_code, sync.assignment, sync.protocol_name) == (0, b"assignment", "range")
    assert _groups(services).calls[-1] == ("sync_group", ("g", 1, "m-1", [("m-1", b"a")]))
    _groups(services).heartbeat_code = ErrorCode.REBALANCE_IN_PROGRESS
    beat = await handle_heartbeat(context(services, ApiKey.HEARTBEAT, 4), HeartbeatRequest(
        group_id="g", generation_id=1, member_id="m-1"))
    assert beat.error_code == ErrorCode.REBALANCE_IN_PROGRESS


def _commit(*targets: tuple[str, int]) -> OffsetCommitRequest:
    return OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=1, member_id="m-1",
                               topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                                   name=name, partitions=[
                                       OffsetCommitRequest.OffsetCommitRequestPartition(
                                           partition_index=p, committed_offset=42)])
                                   for name, p in targets])


async def test_a_commit_of_an_unknown_partition_is_answered_without_the_coordinator():
    services = FakeServices()
    services.topics.add("t", partitions=1)
    resp = await handle_offset_commit(context(services, ApiKey.OFFSET_COMMIT, 8),
                                      _commit(("t", 0), ("t", 3), ("nope", 0)))
    assert [(t.name, p.partition_index, p.error_code) for t in resp.topics
            for p in t.partitions] == [("t", 0, 0),
                                       ("t", 3, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                                       ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert _groups(services).calls == [("commit_offsets", ("g", 1, "m-1",
                                                           [("t", 0, 42, -1, None)]))]


async def test_a_commit_the_coordinator_refuses_carries_its_code():
    services = FakeServices()
    services.topics.add("t")
    _groups(services).commit_code = ErrorCode.ILLEGAL_GENERATION
    resp = await handle_offset_commit(context(services, ApiKey.OFFSET_COMMIT, 8), _commit(("t", 0)))
    assert resp.topics[0].partitions[0].error_code == ErrorCode.ILLEGAL_GENERATION


async def test_with_acls_a_group_the_client_may_not_read_is_refused_before_the_coordinator():
    services = FakeServices(acls=FakeAcls())
    services.topics.add("t")
    assert services.acls is not None
    allow(services.acls, "User:carol", AclOperation.READ, ResourceType.TOPIC, "t")
    ctx = context(services, ApiKey.JOIN_GROUP, 5, user("carol"))
    join = await handle_join_group(ctx, JoinGroupRequest(group_id="g", member_id="",
                                                         protocol_type="consumer", protocols=[]))
    assert join.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    commit = await handle_offset_commit(context(services, ApiKey.OFFSET_COMMIT, 8, user("carol")),
                                        _commit(("t", 0)))
    assert commit.topics[0].partitions[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert _groups(services).calls == []
