"""A share group's own records in __consumer_offsets (ShareGroupMetadata 11,
ShareGroupStatePartitionMetadata 15): Kafka's bytes, read back by the offsets
log's replay, and the share service written from and loaded with them -- the
group, with no members, surviving a restart."""
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


def test_encode_decode_round_trip():
    image = records.ShareGroupImage("g", 3, {TOPIC: ("t", frozenset({2}))},
                                    {TOPIC: ("t", frozenset({0, 1}))}, {}, {TOPIC: 99})
    assert records.decode("g", records.encode(image)) == image


def _log(entries):
    return ConsumerOffsetsLog(lambda p, recs: None, lambda: iter(entries), num_partitions=1)


def test_the_replay_gathers_a_share_groups_records_and_a_tombstone_ends_it():
    image = records.ShareGroupImage("g", 2, {}, {TOPIC: ("t", frozenset({0}))}, {})
    written = list(records.encode(image).items())
    _, groups, _ = _log(written).replay()
    assert groups == {"g": ShareGroupRecords("g", dict(written))}
    _, groups, _ = _log([*written, *((k, None) for k, _ in written)]).replay()
    assert groups == {}


def _service() -> ShareService:
    return ShareService(ShareDefaults(), lambda: 1_000_000, lambda t, p: Bounds(0, 100))


def test_a_group_is_written_as_it_changes_and_loaded_back_empty_with_its_partitions():
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

    restarted = _service()
    restarted.loaded([ShareGroupRecords("g", stored)])
    described = restarted.describe("g")
    assert described is not None
    assert (described.state, described.group_epoch, described.members) == ("Empty", 1, [])
    assert restarted.group_ids() == ["g"]
    # a deletion covers every share-partition the records name
    assert restarted.deletable("g") == (ErrorCode.NONE, [("g", TOPIC, 0), ("g", TOPIC, 1)])
    # deleted: a tombstone for each record
    restarted.drop([("g", TOPIC, 0), ("g", TOPIC, 1)], "g")
    assert sorted(restarted.group_records("g")) == sorted(
        (k, None) for k in stored)
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
