"""Brokers forked from a warm process: start-up without the import cost.

``python -m samsa server`` spends over a second importing the broker before it
opens a port (the message classes are compiled at import). The test kit starts
brokers from a fork server instead: one process per user of the kit
(``python -m samsa.testing.forkserver``) that imports the broker once, then forks
a broker for each request it reads on stdin. It holds no threads and no event
loop (it has only imported modules), so forking it is safe.

multiprocessing's fork server is not used: it imports the user's main script again
in every child, which a test script without a ``__main__`` guard does not survive.

Protocol (lines): we write ``<json: argv, log, cwd, env>``; it answers
``started <pid>`` (or ``failed <reason>``), and ``exit <pid> <code>`` when it reaps
a broker (a negative code: killed by that signal, as Popen says it). Each broker
runs in its own session with stdout and stderr in its log file, and is killed
when the fork server exits, which it does when its stdin closes: when the process
that uses the kit exits, however it ends.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from typing import IO, Sequence

# ---------------------------------------------------------------- the server side


def _die_with_parent() -> None:
    # Linux: SIGKILL when the fork server (our parent) exits.
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _run_child(request: dict) -> None:
    """In the forked child: become the broker. Never returns."""
    code = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        _die_with_parent()
        fd = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        os.close(null)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        from samsa.testing._broker_main import main
        code = main(request["argv"])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # the broker's last words go to its log
        import traceback
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # a closed or broken log: exiting regardless
                pass
        os._exit(code)


def _serve() -> None:
    out = sys.stdout.fileno()

    def reap(*_):
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            os.write(out, f"exit {pid} {os.waitstatus_to_exitcode(status)}\n".encode())

    signal.signal(signal.SIGCHLD, reap)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for the test run, which stops us
    import samsa.testing._broker_main  # noqa: F401  (the import every broker would pay)
    stdin = sys.stdin.buffer
    while True:
        line = stdin.readline()
        if not line:
            return  # the kit's process has gone; our brokers die with us
        try:
            request = json.loads(line)
            pid = os.fork()
        except (ValueError, OSError) as e:
            os.write(out, f"failed {e}\n".encode())
            continue
        if pid == 0:
            _run_child(request)
        os.write(out, f"started {pid}\n".encode())


# ---------------------------------------------------------------- the kit's side


class _Server:
    """The fork server as seen from the kit: one per process, started on first use."""

    def __init__(self) -> None:
        from .broker_process import samsa_path
        path = os.pathsep.join(p for p in (samsa_path(), os.environ.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "samsa.testing.forkserver"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": path}, bufsize=0)
        self._lock = threading.Lock()
        self._started: list[str] = []
        self._cond = threading.Condition()
        self.exits: dict[int, int] = {}
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True,
                         name="samsa-forkserver-reader").start()

    def _read(self, stream: IO[bytes]) -> None:
        for raw in stream:
            kind, _, rest = raw.decode().strip().partition(" ")
            with self._cond:
                if kind == "exit":
                    pid, code = rest.split()
                    self.exits[int(pid)] = int(code)
                else:
                    self._started.append(raw.decode().strip())
                self._cond.notify_all()
        with self._cond:
            self._started.append("failed the fork server exited")
            self._cond.notify_all()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def fork(self, argv: Sequence[str], log: str, cwd: str, env: dict[str, str]) -> int:
        with self._lock:
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps({"argv": list(argv), "log": log, "cwd": cwd,
                                               "env": env}) + "\n").encode())
            with self._cond:
                self._cond.wait_for(lambda: self._started)
                answer = self._started.pop(0)
        kind, _, rest = answer.partition(" ")
        if kind != "started":
            raise OSError(f"the test kit's fork server could not start a broker: {rest}")
        return int(rest)

    def wait(self, pid: int, timeout: float | None) -> int | None:
        with self._cond:
            self._cond.wait_for(lambda: pid in self.exits or not self.alive(), timeout)
            return self.exits.get(pid)


_server: _Server | None = None
_server_lock = threading.Lock()


def _the_server() -> _Server:
    global _server
    with _server_lock:
        if _server is None or not _server.alive():
            _server = _Server()
        return _server


def warm_up() -> None:
    """Start the fork server now: it imports the broker while the caller goes on."""
    _the_server()


class ForkedProcess:
    """A broker forked by the fork server, with the parts of Popen ManagedProcess uses."""

    def __init__(self, argv: Sequence[str], log_path: str, cwd: str, env: dict[str, str]):
        self._server = _the_server()
        self.pid = self._server.fork(argv, log_path, cwd, env)

    @property
    def returncode(self) -> int | None:
        return self._server.exits.get(self.pid)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        code = self._server.wait(self.pid, timeout)
        if code is None:
            raise subprocess.TimeoutExpired("samsa broker", timeout or 0)
        return code


if __name__ == "__main__":
    _serve()
