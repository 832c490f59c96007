"""What a request handler knows about the connection a frame came in on.

Kept separate from the connection machinery so handlers depend on a small,
stable surface: who the peer is, which event loop they run on, and a dict for
per-connection state (e.g. the negotiated SASL state or client software name).
"""

from __future__ import annotations

import asyncio
from typing import Any

from samsa.broker.network.turns import Turns
from samsa.broker.security.principal import ANONYMOUS, KafkaPrincipal


class ConnectionContext:
    """Per-connection facts handed to every handler call.

    Attributes:
        connection_id: Kafka-style id "localhost:port-peerhost:port-index",
            unique for the life of the server.
        peer: the peer address tuple as returned by accept() (host, port[, ...]).
        peer_host / peer_port: convenience splits of ``peer``.
        local: the local (listener side) address tuple.
        loop: the processor event loop this connection (and its handlers) run on.
        processor: index of the processor thread owning the connection.
        state: free-form dict handlers may use for per-connection state.
        listener_name: the listener the connection came in on (e.g. PLAINTEXT,
            CLIENT); Metadata answers with that listener's endpoints.
        security_protocol: that listener's protocol: PLAINTEXT, SSL,
            SASL_PLAINTEXT or SASL_SSL.
        principal: who the peer is. User:ANONYMOUS until TLS client
            authentication or SASL says otherwise; ACLs and quotas use it.
        sasl: whether the listener is SASL_PLAINTEXT or SASL_SSL (fixed at
            construction: the dispatcher tests it before anything SASL).
        authenticated: False while a SASL listener's connection has not yet
            completed SASL authentication (then only ApiVersions, SaslHandshake
            and SaslAuthenticate are served); True otherwise.
    """

    __slots__ = ("connection_id", "peer", "peer_host", "peer_port", "local",
                 "loop", "processor", "state", "_conn", "listener_name",
                 "security_protocol", "principal", "sasl", "authenticated", "_turns",
                 "_held_turns")

    def __init__(self, connection_id: str, peer: tuple, local: tuple,
                 loop: asyncio.AbstractEventLoop, processor: int, conn: Any, *,
                 listener_name: str = "PLAINTEXT",
                 security_protocol: str = "PLAINTEXT") -> None:
        self.connection_id = connection_id
        self.peer = peer
        self.peer_host = peer[0] if peer else ""
        self.peer_port = peer[1] if peer and len(peer) > 1 else 0
        self.local = local
        self.loop = loop
        self.processor = processor
        self.state: dict = {}
        self._conn = conn
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self.principal: KafkaPrincipal = ANONYMOUS
        self.sasl = security_protocol.startswith("SASL_")
        self.authenticated = not self.sasl
        # (turns.py; made when first used: most connections never need the second)
        self._turns: Turns | None = None
        self._held_turns: Turns | None = None

    @property
    def turns(self) -> Turns:
        """The order this connection's requests take effect in, for the
        request types whose order matters (request_order.py, turns.py)."""
        if self._turns is None:
            self._turns = Turns()
        return self._turns

    @property
    def held_turns(self) -> Turns:
        """The order this connection's requests held back by a throttle's mute or
        a test kit pause go on in (turns.py)."""
        if self._held_turns is None:
            self._held_turns = Turns()
        return self._held_turns

    def holds_requests(self) -> bool:
        """Some request of this connection is held back (a mute, a pause): one
        arriving now goes after it."""
        return self._held_turns is not None and self._held_turns.holding()

    @property
    def closed(self) -> bool:
        """True once the connection is closed (responses would be dropped)."""
        return self._conn.closed

    @property
    def peer_gone(self) -> bool:
        """True once closed or the peer closed its side (EOF): the answers
        still owed are sent, but may never be read."""
        return bool(self._conn.peer_gone)

    def close(self) -> None:
        """Close the connection now (must be called on ``loop``); queued
        responses are discarded. For handlers that decide a peer is hopeless."""
        self._conn.close("closed by handler")

    def close_after_responses(self) -> None:
        """Read no further requests; close once the responses to those
        already received are sent (a failed SASL authentication: the client
        gets Kafka's error, then the connection goes)."""
        self._conn.finish()

    def mute_for(self, ms: int) -> None:
        """Stop reading this connection for ``ms`` ms (quota throttling; must
        be called on ``loop``): responses still go out."""
        self._conn.mute_for(ms)

    def mute_remaining(self) -> float:
        """Seconds until a ``mute_for`` ends (0 when not muted)."""
        return self._conn.mute_remaining()

    def __repr__(self) -> str:
        return f"ConnectionContext({self.connection_id!r})"
