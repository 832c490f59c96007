"""Metadata at partition scale: all-topics Metadata answered by a broker holding N partitions.

Starts real brokers (``python -m samsa server``): one embedded broker (``--brokers 1``,
the default) or a ZooKeeper cluster of ``--brokers`` brokers (testing/cluster.py, a real
ZooKeeper), creates ``--topics`` topics sharing ``--partitions`` partitions at replication
factor ``--rf`` (confluent-kafka's AdminClient), waits until the first broker's Metadata
names a leader and a full ISR for every partition, then for each version in ``--versions``
sends ``--requests`` all-topics Metadata requests one after another on one connection (a raw
socket: the request's bytes are encoded once, the answer is read whole, not decoded, so the
figures are the broker's) and reports:

- p50 / p99 / max wall milliseconds from the request's send to the answer's last byte;
- the broker's CPU milliseconds per request (user + system from /proc/<pid>/stat over
  the whole run, divided by the count), the figure to compare on a shared machine;
- the answer's size, and the wall milliseconds of the version's first answer (a
  warm-up, not counted: built and encoded, where the others reuse it).

Issue 29's target: a 3-broker cluster with 30,000 partitions (RF 3) answers Metadata for
all partitions in under 100 ms.

Measured on the shared 2-core machine (load 10-19 from other work; CPU per request is the
figure to trust), before (per-request encoding) -> after (entries encoded once per change):
one broker, 30,000 partitions in 300 topics: v12 p50 99 -> 1.9 ms, CPU 81 -> 1.2 ms;
v1 p50 213 -> 1.1 ms, CPU 82 -> 0.8 ms. Three brokers, 3,000 partitions RF 3: v12 p50
55 -> 0.7 ms, CPU 21 -> 1.0 ms; v1 29 -> 0.5 ms, CPU 12 -> 1.0 ms. Three brokers, 30,000
partitions RF 3 (33 minutes to create here): v1 p50 6.5 ms, CPU 1.6 ms; v12, timed while
followers were still joining ISRs (each change has the next answer built again), p50 80 ms,
CPU 96 ms.

Usage: ``python bench/bench_metadata_scale.py [--brokers 1|3] [--partitions 30000]
[--topics 300] [--rf 1] [--requests 50] [--versions 12,1]`` (not part of the test run).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from confluent_kafka.admin import AdminClient, NewTopic

from samsa.protocol.messages import MetadataRequest, MetadataResponse
from samsa.protocol.messages.api import RequestHeader, decode_response, encode_request
from samsa.protocol.model import ApiKey
from bench.brokers import cpu_seconds
from tests.support.broker_process import BrokerProcess


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


def _request(version: int, corr: int) -> bytes:
    # all topics: null from v1 on, an empty list in v0
    req = MetadataRequest(topics=[] if version == 0 else None, allow_auto_topic_creation=False)
    return encode_request(RequestHeader(ApiKey.METADATA, version, corr, "bench"), req)


def _exchange(sock: socket.socket, data: bytes) -> bytes:
    sock.sendall(data)
    size = struct.unpack(">i", _read_exactly(sock, 4))[0]
    return _read_exactly(sock, size)


def _connect(bootstrap: str) -> socket.socket:
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=120)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def wait_for_leaders(bootstrap: str, partitions: int, rf: int, timeout: float = 900.0) -> float:
    """Seconds until Metadata names a leader and a full ISR (``rf`` replicas) for
    ``partitions`` partitions: a cluster still adding followers to ISRs changes its
    metadata all the time, and each change has the next answer built again."""
    t0 = time.monotonic()
    with _connect(bootstrap) as sock:
        while True:
            _, resp = decode_response(_exchange(sock, _request(12, 1)), ApiKey.METADATA, 12)
            assert isinstance(resp, MetadataResponse)
            ready = sum(1 for t in resp.topics for p in t.partitions
                        if p.leader_id >= 0 and len(p.isr_nodes) >= rf)
            if ready >= partitions:
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"{ready} of {partitions} partitions have a leader and full ISR")
            time.sleep(2.0)


def measure(bootstrap: str, pid: int, version: int, requests: int) -> dict[str, float]:
    with _connect(bootstrap) as sock:
        t0 = time.perf_counter()
        _exchange(sock, _request(version, 0))   # warm: the connection, the codec, a cache
        first = (time.perf_counter() - t0) * 1000
        walls = []
        size = 0
        cpu0 = cpu_seconds(pid) or 0.0
        for corr in range(1, requests + 1):
            data = _request(version, corr)
            t0 = time.perf_counter()
            size = len(_exchange(sock, data))
            walls.append((time.perf_counter() - t0) * 1000)
        cpu = ((cpu_seconds(pid) or 0.0) - cpu0) * 1000 / requests
    walls.sort()
    return {"p50_ms": round(walls[len(walls) // 2], 2),
            "p99_ms": round(walls[min(len(walls) - 1, int(len(walls) * 0.99))], 2),
            "max_ms": round(walls[-1], 2),
            "broker_cpu_ms_per_request": round(cpu, 2),
            "first_ms": round(first, 2),   # this version's first answer: built, not reused
            "response_bytes": size}


def create(bootstrap: str, topics: int, partitions: int, rf: int) -> float:
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 300_000})
    per, extra = divmod(partitions, topics)
    new = [NewTopic(f"meta-scale-{i:05d}", per + (1 if i < extra else 0), rf)
           for i in range(topics)]
    t0 = time.monotonic()
    for start in range(0, len(new), 10):   # batches: one CreateTopics stays small
        futures = admin.create_topics(new[start:start + 10], operation_timeout=600,
                                      request_timeout=600)
        for fut in futures.values():
            fut.result(900)
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--brokers", type=int, default=1)
    ap.add_argument("--partitions", type=int, default=30_000)
    ap.add_argument("--topics", type=int, default=300)
    ap.add_argument("--rf", type=int, default=None, help="default: --brokers")
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument("--versions", default="12,1")
    args = ap.parse_args()
    rf = args.rf if args.rf is not None else args.brokers
    work = Path(tempfile.mkdtemp(prefix="samsa-bench-metadata-"))
    out: dict[str, object] = {"brokers": args.brokers, "partitions": args.partitions,
                              "topics": args.topics, "rf": rf}
    cluster = None
    broker: BrokerProcess | None = None
    try:
        if args.brokers == 1:
            broker = BrokerProcess(work, startup_timeout=300).start()
            bootstrap, pid = broker.bootstrap, broker.pid
        else:
            from samsa.testing.cluster import ClusterProcesses
            cluster = ClusterProcesses(work, size=args.brokers, session_timeout_ms=30_000).start()
            bootstrap, pid = cluster.brokers[0].bootstrap, cluster.brokers[0].pid
        assert pid is not None
        out["create_s"] = round(create(bootstrap, args.topics, args.partitions, rf), 1)
        out["settled_after_s"] = round(wait_for_leaders(bootstrap, args.partitions, rf), 1)
        print(out, file=sys.stderr, flush=True)
        for v in (int(x) for x in args.versions.split(",")):
            out[f"v{v}"] = measure(bootstrap, pid, v, args.requests)
            print(f"v{v}", out[f"v{v}"], file=sys.stderr, flush=True)
    finally:
        if cluster is not None:
            cluster.stop()
        if broker is not None and broker.is_running():
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
