"""Share-group handlers over a real share service (a state machine, no I/O):
what the client sent reaches the group, and Kafka's error codes come back."""
from __future__ import annotations

import dataclasses
import uuid

from samsa.broker.groups.locator import CoordinatorAnswer
from samsa.broker.groups.share.config import ShareDefaults
from samsa.broker.groups.share.service import Bounds, ShareService
from samsa.broker.handlers.share import (handle_share_acknowledge, handle_share_fetch,
                                         handle_share_group_describe,
                                         handle_share_group_heartbeat, share_groups_listed)
from samsa.broker.handlers.services import CoordinatorAnswerLike
from samsa.broker.handlers.share_coordination import coordination_error
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (ShareAcknowledgeRequest, ShareFetchRequest,
                                     ShareGroupDescribeRequest, ShareGroupHeartbeatRequest)
from samsa.protocol.model import ApiKey

from .fakes import NODE, FakeLocator, FakeServices, context


def _services() -> FakeServices:
    services = FakeServices()
    services.topics.create("t", 1, 1)
    services.share_groups = ShareService(ShareDefaults(heartbeat_interval_ms=777), lambda: 1000,
                                         lambda _t, _p: Bounds(0, 0))
    return services


async def _join(services: FakeServices, member: str = "m1"):
    return await handle_share_group_heartbeat(
        context(services, ApiKey.SHARE_GROUP_HEARTBEAT, 1), ShareGroupHeartbeatRequest(
            group_id="g", member_id=member, member_epoch=0, rack_id=None,
            subscribed_topic_names=["t"]))


async def test_a_joining_member_gets_the_partition_and_the_interval():
    services = _services()
    resp = await _join(services)
    topic = services.topics.get("t")
    assert topic is not None
    assert (resp.error_code, resp.member_id, resp.member_epoch, resp.heartbeat_interval_ms) == (
        0, "m1", 1, 777)
    assert resp.assignment is not None
    assert [(tp.topic_id, tp.partitions) for tp in resp.assignment.topic_partitions] == [
        (topic.topic_id, [0])]
    desc = await handle_share_group_describe(
        context(services, ApiKey.SHARE_GROUP_DESCRIBE, 1),
        ShareGroupDescribeRequest(group_ids=["g", "nope"], include_authorized_operations=False))
    g, missing = desc.groups
    assert (g.group_state, [m.member_id for m in g.members], g.assignor_name) == (
        "Stable", ["m1"], "simple")
    assert g.members[0].assignment.topic_partitions[0].topic_name == "t"
    assert missing.error_code == ErrorCode.GROUP_ID_NOT_FOUND


async def test_heartbeat_errors():
    services = _services()
    resp = await handle_share_group_heartbeat(
        context(services, ApiKey.SHARE_GROUP_HEARTBEAT, 1), ShareGroupHeartbeatRequest(
            group_id="g", member_id="x", member_epoch=5, rack_id=None,
            subscribed_topic_names=None))
    assert resp.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    resp = await handle_share_group_heartbeat(
        context(services, ApiKey.SHARE_GROUP_HEARTBEAT, 1), ShareGroupHeartbeatRequest(
            group_id="", member_id="x", member_epoch=0, rack_id=None,
            subscribed_topic_names=["t"]))
    assert resp.error_code == ErrorCode.INVALID_REQUEST


async def test_share_session_epochs_are_checked():
    services = _services()
    await _join(services)

    def fetch(epoch: int, member: str = "m1") -> ShareFetchRequest:
        return ShareFetchRequest(group_id="g", member_id=member, share_session_epoch=epoch,
                                 max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, max_records=10,
                                 batch_size=10, topics=[], forgotten_topics_data=[])
    ctx = context(services, ApiKey.SHARE_FETCH, 1)
    assert (await handle_share_fetch(ctx, fetch(3))).error_code \
        == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert (await handle_share_fetch(ctx, fetch(0, "stranger"))).error_code \
        == ErrorCode.UNKNOWN_MEMBER_ID
    assert (await handle_share_fetch(ctx, fetch(0))).error_code == ErrorCode.NONE
    assert (await handle_share_fetch(ctx, fetch(2))).error_code \
        == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert (await handle_share_fetch(ctx, fetch(1))).error_code == ErrorCode.NONE
    ack = await handle_share_acknowledge(
        context(services, ApiKey.SHARE_ACKNOWLEDGE, 1), ShareAcknowledgeRequest(
            group_id="g", member_id="m1", share_session_epoch=0, topics=[]))
    assert ack.error_code == ErrorCode.INVALID_SHARE_SESSION_EPOCH


class _ElsewhereLocator(FakeLocator):
    """Group "elsewhere" is coordinated by broker 2 (this one is broker 1)."""

    def locate(self, key: str) -> CoordinatorAnswerLike:
        if key != "elsewhere":
            return super().locate(key)
        return CoordinatorAnswer(ErrorCode.NONE, dataclasses.replace(NODE, node_id=2))


async def test_a_group_known_only_by_a_share_partition_led_here_is_not_listed_or_counted():
    services = _services()
    services.coordinators = _ElsewhereLocator()
    await _join(services)
    topic = services.topics.get("t")
    service = services.share_groups
    assert topic is not None and service is not None
    # this broker leads t-0, so it serves "elsewhere"'s share-partition there
    service.acquire(("elsewhere", topic.topic_id, 0), "m9", 1, 0, 1)
    assert set(service.group_ids()) == {"g", "elsewhere"}
    ctx = context(services, ApiKey.LIST_GROUPS, 5)
    assert [(g.group_id, g.state) for g in share_groups_listed(ctx, None, None)] == [
        ("g", "Stable")]
    assert service.group_states(lambda g: g != "elsewhere") == ["Stable"]
    resp = await handle_share_group_describe(
        context(services, ApiKey.SHARE_GROUP_DESCRIBE, 1),
        ShareGroupDescribeRequest(group_ids=["elsewhere"], include_authorized_operations=False))
    assert resp.groups[0].error_code == ErrorCode.NOT_COORDINATOR


def test_coordination_error_is_none_only_on_the_groups_coordinator():
    locator = _ElsewhereLocator()
    assert coordination_error(locator, NODE.node_id, "g") == ErrorCode.NONE
    assert coordination_error(locator, NODE.node_id, "elsewhere") == ErrorCode.NOT_COORDINATOR
    assert coordination_error(locator, 2, "elsewhere") == ErrorCode.NONE


class _Region:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read_bytes(self) -> bytes:
        return self.data


class _Log:
    """Three batches of ten records (offsets 0-29), read whole from offset 0."""

    log_start_offset = 0
    high_watermark = last_stable_offset = 30

    def __init__(self) -> None:
        from samsa.protocol.records import build_batch
        self.batches = [build_batch([(None, b"v", [], 0)] * 10, base_offset=b)
                        for b in (0, 10, 20)]

    def read(self, offset, max_bytes, min_one_batch=True, max_offset=None):
        return type("Read", (), {"regions": [_Region(b"".join(self.batches))]})()

    def aborted_transactions(self, offset, regions):
        return []


def test_a_fetch_sends_the_batches_up_to_the_last_record_acquired_only():
    """The member keeps only the records it acquired: the batches past the
    last of them are not sent (a fetch of a few records from a log of many)."""
    from samsa.broker.handlers.share import _acquire_all
    services = _services()
    service = services.share_groups
    assert service is not None
    topic = uuid.UUID(int=1)
    log = _Log()
    lookup = type("Lookup", (), {"found_log": log})()
    got = _acquire_all(service, "g", "m1", {(topic, 0): ("t", lookup)}, 12, 1 << 20)
    data, acquired = got[(topic, 0)]
    assert acquired == [(0, 11, 1)]                    # 12 asked
    assert data == log.batches[0] + log.batches[1]     # not the third
    data, acquired = _acquire_all(service, "g", "m1", {(topic, 0): ("t", lookup)}, 3,
                                  1 << 20)[(topic, 0)]
    assert acquired == [(12, 14, 1)]


async def test_a_share_group_whose_offsets_partition_is_loading_answers_load_in_progress():
    """Between a broker taking over the group's __consumer_offsets partition
    and reading it, the share group is not served (as Kafka, and as the
    classic and consumer groups here): a heartbeat then would start the group
    afresh and write its share-partitions over the stored ones."""
    from samsa.broker.groups import GroupCoordinator
    from tests.broker.groups.test_groups import MemoryLog, make_config

    coordinator = GroupCoordinator(MemoryLog().store(), make_config())
    await coordinator.start()
    services = _services()
    services.share_groups = ShareService(ShareDefaults(), lambda: 1000,
                                         lambda _t, _p: Bounds(0, 0),
                                         loading=coordinator.group_loading)
    p = coordinator.store.partition_for("g")
    coordinator.loading(p)  # leadership taken, the load still to run

    async def describe_code() -> int:
        resp = await handle_share_group_describe(
            context(services, ApiKey.SHARE_GROUP_DESCRIBE, 1),
            ShareGroupDescribeRequest(group_ids=["g"], include_authorized_operations=False))
        return resp.groups[0].error_code

    assert (await _join(services)).error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert await describe_code() == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert services.share_groups.describe("g") is None  # nothing started meanwhile
    await coordinator.load_partition(p)
    assert (await _join(services)).error_code == ErrorCode.NONE
    assert await describe_code() == ErrorCode.NONE
    await coordinator.shutdown()
