"""Metrics of a 3-broker cluster: consumer lag comes from each group's
coordinator alone (one series per group and partition across the cluster),
for partitions it holds a copy of and partitions it does not, and every
metric the provisioned Grafana dashboard queries is exported by the brokers;
followers replicate through incremental fetch sessions (KIP-227), which
partitions followed later join without a full Fetch."""
from __future__ import annotations

import re
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support import dashboard
from tests.support.kafka_wire import free_port
from tests.support.waiting import wait_until

# RF 3: every broker holds every partition. RF 1: each partition on one
# broker, so the coordinator asks the other leaders for their high watermarks.
TOPICS, GROUP = ("lag-rf3", "lag-rf1"), "lag-cluster"
PER_PARTITION, COMMITTED = 10, 4


def _lag_series(metrics_ports: list[int]) -> dict[tuple[str, int], list[tuple[int, float]]]:
    """(topic, partition) -> [(broker, lag)] over every broker's /metrics."""
    out: dict[tuple[str, int], list[tuple[int, float]]] = {}
    for broker, port in enumerate(metrics_ports):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        for m in re.finditer(r'^kafka_consumergroup_lag\{consumergroup="%s",partition="(\d+)",'
                             r'topic="([^"]+)"\} (\S+)$' % GROUP, text, re.M):
            out.setdefault((m.group(2), int(m.group(1))), []).append((broker, float(m.group(3))))
    return out


def _sample(port: int, series: str) -> float:
    """One series' value from a broker's /metrics (0 when it is not there)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(series + " "):
                return float(line.split()[-1])
    return 0.0


def test_lag_from_the_coordinator_only_and_dashboard_names_exported(cluster_factory):
    ports = [free_port() for _ in range(3)]
    cluster = cluster_factory(offsets_partitions=3, overrides={"metrics.host": "127.0.0.1"},
                              broker_overrides={b: {"metrics.port": str(p)}
                                                for b, p in enumerate(ports)})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for topic, factor in zip(TOPICS, (3, 1)):
        admin.create_topics([NewTopic(topic, 3, factor)])[topic].result(30)
        # created is not yet known: the broker asked below learns the leaders a
        # moment after the controller writes them to ZooKeeper
        cluster.wait_until_led(topic, 3)
    leaders = {p.leader for p in admin.list_topics(TOPICS[1], timeout=10)
               .topics[TOPICS[1]].partitions.values()}
    assert len(leaders) > 1, "the RF 1 partitions should be spread over the brokers"
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for topic in TOPICS:
        for part in range(3):
            for i in range(PER_PARTITION):
                p.produce(topic, b"%d" % i, partition=part)
    assert p.flush(60) == 0
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": GROUP,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe(list(TOPICS))
        got = 0
        for _ in range(600):
            m = c.poll(0.2)
            if m is not None and not m.error():
                got += 1
            if got == 6 * PER_PARTITION:
                break
        assert got == 6 * PER_PARTITION
        c.commit(offsets=[TopicPartition(t, part, COMMITTED) for t in TOPICS for part in range(3)],
                 asynchronous=False)
        # A coordinator that follows a partition sees its high watermark one
        # replica fetch after the leader, and one without a copy after its
        # lookup in the background: wait for the series to settle.
        expected = {(t, part): [PER_PARTITION - COMMITTED] for t in TOPICS for part in range(3)}
        def settled():
            s = _lag_series(ports)
            return s if {k: [lag for _, lag in v] for k, v in s.items()} == expected else None
        series = wait_until(settled, timeout=30,
                            what=f"lag {PER_PARTITION - COMMITTED} on each partition, once")
        # One broker, the same for every partition: the group's coordinator.
        assert len({b for v in series.values() for b, _ in v}) == 1, series
        assert not dashboard.unexported([f"127.0.0.1:{port}" for port in ports])
        # KIP-227: each broker follows RF 3 partitions through a fetch session
        # with their leaders: after the first full Fetch, incremental ones
        # (sent by the followers, served by the leaders).
        def incremental() -> list[tuple[float, float]] | None:
            out = [(_sample(port, 'samsa_replica_fetch_requests{kind="incremental"}'),
                    _sample(port, 'samsa_fetch_session_requests{kind="incremental"}'))
                   for port in ports]
            return out if all(sent > 0 and served > 0 for sent, served in out) else None
        wait_until(incremental, timeout=30, what="incremental fetches on every broker")
        # Partitions followed later (a new topic) interrupt the followers' long
        # polls and are added to their sessions: no full Fetch again.
        full = [_sample(port, 'samsa_replica_fetch_requests{kind="full"}') for port in ports]
        admin.create_topics([NewTopic("later-rf3", 3, 3)])["later-rf3"].result(30)
        later = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
        for part in range(3):
            later.produce("later-rf3", b"x", partition=part)
        assert later.flush(60) == 0  # acks=all: each follower fetched its new partitions
        assert [_sample(port, 'samsa_replica_fetch_requests{kind="full"}')
                for port in ports] == full
    finally:
        c.close()
