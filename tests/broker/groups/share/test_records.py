"""A share group's own records in __consumer_offsets (ShareGroupMemberMetadata
10, ShareGroupMetadata 11, ShareGroupTargetAssignmentMetadata 12,
ShareGroupTargetAssignmentMember 13, ShareGroupCurrentMemberAssignment 14,
ShareGroupStatePartitionMetadata 15): Kafka's bytes, read back by the offsets
log's replay, and the share service written from and loaded with them -- the
group surviving a restart with its members until their sessions run out,
then with its share-partitions."""
from __future__ import annotations

import struct
import uuid

from samsa.broker.groups.coordinator import GroupCoordinator
from samsa.broker.groups.share import records
from samsa.broker.groups.share.config import ShareDefaults
from samsa.broker.groups.share.service import Bounds, ShareService
from samsa.broker.groups.store import ConsumerOffsetsLog, ShareGroupRecords
from samsa.protocol.errors import ErrorCode

TOPIC = uuid.UUID(int=7)


def test_the_records_are_kafkas_bytes():
    # key: int16 record type, int16-length group id (not flexible)
    assert records.key(11, "g1") == b"\x00\x0b\x00\x02g1"
    assert records.key(15, "g1") == b"\x00\x0f\x00\x02g1"
    # value: version 0, Epoch, MetadataHash, empty tag buffer
    assert records.metadata_value(5) == b"\x00\x00" + struct.pack(">iq", 5, 0) + b"\x00"
    value = records.state_partitions_value(
        {}, {TOPIC: ("t", frozenset({1, 0}))}, {uuid.UUID(int=9): "gone"}, {TOPIC: 1234})
    assert value == (b"\x00\x00"
                     + b"\x01"                                 # InitializingTopics: none
                     + b"\x02" + TOPIC.bytes + b"\x02t"        # one topic, "t"
                     + b"\x03" + struct.pack(">ii", 0, 1)      # partitions 0, 1
                     + struct.pack(">q", 1234) + b"\x00"       # CreateTimestamp (Kafka 4.1+)
                     + b"\x02" + uuid.UUID(int=9).bytes + b"\x05gone" + b"\x00"  # deleting
                     + b"\x00")


def test_the_member_records_are_kafkas_bytes():
    # member keys: type, group id, member id (int16-length strings)
    assert records.key(10, "g1", "m") == b"\x00\x0a\x00\x02g1\x00\x01m"
    assert records.decode_member_key(b"\x00\x0e\x00\x02g1\x00\x01m") == (14, "g1", "m")
    member = records.MemberImage("m", rack_id=None, client_id="cid", client_host="/h",
                                 subscribed=["a", "b"], epoch=7, previous_epoch=6,
                                 assigned={TOPIC: [0, 2]})
    # RackId (null: compact length 0), ClientId, ClientHost, SubscribedTopicNames
    assert records.member_metadata_value(member) == (
        b"\x00\x00" + b"\x00" + b"\x04cid" + b"\x03/h" + b"\x03\x02a\x02b" + b"\x00")
    assert records.target_metadata_value(7) == b"\x00\x00" + struct.pack(">i", 7) + b"\x00"
    topic_partitions = (b"\x02" + TOPIC.bytes + b"\x03" + struct.pack(">ii", 0, 2)
                        + b"\x00")  # [TopicId, [Partitions], tags]
    assert records.target_member_value({TOPIC: [2, 0]}) == (
        b"\x00\x00" + topic_partitions + b"\x00")
    # MemberEpoch, PreviousMemberEpoch, State (int8, 0 = stable), AssignedPartitions
    assert records.current_assignment_value(member) == (
        b"\x00\x00" + struct.pack(">iib", 7, 6, 0) + topic_partitions + b"\x00")


def test_encode_decode_round_trip():
    image = records.ShareGroupImage("g", 3, {TOPIC: ("t", frozenset({2}))},
                                    {TOPIC: ("t", frozenset({0, 1}))}, {}, {TOPIC: 99})
    assert records.decode("g", records.encode(image)) == image
    image.assignment_epoch = 3
    image.members = {"m": records.MemberImage("m", "rack", "c", "/h", ["t"], 3, 2,
                                              {TOPIC: [0, 1, 2]})}
    image.targets = {"m": {TOPIC: [0, 1, 2]}}
    encoded = records.encode(image)
    assert sorted(records.record_type(k) for k in encoded) == [10, 11, 12, 13, 14, 15]
    assert records.decode("g", encoded) == image


def _log(entries):
    return ConsumerOffsetsLog(lambda p, recs: None, lambda: iter(entries), num_partitions=1)


def test_the_replay_gathers_a_share_groups_records_and_a_tombstone_ends_it():
    image = records.ShareGroupImage("g", 2, {}, {TOPIC: ("t", frozenset({0}))}, {},
                                    {TOPIC: 5}, assignment_epoch=2,
                                    members={"m": records.MemberImage("m", epoch=2)},
                                    targets={"m": {}})
    written = list(records.encode(image).items())
    _, groups, _ = _log(written).replay()
    assert groups == {"g": ShareGroupRecords("g", dict(written))}
    assert records.decode("g", groups["g"].records) == image
    _, groups, _ = _log([*written, *((k, None) for k, _ in written)]).replay()
    assert groups == {}


def _service() -> ShareService:
    return ShareService(ShareDefaults(), lambda: 1_000_000, lambda t, p: Bounds(0, 100))


def test_a_group_is_written_as_it_changes_and_loaded_back_with_members_then_partitions():
    service = _service()
    service.heartbeat("g", "m", 0, None, ["t"], "c", "/h", {"t": (TOPIC, 2)})
    entries = service.group_records("g")
    stored = dict(entries)
    image = records.decode("g", stored)
    assert image.epoch == 1
    assert image.initializing == {TOPIC: ("t", frozenset({0, 1}))}  # assigned, no state known
    service.group_records_written("g", entries)
    assert service.group_records("g") == []  # nothing changed since
    service.mark_initialized("g", [("g", TOPIC, 0)])
    changed = service.group_records("g")
    assert [k for k, _ in changed] == [records.key(15, "g")]
    stored.update(changed)

    now = [2_000_000]
    restarted = ShareService(ShareDefaults(), lambda: now[0], lambda t, p: Bounds(0, 100))
    restarted.loaded([ShareGroupRecords("g", stored)])
    # its member, as it was, until its session (from the load on) runs out
    described = restarted.describe("g")
    assert described is not None
    assert (described.state, described.group_epoch) == ("Stable", 1)
    [m] = described.members
    assert (m.member_id, m.epoch, m.client_id, m.client_host, m.subscribed, m.assignment) == (
        "m", 1, "c", "/h", ["t"], {TOPIC: [0, 1]})
    now[0] += ShareDefaults().session_timeout_ms
    described = restarted.describe("g")
    assert described is not None
    assert (described.state, described.members) == ("Empty", [])
    # the member's records are tombstoned
    restarted.group_records_written("g", [(k, None) for k, _ in restarted.group_records("g")
                                          if records.record_type(k) in records.MEMBER_TYPES])
    assert restarted.group_ids() == ["g"]
    # a deletion covers every share-partition the records name
    assert restarted.deletable("g") == (ErrorCode.NONE, [("g", TOPIC, 0), ("g", TOPIC, 1)])
    # deleted: a tombstone for each record
    restarted.drop([("g", TOPIC, 0), ("g", TOPIC, 1)], "g")
    assert sorted(restarted.group_records("g")) == sorted(
        (k, None) for k in stored if records.record_type(k) not in records.MEMBER_TYPES)
    # another broker coordinates it now: it goes from here
    restarted.loaded([ShareGroupRecords("h", records.encode(records.ShareGroupImage("h", 1)))])
    restarted.unloaded(lambda gid: gid == "h")
    assert not restarted.exists("h")


async def test_the_group_coordinators_loads_hand_share_groups_over():
    entries = [*records.encode(records.ShareGroupImage("g", 1)).items()]
    coordinator = GroupCoordinator(_log(entries))
    await coordinator.start()  # before the share groups' runtime exists
    service = _service()
    coordinator.attach_share_groups(service)
    assert service.exists("g") and "g" not in coordinator.groups
    coordinator.unload_partition(0)
    assert not service.exists("g")
    coordinator.loading(0)
    await coordinator.load_partition(0)
    assert service.exists("g")


def test_a_member_restored_from_the_records_heartbeats_on_at_its_epoch():
    """After a restart the member goes on as before: its epoch accepted, its
    assignment unchanged (no new epoch), a new member joining rebalances."""
    service = _service()
    view = {"t": (TOPIC, 2)}
    service.heartbeat("g", "m", 0, None, ["t"], "c", "/h", view)
    stored = dict(service.group_records("g"))
    restarted = _service()
    restarted.loaded([ShareGroupRecords("g", stored)])
    answer, _ = restarted.heartbeat("g", "m", 1, None, None, "c", "/h", view)
    assert (answer.error, answer.epoch, answer.assignment) == (ErrorCode.NONE, 1, None)
    answer, _ = restarted.heartbeat("g", "n", 0, None, ["t"], "c", "/h", view)
    assert (answer.epoch, answer.assignment) == (2, {TOPIC: [1]})
    answer, _ = restarted.heartbeat("g", "m", 1, None, None, "c", "/h", view)
    assert (answer.epoch, answer.assignment) == (2, {TOPIC: [0]})
    # the records now say so: the new member's, and m's epochs moved on
    stored.update(restarted.group_records("g"))  # (what changed: m's type 10 did not)
    image = records.decode("g", stored)
    assert {mid: (m.epoch, m.previous_epoch, m.assigned) for mid, m in image.members.items()} == {
        "m": (2, 1, {TOPIC: [0]}), "n": (2, 0, {TOPIC: [1]})}
    assert (image.epoch, image.assignment_epoch) == (2, 2)


def test_a_restored_member_whose_session_ran_out_leaves_its_partitions_to_the_others():
    now = [1_000_000]
    service = ShareService(ShareDefaults(), lambda: now[0], lambda t, p: Bounds(0, 100))
    view = {"t": (TOPIC, 2)}
    service.heartbeat("g", "m", 0, None, ["t"], "c", "/h", view)
    service.heartbeat("g", "n", 0, None, ["t"], "c", "/h", view)
    answer, _ = service.heartbeat("g", "m", 1, None, None, "c", "/h", view)
    assert (answer.epoch, answer.assignment) == (2, {TOPIC: [0]})
    restarted = ShareService(ShareDefaults(), lambda: now[0], lambda t, p: Bounds(0, 100))
    restarted.loaded([ShareGroupRecords("g", dict(service.group_records("g")))])
    now[0] += ShareDefaults().session_timeout_ms // 2
    restarted.heartbeat("g", "m", 2, None, None, "c", "/h", view)  # n is not heard from
    now[0] += ShareDefaults().session_timeout_ms // 2
    answer, _ = restarted.heartbeat("g", "m", 2, None, None, "c", "/h", view)
    assert (answer.error, answer.epoch, answer.assignment) == (
        ErrorCode.NONE, 3, {TOPIC: [0, 1]})


def test_a_member_whose_session_ran_out_is_tombstoned_without_waiting_for_a_heartbeat():
    """The broker's sweep (expire_members, then the group's records written)
    removes a dead member's records as its session ends, as Kafka's session
    timer does: a restart then does not bring it back."""
    now = [1_000_000]
    service = ShareService(ShareDefaults(), lambda: now[0], lambda t, p: Bounds(0, 100))
    service.heartbeat("g", "m", 0, None, ["t"], "c", "/h", {"t": (TOPIC, 1)})
    service.group_records_written("g", service.group_records("g"))
    assert service.expire_members() == []
    now[0] += ShareDefaults().session_timeout_ms
    assert service.describe("g").members == []  # (a describe saw it go first)
    assert service.expire_members() == ["g"]
    assert service.expire_members() == []
    gone = service.group_records("g")
    assert sorted(records.record_type(k) for k, v in gone if v is None) == [10, 13, 14]
