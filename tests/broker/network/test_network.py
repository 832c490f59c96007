"""NetworkServer with real client sockets and toy handlers.

Handlers run on the server's processor threads, so anything shared with the
test uses thread-safe primitives (list.append, threading.Event) and the test
polls with `until` (a generous timeout is a hang guard, not an assertion).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import random
import socket
import struct
import tempfile
import termios
import threading

import pytest

from samsa.broker.network import ConnectionContext, NetworkServer
from samsa.protocol.errors import ProtocolError
from tests.support.waiting import wait_until_async

pytestmark = pytest.mark.timeout(60)

HOST = "127.0.0.1"


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def unread_bytes(sock: socket.socket) -> int:
    """Bytes that have arrived in ``sock`` and that nobody has read yet (FIONREAD)."""
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]


async def echo(conn: ConnectionContext, f: memoryview):
    return [frame(bytes(f))]


async def until(pred, timeout: float = 10.0) -> None:
    """Wait for a condition that the server (its processor threads) reaches
    asynchronously; a short poll, as each check is cheap."""
    await wait_until_async(pred, timeout, "the server's condition", interval=0.005)


@pytest.fixture
async def make_server():
    servers: list[NetworkServer] = []

    async def make(handler=echo, num_threads=1, **kw) -> NetworkServer:
        s = NetworkServer(HOST, 0, num_threads, handler, **kw)
        await s.start()
        servers.append(s)
        return s

    yield make
    for s in servers:
        await s.stop()
        for p in s.processors:
            assert not p.thread.is_alive()


class Client:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def connect(cls, server: NetworkServer, **kw) -> "Client":
        r, w = await asyncio.open_connection(HOST, server.port, **kw)
        return cls(r, w)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def request(self, payload: bytes) -> bytes:
        await self.send(frame(payload))
        return await self.response()

    async def response(self) -> bytes:
        n = struct.unpack(">i", await asyncio.wait_for(self.reader.readexactly(4), 10))[0]
        return await asyncio.wait_for(self.reader.readexactly(n), 10)

    async def closed_by_server(self) -> bool:
        """True when the server closes (EOF or reset) without sending data."""
        try:
            data = await asyncio.wait_for(self.reader.read(1), 10)
        except (ConnectionResetError, BrokenPipeError):
            return True
        return data == b""

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except OSError:
            pass


# ---------------------------------------------------------------- idle memory


async def test_quiet_connections_hold_no_receive_buffer_and_take_one_when_asked_again(make_server):
    """Most of a client's connections are idle most of the time: once answered
    and quiet they hold no receive buffer (10,000 idle connections cost 16 KiB
    each before), and a request that comes later, small or large, or in
    pieces, is read as before."""
    server = await make_server(receive_timeout_ms=5000)   # a sweep every 0.5 s
    clients = [await Client.connect(server) for _ in range(20)]
    for i, c in enumerate(clients):
        assert await c.request(b"hello %d" % i) == b"hello %d" % i
    big = bytes(range(256)) * 2000
    assert await clients[0].request(big) == big   # grew its buffer on the way

    def held() -> int:
        return sum(conn.receive_buffer_bytes for p in server.processors
                   for conn in list(p.connections.values()))
    await until(lambda: held() == 0, timeout=60)
    assert await clients[0].request(big) == big
    whole = frame(b"after a quiet while")
    await clients[1].send(whole[:3])
    await clients[1].send(whole[3:])
    assert await clients[1].response() == b"after a quiet while"
    for c in clients:
        await c.close()


# ---------------------------------------------------------------- framing


@pytest.mark.parametrize("num_threads", [1, 4])
async def test_echo_many_clients(make_server, num_threads):
    server = await make_server(num_threads=num_threads)
    clients = [await Client.connect(server) for _ in range(8)]
    for i, c in enumerate(clients):
        for j in range(5):
            msg = f"{i}-{j}".encode() * (j + 1)
            assert await c.request(msg) == msg
    await until(lambda: server.connections_open == 8)
    assert server.connections_accepted == 8
    used = [len(p.connections) for p in server.processors]
    assert sum(used) == 8 and all(n == 8 // num_threads for n in used)  # round robin
    assert server.requests == 40
    for c in clients:
        await c.close()
    await until(lambda: server.connections_open == 0)
    assert server.connections_closed == 8
    assert server.bytes_in == server.bytes_out  # echo


@pytest.mark.parametrize("num_threads", [1, 4])
async def test_framing_across_arbitrary_splits(make_server, num_threads):
    server = await make_server(num_threads=num_threads)
    rng = random.Random(1234)
    # Small, empty, and frames larger than the receive chunk (buffer switches).
    payloads = [rng.randbytes(rng.choice([0, 1, 3, 4, 5, 100, 5000, 70000, 300000, 700000]))
                for _ in range(40)]
    stream = b"".join(frame(p) for p in payloads)
    c = await Client.connect(server)
    c.writer.transport.get_extra_info("socket").setsockopt(
        socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    pos = 0
    while pos < len(stream):
        # Mostly tiny pieces (split headers) and some large ones.
        step = rng.choice([1, 2, 3, 5, 7, 64, 1000, 65536, 200001])
        await c.send(stream[pos:pos + step])
        pos += step
        if rng.random() < 0.3:
            await asyncio.sleep(0)
    for p in payloads:
        assert await c.response() == p
    await c.close()


async def test_frames_stay_valid_after_handler_returns(make_server):
    """The frame view is never overwritten by later reads (zero-copy contract)."""
    kept: list[memoryview] = []

    async def keep(conn, f):
        kept.append(f)
        return [frame(b"ok")]

    server = await make_server(keep)
    c = await Client.connect(server)
    payloads = [bytes([i % 256]) * (1000 + i * 7919 % 400000) for i in range(30)]
    await c.send(b"".join(frame(p) for p in payloads))
    for _ in payloads:
        assert await c.response() == b"ok"
    assert [bytes(k) for k in kept] == payloads
    await c.close()


# ---------------------------------------------------------------- ordering


@pytest.mark.parametrize("num_threads", [1, 4])
async def test_pipelined_out_of_order_completion_answered_in_order(make_server, num_threads):
    n = 20
    finished: list[int] = []

    async def reverse(conn, f):
        # Request i waits for request i+1 to finish: completion order is
        # n-1, n-2, ..., 0, the exact reverse of request order.
        i = int(bytes(f))
        gates = conn.state.setdefault("gates", {})
        gate = gates.setdefault(i, conn.loop.create_future())
        if i < n - 1:
            await gate
        finished.append(i)
        prev = gates.setdefault(i - 1, conn.loop.create_future())
        prev.set_result(None)
        return [frame(f"resp-{i}".encode())]

    server = await make_server(reverse, num_threads=num_threads)
    c = await Client.connect(server)
    await c.send(b"".join(frame(str(i).encode()) for i in range(n)))
    got = [await c.response() for _ in range(n)]
    assert got == [f"resp-{i}".encode() for i in range(n)]
    assert finished == list(range(n - 1, -1, -1))
    await c.close()


async def test_none_response_skipped_but_order_kept(make_server):
    async def handler(conn, f):
        msg = bytes(f)
        i = int(msg[1:])
        await asyncio.sleep(0.001 * ((7 * i) % 5))  # finish out of order
        if msg.startswith(b"n"):  # "acks=0": no response
            return None
        return [frame(msg)]

    server = await make_server(handler)
    c = await Client.connect(server)
    msgs = [(b"n" if i % 3 == 1 else b"r") + str(i).encode() for i in range(30)]
    await c.send(b"".join(frame(m) for m in msgs))
    expected = [m for m in msgs if m.startswith(b"r")]
    assert [await c.response() for _ in expected] == expected
    # the connection keeps working after trailing None responses
    await c.send(frame(b"n99"))
    assert await c.request(b"r100") == b"r100"
    await c.close()


async def test_multi_part_responses_and_empty_parts(make_server):
    async def parts(conn, f):
        body = bytes(f)
        pieces = [body[i:i + 3] for i in range(0, len(body), 3)]
        return [struct.pack(">i", len(body)), b"", bytearray(), *pieces,
                memoryview(b"")]

    server = await make_server(parts)
    c = await Client.connect(server)
    msgs = [os.urandom(k) for k in (0, 1, 10, 1000, 100000)]
    await c.send(b"".join(frame(m) for m in msgs))
    assert [await c.response() for _ in msgs] == msgs
    await c.close()


# ---------------------------------------------------------------- sendfile


class Region:
    def __init__(self, file, position, length):
        self.file = file
        self.position = position
        self.length = length


@pytest.mark.parametrize("num_threads", [1, 4])
async def test_sendfile_regions_interleaved_with_bytes(make_server, num_threads):
    rng = random.Random(7)
    data = rng.randbytes(3 * 1024 * 1024 + 17)
    with tempfile.TemporaryFile() as tmp:
        tmp.write(data)
        tmp.flush()

        async def fetch(conn, f):
            # request: sequence of (pos, len) pairs; response interleaves a
            # bytes marker before each file region.
            spec = struct.unpack(f">{len(f) // 4}i", f)
            body: list = []
            size = 0
            for k in range(0, len(spec), 2):
                marker = f"<{k}>".encode()
                body.append(marker)
                body.append(Region(tmp, spec[k], spec[k + 1]))
                size += len(marker) + spec[k + 1]
            body.append(b"<end>")
            size += 5
            return [struct.pack(">i", size), *body]

        # small socket buffers force partial sendfile + EAGAIN paths (at <= 32 KiB
        # Linux loopback itself stalls to ~2 MB/s, so not smaller)
        server = await make_server(fetch, num_threads=num_threads, send_buffer_bytes=65536)
        clients = [await Client.connect(server) for _ in range(2)]
        specs = []
        for _ in range(6):
            pairs = []
            for _ in range(rng.randint(1, 4)):
                ln = rng.choice([0, 1, 4096, 100000, 2 * 1024 * 1024])
                pos = rng.randint(0, len(data) - ln)
                pairs += [pos, ln]
            specs.append(pairs)
        for c in clients:
            await c.send(b"".join(frame(struct.pack(f">{len(s)}i", *s)) for s in specs))
        for c in clients:
            for s in specs:
                expected = b"".join(f"<{k}>".encode() + data[s[k]:s[k] + s[k + 1]]
                                    for k in range(0, len(s), 2)) + b"<end>"
                assert await c.response() == expected
            await c.close()


async def test_region_past_end_of_file_closes_connection(make_server):
    with tempfile.TemporaryFile() as tmp:
        tmp.write(b"x" * 100)
        tmp.flush()

        async def short(conn, f):
            return [struct.pack(">i", 1000), Region(tmp, 0, 1000)]

        server = await make_server(short)
        c = await Client.connect(server)
        await c.send(frame(b"go"))
        got = await asyncio.wait_for(c.reader.read(), 10)  # until EOF
        assert got == struct.pack(">i", 1000) + b"x" * 100
        await c.close()
        await until(lambda: server.connections_open == 0)
        assert server.processors[0].thread.is_alive()


# ---------------------------------------------------------------- bad input


async def test_oversized_frame_closes_before_body_and_server_survives(make_server):
    calls = []

    async def handler(conn, f):
        calls.append(bytes(f))
        return [frame(bytes(f))]

    server = await make_server(handler, max_frame_bytes=1000)
    assert await (await Client.connect(server)).request(b"a" * 1000) == b"a" * 1000
    for bad in (1001, 2**31 - 1, -1, -(2**31)):
        c = await Client.connect(server)
        await c.send(struct.pack(">i", bad))  # header only: the body never comes
        assert await c.closed_by_server()
        await c.close()
    c = await Client.connect(server)
    assert await c.request(b"next") == b"next"
    assert calls == [b"a" * 1000, b"next"]
    await c.close()


async def test_random_garbage_never_hurts_the_server(make_server, caplog):
    async def strict(conn, f):
        if bytes(f[:4]) != b"GOOD":
            raise ProtocolError("malformed request")
        return [frame(bytes(f))]

    server = await make_server(strict, num_threads=2, max_frame_bytes=4096)
    rng = random.Random(99)
    for i in range(30):
        c = await Client.connect(server)
        if i % 2:
            junk = rng.randbytes(rng.randint(1, 20000))
        else:  # plausible sizes with garbage bodies
            junk = b"".join(frame(rng.randbytes(rng.randint(0, 3000))) for _ in range(3))
        try:
            await c.send(junk)
            c.writer.write_eof()
            await asyncio.wait_for(c.reader.read(), 10)
        except OSError:  # the server may already have closed on us: fine
            pass
        await c.close()
    good = await Client.connect(server)
    assert await good.request(b"GOOD morning") == b"GOOD morning"
    await good.close()
    await until(lambda: server.connections_open == 0)
    # malformed input is logged as one line, without a traceback
    bad = [r for r in caplog.records if "malformed request" in r.getMessage()]
    assert bad and all(r.exc_info is None for r in bad)


async def test_handler_exception_closes_only_that_connection(make_server, caplog):
    async def handler(conn, f):
        if bytes(f) == b"boom":
            raise RuntimeError("toy handler failure")
        return [frame(bytes(f))]

    server = await make_server(handler, num_threads=1)
    a = await Client.connect(server)
    b = await Client.connect(server)
    assert await b.request(b"hi") == b"hi"
    await a.send(frame(b"boom"))
    assert await a.closed_by_server()
    assert await b.request(b"still here") == b"still here"
    assert any("toy handler failure" in r.getMessage() for r in caplog.records)
    await a.close()
    await b.close()


async def test_peer_reset_and_half_close(make_server):
    release = threading.Event()

    async def slow(conn, f):
        if bytes(f) == b"wait":
            while not release.is_set():
                await asyncio.sleep(0.005)
        return [frame(bytes(f))]

    server = await make_server(slow)
    # reset while a handler is in flight
    c = await Client.connect(server)
    await c.send(frame(b"wait"))
    await until(lambda: server.requests == 1)
    sock = c.writer.transport.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.writer.transport.abort()
    release.set()
    await until(lambda: server.connections_open == 0)
    # half close: requests sent before EOF are still answered, then closed
    c = await Client.connect(server)
    await c.send(b"".join(frame(f"m{i}".encode()) for i in range(5)))
    c.writer.write_eof()
    assert [await c.response() for _ in range(5)] == [f"m{i}".encode() for i in range(5)]
    assert await c.closed_by_server()
    await c.close()
    await until(lambda: server.connections_open == 0)


async def test_a_handler_in_flight_learns_that_the_peer_closed_its_side(make_server):
    # (a follower drops a long-polling Fetch so: the fetch session must not
    # count an answer nobody reads; the connection itself stays to answer)
    seen: list[tuple[bool, bool]] = []
    eof = threading.Event()

    async def watch(conn, f):
        seen.append((conn.peer_gone, conn.closed))
        while not eof.is_set():
            await asyncio.sleep(0.005)
        await until(lambda: conn.peer_gone)
        seen.append((conn.peer_gone, conn.closed))
        return [frame(bytes(f))]

    server = await make_server(watch)
    c = await Client.connect(server)
    await c.send(frame(b"poll"))
    await until(lambda: len(seen) == 1)
    c.writer.write_eof()
    eof.set()
    assert await c.response() == b"poll"
    assert seen == [(False, False), (True, False)]
    await c.close()


# ---------------------------------------------------------------- flow control


async def test_backpressure_stops_reading_until_client_reads(make_server):
    calls: list[int] = []
    big = 1024 * 1024

    async def handler(conn, f):
        calls.append(int(bytes(f)))
        return [struct.pack(">i", big), b"\x01" * big]

    server = await make_server(handler, max_pending_response_bytes=256 * 1024,
                               send_buffer_bytes=16384)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    sock.connect((HOST, server.port))
    sock.setblocking(False)
    r, w = await asyncio.open_connection(sock=sock)
    c = Client(r, w)
    c.reader._limit = 2**30  # don't let the stream reader buffer for us
    transport = w.transport
    transport.pause_reading()  # the client stops reading responses
    await c.send(frame(b"0"))
    await until(lambda: len(calls) == 1)
    conn = next(iter(server.processors[0].connections.values()))
    await until(lambda: conn._paused)
    # more requests arrive but are not handed to the handler while paused: they wait,
    # unread, in the server's socket ...
    more = b"".join(frame(str(i).encode()) for i in range(1, 6))
    await c.send(more)
    # ... while a request that arrived after them on another connection is answered by
    # the same server thread, which would have read them first had it been reading
    other = await Client.connect(server)
    assert len(await other.request(b"99")) == big
    await other.close()
    assert calls == [0, 99] and unread_bytes(conn._sock) == len(more)
    transport.resume_reading()
    for i in range(6):
        body = await c.response()
        assert len(body) == big
    assert calls == [0, 99, 1, 2, 3, 4, 5]
    await c.close()


async def test_inflight_request_limit_pauses_dispatch(make_server):
    release = threading.Event()
    calls: list[int] = []

    async def handler(conn, f):
        calls.append(1)
        while not release.is_set():
            await asyncio.sleep(0.005)
        return [frame(bytes(f))]

    server = await make_server(handler, max_inflight_requests=3)
    c = await Client.connect(server)
    await c.send(b"".join(frame(str(i).encode()) for i in range(10)))
    await until(lambda: len(calls) >= 3)
    conn = next(iter(server.processors[0].connections.values()))
    # the server has read all ten (nothing left in its socket), handed over three and
    # paused: the other seven, already in its hands, wait for a free slot
    await until(lambda: conn._paused and unread_bytes(conn._sock) == 0)  # noqa: SLF001
    assert len(calls) == 3
    release.set()
    assert [await c.response() for _ in range(10)] == [str(i).encode() for i in range(10)]
    await c.close()


async def test_a_burst_while_paused_fits_whatever_buffer_the_connection_holds(make_server, caplog):
    """A connection whose first buffers were small (1 KiB) is paused by the
    in-flight limit while a burst of whole frames larger than its window
    arrives: moving them to another buffer must fit them all, and every one
    is answered in order once the slot frees (it raised in the loop, and the
    connection could stay paused)."""
    release = threading.Event()
    blocked: list[bytes] = []

    async def handler(conn, f):
        if bytes(f[:1]) == b"B":
            blocked.append(bytes(f))
            while not release.is_set():
                await asyncio.sleep(0.005)
        return [frame(bytes(f))]

    server = await make_server(handler, max_inflight_requests=2)
    c = await Client.connect(server)
    split = frame(b"A" * 3000)
    sent = 0
    for part in (split[:500], split[500:1500], split[1500:]):  # grows, then pools, a buffer
        await c.send(part)
        sent += len(part)
        await until(lambda: server.bytes_in >= sent)
    assert await c.response() == b"A" * 3000
    assert await c.request(b"s" * 100) == b"s" * 100
    first = b"B" + b"y" * 149
    await c.send(frame(first))
    await until(lambda: len(blocked) == 1)
    burst = [b"B" + b"%03d" % i * 50 for i in range(20)]
    await c.send(b"".join(frame(b) for b in burst))
    total = sent + 104 + 154 + sum(4 + len(b) for b in burst)
    await until(lambda: server.bytes_in >= total and len(blocked) == 2)
    release.set()
    assert [await c.response() for _ in range(21)] == [first, *burst]
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text
    await c.close()


async def test_idle_connection_is_closed(make_server):
    release = threading.Event()
    slow_started = threading.Event()

    async def handler(conn, f):
        if bytes(f) == b"slow":
            slow_started.set()
            while not release.is_set():
                await asyncio.sleep(0.005)
        return [frame(bytes(f))]

    server = await make_server(handler, idle_timeout_ms=100)
    c = await Client.connect(server)
    assert await c.request(b"x") == b"x"
    assert await c.closed_by_server()
    await c.close()
    # a request in flight is not idleness: the slow response still arrives
    c = await Client.connect(server)
    await c.send(frame(b"slow"))
    await until(slow_started.is_set)
    # a connection opened after it, idle, is closed: the sweep that closed it found
    # the slow one quiet for longer, and spared it
    idle = await Client.connect(server)
    assert await idle.closed_by_server()
    await idle.close()
    release.set()
    assert await c.response() == b"slow"
    await c.close()
    await until(lambda: server.connections_open == 0)


async def test_max_connections_per_ip_and_total(make_server):
    server = await make_server(max_connections_per_ip=2, num_threads=2)
    a = await Client.connect(server)
    b = await Client.connect(server)
    assert await a.request(b"a") == b"a" and await b.request(b"b") == b"b"
    extra = await Client.connect(server)
    assert await extra.closed_by_server()
    assert server.connections_rejected == 1
    await extra.close()
    await a.close()
    await until(lambda: server.connections_open == 1)
    again = await Client.connect(server)
    assert await again.request(b"again") == b"again"
    for c in (b, again):
        await c.close()

    total = await make_server(max_connections=1)
    a = await Client.connect(total)
    assert await a.request(b"a") == b"a"
    extra = await Client.connect(total)
    assert await extra.closed_by_server()
    await extra.close()
    await a.close()


async def test_stop_with_open_connections_and_pending_handlers(make_server):
    started = threading.Event()

    async def forever(conn, f):
        started.set()
        await asyncio.Event().wait()

    server = NetworkServer(HOST, 0, 4, forever)
    await server.start()
    clients = [await Client.connect(server) for _ in range(6)]
    await clients[0].send(frame(b"x"))
    await until(started.is_set)
    await server.stop()
    assert all(not p.thread.is_alive() for p in server.processors)
    for c in clients:
        assert await c.closed_by_server()
        await c.close()
    assert server.connections_open == 0


async def test_connection_context_and_state(make_server):
    seen = []

    async def handler(conn, f):
        conn.state["n"] = conn.state.get("n", 0) + 1
        seen.append((conn.connection_id, conn.peer_host, conn.peer_port, conn.loop,
                     conn.state["n"]))
        assert asyncio.get_running_loop() is conn.loop
        return [frame(str(conn.state["n"]).encode())]

    server = await make_server(handler, num_threads=2)
    a = await Client.connect(server)
    b = await Client.connect(server)
    assert [await a.request(b"x") for _ in range(3)] == [b"1", b"2", b"3"]
    assert await b.request(b"x") == b"1"
    ids = {s[0] for s in seen}
    assert len(ids) == 2
    a_port = a.writer.get_extra_info("sockname")[1]
    assert all(s[1] == HOST for s in seen) and seen[0][2] == a_port
    assert seen[0][3] is not seen[3][3]  # round robin onto different processor loops
    await a.close()
    await b.close()


async def test_bind_all_interfaces():
    server = NetworkServer("", 0, 1, echo)
    await server.start()
    try:
        c = await Client.connect(server)
        assert await c.request(b"any") == b"any"
        await c.close()
    finally:
        await server.stop()


async def test_handlers_may_use_executor_and_stop_joins_everything(make_server):
    async def handler(conn, f):
        data = await conn.loop.run_in_executor(None, bytes, f)
        return [frame(data)]

    before = threading.active_count()
    server = NetworkServer(HOST, 0, 2, handler)
    await server.start()
    c = await Client.connect(server)
    assert await c.request(b"via executor") == b"via executor"
    await c.close()
    await server.stop()
    assert threading.active_count() <= before, threading.enumerate()


async def test_bad_response_parts_close_only_that_connection(make_server):
    import array

    async def handler(conn, f):
        if bytes(f) == b"bad":
            return [b"\0\0\0\1", 12345]  # not bytes-like, not a region
        ints = array.array("i", [1, 2])  # non-byte memoryview format is sent as raw bytes
        return [struct.pack(">i", ints.itemsize * 2), memoryview(ints)]

    server = await make_server(handler)
    a = await Client.connect(server)
    b = await Client.connect(server)
    await a.send(frame(b"bad"))
    assert await a.closed_by_server()
    assert await b.request(b"ok") == array.array("i", [1, 2]).tobytes()
    await a.close()
    await b.close()


# ---------------------------------------------------------------- request memory


async def test_request_memory_is_paid_as_bytes_arrive(make_server):
    """Declared sizes hold no budget: with a 2 MB budget and clients that
    declared 100 MB frames and sent a few bytes, a 1.5 MB request is served
    at once; a client that has really sent 1.5 MB of a frame holds budget,
    and gives it back when it goes away."""
    server = await make_server(queued_max_request_bytes=2_000_000)
    claimers = []
    for _ in range(20):
        c = await Client.connect(server)
        await c.send(struct.pack(">i", 100_000_000) + b"x" * 10)
        claimers.append(c)
    await until(lambda: server.connections_open == 20)
    big = b"b" * 1_500_000
    c = await Client.connect(server)
    assert await c.request(big) == big
    assert server.request_memory_used == 0
    sender = await Client.connect(server)
    await sender.send(struct.pack(">i", 100_000_000) + b"s" * 1_500_000)
    await until(lambda: server.request_memory_used >= 1_500_000)
    await sender.close()
    await until(lambda: server.request_memory_used == 0)
    assert await c.request(big) == big
    for x in claimers + [c]:
        await x.close()


async def test_concurrent_large_frames_beyond_the_budget_all_finish(make_server):
    """Many connections each half-way through a frame larger than the whole
    budget would wait on each other forever if each only waited its turn;
    one at a time may overdraw to finish, so every one is answered."""
    server = await make_server(queued_max_request_bytes=1_000_000, max_frame_bytes=10_000_000)
    bodies = [bytes([65 + i]) * 5_000_000 for i in range(6)]
    clients = [await Client.connect(server) for _ in bodies]

    async def one(c, body):
        await c.send(frame(body))
        return await c.response()

    got = await asyncio.wait_for(asyncio.gather(*(one(c, b) for c, b in zip(clients, bodies))),
                                 30)
    assert got == bodies
    await until(lambda: server.request_memory_used == 0)
    for c in clients:
        await c.close()


async def test_a_frame_that_stops_or_trickles_is_closed_after_the_receive_timeout(make_server):
    """A frame that stops arriving, or trickles, holds its buffer and memory:
    it is closed once it has been arriving for receive_timeout_ms; a
    connection between frames is not (that is the idle timeout's business),
    nor is one whose frame waits for the broker."""
    release = threading.Event()

    async def handler(conn, f):
        while not release.is_set():
            await asyncio.sleep(0.005)
        return [frame(bytes(f))]

    server = await make_server(handler, receive_timeout_ms=300, max_inflight_requests=1)
    stalled = await Client.connect(server)
    await stalled.send(struct.pack(">i", 2_000_000) + b"s" * 600_000)
    await until(lambda: server.request_memory_used > 0)
    trickler = await Client.connect(server)
    between = await Client.connect(server)
    waiting = await Client.connect(server)
    # the second frame waits (paused) while the first one's handler runs
    await waiting.send(frame(b"first") + frame(b"second")[:6])

    async def trickle():
        await trickler.send(struct.pack(">i", 1000))
        while True:
            await trickler.send(b"t")
            await asyncio.sleep(0.02)

    task = asyncio.ensure_future(trickle())
    try:
        assert await stalled.closed_by_server()
        await until(lambda: server.request_memory_used == 0)
        await until(lambda: task.done())  # the broker closed it: sending failed
    finally:
        task.cancel()
    # The sweeps that closed the trickler saw the other two, connected before
    # it, and left them open: both are still served.
    assert server.connections_open == 2
    release.set()
    assert await between.request(b"between") == b"between"
    assert await waiting.response() == b"first"
    await waiting.send(frame(b"second")[6:])
    assert await waiting.response() == b"second"
    for c in (stalled, trickler, between, waiting):
        await c.close()


# ---------------------------------------------------------------- before authentication


async def test_sasl_listener_checks_the_size_prefix_before_authentication(make_server):
    """sasl.server.max.receive.size is checked on the size prefix: a larger
    frame before authentication closes the connection before any of it is
    read. A larger frame sent right behind the request that authenticates
    waits for that request's answer and is then read as usual."""
    calls = []

    async def handler(conn, f):
        body = bytes(f)
        calls.append(len(body))
        if body == b"login":
            await asyncio.sleep(0.05)  # authentication takes a while
            conn.authenticated = True
        return [frame(body[:10])]

    server = await make_server(handler, security_protocol="SASL_PLAINTEXT",
                               max_unauthenticated_frame_bytes=1000)
    c = await Client.connect(server)
    await c.send(struct.pack(">i", 1001))  # the prefix only: the body never comes
    assert await c.closed_by_server()
    await c.close()
    c = await Client.connect(server)
    assert await c.request(b"a" * 1000) == b"a" * 10
    big = b"B" * 500_000
    await c.send(frame(b"login") + frame(big))
    assert await c.response() == b"login"
    assert await c.response() == big[:10]
    assert calls == [1000, 5, 500_000]
    await c.close()
