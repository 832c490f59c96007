"""What TLS costs: produce and fetch throughput over an SSL listener as a ratio
of the same broker's PLAINTEXT listener, in the same run.

Usage: /work/main/.venv/bin/python bench/bench_tls.py [--mib 256] [--size 65536] [--reps 3]

One samsa broker (a child process, started as the tests start it) listens on
PLAINTEXT and SSL (TLS 1.3, a P-256 certificate made for the run). For each
protocol, alternating so that drift hits both alike:
  produce: one librdkafka producer (its own process) writes --mib MiB of
           --size-byte values, acks=1, into a fresh topic;
  fetch:   one tuned librdkafka consumer reads that topic from the start.
Plaintext fetch goes out with sendfile from the page cache; TLS fetch reads the
same regions with pread and encrypts them in the broker (Python 3.11's ssl has
no kTLS), which is what the fetch ratio prices. Broker CPU seconds per GB are
shown alongside, since on a 2-core machine the client competes for the CPU.
Figures are the median of --reps runs (MB/s, 1 MB = 10^6 bytes).

Ends with one line: ``summary: tls_produce_ratio=<r> tls_fetch_ratio=<r>``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench.brokers import cpu_seconds, create_topic
from bench.load import aggregate, consume_bulk_worker, produce_worker, run_workers
from tests.support.broker_process import BrokerProcess
from tests.support.kafka_wire import free_port
from tests.support.tls_certs import make_certs

PROTOCOLS = ("PLAINTEXT", "SSL")


def _measure(broker: BrokerProcess, fn) -> dict:
    cpu0 = cpu_seconds(broker.pid)
    result = fn()
    cpu1 = cpu_seconds(broker.pid)
    if cpu0 is not None and cpu1 is not None and result["bytes"]:
        result["broker_cpu_s_per_gb"] = (cpu1 - cpu0) / (result["bytes"] / 1e9)
    return result


def run(args) -> dict:
    work = Path(tempfile.mkdtemp(prefix="bench-tls-"))
    certs = make_certs(work / "certs")
    ports = {"PLAINTEXT": free_port(), "SSL": free_port()}
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    broker = BrokerProcess(work / "broker", port=ports["PLAINTEXT"], startup_timeout=60, overrides={
        "listeners": listeners, "advertised.listeners": listeners,
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server),
        "num.network.threads": args.threads})
    conf = {
        "PLAINTEXT": {"bootstrap.servers": f"127.0.0.1:{ports['PLAINTEXT']}"},
        "SSL": {"bootstrap.servers": f"127.0.0.1:{ports['SSL']}", "security.protocol": "SSL",
                "ssl.ca.location": str(certs.ca)},
    }
    records = max(1, args.mib * 1024 * 1024 // args.size)
    results: dict = {p: {"produce": [], "fetch": []} for p in PROTOCOLS}
    broker.start()
    try:
        for rep in range(args.reps):
            order = PROTOCOLS if rep % 2 == 0 else PROTOCOLS[::-1]
            for proto in order:
                topic = f"tls-bench-{proto.lower()}-{rep}"
                create_topic(conf["PLAINTEXT"]["bootstrap.servers"], topic, 1)
                produced = _measure(broker, lambda: aggregate(run_workers(
                    produce_worker, [(conf[proto], topic, args.size, "1", 3600.0, 5, records)],
                    timeout=900)))
                if produced["failed"]:
                    raise RuntimeError(f"{proto} produce: {produced['failed']} failed "
                                       f"({produced['first_error']})")
                fetched = _measure(broker, lambda: aggregate(run_workers(
                    consume_bulk_worker, [(conf[proto], topic, [0], produced["records"])],
                    timeout=900)))
                results[proto]["produce"].append(produced)
                results[proto]["fetch"].append(fetched)
                print(f"  rep {rep + 1} {proto:9} produce {produced['mb_s']:7.1f} MB/s   "
                      f"fetch {fetched['mb_s']:7.1f} MB/s", flush=True)
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    return results


def _median(rows: list[dict], key: str) -> float:
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(values) if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256, help="MiB produced (and fetched) per run")
    ap.add_argument("--size", type=int, default=64 * 1024, help="value size in bytes")
    ap.add_argument("--reps", type=int, default=3, help="runs per protocol (median kept)")
    ap.add_argument("--threads", type=int, default=1, help="num.network.threads")
    args = ap.parse_args()
    print(f"# TLS vs plaintext, same broker: {args.mib} MiB of {args.size}-byte values per run, "
          f"{args.reps} runs each, num.network.threads={args.threads}", flush=True)
    results = run(args)
    ratios = {}
    print(f"{'case':10} {'PLAINTEXT MB/s':>15} {'SSL MB/s':>10} {'SSL/PLAIN':>10} "
          f"{'CPU s/GB plain':>15} {'CPU s/GB SSL':>13}")
    for case in ("produce", "fetch"):
        plain = _median(results["PLAINTEXT"][case], "mb_s")
        tls = _median(results["SSL"][case], "mb_s")
        ratios[case] = tls / plain
        print(f"{case:10} {plain:15.1f} {tls:10.1f} {ratios[case]:10.2f} "
              f"{_median(results['PLAINTEXT'][case], 'broker_cpu_s_per_gb'):15.2f} "
              f"{_median(results['SSL'][case], 'broker_cpu_s_per_gb'):13.2f}")
    print(f"summary: tls_produce_ratio={ratios['produce']:.2f} tls_fetch_ratio={ratios['fetch']:.2f}")


if __name__ == "__main__":
    main()
