"""A samsa broker as a child process, the way a user runs it.

The contract with the broker's CLI: ``python -m samsa server FILE --override key=value ...``.
We write a minimal properties file (listener on 127.0.0.1:<free port>, one log dir
in the test's temp dir) and pass the test's extra settings as --override, which wins
over the file. Readiness = the port answers a hand-built ApiVersions v0 request.

    b = BrokerProcess(tmp_dir, overrides={"num.partitions": "3"}).start()
    b.bootstrap          # "127.0.0.1:PORT"
    b.kill(); b.start()  # crash + recovery, same port and data dir
    b.stop()             # SIGTERM, then SIGKILL after a grace period
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from .kafka_wire import free_port
from .process import ManagedProcess

REPO_ROOT = Path(__file__).resolve().parent.parent.parent


def _override_list(overrides: Mapping[str, object] | Sequence[str] | None) -> list[str]:
    if not overrides:
        return []
    if isinstance(overrides, Mapping):
        return [f"{k}={v}" for k, v in overrides.items()]
    return list(overrides)


class BrokerProcess(ManagedProcess):
    """One samsa broker. ``work_dir`` holds server.properties, data/ and broker.log."""

    def __init__(self, work_dir: Path, port: int | None = None,
                 overrides: Mapping[str, object] | Sequence[str] | None = None,
                 broker_id: int = 0, startup_timeout: float = 30.0, python: str = sys.executable,
                 host: str = "127.0.0.1", launcher: Sequence[str] = ()):
        """``host``: the address it listens on and advertises; ``launcher``: argv that
        runs the broker's command (``ip netns exec NS``: tests/support/netns.py)."""
        self.work_dir = Path(work_dir)
        self.data_dir = self.work_dir / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        port = port or free_port()
        self.config_path = self.work_dir / "server.properties"
        self.config_path.write_text(
            "# written by tests/support/broker_process.py\n"
            f"broker.id={broker_id}\n"
            f"listeners=PLAINTEXT://{host}:{port}\n"
            f"advertised.listeners=PLAINTEXT://{host}:{port}\n"
            f"log.dirs={self.data_dir}\n")
        self.overrides = _override_list(overrides)
        argv = [*launcher, python, "-m", "samsa", "server", str(self.config_path)]
        for kv in self.overrides:
            argv += ["--override", kv]
        # cwd = the repo root so "-m samsa" imports this checkout's broker package.
        # Unbuffered, so the log tail in an error message shows the broker's last words.
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        super().__init__("samsa broker", argv, host, port, self.work_dir / "broker.log",
                         env=env, cwd=REPO_ROOT, startup_timeout=startup_timeout)


@contextlib.contextmanager
def broker_in_temp_dir(prefix: str, port: int | None = None,
                       overrides: Mapping[str, object] | None = None,
                       start: bool = True, metrics: bool = False) -> Iterator[BrokerProcess]:
    """A broker in a fresh temporary directory (started unless ``start`` is
    False), stopped and its directory removed afterwards, whatever happened.
    ``metrics``: with a Prometheus page on 127.0.0.1 at ``b.metrics_port``."""
    work_dir = Path(tempfile.mkdtemp(prefix=prefix))
    overrides = dict(overrides or {})
    metrics_port = None
    if metrics:
        metrics_port = free_port()
        overrides.update({"metrics.port": str(metrics_port), "metrics.host": "127.0.0.1"})
    b = BrokerProcess(work_dir, port=port, overrides=overrides)
    b.metrics_port = metrics_port
    try:
        yield b.start() if start else b
    finally:
        try:
            b.stop()
        finally:
            shutil.rmtree(work_dir, ignore_errors=True)
