"""A broker serves a partition from the moment its metadata names it leader
(Kafka's broker leads from the LeaderAndIsr that says so), not from the
moment its role worker next passes over every log: against a real ZooKeeper,
with real logs, and the worker not run at all after the change."""
from __future__ import annotations

import os

import pytest

from samsa.broker.metadata import BrokerEndpoint
from samsa.broker.metadata import zk_layout as z
from samsa.broker.metadata.zookeeper import ZooKeeperMetadataStore
from samsa.broker.partitions import PartitionLayer
from samsa.broker.replication.manager import ReplicaManager
from samsa.config.topic import TopicConfig
from samsa.protocol.errors import ErrorCode
from samsa.storage.manager import LogManager
from tests.broker.cluster.test_controller import ROOT, kazoo  # noqa: F401 - a fixture
from tests.support.waiting import wait_until

ME = 0


@pytest.fixture
def broker(zookeeper, kazoo, tmp_path):
    store = ZooKeeperMetadataStore(zookeeper.connect + ROOT, ME,
                                   BrokerEndpoint(ME, "127.0.0.1", 9000), session_timeout_ms=6000)
    logs = LogManager([str(tmp_path / "data")], TopicConfig(), ME, store.cluster_id)
    replicas = ReplicaManager(store, logs, ME, lambda t, p, events=3, followers=(): None, lag_time_max_ms=lambda: 10_000)
    try:
        yield store, logs, replicas, PartitionLayer(store, logs, ME, replicas)
    finally:
        replicas.stop()  # (a cut-off watch thread, if any)
        logs.shutdown()
        store.close()


def _write_state(kazoo, topic, leader, epoch, isr):
    path = z.partition_state_path(topic, 0)
    data = z.encode_partition_state(z.PartitionState(leader, epoch, tuple(isr), 1))
    if kazoo.exists(path):
        kazoo.set(path, data)
    else:
        kazoo.create(path, data, makepath=True)


@pytest.mark.parametrize("before", ["leading at an older epoch", "following"])
def test_a_partition_is_served_as_soon_as_the_metadata_names_this_broker_leader(
        broker, kazoo, before):
    store, logs, replicas, partitions = broker
    kazoo.create(z.topic_path("t"), z.encode_topic(z.TopicAssignment({0: [0, 1]})),
                 makepath=True)
    first_leader = ME if before.startswith("leading") else 1
    _write_state(kazoo, "t", first_leader, 0, [0, 1])
    wait_until(lambda: (m := store.partition("t", 0)) and m.leader == first_leader,
               what="the first state")
    meta = store.topic("t")
    replicas.log_opened(logs.create_log("t", 0, topic_id=meta.topic_id))  # as the worker does
    assert partitions.leader_log("t", 0).ok == (first_leader == ME)

    # The controller moves the partition to a new epoch led here (an ISR
    # shrink, a failover); the store learns it, the role worker has not run.
    _write_state(kazoo, "t", ME, 1, [0])
    wait_until(lambda: store.partition("t", 0).leader_epoch == 1, what="the new state")
    found = partitions.leader_log("t", 0)
    assert (found.error, found.leader_epoch) == (ErrorCode.NONE, 1)
    assert found.replica.leader_epoch == 1


def test_a_take_up_that_fails_answers_not_leader_instead_of_raising(broker, kazoo):
    """Taking up leadership writes the log's leader-epoch checkpoint; when
    that write fails (a failing disk; here the file's name is taken by a
    directory), the request that asked is answered NOT_LEADER_OR_FOLLOWER,
    as before the worker's pass, instead of the error escaping into its
    handler; the role worker logs the failure and tries again."""
    store, logs, replicas, partitions = broker
    kazoo.create(z.topic_path("t"), z.encode_topic(z.TopicAssignment({0: [0, 1]})),
                 makepath=True)
    _write_state(kazoo, "t", 1, 0, [0, 1])
    wait_until(lambda: (m := store.partition("t", 0)) and m.leader == 1, what="the first state")
    lg = logs.create_log("t", 0, topic_id=store.topic("t").topic_id)
    replicas.log_opened(lg)
    checkpoint = os.path.join(lg.dir, "leader-epoch-checkpoint")
    if os.path.exists(checkpoint):
        os.remove(checkpoint)
    os.makedirs(os.path.join(checkpoint, "taken"))
    _write_state(kazoo, "t", ME, 1, [0])
    wait_until(lambda: store.partition("t", 0).leader_epoch == 1, what="the new state")
    found = partitions.leader_log("t", 0)
    assert (found.error, found.leader_epoch) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, 1)


def test_a_session_fenced_leader_answers_not_leader_until_zookeeper_says_it_still_leads(
        broker, kazoo):
    """A leader whose ZooKeeper session is presumed expired (session_fence.py)
    refuses produces and its followers' fetches with NOT_LEADER_OR_FOLLOWER;
    connected again, it leads on only if the state znode still names it at the
    same epoch (a conditional write of its ISR against the real store)."""
    store, logs, replicas, partitions = broker
    kazoo.create(z.topic_path("t"), z.encode_topic(z.TopicAssignment({0: [0, 1]})),
                 makepath=True)
    _write_state(kazoo, "t", ME, 0, [0, 1])
    wait_until(lambda: (m := store.partition("t", 0)) and m.leader == ME, what="the first state")
    replicas.log_opened(logs.create_log("t", 0, topic_id=store.topic("t").topic_id))
    assert partitions.leader_log("t", 0).ok

    replicas.cut_off()
    replicas._fence_abandoned(-1)  # follower 1 never caught up: as the ISR thread would
    assert partitions.leader_log("t", 0).error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert partitions.replica_log("t", 0, 0, replica_id=1).error == \
        ErrorCode.NOT_LEADER_OR_FOLLOWER
    replicas.resume()
    replicas._check_resume(replicas._resumes.pop())  # as the ISR thread does
    assert partitions.leader_log("t", 0).ok  # nothing changed meanwhile: it leads on

    replicas.cut_off()
    replicas._fence_abandoned(-1)  # follower 1 never caught up: as the ISR thread would
    _write_state(kazoo, "t", 1, 1, [1])  # meanwhile the controller elected broker 1
    replicas.resume()
    replicas._check_resume(replicas._resumes.pop())
    assert replicas.leader("t", 0).fenced
    wait_until(lambda: store.partition("t", 0).leader_epoch == 1, what="the new state")
    # no longer named leader: a follower's fetch here is sent to broker 1
    assert partitions.replica_log("t", 0, 0, replica_id=1).error == \
        ErrorCode.NOT_LEADER_OR_FOLLOWER


class _Followed:
    """What the role passes tell the replica fetcher: the partitions followed
    now, with their leader and epoch."""

    def __init__(self) -> None:
        self.now: dict[tuple[str, int], tuple[int, int]] = {}

    def follow(self, log, leader: int, leader_epoch: int) -> None:
        self.now[(log.topic, log.partition)] = (leader, leader_epoch)

    def unfollow(self, topic: str, partition: int) -> None:
        self.now.pop((topic, partition), None)

    def keep_only(self, keys) -> None:
        self.now = {k: v for k, v in self.now.items() if k in keys}


@pytest.mark.parametrize("leaving", [False, True])
def test_a_broker_in_controlled_shutdown_stops_following_a_partition_it_left_the_isr_of(
        broker, kazoo, leaving):
    """Kafka's controller sends a stopping broker StopReplica for the
    partitions it takes it out of the ISR of. Followed on, the replica caught
    up with the leader, which took it back into the ISR (found by CI: a
    controlled shutdown left the stopping broker in the ISR of a partition
    whose leadership had just moved off it)."""
    store, logs, replicas, _ = broker
    followed = _Followed()
    replicas.follower = followed
    kazoo.create(z.topic_path("t"), z.encode_topic(z.TopicAssignment({0: [1, 0]})),
                 makepath=True)
    _write_state(kazoo, "t", 1, 0, [1, 0])
    wait_until(lambda: (m := store.partition("t", 0)) and m.leader == 1, what="the first state")
    replicas.log_opened(logs.create_log("t", 0, topic_id=store.topic("t").topic_id))
    assert followed.now == {("t", 0): (1, 0)}
    if leaving:
        replicas.leaving()
    replicas.sync_roles([("t", 0)])
    assert followed.now == {("t", 0): (1, 0)}, "still in the ISR: followed on"

    _write_state(kazoo, "t", 1, 1, [1])  # the controller takes it out of the ISR
    wait_until(lambda: store.partition("t", 0).leader_epoch == 1, what="the new state")
    replicas.sync_roles([("t", 0)])
    assert followed.now == ({} if leaving else {("t", 0): (1, 1)})
