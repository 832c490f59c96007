"""Quota enforcement around each request: what the dispatcher calls.

``ClientQuotas.admit`` looks at a request before its handler runs (a Fetch is
capped to what the consumer's byte quota allows in one quota window, as Kafka
caps it, so one huge fetch cannot be throttled forever); ``respond`` records
the request's bytes or handler time, puts the throttle time into the
response's ``throttle_time_ms`` and encodes it. How the client is held back
follows Kafka (KIP-219): a response version whose client throttles itself goes
out at once and the connection is not read for the throttle time; an older
version's response is held back for the throttle time instead. A throttled
Fetch goes out empty and its bytes are not counted, as in Kafka.
CreateTopics, DeleteTopics and CreatePartitions carry their controller
mutation quota (mutation.py) to the handler, which charges it topic by
topic; the throttle time it ends with is one more reason to throttle.

Exempt, as in Kafka: fetches from follower replicas (replication quotas are
another matter), inter-broker requests and SASL authentication.
"""
from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

from samsa.protocol.messages import RequestHeader, encode_response
from samsa.protocol.model import ApiKey

from ..metrics import BrokerMetrics
from ..network.context import ConnectionContext
from ..network.turns import held_in_order
from .entities import (CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE,
                       REQUEST_PERCENTAGE, QuotaConfigs, QuotaMatch)
from .manager import (MutationQuotaManager, QuotaManager, QuotaWindow, client_window,
                      controller_window)
from .mutation import STRICT_FROM, UNBOUNDED, MutationQuota, is_strict
from .rate import now_ms
from .timing import BusyTime

# Bound once: looking a member up on the enum class costs on every request.
_PRODUCE, _FETCH = ApiKey.PRODUCE, ApiKey.FETCH
# Cluster actions and authentication are never throttled.
EXEMPT_APIS = frozenset({ApiKey.CONTROLLED_SHUTDOWN, ApiKey.WRITE_TXN_MARKERS,
                         ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})

# The first version of each API whose clients throttle themselves on a
# response's throttle_time_ms (Kafka's AbstractResponse.shouldClientThrottle,
# KIP-219); APIs not listed came after it and always do.
CLIENT_THROTTLES_FROM: dict[int, int] = {
    ApiKey.PRODUCE: 6,
    ApiKey.FETCH: 8,
    ApiKey.LIST_OFFSETS: 3,
    ApiKey.METADATA: 6,
    ApiKey.OFFSET_COMMIT: 4,
    ApiKey.OFFSET_FETCH: 4,
    ApiKey.FIND_COORDINATOR: 2,
    ApiKey.JOIN_GROUP: 3,
    ApiKey.HEARTBEAT: 2,
    ApiKey.LEAVE_GROUP: 2,
    ApiKey.SYNC_GROUP: 2,
    ApiKey.DESCRIBE_GROUPS: 2,
    ApiKey.LIST_GROUPS: 2,
    ApiKey.API_VERSIONS: 2,
    ApiKey.CREATE_TOPICS: 3,
    ApiKey.DELETE_TOPICS: 2,
    ApiKey.DELETE_RECORDS: 1,
    ApiKey.INIT_PRODUCER_ID: 1,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: 2,
    ApiKey.ADD_PARTITIONS_TO_TXN: 1,
    ApiKey.ADD_OFFSETS_TO_TXN: 1,
    ApiKey.END_TXN: 1,
    ApiKey.TXN_OFFSET_COMMIT: 1,
    ApiKey.DESCRIBE_ACLS: 1,
    ApiKey.CREATE_ACLS: 1,
    ApiKey.DELETE_ACLS: 1,
    ApiKey.DESCRIBE_CONFIGS: 2,
    ApiKey.ALTER_CONFIGS: 1,
    ApiKey.ALTER_REPLICA_LOG_DIRS: 1,
    ApiKey.DESCRIBE_LOG_DIRS: 1,
    ApiKey.CREATE_PARTITIONS: 1,
    ApiKey.DELETE_GROUPS: 1,
}


def client_throttles(api_key: int, version: int) -> bool:
    """Whether a client of this response version backs off by itself."""
    return version >= CLIENT_THROTTLES_FROM.get(api_key, 0)


def _replica_id(request: Any, version: int) -> int:
    if version >= 15:
        state = request.replica_state
        return state.replica_id if state is not None else -1
    return request.replica_id


def _size(parts: list) -> int:
    return sum(len(p) if isinstance(p, (bytes, bytearray, memoryview)) else p.length
               for p in parts)


class _Metered:
    """One request under quotas: what it is measured against, and its answer."""
    __slots__ = ("quotas", "conn", "header", "request", "frame_size", "produce", "fetch",
                 "request_time", "busy", "mutation")

    def __init__(self, quotas: "ClientQuotas", conn: ConnectionContext,
                 header: RequestHeader, request: Any, frame_size: int) -> None:
        self.quotas = quotas
        self.conn = conn
        self.header = header
        self.request = request
        self.frame_size = frame_size
        self.busy: BusyTime | None = None
        user, client_id = conn.principal.name, header.client_id or ""
        api, version = header.api_key, header.api_version
        self.produce: QuotaMatch | None = None
        self.fetch: QuotaMatch | None = None
        self.request_time: QuotaMatch | None = None
        self.mutation: MutationQuota = UNBOUNDED
        if api in STRICT_FROM:
            self.mutation = quotas.mutation_quota(user, client_id,
                                                  strict=is_strict(api, version))
        if api == _PRODUCE:
            self.produce = quotas.produce.match(user, client_id)
        elif api == _FETCH:
            if _replica_id(request, version) >= 0:
                return  # a follower: exempt from every client quota
            self.fetch = quotas.fetch.match(user, client_id)
            if self.fetch is not None and version >= 3:
                cap = max(1, int(quotas.fetch.max_in_window(self.fetch)))
                if request.max_bytes <= 0 or request.max_bytes > cap:
                    request.max_bytes = cap
        if api in EXEMPT_APIS or (api == _PRODUCE and request.acks == 0):
            return  # Kafka does not count acks=0 produce time against the request quota
        self.request_time = quotas.request.match(user, client_id)

    def timed(self, handling: Awaitable) -> Awaitable:
        if self.request_time is not None:
            self.busy = BusyTime(handling)  # type: ignore[arg-type]
            handling = self.busy
        if self.conn.mute_remaining() > 0 or self.conn.holds_requests():
            return self._after_mute(handling)
        return handling

    async def _after_mute(self, handling: Awaitable) -> Any:
        """A request read before its connection was muted (pipelined behind
        the throttled one) is handled when the mute ends, as Kafka, reading
        one request at a time, would only then have read it: in the order the
        requests arrived (network/turns.py: each one's timer could fire first),
        and one arriving while some are still held goes after them."""
        conn = self.conn
        try:
            await held_in_order(conn.held_turns, conn.mute_remaining)
        except BaseException:
            handling.close()  # type: ignore[attr-defined]  # never started: no warning
            raise
        if conn.peer_gone:  # the client went while it was held (closed, or its FIN): Kafka never read it
            handling.close()  # type: ignore[attr-defined]
            return None
        return await handling

    async def respond(self, response: Any) -> list | None:
        quotas = self.quotas
        now = now_ms()
        bandwidth = 0
        request_throttle = 0
        if self.request_time is not None and self.busy is not None:
            # Kafka's unit: percent of one thread over a second
            request_throttle = quotas.request.record(self.request_time,
                                                     self.busy.seconds * 100.0, now)
        parts = None
        if self.produce is not None:
            bandwidth = quotas.produce.record(self.produce, self.frame_size, now)
        elif self.fetch is not None and response is not None:
            parts = encode_response(self.header, response)
            size = _size(parts)
            bandwidth = quotas.fetch.record(self.fetch, size, now)
            if bandwidth or request_throttle:
                quotas.fetch.unrecord(self.fetch, size, now)
                if quotas.fetch_emptied is not None:
                    quotas.fetch_emptied(self.request, response)  # its fetch session
                response.responses = []
                parts = None
        mutation_throttle = self.mutation.throttle_ms()
        throttle = max(bandwidth, request_throttle, mutation_throttle)
        if throttle > 0:
            # a tie counts as request time, as in Kafka
            # (a throttle comes from a quota that matched: the match is never None here)
            if bandwidth > request_throttle:
                manager, match = (quotas.produce, self.produce) if self.produce is not None \
                    else (quotas.fetch, self.fetch)
            elif mutation_throttle > request_throttle:
                manager, match = quotas.mutations, self.mutation.match
            else:
                manager, match = quotas.request, self.request_time
            if match is not None:
                manager.throttled(match, throttle, now)
            if response is not None and "throttle_time_ms" in response._attrs:
                response.throttle_time_ms = throttle
                parts = None
        if response is None:  # acks=0: nothing to delay, so the connection waits
            if throttle > 0:
                self.conn.mute_for(throttle)
            return None
        if parts is None:
            parts = encode_response(self.header, response)
        if throttle > 0:
            # Either way nothing more from this client is handled before the
            # throttle time is over (Kafka reads one request at a time).
            self.conn.mute_for(throttle)
            if not client_throttles(self.header.api_key, self.header.api_version):
                await asyncio.sleep(throttle / 1000.0)
        return parts


class ClientQuotas:
    """The broker's client quotas: configs, the four managers, metrics."""

    def __init__(self, configs: QuotaConfigs, window: QuotaWindow,
                 metrics: BrokerMetrics | None = None,
                 mutation_window: QuotaWindow | None = None) -> None:
        """``window``: quota.window.*; ``mutation_window``: the controller
        mutation quota's own, controller.quota.window.* (as Kafka's
        ControllerMutationQuotaManager), ``window`` when not given."""
        self.configs = configs
        self.window = window
        # Told of a Fetch answer about to go out empty because it is throttled
        # (its fetch session must not count the emptied partitions as told)
        self.fetch_emptied: Callable[[Any, Any], None] | None = None
        self.produce = QuotaManager(PRODUCER_BYTE_RATE, configs, window)
        self.fetch = QuotaManager(CONSUMER_BYTE_RATE, configs, window)
        # Kafka bounds a request-time throttle to one quota window
        self.request = QuotaManager(REQUEST_PERCENTAGE, configs, window,
                                    max_throttle_ms=window.window_ms)
        self.mutations = MutationQuotaManager(CONTROLLER_MUTATION_RATE, configs,
                                              mutation_window or window)
        if metrics is not None:
            self._register_metrics(metrics)

    @classmethod
    def for_broker(cls, configs: QuotaConfigs, cfg: Any,
                   metrics: BrokerMetrics | None = None) -> "ClientQuotas":
        """The quotas of a broker configured with ``cfg`` (its windows)."""
        return cls(configs, client_window(cfg), metrics, mutation_window=controller_window(cfg))

    def meters(self, api_key: int) -> bool:
        """Whether a request of ``api_key`` may be under a quota; when not,
        the dispatcher skips the quotas altogether (no measuring, no
        throttling). Byte-rate and request quotas concern every request;
        mutation quotas only CreateTopics, DeleteTopics and CreatePartitions
        (Metadata's auto-creation charges its own, see mutation_quota)."""
        configs = self.configs
        return configs.any_request_quota or (configs.any_mutation_quota
                                             and api_key in STRICT_FROM)

    def admit(self, conn: ConnectionContext, header: RequestHeader, request: Any,
              frame_size: int) -> "_Metered":
        """A request under quotas (``meters`` is true): what it is measured against."""
        return _Metered(self, conn, header, request, frame_size)

    def mutation_quota(self, user: str, client_id: str, *, strict: bool) -> MutationQuota:
        """What one request's topic changes are charged to (unbounded without
        a quota): strict or permissive by the request's version for the topic
        admin APIs; permissive for Metadata's auto-creation, whose throttle
        time is never applied (as in Kafka, the partitions just count against
        the client's next admin request)."""
        match = self.mutations.match(user, client_id)
        if match is None:
            return UNBOUNDED
        return MutationQuota(self.mutations, match, strict)

    def _register_metrics(self, metrics: BrokerMetrics) -> None:
        # Kafka's JMX beans kafka.server:type=Produce|Fetch|Request|ControllerMutation,
        # user=,client-id= under the JMX exporter's names.
        def gauge(manager: QuotaManager, pick: int):
            def samples():
                now = now_ms()
                for user, client_id, rate, throttle in manager.snapshot(now):
                    yield {"user": user, "client_id": client_id}, (rate, throttle)[pick]
            return samples
        for kind, manager, rate_name, unit in (
                ("produce", self.produce, "byte_rate", "bytes/s"),
                ("fetch", self.fetch, "byte_rate", "bytes/s"),
                ("request", self.request, "request_time", "percent of a thread"),
                ("controllermutation", self.mutations, "mutation_rate", "partition mutations/s")):
            metrics.add_kafka_gauge(f"kafka_server_{kind}_{rate_name}",
                                    f"{kind} quota usage per user/client-id ({unit})",
                                    gauge(manager, 0))
            metrics.add_kafka_gauge(f"kafka_server_{kind}_throttle_time",
                                    f"average {kind} quota throttle time (ms) per user/client-id",
                                    gauge(manager, 1))
