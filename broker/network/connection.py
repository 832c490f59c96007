"""One client connection on a processor loop: framing, pipelining, writes.

Why raw sockets instead of asyncio transports: uvloop 0.23 has no
``loop.sendfile`` and a socket owned by a transport cannot also be written
with ``os.sendfile`` (DESIGN.md). So a connection owns a non-blocking socket
and drives it with ``loop.add_reader`` / ``loop.add_writer`` itself.

Reading. Bytes are received with ``sock.recv_into`` straight into a
bytearray; 4-byte big-endian size-prefixed frames are cut out as memoryview
slices of it, never copied. A frame handed to a handler stays valid and
unchanged for as long as the handler keeps it: we only ever write *past* the
last byte received, and when the buffer runs out of room we switch to another
bytearray (copying just the unfinished tail) instead of compacting in place.
A frame for which the buffer is too small gets a buffer of its own size, so
frames are received in place. The view is writable (handlers may patch
e.g. a record batch's baseOffset in place). A size prefix that is negative or
above ``max_frame_bytes`` closes the connection as soon as the 4 bytes are
seen, before any of the body is read. Before a SASL listener's connection has
authenticated, the limit is ``sasl.server.max.receive.size`` instead, checked
on the prefix the same way (as Kafka's SaslServerAuthenticator does); while a
request that may complete the authentication is still being handled, a
larger prefix waits for its answer before it is judged.

Large frames and memory. A size prefix is only a claim: a client that
declares 100 MB and sends four bytes must not cost 100 MB, nor hold memory
others need. A frame larger than the working chunk (``CHUNK``) is received
in the connection's chunk buffer until that is full; from then on its buffer
grows as bytes arrive, first to ``FIRST_LARGE_BUFFER`` (so a 1 MiB produce
request lands in one buffer with no copy), then doubling, so a frame costs at
most about twice what was actually received. Each such buffer is paid for
first from the broker-wide ``RequestMemoryPool`` (``queued.max.request.bytes``;
see memory.py): while the pool has none the connection stops reading and
waits in line, and frames up to ``CHUNK`` on other connections are served as
usual. The reservation moves with the frame to its handler and is returned
when the handler is done, or at close. A frame must arrive within
``request.receive.timeout.ms`` of its first byte (time spent not reading,
waiting for memory or paused, does not count): the processor's sweep closes
connections whose frame does not, so a client that stops or trickles in the
middle of a frame gives back what it holds (see ``receiving_since``).

Buffer reuse. A fresh ``bytearray(n)`` is zero-filled (a profile put that at
3-6% of produce time, one 256 KiB or ~1 MB buffer per switch). So a buffer
we switch away from is kept in a small per-connection pool (``_pool``,
bytearrays only, no view of ours), and a pooled buffer is written again only when nothing at all refers to it
any more: every frame view is a slice of one memoryview of the buffer and
keeps that view's buffer export (and with it a reference to the bytearray)
alive, as does any C code holding a Py_buffer of a frame (os.write in a
thread, ...). So "refcount of the pooled bytearray equals that of an
unreferenced pooled one" (``_FREE_REFS``, calibrated at import with the same
code) means no frame of it is alive anywhere, and reusing it is invisible. A
frame kept by a handler just keeps its buffer out of reuse; a pooled buffer
still referenced when the pool is full is dropped to the garbage collector
as before.

Ordering. Every frame gets a slot in ``_slots`` (a deque in request order) and
its handler runs as its own task, so handlers can finish out of order. When
the oldest slot completes, it and every completed slot after it are moved,
in order, onto the single per-connection write queue ``_wq``; a slot whose
handler returned None is dropped without output. ``_wq`` holds both kinds of
output in response order: memoryviews of bytes parts and ``_Region`` cursors
for file regions. It is drained strictly front to back: runs of adjacent
bytes parts go out in one ``sock.sendmsg``, a region goes out with
``os.sendfile`` on the same socket, and nothing behind an unfinished item is
started. There is no transport write buffer anywhere, so bytes and sendfile
data can never overtake each other. On EAGAIN (or a short write, which means
the kernel buffer is full) we wait for writability with ``add_writer``.

Backpressure. ``_pending`` counts bytes of responses that are queued but not
yet sent. When it exceeds ``max_pending_response_bytes`` (or the handlers in
flight reach ``max_inflight_requests`` / ``max_inflight_request_bytes``) the
connection is *paused*: the reader is removed and no further frames, not even
already-buffered ones, are dispatched. It resumes once pending output drains
to half the limit and the in-flight limits are clear.

Closing. Peer EOF stops reading; responses to requests already received are
still sent, then the socket closes. A reset/EPIPE closes at once. A handler
exception closes the connection with one log line. Responses of handlers that
finish after the close are dropped.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import socket
import struct
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeAlias, cast, final

from samsa.broker.network.context import ConnectionContext
from samsa.broker.network.memory import RequestMemoryPool
from samsa.protocol.errors import ProtocolError

if TYPE_CHECKING:  # pragma: no cover
    from samsa.broker.network.memory import _Waiter
    from samsa.broker.network.processor import Processor


class HasFileno(Protocol):
    def fileno(self) -> int: ...


class SendfileRegion(Protocol):
    """A response part written with sendfile: a byte range of an open file
    (storage's FileRegion)."""
    @property
    def file(self) -> HasFileno: ...
    @property
    def position(self) -> int: ...
    @property
    def length(self) -> int: ...


ResponsePart: TypeAlias = "bytes | bytearray | memoryview | SendfileRegion"
# The request handler: awaited per frame on the connection's processor loop;
# the response's parts (the first carries the size prefix), or None for none.
Handler: TypeAlias = "Callable[[ConnectionContext, memoryview], Awaitable[Sequence[ResponsePart] | None]]"
# A socket address as accept() and getsockname() give it: (host, port), and for
# IPv6 also flow info and scope id (the acceptor makes other kinds (str, 0)).
SockAddress: TypeAlias = "tuple[str, int] | tuple[str, int, int, int]"

_SIZE = struct.Struct(">i")
_unpack_size = _SIZE.unpack_from

# Receive window policy: a new buffer is ``_chunk`` bytes (or the whole
# pending frame if larger); ``_chunk`` starts at MIN_CHUNK and doubles up to
# CHUNK each time a read fills the whole window, so idle or chatty-but-small
# connections stay cheap while bulk producers get large reads. We switch
# buffers when fewer than MIN_READ bytes of room remain from the start of the
# unfinished frame; when no frame is unfinished, the buffer is given up and
# the next read takes one, so a connection that goes quiet holds none.
MIN_CHUNK = 1024
CHUNK = 256 * 1024
MIN_READ = 4 * 1024
# A frame larger than CHUNK is received into a buffer of UNPAID_BUFFER (or
# whatever larger one the connection has) until that is full; from then on it
# needs a reservation from the memory pool; its buffer starts at
# FIRST_LARGE_BUFFER (or the frame's size, if smaller) and doubles from there
# as bytes arrive.
UNPAID_BUFFER = 16 * 1024
FIRST_LARGE_BUFFER = 1024 * 1024 + 64 * 1024
# Receive buffers kept for reuse per connection, and the largest size pooled
# (bigger ones serve rare huge frames; keeping them would pin the memory).
POOL_BUFFERS = 2
POOL_MAX_BYTES = 2 * 1024 * 1024 + 64 * 1024
# Max buffers per sendmsg (Linux IOV_MAX is 1024).
MAX_IOV = 512
# os.sendfile count cap per call (Linux transfers at most 0x7ffff000 anyway).
MAX_SENDFILE = 0x7FFFF000


def _pooled_refs(pool: list[bytearray], i: int) -> int:
    """Reference count of ``pool[i]`` as seen from here (the pool's reference
    plus the call's own); see ``_FREE_REFS``."""
    return sys.getrefcount(pool[i])


# What ``_pooled_refs`` reports for a pooled bytearray nothing else refers to
# (measured rather than assumed, so the interpreter's own accounting of
# temporaries does not matter). Any frame view alive adds at least one.
_FREE_REFS = _pooled_refs([bytearray(1)], 0)


# The receive buffer of a connection that holds none: a closed one (the real
# one is dropped at close, not when the cycle collector gets to the connection
# object), and a new or quiet one (taken at its next read).
_NO_BUFFER = memoryview(bytearray(0))


class _Slot:
    """A response position in request order."""

    __slots__ = ("done", "parts", "task")

    def __init__(self) -> None:
        self.done = False
        self.parts: Sequence[ResponsePart] | None = None
        self.task: asyncio.Task[None] | None = None


@final  # (so a type() check tells it from a memoryview in the write queue)
class _Region:
    """Send cursor over a file region (file, position, remaining)."""

    __slots__ = ("file", "position", "remaining")

    def __init__(self, file: HasFileno, position: int, remaining: int) -> None:
        self.file = file
        self.position = position
        self.remaining = remaining


class Connection:
    """State machine of one socket; every method runs on the processor loop."""

    __slots__ = (
        "_proc", "_loop", "_sock", "_fd", "_handler", "_log", "ctx",
        "_max_frame", "_max_pending", "_resume_pending", "_max_inflight",
        "_max_inflight_bytes",
        "_rbuf", "_rpos", "_rend", "_chunk", "_pool",
        "_slots", "_wq", "_pending", "_inflight", "_inflight_bytes",
        "_reading", "_writing", "_paused", "_eof", "closed",
        "_flush_scheduled", "last_active",
        "_memory", "_reserved", "_memory_waiter", "_rate_log", "_mute", "_frame_started",
    )

    def __init__(self, proc: "Processor", sock: socket.socket, peer: SockAddress,
                 connection_id: str) -> None:
        self._proc = proc
        self._loop = proc.loop
        self._sock = sock
        self._fd = sock.fileno()
        self._handler = proc.handler
        self._log = proc.logger
        try:
            local = sock.getsockname()
        except OSError:
            local = ()
        self.ctx = ConnectionContext(connection_id, peer, local, proc.loop, proc.index, self,
                                     listener_name=proc.server.listener_name,
                                     security_protocol=proc.server.security_protocol)
        # The limit a size prefix is checked against: before SASL
        # authentication sasl.server.max.receive.size (_size_refused lifts it).
        self._max_frame = (proc.max_frame_bytes if self.ctx.authenticated
                           else min(proc.max_frame_bytes, proc.max_unauthenticated_frame_bytes))
        self._max_pending = proc.max_pending_response_bytes
        self._resume_pending = proc.max_pending_response_bytes // 2
        self._max_inflight = proc.max_inflight_requests
        self._max_inflight_bytes = proc.max_inflight_request_bytes
        self._chunk = MIN_CHUNK
        self._rbuf = _NO_BUFFER  # taken at the first read
        self._pool: list[bytearray] = []
        self._rpos = 0   # start of the first unconsumed byte (a frame header)
        self._rend = 0   # end of received data
        self._slots: collections.deque[_Slot] = collections.deque()
        self._wq: collections.deque[memoryview | _Region] = collections.deque()
        self._pending = 0
        self._inflight = 0
        self._inflight_bytes = 0
        self._reading = False
        self._writing = False
        self._paused = False
        self._eof = False
        self.closed = False
        self._flush_scheduled = False
        self.last_active = self._loop.time()
        self._memory: RequestMemoryPool = proc.memory_pool
        self._reserved = 0           # bytes reserved for the large frame's receive buffer
        self._memory_waiter: _Waiter | None = None  # set while queued for a reservation
        self._rate_log = proc.rate_log
        self._mute: asyncio.TimerHandle | None = None  # timer ending a quota mute (mute_for)
        # Loop time the unfinished frame in the buffer began to arrive (or
        # reading resumed), None when none is: the receive timeout's clock.
        self._frame_started: float | None = None

    # ------------------------------------------------------------------ start

    def start(self) -> None:
        self._reading = True
        self._loop.add_reader(self._fd, self._on_readable)

    @property
    def receiving_since(self) -> float | None:
        """Loop time since which we have been reading an unfinished frame, or
        None (no partial frame, or not reading it: paused, waiting for
        memory, peer EOF) - what request.receive.timeout.ms is measured on."""
        return self._frame_started if self._reading else None

    @property
    def idle(self) -> bool:
        """No request in flight and nothing to write (a half-received frame
        does not keep a connection alive: ``last_active`` ages from its last byte)."""
        return not self._slots and not self._wq

    # ------------------------------------------------------------------ reading

    def _on_readable(self) -> None:
        sock = self._sock
        for _ in range(4):  # bounded, so one fast sender cannot starve the loop
            buf = self._receive_buffer()
            end = self._rend
            want = len(buf) - end
            try:
                n = sock.recv_into(buf[end:])
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self.close(f"receive failed: {e}")
                return
            if n == 0:
                self._on_eof()
                return
            self._rend = end + n
            self.last_active = self._loop.time()
            self._proc.bytes_in += n
            self._parse()
            # A full read suggests more is waiting; anything less means the
            # socket is (nearly) drained, so yield to the loop.
            if n < want or not self._reading:
                return
            if self._chunk < CHUNK:
                self._chunk *= 2

    def _receive_buffer(self) -> memoryview:
        buf = self._rbuf
        if not buf.nbytes:  # new, or gave it up with nothing half-received
            buf = self._rbuf = memoryview(self._switch_buffer(self._chunk))
        return buf

    def _parse(self) -> None:
        """Dispatch every complete frame in the buffer (unless paused), then
        make sure the buffer has room for the next read."""
        buf = self._rbuf
        pos = self._rpos
        end = self._rend
        need = 4
        while not self._paused:
            avail = end - pos
            if avail < 4:
                need = 4
                break
            size = _unpack_size(buf, pos)[0]
            if (size < 0 or size > self._max_frame) and self._size_refused(size):
                self._rpos = pos
                return  # closed, or paused until authentication is decided
            if avail - 4 < size:
                need = 4 + size
                break
            start = pos + 4
            pos = start + size
            reserved = self._reserved
            self._reserved = 0
            self._frame_started = None
            self._dispatch(buf[start:pos], size, reserved)
            if self.closed:
                return
        self._rpos = pos
        room = len(buf) - pos
        tail = end - pos
        if not tail:
            self._frame_started = None
        elif self._frame_started is None:
            self._frame_started = self._loop.time()
        if need > CHUNK:
            # A large frame: receive in place while the buffer has room, then
            # grow it by doubling what has arrived, paying from the pool first.
            if room >= need or len(buf) - end >= MIN_READ:
                return
            if len(buf) < UNPAID_BUFFER:
                # a size prefix is only a claim: more of the frame arrives
                # before any of the budget is paid for it
                size = UNPAID_BUFFER
            else:
                size = min(need, max(FIRST_LARGE_BUFFER, 2 * tail))
                if size > self._reserved and not self._reserve(size - self._reserved):
                    return  # reading stopped until the memory pool grants it
        elif not tail:
            if room < MIN_READ:
                self._give_up_buffer()
            return
        elif room < need:
            # (paused with whole frames not yet dispatched, ``need`` is 4 and
            # the tail may be larger than the window)
            size = max(need, self._chunk, tail + MIN_READ)
        else:
            return  # the unfinished frame fits: it is finished in place
        # Move the unfinished tail to another buffer. Never compact in place:
        # frames already handed out may be views of this one.
        try:
            nbuf = memoryview(self._switch_buffer(size))
        except MemoryError:
            self._rate_log.warning(
                "no-memory", "closing connection %s: no memory for a %d-byte receive buffer",
                self.ctx.connection_id, size)
            self.close(None)
            return
        if tail:
            nbuf[:tail] = buf[pos:end]
        self._rbuf = nbuf
        self._rpos = 0
        self._rend = tail

    # ------------------------------------------------------------------ memory

    def _reserve(self, size: int) -> bool:
        """Reserve ``size`` more bytes for the large frame being received;
        when the pool has none, stop reading and queue for them."""
        if self._memory_waiter is not None:
            return False  # already queued; the grant is on its way
        if self._memory.try_reserve(self, size):
            self._reserved += size
            return True
        self._stop_reading()
        self._memory_waiter = self._memory.wait(self._loop, self, size, self._memory_granted)
        return False

    def _memory_granted(self, size: int) -> None:
        """The pool reserved ``size`` bytes for us (on this loop)."""
        self._memory_waiter = None
        if self.closed:
            self._memory.release(self, size)
            return
        self._reserved += size
        self._maybe_resume()

    def _size_refused(self, size: int) -> bool:
        """A size prefix above the current limit: True when the frame is not
        to be read (the connection is closed, or paused until a request that
        may complete SASL authentication is answered); False when the
        connection has authenticated meanwhile and the frame is within
        socket.request.max.bytes."""
        full = self._proc.max_frame_bytes
        if 0 <= size <= full:
            if self.ctx.authenticated:
                self._max_frame = full
                return False
            if self._inflight:
                # Kafka reads one frame at a time while authenticating: judge
                # this one by the state the requests before it leave.
                self._pause()
                return True
            self._rate_log.warning(
                "frame-size", "closing connection %s: frame size %d before authentication "
                "above %d (sasl.server.max.receive.size)",
                self.ctx.connection_id, size, self._max_frame)
        else:
            self._rate_log.warning(
                "frame-size",
                "closing connection %s: frame size %d outside 0..%d (socket.request.max.bytes)",
                self.ctx.connection_id, size, full)
        self.close(None)
        return True

    def _switch_buffer(self, size: int) -> bytearray:
        """A buffer of at least ``size`` bytes to receive into next: a pooled
        one that no frame refers to any more, else a new one; the current
        buffer goes into the pool."""
        pool = self._pool
        ba = None
        for i in range(len(pool)):
            if len(pool[i]) >= size and _pooled_refs(pool, i) == _FREE_REFS:
                ba = pool.pop(i)
                break
        self._pool_current()
        return ba if ba is not None else bytearray(size)

    def _give_up_buffer(self) -> None:
        """Nothing half-received and little room left: the buffer goes into
        the pool and the next read takes one (``_receive_buffer``)."""
        self._pool_current()
        self._rbuf = _NO_BUFFER
        self._rpos = self._rend = 0

    def _pool_current(self) -> None:
        cur = self._rbuf.obj
        # (every receive buffer is a view of a bytearray made here: that is what is pooled)
        if (POOL_BUFFERS and isinstance(cur, bytearray)
                and 0 < len(cur) <= POOL_MAX_BYTES):
            pool = self._pool
            if len(pool) >= POOL_BUFFERS:
                pool.pop(0)  # none of them was free just now: keep the newest
            pool.append(cur)

    @property
    def receive_buffer_bytes(self) -> int:
        """Bytes held for receiving: the current buffer and those kept for reuse."""
        return self._rbuf.nbytes + sum(len(b) for b in self._pool)

    def shrink(self) -> None:
        """Called by the sweep on quiet connections: drop the buffers kept for
        reuse, and the receive buffer if nothing is half-received (the next
        read takes a new one), so an idle connection holds no buffer at all:
        most connections of a client are idle most of the time, and 16 KiB
        each was most of what 10,000 of them cost."""
        if self.closed:
            return
        if self._rpos == self._rend and self._rbuf.nbytes:
            self._chunk = MIN_CHUNK
            self._give_up_buffer()
        self._pool.clear()

    @property
    def peer_gone(self) -> bool:
        """Closed, or the peer closed its side: what is still answered may
        never be read (a follower drops a long-polling Fetch this way)."""
        return self.closed or self._eof

    def finish(self) -> None:
        """Stop reading as if the peer had closed its side: what was received
        is answered, then the connection closes."""
        if not self.closed:
            self._on_eof()

    def _on_eof(self) -> None:
        self._eof = True
        self._stop_reading()
        self._maybe_finish()

    def _stop_reading(self) -> None:
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._fd)

    # ------------------------------------------------------------------ handlers

    def _dispatch(self, frame: memoryview, size: int, reserved: int) -> None:
        slot = _Slot()
        self._slots.append(slot)
        self._inflight += 1
        self._inflight_bytes += size
        self._proc.requests += 1
        slot.task = self._loop.create_task(self._run(slot, frame, size, reserved))
        if self._inflight >= self._max_inflight or self._inflight_bytes > self._max_inflight_bytes:
            self._pause()

    async def _run(self, slot: _Slot, frame: memoryview, size: int, reserved: int) -> None:
        try:
            parts = await self._handler(self.ctx, frame)
        except Exception as e:  # a bad handler must never take the processor down
            self._inflight -= 1
            self._inflight_bytes -= size
            if not self.closed:
                # Malformed input is the client's fault: one line. Anything
                # else is our bug: keep the traceback.
                bad_input = isinstance(e, ProtocolError)
                self._rate_log.log("bad-request" if bad_input else "handler-error",
                                   logging.WARNING if bad_input else logging.ERROR,
                                   "closing connection %s: request handler raised %s: %s",
                                   self.ctx.connection_id, type(e).__name__, e,
                                   exc_info=None if bad_input else e)
                self.close(None)
            return
        finally:
            # The frame's large-request reservation, however the handler ended
            # (also when cancelled at shutdown).
            self._memory.release(self, reserved)
        self._inflight -= 1
        self._inflight_bytes -= size
        if self.closed:
            return
        slot.parts = parts
        slot.done = True
        if self._slots[0] is slot:
            try:
                self._release()
            except Exception as e:  # parts that are neither bytes-like nor regions
                self._log.error("closing connection %s: bad response parts from handler: %s: %s",
                                self.ctx.connection_id, type(e).__name__, e)
                self.close(None)
        elif self._paused:
            self._maybe_resume()

    def _release(self) -> None:
        """Move completed responses at the head of the slot queue, in order,
        onto the write queue."""
        slots = self._slots
        wq = self._wq
        added = 0
        while slots and slots[0].done:
            parts = slots.popleft().parts
            if not parts:
                continue
            for p in parts:
                if isinstance(p, (bytes, bytearray, memoryview)):
                    mv = memoryview(p)
                    if mv.itemsize != 1 or mv.ndim != 1 or not mv.c_contiguous:
                        mv = mv.cast("B")
                    n = len(mv)
                    if n:
                        wq.append(mv)
                        added += n
                else:
                    n = p.length
                    if n:
                        wq.append(_Region(p.file, p.position, n))
                        added += n
        if added:
            self._pending += added
            if self._pending > self._max_pending:
                self._pause()
            if not self._flush_scheduled and not self._writing:
                # Deferred so that responses completing in the same loop
                # iteration leave in one sendmsg.
                self._flush_scheduled = True
                self._loop.call_soon(self._flush)
        elif self._paused:
            self._maybe_resume()
        if self._eof:
            self._maybe_finish()

    # ------------------------------------------------------------------ writing

    def _flush(self) -> None:
        self._flush_scheduled = False
        if self.closed:
            return
        wq = self._wq
        sock = self._sock
        sent_total = 0
        try:
            while wq:
                item = wq[0]
                if type(item) is memoryview:
                    if len(wq) > 1 and type(wq[1]) is memoryview:
                        bufs: list[memoryview] = []
                        want = 0
                        for it in wq:
                            if type(it) is not memoryview or len(bufs) == MAX_IOV:
                                break
                            bufs.append(it)
                            want += len(it)
                        n = sock.sendmsg(bufs)
                    else:
                        want = len(item)
                        n = sock.send(item)
                    sent_total += n
                    rest = n
                    while rest:
                        # the n bytes sent came from the views at the head
                        head = cast(memoryview, wq[0])
                        ln = len(head)
                        if rest >= ln:
                            wq.popleft()
                            rest -= ln
                        else:
                            wq[0] = head[rest:]
                            rest = 0
                    if n < want:
                        break  # kernel buffer full: wait for writability
                else:
                    want = item.remaining if item.remaining < MAX_SENDFILE else MAX_SENDFILE
                    n = os.sendfile(self._fd, item.file.fileno(), item.position, want)
                    if n == 0:
                        # The file is shorter than the region promised: the
                        # response length is already on the wire, so the
                        # stream cannot be repaired.
                        self._log.error("closing connection %s: file region ended early "
                                        "(%r at %d, %d bytes missing)", self.ctx.connection_id,
                                        item.file, item.position, item.remaining)
                        self.close(None)
                        return
                    sent_total += n
                    item.position += n
                    item.remaining -= n
                    if not item.remaining:
                        wq.popleft()
                    if n < want:
                        break
        except (BlockingIOError, InterruptedError):
            pass
        except (OSError, ValueError) as e:  # reset, EPIPE, closed file
            self._account_sent(sent_total)
            self.close(f"send failed: {e}")
            return
        self._account_sent(sent_total)
        self._after_flush(bool(wq))

    def _after_flush(self, unsent: bool) -> None:
        """After a write attempt: with output left, wait for writability;
        with all sent, stop waiting, let a paused reader resume and finish a
        half-closed connection (shared with the TLS connection's _flush)."""
        if unsent:
            if not self._writing:
                self._writing = True
                self._loop.add_writer(self._fd, self._flush)
            return
        if self._writing:
            self._writing = False
            self._loop.remove_writer(self._fd)
        if self._paused:
            self._maybe_resume()
        if self._eof:
            self._maybe_finish()

    def _account_sent(self, n: int) -> None:
        if n:
            self._pending -= n
            self._proc.bytes_out += n
            self.last_active = self._loop.time()
            if self._paused and self._pending <= self._resume_pending:
                self._maybe_resume()

    # ------------------------------------------------------------------ flow control

    def _pause(self) -> None:
        self._paused = True
        self._stop_reading()

    def mute_for(self, ms: int) -> None:
        """Read (and dispatch) nothing from this peer for ``ms`` ms, as Kafka
        mutes a throttled client's channel; responses still go out. A longer
        mute extends a running one, a shorter one leaves it be."""
        if self.closed or ms <= 0:
            return
        until = self._loop.time() + ms / 1000.0
        if self._mute is not None:
            if self._mute.when() >= until:
                return
            self._mute.cancel()
        self._mute = self._loop.call_at(until, self._unmute)
        self._pause()

    def mute_remaining(self) -> float:
        """Seconds until a quota mute ends (0 when not muted)."""
        if self._mute is None:
            return 0.0
        return max(0.0, self._mute.when() - self._loop.time())

    def _unmute(self) -> None:
        self._mute = None
        self._maybe_resume()

    def _maybe_resume(self) -> None:
        if (self.closed or self._memory_waiter is not None or self._mute is not None
                or self._pending > self._resume_pending
                or self._inflight >= self._max_inflight
                or self._inflight_bytes > self._max_inflight_bytes):
            return
        self._paused = False
        self._parse()  # frames that arrived before the pause go first
        if not (self._paused or self.closed or self._eof or self._reading
                or self._memory_waiter is not None):
            self._reading = True
            if self._frame_started is not None:
                self._frame_started = self._loop.time()  # the time not reading is not the client's
            self._loop.add_reader(self._fd, self._on_readable)

    def _maybe_finish(self) -> None:
        """After peer EOF: close once every received request is answered."""
        if not self.closed and not self._paused and not self._slots and not self._wq:
            self.close(None)

    # ------------------------------------------------------------------ close

    def close(self, reason: str | None) -> None:
        if self.closed:
            return
        self.closed = True
        if reason:
            self._log.debug("closing connection %s: %s", self.ctx.connection_id, reason)
        loop = self._loop
        if self._reading:
            self._reading = False
            loop.remove_reader(self._fd)
        if self._writing:
            self._writing = False
            loop.remove_writer(self._fd)
        try:
            self._sock.close()
        except OSError:
            pass
        self._wq.clear()
        self._slots.clear()
        self._pending = 0
        if self._mute is not None:
            self._mute.cancel()
            self._mute = None
        # Memory goes back now, not when the cycle collector finds this object
        # (the context refers back to it). Frames handed to handlers still
        # running keep their own buffers alive until they finish.
        if self._memory_waiter is not None:
            self._memory.cancel(self._memory_waiter)  # a grant in flight is released on arrival
            self._memory_waiter = None
        self._memory.release(self, self._reserved)
        self._reserved = 0
        self._rbuf = _NO_BUFFER
        self._rpos = self._rend = 0
        self._pool.clear()
        self._proc.connection_closed(self)
