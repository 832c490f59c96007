"""AlterShareGroupOffsets, DeleteShareGroupOffsets and DeleteGroups of share
groups over a real share service: Kafka's answers per group, topic and
partition, and its authorization (READ/DELETE on the group, READ on topics)."""
from __future__ import annotations

import asyncio

from samsa.broker.groups.share.config import ShareDefaults
from samsa.broker.groups.share.service import Bounds, ShareService
from samsa.broker.handlers.groups import handle_delete_groups
from samsa.broker.handlers.share_admin import (handle_alter_share_group_offsets,
                                               handle_delete_share_group_offsets)
from samsa.broker.security.acl import AclOperation, ResourceType
from samsa.broker.security.principal import user
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (AlterShareGroupOffsetsRequest, DeleteGroupsRequest,
                                     DeleteShareGroupOffsetsRequest)
from samsa.protocol.model import ApiKey

from .acl_setup import allow
from .fakes import FakeAcls, FakeServices, context

A = AlterShareGroupOffsetsRequest
D = DeleteShareGroupOffsetsRequest


def _services(acls: FakeAcls | None = None) -> FakeServices:
    services = FakeServices(acls=acls)
    services.topics.create("t", 2, 1)
    services.topics.create("u", 1, 1)
    services.share_groups = ShareService(ShareDefaults(), lambda: 1000,
                                         lambda _t, _p: Bounds(0, 10))
    return services


def _alter(group: str, **topics: list[tuple[int, int]]) -> AlterShareGroupOffsetsRequest:
    return A(group_id=group, topics=[A.AlterShareGroupOffsetsRequestTopic(
        topic_name=t, partitions=[A.AlterShareGroupOffsetsRequestPartition(
            partition_index=p, start_offset=o) for p, o in parts])
        for t, parts in topics.items()])


def _delete(group: str, *topics: str) -> DeleteShareGroupOffsetsRequest:
    return D(group_id=group, topics=[D.DeleteShareGroupOffsetsRequestTopic(topic_name=t)
                                     for t in topics])


async def test_alter_answers_each_partition_and_delete_each_topic():
    services = _services()
    ctx = context(services, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0)
    resp = await handle_alter_share_group_offsets(ctx, _alter(
        "g", t=[(0, 4), (5, 1)], nosuch=[(0, 1)], u=[(0, -1)]))
    assert resp.error_code == 0
    assert {(r.topic_name, p.partition_index): p.error_code
            for r in resp.responses for p in r.partitions} == {
        ("t", 0): 0, ("t", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("nosuch", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ("u", 0): ErrorCode.INVALID_REQUEST}
    assert services.share_groups is not None
    assert services.share_groups.offsets("g") == {
        (services.topics.get("t").topic_id, 0): (4, 0)}
    ctx = context(services, ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0)
    resp = await handle_delete_share_group_offsets(ctx, _delete("g", "t", "nosuch"))
    assert (resp.error_code, [(r.topic_name, r.error_code) for r in resp.responses]) == (
        0, [("t", 0), ("nosuch", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])
    resp = await handle_delete_share_group_offsets(ctx, _delete("other", "t"))
    assert (resp.error_code, resp.responses) == (ErrorCode.GROUP_ID_NOT_FOUND, [])


async def test_delete_groups_deletes_share_groups_with_kafkas_answers():
    services = _services()
    await handle_alter_share_group_offsets(
        context(services, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0), _alter("g", t=[(0, 1)]))
    resp = await handle_delete_groups(context(services, ApiKey.DELETE_GROUPS, 2),
                                      DeleteGroupsRequest(groups_names=["g"]))
    assert [(r.group_id, r.error_code) for r in resp.results] == [("g", 0)]
    assert services.share_groups is not None and services.share_groups.offsets("g") is None


async def test_acls_group_read_for_alter_group_delete_for_delete_topic_read_for_both():
    acls = FakeAcls()
    services = _services(acls)
    carol = user("carol")
    alter_ctx = context(services, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0, carol)
    delete_ctx = context(services, ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0, carol)
    resp = await handle_alter_share_group_offsets(alter_ctx, _alter("g", t=[(0, 1)]))
    assert resp.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    assert resp.responses[0].partitions[0].error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    allow(acls, "User:carol", AclOperation.READ, ResourceType.GROUP, "g")
    resp = await handle_alter_share_group_offsets(alter_ctx, _alter("g", t=[(0, 1)]))
    assert (resp.error_code, resp.responses[0].partitions[0].error_code) == (
        0, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    allow(acls, "User:carol", AclOperation.READ, ResourceType.TOPIC, "t")
    resp = await handle_alter_share_group_offsets(alter_ctx, _alter("g", t=[(0, 1)]))
    assert resp.responses[0].partitions[0].error_code == 0
    resp = await handle_delete_share_group_offsets(delete_ctx, _delete("g", "t"))
    assert resp.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    allow(acls, "User:carol", AclOperation.DELETE, ResourceType.GROUP, "g")
    resp = await handle_delete_share_group_offsets(delete_ctx, _delete("g", "t"))
    assert (resp.error_code, resp.responses[0].error_code) == (0, 0)


class _Persistence:
    """The service's durable side (SharePersistence's admin calls): the share
    coordinator refuses partition 1 of "t" (it is loading); how many calls
    ran at once is counted."""

    def __init__(self) -> None:
        self.running = self.most = 0
        self.loaded: list = []

    async def _call(self, key) -> ErrorCode:
        self.running += 1
        self.most = max(self.most, self.running)
        for _ in range(3):
            await asyncio.sleep(0)
        self.running -= 1
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if key[2] == 1 else ErrorCode.NONE

    async def reset(self, key, start_offset: int) -> ErrorCode:
        return await self._call(key)

    async def delete(self, key) -> ErrorCode:
        return await self._call(key)

    async def ensure_loaded(self, keys) -> dict:
        self.loaded.extend(keys)
        return {}

    async def flush_group(self, group_id: str) -> bool:
        return self.group_written

    group_written = True


async def test_a_share_coordinator_failure_is_answered_for_its_partition_only():
    services = _services()
    assert services.share_groups is not None
    persistence = _Persistence()
    services.share_groups.persistence = persistence  # type: ignore[assignment]
    ctx = context(services, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0)
    resp = await handle_alter_share_group_offsets(ctx, _alter("g", t=[(0, 4), (1, 4)],
                                                              u=[(0, 2)]))
    # the partitions' resets ran together, each answered on its own; the
    # coordinator loading is the client's COORDINATOR_NOT_AVAILABLE
    assert persistence.most == 3
    assert resp.error_code == 0
    assert {(r.topic_name, p.partition_index): p.error_code
            for r in resp.responses for p in r.partitions} == {
        ("t", 0): 0, ("t", 1): ErrorCode.COORDINATOR_NOT_AVAILABLE, ("u", 0): 0}
    assert sorted(k[2] for k in persistence.loaded) == [0, 0]
    persistence.most = 0
    resp2 = await handle_delete_share_group_offsets(
        context(services, ApiKey.DELETE_SHARE_GROUP_OFFSETS, 0), _delete("g", "t", "u"))
    assert persistence.most == 3
    assert (resp2.error_code, [(r.topic_name, r.error_code) for r in resp2.responses]) == (
        0, [("t", ErrorCode.COORDINATOR_NOT_AVAILABLE), ("u", 0)])
    # DeleteGroups: the group stays while a share-partition's state is not gone
    resp3 = await handle_delete_groups(context(services, ApiKey.DELETE_GROUPS, 2),
                                       DeleteGroupsRequest(groups_names=["g"]))
    assert [(r.group_id, r.error_code) for r in resp3.results] == [
        ("g", ErrorCode.COORDINATOR_NOT_AVAILABLE)]
    assert services.share_groups.exists("g")


async def test_alter_with_no_valid_partition_is_answered_per_partition():
    # (a review found it raising UnboundLocalError on a durable broker)
    services = _services()
    assert services.share_groups is not None
    services.share_groups.persistence = _Persistence()  # type: ignore[assignment]
    resp = await handle_alter_share_group_offsets(
        context(services, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0), _alter("g", nosuch=[(0, 1)]))
    assert [(r.topic_name, [p.error_code for p in r.partitions]) for r in resp.responses] == [
        ("nosuch", [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION])]


async def test_a_deletion_whose_tombstones_were_not_written_is_not_done():
    services = _services()
    assert services.share_groups is not None
    await handle_alter_share_group_offsets(
        context(services, ApiKey.ALTER_SHARE_GROUP_OFFSETS, 0), _alter("g", t=[(0, 1)]))
    persistence = _Persistence()
    persistence.group_written = False  # __consumer_offsets refuses the write
    services.share_groups.persistence = persistence  # type: ignore[assignment]
    delete = DeleteGroupsRequest(groups_names=["g"])
    resp = await handle_delete_groups(context(services, ApiKey.DELETE_GROUPS, 2), delete)
    assert [(r.group_id, r.error_code) for r in resp.results] == [
        ("g", ErrorCode.COORDINATOR_NOT_AVAILABLE)]
