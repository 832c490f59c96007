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
A partition with no replica here is asked of its leader with ListOffsets, as
kafka_exporter asks, by RemoteWatermarks: off the scrape's thread and at most
every few seconds, so that lag trails by that much. Only partitions the group
committed to are listed (kafka_exporter also lists a subscribed partition
without a commit, with lag -1).
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol

from samsa.protocol.messages import ListOffsetsRequest
from samsa.protocol.model import TopicPartition
from samsa.protocol.model import ApiKey

from samsa.client.blocking import ClientError, SimpleClient

log = logging.getLogger(__name__)

Labels = dict[str, str]
Committed = Callable[[], dict[str, dict[TopicPartition, int]]]
LATEST = -1  # ListOffsets' "latest": the high watermark for a read-uncommitted client


class _Log(Protocol):
    high_watermark: int


LogOf = Callable[[str, int], "_Log | None"]


class RemoteWatermarks:
    """High watermarks of partitions with no replica on this broker, asked of
    their leaders. ``get`` answers from what the last lookup found and starts
    the next one in a thread when that is ``max_age`` seconds old (or a
    partition is new, after at least ``min_gap``): a scrape never waits on
    the network, and a slow or dead leader holds up no scrape."""

    def __init__(self, leader_of: Callable[[str, int], str | None], max_age: float = 10.0,
                 min_gap: float = 1.0, timeout: float = 5.0) -> None:
        self._leader_of = leader_of  # (topic, partition) -> "host:port" of its leader
        self._max_age, self._min_gap, self._timeout = max_age, min_gap, timeout
        self._lock = threading.Lock()
        self._known: dict[TopicPartition, int] = {}
        self._asked_at = float("-inf")
        self._busy = False

    def get(self, wanted: set[TopicPartition]) -> dict[TopicPartition, int]:
        now = time.monotonic()
        with self._lock:
            age = now - self._asked_at
            due = age >= self._max_age or (age >= self._min_gap and not wanted <= self._known.keys())
            if wanted and due and not self._busy:
                self._busy, self._asked_at = True, now
                threading.Thread(target=self._refresh, args=(set(wanted),), daemon=True,
                                 name="consumer-lag-watermarks").start()
            return {tp: self._known[tp] for tp in wanted if tp in self._known}

    def _refresh(self, wanted: set[TopicPartition]) -> None:
        found: dict[TopicPartition, int] = {}
        try:
            by_leader: dict[str, list[TopicPartition]] = {}
            for tp in sorted(wanted):
                address = self._leader_of(*tp)
                if address is not None:
                    by_leader.setdefault(address, []).append(tp)
            for address, tps in by_leader.items():
                try:
                    found.update(self._latest(address, tps))
                except (OSError, ValueError, ClientError) as e:
                    log.debug("consumer lag: no high watermarks from %s: %s", address, e)
        finally:
            with self._lock:
                # What a failed lookup did not renew stays (a lag a little old
                # beats a series that comes and goes); what is no longer wanted goes.
                self._known = {**{tp: v for tp, v in self._known.items() if tp in wanted},
                               **found}
                self._busy = False

    def _latest(self, address: str, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        L = ListOffsetsRequest
        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        with SimpleClient(address, client_id="samsa-consumer-lag", timeout=self._timeout) as c:
            resp = c.call(ApiKey.LIST_OFFSETS, L(replica_id=-1, isolation_level=0, topics=[
                L.ListOffsetsTopic(name=t, partitions=[
                    L.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1,
                                           timestamp=LATEST, max_num_offsets=1) for p in ps])
                for t, ps in by_topic.items()]))
        return {(t.name, p.partition_index): p.offset for t in resp.topics for p in t.partitions
                if p.error_code == 0}


def _rows(committed: Committed, log_of: LogOf, remote: RemoteWatermarks | None
          ) -> Iterator[tuple[str, str, int, int, int]]:
    """(group, topic, partition, committed offset, lag) for each committed
    partition whose high watermark is known."""
    offsets_by_group = committed()
    local: dict[TopicPartition, int] = {}
    elsewhere: set[TopicPartition] = set()
    for offsets in offsets_by_group.values():
        for tp in offsets:
            if tp in local or tp in elsewhere:
                continue
            copy = log_of(*tp)
            if copy is None:
                elsewhere.add(tp)
            else:
                local[tp] = copy.high_watermark
    watermarks = {**(remote.get(elsewhere) if remote is not None else {}), **local}
    for group, offsets in sorted(offsets_by_group.items()):
        for (topic, partition), offset in sorted(offsets.items()):
            hw = watermarks.get((topic, partition))
            if hw is None:
                continue
            # A follower's high watermark can trail a commit made against the
            # leader's: the group is not ahead of the log, this copy is behind.
            yield group, topic, partition, offset, max(0, hw - offset)


def register(metrics, committed: Committed, log_of: LogOf,
             remote: RemoteWatermarks | None = None) -> None:
    """Adds the three gauges to a BrokerMetrics; each is computed when scraped."""
    def current() -> list[tuple[Labels, float]]:
        return [({"consumergroup": g, "topic": t, "partition": str(p)}, off)
                for g, t, p, off, _ in _rows(committed, log_of, remote)]

    def lag() -> list[tuple[Labels, float]]:
        return [({"consumergroup": g, "topic": t, "partition": str(p)}, lag)
                for g, t, p, _, lag in _rows(committed, log_of, remote)]

    def lag_sum() -> list[tuple[Labels, float]]:
        sums: dict[tuple[str, str], int] = {}
        for g, t, _, _, lag in _rows(committed, log_of, remote):
            sums[(g, t)] = sums.get((g, t), 0) + lag
        return [({"consumergroup": g, "topic": t}, v) for (g, t), v in sums.items()]

    metrics.add_kafka_gauge("kafka_consumergroup_current_offset",
                            "Committed offset of a consumer group, per partition", current)
    metrics.add_kafka_gauge("kafka_consumergroup_lag",
                            "High watermark minus a consumer group's committed offset", lag)
    metrics.add_kafka_gauge("kafka_consumergroup_lag_sum",
                            "Consumer group lag summed over a topic's partitions", lag_sum)
