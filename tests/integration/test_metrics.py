"""Prometheus metrics: served on metrics.port, counting what the broker did."""
from __future__ import annotations

import re
import urllib.request

from kafka import KafkaProducer

from tests.support.kafka_wire import free_port


def _scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def _value(text, name, labels=""):
    m = re.search(rf"^{re.escape(name + labels)} ([0-9.e+]+)$", text, re.M)
    return float(m.group(1)) if m else None


def test_metrics_count_requests_and_partitions(broker_factory):
    port = free_port()
    broker = broker_factory({"metrics.port": str(port), "metrics.host": "127.0.0.1"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        producer.send("metered", b"x").get(timeout=30)
        producer.send("metered", b"y").get(timeout=30)
    finally:
        producer.close()
    text = _scrape(port)
    assert _value(text, "samsa_requests_total", '{api_key="0"}') >= 1  # Produce
    assert _value(text, "samsa_requests_total", '{api_key="3"}') >= 1  # Metadata
    assert _value(text, "samsa_partitions") >= 1
    assert _value(text, "samsa_connections_accepted") >= 1
