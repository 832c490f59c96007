"""The leader's rules about followers (broker/replication/isr.py): when a
follower counts as caught up, where the high watermark is, who leaves and who
joins the ISR."""
from __future__ import annotations

from samsa.broker.replication.isr import (UNKNOWN_OFFSET, FollowerProgress, high_watermark,
                                    may_join_isr, out_of_sync)

LEADER = 0
LAG = 10_000


def test_a_follower_at_the_log_end_is_caught_up_now():
    f = FollowerProgress(last_caught_up_ms=0)
    f.fetched(100, leader_end=100, now_ms=5_000)
    assert f.last_caught_up_ms == 5_000 and f.log_end_offset == 100


def test_a_follower_that_reached_the_previous_fetch_end_was_caught_up_then():
    # Records keep arriving: the follower never equals the log end at the
    # moment it fetches, but each fetch reaches where the log ended at its
    # previous fetch, so it is in sync as of that previous fetch.
    f = FollowerProgress(last_caught_up_ms=0)
    f.fetched(90, leader_end=100, now_ms=1_000)
    f.fetched(100, leader_end=110, now_ms=2_000)
    assert f.last_caught_up_ms == 1_000
    f.fetched(110, leader_end=120, now_ms=3_000)
    assert f.last_caught_up_ms == 2_000


def test_a_follower_falling_behind_keeps_its_old_caught_up_time():
    f = FollowerProgress(last_caught_up_ms=0)
    f.fetched(100, leader_end=100, now_ms=1_000)
    f.fetched(100, leader_end=200, now_ms=2_000)   # reached the previous end: still fine
    f.fetched(150, leader_end=300, now_ms=3_000)   # did not reach 200
    assert f.last_caught_up_ms == 1_000


def test_high_watermark_is_the_smallest_log_end_in_the_isr():
    followers = {1: FollowerProgress(log_end_offset=80), 2: FollowerProgress(log_end_offset=95)}
    assert high_watermark(100, (0, 1, 2), LEADER, followers) == 80
    assert high_watermark(100, (0, 2), LEADER, followers) == 95  # 1 is out of the ISR
    assert high_watermark(100, (0,), LEADER, followers) == 100


def test_an_isr_member_not_heard_from_holds_the_high_watermark_back():
    followers = {1: FollowerProgress()}
    assert high_watermark(100, (0, 1), LEADER, followers) == UNKNOWN_OFFSET


def test_only_followers_lagging_longer_than_the_limit_leave_the_isr():
    followers = {
        1: FollowerProgress(log_end_offset=50, last_caught_up_ms=1_000),   # lagging 11 s
        2: FollowerProgress(log_end_offset=60, last_caught_up_ms=5_000),   # lagging 7 s
        3: FollowerProgress(log_end_offset=100, last_caught_up_ms=0),      # at the end
    }
    assert out_of_sync((0, 1, 2, 3), LEADER, 100, followers, 12_000, LAG) == [1]


def test_an_isr_member_without_progress_leaves():
    assert out_of_sync((0, 4), LEADER, 100, {}, 0, LAG) == [4]


def test_a_follower_joins_once_it_holds_the_high_watermark_and_this_epoch():
    caught_up = FollowerProgress(log_end_offset=100)
    assert may_join_isr(caught_up, high_watermark_=100, leader_epoch_start=90)
    assert not may_join_isr(FollowerProgress(log_end_offset=99), 100, 90)
    # at the high watermark but not past where this leader's epoch began: it may
    # still hold an older leader's records that this leader does not have
    assert not may_join_isr(FollowerProgress(log_end_offset=100), 100, 120)
    assert not may_join_isr(FollowerProgress(), 0, 0)
