"""A real Prometheus server (Debian's ``prometheus`` package) as a child
process, and queries over its HTTP API.

    prom = PrometheusProcess(tmp_dir, config_text).start()
    prom.query('sum(rate(kafka_server_brokertopicmetrics_messagesin_total[1m]))')
"""
from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from .kafka_wire import free_port
from .process import ManagedProcess


def prometheus_binary() -> str | None:
    return shutil.which("prometheus")


class PrometheusProcess(ManagedProcess):
    def __init__(self, work_dir: Path, config_text: str, startup_timeout: float = 60.0):
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        config = self.work_dir / "prometheus.yml"
        config.write_text(config_text)
        port = free_port()
        argv = [prometheus_binary(), f"--config.file={config}",
                f"--storage.tsdb.path={self.work_dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}"]
        super().__init__("prometheus", argv, "127.0.0.1", port, self.work_dir / "prometheus.log",
                         startup_timeout=startup_timeout)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def probe(self) -> None:
        # /-/ready answers 503 until the TSDB is open; urllib's errors are OSErrors.
        urllib.request.urlopen(f"{self.url}/-/ready", timeout=2).read()

    def api(self, path: str, **params: str) -> dict:
        """GET /api/v1/<path>; the ``data`` of a successful answer, else AssertionError."""
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.load(r)
        except urllib.error.HTTPError as e:  # a bad query answers 400 with the reason
            body = json.load(e)
        assert body.get("status") == "success", f"{path} {params}: {body}"
        return body["data"]

    def query(self, promql: str) -> list[dict]:
        """An instant query's result vector (or matrix/scalar as Prometheus returns it)."""
        return self.api("query", query=promql)["result"]
