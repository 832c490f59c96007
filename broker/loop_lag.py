"""How late each of the broker's event loops runs what is due: a watch an
operator reads when clients see a stall.

A loop runs one callback at a time. One that takes long (a bug: a blocking
call on the loop; or a large piece of work done in one go), a process starved
of CPU, or one stopped by a signal, holds every connection and timer of that
loop at once, and clients only see their requests time out. Each loop here
has a timer due every ``PERIOD_S``; how late it fires is how long the loop was
held. Every lateness is added up, and one of ``STALL_S`` or more is a stall:
counted, logged once (a line per loop at most every 10 s, the rest counted in
it), and the longest one kept. Scraped as samsa_event_loop_{late_seconds,stalls,longest_stall_seconds}, by loop.

``LoopLag`` is the decision, fed the times the timer fired; ``watch`` puts it
on a loop.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

from .network.log_limit import RateLimitedLog

PERIOD_S = 0.25  # how often each loop's timer is due: a hold is measured up to this much short
STALL_S = 1.0  # a loop held this long is a stall: counted and logged

log = logging.getLogger("broker.loop_lag")


class LoopLag:
    """One loop's lateness so far (plain state, no clock of its own)."""

    __slots__ = ("name", "late_s", "stalls", "longest_s", "_log", "_stall_s")

    def __init__(self, name: str, rate_log: RateLimitedLog, stall_s: float = STALL_S) -> None:
        self.name = name
        self.late_s = 0.0    # every lateness, added up
        self.stalls = 0      # latenesses of stall_s or more
        self.longest_s = 0.0
        self._log = rate_log
        self._stall_s = stall_s

    def fired(self, due: float, now: float) -> None:
        """The timer due at ``due`` fired at ``now``."""
        late = now - due
        if late <= 0:
            return
        self.late_s += late
        if late < self._stall_s:
            return
        self.stalls += 1
        self.longest_s = max(self.longest_s, late)
        self._log.warning(f"stall {self.name}",
                          "event loop %s was held %.2f s: nothing on it ran meanwhile (a "
                          "callback that long, or the process stopped or starved of CPU)",
                          self.name, late)


class _Timer:
    """``lag``'s timer on ``loop``: re-armed each time it fires, so its
    lateness is the loop's at that moment."""

    __slots__ = ("_loop", "_lag", "_period", "_due", "_handle")

    def __init__(self, loop: asyncio.AbstractEventLoop, lag: LoopLag, period_s: float) -> None:
        self._loop = loop
        self._lag = lag
        self._period = period_s
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0

    def arm(self) -> None:
        self._due = self._loop.time() + self._period
        self._handle = self._loop.call_at(self._due, self._fire)

    def _fire(self) -> None:
        self._lag.fired(self._due, self._loop.time())
        self.arm()

    def cancel(self) -> None:
        """(on the timer's loop)"""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def cancel_from_any_thread(self) -> None:
        try:
            self._loop.call_soon_threadsafe(self.cancel)
        except RuntimeError:  # the loop is closed: its timers with it
            pass


class LoopLags:
    """The broker's loops under watch, for the metrics."""

    def __init__(self, logger: logging.Logger = log, period_s: float = PERIOD_S,
                 stall_s: float = STALL_S) -> None:
        self._rate_log = RateLimitedLog(logger)
        self._period = period_s
        self._stall = stall_s
        self.lags: list[LoopLag] = []
        self._timers: list[_Timer] = []

    def watch(self, name: str, loop: asyncio.AbstractEventLoop) -> LoopLag:
        """Start watching ``loop`` (from any thread: the timer is armed on
        the loop itself)."""
        lag = LoopLag(name, self._rate_log, self._stall)
        timer = _Timer(loop, lag, self._period)
        self.lags.append(lag)
        self._timers.append(timer)
        loop.call_soon_threadsafe(timer.arm)
        return lag

    def stop(self) -> None:
        """Stop every timer (the figures stay as they are)."""
        for timer in self._timers:
            timer.cancel_from_any_thread()
        self._timers.clear()

    def add_metrics(self, metrics) -> None:
        def each(value: Callable[[LoopLag], float]):
            return lambda: [({"loop": lag.name}, value(lag)) for lag in list(self.lags)]
        metrics.add_kafka_gauge("samsa_event_loop_late_seconds",
                                "Seconds each event loop ran its timers late, added up",
                                each(lambda lag: lag.late_s))
        metrics.add_kafka_gauge("samsa_event_loop_stalls",
                                f"Times an event loop was held {self._stall:g} s or more",
                                each(lambda lag: lag.stalls))
        metrics.add_kafka_gauge("samsa_event_loop_longest_stall_seconds",
                                "The longest an event loop was held since the broker started",
                                each(lambda lag: lag.longest_s))
