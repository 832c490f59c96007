"""An asyncio connection to a Kafka-protocol broker, over ``client/core.py``.

Used where samsa itself is a client on an event loop (replica fetchers,
requests between brokers, async tools and tests). Requests may be pipelined:
``call`` can be awaited from several tasks at once; one reader task matches
responses to requests through the sans-IO core, in order.

    conn = await KafkaConnection.connect("127.0.0.1", 9092, client_id="samsa-fetcher")
    response = await conn.call(MetadataRequest(topics=None), api_key=ApiKey.METADATA)
    await conn.close()

On a SASL listener whose sessions end (``connections.max.reauth.ms``, KIP-368)
the connection re-authenticates as Kafka's clients do: once 85-95% of the
session lifetime has passed, the next request waits while every request
already sent is answered and SaslHandshake + SaslAuthenticate run again on
the same connection; requests go on after that. A refused or broken
re-authentication closes the connection (callers reconnect as after any
other break).
"""
from __future__ import annotations

import asyncio
import collections
import logging
import ssl
from typing import Any

from samsa.client.core import ClientCore
from samsa.protocol.errors import ProtocolError
from samsa.protocol.messages import ApiVersionsRequest, SaslAuthenticateRequest, SaslHandshakeRequest
from samsa.protocol.model import ApiKey

from samsa.client.sasl import (ReauthenticationClock, SaslClientError, SaslClientSettings,
                                   authenticate_async)

log = logging.getLogger("broker.aio_client")



class ConnectionClosedError(ConnectionError):
    """The connection closed (or broke) before the response arrived."""


class _FrameProtocol(asyncio.BufferedProtocol):
    """Reads each response frame straight into a buffer of its own size: the
    4-byte size prefix first, then the body, with no stream buffer between
    the socket and the decoder (a follower's Fetch answers are megabytes;
    a StreamReader copied each of them three times more)."""

    def __init__(self, connection: "KafkaConnection") -> None:
        self._conn = connection
        self._head = bytearray(4)
        self._frame: bytearray | None = None
        self._filled = 0
        self.transport: asyncio.Transport | None = None
        self._can_write = asyncio.Event()
        self._can_write.set()
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        target = self._head if self._frame is None else self._frame
        return memoryview(target)[self._filled:]

    def buffer_updated(self, nbytes: int) -> None:
        self._filled += nbytes
        if self._frame is None:
            if self._filled < 4:
                return
            try:
                size = self._conn.core.frame_size(self._head)
            except ProtocolError as e:
                self._conn._fail(ConnectionClosedError(
                    f"connection to {self._conn.address} broke: {e}"))
                return
            self._frame = bytearray(size)
            self._filled = 0
        elif self._filled == len(self._frame):
            frame, self._frame, self._filled = self._frame, None, 0
            self._conn._frame_received(frame)

    def eof_received(self) -> bool:
        self._conn._fail(ConnectionClosedError(f"{self._conn.address} closed the connection"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._conn._fail(ConnectionClosedError(
            f"connection to {self._conn.address} broke: {exc}" if exc is not None
            else f"{self._conn.address} closed the connection"))
        self._can_write.set()
        if not self.lost.done():
            self.lost.set_result(None)

    def pause_writing(self) -> None:
        self._can_write.clear()

    def resume_writing(self) -> None:
        self._can_write.set()

    async def drain(self) -> None:
        await self._can_write.wait()


class KafkaConnection:
    def __init__(self, protocol: _FrameProtocol, core: ClientCore, address: str,
                 timeout: float = 30.0) -> None:
        self._protocol = protocol
        self.core = core
        self.address = address
        self._timeout = timeout
        self._waiters: collections.deque[asyncio.Future] = collections.deque()
        # set while no answer is awaited (a caller that gave up on its answer
        # still has its request in flight: its future is done, the answer not)
        self._nothing_in_flight = asyncio.Event()
        self._nothing_in_flight.set()
        self._closed_error: BaseException | None = None
        self._closed_here = False  # close() was called: nothing to warn about
        self._sasl: SaslClientSettings | None = None  # set once logged in
        self._session = ReauthenticationClock()
        self._reauthentication: asyncio.Task | None = None

    @classmethod
    async def connect(cls, host: str, port: int, *, client_id: str | None = "samsa",
                      timeout: float = 30.0,
                      tls: ssl.SSLContext | None = None,
                      sasl: SaslClientSettings | None = None) -> "KafkaConnection":
        """Open the connection (over TLS with ``tls``), learn the broker's API
        versions and, on a SASL listener (``sasl`` given), authenticate."""
        address = f"{host}:{port}"
        # no protocol yet: the protocol needs the connection, which gets it (below) once
        # connected; nothing reads it before then
        conn = cls(None, ClientCore(client_id), address, timeout)  # type: ignore[arg-type]
        loop = asyncio.get_running_loop()
        try:
            _, protocol = await asyncio.wait_for(
                loop.create_connection(lambda: _FrameProtocol(conn), host, port, ssl=tls,
                                       server_hostname=host if tls is not None else None),
                timeout)
        except (OSError, asyncio.TimeoutError) as e:  # ssl.SSLError is an OSError
            raise ConnectionClosedError(f"could not connect to {address}: {e or 'timed out'}") \
                from None
        conn._protocol = protocol
        try:
            await asyncio.wait_for(conn.call(ApiVersionsRequest(client_software_name="samsa",
                                                                client_software_version="0"),
                                             api_key=ApiKey.API_VERSIONS, version=3), timeout)
            if sasl is not None:
                await asyncio.wait_for(conn._authenticate(sasl), timeout)
                conn._sasl = sasl
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _authenticate(self, sasl: SaslClientSettings) -> None:
        """SASL on a SASL_* listener: SaslHandshake v1, then SaslAuthenticate;
        the same again to re-authenticate (Kafka's clients send the handshake
        then too). Starts the session's clock."""
        handshake = await self._request(SaslHandshakeRequest(mechanism=sasl.mechanism),
                                        api_key=ApiKey.SASL_HANDSHAKE, version=1)
        if handshake.error_code:
            raise ConnectionClosedError(f"{self.address} does not take SASL/{sasl.mechanism} "
                                        f"(enabled: {', '.join(handshake.mechanisms)})")
        session_lifetime_ms = 0

        async def exchange(token: bytes) -> bytes:
            nonlocal session_lifetime_ms
            answer = await self._request(SaslAuthenticateRequest(auth_bytes=token),
                                         api_key=ApiKey.SASL_AUTHENTICATE)
            if answer.error_code:
                raise ConnectionClosedError(f"SASL authentication at {self.address} failed: "
                                            f"{answer.error_message}")
            session_lifetime_ms = answer.session_lifetime_ms  # the last answer's counts
            return bytes(answer.auth_bytes)
        try:
            await authenticate_async(sasl, exchange)
        except SaslClientError as e:
            raise ConnectionClosedError(f"SASL authentication at {self.address} failed: "
                                        f"{e}") from None
        self._session.authenticated(session_lifetime_ms)

    def _reauthentication_due(self) -> bool:
        return self._reauthentication is not None or (
            self._sasl is not None and self._closed_error is None and self._session.due)

    async def _reauthenticated(self) -> None:
        """Wait for the connection's re-authentication, starting it if none
        runs. Shielded: a caller that gives up (its own timeout) leaves it
        running for the others."""
        if self._reauthentication is None:
            self._reauthentication = asyncio.get_running_loop().create_task(
                self._reauthenticate(), name=f"reauthenticate {self.address}")
        await asyncio.shield(self._reauthentication)

    async def _reauthenticate(self) -> None:
        """Once every request sent before it is answered (never interleaved
        with them), log in again; on any failure close the connection, which
        fails the requests waiting for it too. Never raises."""
        sasl = self._sasl
        assert sasl is not None
        try:
            await asyncio.wait_for(self._reauthenticate_when_nothing_in_flight(sasl),
                                   self._timeout)
        except (ConnectionClosedError, OSError, asyncio.TimeoutError) as e:
            self._closed_by_reauthentication(e if not isinstance(e, asyncio.TimeoutError)
                                             else f"no answer in {self._timeout:g} s")
        except Exception as e:  # a bug: the connection's state is unknown
            log.exception("re-authenticating to %s", self.address)
            self._closed_by_reauthentication(repr(e))
        finally:
            self._reauthentication = None

    async def _reauthenticate_when_nothing_in_flight(self, sasl: SaslClientSettings) -> None:
        await self._nothing_in_flight.wait()
        if self._closed_error is not None:
            return  # it broke meanwhile: nothing to re-authenticate
        await self._authenticate(sasl)
        log.info("re-authenticated to %s as %s with SASL/%s: session lifetime %d ms, "
                 "next re-authentication after %s ms", self.address, sasl.username,
                 sasl.mechanism, self._session.session_lifetime_ms,
                 self._session.reauthenticate_after_ms)

    def _closed_by_reauthentication(self, why: object) -> None:
        """Close; what callers are told is the failed re-authentication, even
        when the peer's close (it closes right after a refusal) was read first."""
        if self._closed_here:
            return  # closed on purpose (a broker stopping) while re-authenticating
        log.warning("SASL re-authentication to %s failed (%s): closing the connection",
                    self.address, why)
        self._closed_error = ConnectionClosedError(
            f"SASL re-authentication to {self.address} failed: {why}")
        self._fail(self._closed_error)

    @property
    def closed(self) -> bool:
        return self._closed_error is not None

    async def call(self, request: Any, *, api_key: int, version: int | None = None,
                   expects_response: bool = True) -> Any:
        """Send one request and wait for its response (None when none is expected),
        re-authenticating first when the SASL session is about to end."""
        if self._reauthentication_due():
            await self._reauthenticated()
        return await self._request(request, api_key=api_key, version=version,
                                   expects_response=expects_response)

    async def _request(self, request: Any, *, api_key: int, version: int | None = None,
                       expects_response: bool = True) -> Any:
        if self._closed_error is not None:
            raise ConnectionClosedError(f"connection to {self.address} is closed: "
                                        f"{self._closed_error}")
        transport = self._protocol.transport
        if transport is None:  # (create_connection answers after connection_made: not seen)
            raise ConnectionClosedError(f"connection to {self.address} is not open")
        _, data = self.core.request(request, api_key=api_key, version=version,
                                    expects_response=expects_response)
        future: asyncio.Future | None = None
        if expects_response:
            future = asyncio.get_running_loop().create_future()
            self._waiters.append(future)
            self._nothing_in_flight.clear()
        transport.write(data)
        await self._protocol.drain()
        if self._closed_error is not None and future is None:
            raise ConnectionClosedError(f"send to {self.address} failed: {self._closed_error}")
        if future is None:
            return None
        return await future

    def _frame_received(self, frame: bytearray) -> None:
        try:
            _, response = self.core.receive_frame(frame)
        except ProtocolError as e:
            self._fail(ConnectionClosedError(f"connection to {self.address} broke: {e}"))
            return
        future = self._waiters.popleft()
        if not self._waiters:
            self._nothing_in_flight.set()
        if not future.done():
            future.set_result(response)

    def _fail(self, error: BaseException) -> None:
        if self._closed_error is None:
            self._closed_error = error
        self.core.fail_all()
        while self._waiters:
            future = self._waiters.popleft()
            if not future.done():
                future.set_exception(error)
        self._nothing_in_flight.set()
        if self._protocol is not None and self._protocol.transport is not None:
            self._protocol.transport.close()

    async def close(self) -> None:
        self._closed_here = True
        self._fail(ConnectionClosedError("connection closed"))
        if self._protocol is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._protocol.lost), 5)
            except (asyncio.TimeoutError, OSError, RuntimeError):
                pass
