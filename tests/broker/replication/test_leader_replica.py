"""A partition's leader (broker/replication/leader.py) over a real log: the
high watermark follows the in-sync replicas, acks=all produces wait for it,
and neither an ISR change whose write is still out nor a new leader epoch
loses track of what followers hold."""
from __future__ import annotations

import asyncio
import threading

import pytest

from samsa.broker.append_notifier import APPENDED, READABLE, AppendNotifier
from samsa.broker.metadata import IsrUpdate, MetadataUnavailableError
from samsa.broker.replication.leader import LeaderReplica, NotEnoughReplicasError, NotLeaderError
from samsa.broker.replication.manager import ReplicaManager
from samsa.config.topic import TopicConfig
from samsa.protocol.errors import ErrorCode
from samsa.storage.log import AppendOrigin, Log
from tests.storage.helpers import batch_of
from tests.support.waiting import wait_until

ME = 0


@pytest.fixture
def log(tmp_path):
    lg = Log.open(str(tmp_path / "t-0"), TopicConfig())
    yield lg
    lg.close()


def leader(log, isr=(0, 1, 2), replicas=(0, 1, 2)):
    notified = []
    return LeaderReplica(log, ME, 1, replicas, isr, 0, lambda t, p, events=3, followers=(): notified.append((t, p)))


def append(lr, n=1):
    lr.append(batch_of(n), AppendOrigin.CLIENT)
    return lr.log.log_end_offset


def test_the_high_watermark_is_the_slowest_in_sync_follower(log):
    lr = leader(log)
    end = append(lr, 3)
    assert log.high_watermark == 0  # followers not heard from
    lr.follower_fetched(1, end)
    assert log.high_watermark == 0
    lr.follower_fetched(2, 2)
    assert log.high_watermark == 2
    lr.follower_fetched(2, end)
    assert log.high_watermark == end


def test_a_partition_led_alone_commits_on_append(log):
    lr = leader(log, isr=(0,), replicas=(0,))
    assert append(lr, 2) == log.high_watermark == 2


def test_a_joining_follower_counts_while_its_isr_write_is_out(log):
    lr = leader(log, isr=(0, 1))
    end = append(lr, 5)
    lr.follower_fetched(1, end)
    assert log.high_watermark == end
    end = append(lr, 1)
    lr.follower_fetched(1, end)
    assert log.high_watermark == end
    join = lr.follower_fetched(2, end - 1)   # not at the high watermark yet
    assert join is None
    join = lr.follower_fetched(2, end)
    assert join == (0, 1, 2) and lr.pending_isr == (0, 1, 2)
    # the write is out (maybe landed, maybe not): 2 counts, so a record only
    # 0 and 1 hold is not committed
    end = append(lr, 1)
    lr.follower_fetched(1, end)
    assert log.high_watermark == end - 1
    lr.isr_written((0, 1, 2), 1)
    lr.follower_fetched(2, end)
    assert log.high_watermark == end


async def test_acks_all_waits_for_the_isr_and_survives_a_new_epoch(log):
    lr = leader(log)
    end = append(lr, 1)
    waiting = lr.wait_for(end, 2, asyncio.get_running_loop())
    await asyncio.sleep(0)
    assert not waiting.done()
    # the controller drops broker 2 from the ISR with a new epoch; 0 keeps leading
    lr.new_epoch(2, (0, 1, 2), (0, 1), 5)
    assert not waiting.done()
    lr.follower_fetched(1, end)
    assert await asyncio.wait_for(waiting, 5) == ErrorCode.NONE


async def test_an_isr_below_min_insync_after_append_is_told(log):
    lr = leader(log, isr=(0, 1))
    end = append(lr, 1)
    waiting = lr.wait_for(end, 2, asyncio.get_running_loop())
    lr.new_epoch(2, (0, 1, 2), (0,), 5)   # 1 left the ISR: the record commits alone
    assert await asyncio.wait_for(waiting, 5) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


async def test_losing_leadership_answers_waiting_produces(log):
    lr = leader(log)
    end = append(lr, 1)
    waiting = lr.wait_for(end, 2, asyncio.get_running_loop())
    lr.resign()
    assert await asyncio.wait_for(waiting, 5) == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_acks_all_produces_are_answered_as_the_high_watermark_reaches_each(log):
    lr = leader(log)
    loop = asyncio.get_running_loop()
    ends = [append(lr, 1) for _ in range(6)]
    waiting = [lr.wait_for(end, 2, loop) for end in reversed(ends)][::-1]  # any order
    gave_up = waiting.pop(3)
    lr.forget(gave_up)  # its request timed out
    lr.follower_fetched(1, ends[-1])
    lr.follower_fetched(2, ends[2])  # the high watermark reaches the third
    assert await asyncio.wait_for(asyncio.gather(*waiting[:3]), 5) == [ErrorCode.NONE] * 3
    assert not any(w.done() for w in waiting[3:])
    lr.follower_fetched(2, ends[-1])
    assert await asyncio.wait_for(asyncio.gather(*waiting[3:]), 5) == [ErrorCode.NONE] * 2
    assert not gave_up.done()
    # already replicated: answered at once
    assert lr.wait_for(ends[0], 2, loop).result() == ErrorCode.NONE


async def test_an_append_wakes_waiting_followers_and_a_commit_waiting_consumers(log):
    notifier = AppendNotifier()
    lr = LeaderReplica(log, ME, 1, (0, 1, 2), (0, 1, 2), 0, notifier.notify)
    loop = asyncio.get_running_loop()
    key = [(log.topic, log.partition)]

    def waits():
        return (notifier.wait_any(key, loop, APPENDED), notifier.wait_any(key, loop, READABLE))

    follower, consumer = waits()
    end = append(lr, 1)  # nothing committed: only followers can read it
    await asyncio.wait_for(follower, 5)
    assert not consumer.done()
    lr.follower_fetched(1, end)
    lr.follower_fetched(2, end)  # the high watermark moves
    await asyncio.wait_for(consumer, 5)
    # a transaction marker may move the last stable offset by itself
    follower, consumer = waits()
    lr.append(batch_of(1), AppendOrigin.COORDINATOR)
    await asyncio.wait_for(asyncio.gather(follower, consumer), 5)


class _OneByOne:
    """A store answering the ISR thread's batch (``update_isrs``) with its
    ``update_isr`` for each change, an unreachable ZooKeeper as the error."""

    def update_isrs(self, changes):
        out = []
        for c in changes:
            try:
                out.append(self.update_isr(c.topic, c.partition, c.leader_epoch, c.isr, c.version))
            except MetadataUnavailableError as e:
                out.append(e)
        return out


class _ZooKeeperAway(_OneByOne):
    """The ISR write's store: the first write's answer is lost (ZooKeeper went
    away mid-request) although it landed; asked again, it shows the state."""

    def __init__(self):
        self.calls = 0

    def update_isr(self, topic, partition, leader_epoch, isr, version):
        self.calls += 1
        if self.calls == 1:
            raise MetadataUnavailableError("ConnectionLoss")
        return IsrUpdate(False, ME, leader_epoch, isr, version + 1)


def test_an_isr_write_with_an_unknown_outcome_stays_pending_until_known(log):
    store = _ZooKeeperAway()
    manager = ReplicaManager(store, logs=None, broker_id=ME, notify=lambda t, p, events=3, followers=(): None,
                             lag_time_max_ms=lambda: 10_000)
    lr = leader(log, isr=(0, 1))
    end = append(lr, 1)
    lr.follower_fetched(1, end)
    assert lr.follower_fetched(2, end) == (0, 1, 2)
    manager._write_isrs([(lr, (0, 1, 2))])
    assert lr.pending_isr == (0, 1, 2) and lr.isr == (0, 1)  # still counted for the mark
    manager._write_isrs([(lr, (0, 1, 2))])  # the retry finds it landed
    assert lr.pending_isr is None and lr.isr == (0, 1, 2) and lr.isr_version == 1


def test_no_append_after_losing_leadership_and_acks_all_refused_below_min_isr(log):
    lr = leader(log, isr=(0, 1))
    with pytest.raises(NotEnoughReplicasError):
        lr.append(batch_of(1), AppendOrigin.CLIENT, min_isr=3)
    assert log.log_end_offset == 0  # refused before writing
    lr.resign()
    with pytest.raises(NotLeaderError):
        lr.append(batch_of(1), AppendOrigin.CLIENT)
    assert log.log_end_offset == 0


class _StateSays(_OneByOne):
    """The state znode as a conditional ISR write finds it: ``leader`` at ``epoch``."""

    def __init__(self, leader, epoch, isr=(0, 1, 2), version=7):
        self.leader, self.epoch, self.isr, self.version = leader, epoch, isr, version
        self.calls = 0

    def update_isr(self, topic, partition, leader_epoch, isr, version):
        self.calls += 1
        return IsrUpdate(False, self.leader, self.epoch, self.isr, self.version)


_MANAGERS: list[ReplicaManager] = []


@pytest.fixture(autouse=True)
def _stop_managers():
    yield
    while _MANAGERS:  # ends their cut-off watch threads
        _MANAGERS.pop().stop()


def _managed(store, lr):
    manager = ReplicaManager(store, logs=None, broker_id=ME, notify=lambda t, p, events=3, followers=(): None,
                             lag_time_max_ms=lambda: 10_000)
    manager._leaders[(lr.topic, lr.partition)] = lr
    _MANAGERS.append(manager)
    return manager


async def test_a_leader_whose_session_is_presumed_expired_stops_leading(log):
    lr = leader(log)
    end = append(lr, 1)
    waiting = lr.wait_for(end, 2, asyncio.get_running_loop())
    manager = _managed(_StateSays(ME, 1), lr)
    manager.cut_off()
    manager._fence_abandoned(-1)  # as the ISR thread does; any follower not caught up counts
    # the produce waiting for its replicas is told, nothing more is appended
    assert await asyncio.wait_for(waiting, 5) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(NotLeaderError):
        lr.append(batch_of(1), AppendOrigin.CLIENT)
    assert lr.lagging_isr(0) is None  # and proposes no ISR change
    assert log.log_end_offset == end


def test_cut_off_from_zookeeper_a_leader_whose_followers_still_fetch_goes_on(log):
    """ZooKeeper down, the brokers fine: the followers' fetches vouch for this
    leader (none of them follows another), so it serves on, as Kafka's do."""
    lr = leader(log)
    end = append(lr, 2)
    lr.follower_fetched(1, end)
    lr.follower_fetched(2, end)
    manager = _managed(_StateSays(ME, 1), lr)
    manager.cut_off()
    manager._fence_abandoned(-1)
    assert not lr.fenced
    assert append(lr, 1) == end + 1


def test_the_same_leader_at_the_same_epoch_leads_again_after_the_session_is_back(log):
    lr = leader(log)
    store = _StateSays(ME, 1, isr=(0, 1), version=9)
    manager = _managed(store, lr)
    manager.cut_off()
    manager._fence_abandoned(-1)  # as the ISR thread does; any follower not caught up counts
    manager.resume()
    manager._check_resume(manager._resumes.pop())
    assert store.calls == 1 and not lr.fenced
    assert lr.isr == (0, 1) and lr.isr_version == 9
    append(lr, 1)


def test_a_leader_replaced_meanwhile_stays_fenced_after_the_session_is_back(log):
    lr = leader(log)
    manager = _managed(_StateSays(2, 2), lr)  # the controller elected broker 2 at epoch 2
    manager.cut_off()
    manager._fence_abandoned(-1)  # as the ISR thread does; any follower not caught up counts
    manager.resume()
    manager._check_resume(manager._resumes.pop())
    assert lr.fenced
    with pytest.raises(NotLeaderError):
        lr.append(batch_of(1), AppendOrigin.CLIENT)


def test_a_leader_fenced_by_a_newer_decision_is_not_unfenced_by_the_session(log):
    lr = leader(log)
    manager = _managed(_StateSays(ME, 1), lr)
    lr.resign()  # an ISR write lost on a version conflict
    manager.cut_off()
    manager._fence_abandoned(-1)  # as the ISR thread does; any follower not caught up counts
    manager.resume()
    assert not manager._resumes and lr.fenced


async def test_an_isr_write_lost_on_a_version_conflict_to_a_new_leader_fences_this_one(log):
    """The zombie's way out without a session fence: its ISR shrink (followers
    gone to the new leader) meets a state znode written by the controller since
    (another leader, a newer epoch); it stops acting as leader at once."""
    lr = leader(log)
    end = append(lr, 1)
    waiting = lr.wait_for(end, 2, asyncio.get_running_loop())
    manager = _managed(_StateSays(2, 2, isr=(1, 2), version=3), lr)
    lr.pending_isr = (0,)  # as lagging_isr marks it
    manager._write_isrs([(lr, (0,))])
    assert lr.fenced and lr.isr == (0, 1, 2)  # the write did not land: nothing shrank
    assert await asyncio.wait_for(waiting, 5) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(NotLeaderError):
        lr.append(batch_of(1), AppendOrigin.CLIENT)


def test_a_join_superseded_by_a_newer_epoch_still_counts_until_that_epoch_is_taken_up(log):
    """Our write letting follower 2 in landed, but its answer was lost; before
    the retry the controller bumped the epoch, leaving us leader with 2 in the
    ISR. Until the role sync takes that epoch up, a record only 0 and 1 hold
    is not committed: the controller may elect 2, which lacks it."""
    lr = leader(log, isr=(0, 1))
    end = append(lr, 1)
    lr.follower_fetched(1, end)
    assert lr.follower_fetched(2, end) == (0, 1, 2)
    manager = _managed(_StateSays(ME, 2, isr=(0, 1, 2), version=4), lr)
    manager._write_isrs([(lr, (0, 1, 2))])
    assert not lr.fenced and lr.leader_epoch == 1
    end = append(lr, 1)
    lr.follower_fetched(1, end)
    assert log.high_watermark == end - 1  # 2 still counts
    assert lr.lagging_isr(0) is None  # no change proposed at an epoch that is gone
    lr.new_epoch(2, (0, 1, 2), (0, 1), 4)  # the role sync: the newer epoch's ISR
    lr.follower_fetched(1, end)
    assert log.high_watermark == end


def test_a_newer_epoch_already_taken_up_is_not_superseded_again(log):
    """The role sync took the newer epoch up before the ISR thread's answer
    naming it arrived: that answer changes nothing, and the leader goes on
    changing its ISR (a follower that stops fetching leaves it)."""
    lr = leader(log, isr=(0, 1))
    end = append(lr, 1)
    lr.follower_fetched(1, end)
    assert lr.follower_fetched(2, end) == (0, 1, 2)
    lr.new_epoch(2, (0, 1, 2), (0, 1, 2), 4)  # the role sync came first
    lr.superseded(2, (0, 1, 2))  # the write's answer, late
    assert lr.pending_isr is None
    lr.follower_fetched(1, end)
    assert lr.lagging_isr(-1) == (0, 1)  # 2 has not fetched at epoch 2


class _RoleSyncFirst:
    """The ISR write's store: the state it reads back is ``answer``; before
    the answer reaches the manager, the role sync takes epoch 3 up (leader
    ME, ISR ``isr_at_3``), as it may on its own thread."""

    def __init__(self, lr, answer, isr_at_3=(0, 1)):
        self.lr, self.answer, self.isr_at_3 = lr, answer, isr_at_3

    def update_isrs(self, changes):  # (the ISR thread's way: one batch)
        self.lr.new_epoch(3, (0, 1, 2), self.isr_at_3, 9)
        # a follower rejoining at epoch 3 proposes a change of its own meanwhile
        self.lr.follower_fetched(2, self.lr.log.log_end_offset)
        return [self.answer for _ in changes]


@pytest.mark.parametrize("answer", [
    IsrUpdate(False, 2, 2, (2,), 5),          # another leader at epoch 2
    IsrUpdate(False, ME, 2, (0, 1, 2), 5),    # us at epoch 2
    IsrUpdate(True, ME, 1, (0, 1, 2), 5),     # written at epoch 1
], ids=["another-leader", "newer-epoch", "written"])
def test_an_isr_answer_older_than_the_epoch_taken_up_since_changes_nothing(log, answer):
    """The role sync took epoch 3 up (us leading, ISR (0, 1)) while the ISR
    thread's write of epoch 1 was answered: that answer is older than the
    leader's state and changes nothing (a leader resigned by it would stay
    fenced at an epoch the controller thinks it leads, for good)."""
    lr = leader(log, isr=(0, 1))
    end = append(lr, 1)
    lr.follower_fetched(1, end)
    assert lr.follower_fetched(2, end) == (0, 1, 2)
    manager = _managed(_RoleSyncFirst(lr, answer), lr)
    manager._write_isrs([(lr, (0, 1, 2))])
    assert not lr.fenced and lr.leader_epoch == 3
    assert lr.isr == (0, 1) and lr.isr_version == 9
    assert lr.pending_isr == (0, 1, 2)  # epoch 3's own proposal, left to be written
    assert append(lr, 1) == end + 1  # still leading


def test_a_leader_fenced_while_the_role_sync_took_a_newer_epoch_up_is_replaced(log):
    """An ISR answer fenced this leader (another leader at epoch 2) just as
    the role sync, having seen it unfenced, takes epoch 3 up (us again): the
    epoch is not taken up by the fenced leader, which would then never lead
    at the epoch the controller says it leads."""
    lr = leader(log, isr=(0, 1))
    assert lr.resign_if_older_than(2)
    assert lr.new_epoch(3, (0, 1, 2), (0, 1), 9) is False
    assert lr.leader_epoch == 1 and lr.fenced


async def test_a_join_pending_when_another_leader_is_found_acknowledges_nothing_more(log):
    """Our write letting follower 2 in landed, its answer lost; produces wait
    for 2. The retry finds that the controller elected 2 meanwhile: those
    produces are answered NOT_LEADER_OR_FOLLOWER and nothing more is
    committed here (counting the smaller ISR again would acknowledge records
    the new leader lacks)."""
    lr = leader(log, isr=(0, 1))
    end = append(lr, 1)
    lr.follower_fetched(1, end)
    assert lr.follower_fetched(2, end) == (0, 1, 2)
    later = append(lr, 3)
    waiting = lr.wait_for(later, 2, asyncio.get_running_loop())
    lr.follower_fetched(1, later)  # 1 holds them, 2 does not
    assert log.high_watermark == end and not waiting.done()
    manager = _managed(_StateSays(2, 2, isr=(2,), version=5), lr)
    manager._write_isrs([(lr, (0, 1, 2))])
    assert lr.fenced
    assert await asyncio.wait_for(waiting, 5) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert log.high_watermark == end


def test_a_follower_claiming_more_than_the_leader_has_is_not_counted(log):
    """A follower fetching past this leader's log end (a tail of an old
    leader's it has yet to cut) neither joins the ISR nor holds records it
    will truncate (Kafka answers OFFSET_OUT_OF_RANGE and counts nothing)."""
    lr = leader(log, isr=(0, 1))
    end = append(lr, 1)
    lr.follower_fetched(1, end)
    assert lr.follower_fetched(2, end + 5) is None and lr.pending_isr is None
    lr = leader(log, isr=(0, 1))  # and as an ISR member: its claim does not commit
    later = append(lr, 5)
    lr.follower_fetched(1, later + 3)
    assert log.high_watermark < later


def _cut_off_watches():
    return {t for t in threading.enumerate() if t.name == "samsa-zk-cut-off" and t.is_alive()}


def test_cut_off_fences_after_the_session_timeout_when_shorter_than_the_lag_limit(log):
    """replica.lag.time.max.ms is 10 s here: a follower silent for the session
    timeout (50 ms) already counts as gone while cut off."""
    lr = leader(log)  # its followers never fetch
    manager = _managed(_StateSays(ME, 1), lr)
    manager.cut_off(silent_ms=50)
    wait_until(lambda: lr.session_fenced, timeout=5, what="the leader fenced")


def test_a_new_cut_off_ends_the_previous_watch_and_resume_ends_both(log):
    manager = _managed(_StateSays(ME, 1), leader(log))
    before = _cut_off_watches()
    manager.cut_off()
    first = _cut_off_watches() - before
    assert len(first) == 1
    manager.cut_off()
    wait_until(lambda: not (_cut_off_watches() & first), what="the first watch to end")
    later = _cut_off_watches() - before
    assert len(later) == 1
    manager.resume()
    wait_until(lambda: not (_cut_off_watches() & later), what="the second watch to end")


def test_a_leader_is_not_fenced_by_a_cut_off_that_ended_meanwhile(log):
    """The connection comes back (resume) between the watch's check that the
    broker is cut off and its fencing: the leader resume() did not see as
    fenced must not be fenced after it, or nothing would ever check it again."""
    lr = leader(log)  # its followers never fetch: lagging for any limit
    resumed = []

    def lag_limit():
        if not resumed:  # the watch's first pass, right after its check
            resumed.append(True)
            manager.resume()
        return 10_000

    manager = ReplicaManager(_StateSays(ME, 1), logs=None, broker_id=ME,
                             notify=lambda t, p, events=3, followers=(): None, lag_time_max_ms=lag_limit)
    manager._leaders[(lr.topic, lr.partition)] = lr
    _MANAGERS.append(manager)
    before = _cut_off_watches()
    manager.cut_off(silent_ms=-1)
    watch = _cut_off_watches() - before
    wait_until(lambda: resumed and not (_cut_off_watches() & watch), what="the watch to end")
    assert not lr.fenced
    append(lr, 1)


class _NoLongerAReplica(_OneByOne):
    """The store as a leader with an old replica list finds it: a join of
    broker 2 refused, for the topic lists it as a replica no more."""

    def __init__(self):
        self.calls = 0

    def update_isr(self, topic, partition, leader_epoch, isr, version):
        self.calls += 1
        return IsrUpdate(False, ME, leader_epoch, (0, 1), version, not_replicas=(2,))


def test_a_follower_refused_as_no_longer_a_replica_does_not_ask_again_until_the_list_is_read(log):
    """A leader that took its epoch up before its shorter replica list (a
    reassignment's end, read apart) proposes the removed follower once; refused,
    it does not propose it again on every fetch of that follower, which would
    cost ZooKeeper reads each time, and the list read again ends the matter."""
    lr = leader(log, isr=(0, 1))
    store = _NoLongerAReplica()
    manager = _managed(store, lr)
    end = append(lr, 2)
    lr.follower_fetched(1, end)
    join = lr.follower_fetched(2, end)
    assert join == (0, 1, 2)
    manager._write_isrs([(lr, join)])
    assert store.calls == 1 and lr.isr == (0, 1) and lr.pending_isr is None
    for _ in range(3):
        assert lr.follower_fetched(2, end) is None   # no new proposal, no new write
    lr.set_replicas((0, 1))                          # the new list read: 2 is gone
    assert lr.follower_fetched(2, end) is None
    lr.new_epoch(2, (0, 1, 2), (0, 1), lr.isr_version)  # a replica again (a later move)
    assert lr.follower_fetched(2, end) == (0, 1, 2)
