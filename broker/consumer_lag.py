"""Consumer lag as metrics, under the names the community kafka_exporter
publishes, so lag dashboards and alerts written for Kafka work unchanged:

- kafka_consumergroup_current_offset{consumergroup,topic,partition}: the
  group's committed offset;
- kafka_consumergroup_lag{consumergroup,topic,partition}: the partition's
  high watermark minus that offset;
- kafka_consumergroup_lag_sum{consumergroup,topic}: the lag summed over the
  topic's partitions.

kafka_exporter is a client that asks every coordinator and every leader; here
each broker publishes the groups it coordinates, so a cluster's series come
from all brokers together and never twice (a group has one coordinator).

The high watermark is read from this broker's copy of the partition: the
leader's, or a follower's (which trails the leader's by one fetch round).
A partition with no replica on the coordinator is left out (asking its leader
on every scrape would put network calls in the scrape): with replication
factor 3 on three brokers, as in docker-compose.yml, every partition has one.
Only partitions the group committed to are listed (kafka_exporter also lists
a subscribed partition without a commit, with lag -1).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol

Labels = dict[str, str]
Committed = Callable[[], dict[str, dict[tuple[str, int], int]]]


class _Log(Protocol):
    high_watermark: int


LogOf = Callable[[str, int], "_Log | None"]


def _rows(committed: Committed, log_of: LogOf) -> Iterator[tuple[str, str, int, int, int]]:
    """(group, topic, partition, committed offset, lag) for each committed
    partition held here."""
    for group, offsets in sorted(committed().items()):
        for (topic, partition), offset in sorted(offsets.items()):
            log = log_of(topic, partition)
            if log is None:
                continue
            # A follower's high watermark can trail a commit made against the
            # leader's: the group is not ahead of the log, this copy is behind.
            yield group, topic, partition, offset, max(0, log.high_watermark - offset)


def register(metrics, committed: Committed, log_of: LogOf) -> None:
    """Adds the three gauges to a BrokerMetrics; each is computed when scraped."""
    def current() -> list[tuple[Labels, float]]:
        return [({"consumergroup": g, "topic": t, "partition": str(p)}, off)
                for g, t, p, off, _ in _rows(committed, log_of)]

    def lag() -> list[tuple[Labels, float]]:
        return [({"consumergroup": g, "topic": t, "partition": str(p)}, lag)
                for g, t, p, _, lag in _rows(committed, log_of)]

    def lag_sum() -> list[tuple[Labels, float]]:
        sums: dict[tuple[str, str], int] = {}
        for g, t, _, _, lag in _rows(committed, log_of):
            sums[(g, t)] = sums.get((g, t), 0) + lag
        return [({"consumergroup": g, "topic": t}, v) for (g, t), v in sums.items()]

    metrics.add_kafka_gauge("kafka_consumergroup_current_offset",
                            "Committed offset of a consumer group, per partition", current)
    metrics.add_kafka_gauge("kafka_consumergroup_lag",
                            "High watermark minus a consumer group's committed offset", lag)
    metrics.add_kafka_gauge("kafka_consumergroup_lag_sum",
                            "Consumer group lag summed over a topic's partitions", lag_sum)
