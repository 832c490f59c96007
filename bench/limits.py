"""What this machine can do at all, measured in the same run as the brokers.

A broker's figure means little alone on a shared 2-core VM; divided by the
machine's own limit it says how much of the hardware the broker turns into
Kafka throughput. Three limits:

- TCP over loopback: a Python sender writing a stream in chunks of the record
  payload sizes (100 B, 1 KiB: the cost of moving small pieces) and of 1 MiB
  (what a batching client and broker can approach), to a receiver in another
  process reading into a 1 MiB buffer.
- sendfile from a page-cached file to a loopback socket (the fetch path's floor).
- sequential write to the data directory, fsync at the end and fsync per MiB.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
from pathlib import Path

from .load import CTX

MiB = 1 << 20


def _sink(port_q, out_q):
    """Accept one connection, read to EOF; report bytes and [first byte, EOF] time."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port_q.put(srv.getsockname()[1])
    conn, _ = srv.accept()
    buf = bytearray(MiB)
    n = conn.recv_into(buf)
    t0 = time.monotonic()
    total = n
    while n:
        n = conn.recv_into(buf)
        total += n
    out_q.put({"bytes": total, "seconds": time.monotonic() - t0})
    conn.close()
    srv.close()


def _with_sink(send):
    """Run ``send(sock)`` against a sink in another process; returns MB/s seen by the sink."""
    port_q, out_q = CTX.Queue(), CTX.Queue()
    p = CTX.Process(target=_sink, args=(port_q, out_q), daemon=True)
    p.start()
    try:
        port = port_q.get(timeout=30)
        with socket.create_connection(("127.0.0.1", port)) as s:
            send(s)
            s.shutdown(socket.SHUT_WR)
            r = out_q.get(timeout=120)
    finally:
        p.join(10)
        if p.is_alive():
            p.kill()
    return r["bytes"] / max(r["seconds"], 1e-9) / 1e6


def tcp_loopback(chunk: int, seconds: float) -> float:
    """MB/s of a loopback stream written in ``chunk``-byte sendall calls."""
    data = os.urandom(chunk)

    def send(s):
        sendall, end = s.sendall, time.monotonic() + seconds
        while time.monotonic() < end:
            for _ in range(max(1, (4 * MiB) // chunk)):
                sendall(data)
    return _with_sink(send)


def sendfile_loopback(work_dir: Path, seconds: float, file_mib: int = 256) -> float:
    """MB/s of os.sendfile from a page-cached file (re-sent whole) into a loopback socket."""
    with tempfile.NamedTemporaryFile(dir=work_dir, prefix="sendfile-") as f:
        chunk = os.urandom(MiB)
        for _ in range(file_mib):
            f.write(chunk)
        f.flush()
        f.seek(0)
        while f.read(8 * MiB):  # into the page cache
            pass
        size = file_mib * MiB
        fd = f.fileno()

        def send(s):
            s.setblocking(True)
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                off = 0
                while off < size:
                    off += os.sendfile(s.fileno(), fd, off, size - off)
        return _with_sink(send)


def write_fsync(work_dir: Path, total_mib: int, fsync_every_mib: int = 0) -> float:
    """MB/s of sequential 1 MiB writes to ``work_dir``, fsync per ``fsync_every_mib`` MiB
    (0: one fsync at the end, included in the time)."""
    chunk = os.urandom(MiB)
    path = Path(tempfile.mktemp(dir=work_dir, prefix="fsync-"))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        t0 = time.monotonic()
        for i in range(1, total_mib + 1):
            os.write(fd, chunk)
            if fsync_every_mib and i % fsync_every_mib == 0:
                os.fsync(fd)
        os.fsync(fd)
        secs = time.monotonic() - t0
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return total_mib * MiB / secs / 1e6


def measure_all(work_dir: Path, quick: bool) -> dict[str, float]:
    """Every limit, named like the result keys the report uses (MB/s)."""
    # A limit is what the machine *can* do, so the best of a few tries (the VM's
    # neighbours and the page cache's writeback make single tries noisy).
    secs = 0.7 if quick else 1.5
    tries = 1 if quick else 3
    out = {}
    for chunk, name in ((100, "100B"), (1024, "1KiB"), (MiB, "1MiB")):
        out[f"tcp_loopback_{name}"] = max(tcp_loopback(chunk, secs) for _ in range(tries))
    out["sendfile_loopback"] = max(sendfile_loopback(work_dir, secs, 64 if quick else 256) for _ in range(tries))
    out["write_fsync_end"] = max(write_fsync(work_dir, 64 if quick else 256) for _ in range(tries))
    out["write_fsync_per_mib"] = max(write_fsync(work_dir, 32 if quick else 128, fsync_every_mib=1)
                                     for _ in range(tries))
    return out


if __name__ == "__main__":
    print(measure_all(Path(tempfile.gettempdir()), quick=True))
