"""A Cluster (tests/support/cluster.py) whose ZooKeeper and brokers each run in a
network namespace of their own (tests/support/netns.py), so a test can cut links
between them while every process stays alive. The test's clients stay in the root
namespace and reach every node over the bridge: "cut from ZooKeeper and its peers
but not from its clients" is a rule inside one node's namespace.

    cluster = NetCluster(tmp_dir, size=3).start()
    cluster.network.cut(cluster.node(0), [cluster.ZK, cluster.node(1)])
    cluster.network.heal()
    cluster.stop()   # the processes, then the namespaces

Node names: "zk" and "b0".."bN-1"; each listens on its own address (ZooKeeper on
2181, brokers on 9092).
"""
from __future__ import annotations

from pathlib import Path

from .broker_process import BrokerProcess
from .cluster import Cluster
from .netns import TestNetwork
from .zookeeper import ZooKeeperProcess

BROKER_PORT = 9092
ZK_PORT = 2181


class NetCluster(Cluster):
    ZK = "zk"

    def __init__(self, work_dir: Path, size: int = 3, *, network: TestNetwork | None = None,
                 **kwargs):
        super().__init__(work_dir, size, **kwargs)
        self.network = network or TestNetwork.create([self.ZK, *(self.node(i) for i in range(size))])
        self.zk = ZooKeeperProcess(self.work_dir / "zk", port=ZK_PORT,
                                   host=self.network.address(self.ZK),
                                   launcher=self.network.wrap(self.ZK, []))

    @staticmethod
    def node(broker_id: int) -> str:
        return f"b{broker_id}"

    def broker_process(self, broker_id: int, work_dir: Path | None = None) -> BrokerProcess:
        node = self.node(broker_id)
        return BrokerProcess(work_dir or self.work_dir / f"broker-{broker_id}", port=BROKER_PORT,
                             broker_id=broker_id, host=self.network.address(node),
                             launcher=self.network.wrap(node, []),
                             overrides={"zookeeper.connect": self.zookeeper_connect,
                                        **self.overrides,
                                        **self.broker_overrides.get(broker_id, {})})

    def add_broker(self) -> int:
        raise NotImplementedError("the network has a node per broker given at creation")

    def start(self) -> "NetCluster":
        try:
            super().start()
        except BaseException:
            self.network.destroy()
            raise
        return self

    def stop(self) -> None:
        """The processes (Cluster.stop), then every namespace and veth of the network."""
        try:
            self.network.heal()
            super().stop()
        finally:
            self.network.destroy()
