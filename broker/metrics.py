"""Prometheus metrics: request counts per API, and the network layer's counters.

Served over HTTP on `metrics.port` when it is set (0, the default, disables it).
Each broker gets its own registry, so tests can run several in one process.
"""
from __future__ import annotations

import logging

from prometheus_client import CollectorRegistry, Counter, start_http_server
from prometheus_client.core import GaugeMetricFamily

log = logging.getLogger("broker.metrics")


class BrokerMetrics:
    def __init__(self):
        self.registry = CollectorRegistry()
        self._requests = Counter("samsa_requests_total", "Requests received, by API key",
                                 ["api_key"], registry=self.registry)
        self._children = {}
        self._sources = []
        self.registry.register(self)

    def request(self, api_key: int) -> None:
        child = self._children.get(api_key)
        if child is None:
            child = self._children[api_key] = self._requests.labels(api_key=str(api_key))
        child.inc()

    def add_source(self, name: str, fn) -> None:
        """A gauge read when scraped: `fn()` returns its current value."""
        self._sources.append((name, fn))

    def collect(self):  # called by prometheus_client on scrape
        for name, fn in self._sources:
            g = GaugeMetricFamily(f"samsa_{name}", name.replace("_", " "))
            try:
                g.add_metric([], float(fn()))
            except Exception:  # noqa: BLE001 - a broken gauge must not break a scrape
                continue
            yield g

    def describe(self):
        return []

    def serve(self, port: int, host: str = "0.0.0.0") -> None:
        start_http_server(port, addr=host, registry=self.registry)
        log.info("metrics on http://%s:%d/metrics", host, port)
