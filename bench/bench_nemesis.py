"""The replication checker, long: many nemesis rounds against one 3-broker cluster.

Starts a real ZooKeeper (Debian's package) and three brokers, creates a topic
(replication 3, min.insync.replicas 2 unless told otherwise) and runs
tests/support/checker.py's ``run_checker`` for ``--rounds`` rounds, the
nemeses taken in turn (kill -9 a leader, kill -9 the controller, SIGSTOP a
leader past its session, kill -9 two brokers, kill -9 ZooKeeper), victims
chosen by ``--seed``. Prints each round, the checker's counts and the wall time;
exits 1 when the checker found a violation.

Usage: ``python bench/bench_nemesis.py [--rounds 100] [--seed N] [--keep]``
(bench_nemesis_network.py is this run in network namespaces)
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
from tests.support.cluster import Cluster  # noqa: E402


def main(network: bool = False, description: str | None = None) -> int:
    """The run both benches share; ``network`` puts ZooKeeper and each broker
    in a network namespace of their own (bench_nemesis_network.py) so the
    network nemeses can cut links, and adds an acks=1 producer whose losses
    the checker counts."""
    known = NETWORK_NEMESES + NEMESES if network else NEMESES
    ap = argparse.ArgumentParser(description=description or __doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--seed", type=int, default=None, help="victim choice (default: random, printed)")
    ap.add_argument("--nemeses", default=",".join(NETWORK_NEMESES if network else NEMESES),
                    help="comma-separated, taken in turn")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--min-insync", type=int, default=2)
    ap.add_argument("--session-ms", type=int, default=3000)
    ap.add_argument("--hold", type=float, default=3.0, help="seconds each fault stays under load")
    ap.add_argument("--rate", type=float, default=150.0 if network else 200.0,
                    help="values/s per producer")
    ap.add_argument("--java-producers", type=int, default=1)
    ap.add_argument("--acks1-producers", type=int, default=1 if network else 0)
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, data)")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 32)
    nemeses = [n for n in args.nemeses.split(",") if n]
    unknown = set(nemeses) - set(known)
    if unknown:
        ap.error(f"unknown nemeses {sorted(unknown)}; known: {', '.join(known)}")

    cluster_class: type[Cluster] = Cluster
    if network:
        from tests.support.net_cluster import NetCluster
        from tests.support.netns import cleanup_stale, unavailable_reason
        reason = unavailable_reason()
        if reason:
            print(f"no test network: {reason}", file=sys.stderr)
            return 2
        cleanup_stale()
        cluster_class = NetCluster
    work = Path(tempfile.mkdtemp(prefix="samsa-bench-netnemesis-" if network
                                 else "samsa-bench-nemesis-"))
    cluster = cluster_class(work, size=3, session_timeout_ms=args.session_ms, offsets_partitions=3,
                            overrides={"replica.lag.time.max.ms": "4000"})
    started = time.monotonic()
    ok = False
    try:
        cluster.start()
        result = run_checker(cluster, args.rounds, nemeses, seed=seed, partitions=args.partitions,
                             replicas=args.replicas, min_insync=args.min_insync, hold_s=args.hold,
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
