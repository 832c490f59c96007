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

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_nemesis import main  # noqa: E402  (the one run loop, with network=True)

if __name__ == "__main__":
    sys.exit(main(network=True, description=__doc__.splitlines()[0]))
