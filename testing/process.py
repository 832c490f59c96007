"""Run a broker-like server as a child process and know when it is ready.

Shared by samsa's brokers, ZooKeeper and the Tansu peer: all are "start a process,
wait until it answers on its port, stop it politely or kill it". Each child runs in
its own session (process group), so stop/kill reach anything it forked, and nothing
outside what we started. A subclass may start its child another way (``_spawn``:
the test kit forks brokers from a warm process, forkserver.py); anything with
Popen's ``pid``, ``poll``, ``wait`` and ``returncode`` will do.
"""

from __future__ import annotations

import atexit
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from .lifetime import popen
from .wire import probe_api_versions


# Children still running when the interpreter exits (a test run interrupted before its
# fixtures tore down) are killed rather than left holding ports; a process killed
# outright has its children killed by their parent-death signal (lifetime.py).
_LIVE: set["ManagedProcess"] = set()


@atexit.register
def _kill_leftovers() -> None:
    for p in list(_LIVE):
        p.kill()


class ProcessStartError(RuntimeError):
    """The server died or never answered ApiVersions; the message carries its log tail."""


class ManagedProcess:
    """One server process whose stdout+stderr go to ``log_path`` (appended across restarts)."""

    def __init__(self, name: str, argv: Sequence[str], host: str, port: int, log_path: Path,
                 env: Mapping[str, str] | None = None, cwd: str | os.PathLike | None = None,
                 startup_timeout: float = 30.0):
        self.name = name
        self.argv = list(argv)
        self.host = host
        self.port = port
        self.log_path = Path(log_path)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.startup_timeout = startup_timeout
        self.proc: Any = None  # a subprocess.Popen, or what _spawn returns instead

    @property
    def bootstrap(self) -> str:
        """``host:port`` for --bootstrap-server / bootstrap_servers."""
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss(self) -> int:
        """The process's resident memory now, in bytes (VmRSS)."""
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise AssertionError(f"no VmRSS for process {self.pid}")

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no log file)"
        return "\n".join(text.splitlines()[-lines:])

    def start(self):
        if self.is_running():
            raise RuntimeError(f"{self.name} is already running (pid {self.proc.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            log.write(f"\n==== starting: {' '.join(self.argv)}\n".encode())
            log.flush()
            self.proc = self._spawn(log)
        _LIVE.add(self)
        try:
            self.wait_ready()
        except BaseException:
            self.kill()
            raise
        return self

    def _spawn(self, log):
        # killed by the kernel if we die without stopping it (lifetime.py)
        return popen(self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                     env=self.env, cwd=self.cwd, start_new_session=True)

    def wait_ready(self, timeout: float | None = None) -> None:
        """Until ``probe`` passes; fails fast if the process exits."""
        deadline = time.monotonic() + (timeout or self.startup_timeout)
        last_error: Exception | None = None
        while True:
            rc = self.proc.poll()
            if rc is not None:
                raise ProcessStartError(
                    f"{self.name} exited with code {rc} before becoming ready on {self.bootstrap}\n"
                    f"command: {' '.join(self.argv)}\n--- log tail ({self.log_path}) ---\n{self.log_tail()}")
            try:
                self.probe()
                return
            except OSError as e:
                last_error = e
            if time.monotonic() >= deadline:
                raise ProcessStartError(
                    f"{self.name} did not answer ApiVersions on {self.bootstrap} within "
                    f"{timeout or self.startup_timeout:.0f}s (last error: {last_error!r})\n"
                    f"command: {' '.join(self.argv)}\n--- log tail ({self.log_path}) ---\n{self.log_tail()}")
            time.sleep(0.05)

    def probe(self) -> None:
        """Raises OSError until the server serves (Kafka servers: ApiVersions v0)."""
        probe_api_versions(self.host, self.port, timeout=1.0)

    def _signal(self, sig: int) -> None:
        # Only while the child is not yet reaped: until then its pid (= its process
        # group id, start_new_session=True) cannot have been reused by anyone else.
        if self.proc.returncode is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def pause(self) -> None:
        """SIGSTOP: it holds its sockets but answers nothing."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after pause() (a no-op otherwise)."""
        self._signal(signal.SIGCONT)

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, wait up to ``timeout``, then SIGKILL. Returns the exit code (None if never started)."""
        if self.proc is None:
            return None
        self._signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self.proc.wait()
        _LIVE.discard(self)
        return self.proc.returncode

    def kill(self) -> int | None:
        """SIGKILL now (crash tests): no chance to flush or clean up."""
        if self.proc is None:
            return None
        self._signal(signal.SIGKILL)
        self.proc.wait()
        _LIVE.discard(self)
        return self.proc.returncode

    def restart(self, timeout: float = 15.0):
        """Stop (politely) and start again with the same command, port and data."""
        self.stop(timeout)
        return self.start()

    def __enter__(self):
        return self if self.is_running() else self.start()

    def __exit__(self, *exc):
        self.stop()
