"""The share service's admin events (AlterShareGroupOffsets, DeleteShareGroupOffsets,
DeleteGroups) with Kafka's answers, on a service without durable state (the
durable path, through the share coordinator, is the handlers' and is tested
with real clients in tests/integration/test_share_group_admin.py)."""
from __future__ import annotations

import uuid

from samsa.broker.groups.share.config import ShareDefaults
from samsa.broker.groups.share.service import Bounds, ShareService
from samsa.protocol.errors import ErrorCode

TOPIC = uuid.UUID(int=7)
OTHER = uuid.UUID(int=8)


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


class Writes:
    """The service's StateWriter: the last state written per share-partition."""
    def __init__(self) -> None:
        self.last: dict = {}

    def write(self, key, start_offset, batches) -> None:
        self.last[key] = (start_offset, list(batches))


def _service(records, loaded=None, configs=None) -> tuple[ShareService, Clock]:
    clock = Clock()
    return ShareService(ShareDefaults(), clock, lambda t, p: Bounds(0, 100),
                        (lambda g: (configs or {}).get(g, {})), records, loaded), clock


def _join(service: ShareService, group: str = "g", member: str = "m") -> None:
    answer, _ = service.heartbeat(group, member, 0, None, ["t"], "c", "/h",
                                  {"t": (TOPIC, 2), "u": (OTHER, 1)})
    assert answer.error == ErrorCode.NONE


def test_offsets_are_altered_only_in_an_empty_group_and_written():
    records = Writes()
    service, _ = _service(records)
    _join(service)
    assert service.alter_offsets("g", {(TOPIC, 0): 40}) == ErrorCode.NON_EMPTY_GROUP
    service.heartbeat("g", "m", -1, None, None, "c", "/h", {"t": (TOPIC, 2)})
    assert service.alter_offsets("g", {(TOPIC, 0): 40}) == ErrorCode.NONE
    assert service.offsets("g")[(TOPIC, 0)] == (40, 0)
    assert records.last[("g", TOPIC, 0)] == (40, [])


def test_an_unknown_group_is_created_by_altering_its_offsets():
    records = Writes()
    service, _ = _service(records)
    assert service.offsets("new") is None
    assert service.alter_offsets("new", {(TOPIC, 1): 5}) == ErrorCode.NONE
    assert service.offsets("new") == {(TOPIC, 1): (5, 0)}
    assert service.describe("new").state == "Empty"


def test_what_may_be_deleted_and_when():
    records = Writes()
    service, _ = _service(records)
    assert service.deletable("nope") == (ErrorCode.GROUP_ID_NOT_FOUND, [])
    service.alter_offsets("g", {(TOPIC, 0): 1, (TOPIC, 1): 2, (OTHER, 0): 3})
    _join(service)
    assert service.deletable("g", [TOPIC]) == (ErrorCode.NON_EMPTY_GROUP, [])
    service.heartbeat("g", "m", -1, None, None, "c", "/h", {"t": (TOPIC, 2)})
    code, keys = service.deletable("g", [TOPIC])
    assert (code, keys) == (ErrorCode.NONE, [("g", TOPIC, 0), ("g", TOPIC, 1)])
    service.drop(keys)
    assert service.offsets("g") == {(OTHER, 0): (3, 0)}
    code, keys = service.deletable("g")
    service.drop(keys, "g")
    assert service.offsets("g") is None and service.describe("g") is None


def test_a_group_whose_members_timed_out_is_empty():
    records = Writes()
    service, clock = _service(records)
    _join(service)
    assert service.non_empty("g")
    clock.ms += ShareDefaults().session_timeout_ms
    assert not service.non_empty("g")
    assert service.deletable("g")[0] == ErrorCode.NONE


def test_a_changed_lock_duration_applies_to_the_locks_taken_after_it():
    records = Writes()
    configs: dict = {"g": {"share.auto.offset.reset": "earliest"}}
    service, clock = _service(records, configs=configs)
    _join(service)
    key = ("g", TOPIC, 0)
    [first] = service.acquire(key, "m", 1, 0, 100)
    configs["g"] = {**configs["g"], "share.record.lock.duration.ms": "15000"}
    [second] = service.acquire(key, "m", 1, 0, 100)
    clock.ms += 15_000
    # the second lock (15 s) ran out, the first (the default 30 s) did not
    assert service.fetch_position(key) == second.first_offset
    assert first.first_offset != second.first_offset


def test_by_duration_starts_at_the_first_record_that_young():
    records = Writes()
    clock = Clock()
    seen: list[int] = []

    def bounds(topic_id, p):
        return Bounds(0, 100, lambda ts: (seen.append(ts), 60)[1])
    service = ShareService(ShareDefaults(), clock, bounds,
                           lambda g: {"share.auto.offset.reset": "by_duration:PT1M"},
                           records)
    _join(service)
    assert service.offsets("g")[(TOPIC, 0)] == (60, 0)
    assert seen[0] == clock.ms - 60_000


def test_read_committed_archives_the_aborted_offsets_it_acquired():
    records = Writes()
    service, _ = _service(records, configs={"g": {"share.auto.offset.reset": "earliest"}})
    _join(service)
    key = ("g", TOPIC, 0)
    got = service.acquire(key, "m", 100, 0, 10)
    kept = service.archive_aborted(key, "m", got, [(3, 5)])
    assert [(a.first_offset, a.last_offset) for a in kept] == [(0, 2), (6, 9)]
    # archived: never offered again, and written as such (state 4)
    assert service.fetch_position(key) == 10
    _start, batches = records.last[key]
    assert (3, 5, 4) in {(b.first_offset, b.last_offset, b.state) for b in batches}


def test_read_committed_archives_each_aborted_run_in_one_acknowledgement():
    # 2000 aborted offsets in two runs: two REJECTs over the in-flight window,
    # not one per offset (each acknowledge walks the window: quadratic)
    records = Writes()
    service, _ = _service(records, configs={"g": {"share.auto.offset.reset": "earliest"}})
    _join(service)
    key = ("g", TOPIC, 0)
    service.acquire(key, "m", 1, 0, 1)  # the share-partition exists from here
    sp = service.partitions[key]
    calls: list[tuple[int, int]] = []
    real = sp.acknowledge

    def counted(member, first, last, types, now_ms):
        calls.append((first, last))
        return real(member, first, last, types, now_ms)
    sp.acknowledge = counted  # type: ignore[method-assign]
    got = service.acquire(key, "m", 5000, 0, 2000)
    assert (got[0].first_offset, got[-1].last_offset) == (1, 1999)
    # the second aborted run reaches past what was acquired
    kept = service.archive_aborted(key, "m", got, [(1500, 2499), (10, 1008)])
    assert sorted(calls) == [(10, 1008), (1500, 1999)]
    assert [(a.first_offset, a.last_offset) for a in kept] == [(1, 9), (1009, 1499)]
