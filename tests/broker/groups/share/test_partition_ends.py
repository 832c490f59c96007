"""The ends (high watermarks) a share-partition's lag counts to: read here
for a partition led here, asked of the leader otherwise (the asking itself,
over ListOffsets, is tests/integration/test_share_groups_cluster.py's), and
left unknown when nobody leads it."""
from __future__ import annotations

from samsa.broker.groups.share.partition_ends import PartitionEnds
from samsa.broker.metadata import BrokerEndpoint, PartitionMeta

ME = 1


class _Cluster:
    def __init__(self, leaders: dict[tuple[str, int], int]) -> None:
        self.leaders = leaders
        self.asked: list[int] = []

    def partition(self, topic: str, partition: int) -> PartitionMeta | None:
        leader = self.leaders.get((topic, partition))
        return None if leader is None else PartitionMeta((0, 1, 2), leader, 0, (0, 1, 2))

    def broker(self, broker_id: int) -> BrokerEndpoint | None:
        self.asked.append(broker_id)
        return None  # not registered: the ask fails, the end stays unknown


async def test_ends_are_read_here_asked_elsewhere_and_unknown_without_a_leader():
    cluster = _Cluster({("t", 0): ME, ("t", 1): -1, ("t", 2): ME, ("t", 3): 2})
    ends = PartitionEnds(ME, cluster, lambda t, p: 40 if (t, p) == ("t", 0) else None, 1.0)
    found = await ends.ends([("t", 0), ("t", 1), ("t", 2), ("t", 3), ("gone", 0)])
    # t-2: led here by the metadata, not by the log (leadership moving): unknown
    assert found == {("t", 0): 40}
    assert cluster.asked == [2]  # only t-3's leader was asked (and was not reached)
    await ends.close()
