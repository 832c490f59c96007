"""The ZooKeeper-era consumer registry, against a real ZooKeeper server:
v0 offsets where Kafka 0.8 kept them, the dual-commit mirror, and members
and owners published by the coordinator's session."""
from __future__ import annotations

import json

import pytest
from kazoo.client import KazooClient

from samsa.broker.groups.zk_registry import ConsumerRegistry
from tests.support.waiting import wait_until


@pytest.fixture
def clients(zookeeper):
    made = []

    def client():
        c = KazooClient(hosts=zookeeper.connect)
        c.start(timeout=20)
        made.append(c)
        return c
    try:
        yield client
    finally:
        for c in made:
            c.stop()
            c.close()


def test_v0_offsets_live_where_kafka_08_kept_them(clients):
    coordinator, tool = clients(), clients()
    registry = ConsumerRegistry(coordinator)
    try:
        registry.commit("g", {("t", 0): 42, ("t", 1): 7})
        assert tool.get("/consumers/g/offsets/t/0")[0] == b"42"
        registry.commit("g", {("t", 0): 43})
        assert tool.get("/consumers/g/offsets/t/0")[0] == b"43"
        # Another coordinator (after a move) reads them back; unknown ones are -1.
        other = ConsumerRegistry(clients())
        assert other.fetch("g", [("t", 0), ("t", 1), ("t", 9)]) == {
            ("t", 0): 43, ("t", 1): 7, ("t", 9): -1}
        other.close()
    finally:
        registry.close()


def test_mirror_coalesces_commits_per_partition(clients):
    coordinator, tool = clients(), clients()
    registry = ConsumerRegistry(coordinator, flush_interval=3600)
    try:
        for offset in range(1000):
            registry.mirror("busy", {("t", 0): offset})
        assert not tool.exists("/consumers/busy/offsets/t/0")
        registry.flush()
        data, stat = tool.get("/consumers/busy/offsets/t/0")
        assert data == b"999" and stat.version == 0  # one write for 1000 commits
    finally:
        registry.close()
    off = ConsumerRegistry(clients(), mirror_offsets=False)
    off.mirror("quiet", {("t", 0): 5})
    off.close()
    assert not tool.exists("/consumers/quiet")


def test_members_and_owners_are_ephemeral_in_the_coordinators_session(clients):
    coordinator, tool = clients(), clients()
    registry = ConsumerRegistry(coordinator)
    registry.publish("g", {"c1": ["t"], "c2": ["t", "u"]}, {("t", 0): "c1", ("t", 1): "c2"})
    ids = sorted(tool.get_children("/consumers/g/ids"))
    assert ids == ["c1", "c2"]
    member = json.loads(tool.get("/consumers/g/ids/c2")[0])
    assert member["version"] == 1 and member["subscription"] == {"t": 1, "u": 1}
    assert member["pattern"] == "static" and member["timestamp"].isdigit()
    assert tool.get("/consumers/g/owners/t/1")[0] == b"c2-0"
    # A rebalance: c2 left, c1 owns everything.
    registry.publish("g", {"c1": ["t"]}, {("t", 0): "c1", ("t", 1): "c1"})
    assert tool.get_children("/consumers/g/ids") == ["c1"]
    assert tool.get("/consumers/g/owners/t/1")[0] == b"c1-0"
    # The coordinator dies: its session's nodes go with it...
    registry.close()
    coordinator.stop()
    wait_until(lambda: not tool.get_children("/consumers/g/ids"), what="ephemeral members to vanish")
    assert tool.get_children("/consumers/g/owners/t") == []
    # ...and the next coordinator publishes the group again.
    successor = ConsumerRegistry(clients())
    successor.publish("g", {"c1": ["t"]}, {("t", 0): "c1"})
    assert tool.get_children("/consumers/g/ids") == ["c1"]
    successor.unpublish("g")
    assert tool.get_children("/consumers/g/ids") == []
    successor.close()
