"""A real ZooKeeper server: the test kit's (samsa.testing.zookeeper)."""
from samsa.testing.zookeeper import TICK_MS, ZooKeeperProcess, zookeeper_installed

__all__ = ["TICK_MS", "ZooKeeperProcess", "zookeeper_installed"]
