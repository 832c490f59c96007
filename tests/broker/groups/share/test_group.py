"""Share-group membership in virtual time: join, share one partition, fencing,
leaving, and a silent member dropped after its session timeout."""
import uuid

from samsa.broker.groups.share.group import ShareGroup
from samsa.broker.groups.share.session import ShareSessions
from samsa.protocol.errors import ErrorCode

T = uuid.uuid4()
TOPICS = {"t": (T, 1)}
T0 = 5_000


def join(g: ShareGroup, member: str, now: int = T0):
    return g.heartbeat(member, 0, None, ["t"], "c", "/h", TOPICS, now)


def test_every_member_shares_the_one_partition():
    g = ShareGroup("g", session_timeout_ms=45_000)
    a, b = join(g, "a"), join(g, "b")
    assert a.assignment == {T: [0]} and b.assignment == {T: [0]}
    assert b.epoch == g.group_epoch
    again = g.heartbeat("a", a.epoch, None, None, "c", "/h", TOPICS, T0 + 1)
    assert again.error == ErrorCode.NONE and again.assignment is None


def test_partitions_spread_when_there_are_enough():
    g = ShareGroup("g", 45_000)
    topics = {"t": (T, 4)}
    g.heartbeat("a", 0, None, ["t"], "c", "/h", topics, T0)
    b = g.heartbeat("b", 0, None, ["t"], "c", "/h", topics, T0)
    a = g.heartbeat("a", g.members["a"].epoch, None, None, "c", "/h", topics, T0)
    assert sorted(a.assignment[T] + b.assignment[T]) == [0, 1, 2, 3]
    assert not set(a.assignment[T]) & set(b.assignment[T])


def test_errors_as_kafka_answers_them():
    g = ShareGroup("g", 45_000)
    assert g.heartbeat("x", 3, None, None, "c", "/h", TOPICS, T0).error \
        == ErrorCode.UNKNOWN_MEMBER_ID
    a = join(g, "a")
    assert g.heartbeat("a", a.epoch + 7, None, None, "c", "/h", TOPICS, T0).error \
        == ErrorCode.FENCED_MEMBER_EPOCH
    assert g.heartbeat("", 0, None, ["t"], "c", "/h", TOPICS, T0).error \
        == ErrorCode.INVALID_REQUEST
    assert g.heartbeat("a", -1, None, None, "c", "/h", TOPICS, T0).epoch == -1
    assert g.state == "Empty"


def test_a_silent_member_is_dropped_after_its_session_timeout():
    g = ShareGroup("g", session_timeout_ms=1_000)
    join(g, "a")
    join(g, "b", T0 + 900)
    assert g.expire(T0 + 1_000) == ["a"]
    assert list(g.members) == ["b"]


def test_share_session_epochs():
    s = ShareSessions()
    assert s.check("g", "m", 1, fetch=True)[0] == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert s.check("g", "m", 0, fetch=False)[0] == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    err, session = s.check("g", "m", 0, fetch=True)
    assert err == ErrorCode.NONE and session is not None
    s.advance(session, [(T, 0)], [], opened=True)
    assert s.check("g", "m", 2, fetch=True)[0] == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    err, same = s.check("g", "m", 1, fetch=True)
    assert same is session
    s.advance(session, [], [(T, 0)], opened=False)
    assert session.epoch == 2 and not session.partitions
    assert s.close("g", "m") is session
