"""Share groups' metrics under Kafka's names: the group coordinator's
share-group counts (GroupCoordinatorMetrics: group-count{protocol=share},
share-group-count{state}) and the share-partition side's acknowledgement
meters (kafka.server:type=share-group-metrics: share-acknowledgement-rate/
-count, record-acknowledgement-rate/-count{ack-type}), plus the records
acquired by share fetches (Kafka has no meter of that; samsa's name).

A meter is a count and a rate over the last ``WINDOW_MS`` (Kafka's meters are
windowed rates too). Events arrive under the share service's lock; the
metrics thread reads them under the meter's own.
"""
from __future__ import annotations

import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable

WINDOW_MS = 30_000
ACK_TYPES = {1: "Accept", 2: "Release", 3: "Reject"}  # Kafka's RECORD_ACKS_MAP names
SHARE_GROUP_STATES = ("empty", "stable", "dead")

Sample = tuple[dict[str, str], float]


class Meter:
    def __init__(self, now_ms: Callable[[], int]) -> None:
        self._now_ms = now_ms
        self._lock = threading.Lock()
        self.count = 0
        self._recent: deque[tuple[int, int]] = deque()  # (time, amount)

    def mark(self, amount: int = 1) -> None:
        if amount <= 0:
            return
        now = self._now_ms()
        with self._lock:
            self.count += amount
            self._recent.append((now, amount))
            self._trim(now)

    def rate(self) -> float:
        """Per second, over the last WINDOW_MS."""
        now = self._now_ms()
        with self._lock:
            self._trim(now)
            return sum(a for _, a in self._recent) * 1000.0 / WINDOW_MS

    def _trim(self, now: int) -> None:
        while self._recent and self._recent[0][0] <= now - WINDOW_MS:
            self._recent.popleft()


class ShareMetrics:
    def __init__(self, now_ms: Callable[[], int]) -> None:
        self.acknowledgements = Meter(now_ms)  # offsets acknowledged, any type
        self.by_type = {name: Meter(now_ms) for name in ACK_TYPES.values()}
        self.acquired = Meter(now_ms)

    def acknowledged(self, first: int, last: int, types: Iterable[int]) -> None:
        """One applied acknowledgement batch (a type per offset, or one for all)."""
        kinds = list(types)
        n = last - first + 1
        counts = Counter({kinds[0]: n} if len(kinds) == 1 else Counter(kinds))
        self.acknowledgements.mark(n)
        for kind, amount in counts.items():
            name = ACK_TYPES.get(kind)
            if name is not None:  # a gap is no record
                self.by_type[name].mark(amount)

    def record_samples(self, rate: bool) -> list[Sample]:
        return [({"ack_type": name}, m.rate() if rate else float(m.count))
                for name, m in self.by_type.items()]


def share_group_states(states: Iterable[str]) -> list[Sample]:
    counts = Counter(s.lower() for s in states)
    return [({"state": s}, float(counts.get(s, 0))) for s in SHARE_GROUP_STATES]
