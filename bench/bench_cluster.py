"""A ZooKeeper cluster's reaction times: how long after a broker dies its
partitions are marked offline, and how long after the controller writes a new
leader every broker's Metadata says so.

Starts a real ZooKeeper (Debian's package) and three brokers, creates a topic
of 6 partitions (2 led by each broker), then ``--rounds`` times:
  - kill -9 broker 2; time until broker 0's Metadata shows its partitions
    without a leader (bounded below by zookeeper.session.timeout.ms, reported);
  - restart broker 2; for each broker, the delay from the partition state
    znode's write (its mtime, same machine clock) to the first Metadata
    answer from that broker naming broker 2 as leader again (polled every
    ``--poll-ms``, so the figure is at most that much late).

Usage: ``python bench/bench_cluster.py [--rounds 5] [--session-ms 2000]``
(not part of the test run).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kazoo.client import KazooClient

from samsa.client.blocking import SimpleClient
from samsa.protocol.messages import MetadataRequest
from samsa.protocol.model import ApiKey
from tests.support.broker_process import BrokerProcess
from tests.support.zookeeper import ZooKeeperProcess

TOPIC = "propagation"


def _leaders(client: SimpleClient) -> dict[int, int]:
    resp = client.call(ApiKey.METADATA, MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC, topic_id=None)],
        allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False))
    for t in resp.topics:
        if t.name == TOPIC:
            return {p.partition_index: p.leader_id for p in t.partitions}
    return {}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--session-ms", type=int, default=2000)
    ap.add_argument("--poll-ms", type=float, default=2.0)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="samsa-bench-cluster-"))
    zk = ZooKeeperProcess(work / "zk").start()
    overrides = {"zookeeper.connect": zk.connect + "/samsa",
                 "zookeeper.session.timeout.ms": str(args.session_ms)}
    brokers = [BrokerProcess(work / f"b{i}", broker_id=i, overrides=overrides).start()
               for i in range(3)]
    kazoo = KazooClient(hosts=zk.connect + "/samsa")
    kazoo.start(timeout=30)
    offline_s: list[float] = []
    propagation_ms: dict[int, list[float]] = {0: [], 1: [], 2: []}
    try:
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": brokers[0].bootstrap})
        admin.create_topics([NewTopic(TOPIC, 6, 1)])[TOPIC].result(30)
        clients = [SimpleClient(b.bootstrap) for b in brokers]
        deadline = time.monotonic() + 30
        while not (leaders := _leaders(clients[0])) or min(leaders.values()) < 0:
            if time.monotonic() > deadline:
                raise SystemExit("the topic never got leaders")
            time.sleep(0.05)
        on_2 = sorted(p for p, b in leaders.items() if b == 2)
        for _ in range(args.rounds):
            clients[2].close()
            t0 = time.monotonic()
            brokers[2].kill()
            while any(_leaders(clients[0]).get(p, -1) >= 0 for p in on_2):
                time.sleep(args.poll_ms / 1000)
            offline_s.append(time.monotonic() - t0)
            brokers[2].start()
            clients[2] = SimpleClient(brokers[2].bootstrap)
            seen: dict[int, float] = {}
            while len(seen) < 3:
                for i, c in enumerate(clients):
                    if i not in seen and all(_leaders(c).get(p) == 2 for p in on_2):
                        seen[i] = time.time()
                time.sleep(args.poll_ms / 1000)
            written = max(kazoo.get(f"/brokers/topics/{TOPIC}/partitions/{p}/state")[1].mtime
                          for p in on_2) / 1000
            for i, when in seen.items():
                propagation_ms[i].append((when - written) * 1000)
        for c in clients:
            c.close()
    finally:
        kazoo.stop()
        for b in brokers:
            b.stop()
        zk.stop()
    print(f"session timeout {args.session_ms} ms, {args.rounds} rounds")
    print(f"kill -9 -> partitions offline in Metadata: median {statistics.median(offline_s):.2f} s "
          f"(min {min(offline_s):.2f}, max {max(offline_s):.2f})")
    for i, ms in propagation_ms.items():
        print(f"leader change written -> broker {i} Metadata: median {statistics.median(ms):.1f} ms "
              f"(min {min(ms):.1f}, max {max(ms):.1f}; polled every {args.poll_ms:g} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
