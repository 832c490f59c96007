"""The classic group state machine on its own, in virtual time.

No event loop, no store, no coordinator: each test feeds the machine
requests and fired timers with the time as a number, and reads what it
answers (the request's answer, the waiting requests it answers, the timers
it sets, the records it writes). `Driver` plays the runtime's part in the
least way: timers are due times in a dict, fired in due order when the test
advances the time; a record write succeeds at once unless the test holds it.
"""
from __future__ import annotations

from samsa.broker.groups.classic import ClassicGroupMachine, GroupState
from samsa.broker.groups.coordinator import GroupCoordinatorConfig
from samsa.broker.groups.effects import CancelTimer, Respond, SetTimer, WriteRecord
from samsa.protocol.errors import ErrorCode as E

SESSION = 10_000
REBALANCE = 30_000
NONE = int(E.NONE)


class Driver:
    def __init__(self, **config):
        base = {"group_min_session_timeout_ms": 10, "group_initial_rebalance_delay_ms": 0}
        base.update(config)
        self.machine = ClassicGroupMachine(GroupCoordinatorConfig(**base))
        self.group = self.machine.new_group("g")
        self.now = 1_000_000
        self.timers: dict = {}  # key -> (due ms, payload)
        self.answered: list[tuple[str, str, object]] = []  # (member id, "join"/"sync", result)
        self.records: list = []
        self.hold_writes = False
        self.held: list = []  # AwaitedWrite not yet done

    def feed(self, fx):
        for op in fx.ops:
            if isinstance(op, SetTimer):
                self.timers[op.key] = (self.now + op.delay_ms, op.payload)
            elif isinstance(op, CancelTimer):
                self.timers.pop(op.key, None)
            elif isinstance(op, Respond):
                self.answered.append((op.member_id, op.kind, op.result))
            elif isinstance(op, WriteRecord):
                self.records.append(op.record)
        if fx.write is not None:
            self.records.append(fx.write.record)
            if self.hold_writes:
                self.held.append(fx.write)
            else:
                self.feed(fx.write.then(NONE, self.now))
        return fx.answer

    def release(self, error=NONE):
        write = self.held.pop(0)
        self.feed(write.then(error, self.now))

    def advance(self, ms: int) -> None:
        end = self.now + ms
        while True:
            due = [(d, k) for k, (d, _) in self.timers.items() if d <= end]
            if not due:
                break
            d, key = min(due, key=lambda dk: dk[0])
            self.now = d
            _, payload = self.timers.pop(key)
            self.feed(self.machine.timer_fired(self.group, key, payload, self.now))
        self.now = end

    def take(self, member_id: str, kind: str = "join"):
        """The answer the member's waiting request got, if any (taken once)."""
        for i, (mid, k, result) in enumerate(self.answered):
            if mid == member_id and k == kind:
                del self.answered[i]
                return result
        return None

    # ---- requests

    def join(self, member_id="", client="c", instance=None, meta=b"m", session=SESSION,
             rebalance=REBALANCE, require=False):
        return self.feed(self.machine.join(
            self.group, member_id, instance, client, "/h", session, rebalance, "consumer",
            [("range", meta)], require, self.now))

    def sync(self, member_id, generation, assignments=(), instance=None):
        return self.feed(self.machine.sync(self.group, generation, member_id, instance,
                                           "consumer", "range", list(assignments), self.now))

    def heartbeat(self, member_id, generation, instance=None):
        return self.feed(self.machine.heartbeat(self.group, generation, member_id, instance,
                                                self.now))

    def leave(self, member_id, instance=None):
        return self.feed(self.machine.leave(self.group, [(member_id, instance)], self.now))

    @property
    def state(self):
        return self.group.state


def joined_pair(d: Driver, **kw):
    """Two members joined (no initial delay): (leader's answer, follower's)."""
    assert d.join(client="a", **kw.get("a", {})) is None  # waits for the rebalance
    assert d.join(client="b", **kw.get("b", {})) is None
    d.advance(0)  # the initial delay (0 here) ends the first rebalance
    a, b = [r for mid, k, r in d.answered if k == "join"]
    d.answered.clear()
    return (a, b) if a.leader == a.member_id else (b, a)


def stable_pair(d: Driver, **kw):
    leader, follower = joined_pair(d, **kw)
    assert d.sync(follower.member_id, 1) is None
    assert d.sync(leader.member_id, 1, [(leader.member_id, b"L"), (follower.member_id, b"F")]) \
        is None
    assert d.take(leader.member_id, "sync").assignment == b"L"
    assert d.take(follower.member_id, "sync").assignment == b"F"
    assert d.state is GroupState.STABLE
    return leader, follower


# ------------------------------------------------------------------ the tests


def test_initial_rebalance_delay_waits_and_extends_while_members_arrive():
    d = Driver(group_initial_rebalance_delay_ms=3000)
    assert d.join(client="a") is None
    d.advance(2000)
    assert d.answered == []  # still inside group.initial.rebalance.delay.ms
    assert d.join(client="b") is None  # a newcomer extends the wait by another delay
    d.advance(1000)
    assert d.answered == [] and d.state is GroupState.PREPARING_REBALANCE
    d.advance(2999)
    assert d.answered == []
    d.advance(1)
    answers = [r for _, k, r in d.answered if k == "join"]
    assert len(answers) == 2 and {r.generation_id for r in answers} == {1}
    assert d.state is GroupState.COMPLETING_REBALANCE


def test_initial_delay_never_exceeds_the_rebalance_timeout():
    d = Driver(group_initial_rebalance_delay_ms=3000)
    d.join(client="a", rebalance=4000)
    d.advance(2000)
    d.join(client="b", rebalance=4000)
    d.advance(2000)  # the delays' total is capped by the rebalance timeout
    assert len([r for _, k, r in d.answered if k == "join"]) == 2


def test_members_that_do_not_rejoin_go_when_the_rebalance_timeout_passes():
    d = Driver()
    # sessions longer than the rebalance: the timeout, not the session, removes
    leader, follower = stable_pair(d, a={"session": 2 * REBALANCE},
                                   b={"session": 2 * REBALANCE})
    # the leader rejoins (wants a new assignment); the follower stays silent
    assert d.join(leader.member_id, client="a", session=2 * REBALANCE) is None
    assert d.state is GroupState.PREPARING_REBALANCE
    assert d.heartbeat(follower.member_id, 1) == E.REBALANCE_IN_PROGRESS
    d.advance(REBALANCE - 1)
    assert d.take(leader.member_id) is None
    d.advance(1)
    again = d.take(leader.member_id)
    assert again.generation_id == 2 and [m for m, _, _ in again.members] == [leader.member_id]
    assert d.heartbeat(follower.member_id, 2) == E.UNKNOWN_MEMBER_ID


def test_a_silent_member_expires_after_its_session_timeout():
    d = Driver()
    leader, follower = stable_pair(d)
    for _ in range(3):  # the leader heartbeats every few seconds, the follower never
        d.advance(SESSION // 3)
        assert d.heartbeat(leader.member_id, 1) == NONE
    assert follower.member_id in d.group.members
    d.advance(SESSION - 3 * (SESSION // 3))
    assert follower.member_id not in d.group.members
    assert d.heartbeat(leader.member_id, 1) == E.REBALANCE_IN_PROGRESS
    assert d.heartbeat(follower.member_id, 1) == E.UNKNOWN_MEMBER_ID


def test_a_member_waiting_on_the_coordinator_does_not_expire():
    d = Driver()
    leader, follower = stable_pair(d)
    d.join(leader.member_id, client="a")
    d.join(follower.member_id, client="b", meta=b"new")  # both wait on the rebalance...
    d.hold_writes = True
    d.advance(0)  # ...which completes at once: all rejoined
    assert d.take(leader.member_id).generation_id == 2
    assert d.take(follower.member_id).generation_id == 2
    d.sync(follower.member_id, 2)  # the follower waits for the leader's assignment
    for _ in range(4):  # longer than its session: waiting counts as alive
        d.advance(SESSION // 2)
        assert d.heartbeat(leader.member_id, 2) == NONE  # the leader, slow to assign
    assert follower.member_id in d.group.members
    assert d.take(follower.member_id, "sync") is None


def test_a_new_member_that_never_rejoins_with_its_id_is_forgotten():
    d = Driver()
    first = d.join(client="a", require=True)
    assert first.error_code == E.MEMBER_ID_REQUIRED
    assert d.group.pending_members == {first.member_id}
    d.advance(SESSION)
    assert d.group.pending_members == set()
    assert d.join(first.member_id, client="a").error_code == E.UNKNOWN_MEMBER_ID


def test_leave_during_a_rebalance_completes_it_for_those_who_rejoined():
    d = Driver()
    leader, follower = stable_pair(d)
    d.join(leader.member_id, client="a")
    assert d.take(leader.member_id) is None  # the follower has not rejoined yet
    result = d.leave(follower.member_id)
    assert result.members[0].error_code == NONE
    again = d.take(leader.member_id)  # no wait for the rebalance timeout
    assert again.error_code == NONE and again.generation_id == 2
    assert d.state is GroupState.COMPLETING_REBALANCE


def test_the_last_member_leaving_empties_the_group_and_writes_its_record():
    d = Driver()
    leader, follower = stable_pair(d)
    d.leave(follower.member_id)
    d.leave(leader.member_id)
    d.advance(REBALANCE)
    assert d.state is GroupState.EMPTY
    assert d.records[-1].members == [] and d.records[-1].generation == 2


def test_a_follower_syncing_before_the_leader_waits_for_its_assignment():
    d = Driver()
    leader, follower = joined_pair(d)
    assert d.sync(follower.member_id, 1) is None
    assert d.take(follower.member_id, "sync") is None
    d.hold_writes = True
    d.sync(leader.member_id, 1, [(follower.member_id, b"F"), (leader.member_id, b"L")])
    # the assignment takes effect once its record is written, not before
    assert d.take(follower.member_id, "sync") is None
    assert d.state is GroupState.COMPLETING_REBALANCE
    assert {m.member_id: m.assignment for m in d.records[-1].members} == {
        leader.member_id: b"L", follower.member_id: b"F"}
    d.release()
    assert d.take(follower.member_id, "sync").assignment == b"F"
    assert d.state is GroupState.STABLE


def test_an_assignment_whose_write_failed_makes_the_members_rejoin():
    d = Driver()
    leader, follower = joined_pair(d)
    d.hold_writes = True
    d.sync(follower.member_id, 1)
    d.sync(leader.member_id, 1, [(follower.member_id, b"F"), (leader.member_id, b"L")])
    d.release(int(E.NOT_COORDINATOR))
    assert d.take(follower.member_id, "sync").error_code == E.NOT_COORDINATOR
    assert d.take(leader.member_id, "sync").assignment == b""
    assert d.state is GroupState.PREPARING_REBALANCE


def test_a_member_that_never_syncs_is_dropped_after_the_rebalance_timeout():
    d = Driver()
    leader, follower = joined_pair(d, a={"session": 2 * REBALANCE},
                                   b={"session": 2 * REBALANCE})
    d.sync(leader.member_id, 1, [(leader.member_id, b"L")])
    d.advance(REBALANCE - 1)
    assert follower.member_id in d.group.members
    d.advance(1)
    assert follower.member_id not in d.group.members
    assert d.state is GroupState.PREPARING_REBALANCE


def test_a_static_member_restarting_takes_its_place_without_a_rebalance():
    d = Driver()
    _, follower = stable_pair(d, a={"instance": "ia"}, b={"instance": "ib"})
    follower_client = "b" if d.group.get(follower.member_id).group_instance_id == "ib" else "a"
    instance = d.group.get(follower.member_id).group_instance_id
    writes = len(d.records)
    again = d.join(client=follower_client, instance=instance)  # a restart: no member id
    assert again is None
    answer = [r for mid, k, r in d.answered if k == "join"][-1]
    assert answer.error_code == NONE and answer.generation_id == 1  # no new generation
    assert answer.member_id != follower.member_id and not answer.skip_assignment
    assert len(d.records) == writes + 1  # the new member id is written before it answers
    assert d.state is GroupState.STABLE
    # the old id is fenced; the new one gets its old assignment
    assert d.heartbeat(follower.member_id, 1, instance) == E.FENCED_INSTANCE_ID
    assert d.sync(answer.member_id, 1, instance=instance).assignment == b"F"


def test_a_static_leader_restarting_is_told_not_to_reassign():
    d = Driver()
    leader, _ = stable_pair(d, a={"instance": "ia"}, b={"instance": "ib"})
    instance = d.group.get(leader.member_id).group_instance_id
    d.join(client="x", instance=instance)
    answer = [r for mid, k, r in d.answered if k == "join"][-1]
    assert answer.leader == answer.member_id and answer.skip_assignment
    assert d.state is GroupState.STABLE and d.group.generation_id == 1


def test_a_static_member_restarting_during_a_rebalance_fences_its_old_join():
    d = Driver()
    leader, follower = stable_pair(d, a={"instance": "ia"}, b={"instance": "ib"})
    f_instance = d.group.get(follower.member_id).group_instance_id
    l_instance = d.group.get(leader.member_id).group_instance_id
    f_client = "b" if f_instance == "ib" else "a"
    # the follower rejoins with new metadata: a rebalance, its JoinGroup waits
    assert d.join(follower.member_id, client=f_client, instance=f_instance, meta=b"new") is None
    # then its process restarts and joins again without a member id
    assert d.join(client=f_client, instance=f_instance) is None
    assert d.take(follower.member_id).error_code == E.FENCED_INSTANCE_ID
    # the leader rejoins: everyone is in, generation 2 has the follower's new id
    d.join(leader.member_id, client="ab".replace(f_client, ""), instance=l_instance)
    answers = [r for _, k, r in d.answered if k == "join"]
    assert {r.generation_id for r in answers} == {2} and len(answers) == 2
    new_id = next(r.member_id for r in answers if r.member_id != leader.member_id)
    assert new_id != follower.member_id and d.group.static_member_id(f_instance) == new_id
