"""A windowed rate with a quota bound, measured the way Kafka measures it.

Kafka's quota sensors are a ``Rate`` over a ``WindowedSum``: ``samples``
buckets of ``window_ms`` each (quota.window.num, quota.window.size.seconds).
A value lands in the current bucket; a bucket older than one window is
replaced by a fresh one starting at the time of the value; buckets older than
``samples`` windows are reset before a measurement. The rate divides the sum
of all buckets by the time since the oldest bucket started, but never by less
than ``samples - 1`` full windows, so a client's first burst is not measured
over a few milliseconds. Throttle time is how long the client has to stay
quiet for its rate over that same window to fall back to the bound
(ClientQuotaManager.throttleTime): ``(rate - bound) / bound * window``.

Pure arithmetic on caller-supplied times (milliseconds), so it is tested
without clocks; callers hold the lock.
"""
from __future__ import annotations

import time


def now_ms() -> float:
    """The clock every quota is measured on: monotonic, in milliseconds."""
    return time.monotonic() * 1000.0


class _Sample:
    __slots__ = ("start_ms", "value", "events")

    def __init__(self, start_ms: float) -> None:
        self.start_ms = start_ms
        self.value = 0.0
        self.events = 0

    def reset(self, start_ms: float) -> None:
        self.start_ms = start_ms
        self.value = 0.0
        self.events = 0


class WindowedRate:
    """Sum of recorded values per second over the last ``samples`` windows."""

    __slots__ = ("samples", "window_ms", "_buckets", "_current")

    def __init__(self, samples: int, window_ms: float) -> None:
        self.samples = max(1, samples)
        self.window_ms = window_ms
        self._buckets: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.events += 1

    def rate(self, now_ms: float) -> float:
        """Per second, over ``window_size(now_ms)``."""
        self._purge(now_ms)
        total = sum(s.value for s in self._buckets)
        return total / (self.window_size(now_ms) / 1000.0)

    def totals(self, now_ms: float) -> tuple[float, int]:
        """(sum of values, number of events) in the retained windows: an
        average per event is their quotient (Kafka's Avg over a sensor)."""
        self._purge(now_ms)
        return sum(s.value for s in self._buckets), sum(s.events for s in self._buckets)

    def average(self, now_ms: float) -> float:
        """The mean recorded value per event in the retained windows (0
        without events): Kafka's Avg, as the throttle-time metrics use it."""
        total, events = self.totals(now_ms)
        return total / events if events else 0.0

    def window_size(self, now_ms: float) -> float:
        """Milliseconds the rate is measured over (Kafka's Rate.windowSize)."""
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._buckets), default=now_ms)
        elapsed = now_ms - oldest
        full_windows = int(elapsed // self.window_ms)
        if full_windows < self.samples - 1:
            elapsed += (self.samples - 1 - full_windows) * self.window_ms
        return max(elapsed, 1.0)

    def _current_sample(self, now_ms: float) -> _Sample:
        if not self._buckets:
            self._buckets.append(_Sample(now_ms))
            self._current = 0
        return self._buckets[self._current]

    def _advance(self, now_ms: float) -> _Sample:
        self._current = (self._current + 1) % self.samples
        if self._current >= len(self._buckets):
            sample = _Sample(now_ms)
            self._buckets.append(sample)
            return sample
        sample = self._buckets[self._current]
        sample.reset(now_ms)
        return sample

    def _purge(self, now_ms: float) -> None:
        expire = self.samples * self.window_ms
        for s in self._buckets:
            if now_ms - s.start_ms >= expire:
                s.reset(now_ms)


def throttle_time_ms(rate: float, bound: float, window_ms: float) -> int:
    """How long a client measured at ``rate`` against ``bound`` must wait, in
    ms: 0 within the bound (Kafka's Quota.acceptable is ``rate <= bound``)."""
    if rate <= bound:
        return 0
    if bound <= 0:
        return int(round(window_ms))
    return int(round((rate - bound) / bound * window_ms))


class TokenBucket:
    """Credits refilled at the quota's rate, as Kafka's TokenBucket stat
    measures the controller mutation quota (KIP-599): a sampled rate would
    hold one big burst (a topic with many partitions) against the client
    until its sample expired; the bucket lets it back in as soon as the
    credits it overdrew have been refilled.

    The bucket holds at most ``burst`` credits (the bound times the quota
    window, ``samples * window``) and starts full. Taking may overdraw it;
    the quota is exceeded while it is below zero. The bound and burst are
    passed on each call, so a changed quota applies at once to the credits
    already there."""

    __slots__ = ("tokens", "last_ms")

    def __init__(self) -> None:
        self.tokens: float | None = None  # None: never used, so full
        self.last_ms = 0.0

    def measure(self, bound: float, burst: float, now_ms: float) -> float:
        """The credits left at ``now_ms`` (negative: overdrawn)."""
        self._refill(bound, burst, now_ms)
        assert self.tokens is not None
        return self.tokens

    def take(self, value: float, bound: float, burst: float, now_ms: float) -> None:
        self._refill(bound, burst, now_ms)
        assert self.tokens is not None
        self.tokens = min(burst, self.tokens - value)

    def _refill(self, bound: float, burst: float, now_ms: float) -> None:
        if self.tokens is None:
            self.tokens = burst
        else:
            elapsed = max(0.0, now_ms - self.last_ms)
            self.tokens = min(burst, self.tokens + bound * elapsed / 1000.0)
        self.last_ms = max(self.last_ms, now_ms)


def token_throttle_ms(tokens: float, bound: float, window_ms: float) -> int:
    """How long until an overdrawn bucket is back at zero credits at
    ``bound`` per second (Kafka's ControllerMutationQuotaManager.throttleTimeMs:
    ``-tokens / bound`` seconds); 0 when not overdrawn. A zero bound never
    refills: the client is told to wait a quota window and ask again."""
    if tokens >= 0:
        return 0
    if bound <= 0:
        return int(round(window_ms))
    return int(round(-tokens / bound * 1000.0))
