"""Broker CPU for a fixed amount of work: the hot-path before/after figure.

Starts a broker from a source tree (``--tree``, default this checkout), writes
``--records`` idempotent 1 KiB records to one partition with librdkafka, then
reads them back with a librdkafka consumer, and prints the broker process's
CPU seconds (user + system, from /proc) spent on each half. CPU time, not
wall time: it stays meaningful on a machine shared with other work.

Compare two commits by checking one out in a worktree:

    git worktree add /tmp/before <commit>
    python bench/bench_broker_cpu.py --tree /tmp/before
    python bench/bench_broker_cpu.py
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(tree: str, records: int, compression: str = "none") -> tuple[float, float]:
    work = tempfile.mkdtemp(prefix="samsa-cpu-")
    port = _free_port()
    with open(f"{work}/server.properties", "w") as f:
        f.write(f"broker.id=0\nlisteners=PLAINTEXT://127.0.0.1:{port}\n"
                f"advertised.listeners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={work}/data\n")
    env = {**os.environ, "PYTHONPATH": tree}
    # a tree from before the samsa. namespace (issue 25) started its server as `-m broker`
    module = "samsa" if os.path.isdir(os.path.join(tree, "samsa")) else "broker"
    broker = subprocess.Popen([sys.executable, "-m", module, "server",
                               f"{work}/server.properties"], cwd=tree, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        bootstrap = f"127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or broker.poll() is not None:
                    raise SystemExit("the broker did not start") from None
                time.sleep(0.05)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("cpu", 1, 1)])["cpu"].result(30)
        start = _cpu_seconds(broker.pid)
        producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                             "linger.ms": 5, "compression.type": compression})
        value = b"x" * 1024
        for _ in range(records):
            while True:
                try:
                    producer.produce("cpu", value=value)
                    break
                except BufferError:
                    producer.poll(0.005)
        if producer.flush(120):
            raise SystemExit("records were not all acknowledged")
        produced = _cpu_seconds(broker.pid)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cpu",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe(["cpu"])
        seen = 0
        while seen < records:
            seen += sum(1 for m in consumer.consume(10000, 1.0) if not m.error())
        fetched = _cpu_seconds(broker.pid)
        consumer.close()
        return produced - start, fetched - produced
    finally:
        broker.terminate()
        broker.wait(30)
        subprocess.run(["rm", "-rf", work], check=False)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tree", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    p.add_argument("--records", type=int, default=300_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--compression", default="none",
                   help="the producer's compression.type (none, gzip, snappy, lz4, zstd)")
    args = p.parse_args()
    for _ in range(args.runs):
        produce, fetch = run(args.tree, args.records, args.compression)
        print(f"produce_cpu_s {produce:.2f} fetch_cpu_s {fetch:.2f}", flush=True)


if __name__ == "__main__":
    main()
