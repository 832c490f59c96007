"""The fetch session cache (KIP-227): which requests open, use, close or are
refused a session, what an incremental answer lists, and which session makes
room for another. Time is a number the test passes."""
from __future__ import annotations

import sys
import threading
import time
import uuid

from samsa.broker import fetch_sessions
from samsa.broker.fetch_sessions import Answered, FetchSessionCache, Kind, Wanted, next_epoch
from samsa.protocol.errors import ErrorCode

NO_ID = uuid.UUID(int=0)
T0 = 1_000_000


def _w(partition: int, offset: int = 0, topic: str = "t") -> Wanted:
    return Wanted(topic, NO_ID, partition, offset, 1 << 20)


def _quiet(hw: int = 10) -> Answered:
    return Answered(0, hw, hw, 0)


def _open(cache: FetchSessionCache, *partitions: int, privileged: bool = False,
          now: int = T0) -> int:
    """A full fetch (epoch 0) of ``partitions``, all answered quiet: the session id."""
    ctx = cache.new_context(0, 0, [_w(p) for p in partitions], [], privileged=privileged,
                            uses_topic_ids=False, now_ms=now)
    assert ctx.kind is Kind.FULL
    session_id, answered = cache.finish(ctx, [_quiet() for _ in partitions], now)
    assert answered == list(range(len(partitions)))
    return session_id


def _incremental(cache: FetchSessionCache, session_id: int, epoch: int, wanted=(),
                 forgotten=(), now: int = T0):
    return cache.new_context(session_id, epoch, list(wanted), list(forgotten),
                             privileged=False, uses_topic_ids=False, now_ms=now)


def test_a_full_fetch_opens_a_session_and_the_next_epoch_reads_all_its_partitions():
    cache = FetchSessionCache()
    sid = _open(cache, 0, 1, 2)
    assert sid != 0 and len(cache) == 1
    ctx = _incremental(cache, sid, 1)
    assert ctx.kind is Kind.INCREMENTAL
    assert [w.partition for w in ctx.partitions] == [0, 1, 2]
    # nothing changed: nothing answered, the same session
    assert cache.finish(ctx, [_quiet(), _quiet(), _quiet()], T0) == (sid, [])


def test_an_incremental_answer_lists_records_errors_and_moved_offsets_only():
    cache = FetchSessionCache()
    sid = _open(cache, 0, 1, 2, 3, 4)
    ctx = _incremental(cache, sid, 1)
    outcomes = [_quiet(),
                Answered(0, 10, 10, 0, records=b"x"),
                Answered(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1, -1),
                _quiet(hw=11),
                Answered(0, 10, 10, 3)]  # log start moved
    assert cache.finish(ctx, outcomes, T0) == (sid, [1, 2, 3, 4])
    # the partition that had an error is told again once it recovers
    ctx = _incremental(cache, sid, 2)
    now = {0: _quiet(), 1: _quiet(), 2: _quiet(), 3: _quiet(11), 4: Answered(0, 10, 10, 3)}
    answered = cache.finish(ctx, [now[w.partition] for w in ctx.partitions], T0)[1]
    assert [ctx.partitions[i].partition for i in answered] == [2]


def test_partitions_with_records_go_to_the_end_of_the_fetch_order():
    cache = FetchSessionCache()
    sid = _open(cache, 0, 1, 2)
    ctx = _incremental(cache, sid, 1)
    cache.finish(ctx, [Answered(0, 10, 10, 0, b"x"), _quiet(), _quiet()], T0)
    assert [w.partition for w in _incremental(cache, sid, 2).partitions] == [1, 2, 0]


def test_an_incremental_request_adds_updates_and_forgets_partitions():
    cache = FetchSessionCache()
    sid = _open(cache, 0, 1)
    ctx = _incremental(cache, sid, 1, wanted=[_w(1, offset=7), _w(5)], forgotten=[("t", 0)])
    assert [(w.partition, w.fetch_offset) for w in ctx.partitions] == [(1, 7), (5, 0)]
    # a new partition is always answered the first time (nothing told yet)
    assert cache.finish(ctx, [_quiet(), _quiet()], T0) == (sid, [1])


def test_forgetting_a_partition_never_in_the_session_is_no_error():
    cache = FetchSessionCache()
    sid = _open(cache, 0)
    ctx = _incremental(cache, sid, 1, forgotten=[("t", 9), ("other", 0)])
    assert ctx.kind is Kind.INCREMENTAL and [w.partition for w in ctx.partitions] == [0]


def test_forgetting_every_partition_closes_the_session():
    cache = FetchSessionCache()
    sid = _open(cache, 0)
    ctx = _incremental(cache, sid, 1, forgotten=[("t", 0)])
    assert ctx.kind is Kind.SESSIONLESS and len(cache) == 0


def test_session_errors_have_kafkas_codes():
    cache = FetchSessionCache()
    sid = _open(cache, 0)
    assert _incremental(cache, sid + 1, 1).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert _incremental(cache, sid, 5).error == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    ctx = cache.new_context(sid, 1, [], [], privileged=False, uses_topic_ids=True, now_ms=T0)
    assert ctx.error == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    # none of these moved the session on: the right epoch still works
    assert _incremental(cache, sid, 1).kind is Kind.INCREMENTAL
    # an epoch used once is not accepted twice
    assert _incremental(cache, sid, 1).error == ErrorCode.INVALID_FETCH_SESSION_EPOCH


def test_epoch_minus_one_closes_the_session_and_reads_without_one():
    cache = FetchSessionCache()
    sid = _open(cache, 0)
    ctx = cache.new_context(sid, -1, [_w(3)], [], privileged=False, uses_topic_ids=False,
                            now_ms=T0)
    assert ctx.kind is Kind.SESSIONLESS and len(cache) == 0
    assert cache.finish(ctx, [_quiet()], T0) == (0, [0])


def test_a_full_fetch_naming_its_session_replaces_it():
    cache = FetchSessionCache()
    sid = _open(cache, 0)
    ctx = cache.new_context(sid, 0, [_w(1)], [], privileged=False, uses_topic_ids=False,
                            now_ms=T0)
    assert ctx.kind is Kind.FULL and cache.get(sid) is None
    new_id, _ = cache.finish(ctx, [_quiet()], T0)
    assert new_id not in (0, sid) and len(cache) == 1


def test_no_room_no_session_and_zero_slots_means_none_ever():
    cache = FetchSessionCache(max_sessions=0)
    assert _open(cache, 0) == 0
    cache = FetchSessionCache(max_sessions=1)
    assert _open(cache, 0) != 0
    assert _open(cache, 0, 1) == 0  # a consumer cannot evict a fresh consumer session


def test_a_session_unused_for_the_eviction_time_makes_room():
    cache = FetchSessionCache(max_sessions=1, eviction_ms=1000)
    old = _open(cache, 0, 1, 2)
    new = _open(cache, 0, now=T0 + 1001)
    assert new != 0 and cache.get(old) is None and cache.evictions == 1


def test_a_follower_evicts_a_consumer_but_not_another_fresh_follower():
    cache = FetchSessionCache(max_sessions=1, eviction_ms=1000)
    consumer = _open(cache, 0, 1, 2, 3)
    follower = _open(cache, 0, privileged=True, now=T0 + 10)
    assert follower != 0 and cache.get(consumer) is None
    assert _open(cache, 0, 1, 2, privileged=True, now=T0 + 20) == 0
    assert _open(cache, 0, 1, 2, now=T0 + 20) == 0


def test_among_old_sessions_the_smallest_goes_and_only_for_a_bigger_one():
    cache = FetchSessionCache(max_sessions=2, eviction_ms=1000)
    big = _open(cache, 0, 1, 2)
    small = _open(cache, 0)
    # both older than the eviction time, both used recently
    for sid in (big, small):
        ctx = _incremental(cache, sid, 1, now=T0 + 1500)
        cache.finish(ctx, [_quiet()] * len(ctx.partitions), T0 + 1500)
    assert _open(cache, 0, 1, now=T0 + 1600) != 0
    assert cache.get(small) is None and cache.get(big) is not None


def test_epochs_wrap_past_int32_to_one():
    assert next_epoch(0) == 1 and next_epoch(0x7FFFFFFF) == 1 and next_epoch(-1) == -1


def test_sessions_keyed_by_topic_id_tell_topics_apart_by_id():
    cache = FetchSessionCache()
    a, b = uuid.uuid4(), uuid.uuid4()
    ctx = cache.new_context(0, 0, [Wanted(None, a, 0, 0, 100), Wanted(None, b, 0, 0, 100)], [],
                            privileged=False, uses_topic_ids=True, now_ms=T0)
    sid, _ = cache.finish(ctx, [_quiet(), _quiet()], T0)
    ctx = cache.new_context(sid, 1, [], [(a, 0)], privileged=False, uses_topic_ids=True,
                            now_ms=T0)
    assert [w.topic_id for w in ctx.partitions] == [b]


def test_a_new_leader_epoch_or_a_fetch_offset_moved_back_is_answered_again():
    cache = FetchSessionCache()
    sid = _open(cache, 0, 1, 2)
    moved = [Wanted("t", NO_ID, 0, 0, 1 << 20, leader_epoch=3), _w(1, offset=5)]
    ctx = _incremental(cache, sid, 1, wanted=moved)
    assert cache.finish(ctx, [_quiet()] * 3, T0) == (sid, [0])  # the new epoch
    ctx = _incremental(cache, sid, 2, wanted=[_w(1, offset=2)])  # truncated back
    assert cache.finish(ctx, [_quiet()] * 3, T0) == (sid, [1])


def test_a_throttled_answer_opens_no_session_and_tells_nothing():
    """As Kafka's getThrottledResponse: a client quota sends the answer without
    its partitions, so a full fetch's new session is dropped (answered id 0)
    and an incremental one's news is told by the next answer instead."""
    cache = FetchSessionCache()
    sid = _open(cache, 0)
    assert cache.throttled(sid, True, [("t", NO_ID, 0)]) == 0
    assert len(cache) == 0
    sid = _open(cache, 0, 1)
    ctx = _incremental(cache, sid, 1)
    assert cache.finish(ctx, [_quiet(hw=12), _quiet()], T0) == (sid, [0])
    assert cache.throttled(sid, False, [("t", NO_ID, 0)]) == sid
    ctx = _incremental(cache, sid, 2)
    assert cache.finish(ctx, [_quiet(hw=12), _quiet()], T0) == (sid, [0])   # told again
    ctx = _incremental(cache, sid, 3)
    assert cache.finish(ctx, [_quiet(hw=12), _quiet()], T0) == (sid, [])
    assert cache.throttled(12345, True, []) == 0   # a session gone meanwhile


def test_an_answer_overtaken_by_a_later_request_of_its_session_tells_nothing():
    # A follower drops a long-polling Fetch to name partitions it just took up
    # and sends the next epoch at once: the dropped request's late answer is
    # INVALID_FETCH_SESSION_EPOCH, and its news go to the answer that is read.
    cache = FetchSessionCache()
    sid = _open(cache, 0, 1)
    dropped = _incremental(cache, sid, 1)
    later = _incremental(cache, sid, 2, wanted=[_w(2)])
    # (the session's id with the error, as Kafka's IncrementalFetchContext)
    assert cache.finish(dropped, [_quiet(hw=11), _quiet()], T0) == (sid, None)
    answered = cache.finish(later, [_quiet(hw=11), _quiet(), _quiet()], T0)
    assert answered == (sid, [0, 2])


def _on(cache: FetchSessionCache, peer: object, session_id: int, epoch: int,
        hws: list[int], wanted=()) -> tuple[int, list[int] | None]:
    """A follower's request on connection ``peer``, its partitions answered
    quiet at the high watermarks ``hws``: (session id, the ones answered)."""
    ctx = cache.new_context(session_id, epoch, list(wanted), [], privileged=True,
                            uses_topic_ids=False, now_ms=T0, peer=peer)
    return cache.finish(ctx, [_quiet(hw=hw) for hw in hws], T0, peer)


def test_what_an_answer_told_is_told_again_when_the_next_request_comes_on_another_connection():
    # A follower's long poll was answered (the high watermark moved to 11) as
    # the follower dropped that connection to add a partition: it never read
    # the answer, and its next request, on a new connection, names no change
    # of partition 0. The leader cannot know the answer was lost, so it tells
    # again what it told on the old connection; on the same connection (the
    # answer read, as requests there go one at a time) it does not.
    cache = FetchSessionCache()
    first, second = object(), object()
    sid, _ = _on(cache, first, 0, 0, [5, 5], wanted=[_w(0), _w(1)])
    assert _on(cache, first, sid, 1, [11, 5]) == (sid, [0])
    assert _on(cache, second, sid, 2, [11, 5, 0], wanted=[_w(2)]) == (sid, [0, 2])
    assert _on(cache, second, sid, 3, [11, 5, 0]) == (sid, [])


def test_a_full_answer_on_one_connection_is_told_again_on_the_next():
    cache = FetchSessionCache()
    first, second = object(), object()
    sid, _ = _on(cache, first, 0, 0, [5, 5], wanted=[_w(0), _w(1)])
    assert _on(cache, second, sid, 1, [5, 5]) == (sid, [0, 1])


def test_requests_counted_by_several_threads_at_once_are_all_counted():
    # The network threads share the cache. Each thread here is made to give
    # the others their turn between any two bytecodes of the cache's code (as
    # an interpreter without a GIL, or a switch at the wrong moment, does): a
    # count read by one thread and written back after another's is lost, and
    # the Fetch request metrics with it.
    cache = FetchSessionCache()
    sid = _open(cache, 0)
    threads, rounds = 3, 100
    module = fetch_sessions.__file__

    def switching(frame, event, arg):
        if frame.f_code.co_filename != module:
            return None
        frame.f_trace_opcodes = True

        def step(frame, event, arg):
            if event == "opcode":
                time.sleep(0)
            return step
        return step

    def fetch() -> None:
        sys.settrace(switching)
        try:
            for _ in range(rounds):
                cache.new_context(0, -1, [_w(0)], [], privileged=False, uses_topic_ids=False,
                                  now_ms=T0)
                cache.new_context(0, 0, [_w(0)], [], privileged=False, uses_topic_ids=False,
                                  now_ms=T0)
                _incremental(cache, sid + 1, 1)  # no such session
        finally:
            sys.settrace(None)
    running = [threading.Thread(target=fetch) for _ in range(threads)]
    for t in running:
        t.start()
    for t in running:
        t.join()
    n = threads * rounds
    assert cache.requests.by_kind() == {Kind.SESSIONLESS: n, Kind.FULL: n + 1,
                                        Kind.INCREMENTAL: 0, Kind.ERROR: n}


def test_a_follower_session_asks_settled_of_what_changed_and_of_every_one_once_a_second():
    """With ``changed``, a request asks ``settled`` only of the partitions it
    names, those the last answered request read, and those changed since
    what that request had looked through; of every partition again once
    ``look_at_every_one_ms`` has passed (what changes unjournalled, and the
    ISR's clock the ask counts)."""
    cache = FetchSessionCache()
    sid = _open(cache, *range(10), privileged=True)
    asked: list[int] = []
    unsettled: set[int] = set()
    journal: list[tuple[int, int]] = []   # (position, partition)

    def settled(entry) -> bool:
        asked.append(entry.wanted.partition)
        return entry.wanted.partition not in unsettled

    def changed(position: int):
        if position < 0:   # (before what the journal keeps)
            return None
        return {("t", p) for at, p in journal if at >= position}

    def request(epoch: int, now: int, wanted=(), looked_through: int = 0):
        asked.clear()
        ctx = cache.new_context(sid, epoch, list(wanted), [], privileged=True,
                                uses_topic_ids=False, now_ms=now, settled=settled,
                                changed=changed, look_at_every_one_ms=1000)
        ctx.looked_through = looked_through
        cache.finish(ctx, [_quiet() for _ in ctx.partitions], now)
        return sorted(asked), sorted(w.partition for w in ctx.partitions)

    assert request(1, T0) == (list(range(10)), [])   # the first: every one
    assert request(2, T0 + 10, looked_through=0) == ([], [])
    journal.append((0, 4))
    unsettled.add(4)
    assert request(3, T0 + 20, looked_through=1) == ([4], [4])   # journalled at 0
    unsettled.clear()
    # read last time: asked again (settled now); named: read, not asked
    assert request(4, T0 + 30, [_w(6, 5)], looked_through=1) == ([4], [6])
    assert request(5, T0 + 40, looked_through=1) == ([6], [])
    unsettled.add(8)   # moved without an entry in the journal: told a second later
    assert request(6, T0 + 999, looked_through=1) == ([], [])
    assert request(7, T0 + 1000, looked_through=1) == (list(range(10)), [8])
    assert request(8, T0 + 1001, looked_through=1) == ([8], [8])
    # looked through a position the journal no longer goes back to: every one
    assert request(9, T0 + 1002, looked_through=-1) == ([8], [8])
    assert request(10, T0 + 1003, looked_through=1) == (list(range(10)), [8])


def _follower_request(cache, sid, epoch, now, settled, changed, wanted=(), looked_through=0):
    ctx = cache.new_context(sid, epoch, list(wanted), [], privileged=True, uses_topic_ids=False,
                            now_ms=now, settled=settled, changed=changed,
                            look_at_every_one_ms=1000)
    ctx.looked_through = looked_through
    return ctx


def test_the_few_partitions_a_follower_fetch_looks_at_keep_the_fetch_order():
    """Those that had records go last, so when a response's max_bytes runs
    out the same partitions do not get the bytes every time."""
    cache = FetchSessionCache()
    sid = _open(cache, *range(40), privileged=True)
    behind = {0, 5, 10, 15, 20, 25, 30, 35}
    settled = lambda entry: entry.wanted.partition not in behind
    changed = lambda position: {("t", p) for p in behind}
    orders = []
    for epoch in range(1, 5):
        ctx = _follower_request(cache, sid, epoch, T0 + epoch, settled, changed)
        order = [w.partition for w in ctx.partitions]
        if epoch > 1:   # (the first incremental one looks at every partition)
            orders.append(order)
        # the first two read get records (max_bytes runs out after them)
        outcomes = [Answered(0, 10, 10, 0, b"x" if i < 2 else b"") for i in range(len(order))]
        cache.finish(ctx, outcomes, T0 + epoch)
    assert all(sorted(order) == sorted(behind) for order in orders)
    assert orders[1][:2] != orders[0][:2] and orders[2][:2] not in (orders[0][:2], orders[1][:2])
    assert orders[0][-2:] != orders[1][-2:]


def test_what_a_follower_fetch_never_finished_read_is_looked_at_by_the_next():
    """A request taken over by a later one (its fetcher dropped it to add
    partitions) is never finished; the partitions it named are not named
    again, and are looked at by the next request all the same."""
    cache = FetchSessionCache()
    sid = _open(cache, *range(10), privileged=True)
    settled = lambda entry: entry.high_watermark == 10   # told the high watermark
    changed = lambda position: set()
    ctx = _follower_request(cache, sid, 1, T0 + 1, settled, changed)
    cache.finish(ctx, [_quiet() for _ in ctx.partitions], T0 + 1)
    dropped = _follower_request(cache, sid, 2, T0 + 2, settled, changed, [_w(42)])
    assert [w.partition for w in dropped.partitions] == [42]   # never finished
    later = _follower_request(cache, sid, 3, T0 + 3, settled, changed)
    assert [w.partition for w in later.partitions] == [42]
