"""The controller against a real ZooKeeper server: election, epochs,
partitions brought online, leaders moved when brokers go and come back,
preferred elections, and a replaced controller fenced off.

Each "broker" here is what a broker process runs in ZooKeeper mode: a
ZooKeeper metadata store (its session and registration) and a controller.
Closing the store ends the session, as a broker's death does."""
from __future__ import annotations

import contextlib
import json
import time
import uuid
from typing import Iterator

import pytest
from kazoo.client import KazooClient

from samsa.broker.cluster.controller import Controller
from samsa.broker.cluster.controller_events import UNKNOWN_BROKER_EPOCH, ShutdownRefused
from samsa.broker.metadata import BrokerEndpoint
from samsa.broker.metadata.zookeeper import ZooKeeperMetadataStore
from tests.support.waiting import wait_until

ROOT = "/cluster-test"


class Node:
    def __init__(self, connect: str, broker_id: int):
        self.broker_id = broker_id
        self.store = ZooKeeperMetadataStore(connect + ROOT, broker_id,
                                            BrokerEndpoint(broker_id, "127.0.0.1", 9000 + broker_id),
                                            session_timeout_ms=4000)
        self.controller = Controller(self.store.zk, broker_id)
        self.controller.start()

    def stop(self):
        self.controller.stop()
        self.store.close()


@pytest.fixture
def cluster(zookeeper):
    nodes: dict[int, Node] = {}

    def start(broker_id: int) -> Node:
        nodes[broker_id] = Node(zookeeper.connect, broker_id)
        return nodes[broker_id]

    try:
        yield start
    finally:
        for n in nodes.values():
            try:
                n.stop()
            except Exception:  # already stopped by the test
                pass


@pytest.fixture
def kazoo(zookeeper):
    client = KazooClient(hosts=zookeeper.connect)
    client.start(timeout=20)
    client.ensure_path(ROOT)
    client.chroot = ROOT
    try:
        yield client
    finally:
        client.stop()
        client.close()


def _state(kazoo, topic, partition):
    path = f"/brokers/topics/{topic}/partitions/{partition}/state"
    if not kazoo.exists(path):
        return None
    return json.loads(kazoo.get(path)[0])


def _controller(kazoo):
    if not kazoo.exists("/controller"):
        return None
    return json.loads(kazoo.get("/controller")[0])["brokerid"]


def _epoch(kazoo):
    return int(kazoo.get("/controller_epoch")[0])


def _write_topic(kazoo, topic, partitions):
    kazoo.create(f"/brokers/topics/{topic}", json.dumps(
        {"version": 1, "partitions": {str(p): r for p, r in partitions.items()}}).encode())


def test_one_controller_brings_new_partitions_online(cluster, kazoo):
    nodes = [cluster(i) for i in range(3)]
    active = wait_until(lambda: [n for n in nodes if n.controller.active], what="a controller")
    assert len(active) == 1 and _controller(kazoo) == active[0].broker_id
    assert _epoch(kazoo) == 1
    nodes[0].store.create_topic("rf1", 6, {})
    assignment = json.loads(kazoo.get("/brokers/topics/rf1")[0])["partitions"]
    for p in range(6):
        state = wait_until(lambda p=p: _state(kazoo, "rf1", p), what=f"rf1-{p} online")
        replica = assignment[str(p)][0]
        assert state == {"version": 1, "leader": replica, "leader_epoch": 0,
                         "controller_epoch": 1, "isr": [replica]}
    # A topic written straight into ZooKeeper by a tool, with three replicas each.
    _write_topic(kazoo, "rf3", {0: [1, 2, 0], 1: [2, 0, 1]})
    assert wait_until(lambda: _state(kazoo, "rf3", 0), what="rf3-0")["isr"] == [1, 2, 0]
    assert wait_until(lambda: _state(kazoo, "rf3", 1), what="rf3-1")["leader"] == 2
    # Partition znodes an earlier term left behind: one without its state (which
    # comes now), one with it (kept as written); the third has none.
    left = {"version": 1, "leader": 2, "leader_epoch": 4, "controller_epoch": 1, "isr": [2]}
    txn = kazoo.transaction()
    txn.create("/brokers/topics/left", json.dumps(
        {"version": 1, "partitions": {"0": [0, 1], "1": [2, 0], "2": [1, 2]}}).encode())
    for path in ("partitions", "partitions/0", "partitions/1"):
        txn.create(f"/brokers/topics/left/{path}")
    txn.create("/brokers/topics/left/partitions/1/state", json.dumps(left).encode())
    assert not any(isinstance(r, Exception) for r in txn.commit())
    assert wait_until(lambda: _state(kazoo, "left", 0), what="left-0")["isr"] == [0, 1]
    assert wait_until(lambda: _state(kazoo, "left", 2), what="left-2")["leader"] == 1
    assert _state(kazoo, "left", 1) == left


def test_leaders_move_when_a_broker_dies_and_return_when_it_comes_back(cluster, kazoo):
    nodes = {i: cluster(i) for i in range(3)}
    active = wait_until(lambda: [n for n in nodes.values() if n.controller.active], what="controller")
    victim = next(i for i in nodes if i != active[0].broker_id)
    _write_topic(kazoo, "rf3", {0: [victim, 0 if victim else 1, 2]})
    _write_topic(kazoo, "rf1", {0: [victim]})
    wait_until(lambda: _state(kazoo, "rf3", 0) and _state(kazoo, "rf1", 0), what="online")

    nodes[victim].stop()  # its session ends: as a crash does, after the timeout
    moved = wait_until(lambda: (s := _state(kazoo, "rf3", 0)) and s["leader"] != victim and s,
                   what="leadership to move")
    assert moved["leader_epoch"] == 1 and victim not in moved["isr"]
    offline = wait_until(lambda: (s := _state(kazoo, "rf1", 0)) and s["leader"] == -1 and s,
                     what="the single-replica partition offline")
    # The ISR keeps its last member, so the partition returns with it.
    assert offline["isr"] == [victim] and offline["leader_epoch"] == 1

    cluster(victim)
    back = wait_until(lambda: (s := _state(kazoo, "rf1", 0)) and s["leader"] == victim and s,
                  what="the partition back with its broker")
    assert back["leader_epoch"] == 2 and back["isr"] == [victim]


def test_a_new_controller_is_elected_with_a_higher_epoch(cluster, kazoo):
    nodes = {i: cluster(i) for i in range(3)}
    first = wait_until(lambda: [_controller(kazoo)] if _controller(kazoo) is not None else None,
                   what="a controller")[0]
    others = sorted(set(nodes) - {first})
    _write_topic(kazoo, "t", {0: [first]})
    _write_topic(kazoo, "u", {0: [first, *others]})
    wait_until(lambda: _state(kazoo, "t", 0) and _state(kazoo, "u", 0), what="online")
    assert _state(kazoo, "u", 0)["leader"] == first
    nodes[first].stop()
    second = wait_until(lambda: [c] if (c := _controller(kazoo)) not in (None, first) else None,
                    what="another controller")[0]
    # /controller is written before the winner finishes taking office (as in Kafka)
    wait_until(lambda: nodes[second].controller.active and _epoch(kazoo) == 2,
               what="the new controller active at epoch 2")
    # The new controller acts: the old controller's partition goes offline.
    state = wait_until(lambda: (s := _state(kazoo, "t", 0)) and s["leader"] == -1 and s)
    assert state["controller_epoch"] == 2
    # The one it led with followers: the next replica leads at the next leader
    # epoch, the dead replica out of the ISR, in Kafka's JSON, in one write.
    moved = wait_until(lambda: (s := _state(kazoo, "u", 0)) and s["leader"] != first and s)
    assert moved == {"version": 1, "leader": others[0], "leader_epoch": 1,
                     "isr": others, "controller_epoch": 2}
    assert kazoo.get("/brokers/topics/u/partitions/0/state")[1].version == 1


def test_preferred_replica_election(cluster, kazoo):
    for i in range(2):
        cluster(i)
    wait_until(lambda: _controller(kazoo) is not None)
    # Leadership away from the preferred replica (0), with 0 in sync.
    _write_topic(kazoo, "t", {0: [0, 1]})
    wait_until(lambda: _state(kazoo, "t", 0), what="online")
    data, stat = kazoo.get("/brokers/topics/t/partitions/0/state")
    state = json.loads(data)
    state.update(leader=1, leader_epoch=state["leader_epoch"] + 1)
    kazoo.set("/brokers/topics/t/partitions/0/state", json.dumps(state).encode(),
              version=stat.version)
    kazoo.create("/admin/preferred_replica_election",
                 b'{"version":1,"partitions":[{"topic":"t","partition":0}]}')
    back = wait_until(lambda: (s := _state(kazoo, "t", 0)) and s["leader"] == 0 and s)
    assert back["leader_epoch"] == state["leader_epoch"] + 1
    wait_until(lambda: not kazoo.exists("/admin/preferred_replica_election"),
           what="the request to be cleared")


def test_a_replaced_controller_cannot_write(cluster, kazoo):
    nodes = {i: cluster(i) for i in range(2)}
    active_id = wait_until(lambda: [_controller(kazoo)] if _controller(kazoo) is not None else None,
                       what="a controller")[0]
    other = 1 - active_id
    _write_topic(kazoo, "t", {0: [0, 1]})
    wait_until(lambda: _state(kazoo, "t", 0), what="online")
    before = _state(kazoo, "t", 0)
    # Another controller took office without the old one noticing (its
    # /controller znode is still there): the epoch moved on.
    data, stat = kazoo.get("/controller_epoch")
    bumped = int(data) + 1
    kazoo.set("/controller_epoch", str(bumped).encode(), version=stat.version)
    nodes[other].stop()  # gives the stale controller something to decide
    wait_until(lambda: not nodes[active_id].controller.active, what="the stale controller to resign")
    # Nothing written at the stale epoch. (/controller is still its own, from the
    # same session, so it stands again and may decide again, at a newer epoch.)
    after = _state(kazoo, "t", 0)
    assert after == before or after["controller_epoch"] > bumped


def test_every_broker_learns_leadership_changes_through_watches(cluster, kazoo):
    nodes = {i: cluster(i) for i in range(3)}
    wait_until(lambda: _controller(kazoo) is not None, what="a controller")
    _write_topic(kazoo, "t", {0: [0, 1, 2], 1: [1, 2, 0]})
    for n in nodes.values():
        wait_until(lambda n=n: set(n.store.partition_states()) >= {("t", 0), ("t", 1)},
               what=f"broker {n.broker_id} to see the partitions")
    seen = []
    nodes[2].store.on_partition_state(lambda t, p, s: seen.append((t, p, s and s.leader)))
    # A leader change written now reaches the other brokers' stores.
    data, stat = kazoo.get("/brokers/topics/t/partitions/0/state")
    state = json.loads(data)
    state.update(leader=2, leader_epoch=state["leader_epoch"] + 1)
    written = time.monotonic()
    kazoo.set("/brokers/topics/t/partitions/0/state", json.dumps(state).encode(),
              version=stat.version)
    # The listener runs after the snapshot is replaced: wait for what it saw.
    wait_until(lambda: ("t", 0, 2) in seen, what="propagation")
    print(f"\nleader change seen by another broker after {(time.monotonic() - written) * 1000:.1f} ms")
    assert nodes[2].store.partition_states()[("t", 0)].leader == 2
    after = nodes[1].store.partition_states()[("t", 0)]
    wait_until(lambda: nodes[1].store.partition_states()[("t", 0)].leader_epoch == state["leader_epoch"])
    assert after.isr == (0, 1, 2)


def test_a_broker_in_controlled_shutdown_is_not_elected(cluster, kazoo):
    nodes = {i: cluster(i) for i in range(3)}
    active = wait_until(lambda: [n for n in nodes.values() if n.controller.active], what="controller")
    controller = active[0].broker_id
    victim, stopping = [i for i in nodes if i != controller]
    _write_topic(kazoo, "t", {0: [victim, stopping, controller]})
    wait_until(lambda: _state(kazoo, "t", 0), what="t-0 online")
    wait_until(lambda: active[0].controller._live == set(nodes), what="every broker seen")
    assert active[0].controller.controlled_shutdown(
        stopping, nodes[stopping].store.broker_epoch, timeout=10) == []
    # Its follower is back in the ISR (a leader re-added it before it stopped),
    # and the controller has not read that change yet (read, it would take
    # the stopping broker out again): the controller's state is stale, its
    # election's write is refused for its version, and it reads the state
    # with the stopping broker in the ISR before it elects again.
    _set_isr(kazoo, "t", [victim, stopping, controller], notify=False)
    nodes[victim].stop()
    moved = wait_until(lambda: (s := _state(kazoo, "t", 0)) and s["leader"] != victim and s,
                       what="leadership to move off the dead leader")
    assert moved["leader"] == controller, "the stopping broker must not take leadership"


def _three(cluster, kazoo, leader: str) -> tuple[Controller, int, int, int, dict[int, Node]]:
    """Three brokers and t-0 on all of them, led by the controller's
    (``leader="controller"``) or by the one that will stop ("stopping"), once
    the controller sees every broker: (the controller, its broker id, the
    broker that will stop, the third, every node by id)."""
    nodes = {i: cluster(i) for i in range(3)}
    active = wait_until(lambda: [n for n in nodes.values() if n.controller.active], what="controller")
    controller = active[0].broker_id
    stopping = next(i for i in nodes if i != controller)
    other = 3 - controller - stopping
    first = controller if leader == "controller" else stopping
    _write_topic(kazoo, "t", {0: [first, *(b for b in (controller, other, stopping) if b != first)]})
    wait_until(lambda: (s := _state(kazoo, "t", 0)) and s["leader"] == first, what="t-0 online")
    wait_until(lambda: active[0].controller._live == set(nodes), what="every broker seen")
    return active[0].controller, controller, stopping, other, nodes


def _one_stopping(cluster, kazoo) -> tuple[Controller, int, int, int, dict[int, Node]]:
    """Three brokers, t-0 led by the controller's, and one of the others in a
    controlled shutdown: (the controller, its broker id, the stopping one, the
    third, every node by id)."""
    active, controller, stopping, other, nodes = _three(cluster, kazoo, leader="controller")
    assert active.controlled_shutdown(stopping, nodes[stopping].store.broker_epoch,
                                      timeout=10) == []
    return active, controller, stopping, other, nodes


def _state_and_version(kazoo, topic, partition):
    data, stat = kazoo.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
    return json.loads(data), stat.version


def _register_anew(kazoo, broker_id) -> int:
    """Broker ``broker_id`` gone and registered again in one step (as a broker
    whose session expired and was replaced, seen by a controller that read
    the registrations before and after): the new registration's czxid."""
    path = f"/brokers/ids/{broker_id}"
    registration = kazoo.get(path)[0]
    tx = kazoo.transaction()
    tx.delete(path)
    tx.create(path, registration, ephemeral=True)
    assert not any(isinstance(r, Exception) for r in tx.commit())
    return kazoo.exists(path).czxid


def test_a_controlled_shutdown_with_the_current_broker_epoch_moves_leadership(cluster, kazoo):
    active, controller, stopping, other, nodes = _three(cluster, kazoo, leader="stopping")
    epoch = nodes[stopping].store.broker_epoch
    assert epoch == kazoo.exists(f"/brokers/ids/{stopping}").czxid  # the registration's
    assert active.controlled_shutdown(stopping, epoch, timeout=10) == []
    state = _state(kazoo, "t", 0)
    assert state["leader"] in (controller, other) and stopping not in state["isr"], state


def test_a_controlled_shutdown_with_an_earlier_registrations_epoch_is_refused(cluster, kazoo):
    # Kafka's STALE_BROKER_EPOCH: the broker registered again since (a new
    # session), so the run that asked is over, and what it asks is not done.
    active, controller, stopping, other, nodes = _three(cluster, kazoo, leader="stopping")
    earlier = nodes[stopping].store.broker_epoch
    current = _register_anew(kazoo, stopping)
    assert current > earlier
    before = _state_and_version(kazoo, "t", 0)
    assert active.controlled_shutdown(stopping, earlier, timeout=10) \
        is ShutdownRefused.STALE_BROKER_EPOCH
    assert _state_and_version(kazoo, "t", 0) == before, "nothing moved"
    assert stopping not in active._shutting_down
    # the run registered now is answered
    assert active.controlled_shutdown(stopping, current, timeout=10) == []
    assert _state(kazoo, "t", 0)["leader"] in (controller, other)


def test_a_controlled_shutdown_without_a_broker_epoch_is_not_checked(cluster, kazoo):
    # ControlledShutdown v0/v1 carry no broker epoch (-1): Kafka accepts them
    # as before epochs existed, whatever the registration.
    active, controller, stopping, other, nodes = _three(cluster, kazoo, leader="stopping")
    _register_anew(kazoo, stopping)
    assert active.controlled_shutdown(stopping, UNKNOWN_BROKER_EPOCH, timeout=10) == []
    state = _state(kazoo, "t", 0)
    assert state["leader"] in (controller, other) and stopping not in state["isr"], state


def test_a_controlled_shutdown_of_a_broker_the_controller_does_not_know_is_refused(
        cluster, kazoo):
    # Kafka's BROKER_NOT_AVAILABLE: never registered, or gone (its answer of
    # [] used to tell such a broker that everything had moved).
    active, controller, gone, other, nodes = _three(cluster, kazoo, leader="controller")
    for epoch in (UNKNOWN_BROKER_EPOCH, 1):
        assert active.controlled_shutdown(7, epoch, timeout=10) is ShutdownRefused.UNKNOWN_BROKER
    epoch = nodes[gone].store.broker_epoch
    nodes[gone].stop()
    wait_until(lambda: gone not in active._live, what="the broker's death handled")
    before = _state_and_version(kazoo, "t", 0)
    for asked in (UNKNOWN_BROKER_EPOCH, epoch):
        assert active.controlled_shutdown(gone, asked, timeout=10) \
            is ShutdownRefused.UNKNOWN_BROKER
    assert _state_and_version(kazoo, "t", 0) == before
    assert not active._shutting_down


def test_a_stopping_replica_its_leader_took_back_into_the_isr_is_taken_out_again(cluster, kazoo):
    # Kafka's controller refuses an ISR that names a broker in a controlled
    # shutdown; leaders here write ISRs without asking, so the controller
    # undoes it when it reads the change, or acks=all waits on a broker
    # about to go.
    _, controller, stopping, other, _ = _one_stopping(cluster, kazoo)
    assert stopping not in _state(kazoo, "t", 0)["isr"]
    _set_isr(kazoo, "t", [controller, other, stopping])
    out = wait_until(lambda: (s := _state(kazoo, "t", 0)) and stopping not in s["isr"] and s,
                     what="the stopping replica out of the ISR again")
    assert (out["leader"], sorted(out["isr"])) == (controller, sorted([controller, other]))


def test_a_stopping_broker_that_registers_anew_is_no_longer_taken_out_of_isrs(cluster, kazoo):
    # A broker stopped and started again between two reads of the
    # registrations is never seen gone: its new registration (another czxid,
    # Kafka's broker epoch) says it is no longer stopping, or every leader
    # that took it back into an ISR would have it taken out again.
    active, controller, stopping, other, _ = _one_stopping(cluster, kazoo)
    _register_anew(kazoo, stopping)
    wait_until(lambda: stopping not in active._shutting_down,
               what="the new registration seen")
    _set_isr(kazoo, "t", [controller, other, stopping])
    wait_until(lambda: not kazoo.get_children("/isr_change_notification"),
               what="the controller to read the ISR change")
    assert sorted(_state(kazoo, "t", 0)["isr"]) == sorted([controller, other, stopping])


def test_a_dead_replica_leaves_an_isr_its_leader_changed_without_telling_the_controller_yet(
        cluster, kazoo):
    # A leader re-adds a follower that is shutting down, and the follower's
    # session ends before the controller has read the ISR change notification
    # (found by a full run: with no new writes, nothing else ever takes the
    # dead replica out, and acks=all waits on it).
    active, controller, victim, other, nodes = _one_stopping(cluster, kazoo)
    assert victim not in _state(kazoo, "t", 0)["isr"]
    _set_isr(kazoo, "t", [controller, other, victim], notify=False)
    nodes[victim].stop()
    wait_until(lambda: victim not in active._live, what="the death handled")
    # The leader's notification of its ISR change, read after the death.
    kazoo.create("/isr_change_notification/isr_change_", json.dumps(
        {"version": 1, "partitions": [{"topic": "t", "partition": 0}]}).encode(), sequence=True)
    wait_until(lambda: victim not in _state(kazoo, "t", 0)["isr"],
               what="the dead replica out of the ISR")
    assert _state(kazoo, "t", 0)["leader"] == controller


def test_fenced_writes_go_in_groups_and_a_conflict_costs_only_its_own_write(kazoo):
    from kazoo.exceptions import BadVersionError
    from samsa.broker.metadata.zookeeper.writes import (Create, NotControllerError, SetData,
                                                         ZooKeeperWrites)
    class Counted(ZooKeeperWrites):
        """The transactions sent (a real ZooKeeper answers them)."""
        sent: list = []

        def transaction(self):
            txn = super().transaction()
            self.sent.append(txn)
            return txn
    zk = Counted(kazoo)
    kazoo.create("/controller_epoch", b"1")
    for i in range(8):
        kazoo.create(f"/n{i}", b"old")
    for i in (3, 5):
        kazoo.set(f"/n{i}", b"moved on")  # version 1: the writes below expect 0
    writes = [[SetData(f"/n{i}", b"new", 0)] for i in range(8)] + [[Create("/n8", b"new")]]
    outcomes = zk.commit_fenced_each(0, writes, together=4)
    assert isinstance(outcomes[3], BadVersionError) and isinstance(outcomes[5], BadVersionError)
    assert [o for i, o in enumerate(outcomes) if i not in (3, 5)] == [[1]] * 6 + [[0]]
    assert [kazoo.get(f"/n{i}")[0] for i in range(9)] == (
        [b"new"] * 3 + [b"moved on", b"new", b"moved on"] + [b"new"] * 3)
    # At most 4 writes (and the epoch check) a request; a refused group is
    # sent again without the write that conflicted, not one write at a time.
    assert [len(t.operations) - 1 for t in zk.sent] == [4, 4, 1, 3, 3]
    # Another controller's epoch: every write refused, none made.
    kazoo.set("/controller_epoch", b"2")
    outcomes = zk.commit_fenced_each(0, [[SetData(f"/n{i}", b"newer", 1)] for i in range(3)],
                                     together=2)
    assert all(isinstance(o, NotControllerError) for o in outcomes)
    assert kazoo.get("/n0")[0] == b"new"


def test_fenced_writes_keep_a_few_requests_in_flight_and_stop_once_refused_for_the_epoch(kazoo):
    """A few groups on their way at a time (the session's other requests are
    not queued behind every group), and none sent after ZooKeeper refused one
    for a newer controller's epoch."""
    from samsa.broker.metadata.zookeeper.writes import NotControllerError, SetData, ZooKeeperWrites

    class Counted(ZooKeeperWrites):
        """Per request sent, how many earlier ones were unanswered."""
        def __init__(self, client):
            super().__init__(client)
            self.unanswered: list[int] = []
            self.waiting: set[int] = set()

        def transaction(self):
            txn = super().transaction()
            zk, number = self, len(self.unanswered)
            commit_async = txn.commit_async

            def counted():
                zk.unanswered.append(len(zk.waiting))
                zk.waiting.add(number)
                result = commit_async()
                get = result.get

                def answered(*args, **kwargs):
                    zk.waiting.discard(number)
                    return get(*args, **kwargs)
                result.get = answered
                return result
            txn.commit_async = counted
            return txn
    kazoo.create("/controller_epoch", b"1")
    for i in range(7):
        kazoo.create(f"/w{i}", b"old")
    zk = Counted(kazoo)
    outcomes = zk.commit_fenced_each(0, [[SetData(f"/w{i}", b"new", 0)] for i in range(7)],
                                     together=1, in_flight=3)
    assert outcomes == [[1]] * 7
    assert zk.unanswered == [0, 1, 2, 2, 2, 2, 2]
    kazoo.set("/controller_epoch", b"2")
    zk = Counted(kazoo)
    outcomes = zk.commit_fenced_each(0, [[SetData(f"/w{i}", b"newer", 1)] for i in range(7)],
                                     together=1, in_flight=3)
    assert all(isinstance(o, NotControllerError) for o in outcomes)
    assert len(zk.unanswered) == 3  # the first refusal ends the sending
    assert all(kazoo.get(f"/w{i}")[0] == b"new" for i in range(7))
    # ... and the deciding: a generator is not run on for writes that cannot be made
    decided: list[int] = []

    def deciding():
        for i in range(7):
            decided.append(i)
            yield [SetData(f"/w{i}", b"newer", 1)]
    zk = Counted(kazoo)
    outcomes = zk.commit_fenced_each(0, deciding(), together=1, in_flight=3)
    assert len(outcomes) == 3 and all(isinstance(o, NotControllerError) for o in outcomes)
    assert decided == [0, 1, 2]


def test_fenced_writes_take_their_transactions_as_there_is_room_to_send_them(kazoo):
    """The controller decides as the writes ask (a generator): the first
    requests go before the last partitions are decided."""
    from samsa.broker.metadata.zookeeper.writes import SetData, ZooKeeperWrites

    class Counted(ZooKeeperWrites):
        requests = 0

        def transaction(self):
            self.requests += 1
            return super().transaction()
    kazoo.create("/controller_epoch", b"1")
    for i in range(8):
        kazoo.create(f"/g{i}", b"old")
    zk = Counted(kazoo)
    sent_before: list[int] = []

    def decided():
        for i in range(8):
            sent_before.append(zk.requests)
            yield [SetData(f"/g{i}", b"new", 0)]
    outcomes = zk.commit_fenced_each(0, decided(), together=2, in_flight=2)
    assert outcomes == [[1]] * 8
    # two requests of two filled first; the next two taken as each is answered
    assert sent_before == [0, 0, 1, 1, 2, 2, 3, 3]


def test_a_topic_watch_with_the_version_already_read_reads_nothing_again(kazoo):
    """A topic's watch fires as it is set up, right after the topic was read
    (and after our own reassignment writes): at 30,000 partitions each such
    firing re-read the topic's states, seconds of reads queued ahead of a
    broker's death. A new version is read, with the partitions it adds."""
    from samsa.broker.metadata.zookeeper.writes import ZooKeeperWrites

    class Counted(ZooKeeperWrites):
        read: list = []

        def get_many(self, paths):
            self.read.extend(paths)
            return super().get_many(paths)
    zk = Counted(kazoo)
    for path in ("/brokers/ids", "/brokers/topics"):
        kazoo.ensure_path(path)
    kazoo.create("/controller_epoch", b"1")
    _write_topic(kazoo, "t", {0: [0]})
    controller = Controller(zk, 0)  # its decisions only: no thread, no watches
    controller.active, controller.epoch, controller._epoch_version = True, 1, 0
    controller._live = {0}
    controller._on_topics(("t",))
    assert _state(kazoo, "t", 0)["leader"] == 0
    stat = kazoo.get("/brokers/topics/t")[1]
    zk.read.clear()
    controller._on_topic("t", stat.version, stat.czxid)
    assert zk.read == []
    kazoo.set("/brokers/topics/t", json.dumps(
        {"version": 1, "partitions": {"0": [0], "1": [0]}}).encode())
    controller._on_topic("t", stat.version + 1, stat.czxid)
    assert "/brokers/topics/t" in zk.read and _state(kazoo, "t", 1)["leader"] == 0


@contextlib.contextmanager
def _controller_writing_through(zookeeper, writes_class) -> Iterator[Controller]:
    """Broker 1's controller, started, its ZooKeeper writes (and watches) made
    through ``writes_class`` (a ZooKeeperWrites that steps in); stopped after."""
    store = ZooKeeperMetadataStore(zookeeper.connect + ROOT, 1,
                                   BrokerEndpoint(1, "127.0.0.1", 9001), session_timeout_ms=4000)
    controller = Controller(writes_class(store.zk), 1)
    try:
        controller.start()
        yield controller
    finally:
        controller.stop()
        store.close()


def test_a_topic_created_again_before_its_watch_is_set_is_brought_online(zookeeper, kazoo):
    """A topic deleted and created again (by a tool) between the controller's
    read on taking office and its watch on the topic: the new znode is back at
    version 0, the version read, but it is another topic, whose partitions
    have no state; they are brought online, not taken for the old ones."""
    from samsa.broker.metadata import kafka_id
    from samsa.broker.metadata.zookeeper.writes import ZooKeeperWrites

    def write_topic():  # with its id: the brokers write none, it stays at version 0
        kazoo.create("/brokers/topics/t", json.dumps(
            {"version": 3, "topic_id": kafka_id(uuid.uuid4()), "partitions": {"0": [1]},
             "adding_replicas": {}, "removing_replicas": {}}).encode(), makepath=True)
    write_topic()
    recreated = []

    class RecreatedInTheGap(ZooKeeperWrites):
        def watch_data(self, path, callback):
            if path == "/brokers/topics/t" and not recreated:
                assert _state(kazoo, "t", 0) is not None  # the old one was brought online
                kazoo.delete("/brokers/topics/t", recursive=True)
                write_topic()
                recreated.append(kazoo.get("/brokers/topics/t")[1].version)
            super().watch_data(path, callback)
    with _controller_writing_through(zookeeper, RecreatedInTheGap):
        wait_until(lambda: recreated, what="the controller to take office")
        assert recreated == [0]
        state = wait_until(lambda: _state(kazoo, "t", 0), what="the new topic's partition online")
        assert state["leader"] == 1


def test_isr_change_notifications_are_read_together_and_each_only_once(kazoo):
    """Followers rejoining after a restart leave thousands of notifications, and
    each watch event lists all of them: handled one round trip each, and again
    in every later listing, they queued minutes of reads ahead of a broker's
    death. The new ones are read in one go, and a listing of handled ones
    (deleted meanwhile) reads nothing."""
    from samsa.broker.metadata.zookeeper.writes import ZooKeeperWrites

    class Counted(ZooKeeperWrites):
        reads: list = []

        def get(self, path):
            self.reads.append([path])
            return super().get(path)

        def get_many(self, paths):
            self.reads.append(list(paths))
            return super().get_many(paths)
    zk = Counted(kazoo)
    for path in ("/brokers/ids", "/brokers/topics", "/isr_change_notification"):
        kazoo.ensure_path(path)
    kazoo.create("/controller_epoch", b"1")
    _write_topic(kazoo, "t", {p: [0, 1] for p in range(20)})
    controller = Controller(zk, 0)  # its decisions only: no thread, no watches
    controller.active, controller.epoch, controller._epoch_version = True, 1, 0
    controller._live = {0, 1}
    controller._on_topics(("t",))
    for p in range(20):  # the leader shrinks each ISR, one notification each
        path = f"/brokers/topics/t/partitions/{p}/state"
        state = json.loads(kazoo.get(path)[0])
        kazoo.set(path, json.dumps({**state, "isr": [0]}).encode())
        kazoo.create("/isr_change_notification/isr_change_", json.dumps(
            {"version": 1, "partitions": [{"topic": "t", "partition": p}]}).encode(),
            sequence=True)
    names = tuple(kazoo.get_children("/isr_change_notification"))
    zk.reads.clear()
    controller._on_isr_changes(names)
    assert len(zk.reads) == 2  # the notifications, then the states they name
    assert kazoo.get_children("/isr_change_notification") == []
    assert all(controller._states[("t", p)][0].isr == (0,) for p in range(20))
    zk.reads.clear()
    controller._on_isr_changes(names)  # a listing made before they were deleted
    assert zk.reads == []


# ---------------------------------------------------------------- reassignments
# The controller's side alone: followers catching up are played by writing the
# state znode and an ISR change notification, as leaders do.

def _assignment(kazoo, topic):
    value = json.loads(kazoo.get(f"/brokers/topics/{topic}")[0])
    return ({int(p): r for p, r in value["partitions"].items()},
            {int(p): r for p, r in (value.get("adding_replicas") or {}).items()},
            {int(p): r for p, r in (value.get("removing_replicas") or {}).items()})


def _set_isr(kazoo, topic, isr, notify=True, leader=None):
    path = f"/brokers/topics/{topic}/partitions/0/state"
    state = json.loads(kazoo.get(path)[0])
    state["isr"] = isr
    if leader is not None:
        state["leader"] = leader
    kazoo.set(path, json.dumps(state).encode())
    if notify:
        kazoo.create("/isr_change_notification/isr_change_", json.dumps(
            {"version": 1, "partitions": [{"topic": topic, "partition": 0}]}).encode(),
            sequence=True)


def _four(cluster, kazoo, replicas):
    nodes = {i: cluster(i) for i in range(4)}
    active = wait_until(lambda: [n for n in nodes.values() if n.controller.active], what="controller")
    wait_until(lambda: len(kazoo.get_children("/brokers/ids")) == 4, what="4 brokers registered")
    _write_topic(kazoo, "t", {0: replicas})
    wait_until(lambda: _state(kazoo, "t", 0), what="t-0 online")
    controller = active[0].controller
    wait_until(lambda: controller._live == {0, 1, 2, 3}, what="the controller to see 4 brokers")
    return controller


def test_reassignment_completes_when_the_target_is_in_sync(cluster, kazoo):
    controller = _four(cluster, kazoo, [0, 1, 2])
    assert controller.reassign({("t", 0): [1, 2, 3]}, timeout=10) == {("t", 0): (0, None)}
    assert _assignment(kazoo, "t") == ({0: [1, 2, 3, 0]}, {0: [3]}, {0: [0]})
    assert set(controller.reassignments()) == {("t", 0)}
    # The new replica caught up, but the leader's notification got lost: the
    # controller finds out by itself.
    _set_isr(kazoo, "t", [0, 1, 2, 3], notify=False)
    wait_until(lambda: _assignment(kazoo, "t") == ({0: [1, 2, 3]}, {}, {}), what="completion")
    state = _state(kazoo, "t", 0)
    assert state["leader"] == 1 and sorted(state["isr"]) == [1, 2, 3]  # leader 0 moved off
    # the controller forgets the reassignment once its ZooKeeper write is done
    # (a moment after the znode shows it: failed once in a fresh clone's run)
    wait_until(lambda: controller.reassignments() == {}, what="the reassignment forgotten")


def test_reverting_drops_the_abandoned_replica_from_isr_and_leadership(cluster, kazoo):
    controller = _four(cluster, kazoo, [0, 1, 2])
    controller.reassign({("t", 0): [3, 1, 2]}, timeout=10)
    # 3 caught up and leads (a preferred election) while 0 and 2 fell behind; the
    # controller has not heard of it yet (its next write meets a newer version).
    _set_isr(kazoo, "t", [1, 3], notify=False, leader=3)
    # Back to the original replicas: a cancel, as Kafka treats it.
    assert controller.reassign({("t", 0): [0, 1, 2]}, timeout=10) == {("t", 0): (0, None)}
    assert _assignment(kazoo, "t") == ({0: [0, 1, 2]}, {}, {})
    state = _state(kazoo, "t", 0)
    assert (state["leader"], state["isr"]) == (1, [1]), state  # 3 is no replica any more
    assert controller.reassignments() == {}


def test_retargeting_to_replicas_in_sync_completes_at_once(cluster, kazoo):
    controller = _four(cluster, kazoo, [0, 1, 2])
    controller.reassign({("t", 0): [3, 1, 2]}, timeout=10)
    _set_isr(kazoo, "t", [0, 1, 3], notify=False, leader=3)
    controller.reassign({("t", 0): [0, 1, 3]}, timeout=10)
    assert _assignment(kazoo, "t") == ({0: [0, 1, 3]}, {}, {})
    state = _state(kazoo, "t", 0)
    assert state["leader"] == 3 and sorted(state["isr"]) == [0, 1, 3]


def test_cancel_refused_when_no_original_replica_is_in_sync(cluster, kazoo):
    controller = _four(cluster, kazoo, [0, 1])
    controller.reassign({("t", 0): [2, 3]}, timeout=10)
    _set_isr(kazoo, "t", [2], leader=2)  # the originals fell out; only 2 holds the data
    wait_until(lambda: not kazoo.get_children("/isr_change_notification"), what="ISR read")
    (code, message), = controller.reassign({("t", 0): None}, timeout=10).values()
    assert code == 39 and "in sync" in message  # INVALID_REPLICA_ASSIGNMENT
    assert _assignment(kazoo, "t")[0] == {0: [2, 3, 0, 1]}


def test_the_api_overrides_the_zookeeper_request_for_a_partition(cluster, kazoo):
    controller = _four(cluster, kazoo, [0, 1, 2])
    kazoo.create("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2, 3]}]}).encode())
    wait_until(lambda: _assignment(kazoo, "t")[1] == {0: [3]}, what="the znode's move started")
    assert controller.reassign({("t", 0): [0, 1, 3]}, timeout=10) == {("t", 0): (0, None)}
    wait_until(lambda: kazoo.exists("/admin/reassign_partitions") is None,
               what="the partition taken off /admin/reassign_partitions")
    assert _assignment(kazoo, "t") == ({0: [0, 1, 3, 2]}, {0: [3]}, {0: [2]})


def test_reassignment_validation(cluster, kazoo):
    controller = _four(cluster, kazoo, [0, 1, 2])
    cluster_nodes_down = 2
    assert controller.reassign({("t", 0): [0, 9]}, timeout=10)[("t", 0)][0] == 39
    assert controller.reassign({("t", 0): [0, 1]}, timeout=10,
                               allow_replication_factor_change=False)[("t", 0)][0] == 38
    # Only the replicas being added must be alive: moving off a dead broker is fine.
    kazoo.delete(f"/brokers/ids/{cluster_nodes_down}")  # as its session's end does
    wait_until(lambda: 2 not in controller._live, what="broker 2 gone for the controller")
    assert controller.reassign({("t", 0): [0, 1, 2]}, timeout=10)[("t", 0)][0] == 0
    assert controller.reassign({("t", 0): [3, 1, 2]}, timeout=10)[("t", 0)][0] == 0


def test_a_controller_whose_session_outlived_a_zookeeper_error_takes_office_again(
        cluster, kazoo, caplog):
    """A ZooKeeper error (here: one connection loss, injected into the active
    controller's next write) ends its term; its session, and so its
    /controller znode, live on, so no other broker can win and no watch fires.
    It stands again and takes office at a new epoch, instead of leaving the
    cluster without an acting controller until its session ends."""
    from kazoo.exceptions import ConnectionLoss
    nodes = {i: cluster(i) for i in range(2)}
    active = wait_until(lambda: [c] if (c := _controller(kazoo)) is not None
                        and nodes[c].controller.active else None, what="a controller")[0]
    _write_topic(kazoo, "t", {0: [0, 1]})
    wait_until(lambda: _state(kazoo, "t", 0), what="online")
    epoch = _epoch(kazoo)
    controller = nodes[active].controller
    real_transaction = controller.zk.transaction
    failures = []

    def lose_the_connection_once():
        if not failures:
            failures.append(1)
            raise ConnectionLoss()
        return real_transaction()
    controller.zk.transaction = lose_the_connection_once
    nodes[1 - active].stop()  # the controller must write: the partition's ISR shrinks
    wait_until(lambda: failures, what="the injected connection loss")
    wait_until(lambda: controller.active and _epoch(kazoo) > epoch, 15,
               "the same broker in office again at a new epoch")
    assert _controller(kazoo) == active
    state = wait_until(lambda: (s := _state(kazoo, "t", 0)) and s["isr"] == [active] and s,
                       what="the decision it could not write, made again")
    assert state["controller_epoch"] == _epoch(kazoo)
    # kazoo's ConnectionLoss() has no message: the log names the error's type
    assert any("ZooKeeper error handling" in r.getMessage()
               and r.getMessage().endswith(": ConnectionLoss") for r in caplog.records), \
        [r.getMessage() for r in caplog.records if "ZooKeeper error" in r.getMessage()]



def test_a_controller_znode_with_our_id_but_another_session_is_not_ours(cluster, kazoo):
    """The re-take compares ZooKeeper sessions, not broker ids: a /controller
    naming this broker but held by another session (a restarted broker's old
    one, a tool) keeps it out of office, and the epoch does not move."""
    from kazoo.exceptions import ConnectionLoss
    nodes = {i: cluster(i) for i in range(2)}
    active = wait_until(lambda: [c] if (c := _controller(kazoo)) is not None
                        and nodes[c].controller.active else None, what="a controller")[0]
    controller = nodes[active].controller
    data = kazoo.get("/controller")[0]
    real_transaction = controller.zk.transaction
    failures = []

    def lose_the_connection_once():
        if not failures:
            failures.append(1)
            # meanwhile another session takes /controller, with this broker's id
            kazoo.delete("/controller")
            kazoo.create("/controller", data, ephemeral=True)
            raise ConnectionLoss()
        return real_transaction()
    controller.zk.transaction = lose_the_connection_once
    # Its stands for office after the error (ELECT_AGAIN_S later): having looked at
    # /controller and found it another session's, it must stay out.
    stood_after_the_error = []
    real_try_elect = controller._try_elect

    def try_elect():
        real_try_elect()
        if failures:
            stood_after_the_error.append(controller.active)
    controller._try_elect = try_elect
    _write_topic(kazoo, "t", {0: [0, 1]})  # the controller must write
    wait_until(lambda: failures and not controller.active, what="the term ended")
    epoch = _epoch(kazoo)
    wait_until(lambda: stood_after_the_error, 15, "it to stand again after the error")
    assert stood_after_the_error[0] is False
    assert not controller.active and not nodes[1 - active].controller.active
    assert _epoch(kazoo) == epoch
    kazoo.delete("/controller")  # that session's znode goes: one of them takes office
    wait_until(lambda: any(n.controller.active for n in nodes.values()), what="a controller again")


def test_a_broker_death_during_the_topic_watches_of_a_take_over_is_handled_before_them(
        zookeeper, kazoo, monkeypatch):
    """Taking office, the controller watches each topic (a round trip each: 2 s
    for 30 topics on a busy broker at 30,000 partitions) a few per event, after
    its watch on the brokers is set: a broker that dies meanwhile has its
    partitions moved before the last topic's watch, not after all of them."""
    from samsa.broker.cluster import controller as controller_module
    from samsa.broker.metadata.zookeeper.writes import ZooKeeperWrites
    from samsa.testing.waiting import wait_until as wait

    monkeypatch.setattr(controller_module, "TOPIC_WATCHES_PER_EVENT", 1)
    kazoo.ensure_path("/brokers/topics")
    topics = [f"t{i}" for i in range(6)]
    for topic in topics:
        _write_topic(kazoo, topic, {0: [2, 1]})
    doomed = ZooKeeperMetadataStore(zookeeper.connect + ROOT, 2,
                                    BrokerEndpoint(2, "127.0.0.1", 9002), session_timeout_ms=4000)
    moved_before_last_watch = []

    watched: list[str] = []

    class DeathDuringWatches(ZooKeeperWrites):
        def watch_data(self, path, callback):
            if path.startswith("/brokers/topics/"):
                watched.append(path)
            if len(watched) == 1 and path == watched[0]:  # the first topic's watch
                assert _state(kazoo, "t0", 0)["leader"] == 2
                doomed.close()  # its session ends: /brokers/ids/2 goes now
            elif len(watched) == len(topics) and path == watched[-1]:  # the last one's
                try:
                    wait(lambda: _state(kazoo, "t0", 0)["leader"] == 1, 15,
                         "t0-0 moved while the topic watches are being set")
                    moved_before_last_watch.append(True)
                except AssertionError:
                    moved_before_last_watch.append(False)
            super().watch_data(path, callback)
    try:
        with _controller_writing_through(zookeeper, DeathDuringWatches):
            wait_until(lambda: moved_before_last_watch, 60, "the last topic's watch")
            assert moved_before_last_watch == [True]
            assert all(_state(kazoo, t, 0)["leader"] == 1 for t in topics)
    finally:
        doomed.close()
