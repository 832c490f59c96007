"""A real samsa cluster (ZooKeeper + N brokers): the test kit's (samsa.testing.cluster),
under the name and signature the suite uses: ``Cluster(work_dir, size=3, ...)``."""
from samsa.testing.cluster import CHROOT, ClusterProcesses as Cluster, SaslPlaintextCluster

__all__ = ["CHROOT", "Cluster", "SaslPlaintextCluster"]
