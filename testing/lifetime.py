"""Nothing outlives the test process, even one killed with SIGKILL.

A test run that is killed (SIGKILL, an OOM kill, a CI job cancelled) runs no
fixture teardown and no atexit handler. Two things clean up after it:

- every child (ZooKeeper, a broker not forked from the fork server) is started
  with a parent-death signal (through util-linux's setpriv): Linux sends it
  SIGKILL when its parent goes.
  Linux means the *thread* that forked it, so children are started from one
  long-lived thread of ours, never from a caller's thread that may end (a
  cluster started from a worker thread would lose its ZooKeeper with it).
  Brokers forked by the fork server die with it, and it exits when we do
  (forkserver.py).
- a reaper (reaper.py, a process of its own with nothing of samsa imported)
  holds the directories we created; when our end of its pipe closes, however
  we ended, it removes those still there.
"""
from __future__ import annotations

import concurrent.futures
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, IO

# util-linux's setpriv sets the parent-death signal and execs the command (same pid):
# no Python runs in the child between fork and exec. (A preexec_fn did, in a test
# process that holds a Py4J connection to Spark's JVM, and broke that connection:
# Spark then no longer found the Python data sources registered in its session.)
_SETPRIV = shutil.which("setpriv") if sys.platform.startswith("linux") else None


_spawner: concurrent.futures.ThreadPoolExecutor | None = None
_spawner_pid = 0
_spawner_lock = threading.Lock()


def _the_spawner() -> concurrent.futures.ThreadPoolExecutor:
    """One thread for the life of the process (a forked child makes its own: the
    parent's thread is not in it)."""
    global _spawner, _spawner_pid
    with _spawner_lock:
        if _spawner is None or _spawner_pid != os.getpid():
            _spawner = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="samsa-testing-spawner")
            _spawner_pid = os.getpid()
        return _spawner


def popen(argv: list[str], **kwargs: Any) -> "subprocess.Popen[Any]":
    """subprocess.Popen, the child killed when this process dies (where setpriv is
    there: Linux's util-linux; elsewhere the atexit kill remains)."""
    if _SETPRIV is None:
        return subprocess.Popen(argv, **kwargs)
    wrapped = [_SETPRIV, "--pdeathsig", "KILL", "--", *argv]

    def start() -> "subprocess.Popen[Any]":
        return subprocess.Popen(wrapped, **kwargs)
    return _the_spawner().submit(start).result()


# ---------------------------------------------------------------- directories

_reaper: "subprocess.Popen[bytes] | None" = None
_reaper_pid = 0  # the process that started it: a forked child must not write to it
_reaper_lock = threading.Lock()


def _reaper_stdin() -> IO[bytes] | None:
    global _reaper, _reaper_pid
    with _reaper_lock:
        if _reaper is None or _reaper_pid != os.getpid() or _reaper.poll() is not None:
            script = Path(__file__).with_name("reaper.py")
            # -I: nothing of the user's environment or of samsa; its own session,
            # so a Ctrl-C or a kill of our process group leaves it to do its work
            _reaper = subprocess.Popen([sys.executable, "-I", str(script)], stdin=subprocess.PIPE,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       start_new_session=True, bufsize=0)
            _reaper_pid = os.getpid()
        return _reaper.stdin


def _tell(line: str) -> None:
    try:
        stdin = _reaper_stdin()
        if stdin is not None:
            stdin.write(line.encode() + b"\n")
    except OSError:  # no reaper: the normal teardown still removes the directory
        pass


def remove_after_exit(path: str | os.PathLike[str]) -> None:
    """Have ``path`` removed after this process exits, should it still be there."""
    _tell("+" + os.fspath(path))


def removed(path: str | os.PathLike[str]) -> None:
    """``path`` is gone (removed by its owner): the reaper forgets it."""
    _tell("-" + os.fspath(path))
