"""The reassignment rules (broker/cluster/reassignment.py), as Kafka's KIP-455
controller applies them."""
from samsa.broker.cluster import reassignment as ra
from samsa.broker.cluster.elections import NO_LEADER, LeaderAndIsr


def test_replica_list_while_moving_is_target_first_then_the_ones_leaving():
    r = ra.Reassignment(original=(0, 1, 2), target=(1, 2, 3))
    assert r.full == (1, 2, 3, 0)
    assert r.adding == (3,) and r.removing == (0,)


def test_a_running_reassignment_reads_back_from_the_topic_znode():
    r = ra.Reassignment(original=(0, 1, 2), target=(3, 4))
    assert ra.from_znode(r.full, r.adding, r.removing) == r
    assert ra.from_znode((0, 1, 2), (), ()) is None


def test_targets_kafka_refuses():
    live = {0, 1, 2}
    assert ra.check_target([], live) is not None
    assert ra.check_target([1, 1], live) is not None
    assert ra.check_target([0, -1], live) is not None
    assert "not alive: [7]" in ra.check_target([0, 7], live)
    assert ra.check_target([2, 0], live) is None


def test_a_new_target_replaces_a_running_one_and_keeps_its_original():
    running = ra.Reassignment((0, 1, 2), (1, 2, 3))
    assert ra.begin((1, 2, 3, 0), running, (1, 2, 4)) == ra.Reassignment((0, 1, 2), (1, 2, 4))
    assert ra.begin((0, 1, 2), None, (0, 1, 2)) is None  # nothing to move


def test_complete_once_every_target_replica_is_in_sync():
    r = ra.Reassignment((0, 1, 2), (1, 2, 3))
    assert not ra.is_complete(r, LeaderAndIsr(0, 4, (0, 1, 2)))
    assert ra.is_complete(r, LeaderAndIsr(0, 4, (0, 1, 2, 3)))


def test_finishing_moves_leadership_off_a_removed_leader_and_bumps_the_epoch():
    after = ra.finish((1, 2, 3), LeaderAndIsr(0, 4, (0, 1, 2, 3)), live={0, 1, 2, 3})
    assert after == LeaderAndIsr(1, 5, (1, 2, 3))
    kept = ra.finish((2, 1, 3), LeaderAndIsr(1, 4, (0, 1, 2, 3)), live={0, 1, 2, 3})
    assert kept == LeaderAndIsr(1, 5, (1, 2, 3))  # a leader that stays keeps leading


def test_finishing_with_no_live_in_sync_target_leaves_the_partition_offline():
    after = ra.finish((0, 1), LeaderAndIsr(2, 4, (0, 1, 2)), live={2})
    assert after.leader == NO_LEADER and after.leader_epoch == 5


def test_replicas_staying_on_or_leaving_a_dead_broker_are_allowed():
    assert ra.check_target([0, 1], live={0}, current=[0, 1, 2]) is None
    assert "not alive: [3]" in ra.check_target([0, 3], live={0}, current=[0, 1])


def test_cancel_needs_an_original_replica_alive_and_in_sync():
    r = ra.Reassignment((0, 1), (2, 3))
    assert ra.can_cancel(r, LeaderAndIsr(2, 3, (1, 2)), live={1, 2})
    assert not ra.can_cancel(r, LeaderAndIsr(2, 3, (2,)), live={0, 1, 2})
    assert not ra.can_cancel(r, LeaderAndIsr(2, 3, (1, 2)), live={2})
