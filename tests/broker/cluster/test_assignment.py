"""Kafka's replica placement and its checks of explicit assignments."""
from __future__ import annotations

import collections
import random

import pytest

from samsa.broker.cluster.assignment import AssignmentError, assign_replicas, check_assignment


def test_rack_unaware_placement_matches_kafkas_rule():
    # 5 brokers, 10 partitions, RF 3, start 0, shift 0: Kafka's documented example
    # (leaders round-robin, followers shifted after every 5 partitions).
    got = assign_replicas([0, 1, 2, 3, 4], 10, 3, start=0, shift=0)
    assert got == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2]}


def test_leaders_and_replicas_are_balanced():
    got = assign_replicas([1, 2, 3], 6, 3, rng=random.Random(7))
    leaders = collections.Counter(r[0] for r in got.values())
    assert set(leaders.values()) == {2}
    assert all(sorted(r) == [1, 2, 3] for r in got.values())


def test_added_partitions_continue_the_pattern():
    whole = assign_replicas([0, 1, 2], 6, 2, start=1, shift=1)
    tail = assign_replicas([0, 1, 2], 3, 2, start=1, shift=1, first_partition=3)
    assert {p: whole[p] for p in (3, 4, 5)} == tail


def test_rack_aware_placement_spreads_each_partition_over_racks():
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    got = assign_replicas(list(racks), 12, 3, racks=racks, rng=random.Random(3))
    for replicas in got.values():
        assert len({racks[b] for b in replicas}) == 3
    leaders = collections.Counter(r[0] for r in got.values())
    assert set(leaders.values()) == {2}


def test_replication_factor_above_brokers_is_refused():
    with pytest.raises(AssignmentError, match="larger than available brokers: 2"):
        assign_replicas([0, 1], 1, 3)


def test_partial_rack_information_is_refused():
    with pytest.raises(AssignmentError, match="rack information"):
        assign_replicas([0, 1], 1, 1, racks={0: "a", 1: None})


@pytest.mark.parametrize("assignment, first, message", [
    ({0: [0], 2: [0]}, 0, "consecutive"),
    ({1: [0]}, 0, "consecutive"),
    ({0: [0, 1], 1: [1]}, 0, "same number of replicas"),
    ({0: [1, 1]}, 0, "Duplicate brokers"),
    ({0: [5]}, 0, r"Unknown broker\(s\) \[5\]"),
    ({0: []}, 0, "must not be empty"),
])
def test_bad_explicit_assignments(assignment, first, message):
    with pytest.raises(AssignmentError, match=message):
        check_assignment(assignment, [0, 1, 2], first)


def test_good_explicit_assignment():
    check_assignment({3: [0, 1], 4: [1, 2]}, [0, 1, 2], first_partition=3)
