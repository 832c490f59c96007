"""The controller's leader and ISR decisions (Kafka's ZooKeeper-mode rules)."""
from __future__ import annotations

from samsa.broker.cluster.elections import (NO_LEADER, LeaderAndIsr, elect_for_shutdown,
                                      elect_offline, elect_preferred, initial_state,
                                      remove_from_isr)


def test_new_partition_led_by_first_live_replica():
    assert initial_state([2, 0, 1], {0, 1, 2}) == LeaderAndIsr(2, 0, (2, 0, 1))
    assert initial_state([2, 0, 1], {0, 1}) == LeaderAndIsr(0, 0, (0, 1))
    assert initial_state([2], {0, 1}) is None


def test_dead_leader_replaced_from_isr_in_assignment_order():
    state = LeaderAndIsr(1, 4, (1, 2, 0))
    assert elect_offline([1, 0, 2], state, {0, 2}) == LeaderAndIsr(0, 5, (2, 0))


def test_out_of_sync_replicas_never_lead_unless_unclean():
    state = LeaderAndIsr(1, 4, (1,))
    assert elect_offline([1, 0], state, {0}) == LeaderAndIsr(NO_LEADER, 5, (1,))
    assert elect_offline([1, 0], state, {0}, unclean=True) == LeaderAndIsr(0, 5, (0,))
    # Already offline: nothing to write until a replica in the ISR returns.
    offline = LeaderAndIsr(NO_LEADER, 5, (1,))
    assert elect_offline([1, 0], offline, {0}) is None
    assert elect_offline([1, 0], offline, {0, 1}) == LeaderAndIsr(1, 6, (1,))


def test_live_leader_is_left_alone():
    assert elect_offline([0, 1], LeaderAndIsr(0, 1, (0, 1)), {0}) is None


def test_dead_follower_leaves_isr_but_last_member_stays():
    assert remove_from_isr(LeaderAndIsr(0, 2, (0, 1)), 1) == LeaderAndIsr(0, 3, (0,))
    assert remove_from_isr(LeaderAndIsr(0, 2, (0,)), 0) == LeaderAndIsr(NO_LEADER, 3, (0,))
    assert remove_from_isr(LeaderAndIsr(0, 2, (0,)), 5) is None


def test_preferred_leader_returns_when_in_sync():
    assert elect_preferred([0, 1], LeaderAndIsr(1, 3, (1, 0)), {0, 1}) == LeaderAndIsr(0, 4, (1, 0))
    assert elect_preferred([0, 1], LeaderAndIsr(1, 3, (1,)), {0, 1}) is None
    assert elect_preferred([0, 1], LeaderAndIsr(0, 3, (0, 1)), {0, 1}) is None


def test_controlled_shutdown_moves_leadership_and_shrinks_isr():
    state = LeaderAndIsr(0, 1, (0, 1, 2))
    assert elect_for_shutdown([0, 1, 2], state, {0, 1, 2}, {0}) == LeaderAndIsr(1, 2, (1, 2))
    follower = LeaderAndIsr(1, 1, (1, 0))
    assert elect_for_shutdown([1, 0], follower, {0, 1}, {0}) == LeaderAndIsr(1, 2, (1,))
    alone = LeaderAndIsr(0, 1, (0,))
    assert elect_for_shutdown([0, 1], alone, {0, 1}, {0}) is None
