"""Prometheus metrics, under the names Apache Kafka's JMX exporter gives them,
so dashboards and alerts written for Kafka work unchanged:

- kafka_network_requestmetrics_requests_total{request} and the request time
  histogram kafka_network_requestmetrics_totaltimems{request} (buckets in ms);
- kafka_server_brokertopicmetrics_messagesin_total / bytesin_total /
  bytesout_total, per topic and for the broker as a whole (no topic label);
  bytes out are consumers' only, and followers' fetches are
  kafka_server_brokertopicmetrics_replicationbytesout_total (broker-wide), as
  in Kafka;
- gauges read when scraped: partition and leader counts, under-replicated
  partitions, the active controller count and (on the controller) offline
  partitions, consumer groups, each partition's log size.

The samsa_* names of earlier versions stay (requests by API key, the network
layer's counters). Served over HTTP on `metrics.port` when it is set (0, the
default, disables it). Each broker gets its own registry, so tests can run
several in one process.

Counters are updated on the request path by several network threads at
once. Each thread counts into its own plain dicts (no lock, no contention) and
a scrape adds them up: about a microsecond per request, where
prometheus_client's locked counters and histogram took four.
"""
from __future__ import annotations

import bisect
import logging
import time
from typing import Callable, Iterable

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily)

from .per_thread import PerThread

log = logging.getLogger("broker.metrics")

# Request times in milliseconds, as Kafka's TotalTimeMs (a fetch may long-poll
# for max.wait.ms, 500 by default, so the top buckets reach past that).
_TIME_BUCKETS_MS = (0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
_TOPIC = "kafka_server_brokertopicmetrics_"

Gauge = Callable[[], float]
LabelledGauge = Callable[[], Iterable[tuple[dict[str, str], float]]]


class _Tally:
    """One thread's counts since the broker started."""
    __slots__ = ("by_key", "by_name", "time_buckets", "time_sum", "messages_in", "bytes_in",
                 "bytes_out", "replication_bytes_out")

    def __init__(self) -> None:
        self.by_key: dict[int, int] = {}
        self.by_name: dict[str, int] = {}
        self.time_buckets: dict[str, list[int]] = {}  # per bucket, the last one is +Inf
        self.time_sum: dict[str, float] = {}
        self.messages_in: dict[str, int] = {}
        self.bytes_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        self.replication_bytes_out = 0


def _add(into: dict, counts: dict) -> None:
    for k, v in list(counts.items()):
        into[k] = into.get(k, 0) + v


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._tallies = PerThread(_Tally)
        self._tally = self._tallies.mine  # (bound once: it is on every request's path)
        self._sources: list[tuple[str, Gauge]] = []
        self._kafka_gauges: list[tuple[str, str, LabelledGauge]] = []
        self.registry.register(self)

    # ------------------------------------------------------------ request path

    def request(self, api_key: int, api_name: str) -> float:
        """A request arrived; returns its start time for request_done()."""
        tally = self._tally()
        tally.by_key[api_key] = tally.by_key.get(api_key, 0) + 1
        tally.by_name[api_name] = tally.by_name.get(api_name, 0) + 1
        return time.monotonic()

    def request_done(self, api_name: str, started: float) -> None:
        ms = (time.monotonic() - started) * 1000
        tally = self._tally()
        buckets = tally.time_buckets.get(api_name)
        if buckets is None:
            buckets = tally.time_buckets[api_name] = [0] * (len(_TIME_BUCKETS_MS) + 1)
        buckets[bisect.bisect_left(_TIME_BUCKETS_MS, ms)] += 1
        tally.time_sum[api_name] = tally.time_sum.get(api_name, 0.0) + ms

    def produced(self, topic: str, records: int, size: int) -> None:
        tally = self._tally()
        tally.messages_in[topic] = tally.messages_in.get(topic, 0) + records
        tally.bytes_in[topic] = tally.bytes_in.get(topic, 0) + size

    def fetched(self, topic: str, size: int) -> None:
        tally = self._tally()
        tally.bytes_out[topic] = tally.bytes_out.get(topic, 0) + size

    def replicated_out(self, size: int) -> None:
        """Bytes a follower fetched from this leader."""
        self._tally().replication_bytes_out += size

    def _counters(self):
        tallies = self._tallies.every()
        by_key, by_name, sums, m_in, b_in, b_out = {}, {}, {}, {}, {}, {}
        buckets: dict[str, list[int]] = {}
        replication_out = sum(t.replication_bytes_out for t in tallies)
        for t in tallies:
            _add(by_key, t.by_key)
            _add(by_name, t.by_name)
            _add(sums, t.time_sum)
            _add(m_in, t.messages_in)
            _add(b_in, t.bytes_in)
            _add(b_out, t.bytes_out)
            for name, counts in list(t.time_buckets.items()):
                into = buckets.setdefault(name, [0] * len(counts))
                for i, c in enumerate(counts):
                    into[i] += c
        c = CounterMetricFamily("samsa_requests", "Requests received, by API key",
                                labels=["api_key"])
        for key, v in sorted(by_key.items()):
            c.add_metric([str(key)], v)
        yield c
        c = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                "Requests received, by API", labels=["request"])
        for name, v in sorted(by_name.items()):
            c.add_metric([name], v)
        yield c
        h = HistogramMetricFamily(
            "kafka_network_requestmetrics_totaltimems",
            "Time from a request's arrival to its response, by API, in milliseconds",
            labels=["request"])
        for name, counts in sorted(buckets.items()):
            cumulative, total = [], 0
            for bound, n in zip([*map(str, _TIME_BUCKETS_MS), "+Inf"], counts):
                total += n
                cumulative.append((bound, total))
            h.add_metric([name], cumulative, sums.get(name, 0.0))
        yield h
        for suffix, help_text, counts in (("messagesin", "Records appended", m_in),
                                          ("bytesin", "Bytes appended by producers", b_in),
                                          ("bytesout", "Bytes sent to consumers", b_out)):
            c = CounterMetricFamily(_TOPIC + suffix, help_text + " (topic=\"\": all topics)",
                                    labels=["topic"])
            c.add_metric([""], sum(counts.values()))
            for topic, v in sorted(counts.items()):
                c.add_metric([topic], v)
            yield c
        c = CounterMetricFamily(_TOPIC + "replicationbytesout",
                                "Bytes sent to followers (replication)")
        c.add_metric([], replication_out)
        yield c

    # ------------------------------------------------------------ scraped gauges

    def add_source(self, name: str, fn: Gauge) -> None:
        """A samsa_<name> gauge read when scraped: `fn()` returns its current value."""
        self._sources.append((name, fn))

    def add_kafka_gauge(self, name: str, help_text: str, fn: LabelledGauge) -> None:
        """A gauge under Kafka's name, read when scraped: `fn()` yields
        (labels, value) pairs ({} for an unlabelled gauge)."""
        self._kafka_gauges.append((name, help_text, fn))

    def collect(self):  # called by prometheus_client on scrape
        yield from self._counters()
        for name, fn in self._sources:
            g = GaugeMetricFamily(f"samsa_{name}", name.replace("_", " "))
            try:
                g.add_metric([], float(fn()))
            except Exception:  # a broken gauge must not break a scrape
                continue
            yield g
        for name, help_text, fn in self._kafka_gauges:
            try:
                samples = list(fn())
            except Exception:  # a broken gauge must not break a scrape
                log.debug("gauge %s failed", name, exc_info=True)
                continue
            # each sample with its own labels: one Kafka metric name may
            # carry several (connection-accept-rate per listener and per ip)
            g = GaugeMetricFamily(name, help_text)
            for values, value in samples:
                g.add_sample(name, {k: str(values[k]) for k in sorted(values)}, float(value))
            yield g

    def describe(self):
        return []

    def serve(self, port: int, host: str = "0.0.0.0") -> None:
        start_http_server(port, addr=host, registry=self.registry)
        log.info("metrics on http://%s:%d/metrics", host, port)
