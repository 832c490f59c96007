"""A processor: one thread running its own uvloop event loop.

The acceptor hands accepted sockets over with ``call_soon_threadsafe``; from
then on the socket, its Connection and every handler call for it live on this
loop only, so connection state needs no locks. Counters here are written only
by this thread (the server sums them for metrics).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from typing import TYPE_CHECKING, Callable

from samsa.broker.network.connection import Connection, Handler, SockAddress
from samsa.broker.network.log_limit import RateLimitedLog
from samsa.broker.network.memory import RequestMemoryPool
from samsa.broker.network.tls import TlsConnection

if TYPE_CHECKING:  # pragma: no cover
    from samsa.broker.network.server import NetworkServer

_new_event_loop: Callable[[], asyncio.AbstractEventLoop]
try:
    import uvloop
    _new_event_loop = uvloop.new_event_loop
except ImportError:  # pragma: no cover - uvloop is a declared dependency
    _new_event_loop = asyncio.new_event_loop


class Processor:
    def __init__(self, index: int, server: NetworkServer, *, handler: Handler, logger: logging.Logger,
                 memory_pool: RequestMemoryPool, rate_log: RateLimitedLog,
                 max_frame_bytes: int, max_unauthenticated_frame_bytes: int,
                 max_pending_response_bytes: int,
                 max_inflight_requests: int, max_inflight_request_bytes: int,
                 idle_timeout_ms: int, receive_timeout_ms: int,
                 send_buffer_bytes: int, recv_buffer_bytes: int) -> None:
        self.index = index
        self.server = server
        self.handler = handler
        self.logger = logger
        self.memory_pool = memory_pool  # shared by all processors (queued.max.request.bytes)
        self.rate_log = rate_log        # shared: one budget of log lines per kind of event
        self.max_frame_bytes = max_frame_bytes
        # sasl.server.max.receive.size: the limit before SASL authentication
        self.max_unauthenticated_frame_bytes = max_unauthenticated_frame_bytes
        self.max_pending_response_bytes = max_pending_response_bytes
        self.max_inflight_requests = max_inflight_requests
        self.max_inflight_request_bytes = max_inflight_request_bytes
        self.idle_timeout = idle_timeout_ms / 1000.0
        self.receive_timeout = receive_timeout_ms / 1000.0
        self.send_buffer_bytes = send_buffer_bytes
        self.recv_buffer_bytes = recv_buffer_bytes
        self.loop = _new_event_loop()
        self.connections: dict[str, Connection] = {}
        self.thread = threading.Thread(target=self._run, name=f"samsa-network-{index}",
                                       daemon=True)
        self._stopping = False
        self.on_exit: Callable[[], object] | None = None  # called last, on this thread
        self._idle_handle: asyncio.TimerHandle | None = None
        # metrics, written only on this thread
        self.requests = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.connections_closed = 0

    # -------------------------------------------------------------- thread

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self._schedule_idle_check()
        try:
            self.loop.run_forever()
        finally:
            try:
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
                # handlers may have used run_in_executor on this loop
                self.loop.run_until_complete(self.loop.shutdown_default_executor())
            finally:
                self.loop.close()
                if self.on_exit is not None:
                    self.on_exit()

    async def shutdown(self) -> None:
        """Close every connection and cancel handler tasks (runs on this loop)."""
        self._stopping = True
        if self._idle_handle is not None:
            self._idle_handle.cancel()
        for conn in list(self.connections.values()):
            conn.close("server stopping")
        me = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks(self.loop) if t is not me]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def stop_loop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)

    # -------------------------------------------------------------- connections

    def add_connection(self, sock: socket.socket, peer: SockAddress, connection_id: str) -> None:
        """Called on this loop via call_soon_threadsafe by the acceptor."""
        if self._stopping:
            sock.close()
            self.server._release_slot(peer)
            return
        try:
            sock.setblocking(False)
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.send_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
            if self.recv_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.recv_buffer_bytes)
            conn = (Connection if self.server.tls is None else TlsConnection)(
                self, sock, peer, connection_id)
        except OSError as e:  # peer already gone
            self.logger.debug("dropping new connection from %s: %s", peer, e)
            sock.close()
            self.server._release_slot(peer)
            self.connections_closed += 1
            return
        self.connections[connection_id] = conn
        conn.start()

    def connection_closed(self, conn: Connection) -> None:
        """Called by Connection.close exactly once."""
        if self.connections.pop(conn.ctx.connection_id, None) is not None:
            self.connections_closed += 1
            self.server._release_slot(conn.ctx.peer)

    # -------------------------------------------------------------- idle sweep

    def _schedule_idle_check(self) -> None:
        # A sweep every tenth of the shorter timeout (bounded) keeps the
        # overshoot small without a timer per connection or per request.
        timeout = min((t for t in (self.idle_timeout, self.receive_timeout) if t > 0),
                      default=50.0)
        interval = min(max(timeout / 10.0, 0.01), 5.0)
        self._idle_handle = self.loop.call_later(interval, self._idle_check)

    def _idle_check(self) -> None:
        now = self.loop.time()
        deadline = now - self.idle_timeout
        frame_deadline = now - self.receive_timeout
        quiet = now - 1.0
        for conn in list(self.connections.values()):
            since = conn.receiving_since
            if since is not None and since < frame_deadline:
                # A frame that stopped or trickles holds its buffer and the
                # request memory it was granted: give them back.
                self.rate_log.info(
                    "receive-timeout", "closing connection %s: a request did not arrive within "
                    "%d ms of its first byte (request.receive.timeout.ms)",
                    conn.ctx.connection_id, self.receive_timeout * 1000)
                conn.close(None)
            elif conn.idle:
                if self.idle_timeout > 0 and conn.last_active < deadline:
                    self.logger.debug("closing idle connection %s", conn.ctx.connection_id)
                    conn.close(None)
                elif conn.last_active < quiet:
                    conn.shrink()
        if not self._stopping:
            self._schedule_idle_check()
