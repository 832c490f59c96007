"""A follower's incremental Fetch reads only the partitions that moved.

The leader here is real below the handler: real logs, real LeaderReplicas, the
real append notifier and fetch session cache; only the partition layer's
lookup is a stand-in (every partition led here by broker 0). A follower
(broker 1) opens a session over every partition, catches up, and from then on
its fetches must look up and read only partitions appended to (or whose
offsets it has not been told), yet still be woken by an append to any of them
(and then look again only at those appended to) and still learn every high
watermark that moves."""
from __future__ import annotations

import asyncio

import pytest

from samsa.broker.append_notifier import AppendNotifier
from samsa.broker.handlers.fetch import handle_fetch
from samsa.broker.partitions import LeaderLookup
from samsa.broker.replication.leader import LeaderReplica
from samsa.config.topic import TopicConfig
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import FetchRequest, FetchResponse
from samsa.protocol.model import ApiKey
from samsa.storage.log import AppendOrigin, Log
from tests.storage.helpers import batch_of

from .fakes import FakePartitions, FakeServices, context

LEADER, FOLLOWER, OTHER = 0, 1, 2  # OTHER: a second follower, moved by hand
PARTITIONS = 40


class _Seen(LeaderLookup):
    """A lookup that notes which partitions a settled check (or anything else)
    read its replica of, in ``_Seen.by`` when set."""
    by: list[int] | None = None

    @property
    def replica(self) -> LeaderReplica | None:  # type: ignore[override]
        replica = super().replica
        if _Seen.by is not None and replica is not None:
            _Seen.by.append(replica.partition)
        return replica


class _Led(FakePartitions):
    """Every partition of "t" led here at epoch 1 by a real LeaderReplica, but
    those ``moved_away`` (the metadata names another leader now); counts the
    lookups a follower's fetches make."""

    def __init__(self, services: FakeServices, replicas: list[LeaderReplica]) -> None:
        super().__init__(services.topics)
        self.replicas = replicas
        self.looked_up: list[int] = []
        self.moved_away: set[int] = set()
        # the ISRs followers' fetches would have written, when a test takes one out
        self.joins: list[tuple[int, tuple[int, ...]]] | None = None

    def replica_log(self, topic: str, partition: int, current_leader_epoch: int,
                    replica_id: int) -> LeaderLookup:
        self.looked_up.append(partition)
        if partition in self.moved_away:
            return LeaderLookup(ErrorCode.NOT_LEADER_OR_FOLLOWER, leader_epoch=2)
        replica = self.replicas[partition]
        return _Seen(ErrorCode.NONE, replica.log, 1, replica=replica)

    def follower_fetched(self, found: LeaderLookup, replica_id: int, fetch_offset: int,
                         log_start_offset: int = -1) -> None:
        join = found.found_replica.follower_fetched(replica_id, fetch_offset, log_start_offset)
        if self.joins is None:
            assert join is None  # the follower is in the ISR throughout
        elif join is not None:
            self.joins.append((found.found_replica.partition, join))

    def still_leads(self, replica: LeaderReplica) -> bool:
        return replica.partition not in self.moved_away


@pytest.fixture
def led(tmp_path):
    notifier = AppendNotifier()
    logs = [Log.open(str(tmp_path / f"t-{p}"), TopicConfig()) for p in range(PARTITIONS)]
    services = FakeServices()
    services.topics.add("t", partitions=PARTITIONS)
    everyone = (LEADER, FOLLOWER, OTHER)
    replicas = [LeaderReplica(lg, LEADER, 1, everyone, everyone, 0, notifier.notify)
                for lg in logs]
    for replica in replicas:
        replica.follower_fetched(OTHER, 0)
    services.partitions = _Led(services, replicas)
    services.notifier = notifier
    try:
        yield services
    finally:
        for lg in logs:
            lg.close()


class _Follower:
    """Broker 1's side: one session, each partition fetched from its log end."""

    def __init__(self, services: FakeServices, version: int = 12) -> None:
        self.services = services
        self.version = version  # 13 on: topics by id, and the session keyed so
        self.ctx = context(services, ApiKey.FETCH, version)  # one connection for every fetch
        self.session_id, self.epoch = 0, 0
        self.ends = [0] * PARTITIONS
        self.named: set[int] = set(range(PARTITIONS))  # what the next request names
        self.high_watermarks: dict[int, int] = {}

    async def fetch(self, max_wait_ms: int = 0) -> dict[int, FetchResponse.PartitionData]:
        request = FetchRequest(
            replica_id=FOLLOWER, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
            session_id=self.session_id, session_epoch=self.epoch, forgotten_topics_data=[],
            topics=[FetchRequest.FetchTopic(
                topic="t" if self.version < 13 else "",
                topic_id=self.services.topics.by_name["t"].topic_id, partitions=[
                FetchRequest.FetchPartition(partition=p, fetch_offset=self.ends[p],
                                            partition_max_bytes=1 << 20, current_leader_epoch=1)
                for p in sorted(self.named)])] if self.named else [])
        resp = await handle_fetch(self.ctx, request)
        assert resp is not None and resp.error_code == 0 and resp.session_id != 0
        self.session_id, self.epoch = resp.session_id, self.epoch + 1
        self.named = set()
        answered = {p.partition_index: p for t in resp.responses for p in t.partitions}
        for p, data in answered.items():
            if data.error_code:
                continue
            self.high_watermarks[p] = data.high_watermark
            if data.records:
                self.ends[p] = _led(self.services).replicas[p].log.log_end_offset
                self.named.add(p)  # its fetch offset moved: named next time
        return answered


def _led(services: FakeServices) -> _Led:
    assert isinstance(services.partitions, _Led)
    return services.partitions


def _append(services: FakeServices, partition: int, records: int = 2) -> None:
    _led(services).replicas[partition].append(batch_of(records), AppendOrigin.CLIENT)


def _other_follower_catches_up(services: FakeServices, partition: int) -> None:
    replica = _led(services).replicas[partition]
    replica.follower_fetched(OTHER, replica.log.log_end_offset)


async def _until_waiting(notifier: AppendNotifier) -> None:
    """Until a fetch waits as a follower (a cancelled wait is forgotten a loop pass later)."""
    for _ in range(100_000):
        if any(not fut.done() for waits in notifier._followers.values() for _, fut, _ in waits):
            return
        await asyncio.sleep(0)
    raise AssertionError("no fetch waits as a follower")


async def test_a_caught_up_follower_fetch_looks_up_only_what_moved(led):
    partitions = _led(led)
    follower = _Follower(led)
    await follower.fetch()  # full: opens the session
    assert len(partitions.looked_up) == PARTITIONS
    partitions.looked_up.clear()
    assert await follower.fetch() == {}
    assert partitions.looked_up == []

    _append(led, 7)
    _append(led, 23)
    answered = await follower.fetch()
    assert sorted(answered) == [7, 23] and sorted(partitions.looked_up) == [7, 23]
    assert all(answered[p].records for p in (7, 23))
    # the followers reach the new ends: the high watermark moves, and it is told;
    # then nothing moves and nothing is looked up
    for p in (7, 23):
        _other_follower_catches_up(led, p)
    partitions.looked_up.clear()
    answered = await follower.fetch()
    assert sorted(partitions.looked_up) == [7, 23]
    assert follower.high_watermarks[7] == follower.high_watermarks[23] == 2
    partitions.looked_up.clear()
    await follower.fetch()
    partitions.looked_up.clear()
    assert await follower.fetch() == {} and partitions.looked_up == []


async def test_a_long_poll_that_left_every_partition_out_wakes_for_an_append(led):
    follower = _Follower(led)
    await follower.fetch()
    # every partition settled: the next fetch reads none and waits as the follower
    polling = asyncio.ensure_future(follower.fetch(max_wait_ms=60_000))
    await _until_waiting(led.notifier)
    _append(led, 31, records=3)
    answered = await asyncio.wait_for(polling, 30)  # (else it would wait out its 60 s)
    assert list(answered) == [31] and answered[31].records


@pytest.mark.parametrize("version", [12, 13])
async def test_a_woken_long_poll_looks_again_only_at_what_was_appended_to(led, monkeypatch,
                                                                          version):
    follower = _Follower(led, version)
    await follower.fetch()
    seen: list[int] = []
    monkeypatch.setattr(_Seen, "by", seen)
    polling = asyncio.ensure_future(follower.fetch(max_wait_ms=60_000))
    await _until_waiting(led.notifier)
    assert sorted(set(seen)) == list(range(PARTITIONS))  # the request's own look at each
    seen.clear()
    _append(led, 4)
    _append(led, 17)
    answered = await asyncio.wait_for(polling, 30)
    assert sorted(answered) == [4, 17]
    # woken: only the partitions appended to were looked at again, not all 40
    assert sorted(set(seen)) == [4, 17]


async def test_a_wake_past_what_the_journal_keeps_looks_at_every_partition(led, monkeypatch):
    from samsa.broker import append_notifier
    monkeypatch.setattr(append_notifier, "JOURNAL_KEPT", 4)
    follower = _Follower(led)
    await follower.fetch()
    polling = asyncio.ensure_future(follower.fetch(max_wait_ms=60_000))
    await _until_waiting(led.notifier)
    # more appends than the journal keeps before the woken fetch runs (on
    # this loop, after this coroutine's next await)
    for p in range(10):
        _append(led, p)
    answered = await asyncio.wait_for(polling, 30)
    assert sorted(answered) == list(range(10))


def test_a_fetch_that_looked_before_the_journal_kept_looks_at_everything(monkeypatch):
    from samsa.broker import append_notifier
    monkeypatch.setattr(append_notifier, "JOURNAL_KEPT", 8)
    notifier = AppendNotifier()
    mark = notifier.position()
    for p in range(5):
        notifier.notify("t", p, followers=(1,))
    notifier.notify("t", 9)  # no followers: nothing for a follower's fetch to look at
    touched, mark = notifier.changes_since(mark)
    assert touched == {("t", p) for p in range(5)} and mark == 5
    for p in range(5, 15):
        notifier.notify("t", p, followers=(1,))
    touched, _ = notifier.changes_since(mark)
    assert touched is None  # dropped: the caller looks at its whole session


async def test_a_high_watermark_that_moves_while_the_follower_waits_is_told_when_its_wait_ends(led):
    follower = _Follower(led)
    await follower.fetch()
    _append(led, 9)
    await follower.fetch()  # the records
    await follower.fetch()  # named at its new end: settled, told high watermark 0
    assert follower.high_watermarks[9] == 0
    # the other follower moves the high watermark (no append: nothing wakes the wait)
    polling = asyncio.ensure_future(follower.fetch(max_wait_ms=100))
    await _until_waiting(led.notifier)
    _other_follower_catches_up(led, 9)
    answered = await asyncio.wait_for(polling, 30)
    assert list(answered) == [9] and answered[9].high_watermark == 2


async def test_a_partition_whose_leadership_moved_away_is_answered_its_error(led):
    follower = _Follower(led)
    await follower.fetch()
    _led(led).moved_away.add(12)
    answered = await follower.fetch()
    assert list(answered) == [12]
    assert answered[12].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_a_follower_left_out_longer_than_the_lag_limit_stays_in_sync_while_it_fetches(led):
    follower = _Follower(led)
    await follower.fetch()
    replica = _led(led).replicas[5]
    # partition 5 was last read by a fetch a minute ago
    progress = replica._followers[FOLLOWER]
    progress.last_caught_up_ms -= 60_000
    progress.last_fetch_ms -= 60_000
    await follower.fetch()  # leaves it out: the follower has all of it
    _append(led, 5)
    # so it counts as caught up until this append, with 30 s to fetch it
    assert replica.lagging_isr(30_000) is None
    _other_follower_catches_up(led, 5)
    await follower.fetch()  # the records
    await follower.fetch()  # named at the new end
    # a follower that stopped fetching is not kept in: no fetch for a minute, then an append
    progress.last_caught_up_ms -= 60_000
    progress.last_fetch_ms -= 60_000
    _append(led, 5)
    _other_follower_catches_up(led, 5)
    assert replica.lagging_isr(30_000) == (LEADER, OTHER)


@pytest.fixture
def no_look_at_every_one(monkeypatch):
    """Every fetch looks at what changed alone: the look at every partition
    (once a second) never comes within a test, however slow the machine."""
    from samsa.broker.handlers import fetch
    monkeypatch.setattr(fetch, "LOOK_AT_EVERY_ONE_MS", 1 << 40)


@pytest.mark.parametrize("version", [12, 13])
async def test_a_follower_fetch_looks_only_at_what_changed_since_its_last(
        led, monkeypatch, no_look_at_every_one, version):
    """Not every partition of the session on every fetch: those named, those
    the last fetch read, and those journalled as changed since (an append, a
    high watermark moved by the other follower)."""
    follower = _Follower(led, version)
    await follower.fetch()  # full: opens the session
    await follower.fetch()  # the first incremental one looks at every partition
    seen: list[int] = []
    monkeypatch.setattr(_Seen, "by", seen)
    assert await follower.fetch() == {}
    assert seen == []
    _append(led, 7)
    answered = await follower.fetch()
    assert list(answered) == [7] and answered[7].records and set(seen) == {7}
    for _ in range(2):   # named at its new end; then read last time: looked at
        seen.clear()
        assert await follower.fetch() == {} and set(seen) == {7}
    seen.clear()
    assert await follower.fetch() == {} and seen == []   # settled last time, unchanged
    # the other follower catches up: the high watermark moves without an append
    _other_follower_catches_up(led, 7)
    answered = await follower.fetch()
    assert list(answered) == [7] and answered[7].high_watermark == 2
    assert set(seen) == {7}


async def test_a_leadership_given_up_is_answered_at_the_next_fetch(led, no_look_at_every_one):
    follower = _Follower(led)
    await follower.fetch()
    await follower.fetch()
    _led(led).moved_away.add(12)
    _led(led).replicas[12].resign()   # what the replica manager does when it moves
    answered = await follower.fetch()
    assert list(answered) == [12]
    assert answered[12].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_an_isr_change_is_looked_at_by_the_next_fetch(led, no_look_at_every_one):
    """A follower taken out of the ISR (it lagged, or a controlled shutdown)
    that has the whole log again is read at its next fetch, which counts it
    caught up (and has it join the ISR again), not a second later."""
    follower = _Follower(led)
    await follower.fetch()
    await follower.fetch()
    replica = _led(led).replicas[3]
    replica.isr_written((LEADER, OTHER), 1)   # the follower is out
    led_here = _led(led)
    led_here.looked_up.clear()
    led_here.joins = []
    await follower.fetch()
    assert led_here.looked_up == [3] and led_here.joins == [(3, (LEADER, FOLLOWER, OTHER))]
