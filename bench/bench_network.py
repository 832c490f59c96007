"""Throughput of broker.network against the limits of this machine, same run.

Usage: /work/venv/bin/python bench/bench_network.py [--mib 256] [--threads 1]

Measures, with the load generator in a separate process (so it does not
share the server's GIL):
  ingest:   clients send size-prefixed frames (16 KiB and 1 MiB), the handler
            os.write()s each frame to a file and replies with 8 bytes. Peers:
            plain loopback TCP (blocking sendall -> recv_into, no framing) and
            a minimal uvloop Protocol doing the same framing/os.write/reply
            (the DESIGN.md reference path).
  sendfile: clients send tiny requests, the handler answers each with a
            4-byte prefix + a 1 MiB file region (sent with os.sendfile). Peer:
            a blocking os.sendfile loop in a thread (the kernel's limit).
Figures are MB/s of payload (1 MB = 10^6 bytes) and ratios to the peers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import struct
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import uvloop

from samsa.broker.network import NetworkServer

HOST = "127.0.0.1"
SIZE = struct.Struct(">i")
REPLY = SIZE.pack(4) + b"\0\0\0\1"


# ------------------------------------------------------------------ client side


def _client(mode: str, port: int, size: int, count: int, window: int) -> None:
    """Run in a child process; prints {"seconds": ..., "bytes": ...}.

    Single-threaded and batched (frames joined into ~256 KiB sendall calls,
    about ``window`` frames in flight) so the load generator costs little
    per frame and has no GIL hand-offs of its own."""
    sock = socket.create_connection((HOST, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = memoryview(bytearray(4 << 20))
    start = time.perf_counter()
    if mode == "raw":  # stream without framing or replies
        data = os.urandom(size)
        for _ in range(count):
            sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        while sock.recv_into(buf):
            pass
    else:
        if mode == "ingest":
            one = SIZE.pack(size) + os.urandom(size)
            reply = len(REPLY)
        else:  # sendfile: tiny request, response of 4 + size bytes
            one = SIZE.pack(1) + b"f"
            reply = 4 + size
        per_batch = max(1, min((256 << 10) // len(one), window // 2 or 1, count))
        batches_in_flight = max(2, window // per_batch)
        batch = one * per_batch
        nbatches = count // per_batch
        count = nbatches * per_batch
        sent = 0
        owed = 0  # reply bytes still expected
        done = 0
        while done < nbatches:
            while sent < nbatches and sent - done < batches_in_flight:
                sock.sendall(batch)
                sent += 1
                owed += reply * per_batch
            # read one batch worth of replies
            want = reply * per_batch
            while want:
                n = sock.recv_into(buf[:min(want, len(buf))])
                if not n:
                    raise SystemExit("server closed early")
                want -= n
            owed -= reply * per_batch
            done += 1
    seconds = time.perf_counter() - start
    sock.close()
    print(json.dumps({"seconds": seconds, "bytes": size * count}))


async def run_client(mode: str, port: int, size: int, count: int, window: int) -> float:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, os.path.abspath(__file__), "--client", mode, str(port), str(size),
        str(count), str(window), stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    if proc.returncode:
        raise RuntimeError(f"client {mode} failed")
    r = json.loads(out)
    return r["bytes"] / r["seconds"] / 1e6


# ------------------------------------------------------------------ peers


async def peer_raw_tcp(size: int, count: int) -> float:
    """Plain loopback TCP: blocking receiver thread, recv_into, no framing."""
    ls = socket.create_server((HOST, 0))
    port = ls.getsockname()[1]

    def serve() -> None:
        c, _ = ls.accept()
        buf = memoryview(bytearray(1 << 20))
        while c.recv_into(buf):
            pass
        c.close()

    t = threading.Thread(target=serve)
    t.start()
    mbs = await run_client("raw", port, size, count, 1)
    await asyncio.to_thread(t.join)
    ls.close()
    return mbs


async def peer_raw_sendfile(tmp, size: int, count: int, window: int) -> float:
    """Blocking os.sendfile of the same region per request, in a thread."""
    ls = socket.create_server((HOST, 0))
    port = ls.getsockname()[1]

    def serve() -> None:
        c, _ = ls.accept()
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        fd = tmp.fileno()
        f = c.makefile("rb")
        for _ in range(count):
            f.read(5)
            c.sendall(SIZE.pack(size))
            off = 0
            while off < size:
                off += os.sendfile(c.fileno(), fd, off, size - off)
        f.close()
        c.close()

    t = threading.Thread(target=serve)
    t.start()
    mbs = await run_client("sendfile", port, size, count, window)
    await asyncio.to_thread(t.join)
    ls.close()
    return mbs


class _MinimalIngest(asyncio.Protocol):
    """DESIGN.md's reference path: uvloop transport, framing, os.write, reply."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray()

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = 0
        n = len(buf)
        while n - pos >= 4:
            size = SIZE.unpack_from(buf, pos)[0]
            if n - pos - 4 < size:
                break
            os.write(self.fd, memoryview(buf)[pos + 4:pos + 4 + size])
            self.transport.write(REPLY)
            pos += 4 + size
        if pos:
            del buf[:pos]


async def peer_minimal_uvloop(fd: int, size: int, count: int, window: int) -> float:
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(lambda: _MinimalIngest(fd), HOST, 0)
    port = srv.sockets[0].getsockname()[1]
    mbs = await run_client("ingest", port, size, count, window)
    srv.close()
    await srv.wait_closed()
    return mbs


# ------------------------------------------------------------------ samsa


class Region:
    __slots__ = ("file", "position", "length")

    def __init__(self, file, position: int, length: int) -> None:
        self.file = file
        self.position = position
        self.length = length


async def samsa_ingest(fd: int, threads: int, size: int, count: int, window: int) -> float:
    async def handler(conn, frame):
        os.write(fd, frame)
        return [REPLY]

    server = NetworkServer(HOST, 0, threads, handler)
    await server.start()
    try:
        return await run_client("ingest", server.port, size, count, window)
    finally:
        await server.stop()


async def samsa_sendfile(tmp, threads: int, size: int, count: int, window: int) -> float:
    prefix = SIZE.pack(size)

    async def handler(conn, frame):
        return [prefix, Region(tmp, 0, size)]

    server = NetworkServer(HOST, 0, threads, handler)
    await server.start()
    try:
        return await run_client("sendfile", server.port, size, count, window)
    finally:
        await server.stop()


# ------------------------------------------------------------------ main


async def best_of(reps: int, fn, *args) -> float:
    """Best of several runs: the machine is shared, and interference only
    ever makes a run slower."""
    return max([await fn(*args) for _ in range(reps)])


async def main(args) -> None:
    total = args.mib << 20
    reps = args.reps
    print(f"# broker.network bench: {args.mib} MiB per case, best of {reps}, {args.threads} "
          f"network thread(s), {os.cpu_count()} CPUs, python {sys.version.split()[0]}, "
          f"uvloop {uvloop.__version__}, loadavg {os.getloadavg()[0]:.2f}")
    raw = await best_of(reps, peer_raw_tcp, 1 << 20, total >> 20)
    print(f"loopback TCP limit (blocking sendall->recv_into): {raw:8.0f} MB/s")
    with tempfile.TemporaryFile(dir=args.dir) as sink:
        fd = sink.fileno()

        async def fresh(fn, *a):
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            return await fn(*a)

        for size, window in ((16 << 10, 64), (1 << 20, 8)):
            count = total // size
            ref = got = 0.0
            for _ in range(reps):  # interleaved so both see the same interference
                ref = max(ref, await fresh(peer_minimal_uvloop, fd, size, count, window))
                got = max(got, await fresh(samsa_ingest, fd, args.threads, size, count, window))
            print(f"ingest {size >> 10:5d} KiB frames: samsa {got:7.0f} MB/s | minimal uvloop "
                  f"{ref:7.0f} MB/s ({got / ref:4.2f}x) | TCP limit {got / raw:4.2f}x")
    size = 1 << 20
    with tempfile.TemporaryFile(dir=args.dir) as tmp:
        tmp.write(os.urandom(size))
        tmp.flush()
        count = total // size
        ref = got = 0.0
        for _ in range(reps):
            ref = max(ref, await peer_raw_sendfile(tmp, size, count, 8))
            got = max(got, await samsa_sendfile(tmp, args.threads, size, count, 8))
        print(f"sendfile 1 MiB responses: samsa {got:7.0f} MB/s | blocking os.sendfile "
              f"{ref:7.0f} MB/s ({got / ref:4.2f}x) | TCP limit {got / raw:4.2f}x")
    print(f"# loadavg after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--client":
        mode, port, size, count, window = sys.argv[2:7]
        _client(mode, int(port), int(size), int(count), int(window))
        sys.exit(0)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256, help="payload MiB per case")
    ap.add_argument("--threads", type=int, default=1, help="network threads")
    ap.add_argument("--reps", type=int, default=3, help="runs per case (best is kept)")
    ap.add_argument("--dir", default=None, help="directory for the ingest sink file")
    uvloop.run(main(ap.parse_args()))
