"""The server-side assignors of KIP-848 (``group.consumer.assignors``; a
member names one in ServerAssignor): ``uniform`` and ``range``.

An assignor sees each member's subscribed topic ids, each topic's partition
count and the previous target assignment, and answers a new target
assignment: every partition of a subscribed topic to exactly one member
subscribed to it.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from .state import Assignment, TopicPartitionId

Subscriptions = Mapping[str, set[uuid.UUID]]  # member id -> topic ids
Partitions = Mapping[uuid.UUID, int]  # topic id -> partition count
Assignor = Callable[[Subscriptions, Partitions, Mapping[str, Assignment]],
                    dict[str, Assignment]]


def uniform(subscriptions: Subscriptions, partitions: Partitions,
            previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Balanced and sticky: each member keeps what it had while that keeps the
    counts within one of each other, the rest goes to the least loaded."""
    members = sorted(subscriptions)
    out: dict[str, set[TopicPartitionId]] = {m: set() for m in members}
    owner: dict[TopicPartitionId, str] = {}
    for m in members:
        for topic_id, parts in previous.get(m, {}).items():
            if topic_id not in subscriptions[m] or topic_id not in partitions:
                continue
            for p in parts:
                tp = (topic_id, p)
                if p < partitions[topic_id] and tp not in owner:
                    owner[tp] = m
                    out[m].add(tp)
    candidates: dict[uuid.UUID, list[str]] = {
        t: [m for m in members if t in subscriptions[m]] for t in partitions}
    every = [(t, p) for t in sorted(partitions, key=str) if candidates[t]
             for p in range(partitions[t])]
    for tp in every:
        if tp not in owner:
            m = min(candidates[tp[0]], key=lambda c: (len(out[c]), c))
            owner[tp] = m
            out[m].add(tp)
    # move partitions from the most to the least loaded eligible member
    # until no move narrows the gap (bounded: each move narrows it)
    for _ in range(len(every) + 1):
        moved = False
        for m in sorted(members, key=lambda c: (-len(out[c]), c)):
            for tp in sorted(out[m], reverse=True, key=lambda x: (str(x[0]), x[1])):
                to = min(candidates[tp[0]], key=lambda c: (len(out[c]), c))
                if len(out[m]) - len(out[to]) > 1:
                    out[m].discard(tp)
                    out[to].add(tp)
                    moved = True
        if not moved:
            break
    return {m: _as_assignment(tps) for m, tps in out.items()}


def range_(subscriptions: Subscriptions, partitions: Partitions,
           previous: Mapping[str, Assignment]) -> dict[str, Assignment]:
    """Per topic, its subscribers in member id order each take a contiguous
    range; the first (count mod subscribers) take one more."""
    out: dict[str, Assignment] = {m: {} for m in subscriptions}
    for topic_id, count in partitions.items():
        subs = sorted(m for m, topics in subscriptions.items() if topic_id in topics)
        if not subs:
            continue
        quota, extra = divmod(count, len(subs))
        start = 0
        for i, m in enumerate(subs):
            n = quota + (1 if i < extra else 0)
            if n:
                out[m][topic_id] = set(range(start, start + n))
            start += n
    return out


def _as_assignment(tps: set[TopicPartitionId]) -> Assignment:
    out: Assignment = {}
    for t, p in tps:
        out.setdefault(t, set()).add(p)
    return out


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_}
