"""SaslHandshake (17) and SaslAuthenticate (36), the raw-token framing of
SaslHandshake v0, and the gate that keeps unauthenticated peers out - as
Kafka's SaslServerAuthenticator does on SASL_PLAINTEXT and SASL_SSL listeners.

The exchange on a connection:
1. (optional) ApiVersions;
2. SaslHandshake names a mechanism the listener enables, else
   UNSUPPORTED_SASL_MECHANISM with the enabled list, and the connection closes;
3. v1+: SaslAuthenticate requests carry the mechanism's tokens (KIP-152);
   v0: the client sends each token as a bare size-prefixed frame with no
   Kafka header and gets the answer the same way (pre-1.0 clients);
4. success: the principal is User:<name> and every API is served; failure:
   SASL_AUTHENTICATION_FAILED with Kafka's message (v1+) then close, or a
   plain close (v0 raw tokens).
Before success only ApiVersions, SaslHandshake and SaslAuthenticate are
served; anything else closes the connection, as in Kafka, without an answer.

Re-authentication (KIP-368): with connections.max.reauth.ms > 0 the session
ends that long after authentication (SaslAuthenticate v1+ tells the client,
in session_lifetime_ms). A client re-authenticates on the same connection
with SaslHandshake v1 + SaslAuthenticate, as the same principal with the same
mechanism; once the session has ended, any other request closes the
connection.

The state changes that decide how the *next* frame is read (raw token or
request) happen before a handler first awaits, so they follow the order in
which frames arrived.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import struct

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (SaslAuthenticateRequest, SaslAuthenticateResponse,
                               SaslHandshakeRequest, SaslHandshakeResponse)
from samsa.protocol.model import ApiKey

from ..security.principal import user
from ..security.sasl.mechanism import (SaslAuthenticationError, SaslError, SaslServer,
                                       client_message)
from ..security.sasl.registry import new_server
from samsa.protocol.messages.wire import Buf

from .context import RequestContext
from .services import Connection, Sasl

log = logging.getLogger("broker.sasl")

_BEFORE_AUTHENTICATION = frozenset((ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE,
                                    ApiKey.SASL_AUTHENTICATE))
_REAUTHENTICATION = frozenset((ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE))
_STATE_KEY = "sasl"
_SIZE = struct.Struct(">i")


@dataclasses.dataclass
class _SaslSession:
    """One connection's SASL state (in ConnectionContext.state)."""
    server: SaslServer | None = None  # the exchange in progress, if any
    mechanism: str | None = None       # the mechanism the connection authenticated with
    raw_tokens: bool = False            # SaslHandshake v0: tokens come as bare frames
    expires_at: float | None = None     # loop time the session ends (KIP-368)


def _is_sasl(conn: Connection) -> bool:
    return conn.security_protocol.startswith("SASL_")


def _existing_session(conn: Connection) -> _SaslSession | None:
    session = conn.state.get(_STATE_KEY)
    return session if isinstance(session, _SaslSession) else None


def _session(conn: Connection) -> _SaslSession:
    session = _existing_session(conn)
    if session is None:
        session = _SaslSession()
        conn.state[_STATE_KEY] = session
    return session


def expects_raw_token(conn: Connection) -> bool:
    """True when the next frame is a bare SASL token (after SaslHandshake v0)."""
    session = _existing_session(conn)
    return session is not None and session.raw_tokens


def admits(conn: Connection, frame: Buf) -> bool:
    """May this connection send this request frame now? False: close it.
    Before authentication only ApiVersions and SASL are taken, so an
    unauthenticated peer cannot make the broker work for it (and the
    connection reads no frame above sasl.server.max.receive.size from it: see
    broker/network/connection.py, which checks the size prefix)."""
    if not _is_sasl(conn):
        return True
    if not conn.authenticated:
        return int.from_bytes(frame[:2], "big", signed=True) in _BEFORE_AUTHENTICATION
    session = _existing_session(conn)
    if session is None or session.expires_at is None or conn.loop.time() < session.expires_at:
        return True
    if int.from_bytes(frame[:2], "big", signed=True) in _REAUTHENTICATION:
        return True
    log.info("closing connection %s: SASL session of %s expired",
             conn.connection_id, conn.principal)
    return False


def _refuse(conn: Connection, why: str) -> None:
    """A request out of order in the SASL exchange (Kafka's
    IllegalSaslStateException): close at once, no answer."""
    log.info("closing connection %s: %s", conn.connection_id, why)
    conn.close()


async def handle_sasl_handshake(ctx: RequestContext, req: SaslHandshakeRequest
                                ) -> SaslHandshakeResponse | None:
    conn = ctx.conn
    if not _is_sasl(conn):
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    settings = ctx.broker.sasl.for_listener(conn.listener_name)
    session = _session(conn)
    reauthenticating = conn.authenticated
    if (session.server is not None and not session.server.complete) or session.raw_tokens:
        _refuse(conn, "SaslHandshake during a SASL exchange")
        return None
    if reauthenticating and ctx.version == 0:
        # v0 cannot re-authenticate; Kafka's request handler answers it so
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    enabled = list(settings.mechanisms)
    mechanism = req.mechanism
    if mechanism not in enabled or (reauthenticating and mechanism != session.mechanism):
        log.info("connection %s: SASL mechanism %r refused (enabled: %s)",
                 conn.connection_id, mechanism, ",".join(enabled))
        conn.close_after_responses()
        return SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                     mechanisms=enabled)
    session.server = new_server(mechanism, settings.plain_users,
                                ctx.broker.scram_credentials.credential)
    session.raw_tokens = ctx.version == 0
    return SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled)


async def handle_sasl_authenticate(ctx: RequestContext, req: SaslAuthenticateRequest
                                   ) -> SaslAuthenticateResponse | None:
    conn = ctx.conn
    if not _is_sasl(conn):
        return _authenticate_response(ErrorCode.ILLEGAL_SASL_STATE,
                                      "SaslAuthenticate on a listener without SASL")
    session = _existing_session(conn)
    server = session.server if session is not None else None
    if server is None and conn.authenticated:
        # as Kafka's request handler answers it (the connection stays)
        return _authenticate_response(ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate request "
                                      "received after successful authentication")
    if session is None or server is None or server.complete or session.raw_tokens:
        _refuse(conn, "SaslAuthenticate without a SaslHandshake v1+ before it")
        return None
    try:
        answer = await server.evaluate(req.auth_bytes or b"")
        if server.complete:
            lifetime_ms = _authenticated(conn, ctx.broker.sasl, session, server)
        else:
            lifetime_ms = 0
    except SaslError as e:
        log.info("connection %s: SASL/%s authentication failed: %s",
                 conn.connection_id, server.mechanism, e)
        session.server = None
        conn.close_after_responses()
        delay_ms = ctx.broker.sasl.failed_authentication_delay_ms
        if delay_ms:
            await asyncio.sleep(delay_ms / 1000)
        return _authenticate_response(ErrorCode.SASL_AUTHENTICATION_FAILED,
                                      client_message(server.mechanism, e))
    return SaslAuthenticateResponse(error_code=ErrorCode.NONE, error_message=None,
                                    auth_bytes=answer, session_lifetime_ms=lifetime_ms)


async def handle_raw_token(conn: Connection, sasl: Sasl, frame: Buf) -> list[bytes] | None:
    """A bare token after SaslHandshake v0: answered as a bare size-prefixed
    frame; a failure closes the connection (the v0 protocol has no error field).
    Such a frame has no request header: the dispatcher passes the connection and
    the SASL settings, not a RequestContext."""
    session = _existing_session(conn)
    server = session.server if session is not None else None
    if session is None or server is None:  # the dispatcher asked expects_raw_token first
        _refuse(conn, "a SASL token without a SaslHandshake v0 before it")
        return None
    try:
        answer = await server.evaluate(bytes(frame))
        if server.complete:
            session.raw_tokens = False  # Kafka requests follow
            _authenticated(conn, sasl, session, server)
    except SaslError as e:
        session.raw_tokens = False  # whatever else arrives is refused by the gate
        delay_ms = sasl.failed_authentication_delay_ms
        if delay_ms:
            await asyncio.sleep(delay_ms / 1000)
        _refuse(conn, f"SASL/{server.mechanism} authentication (raw tokens) failed: {e}")
        return None
    return [_SIZE.pack(len(answer)), answer]


def _authenticated(conn: Connection, sasl: Sasl, session: _SaslSession, server: SaslServer) -> int:
    """Take the completed exchange's principal; the session lifetime in ms."""
    principal = user(server.authorization_id)
    reauthenticated = conn.authenticated
    if reauthenticated and principal != conn.principal:
        raise SaslAuthenticationError(f"Cannot change principals during re-authentication "
                                      f"from {conn.principal}: {principal}")
    lifetime_ms = sasl.for_listener(conn.listener_name).max_reauth_ms
    conn.principal = principal
    conn.authenticated = True
    session.mechanism = server.mechanism
    session.server = None
    session.expires_at = conn.loop.time() + lifetime_ms / 1000 if lifetime_ms else None
    log.debug("connection %s %s as %s with SASL/%s (session lifetime %d ms)",
              conn.connection_id, "re-authenticated" if reauthenticated else "authenticated",
              principal, server.mechanism, lifetime_ms)
    return lifetime_ms


def _authenticate_response(error: int, message: str) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(error_code=error, error_message=message, auth_bytes=b"",
                                    session_lifetime_ms=0)
