"""From a request frame to its response parts: decode, dispatch, encode.

Malformed frames raise, which makes the network layer close that connection
with a log line. A well-formed request for an API or version we do not serve
is answered where the protocol allows it: ApiVersions of any version gets a v0
response with UNSUPPORTED_VERSION (35) and the list of what we do serve, which
every client can read and retries from (Kafka's ApiKeys.isVersionEnabled
accepts any ApiVersions version for this). Any other API's response could only
be encoded in the version asked for, which we do not speak, so the connection
is closed with a log line naming what is served, as Kafka's
SocketServer.parseRequestHeader does (UnsupportedVersionException, channel closed).
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from samsa.protocol.errors import ErrorCode, UnsupportedVersionError
from samsa.protocol.messages import RequestHeader, decode_request, encode_response
from samsa.protocol.model import ApiKey

from .handlers import HANDLERS, RequestContext
from .handlers.api_versions import api_versions_response
from .handlers.sasl import admits, expects_raw_token, handle_raw_token
from .handlers.services import Services
from .network.turns import Turns
from .quotas.mutation import UNBOUNDED
from .request_order import ORDERED, Turn, by_version

if TYPE_CHECKING:
    from .server import BrokerServices

log = logging.getLogger("broker.requests")
# (bound once: an enum member looked up on its class costs per request)
_WHOLE, _BY_VERSION, _AT_START = Turn.WHOLE, Turn.BY_VERSION, Turn.AT_THE_START


def handler_services(services: BrokerServices) -> Services:
    """What handlers see of the broker: BrokerServices satisfies the handlers'
    Services protocol structurally, and the checker checks it here."""
    return services


async def _in_turn(turns: Turns, turn: int, handler, ctx: RequestContext, request):
    """``handler(ctx, request)`` once every earlier turn has ended (made only
    then: one cancelled meanwhile, or never awaited, leaves no coroutine
    behind). Not at all when the client went meanwhile (closed, or sent its
    FIN, as a client that timed out closes its socket): Kafka, reading one
    request at a time, never read it, and a client that retried on a new
    connection would otherwise see this stale change land after its retry."""
    await turns.wait_for(turn)
    if ctx.conn.peer_gone:
        return None
    return await handler(ctx, request)


async def _from_its_turn(turns: Turns, turn: int, handler, ctx: RequestContext, request):
    """``handler(ctx, request)`` once every earlier turn has ended, its own
    turn ended as it starts (a group membership request, an OffsetCommit
    v1+: request_order.py).
    Inside any hold of a mute or pause, so the turn ends where it starts."""
    if not turns.is_turn(turn):
        await turns.wait_for(turn)
        if ctx.conn.peer_gone:  # (as _in_turn)
            return None
    turns.end(turn)
    return await handler(ctx, request)


class Dispatcher:
    def __init__(self, services: BrokerServices) -> None:
        self.services = services
        self.handler_services = handler_services(services)
        self.handlers = {spec.key: HANDLERS[ApiKey(spec.key)] for spec in services.advertised_apis}
        self.names = {spec.key: spec.name for spec in services.advertised_apis}

    async def __call__(self, conn, frame):
        # SASL listeners: a bare token after SaslHandshake v0, and nothing but
        # ApiVersions/SASL before authentication (decided before decoding).
        if conn.sasl:
            if expects_raw_token(conn):
                return await handle_raw_token(conn, self.services.sasl, frame)
            if not admits(conn, frame):
                conn.close()
                return None
        try:
            header, request = decode_request(frame)
        except UnsupportedVersionError as e:
            if e.api_key == ApiKey.API_VERSIONS:
                header = RequestHeader(api_key=ApiKey.API_VERSIONS, api_version=0,
                                       correlation_id=e.correlation_id, client_id=None)
                response = api_versions_response(self.services.advertised_apis,
                                                 ErrorCode.UNSUPPORTED_VERSION)
                return encode_response(header, response, version=0)
            raise
        return await self.dispatch(conn, header, request, len(frame))

    async def dispatch(self, conn, header, request, size, amend=None):
        """A decoded request (``size`` bytes) to its encoded response; ``amend`` (the test kit's
        per-partition faults, broker/faults/partitions.py) may change the
        response before it is encoded."""
        handler = self.handlers.get(header.api_key)
        if handler is None:
            raise UnsupportedVersionError(header.api_key, header.api_version,
                                          header.correlation_id)
        services = self.services
        metrics = services.metrics
        name = self.names[header.api_key]
        quotas = services.quotas
        # No quota for this request: nothing to measure or throttle (the common
        # case, kept to a branch: no quota objects, no extra coroutine). One
        # that is not metered still waits behind a mute (or requests held by
        # one): Kafka would not have read it before them.
        quota = (quotas.admit(conn, header, request, size)
                 if quotas.meters(header.api_key) or conn.mute_remaining() > 0
                 or conn.holds_requests() else None)
        started = metrics.request(header.api_key, name)
        # Taken now, in the order the frames arrived: the handler may wait
        # (a mute, a worker thread, the transaction coordinator) before it
        # takes effect (request_order.py)
        ordered = ORDERED.get(header.api_key)
        if ordered is _BY_VERSION:
            ordered = by_version(header.api_key, header.api_version)
        turn = conn.turns.take() if ordered is not None else 0
        try:
            ctx = RequestContext(header, conn, self.handler_services,
                                 UNBOUNDED if quota is None else quota.mutation, turn)
            if ordered is _WHOLE and not conn.turns.is_turn(turn):
                # (when every earlier turn has ended, none will hold it: no coroutine)
                handling = _in_turn(conn.turns, turn, handler, ctx, request)
            elif ordered is _AT_START:
                handling = _from_its_turn(conn.turns, turn, handler, ctx, request)
            else:
                handling = handler(ctx, request)
            response = await (handling if quota is None else quota.timed(handling))
        finally:
            metrics.request_done(name, started)
            if turn:  # however the handler ended (raised, cancelled)
                conn.turns.end(turn)
        if amend is not None and response is not None:
            response = amend(response)
        if quota is None:
            return None if response is None else encode_response(header, response)
        return await quota.respond(response)  # encoded, throttled per client quotas
