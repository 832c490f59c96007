"""The provisioned Grafana dashboard's queries, and the metric names they and a
broker's /metrics use: so a test can check that every panel reads something a
broker really exports."""
from __future__ import annotations

import json
import re
import urllib.request

from .broker_process import REPO_ROOT

DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "dashboards" / "samsa.json"

_NOT_METRICS = {"sum", "max", "min", "avg", "count", "rate", "irate", "increase",
                "histogram_quantile", "by", "without", "on", "ignoring", "group_left",
                "group_right", "bool", "and", "or", "unless", "offset"}
# Series Prometheus itself adds for every target (not in a broker's /metrics).
PROMETHEUS_OWN = {"up"}


def expressions() -> list[tuple[str, str]]:
    """(panel title, PromQL) for every query in the dashboard."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [(p["title"], t["expr"]) for p in panels for t in p.get("targets", [])]


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects. Anything not a known
    function or keyword counts as a metric name, so an unknown word fails."""
    e = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)            # string literals
    e = re.sub(r"\{[^}]*\}", "", e)                         # label matchers
    e = re.sub(r"\b(?:by|without|on|ignoring)\s*\([^)]*\)", "", e)  # grouping labels
    e = re.sub(r"\[[^]]*\]", "", e)                         # range durations
    return set(re.findall(r"\b[A-Za-z_:][A-Za-z0-9_:]*", e)) - _NOT_METRICS


def exported_names(metrics_hosts: list[str]) -> set[str]:
    """Names with at least one sample on any of the brokers' /metrics."""
    names = set()
    for host in metrics_hosts:
        with urllib.request.urlopen(f"http://{host}/metrics", timeout=10) as r:
            for line in r.read().decode().splitlines():
                if line and not line.startswith("#"):
                    names.add(re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line).group())
    return names


def unexported(metrics_hosts: list[str]) -> list[str]:
    """One line per dashboard query that names a metric no broker exports."""
    exported = exported_names(metrics_hosts) | PROMETHEUS_OWN
    out = []
    for title, expr in expressions():
        unknown = metric_names(expr) - exported
        if unknown:
            out.append(f"panel {title!r}: {sorted(unknown)} not in any broker's /metrics ({expr})")
    return out
