"""One request's controller mutation quota (KIP-599), what the topic admin
handlers charge: Kafka's ControllerMutationQuota.

CreateTopics, DeleteTopics and CreatePartitions charge the partitions each
topic creates, deletes or adds, after the topic has passed validation and
just before the change is written (a validate_only request charges
nothing). From the versions whose clients understand it (``STRICT_FROM``)
the quota is strict: a topic charged while the client's bucket is overdrawn
is refused with THROTTLING_QUOTA_EXCEEDED and the request's other topics go
on. Older versions are permissive: every change is made and the response is
throttled for as long as the bucket stays overdrawn.

Whatever the version, the response's throttle time is the latest one a
charge was answered with, less the time since (the handler may have waited
for leaders meanwhile), as in Kafka.
"""
from __future__ import annotations

from typing import Callable

from samsa.protocol.model import ApiKey

from .entities import QuotaMatch
from .manager import MutationQuotaManager
from .rate import now_ms

# The first version of each API with the strict quota (KafkaApis' strictSinceVersion)
STRICT_FROM: dict[int, int] = {ApiKey.CREATE_TOPICS: 6, ApiKey.DELETE_TOPICS: 5, ApiKey.CREATE_PARTITIONS: 3}


def is_strict(api_key: int, version: int) -> bool:
    return version >= STRICT_FROM[api_key]


class ThrottlingQuotaExceeded(Exception):
    """A strict quota refused a topic's mutations (THROTTLING_QUOTA_EXCEEDED)."""

    def __init__(self, throttle_ms: int) -> None:
        super().__init__("The throttling quota has been exceeded.")
        self.throttle_ms = throttle_ms


class MutationQuota:
    """The quota one request's topic changes are charged to. ``UNBOUNDED``
    (no manager) when no controller_mutation_rate applies to the client."""

    __slots__ = ("manager", "match", "strict", "_clock", "_throttle_ms", "_throttled_at_ms")

    def __init__(self, manager: MutationQuotaManager | None, match: QuotaMatch | None,
                 strict: bool, clock: Callable[[], float] = now_ms) -> None:
        self.manager = manager
        self.match = match
        self.strict = strict
        self._clock = clock
        self._throttle_ms = 0
        self._throttled_at_ms = 0.0

    def charge(self, partitions: int) -> None:
        """Charge ``partitions`` mutations; ThrottlingQuotaExceeded when a
        strict quota refuses them (the change must then not be made)."""
        if self.manager is None or self.match is None:
            return
        now = self._clock()
        take = self.manager.take_strict if self.strict else self.manager.take_permissive
        taken = take(self.match, partitions, now)
        if taken.throttle_ms > 0 or not taken.accepted:
            self._throttle_ms, self._throttled_at_ms = taken.throttle_ms, now
        if not taken.accepted:
            raise ThrottlingQuotaExceeded(taken.throttle_ms)

    def throttle_ms(self) -> int:
        """How long the client is to wait, counted from now."""
        if self._throttle_ms <= 0:
            return 0
        return max(0, int(self._throttle_ms - (self._clock() - self._throttled_at_ms)))


UNBOUNDED = MutationQuota(None, None, strict=False)
