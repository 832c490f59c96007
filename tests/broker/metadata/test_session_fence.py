"""When a broker cut off from ZooKeeper stops acting as leader
(broker/metadata/zookeeper/session_fence.py), in virtual time."""
from __future__ import annotations

from samsa.broker.metadata.zookeeper.session_fence import (PRESUMED_EXPIRED_AFTER, Decision,
                                                           SessionFence)

SESSION_MS = 3000
GRACE_MS = SESSION_MS * PRESUMED_EXPIRED_AFTER


def test_a_short_disconnection_fences_nothing():
    f = SessionFence(SESSION_MS)
    assert f.disconnected(1000) is Decision.NONE
    assert f.deadline_ms() == 1000 + GRACE_MS
    assert f.tick(1000 + GRACE_MS - 1) is Decision.NONE
    assert f.connected(1500) is Decision.NONE
    assert f.deadline_ms() is None
    assert f.tick(10_000) is Decision.NONE


def test_disconnected_past_the_session_fences_once_then_resumes_on_reconnection():
    f = SessionFence(SESSION_MS)
    f.disconnected(1000)
    assert f.tick(1000 + GRACE_MS) is Decision.FENCE
    assert f.deadline_ms() is None           # nothing more to time
    assert f.tick(60_000) is Decision.NONE   # once
    assert f.expired(61_000) is Decision.NONE  # kazoo's LOST afterwards: already fenced
    assert f.connected(62_000) is Decision.RESUME
    assert not f.fenced


def test_an_expiry_told_by_zookeeper_fences_at_once():
    f = SessionFence(SESSION_MS)
    assert f.expired(5000) is Decision.FENCE
    assert f.connected(5001) is Decision.RESUME


def test_a_second_disconnection_report_does_not_move_the_deadline():
    f = SessionFence(SESSION_MS)
    f.disconnected(1000)
    assert f.disconnected(1000 + GRACE_MS / 2) is Decision.NONE
    assert f.deadline_ms() == 1000 + GRACE_MS
    assert f.tick(1000 + GRACE_MS) is Decision.FENCE


def test_a_new_disconnection_after_resuming_starts_a_new_deadline():
    f = SessionFence(SESSION_MS)
    f.disconnected(0)
    f.tick(GRACE_MS)
    f.connected(5000)
    assert f.disconnected(6000) is Decision.NONE
    assert f.deadline_ms() == 6000 + GRACE_MS
