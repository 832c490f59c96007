"""The share-partition state machine in virtual time: acquisition, locks
running out, release, reject, archiving at the delivery-count limit, and the
start offset moving past what is done with."""
from samsa.broker.groups.share.partition import (Acquired, AckType, RecordState,
                                                 ShareLimits, SharePartition, StateBatch)
from samsa.protocol.errors import ErrorCode

T0 = 1_000_000
LIMITS = ShareLimits(lock_duration_ms=30_000, delivery_count_limit=3, max_in_flight=100)


def fresh(start: int = 0, limits: ShareLimits = LIMITS) -> SharePartition:
    return SharePartition(start, limits)


def test_two_members_never_hold_the_same_record():
    sp = fresh()
    a = sp.acquire("a", max_records=5, upper=10, now_ms=T0)
    b = sp.acquire("b", max_records=5, upper=10, now_ms=T0)
    assert a == [Acquired(0, 4, 1)]
    assert b == [Acquired(5, 9, 1)]
    assert sp.acquire("c", max_records=5, upper=10, now_ms=T0) == []


def test_a_lock_that_runs_out_makes_the_records_available_to_another_member():
    sp = fresh()
    sp.acquire("dead", 3, upper=3, now_ms=T0)
    assert sp.acquire("live", 3, upper=3, now_ms=T0 + 29_999) == []
    assert sp.next_expiry() == T0 + 30_000
    again = sp.acquire("live", 3, upper=3, now_ms=T0 + 30_000)
    assert again == [Acquired(0, 2, 2)]  # the second delivery
    # the dead member's late acknowledgement is refused
    assert sp.acknowledge("dead", 0, 2, [AckType.ACCEPT], T0 + 30_001) \
        == ErrorCode.INVALID_RECORD_STATE


def test_accept_moves_the_start_offset_past_what_is_done():
    sp = fresh(start=10)
    sp.acquire("a", 4, upper=14, now_ms=T0)
    assert sp.acknowledge("a", 11, 12, [AckType.ACCEPT], T0) == ErrorCode.NONE
    assert sp.start_offset == 10  # 10 is still held
    assert sp.acknowledge("a", 10, 10, [AckType.ACCEPT], T0) == ErrorCode.NONE
    assert sp.start_offset == 13
    assert sp.state_of(13) == (RecordState.ACQUIRED, 1)


def test_release_redelivers_and_reject_archives():
    sp = fresh()
    sp.acquire("a", 3, upper=3, now_ms=T0)
    assert sp.acknowledge("a", 0, 2, [AckType.RELEASE, AckType.REJECT, AckType.ACCEPT],
                          T0) == ErrorCode.NONE
    assert sp.state_of(0) == (RecordState.AVAILABLE, 1)
    assert sp.state_of(1) is not None and sp.state_of(1)[0] == RecordState.ARCHIVED
    assert sp.acquire("b", 10, upper=3, now_ms=T0) == [Acquired(0, 0, 2)]
    assert sp.acknowledge("b", 0, 0, [AckType.ACCEPT], T0) == ErrorCode.NONE
    assert sp.start_offset == 3


def test_a_poison_record_is_archived_at_the_delivery_count_limit():
    sp = fresh()
    now = T0
    for delivery in (1, 2, 3):
        assert sp.acquire("a", 1, upper=2, now_ms=now) == [Acquired(0, 0, delivery)]
        assert sp.acknowledge("a", 0, 0, [AckType.RELEASE], now) == ErrorCode.NONE
    # after the third delivery it is not offered again: the next record is
    assert sp.start_offset == 1
    assert sp.acquire("a", 1, upper=2, now_ms=now) == [Acquired(1, 1, 1)]


def test_lock_expiry_counts_toward_the_limit_too():
    sp = fresh(limits=ShareLimits(lock_duration_ms=100, delivery_count_limit=2))
    sp.acquire("a", 1, upper=1, now_ms=T0)
    sp.acquire("a", 1, upper=1, now_ms=T0 + 100)
    assert sp.expire(T0 + 200)
    assert sp.start_offset == 1 and sp.acquire("a", 1, upper=1, now_ms=T0 + 200) == []


def test_acknowledging_what_another_member_holds_fails_whole_batch():
    sp = fresh()
    sp.acquire("a", 2, upper=2, now_ms=T0)
    sp.acquire("b", 2, upper=4, now_ms=T0)
    assert sp.acknowledge("a", 1, 2, [AckType.ACCEPT], T0) == ErrorCode.INVALID_RECORD_STATE
    assert sp.state_of(1) == (RecordState.ACQUIRED, 1)
    assert sp.acknowledge("a", 0, 1, [1, 1, 1], T0) == ErrorCode.INVALID_REQUEST
    assert sp.acknowledge("a", 0, 1, [9], T0) == ErrorCode.INVALID_REQUEST
    assert sp.acknowledge("a", 0, 10**15, [1], T0) == ErrorCode.INVALID_RECORD_STATE


def test_a_member_whose_session_ends_gives_its_records_back_at_once():
    sp = fresh()
    sp.acquire("a", 3, upper=3, now_ms=T0)
    assert sp.release_member("a")
    assert sp.acquire("b", 3, upper=3, now_ms=T0 + 1) == [Acquired(0, 2, 2)]


def test_in_flight_window_is_bounded():
    sp = fresh(limits=ShareLimits(max_in_flight=4))
    assert sp.acquire("a", 10, upper=10, now_ms=T0) == [Acquired(0, 3, 1)]
    sp.acknowledge("a", 0, 1, [AckType.ACCEPT], T0)
    assert sp.acquire("a", 10, upper=10, now_ms=T0) == [Acquired(4, 5, 1)]


def test_log_start_moving_drops_what_is_gone():
    sp = fresh()
    sp.acquire("a", 2, upper=2, now_ms=T0)
    assert sp.log_start_moved(5)
    assert sp.start_offset == 5 and sp.first_acquirable(T0) == 5


def test_persisted_state_round_trips_and_redelivers_only_unacknowledged():
    sp = fresh()
    sp.acquire("a", 6, upper=6, now_ms=T0)
    sp.acknowledge("a", 0, 1, [AckType.ACCEPT], T0)
    sp.acknowledge("a", 3, 3, [AckType.ACCEPT], T0)
    sp.acknowledge("a", 4, 4, [AckType.REJECT], T0)
    batches = sp.state_batches()
    assert batches == [StateBatch(2, 2, 0, 1), StateBatch(3, 3, 2, 1), StateBatch(4, 4, 4, 1),
                       StateBatch(5, 5, 0, 1)]
    back = SharePartition(sp.start_offset, LIMITS, batches)  # a restart: locks are gone
    assert back.start_offset == 2
    got = back.acquire("b", 10, upper=8, now_ms=T0)
    assert got == [Acquired(2, 2, 2), Acquired(5, 5, 2), Acquired(6, 7, 1)]


def test_snapshot_records_round_trip_in_kafkas_layout():
    import uuid

    from samsa.broker.groups.share.state_log import (decode_key, decode_value, encode_key,
                                                     encode_value, replay)
    key = ("g", uuid.UUID(int=7), 3)
    batches = [StateBatch(5, 9, 2, 1), StateBatch(10, 10, 4, 5)]
    k, v = encode_key(key), encode_value(1, 5, batches)
    assert k[:2] == b"\x00\x00"  # record type 0: ShareSnapshot
    assert v[:2] == b"\x00\x00"  # value version 0
    assert decode_key(k) == key
    assert decode_value(v) == (1, 5, batches)
    older = encode_value(0, 0, [])
    other = ("g", uuid.UUID(int=7), 4)
    assert replay([(k, older), (k, v), (encode_key(other), older), (encode_key(other), None)]) \
        == {key: (5, batches)}
