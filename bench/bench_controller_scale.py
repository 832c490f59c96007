"""The ZooKeeper controller's work at partition scale: bringing N partitions
online, a broker's death, and a controller fail-over.

Starts a real ZooKeeper and three "brokers", each a process of its own as the
controller tests build them (a ZooKeeper metadata store for the session,
registration and partition-state watches, and a controller; no logs, no network
listener): what is measured is the controller's own work per partition against
ZooKeeper, the part Kafka's ZooKeeper mode took minutes for at this scale. Then:

- online: ``--partitions`` partitions (RF 3, ``--topics`` topics, leaders spread
  round-robin) written straight into ZooKeeper as a tool would; time until every
  partition has a state znode;
- broker death: a broker that is not the controller ends its session (its store
  closes: the moment an expired session is noticed, without the timeout);
  time until no partition names it as leader or in its ISR;
- controller fail-over: the controller's session ends likewise; time until a new
  controller is in office and every partition is led by a live broker with the
  dead one out of every ISR.

Each figure is wall time from the event; the checker polls the state znodes
(ZooKeeper multiReads of 500), going on from the first one not yet seen settled
and stopping at the first batch not settled. Target (issue 29, 30,000 partitions): a broker's death and
a controller fail-over each settled in under 10 s.

Usage: ``python bench/bench_controller_scale.py [--partitions 30000] [--topics 30]``
(not part of the test run).
"""
from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from multiprocessing.synchronize import Event
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from samsa.broker.cluster.controller import Controller
from samsa.broker.metadata import BrokerEndpoint
from samsa.broker.metadata.zookeeper import ZooKeeperMetadataStore
from samsa.broker.metadata.zookeeper.writes import ZooKeeperWrites
from tests.support.zookeeper import ZooKeeperProcess

ROOT = "/bench-controller"


def _node_main(connect: str, broker_id: int, stop: Event) -> None:
    # The controller's phase times (taking office, big batches of decisions).
    logging.basicConfig(level=logging.WARNING,
                        format=f"  broker {broker_id} %(asctime)s %(name)s: %(message)s")
    logging.getLogger("broker.cluster.controller").setLevel(logging.INFO)
    store = ZooKeeperMetadataStore(connect + ROOT, broker_id,
                                   BrokerEndpoint(broker_id, "127.0.0.1", 9000 + broker_id),
                                   session_timeout_ms=10000)
    controller = Controller(store.zk, broker_id)
    controller.start()
    stop.wait()
    controller.stop()
    store.close()


class Node:
    """A broker as the controller sees it, in a process of its own: a session,
    a registration, the partition-state watches, a controller."""

    def __init__(self, connect: str, broker_id: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._process = context.Process(target=_node_main, args=(connect, broker_id, self._stop),
                                         daemon=True)
        self._process.start()

    def end_session(self) -> None:
        self._stop.set()
        self._process.join(60)


def _states(zk: ZooKeeperWrites, paths: list[str]) -> list[dict | None]:
    return [None if found is None else json.loads(found[0]) for found in zk.get_many(paths)]


CHECKED_AT_ONCE = 500  # state znodes the checker reads in one go


def _settles(zk: ZooKeeperWrites, paths: list[str],
             settled: Callable[[dict | None], bool]) -> Callable[[], bool]:
    """A check that every state znode of ``paths`` is ``settled``, polled by
    _wait. Settled ones stay settled here (a dead broker does not come back
    during a measurement), so each poll goes on from the first partition not
    yet seen settled and stops at the first batch with one that is not:
    while the controller works, the checker reads a batch per poll rather than
    every znode (its reads would crowd out the controller's on the same
    ZooKeeper and the same two cores)."""
    unsettled = list(paths)

    def check() -> bool:
        while unsettled:
            batch = unsettled[:CHECKED_AT_ONCE]
            left = [path for path, state in zip(batch, _states(zk, batch)) if not settled(state)]
            unsettled[:len(batch)] = left
            if left:
                return False
        return True
    return check


def _wait(what: str, done: Callable[[], bool], timeout: float) -> float:
    start = time.monotonic()
    while not done():
        if time.monotonic() - start > timeout:
            raise SystemExit(f"timed out after {timeout:.0f} s: {what}")
        time.sleep(0.2)
    return time.monotonic() - start


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--partitions", type=int, default=30000)
    ap.add_argument("--topics", type=int, default=30)
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="samsa-bench-controller-"))
    zk_server = ZooKeeperProcess(work / "zk").start()
    kazoo = KazooClient(hosts=zk_server.connect, timeout=30)
    kazoo.start(timeout=30)
    kazoo.ensure_path(ROOT)
    kazoo.chroot = ROOT
    zk = ZooKeeperWrites(kazoo)
    nodes: dict[int, Node] = {}

    def controller() -> int | None:
        try:
            return int(json.loads(kazoo.get("/controller")[0])["brokerid"])
        except NoNodeError:
            return None
    try:
        for i in range(3):
            nodes[i] = Node(zk_server.connect, i)
        _wait("a controller", lambda: controller() is not None, 60)
        _wait("3 brokers registered", lambda: len(kazoo.get_children("/brokers/ids")) == 3, 60)
        per_topic = args.partitions // args.topics
        paths = []
        for t in range(args.topics):
            topic = f"scale-{t}"
            replicas = {str(p): [(p + k) % 3 for k in range(3)] for p in range(per_topic)}
            kazoo.create(f"/brokers/topics/{topic}",
                         json.dumps({"version": 1, "partitions": replicas}).encode())
            paths += [f"/brokers/topics/{topic}/partitions/{p}/state" for p in range(per_topic)]
        total = len(paths)
        print(f"{total} partitions, RF 3, {args.topics} topics, 3 brokers")
        online = _wait("every partition online",
                       _settles(zk, paths, lambda state: state is not None), args.timeout)
        print(f"online:              {online:6.2f} s")

        def without(dead: int) -> Callable[[], bool]:
            return _settles(zk, paths, lambda s: s is not None and s["leader"] not in (dead, -1)
                            and dead not in s["isr"])

        active = controller()
        victim = next(i for i in nodes if i != active)
        nodes.pop(victim).end_session()
        moved = _wait(f"broker {victim}'s partitions moved", without(victim), args.timeout)
        print(f"broker death:        {moved:6.2f} s  (broker {victim}, led {total // 3})")

        nodes[victim] = Node(zk_server.connect, victim)
        _wait("the broker back", lambda: len(kazoo.get_children("/brokers/ids")) == 3, 60)
        # Back in every ISR (as its fetchers would put it) and leading its
        # preferred third again, so the fail-over has a third of the leaders to move.
        for path, state in zip(paths, _states(zk, paths)):
            assert state is not None
            replicas = sorted(set(state["isr"]) | {0, 1, 2})
            state["isr"] = replicas
            kazoo.set(path, json.dumps(state).encode())
        active = controller()
        assert active is not None
        nodes.pop(active).end_session()
        led = without(active)
        failover = _wait("a new controller with every partition led", lambda: (
            controller() not in (None, active) and led()), args.timeout)
        print(f"controller failover: {failover:6.2f} s  (broker {active})")
        return 0
    finally:
        for n in nodes.values():
            n.end_session()
        kazoo.stop()
        zk_server.stop()


if __name__ == "__main__":
    raise SystemExit(main())
