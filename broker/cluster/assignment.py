"""Where a new partition's replicas go: Apache Kafka's placement rule.

Kafka spreads replicas so that leaders are balanced and no two partitions
have the same follower order: the first replica of partition p is broker
``(start + p) mod n`` of the sorted broker list, and the followers are the
brokers at growing distances from it, the distance shifted once every n
partitions. With racks (``broker.rack`` on every broker) the broker list is
first interleaved rack by rack, and a follower is skipped while a rack or a
broker not yet holding a replica of the partition remains.

``start`` and ``shift`` default to random values, as Kafka's do; tests fix
them to check placements.
"""
from __future__ import annotations

import random
from typing import Mapping, Sequence


class AssignmentError(ValueError):
    """The request cannot be placed (Kafka answers INVALID_REPLICATION_FACTOR
    or INVALID_REPLICA_ASSIGNMENT)."""


def assign_replicas(brokers: Sequence[int], num_partitions: int, replication_factor: int, *,
                    racks: Mapping[int, str | None] | None = None, first_partition: int = 0,
                    start: int | None = None, shift: int | None = None,
                    rng: random.Random | None = None) -> dict[int, list[int]]:
    """Replica lists for partitions ``first_partition ..`` (``num_partitions`` of them)."""
    if num_partitions <= 0:
        raise AssignmentError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise AssignmentError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise AssignmentError(f"Replication factor: {replication_factor} larger than available "
                              f"brokers: {len(brokers)}.")
    rng = rng or random.Random()
    rack_of = {b: (racks or {}).get(b) for b in brokers}
    with_rack = [b for b in brokers if rack_of[b] is not None]
    if with_rack and len(with_rack) != len(brokers):
        raise AssignmentError("Not all brokers have rack information for replica rack aware "
                              "assignment.")
    if with_rack:
        return _rack_aware(brokers, rack_of, num_partitions, replication_factor,
                           first_partition, start, shift, rng)
    ordered = sorted(brokers)
    n = len(ordered)
    return {p: [ordered[first]] + [ordered[_follower(first, shift, j, n)]
                                   for j in range(replication_factor - 1)]
            for p, first, shift in _leader_positions(n, first_partition, num_partitions,
                                                     start, shift, rng)}


def _leader_positions(n: int, first_partition: int, num_partitions: int, start: int | None,
                      shift: int | None, rng: random.Random):
    """(partition, index of its first replica, follower shift) for each new
    partition: leaders round-robin from ``start``, the shift growing by one
    every ``n`` partitions so follower orders differ."""
    start = rng.randrange(n) if start is None else start
    shift = rng.randrange(n) if shift is None else shift
    for p in range(first_partition, first_partition + num_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        yield p, (p + start) % n, shift


def _follower(first: int, shift: int, j: int, n: int) -> int:
    # Never the first replica itself: distances run 1 .. n-1.
    return (first + 1 + (shift + j) % (n - 1)) % n


def _interleave_racks(brokers: Sequence[int], rack_of: Mapping[int, str | None]) -> list[int]:
    """Brokers taken one per rack in turn (racks and brokers sorted)."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(brokers):
        by_rack.setdefault(str(rack_of[b]), []).append(b)
    queues = [by_rack[r] for r in sorted(by_rack)]
    result: list[int] = []
    while len(result) < len(brokers):
        for q in queues:
            if q:
                result.append(q.pop(0))
    return result


def _rack_aware(brokers, rack_of, num_partitions, replication_factor, first_partition,
                start, shift, rng) -> dict[int, list[int]]:
    arranged = _interleave_racks(brokers, rack_of)
    n = len(arranged)
    num_racks = len({rack_of[b] for b in brokers})
    result: dict[int, list[int]] = {}
    for p, first, part_shift in _leader_positions(n, first_partition, num_partitions, start,
                                                  shift, rng):
        leader = arranged[first]
        replicas = [leader]
        racks_used = {rack_of[leader]}
        brokers_used = {leader}
        k = 0
        while len(replicas) < replication_factor:
            # The shift steps a whole round of racks at a time, so followers
            # land on other racks first.
            broker = arranged[_follower(first, part_shift * num_racks, k, n)]
            k += 1
            rack = rack_of[broker]
            # Prefer a rack without a replica, then a broker without one.
            if ((rack not in racks_used or len(racks_used) == num_racks)
                    and (broker not in brokers_used or len(brokers_used) == n)):
                replicas.append(broker)
                racks_used.add(rack)
                brokers_used.add(broker)
        result[p] = replicas
    return result


def check_assignment(assignment: Mapping[int, Sequence[int]], live_brokers: Sequence[int],
                     first_partition: int = 0) -> None:
    """An explicit assignment (CreateTopics / CreatePartitions) as Kafka
    checks it; raises AssignmentError saying what is wrong."""
    if not assignment:
        raise AssignmentError("No replica assignment given.")
    expected = list(range(first_partition, first_partition + len(assignment)))
    if sorted(assignment) != expected:
        raise AssignmentError(f"Partitions should be a consecutive 0-based integer sequence "
                              f"starting at {first_partition}, got {sorted(assignment)}.")
    sizes = {len(r) for r in assignment.values()}
    if len(sizes) != 1:
        raise AssignmentError("All partitions should have the same number of replicas.")
    if 0 in sizes:
        raise AssignmentError("Replica lists must not be empty.")
    live = set(live_brokers)
    for p, replicas in sorted(assignment.items()):
        if len(set(replicas)) != len(replicas):
            raise AssignmentError(f"Duplicate brokers not allowed in replica assignment: "
                                  f"{', '.join(map(str, replicas))} for partition id {p}.")
        unknown = [b for b in replicas if b not in live]
        if unknown:
            raise AssignmentError(f"Unknown broker(s) {unknown} in replica assignment of "
                                  f"partition {p}; live brokers: {sorted(live)}.")
