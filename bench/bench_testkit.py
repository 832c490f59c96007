"""The test kit's start-up: from a fixture starting to the first record acknowledged.

For each of --runs rounds (default 20): start a broker the way samsa.testing's
fixture does (Broker(): forked from the warm fork server, data on tmpfs), produce
one record with librdkafka to an auto-created topic, wait for its acknowledgement,
stop it. The same for a 3-broker Cluster (a real ZooKeeper and 3 brokers) and for
Tansu (tests/support/tansu.py: a Rust Kafka-protocol broker, in-memory, started as a
process the same way). Prints the median and the spread of each.

    python bench/bench_testkit.py [--runs 20] [--cluster-runs 20]

The first samsa broker of a process pays the fork server's import (about 1.5 s);
it is measured apart ("cold") and not in the median.
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import samsa.testing  # noqa: E402
from tests.support.tansu import TansuProcess  # noqa: E402


def _first_record(bootstrap: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "message.timeout.ms": 30000})
    errors: list = []
    p.produce("bench", b"first", on_delivery=lambda err, msg: errors.append(err))
    if p.flush(60) != 0 or errors != [None]:
        raise RuntimeError(f"the first record was not acknowledged: {errors}")


def _samsa_broker() -> float:
    started = time.monotonic()
    with samsa.testing.Broker() as b:
        _first_record(b.bootstrap_servers)
        return time.monotonic() - started


def _samsa_cluster() -> float:
    started = time.monotonic()
    with samsa.testing.Cluster(brokers=3) as c:
        _first_record(c.bootstrap_servers)
        return time.monotonic() - started


def _tansu() -> float:
    work = Path(tempfile.mkdtemp(prefix="bench-tansu-"))
    started = time.monotonic()
    try:
        with TansuProcess(work) as t:
            _first_record(t.bootstrap)
            return time.monotonic() - started
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _report(name: str, times: list[float]) -> None:
    if not times:
        return
    print(f"{name:<28} median {statistics.median(times) * 1000:7.0f} ms   "
          f"min {min(times) * 1000:6.0f}   max {max(times) * 1000:6.0f}   (n={len(times)})", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--cluster-runs", type=int, default=20)
    args = parser.parse_args()
    cold = _samsa_broker()
    print(f"{'samsa Broker, cold':<28} {cold * 1000:7.0f} ms (the fork server's import)", flush=True)
    _report("samsa Broker()", [_samsa_broker() for _ in range(args.runs)])
    _report("Tansu 0.6 (process)", [_tansu() for _ in range(args.runs)])
    _report("samsa Cluster(brokers=3)", [_samsa_cluster() for _ in range(args.cluster_runs)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
