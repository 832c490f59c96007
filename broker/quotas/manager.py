"""Per quota type, the measurements and throttle decisions (Kafka's
ClientQuotaManager / ClientRequestQuotaManager).

One manager per type: produce bytes, fetch bytes, request handler time. A
request's value is recorded in the budget its quota match names (see
entities.py); when that pushes the measured rate over the bound the answer is
the throttle time. Throttle times given out are recorded too, for the
throttle-time metrics. Managers are shared by all network threads, so each
holds a lock (Kafka's sensors are synchronized the same way).
"""
from __future__ import annotations

import threading
from typing import Iterator, NamedTuple

from .entities import QuotaConfigs, QuotaMatch
from .rate import WindowedRate, throttle_time_ms


class QuotaWindow(NamedTuple):
    samples: int      # quota.window.num
    window_ms: float  # quota.window.size.seconds, in ms


class _Budget:
    __slots__ = ("usage", "throttles", "bound")

    def __init__(self, window: QuotaWindow) -> None:
        self.usage = WindowedRate(window.samples, window.window_ms)
        self.throttles = WindowedRate(window.samples, window.window_ms)
        self.bound = 0.0


class QuotaManager:
    """Measures one quota type (``key``) per budget and decides throttles.

    ``max_throttle_ms`` bounds a single throttle (Kafka bounds request-time
    throttles to one window; byte-rate throttles are unbounded)."""

    def __init__(self, key: str, configs: QuotaConfigs, window: QuotaWindow,
                 max_throttle_ms: float | None = None) -> None:
        self.key = key
        self.configs = configs
        self.window = window
        self.max_throttle_ms = max_throttle_ms
        self._budgets: dict[tuple[str, str], _Budget] = {}
        self._lock = threading.Lock()

    def match(self, user: str, client_id: str) -> QuotaMatch | None:
        return self.configs.resolve(self.key, user, client_id)

    def record(self, match: QuotaMatch, value: float, now_ms: float) -> int:
        """Record ``value`` against the budget; the throttle time in ms (0
        while the rate stays within the bound)."""
        with self._lock:
            budget = self._budget(match)
            budget.usage.record(value, now_ms)
            rate = budget.usage.rate(now_ms)
            throttle = throttle_time_ms(rate, match.bound, budget.usage.window_size(now_ms))
        if self.max_throttle_ms is not None and throttle > self.max_throttle_ms:
            throttle = int(self.max_throttle_ms)
        return throttle

    def unrecord(self, match: QuotaMatch, value: float, now_ms: float) -> None:
        """Take back a value recorded for an answer that is not sent after
        all (a throttled fetch goes out empty, as in Kafka)."""
        with self._lock:
            self._budget(match).usage.record(-value, now_ms)

    def throttled(self, match: QuotaMatch, throttle_ms: int, now_ms: float) -> None:
        """A response carried ``throttle_ms`` because of this quota."""
        with self._lock:
            self._budget(match).throttles.record(throttle_ms, now_ms)

    def max_in_window(self, match: QuotaMatch) -> float:
        """The most this budget may take in one go without being throttled
        forever: the bound over the quota window (Kafka's
        getMaxValueInQuotaWindow), which caps what one fetch may return."""
        return match.bound * (self.window.samples - 1) * self.window.window_ms / 1000.0

    def snapshot(self, now_ms: float) -> Iterator[tuple[str, str, float, float]]:
        """(user, client id, rate per second, average throttle ms) per budget."""
        with self._lock:
            budgets = list(self._budgets.items())
            out = []
            for (user, client_id), b in budgets:
                total, events = b.throttles.totals(now_ms)
                out.append((user, client_id, b.usage.rate(now_ms),
                            total / events if events else 0.0))
        return iter(out)

    def _budget(self, match: QuotaMatch) -> _Budget:
        tags = (match.user, match.client_id)
        budget = self._budgets.get(tags)
        if budget is None:
            budget = self._budgets[tags] = _Budget(self.window)
        budget.bound = match.bound
        return budget
