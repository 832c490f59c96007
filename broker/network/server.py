"""NetworkServer: the listener, the acceptor task and the processor threads.

The acceptor is one task on the loop that calls ``start()``; it accepts
sockets, enforces ``max.connections`` / ``max.connections.per.ip`` (excess
sockets are closed at once) and the connection creation rates of
broker/quotas/connection_rate.py (over the broker's or the listener's rate it
waits before accepting more; a socket over its address's rate is held
unserved and closed after the throttle time, as Kafka's acceptor does), and
hands every accepted socket round-robin to one of ``num_threads`` processors
(see processor.py) with ``call_soon_threadsafe``. Everything after the hand-off happens on the
processor's loop (see connection.py for framing, ordering, sendfile and
backpressure).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from functools import partial
from typing import Any, TypedDict

from samsa.broker.network.connection import Handler as Handler, SockAddress
from samsa.broker.network.log_limit import RateLimitedLog
from samsa.broker.network.memory import RequestMemoryPool
from samsa.broker.network.processor import Processor
from samsa.broker.quotas.connection_rate import ConnectionRateQuotas
from samsa.broker.quotas.rate import now_ms
from samsa.broker.security.tls_config import ListenerTls

_log = logging.getLogger("broker.network")


def _set_done(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class _ProcessorSettings(TypedDict):
    """A Processor's keyword arguments but the handler (which may come later: set_handler)."""
    logger: logging.Logger
    memory_pool: RequestMemoryPool
    rate_log: RateLimitedLog
    max_frame_bytes: int
    max_unauthenticated_frame_bytes: int
    max_pending_response_bytes: int
    max_inflight_requests: int
    max_inflight_request_bytes: int
    idle_timeout_ms: int
    receive_timeout_ms: int
    send_buffer_bytes: int
    recv_buffer_bytes: int


class ConnectionCounts:
    """Open connections in total and per address. max.connections and
    max.connections.per.ip are broker-wide in Kafka, so a broker's listeners
    share one of these."""

    def __init__(self) -> None:
        self.lock = threading.Lock()  # guards open and per_ip
        self.open = 0
        self.per_ip: dict[str, int] = {}


class NetworkServer:
    """Kafka-style network layer: size-prefixed frames in, ordered responses out.

    ``handler(conn, frame)`` is awaited on the connection's processor loop for
    each complete frame (``frame`` excludes the 4-byte size prefix, is a
    writable memoryview, and stays valid as long as the handler keeps it).
    It returns a list of parts (bytes-like, or region objects with ``file``,
    ``position``, ``length`` that are written with sendfile; the first part
    carries the 4-byte size prefix) or None for no response.

    Metrics (read from any thread; processor-side ones are sums over threads):
    ``connections_accepted``, ``connections_rejected``, ``connections_throttled``,
    ``accept_blocked_ns``, ``connections_open``, ``connections_closed``,
    ``requests``, ``bytes_in``, ``bytes_out``.
    """

    def __init__(self, host: str, port: int, num_threads: int, handler: Handler | None, *,
                 max_frame_bytes: int = 104857600,
                 max_unauthenticated_frame_bytes: int = 524288,
                 max_connections: int = 2**31 - 1,
                 max_connections_per_ip: int = 2**31 - 1,
                 idle_timeout_ms: int = 600000,
                 receive_timeout_ms: int = 30000,
                 send_buffer_bytes: int = 102400,
                 recv_buffer_bytes: int = 102400,
                 max_pending_response_bytes: int = 16 * 1024 * 1024,
                 max_inflight_requests: int = 1000,
                 max_inflight_request_bytes: int | None = None,
                 queued_max_request_bytes: int = -1,
                 backlog: int = 512,
                 listener_name: str = "PLAINTEXT",
                 security_protocol: str = "PLAINTEXT",
                 tls: ListenerTls | None = None,
                 memory_pool: RequestMemoryPool | None = None,
                 connection_counts: ConnectionCounts | None = None,
                 connection_rates: ConnectionRateQuotas | None = None,
                 inter_broker: bool = False,
                 logger: logging.Logger | None = None) -> None:
        if num_threads < 1:
            raise ValueError("num_threads must be >= 1")
        self.host = host
        self.port = port
        self.num_threads = num_threads
        self.handler = handler
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.backlog = backlog
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        # The inter-broker listener of a broker with several listeners: as in
        # Kafka (ConnectionQuotas' protected listener) the broker-wide
        # max.connections does not refuse its connections, so clients filling
        # the broker cannot cut replication off. max.connections.per.ip still does.
        self.inter_broker = inter_broker
        # SSL / SASL_SSL listeners: the TLS context (connections are TlsConnection)
        self.tls = tls
        self.logger = logger or _log
        # -1 (Kafka's "unbounded") still gets a bound here: room for two of the
        # largest frames plus working space, so declared-but-unsent frames can
        # never hold the broker's memory hostage.
        # One pool per broker (queued.max.request.bytes), shared by its listeners.
        self.memory_pool = memory_pool or RequestMemoryPool(
            queued_max_request_bytes if queued_max_request_bytes > 0
            else 2 * max_frame_bytes + 64 * 1024 * 1024)
        self.rate_log = RateLimitedLog(self.logger)
        # a test broker's fault injector (broker/faults/): refuse_connections closes
        # new connections on accept; None on every other broker
        self.faults: Any = None
        self._proc_kwargs = _ProcessorSettings(
            logger=self.logger, memory_pool=self.memory_pool,
            rate_log=self.rate_log, max_frame_bytes=max_frame_bytes,
            max_unauthenticated_frame_bytes=max_unauthenticated_frame_bytes,
            max_pending_response_bytes=max_pending_response_bytes,
            max_inflight_requests=max_inflight_requests,
            # Frames held by running handlers are memory too; by default they
            # get the same budget as queued responses (one frame always fits).
            max_inflight_request_bytes=(max_inflight_request_bytes
                                        if max_inflight_request_bytes is not None
                                        else max(max_pending_response_bytes, 1)),
            idle_timeout_ms=idle_timeout_ms, receive_timeout_ms=receive_timeout_ms,
            send_buffer_bytes=send_buffer_bytes,
            recv_buffer_bytes=recv_buffer_bytes)
        self.processors: list[Processor] = []
        self._exited: list[asyncio.Future[None]] = []
        self._listener: socket.socket | None = None
        self._acceptor: asyncio.Task[None] | None = None
        self._counts = connection_counts or ConnectionCounts()
        # Shared by a broker's listeners, as the counts (None: no rate bounds)
        self._rates = connection_rates
        if connection_rates is not None:
            connection_rates.add_listener(listener_name, protected=inter_broker)
        # Sockets over their address's connection rate, until their close
        self._throttled: dict[socket.socket, asyncio.TimerHandle] = {}
        self._open = 0  # this listener's share of the counts (under their lock)
        self._next_proc = 0
        self._next_id = 0
        self.connections_accepted = 0
        self.connections_rejected = 0
        self.connections_throttled = 0  # closed unserved: over their address's rate
        self.accept_blocked_ns = 0  # the acceptor's waits on connection rates, in total

    # ------------------------------------------------------------------ metrics

    @property
    def connections_open(self) -> int:
        return self._open

    @property
    def connections_closed(self) -> int:
        return sum(p.connections_closed for p in self.processors)

    @property
    def requests(self) -> int:
        return sum(p.requests for p in self.processors)

    @property
    def bytes_in(self) -> int:
        return sum(p.bytes_in for p in self.processors)

    @property
    def bytes_out(self) -> int:
        return sum(p.bytes_out for p in self.processors)

    @property
    def request_memory_used(self) -> int:
        """Bytes reserved by large requests being received or handled."""
        return self.memory_pool.used

    @property
    def request_memory_waiting(self) -> int:
        """Connections waiting for request memory."""
        return self.memory_pool.waiting

    # ------------------------------------------------------------------ lifecycle

    def set_handler(self, handler: Handler) -> None:
        """The request handler, when it is not known at construction (the broker
        binds its port before it opens storage)."""
        self.handler = handler

    async def bind(self) -> socket.socket:
        """Take the listening port now (accepting starts with ``start``): a port
        in use fails here, naming it, before anything else is touched."""
        if self._listener is not None:
            return self._listener
        loop = asyncio.get_running_loop()
        try:
            self._listener = await self._bind(loop)
        except OSError as e:
            raise OSError(e.errno, f"cannot listen on {self.host or '*'}:{self.port} "
                                   f"(listeners: {self.listener_name}): {e.strerror}") from None
        self.port = self._listener.getsockname()[1]
        return self._listener

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        listener = await self.bind()
        handler = self.handler
        if handler is None:
            raise RuntimeError("NetworkServer.start: no request handler set")
        self.processors = [Processor(i, self, handler=handler, **self._proc_kwargs)
                           for i in range(self.num_threads)]
        self._exited = []
        for p in self.processors:
            # Lets stop() await thread exit without borrowing an executor thread.
            exited = loop.create_future()
            p.on_exit = partial(loop.call_soon_threadsafe, _set_done, exited)
            self._exited.append(exited)
            p.start()
        self._acceptor = loop.create_task(self._accept_loop(listener))
        self.logger.info("listening on %s:%d (%s, %s) with %d network threads",
                         self.host or "*", self.port, self.listener_name,
                         self.security_protocol, self.num_threads)

    async def _bind(self, loop: asyncio.AbstractEventLoop) -> socket.socket:
        if not self.host:
            if socket.has_dualstack_ipv6():
                sock = socket.create_server(("", self.port), family=socket.AF_INET6,
                                            backlog=self.backlog, dualstack_ipv6=True)
            else:
                sock = socket.create_server(("", self.port), backlog=self.backlog)
        else:
            # Resolved inline (once, at startup): loop.getaddrinfo would start
            # an executor thread on the caller's loop just for this.
            infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM,
                                       flags=socket.AI_PASSIVE)
            family, _, _, _, addr = infos[0]
            sock = socket.create_server(addr, family=family, backlog=self.backlog)
        sock.setblocking(False)
        return sock

    async def stop(self) -> None:
        """Stop accepting, close all connections, join the processor threads."""
        if self._acceptor is not None:
            self._acceptor.cancel()
            try:
                await self._acceptor
            except (asyncio.CancelledError, Exception):
                pass
            self._acceptor = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        for sock, handle in self._throttled.items():
            handle.cancel()
            sock.close()
        self._throttled.clear()
        for p in self.processors:
            if p.thread.is_alive():
                fut = asyncio.run_coroutine_threadsafe(p.shutdown(), p.loop)
                try:
                    await asyncio.wrap_future(fut)
                except Exception:
                    self.logger.exception("error shutting down network processor %d", p.index)
                p.stop_loop()
        for p, exited in zip(self.processors, self._exited):
            if p.thread.is_alive():
                await exited
            p.thread.join()

    async def __aenter__(self) -> "NetworkServer":
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    # ------------------------------------------------------------------ acceptor

    async def _accept_loop(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        local = listener.getsockname()
        while True:
            try:
                sock, peer = await loop.sock_accept(listener)
            except asyncio.CancelledError:
                raise
            except OSError as e:
                # EMFILE/ENFILE/ECONNABORTED: log and keep accepting; a short
                # pause avoids spinning while descriptors are exhausted.
                self.rate_log.warning("accept", "accept failed: %s", e)
                await asyncio.sleep(0.05)
                continue
            if self._rates is not None:
                delay_ms = self._rates.accept_delay_ms(self.listener_name, now_ms())
                if delay_ms > 0:
                    # Over the broker's or this listener's connection rate:
                    # this socket and the ones queued behind it in the
                    # backlog wait (Kafka's acceptor waits the same way).
                    started = time.monotonic_ns()
                    try:
                        await asyncio.sleep(delay_ms / 1000.0)
                    except asyncio.CancelledError:
                        sock.close()
                        raise
                    finally:
                        self.accept_blocked_ns += time.monotonic_ns() - started
            self._hand_off(sock, peer, local)

    def _hand_off(self, sock: socket.socket, peer: object, local: SockAddress) -> None:
        if not isinstance(peer, tuple):  # AF_UNIX and friends
            peer = (str(peer), 0)
        if self.faults is not None and self.faults.refusing():
            self.connections_rejected += 1
            self.logger.info("fault: refusing a connection from %s", peer[0])
            sock.close()
            return
        ip = peer[0]
        counts = self._counts
        throttle_ms = 0
        with counts.lock:
            if counts.open >= self.max_connections and not self.inter_broker:
                reason = "max.connections"
            elif self._rates is not None and (throttle_ms := self._rates.ip_throttle_ms(
                    self.listener_name, ip, now_ms())) > 0:
                reason = None  # neither served nor refused: see below
            elif counts.per_ip.get(ip, 0) >= self.max_connections_per_ip:
                reason = "max.connections.per.ip"
            else:
                reason = None
                counts.open += 1
                counts.per_ip[ip] = counts.per_ip.get(ip, 0) + 1
                self._open += 1
        if throttle_ms > 0:
            # Not counted as open and never served: held for the throttle
            # time (a client that reconnects at once is slowed down, not
            # spun), then closed (Kafka's throttledSockets).
            self.connections_throttled += 1
            self.rate_log.info("throttle", "closing connection from %s in %d ms: "
                               "over its connection_creation_rate", ip, throttle_ms)
            handle = asyncio.get_running_loop().call_later(
                throttle_ms / 1000.0, self._close_throttled, sock)
            self._throttled[sock] = handle
            return
        if reason is not None:
            self.connections_rejected += 1
            self.rate_log.info("reject", "rejecting connection from %s: %s reached", ip, reason)
            sock.close()
            return
        self.connections_accepted += 1
        self._next_id += 1
        connection_id = f"{local[0]}:{local[1]}-{ip}:{peer[1]}-{self._next_id}"
        proc = self.processors[self._next_proc]
        self._next_proc = (self._next_proc + 1) % len(self.processors)
        proc.loop.call_soon_threadsafe(proc.add_connection, sock, peer, connection_id)

    def _close_throttled(self, sock: socket.socket) -> None:
        self._throttled.pop(sock, None)
        sock.close()

    def _release_slot(self, peer: SockAddress) -> None:
        """A connection counted by the acceptor is gone (any thread)."""
        ip = peer[0]
        counts = self._counts
        with counts.lock:
            counts.open -= 1
            self._open -= 1
            left = counts.per_ip.get(ip, 0) - 1
            if left > 0:
                counts.per_ip[ip] = left
            else:
                counts.per_ip.pop(ip, None)
