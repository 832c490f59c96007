"""Fetching from the closest replica (KIP-392) on a samsa cluster: brokers in
three racks (``broker.rack``), ``replica.selector.class`` set to Kafka's
RackAwareReplicaSelector, consumers that say where they run (``client.rack``).

- the leader sends a consumer from another rack to the in-sync follower in
  that rack (``preferred_read_replica``, no records), and keeps one from its
  own rack or with no rack;
- the follower serves consumers up to its own high watermark;
- librdkafka and the Java client with ``client.rack`` read every record,
  from the follower in their rack: that broker counts the bytes out, the
  leader counts none;
- a follower fetch from a broker that is not a replica is refused.
"""
from __future__ import annotations

import re
import threading
import urllib.request
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.client.blocking import SimpleClient
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import FetchRequest
from tests.support.cluster import Cluster
from tests.support.kafka_wire import free_port
from tests.support.waiting import wait_until

FETCH = 1
RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
RECORDS = 500


def _cluster(cluster_factory) -> tuple[Cluster, dict[int, int]]:
    ports = {b: free_port() for b in range(3)}
    cluster = cluster_factory(offsets_partitions=3, overrides={
        "replica.selector.class": RACK_AWARE, "metrics.host": "127.0.0.1"},
        broker_overrides={b: {"broker.rack": f"rack-{b}", "metrics.port": str(port)}
                          for b, port in ports.items()})
    return cluster, ports


def _metric(metrics_port: int, name: str, labels: str = "") -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    return float(m.group(1)) if m else 0.0


def _bytes_out(metrics_port: int, topic: str) -> float:
    """Bytes sent to consumers (Kafka's BytesOutPerSec: replication not counted)."""
    return _metric(metrics_port, "kafka_server_brokertopicmetrics_bytesout_total",
                   '{topic="%s"}' % topic)


def _fetch(bootstrap: str, topic: str, rack: str, replica_id: int = -1, offset: int = 0,
           max_wait_ms: int = 0, min_bytes: int = 0):
    with SimpleClient(bootstrap, timeout=30) as c:
        r = c.call(FETCH, FetchRequest(
            replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
            isolation_level=0, session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                topic=topic, partitions=[FetchRequest.FetchPartition(
                    partition=0, current_leader_epoch=-1, fetch_offset=offset,
                    log_start_offset=-1, partition_max_bytes=1 << 20)])],
            forgotten_topics_data=[], rack_id=rack), highest=12)
    return r.responses[0].partitions[0]


def _records_size(p) -> int:
    return len(p.records or b"")


def test_consumers_read_from_the_replica_in_their_rack(cluster_factory, java_tools):
    cluster, metrics = _cluster(cluster_factory)
    topic = f"racks-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(
        topic, num_partitions=1, replication_factor=-1, replica_assignment=[[0, 1, 2]],
        config={"min.insync.replicas": "2"})])[topic].result(30)
    cluster.wait_for_leaders(topic, 1)
    wait_until(lambda: sorted(cluster.partition_state(topic, 0)["isr"]) == [0, 1, 2], 60,
               "all three replicas in sync")
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                  "enable.idempotence": True})
    for i in range(RECORDS):
        p.produce(topic, value=f"v-{i}".encode())
    assert p.flush(60) == 0
    leader = cluster.broker(0).bootstrap
    # Every follower's high watermark has caught up with the leader's.
    for b in (1, 2):
        wait_until(lambda b=b: _fetch(cluster.broker(b).bootstrap, topic, f"rack-{b}")
                   .high_watermark == RECORDS, 30, f"broker {b}'s high watermark at {RECORDS}")

    # The leader redirects a consumer in rack-2 and keeps its own rack's and a rackless one.
    sent = _fetch(leader, topic, "rack-2")
    assert (sent.error_code, sent.preferred_read_replica, _records_size(sent)) == (0, 2, 0)
    for rack in ("rack-0", "", "rack-9"):
        stay = _fetch(leader, topic, rack)
        assert stay.preferred_read_replica == -1 and _records_size(stay) > 0, rack
    # The follower serves a consumer up to its high watermark, and redirects no one.
    served = _fetch(cluster.broker(2).bootstrap, topic, "rack-2")
    assert (served.error_code, served.preferred_read_replica) == (0, -1)
    assert served.high_watermark == RECORDS and _records_size(served) > 0
    # Only the partition's replicas fetch as followers.
    refused = _fetch(leader, topic, "", replica_id=7)
    assert refused.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    # What the followers copied counts as replication, not as bytes out.
    assert _metric(metrics[0], "kafka_server_brokertopicmetrics_replicationbytesout_total") \
        > 2 * RECORDS * 3
    before = {b: _bytes_out(port, topic) for b, port in metrics.items()}
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "rack-2-reader",
                  "client.rack": "rack-2", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got = []
        wait_until(lambda: got.extend(m.value().decode() for m in c.consume(500, timeout=1)
                                      if m.error() is None) or len(got) >= RECORDS, 60,
                   "librdkafka with client.rack=rack-2 reading every record")
    finally:
        c.close()
    assert got == [f"v-{i}" for i in range(RECORDS)]
    after = {b: _bytes_out(port, topic) for b, port in metrics.items()}
    assert after[2] - before[2] > RECORDS * 3, "the follower in rack-2 served the records"
    assert after[0] == before[0], "the leader served no records to the rack-2 consumer"

    out = java_tools.consume(cluster.bootstrap, topic, "--from-beginning", "--max-messages",
                             RECORDS, "--consumer-property", "client.rack=rack-1").check()
    assert out.lines == [f"v-{i}" for i in range(RECORDS)]
    assert _bytes_out(metrics[1], topic) - after[1] > RECORDS * 3, \
        "the follower in rack-1 served the Java consumer"
    assert _bytes_out(metrics[0], topic) == after[0]

    # A consumer long-polling a follower is woken when the follower's high
    # watermark moves (it would otherwise sit out the whole 60 s wait, past
    # the client's 30 s socket timeout).
    polled: list = []
    poll = threading.Thread(target=lambda: polled.append(_fetch(
        cluster.broker(2).bootstrap, topic, "rack-2", offset=RECORDS, max_wait_ms=60000,
        min_bytes=1)), daemon=True)
    poll.start()
    p.produce(topic, value=b"late")
    assert p.flush(30) == 0
    poll.join(45)
    assert polled and polled[0].error_code == 0 and _records_size(polled[0]) > 0
    assert polled[0].high_watermark == RECORDS + 1
