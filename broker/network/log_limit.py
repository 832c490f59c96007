"""Log lines of events a peer or the machine can repeat at will, at most one
per kind per interval.

Whatever a client does is one line of ours per event: a client that opens
connections in a loop and sends garbage, a broker out of descriptors refusing
accepts, or a full disk failing every produce and offset commit would
otherwise write megabytes of identical lines and bury everything else. The
network layer, the handlers' storage errors and the group coordinator's
failed writes use it. Each kind of event (a key chosen by the caller, e.g.
"frame-size") logs at most once per ``interval`` seconds; the next line that
gets through says how many were suppressed in between.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable


class RateLimitedLog:
    """Thread-safe: processor threads and the acceptor share one, handler
    threads another."""

    def __init__(self, logger: logging.Logger, interval: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.logger = logger
        self.interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._next: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def log(self, key: str, level: int, msg: str, *args: object, **kwargs: object) -> bool:
        """Log ``msg % args`` unless a line of this ``key`` went out less than
        ``interval`` ago; returns whether it was logged."""
        now = self._clock()
        with self._lock:
            if now < self._next.get(key, float("-inf")):
                self._suppressed[key] = self._suppressed.get(key, 0) + 1
                return False
            self._next[key] = now + self.interval
            suppressed = self._suppressed.pop(key, 0)
        if suppressed:
            msg += " (%d similar message(s) suppressed in the last %.0f s)"
            args = args + (suppressed, self.interval)
        self.logger.log(level, msg, *args, **kwargs)  # type: ignore[arg-type]
        return True

    def warning(self, key: str, msg: str, *args: object, **kwargs: object) -> bool:
        return self.log(key, logging.WARNING, msg, *args, **kwargs)

    def info(self, key: str, msg: str, *args: object, **kwargs: object) -> bool:
        return self.log(key, logging.INFO, msg, *args, **kwargs)
