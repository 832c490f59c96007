"""A follower's fetch session with one leader: full first, then only what changed;
any break sends the next request full again."""
from __future__ import annotations

from samsa.broker.replication.fetch_session import FetchState, FollowerFetchSession
from samsa.protocol.errors import ErrorCode


def _at(offset: int) -> FetchState:
    return (offset, 0, 5, 1 << 20)


def _opened(sid: int = 77) -> FollowerFetchSession[str]:
    s: FollowerFetchSession[str] = FollowerFetchSession()
    first = s.build({"a": _at(0), "b": _at(0)})
    assert first.full and first.session_id == 0 and first.send == ["a", "b"]
    assert s.answered(0, sid)
    return s


def test_after_a_full_request_only_changed_added_and_dropped_partitions_are_named():
    s = _opened()
    nxt = s.build({"a": _at(0), "b": _at(0)})
    assert (nxt.session_id, nxt.epoch, nxt.send, nxt.forget) == (77, 1, [], [])
    assert s.answered(0, 77)
    nxt = s.build({"b": _at(3), "c": _at(0)})
    assert (nxt.epoch, nxt.send, nxt.forget) == (2, ["b", "c"], ["a"])
    assert s.answered(0, 77)
    assert (s.full_requests, s.incremental_requests) == (1, 2)


def test_a_leader_without_room_answers_no_session_and_every_request_stays_full():
    s: FollowerFetchSession[str] = FollowerFetchSession()
    s.build({"a": _at(0)})
    assert s.answered(0, 0)
    nxt = s.build({"a": _at(1)})
    assert nxt.full and nxt.session_id == 0 and nxt.send == ["a"]


def test_an_unknown_session_starts_a_new_one_from_scratch():
    s = _opened()
    s.build({"a": _at(1)})
    assert not s.answered(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)
    nxt = s.build({"a": _at(1), "b": _at(0)})
    assert nxt.full and nxt.session_id == 0 and nxt.send == ["a", "b"]


def test_a_wrong_epoch_or_a_lost_answer_closes_the_session_with_a_full_request():
    for breaks in ("epoch", "lost"):
        s = _opened()
        s.build({"a": _at(1)})
        if breaks == "epoch":
            assert not s.answered(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0)
        else:
            s.failed()
        nxt = s.build({"a": _at(1)})
        # the old id with epoch 0: the leader drops that session and opens another
        assert nxt.full and nxt.session_id == 77 and nxt.send == ["a"]
        assert s.answered(0, 78)
        assert s.build({"a": _at(1)}).session_id == 78


def test_a_session_the_leader_closed_is_asked_for_again():
    s = _opened()
    s.build({})
    assert s.answered(0, 0)  # every partition forgotten: the leader closed it
    assert s.build({"a": _at(0)}).full


def test_a_request_dropped_to_add_partitions_keeps_the_session_going_incrementally():
    s = _opened()
    s.build({"a": _at(1), "b": _at(0)})  # epoch 1, long-polled by the leader
    s.interrupted()  # dropped to name "c" at once
    nxt = s.build({"a": _at(1), "b": _at(0), "c": _at(0)})
    assert (nxt.session_id, nxt.epoch, nxt.send, nxt.forget) == (77, 2, ["c"], [])
    # a full request dropped so opened no session: the next is full again
    s = FollowerFetchSession[str]()
    s.build({"a": _at(0)})
    s.interrupted()
    assert s.build({"a": _at(0), "c": _at(0)}).full


def test_only_a_leader_that_refused_a_session_makes_full_requests_long_poll():
    # (the fetcher answers a full request at once unless ``refused``: a
    # leader keeping no session would otherwise be asked in a busy loop)
    s: FollowerFetchSession[str] = FollowerFetchSession()
    assert s.build({"a": _at(0)}).full and not s.refused
    s.answered(0, 0)
    assert s.build({"a": _at(0)}).full and s.refused
    s.answered(0, 9)
    assert not s.refused and not s.build({"a": _at(0)}).full
