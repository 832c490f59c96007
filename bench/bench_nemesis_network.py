"""The replication checker against network partitions, long: many rounds of the
network nemeses against a 3-broker cluster whose ZooKeeper and brokers each run in
a network namespace of their own (tests/support/net_cluster.py; needs root,
iproute2 and nftables).

The nemeses are taken in turn (a leader cut from ZooKeeper and its peers but not
from its clients, a follower cut off, the cluster split in halves with ZooKeeper
on one side, ZooKeeper cut from a majority, a one-way cut, a slow link), victims
chosen by ``--seed``. Idempotent acks=all producers (librdkafka, Java) and an
acks=1 producer write throughout; tests/support/checker.py checks the history.
Prints each round, the counts (sent, acked, refused, lost; acks=1 losses, allowed
only around a fault) and the time each kind took to recover after its heal;
exits 1 when the checker found a violation.

Usage: ``python bench/bench_nemesis_network.py [--rounds 100] [--seed N] [--keep]``
(not part of the test run; the work directory is removed unless --keep).
"""
from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.checker import NETWORK_NEMESES, NEMESES, run_checker  # noqa: E402
from tests.support.net_cluster import NetCluster  # noqa: E402
from tests.support.netns import cleanup_stale, unavailable_reason  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--seed", type=int, default=None, help="victim choice (default: random, printed)")
    ap.add_argument("--nemeses", default=",".join(NETWORK_NEMESES),
                    help="comma-separated, taken in turn (the process nemeses work here too)")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--min-insync", type=int, default=2)
    ap.add_argument("--session-ms", type=int, default=3000)
    ap.add_argument("--hold", type=float, default=3.0, help="seconds each fault stays under load")
    ap.add_argument("--rate", type=float, default=150.0, help="values/s per producer")
    ap.add_argument("--java-producers", type=int, default=1)
    ap.add_argument("--acks1-producers", type=int, default=1)
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, data)")
    args = ap.parse_args()
    reason = unavailable_reason()
    if reason:
        print(f"no test network: {reason}", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    nemeses = [n for n in args.nemeses.split(",") if n]
    unknown = set(nemeses) - set(NETWORK_NEMESES) - set(NEMESES)
    if unknown:
        ap.error(f"unknown nemeses {sorted(unknown)}; known: {', '.join(NETWORK_NEMESES + NEMESES)}")

    cleanup_stale()
    work = Path(tempfile.mkdtemp(prefix="samsa-bench-netnemesis-"))
    cluster = NetCluster(work, size=3, session_timeout_ms=args.session_ms, offsets_partitions=3,
                         overrides={"replica.lag.time.max.ms": "4000"})
    started = time.monotonic()
    ok = False
    try:
        cluster.start()
        result = run_checker(cluster, args.rounds, nemeses, seed=seed, partitions=args.partitions,
                             replicas=3, min_insync=args.min_insync, hold_s=args.hold,
                             rate=args.rate, java_producers=args.java_producers,
                             acks1_producers=args.acks1_producers,
                             log=lambda line: print(line, flush=True))
        ok = result.ok
        if not ok:
            cluster.print_log_tails(40)
    finally:
        cluster.stop()
        if args.keep or not ok:
            print(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"seed={seed} rounds={args.rounds} wall_s={time.monotonic() - started:.1f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
