"""One broker per log dir: an advisory lock on ``<dir>/.lock``, as Kafka's FileLock.

Two brokers on one log dir both append to the same segment files: the second
recovers the first's unflushed tail, then hands out offsets the first has
already acknowledged, overwriting those records. Kafka takes ``.lock`` in every
log dir before it reads anything there and refuses to start when another
process holds it; so does samsa, before the log dirs (and the embedded
metadata store kept in the first of them) are read or written.

The lock is ``flock``: the kernel drops it when the process dies, even by
SIGKILL, so a stale ``.lock`` file left by a crash never blocks a restart. It
belongs to the open file, not the process, so a second broker in the same
process is refused too. ``release`` (or exiting) gives it up.
"""
from __future__ import annotations

import fcntl
import os
from typing import Iterable

from samsa.storage.errors import StorageError

LOCK_FILE = ".lock"


class LogDirLocks:
    """The locks on a broker's log dirs, held until ``release``."""

    def __init__(self, log_dirs: Iterable[str]) -> None:
        self._fds: list[int] = []
        seen: dict[str, str] = {}
        try:
            for d in log_dirs:
                real = os.path.realpath(d)
                if real in seen:
                    raise StorageError(f"log.dirs: {d} is listed twice (as {seen[real]})")
                seen[real] = d
                self._fds.append(_lock(d))
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)  # closing the file gives up its flock


def _lock(d: str) -> int:
    path = os.path.join(d, LOCK_FILE)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise StorageError(f"log.dirs: cannot open {path}: {e.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StorageError(f"log.dirs: {d} is in use by another broker (it holds {path}); "
                           f"stop that one, or give this one a dir of its own "
                           f"(--override log.dirs=DIR)") from None
    except OSError as e:
        os.close(fd)
        raise StorageError(f"log.dirs: cannot lock {path}: {e.strerror}") from None
    return fd
