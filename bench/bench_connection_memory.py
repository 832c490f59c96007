"""Memory per idle client connection: samsa next to Tansu, in one run.

Each broker is started fresh; ``--connections`` sockets are opened to it, each
sends one ApiVersions request and reads its answer (so the broker has set the
connection up completely), and then all stay open and silent. The figure is
the broker's resident memory after minus before, divided by the connections.
Both are read from /proc/<pid>/status (VmRSS) once the count of connections
the kernel shows for the broker's port has settled.

    python bench/bench_connection_memory.py --connections 5000 --runs 3
"""
from __future__ import annotations

import argparse
import gc
import socket
import statistics
import struct
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.brokers import BROKERS, running  # noqa: E402

# ApiVersions v0, correlation id 1, client id "mem": every Kafka broker answers it
_API_VERSIONS = struct.pack(">hhih", 18, 0, 1, 3) + b"mem"
_REQUEST = struct.pack(">i", len(_API_VERSIONS)) + _API_VERSIONS


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def _read_answer(sock: socket.socket) -> None:
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            raise ConnectionError("closed before answering ApiVersions")
        head += chunk
    left = struct.unpack(">i", head)[0]
    while left:
        chunk = sock.recv(min(left, 65536))
        if not chunk:
            raise ConnectionError("closed in the middle of an answer")
        left -= len(chunk)


def settled_rss(pid: int, quiet_seconds: float) -> int:
    """VmRSS after ``quiet_seconds`` (a broker may tidy quiet connections up
    on a timer), once two readings a quarter second apart agree within 64 KiB."""
    time.sleep(quiet_seconds)
    last = rss_bytes(pid)
    for _ in range(40):
        time.sleep(0.25)
        now = rss_bytes(pid)
        if abs(now - last) < 64 * 1024:
            return now
        last = now
    return last


def measure(kind: str, count: int, quiet_seconds: float) -> float:
    with running(kind) as broker:
        host, port = broker.bootstrap.rsplit(":", 1)
        warm = [socket.create_connection((host, int(port))) for _ in range(20)]
        for s in warm:      # the first connections pay one-off costs (imports, caches)
            s.sendall(_REQUEST)
            _read_answer(s)
        gc.collect()
        before = settled_rss(broker.pid, quiet_seconds)
        socks = []
        try:
            for _ in range(count):
                s = socket.create_connection((host, int(port)))
                s.sendall(_REQUEST)
                socks.append(s)
            for s in socks:
                _read_answer(s)
            after = settled_rss(broker.pid, quiet_seconds)
        finally:
            for s in socks + warm:
                s.close()
        return (after - before) / count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--connections", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--quiet-seconds", type=float, default=12.0,
                    help="how long the connections stay silent before memory is read "
                         "(samsa gives a quiet connection's buffers up within ~6 s)")
    ap.add_argument("--brokers", nargs="+", default=list(BROKERS), choices=BROKERS)
    args = ap.parse_args()
    per: dict[str, list[float]] = {k: [] for k in args.brokers}
    for run in range(args.runs):
        for kind in args.brokers if run % 2 == 0 else reversed(args.brokers):
            per[kind].append(measure(kind, args.connections, args.quiet_seconds))
            print(f"run {run + 1} {kind}: {per[kind][-1] / 1024:.1f} KiB per idle connection",
                  flush=True)
    for kind, values in per.items():
        print(f"{kind}: median {statistics.median(values) / 1024:.1f} KiB per idle connection "
              f"({', '.join(f'{v / 1024:.1f}' for v in values)}) over {args.connections} connections")
    if "samsa" in per and "tansu" in per:
        print(f"samsa / tansu: {statistics.median(per['samsa']) / statistics.median(per['tansu']):.2f}")


if __name__ == "__main__":
    main()
