"""Per quota type, the measurements and throttle decisions (Kafka's
ClientQuotaManager / ClientRequestQuotaManager).

One manager per type: produce bytes, fetch bytes, request handler time,
controller mutations. A request's value is recorded in the budget its quota
match names (see entities.py); when that pushes the measured rate over the
bound the answer is the throttle time. Controller mutations are bounded by a
token bucket instead (``MutationQuotaManager``, Kafka's
ControllerMutationQuotaManager); their rate is still measured, for the
metrics. Throttle times given out are recorded too, for the
throttle-time metrics. Managers are shared by all network threads, so each
holds a lock (Kafka's sensors are synchronized the same way).

A budget nobody has used for ``INACTIVE_EXPIRY_MS`` (an hour, Kafka's
quota sensors' inactive expiration) is dropped, so client ids that come and
go under a <default> quota do not pile up; recording or snapshotting sweeps
them, at most once per ``SWEEP_INTERVAL_MS``.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Iterator, NamedTuple, cast

from .entities import QuotaConfigs, QuotaMatch
if TYPE_CHECKING:
    from samsa.config.broker import BrokerConfig

from .rate import TokenBucket, WindowedRate, throttle_time_ms, token_throttle_ms


class QuotaWindow(NamedTuple):
    samples: int      # quota.window.num
    window_ms: float  # quota.window.size.seconds, in ms


def client_window(cfg: "BrokerConfig") -> QuotaWindow:
    """The client quotas' (and connection rates') window: quota.window.*."""
    return QuotaWindow(cfg.quota_window_num, cfg.quota_window_size_seconds * 1000.0)


def controller_window(cfg: "BrokerConfig") -> QuotaWindow:
    """The controller mutation quota's window: controller.quota.window.*
    (Kafka's ControllerMutationQuotaManager has its own config)."""
    return QuotaWindow(cfg.controller_quota_window_num,
                       cfg.controller_quota_window_size_seconds * 1000.0)


class Taken(NamedTuple):
    """What became of mutations offered to the quota."""
    accepted: bool
    throttle_ms: int


INACTIVE_EXPIRY_MS = 3600 * 1000.0  # Kafka: InactiveSensorExpirationTimeSeconds
SWEEP_INTERVAL_MS = 60 * 1000.0


class IdleExpiry:
    """Drops the entries of a dict (values with ``last_used_ms``) idle for
    INACTIVE_EXPIRY_MS, looking at most once per SWEEP_INTERVAL_MS (caller
    holds the lock that guards the dict)."""
    __slots__ = ("_next_ms",)

    def __init__(self) -> None:
        self._next_ms: float | None = None

    def sweep(self, entries: dict, now_ms: float) -> None:
        if self._next_ms is not None and now_ms < self._next_ms:
            return
        self._next_ms = now_ms + SWEEP_INTERVAL_MS
        for key in [k for k, e in entries.items()
                    if now_ms - e.last_used_ms >= INACTIVE_EXPIRY_MS]:
            del entries[key]


class _Budget:
    __slots__ = ("usage", "throttles", "bound", "last_used_ms")

    def __init__(self, window: QuotaWindow, now_ms: float) -> None:
        self.usage = WindowedRate(window.samples, window.window_ms)
        self.throttles = WindowedRate(window.samples, window.window_ms)
        self.bound = 0.0
        self.last_used_ms = now_ms


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
        self._budgets: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self._expiry = IdleExpiry()

    def match(self, user: str, client_id: str) -> QuotaMatch | None:
        return self.configs.resolve(self.key, user, client_id)

    def record(self, match: QuotaMatch, value: float, now_ms: float) -> int:
        """Record ``value`` against the budget; the throttle time in ms (0
        while the rate stays within the bound)."""
        with self._lock:
            self._sweep(now_ms)
            budget = self._budget(match, now_ms)
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
            self._budget(match, now_ms).usage.record(-value, now_ms)

    def throttled(self, match: QuotaMatch, throttle_ms: int, now_ms: float) -> None:
        """A response carried ``throttle_ms`` because of this quota."""
        with self._lock:
            self._budget(match, now_ms).throttles.record(throttle_ms, now_ms)

    def max_in_window(self, match: QuotaMatch) -> float:
        """The most this budget may take in one go without being throttled
        forever: the bound over the quota window (Kafka's
        getMaxValueInQuotaWindow), which caps what one fetch may return."""
        return match.bound * (self.window.samples - 1) * self.window.window_ms / 1000.0

    def snapshot(self, now_ms: float) -> Iterator[tuple[str, str, float, float]]:
        """(user, client id, rate per second, average throttle ms) per budget."""
        with self._lock:
            self._sweep(now_ms)
            budgets = list(self._budgets.items())
            out = []
            for (user, client_id), b in budgets:
                out.append((user, client_id, b.usage.rate(now_ms), b.throttles.average(now_ms)))
        return iter(out)

    def budget_count(self) -> int:
        """How many budgets are kept."""
        return len(self._budgets)

    def _budget(self, match: QuotaMatch, now_ms: float) -> _Budget:
        tags = (match.user, match.client_id)
        budget = self._budgets.get(tags)
        if budget is None:
            budget = self._budgets[tags] = self._new_budget(now_ms)
        budget.bound = match.bound
        budget.last_used_ms = max(budget.last_used_ms, now_ms)
        return budget

    def _new_budget(self, now_ms: float) -> _Budget:
        return _Budget(self.window, now_ms)

    def _sweep(self, now_ms: float) -> None:
        """Drop budgets idle for INACTIVE_EXPIRY_MS (caller holds the lock)."""
        self._expiry.sweep(self._budgets, now_ms)


class _MutationBudget(_Budget):
    """A controller mutation budget: its rate (for the metrics) and the
    token bucket that bounds it."""
    __slots__ = ("credits",)

    def __init__(self, window: QuotaWindow, now_ms: float) -> None:
        super().__init__(window, now_ms)
        self.credits = TokenBucket()


class MutationQuotaManager(QuotaManager):
    """The controller mutation quota (KIP-599): partition mutations per
    second, bounded by a token bucket holding one quota window's worth
    (rate.TokenBucket); its window is controller.quota.window.num samples of
    controller.quota.window.size.seconds, not the client quotas' one. Two ways to take mutations, as Kafka's
    Strict/PermissiveControllerMutationQuota: ``take_strict`` refuses them
    once the bucket is overdrawn, ``take_permissive`` takes them anyway and
    says how long the client should then wait. Both answer whether the
    mutations were taken and the throttle time in ms (0: within the quota)."""

    def _new_budget(self, now_ms: float) -> _MutationBudget:
        return _MutationBudget(self.window, now_ms)

    def _mutation_budget(self, match: QuotaMatch, now_ms: float) -> _MutationBudget:
        # every budget of this manager is made by _new_budget above: a _MutationBudget
        return cast(_MutationBudget, self._budget(match, now_ms))

    def burst(self, match: QuotaMatch) -> float:
        """The most credits a budget holds: the bound over the quota window."""
        return match.bound * self.window.samples * self.window.window_ms / 1000.0

    def take_strict(self, match: QuotaMatch, mutations: float, now_ms: float) -> Taken:
        """Checked first, then taken: mutations are refused (nothing taken,
        the time until the bucket is back at zero) only while the bucket is
        already overdrawn, so mutations go through whenever there is credit
        left, however many they are, and without a throttle time."""
        with self._lock:
            self._sweep(now_ms)
            budget = self._mutation_budget(match, now_ms)
            burst = self.burst(match)
            left = budget.credits.measure(match.bound, burst, now_ms)
            if left < 0:
                return Taken(False, token_throttle_ms(left, match.bound, self.window.window_ms))
            budget.credits.take(mutations, match.bound, burst, now_ms)
            budget.usage.record(mutations, now_ms)
            return Taken(True, 0)

    def take_permissive(self, match: QuotaMatch, mutations: float, now_ms: float) -> Taken:
        """Taken first, then checked: always taken; the throttle time is how
        long until the bucket is no longer overdrawn."""
        with self._lock:
            self._sweep(now_ms)
            budget = self._mutation_budget(match, now_ms)
            burst = self.burst(match)
            budget.credits.take(mutations, match.bound, burst, now_ms)
            budget.usage.record(mutations, now_ms)
            left = budget.credits.measure(match.bound, burst, now_ms)
            return Taken(True, token_throttle_ms(left, match.bound, self.window.window_ms))

