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

from .wire import free_port
from .process import ManagedProcess


def _override_list(overrides: Mapping[str, object] | Sequence[str] | None) -> list[str]:
    if not overrides:
        return []
    if isinstance(overrides, Mapping):
        return [f"{k}={v}" for k, v in overrides.items()]
    return list(overrides)


def samsa_path() -> str:
    """The directory the running ``samsa`` package is imported from: a broker started
    with ``python -m samsa`` imports the same one (a checkout or site-packages)."""
    import samsa
    return str(Path(samsa.__file__).resolve().parent.parent)


class BrokerProcess(ManagedProcess):
    """One samsa broker. ``work_dir`` holds server.properties and broker.log; the log
    dir is ``data_dir`` (default ``work_dir/data``). ``fork``: forked from the warm
    fork server (forkserver.py) rather than started as ``python -m samsa``."""

    metrics_port: int | None = None  # broker_in_temp_dir(metrics=True)

    def __init__(self, work_dir: Path, port: int | None = None,
                 overrides: Mapping[str, object] | Sequence[str] | None = None,
                 broker_id: int = 0, startup_timeout: float = 30.0, python: str = sys.executable,
                 cwd: str | os.PathLike | None = None, data_dir: Path | None = None,
                 fork: bool = False):
        self.work_dir = Path(work_dir)
        self.data_dir = Path(data_dir) if data_dir is not None else self.work_dir / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.broker_id = broker_id
        self.fork = fork
        port = port or free_port()
        self.config_path = self.work_dir / "server.properties"
        self.config_path.write_text(
            "# written by samsa.testing (testing/broker_process.py)\n"
            f"broker.id={broker_id}\n"
            f"listeners=PLAINTEXT://127.0.0.1:{port}\n"
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n"
            f"log.dirs={self.data_dir}\n")
        self.overrides = _override_list(overrides)
        self.server_args = [str(self.config_path)]
        for kv in self.overrides:
            self.server_args += ["--override", kv]
        argv = [python, "-m", "samsa", "server", *self.server_args]
        # "-m samsa" imports the samsa this process runs (PYTHONPATH first), whatever
        # the cwd. Unbuffered, so the log tail in an error message shows the broker's
        # last words.
        path = os.pathsep.join(p for p in (samsa_path(), os.environ.get("PYTHONPATH")) if p)
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": path}
        super().__init__("samsa broker", argv, "127.0.0.1", port, self.work_dir / "broker.log",
                         env=env, cwd=cwd or self.work_dir, startup_timeout=startup_timeout)

    def _spawn(self, log):
        if not self.fork:
            return super()._spawn(log)
        from .forkserver import ForkedProcess
        return ForkedProcess(self.server_args, str(self.log_path), str(self.cwd), self.env or {})


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
