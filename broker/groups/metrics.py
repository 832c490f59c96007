"""The group coordinator's gauges under Kafka 4's names (its
GroupCoordinatorMetrics, group-coordinator-metrics as the JMX exporter
names them): groups by protocol, consumer-protocol groups by state (share
groups' own gauges: share/metrics.py). Called
from the metrics thread: they only count over a copy of the groups."""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from .consumer.state import ConsumerGroupState
from .kinds import AnyGroup

Sample = tuple[dict[str, str], float]


def group_counts(groups: Iterable[AnyGroup], share_groups: int = 0) -> list[Sample]:
    """By protocol; share groups live in the share service (its count given)."""
    counts = Counter(g.group_type for g in list(groups))
    return [({"protocol": p}, float(counts.get(p, 0))) for p in ("classic", "consumer")] + [
        ({"protocol": "share"}, float(share_groups))]


def consumer_group_states(groups: Iterable[AnyGroup]) -> list[Sample]:
    counts = Counter(str(g.state).lower() for g in list(groups) if g.group_type == "consumer")
    return [({"state": str(s).lower()}, float(counts.get(str(s).lower(), 0)))
            for s in ConsumerGroupState if s is not ConsumerGroupState.DEAD]
