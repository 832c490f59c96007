"""Consumer offsets in ZooKeeper, as Kafka 0.8.2-2.x kept them (issue 10).

A 0.8-era consumer (kafka-python with api_version=(0, 8, 1): OffsetCommit and
OffsetFetch v0) keeps its offsets under /consumers/<group>/offsets/<topic>/<p>,
written by whichever broker it talks to, so they survive that broker's death.
v1+ commits stay in __consumer_offsets, with a copy mirrored to the same znodes
for tools that read the ZooKeeper-era registry (0.8.2's dual commit).

Real peers: Debian's ZooKeeper server, two samsa brokers as processes, kazoo,
kafka-python and confluent-kafka.
"""
from __future__ import annotations

import json
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, OffsetAndMetadata
from kafka import TopicPartition as KTP
from kazoo.client import KazooClient

from tests.support.broker_process import BrokerProcess
from tests.support.waiting import wait_until

CHROOT = "/samsa"


@pytest.fixture
def two_brokers(zookeeper):
    work = Path(tempfile.mkdtemp(prefix="samsa-zkoff-"))
    brokers = [BrokerProcess(work / f"b{i}", broker_id=i, overrides={
        "zookeeper.connect": zookeeper.connect + CHROOT,
        "zookeeper.session.timeout.ms": "2000",
        "offsets.topic.num.partitions": "4",
        # two brokers: Kafka's default of 3 replicas could not be placed
        "offsets.topic.replication.factor": "2",
        "group.initial.rebalance.delay.ms": "0"}) for i in range(2)]
    zk = KazooClient(hosts=zookeeper.connect + CHROOT)
    try:
        for b in brokers:
            b.start()
        zk.start(timeout=30)
        wait_until(lambda: sorted(zk.get_children("/brokers/ids")) == ["0", "1"],
                   what="both brokers registered")
        yield brokers, zk
    finally:
        zk.stop()
        zk.close()
        failed = []
        for b in brokers:
            try:
                b.stop()
            except Exception as e:  # stop the others too
                failed.append(e)
            print(f"\n--- broker log tail ({b.log_path}) ---\n{b.log_tail(40)}")
        shutil.rmtree(work, ignore_errors=True)


def _topic_on_both(bootstrap: str) -> str:
    """A topic with one partition on each broker."""
    topic = f"old-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for attempt in range(5):
        try:
            admin.create_topics([NewTopic(topic, 2, replica_assignment=[[0], [1]])])[topic].result(30)
            break
        except KafkaException as e:
            # A retriable answer (a ZooKeeper connection lost on a loaded machine: the
            # broker says "try again") is retried, as a client with retries would;
            # the first attempt may have created it all the same.
            code = e.args[0].code()
            if code == KafkaError.TOPIC_ALREADY_EXISTS and attempt:
                break
            if not e.args[0].retriable() or attempt == 4:
                raise
            time.sleep(0.5)
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(20):
        p.produce(topic, b"%d" % i, partition=i % 2)
    assert p.flush(30) == 0
    return topic


def _zk_offset(zk: KazooClient, group: str, topic: str, partition: int) -> int | None:
    path = f"/consumers/{group}/offsets/{topic}/{partition}"
    if not zk.exists(path):
        return None
    return int(zk.get(path)[0].decode())


def test_v0_offsets_live_in_zookeeper_and_outlive_the_broker_that_took_them(two_brokers):
    (b0, b1), zk = two_brokers
    topic = _topic_on_both(f"{b0.bootstrap},{b1.bootstrap}")
    group = f"g-{uuid.uuid4().hex[:8]}"
    tps = [KTP(topic, 0), KTP(topic, 1)]

    # Bootstrapped from broker 1 only: that is the broker taking the v0 commit.
    c = KafkaConsumer(bootstrap_servers=b1.bootstrap, group_id=group, api_version=(0, 8, 1),
                      enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        c.assign(tps)
        c.commit({tps[0]: OffsetAndMetadata(3, "", -1), tps[1]: OffsetAndMetadata(7, "", -1)})
    finally:
        c.close()
    # Written through before the commit was answered, in Kafka's format (a decimal string).
    assert _zk_offset(zk, group, topic, 0) == 3
    assert _zk_offset(zk, group, topic, 1) == 7

    # The broker that took them dies; the other one reads them back from ZooKeeper.
    b1.kill()
    c = KafkaConsumer(bootstrap_servers=b0.bootstrap, group_id=group, api_version=(0, 8, 1),
                      enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        c.assign([tps[0]])
        assert c.committed(tps[0]) == 3
        assert c.position(tps[0]) == 3  # a fresh assignment resumes there
    finally:
        c.close()

    # A tool (or an 0.8 consumer) that writes the znode itself is read back too.
    zk.set(f"/consumers/{group}/offsets/{topic}/0", b"5")
    b1.start()
    c = KafkaConsumer(bootstrap_servers=b1.bootstrap, group_id=group, api_version=(0, 8, 1),
                      enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        c.assign(tps)
        assert c.committed(tps[0]) == 5
        assert c.committed(tps[1]) == 7
    finally:
        c.close()


def test_v1_plus_commits_are_mirrored_to_zookeeper(two_brokers):
    (b0, b1), zk = two_brokers
    bootstrap = f"{b0.bootstrap},{b1.bootstrap}"
    topic = _topic_on_both(bootstrap)
    group = f"g-{uuid.uuid4().hex[:8]}"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 9)],
                 asynchronous=False)
        # the committed offsets themselves are the coordinator's (v1+ OffsetFetch)
        got = {tp.partition: tp.offset
               for tp in c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)],
                                     timeout=30)}
        assert got == {0: 4, 1: 9}
    finally:
        c.close()
    # the copy reaches ZooKeeper in the background (batched)
    wait_until(lambda: (_zk_offset(zk, group, topic, 0), _zk_offset(zk, group, topic, 1))
               == (4, 9), what="the mirrored offsets in /consumers")


def test_consumer_groups_are_published_in_the_zookeeper_registry(two_brokers):
    """The coordinator publishes each consumer group's members and partition owners
    where ZooKeeper-era tools read them, and takes them away when the group empties."""
    (b0, b1), zk = two_brokers
    bootstrap = f"{b0.bootstrap},{b1.bootstrap}"
    topic = _topic_on_both(bootstrap)
    group = f"g-{uuid.uuid4().hex[:8]}"
    members = [Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "client.id": f"m{i}", "auto.offset.reset": "earliest",
                         "session.timeout.ms": 6000}) for i in range(2)]
    ids_path, owners_path = f"/consumers/{group}/ids", f"/consumers/{group}/owners/{topic}"
    try:
        for m in members:
            m.subscribe([topic])

        def published():
            for m in members:
                m.poll(0.1)
            if not zk.exists(ids_path) or not zk.exists(owners_path):
                return None
            ids = sorted(zk.get_children(ids_path))
            owners = {int(p): zk.get(f"{owners_path}/{p}")[0].decode()
                      for p in zk.get_children(owners_path)}
            held = [len(m.assignment()) for m in members]
            return (ids, owners) if len(ids) == 2 and len(owners) == 2 and held == [1, 1] \
                else None

        ids, owners = wait_until(published, what="both members and owners published")
        assert all(i.startswith(("m0-", "m1-")) for i in ids)
        # the 0.8 consumer names an owner "<consumer id>-<thread>"
        assert sorted(o.rsplit("-", 1)[0] for o in owners.values()) == ids
        registration = json.loads(zk.get(f"{ids_path}/{ids[0]}")[0])
        assert registration["subscription"] == {topic: 1}
        assert registration["pattern"] == "static" and registration["version"] == 1
    finally:
        for m in members:
            m.close()
    wait_until(lambda: not zk.get_children(ids_path) and not zk.get_children(owners_path),
               what="the emptied group's members and owners removed")
