"""Applying the fault rules to each request (the one hook on the request path).

``wrap(dispatcher)`` is what the network calls instead of the dispatcher when
faults are enabled; with no rule set it costs one check per request. A request
that matches:

- an error rule is answered with that error without being handled; one scoped
  to a topic(-partition), on an API answered per partition, sets the error on
  the matching partitions alone and the rest is handled as usual
  (broker/faults/partitions.py);
- a disconnect rule is handled and its connection closed instead of answered
  (a client cannot know whether it was applied: what idempotence is for);
- a delay is answered that much later (later responses on the same connection
  wait behind it, as on a slow link);
- while paused, it waits unanswered until resume.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any, Awaitable, Callable

from samsa.protocol.messages import decode_request, encode_response

from ..network.turns import held_in_order
from .partitions import PARTITIONED, Hit, mark, strip, touched
from .responses import can_answer, error_response
from .rules import FaultRules, api_name

log = logging.getLogger("broker.faults")

Handler = Callable[[Any, Any], Awaitable[Any]]
PAUSE_POLL_S = 0.01


class FaultInjector:
    def __init__(self, topic_name: Callable[[uuid.UUID], str | None]) -> None:
        self.rules = FaultRules()
        self._topic_name = topic_name  # requests that name topics by id (Produce v13, Fetch v13+)

    def refusing(self) -> bool:
        """Whether the acceptor closes new connections now."""
        return self.rules.refuse_until > 0 and self.rules.refusing()

    def wrap(self, inner: Handler) -> Handler:
        rules = self.rules

        async def handle(conn: Any, frame: Any) -> Any:
            if not rules.any_request_rule() and not conn.holds_requests():
                return await inner(conn, frame)
            return await self._faulty(conn, frame, inner)
        return handle

    async def _faulty(self, conn: Any, frame: Any, inner: Handler) -> Any:
        rules = self.rules
        if rules.paused or conn.holds_requests():
            # Let go in the order they arrived (network/turns.py: each one's
            # poll could end first), a later one after them.
            if rules.paused:
                log.info("fault: holding a request on %s until resumed", conn.connection_id)
            await held_in_order(conn.held_turns,
                                lambda: PAUSE_POLL_S if rules.paused else 0.0)
            if conn.peer_gone:  # the client went while it was held (closed, or its FIN)
                return None
        if getattr(conn, "sasl", False) and not conn.authenticated:
            return await inner(conn, frame)  # authentication is never faulted
        try:
            header, request = decode_request(frame)
        except Exception:  # not ours to judge: the dispatcher answers or closes as usual
            return await inner(conn, frame)
        api = header.api_key
        if rules.errors and can_answer(api):
            rule = rules.take_error(api, header.client_id, self._touches(api, request))
            dispatch = getattr(inner, "dispatch", None)
            if rule is not None and rule.topic is not None and api in PARTITIONED and dispatch:
                hits = self._hits(api, request, rule.topic, rule.partition)
                log.info("fault: answered %s v%d (correlation id %d, client %s) with %s on %s, "
                         "the other partitions as usual (%d more to inject)", api_name(api),
                         header.api_version, header.correlation_id, header.client_id,
                         rule.error.name, ", ".join(f"{rule.topic}-{p}" for _, _, p in hits),
                         max(rule.remaining, 0))
                strip(api, request, hits)
                parts = await dispatch(conn, header, request, len(frame),
                                       lambda response: mark(api, response, hits, rule.error))
                await self._delay(api, header)
                return parts
            if rule is not None:
                log.info("fault: answered %s v%d (correlation id %d, client %s) with %s "
                         "without handling it (%d more to inject)", api_name(api),
                         header.api_version, header.correlation_id, header.client_id,
                         rule.error.name, max(rule.remaining, 0))
                response = error_response(api, request, rule.error)
                await self._delay(api, header)
                return encode_response(header, response)
        if rules.take_disconnect(api):
            await inner(conn, frame)
            log.info("fault: handled %s (correlation id %d, client %s) and closed connection %s "
                     "instead of answering", api_name(api), header.correlation_id,
                     header.client_id, conn.connection_id)
            conn.close()
            return None
        parts = await inner(conn, frame)
        await self._delay(api, header)
        return parts

    async def _delay(self, api: int, header: Any) -> None:
        seconds = self.rules.delay_for(api)
        if seconds > 0:
            log.info("fault: delaying the answer to %s (correlation id %d, client %s) by %d ms",
                     api_name(api), header.correlation_id, header.client_id, seconds * 1000)
            await asyncio.sleep(seconds)

    def _hits(self, api: int, request: Any, topic: str, partition: int | None) -> list[Hit]:
        """The partitions of the request on ``topic`` (``partition``: that one only)."""
        hits = []
        for entry in touched(api, request):
            name, topic_id, p = entry
            if not name and topic_id is not None:
                name = self._topic_name(topic_id)
            if name == topic and (partition is None or partition == p):
                hits.append(entry)  # as the request names it (by id from Produce v13, Fetch v13)
        return hits

    def _touches(self, api: int, request: Any) -> Callable[[str, int | None], bool]:
        def touches(topic: str, partition: int | None) -> bool:
            return bool(self._hits(api, request, topic, partition))
        return touches
