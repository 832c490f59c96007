"""Replication across a samsa cluster (real broker processes, a real ZooKeeper,
librdkafka as the client): what a user of a replicated Kafka topic relies on.

- followers copy the leader byte for byte, so replicas' segment files are equal;
- an acks=all record survives kill -9 of its leader, which a follower replaces;
- min.insync.replicas refuses acks=all writes the ISR cannot hold
  (NOT_ENOUGH_REPLICAS) and the ISR heals when brokers return;
- consumers never see past the high watermark: records only the leader has
  stay invisible until the followers have them;
- a replica whose disk was lost copies everything back and rejoins the ISR;
- a stopping broker hands its leaderships over first (controlled shutdown);
- leadership goes back to preferred replicas, asked (ElectLeaders) or not
  (auto.leader.rebalance.enable).

Each test has a cluster of its own (it kills or pauses brokers).
"""
from __future__ import annotations

import collections
import json
import shutil
import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.client.blocking import ClientError, SimpleClient
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (ControlledShutdownRequest, FetchRequest, ListOffsetsRequest,
                                     MetadataRequest, ProduceRequest)
from samsa.protocol.records import build_batch
from samsa.testing.faults import FaultControl
from tests.support.acked_writer import AckedWriter
from tests.support.cluster import Cluster
from tests.support.kafka_wire import free_port
from tests.support.waiting import wait_until

PRODUCE, FETCH, LIST_OFFSETS, METADATA, CONTROLLED_SHUTDOWN = 0, 1, 2, 3, 7


@pytest.fixture
def cluster_factory(cluster_factory):
    """Clusters whose followers leave the ISR after 4 s without catching up."""
    def make(**kwargs) -> Cluster:
        overrides = {"replica.lag.time.max.ms": "4000", **kwargs.pop("overrides", {})}
        return cluster_factory(offsets_partitions=3, overrides=overrides, **kwargs)
    return make


# ---------------------------------------------------------------- helpers

def _topic(cluster: Cluster, partitions: int = 2, min_isr: int = 2) -> str:
    name = f"replicated-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3, config={
        "min.insync.replicas": str(min_isr)})], operation_timeout=30)[name].result(30)
    _wait_for_full_isr(cluster, name, partitions)
    cluster.wait_until_led(name, partitions)  # each leader has taken its leadership up
    return name


def _isr(cluster: Cluster, topic: str, partition: int) -> list[int]:
    state = cluster.partition_state(topic, partition)
    return sorted(state["isr"]) if state else []


def _wait_for_full_isr(cluster: Cluster, topic: str, partitions: int, timeout: float = 60):
    wait_until(lambda: all(_isr(cluster, topic, p) == [0, 1, 2] for p in range(partitions)),
               timeout, f"every partition of {topic} with all 3 replicas in sync")


def _produce(cluster: Cluster, topic: str, values: list[str]) -> dict[str, tuple[int, int]]:
    """acks=all, idempotent; {value: (partition, offset)} for every value acked."""
    acked: dict[str, tuple[int, int]] = {}
    errors: list[str] = []

    def on_delivery(err, msg):
        if err is None:
            acked[msg.value().decode()] = (msg.partition(), msg.offset())
        else:
            errors.append(err.name())
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                  "enable.idempotence": True, "linger.ms": 5, "message.timeout.ms": 60000})
    for v in values:  # keyed: spread over the partitions (keyless ones stick to one)
        p.produce(topic, key=v.encode(), value=v.encode(), on_delivery=on_delivery)
        p.poll(0)
    assert p.flush(90) == 0, "records still unacknowledged"
    assert not errors, errors[:5]
    return acked


def _read_all(cluster: Cluster, topic: str, partitions: int,
              acked: dict[str, tuple[int, int]] | None = None) -> list[tuple[int, int, str]]:
    """Every record up to each partition's high watermark. With ``acked``, first
    until the high watermarks cover every acknowledged record: a leader elected a
    moment ago learns where its followers are from their next fetches, so its
    high watermark can trail for a moment (as Kafka's does); one that never
    gets there fails here."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "reader",
                  "enable.auto.commit": False})
    try:
        def high_watermarks():
            return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                    for p in range(partitions)}
        if acked:
            needed = collections.Counter()
            for p, offset in acked.values():
                needed[p] = max(needed[p], offset + 1)
            wait_until(lambda: all(high_watermarks()[p] >= end for p, end in needed.items()),
                       30, f"the high watermarks of {topic} to cover the acknowledged records")
        ends = high_watermarks()
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[tuple[int, int, str]] = []
        deadline = time.monotonic() + 60
        while sum(1 for _ in got) < sum(ends.values()) and time.monotonic() < deadline:
            # short calls: consume() waits its whole timeout when fewer records are left
            for m in c.consume(500, timeout=0.1):
                if m.error() is None:
                    got.append((m.partition(), m.offset(), m.value().decode()))
        return got
    finally:
        c.close()


def _log_bytes(cluster: Cluster, broker: int, topic: str, partition: int) -> bytes:
    """The partition's log on one broker, its segments end to end (replicas may
    roll segments at different offsets, as Kafka's may; the bytes are the same)."""
    d = cluster.broker(broker).data_dir / f"{topic}-{partition}"
    return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))


def _wait_for_identical_replicas(cluster: Cluster, topic: str, partitions: int,
                                 brokers=(0, 1, 2), timeout: float = 60) -> None:
    """Every replica of every partition holds the same segment files, byte for byte."""
    def same():
        for p in range(partitions):
            logs = [_log_bytes(cluster, b, topic, p) for b in brokers]
            if any(lg != logs[0] for lg in logs[1:]):
                return False
        return True
    wait_until(same, timeout, f"the replicas of {topic} byte-identical")
    assert any(_log_bytes(cluster, brokers[0], topic, p) for p in range(partitions))


def _leader(cluster: Cluster, topic: str, partition: int) -> int:
    return cluster.partition_state(topic, partition)["leader"]


def _raw_produce(bootstrap: str, topic: str, acks: int, value: bytes, timeout_ms: int = 5000):
    with SimpleClient(bootstrap) as c:
        r = c.call(PRODUCE, ProduceRequest(acks=acks, timeout_ms=timeout_ms, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.PartitionProduceData(
                    index=0, records=build_batch([(None, value, [], int(time.time() * 1000))]))])]),
            highest=9)
    return r.responses[0].partition_responses[0]


def _raw_fetch(bootstrap: str, topic: str, offset: int):
    with SimpleClient(bootstrap) as c:
        r = c.call(FETCH, FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0,
                                       max_bytes=1 << 20, isolation_level=0, session_id=0,
                                       session_epoch=-1, topics=[FetchRequest.FetchTopic(
                                           topic=topic, partitions=[FetchRequest.FetchPartition(
                                               partition=0, current_leader_epoch=-1,
                                               fetch_offset=offset, log_start_offset=-1,
                                               partition_max_bytes=1 << 20)])],
                                       forgotten_topics_data=[], rack_id=""), highest=11)
    return r.responses[0].partitions[0]


def _latest_offset(bootstrap: str, topic: str) -> int:
    with SimpleClient(bootstrap) as c:
        r = c.call(LIST_OFFSETS, ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]),
            highest=2)
    return r.topics[0].partitions[0].offset


# ---------------------------------------------------------------- tests

def test_followers_hold_byte_identical_copies(cluster_factory):
    cluster = cluster_factory()
    topic = _topic(cluster, partitions=2)
    values = [f"v-{i}" for i in range(3000)]
    acked = _produce(cluster, topic, values)
    assert len(acked) == len(values)
    _wait_for_identical_replicas(cluster, topic, 2)
    # the leader epochs the followers recorded are the leader's too
    for p in range(2):
        checkpoints = {(cluster.broker(b).data_dir / f"{topic}-{p}" /
                        "leader-epoch-checkpoint").read_text() for b in range(3)}
        assert len(checkpoints) == 1, checkpoints
    got = _read_all(cluster, topic, 2, acked)
    assert sorted(v for _, _, v in got) == sorted(values)


def test_acked_records_survive_kill_of_their_leader(cluster_factory):
    cluster = cluster_factory()
    topic = _topic(cluster, partitions=1)
    first = _produce(cluster, topic, [f"before-{i}" for i in range(500)])
    victim = _leader(cluster, topic, 0)
    cluster.kill(victim)
    # (a tuple: wait_until wants a truthy value, and broker 0 may lead)
    new_leader, = wait_until(
        lambda: (lambda l: (l,) if l not in (-1, victim) else None)(_leader(cluster, topic, 0)),
        30, "a new leader from the ISR")
    assert victim not in _isr(cluster, topic, 0)
    second = _produce(cluster, topic, [f"after-{i}" for i in range(500)])
    cluster.restart(victim)
    _wait_for_full_isr(cluster, topic, 1)
    got = _read_all(cluster, topic, 1, {**first, **second})
    values = [v for _, _, v in got]
    assert sorted(values) == sorted([*first, *second]), "acked records lost or duplicated"
    # the acknowledged offsets are where the records are
    assert {v: o for _, o, v in got} == {v: o for v, (_, o) in {**first, **second}.items()}
    _wait_for_identical_replicas(cluster, topic, 1)
    assert new_leader != victim


def test_min_insync_replicas_refuses_writes_the_isr_cannot_hold(cluster_factory):
    cluster = cluster_factory()
    topic = _topic(cluster, partitions=1)
    leader = _leader(cluster, topic, 0)
    followers = [b for b in range(3) if b != leader]
    for b in followers:
        cluster.kill(b)
    wait_until(lambda: _isr(cluster, topic, 0) == [leader], 30, "the ISR down to the leader")
    # The controller took the dead followers out with a new leader epoch; the
    # leader serves again once it has taken that epoch up (a moment after
    # ZooKeeper shows it: until then it answers NOT_LEADER_OR_FOLLOWER, or,
    # still at the epoch before, counts the dead followers in its ISR and
    # takes the acks=all write to wait for them).
    cluster.wait_until_led(topic, 1)
    bootstrap = cluster.broker(leader).bootstrap
    refused = _raw_produce(bootstrap, topic, acks=-1, value=b"refused")
    assert refused.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    before = _latest_offset(bootstrap, topic)
    assert _raw_produce(bootstrap, topic, acks=1, value=b"acks-1").error_code == 0
    assert _latest_offset(bootstrap, topic) == before + 1  # the refused one was not written
    for b in followers:
        cluster.restart(b)
    _wait_for_full_isr(cluster, topic, 1)
    assert _raw_produce(bootstrap, topic, acks=-1, value=b"accepted").error_code == 0
    _wait_for_identical_replicas(cluster, topic, 1)


def test_consumers_see_only_what_the_isr_holds(cluster_factory):
    # Paused followers neither fetch nor lose their ZooKeeper session within
    # the test's few seconds (session and lag limits are long), so they stay
    # in the ISR and hold the high watermark back.
    cluster = cluster_factory(session_timeout_ms=20000,
                              overrides={"replica.lag.time.max.ms": "20000"})
    topic = _topic(cluster, partitions=1)
    leader = _leader(cluster, topic, 0)
    bootstrap = cluster.broker(leader).bootstrap
    assert _raw_produce(bootstrap, topic, acks=-1, value=b"committed").error_code == 0
    followers = [b for b in range(3) if b != leader]
    for b in followers:
        cluster.pause(b)
    try:
        written = _raw_produce(bootstrap, topic, acks=1, value=b"leader only")
        assert written.error_code == 0 and written.base_offset == 1
        timed_out = _raw_produce(bootstrap, topic, acks=-1, value=b"waits", timeout_ms=300)
        assert timed_out.error_code == ErrorCode.REQUEST_TIMED_OUT
        fetched = _raw_fetch(bootstrap, topic, 1)
        assert fetched.error_code == 0 and fetched.high_watermark == 1
        assert not fetched.records
        assert _latest_offset(bootstrap, topic) == 1
    finally:
        for b in followers:
            cluster.resume(b)
    wait_until(lambda: _raw_fetch(bootstrap, topic, 1).high_watermark == 3, 30,
               "the high watermark past the records the followers now have")
    assert _raw_fetch(bootstrap, topic, 1).records


def test_a_replica_that_lost_its_disk_copies_it_back_and_rejoins(cluster_factory):
    cluster = cluster_factory()
    topic = _topic(cluster, partitions=2)
    acked = _produce(cluster, topic, [f"v-{i}" for i in range(2000)])
    victim = next(b for b in range(3) if b != _leader(cluster, topic, 0))
    cluster.terminate(victim)
    shutil.rmtree(cluster.broker(victim).data_dir)
    cluster.broker(victim).data_dir.mkdir()
    wait_until(lambda: victim not in _isr(cluster, topic, 0), 30, "the ISR without the victim")
    cluster.restart(victim)
    _wait_for_full_isr(cluster, topic, 2)
    _wait_for_identical_replicas(cluster, topic, 2)
    got = _read_all(cluster, topic, 2, acked)
    by_partition = collections.Counter(p for p, _, _ in got)
    assert sorted(v for _, _, v in got) == sorted(acked), \
        f"read per partition {dict(by_partition)}, states " \
        f"{[cluster.partition_state(topic, p) for p in range(2)]}"


def test_controlled_shutdown_moves_leadership_before_the_broker_stops(cluster_factory):
    cluster = cluster_factory()
    topic = _topic(cluster, partitions=3)
    first = _produce(cluster, topic, [f"before-{i}" for i in range(300)])
    victim = _leader(cluster, topic, 0)
    led = [p for p in range(3) if _leader(cluster, topic, p) == victim]
    mark = cluster.log_marks()[victim]
    assert cluster.terminate(victim) == 0
    cluster.wait_for_log(victim, "controlled shutdown: leadership moved off broker", since=mark)
    for p in led:
        state = cluster.partition_state(topic, p)
        assert state["leader"] not in (victim, -1) and victim not in state["isr"], state
    second = _produce(cluster, topic, [f"after-{i}" for i in range(300)])
    cluster.restart(victim)
    _wait_for_full_isr(cluster, topic, 3)
    got = _read_all(cluster, topic, 3, {**first, **second})
    assert sorted(v for _, _, v in got) == sorted([*first, *second])


def _isrs_seen_by(cluster: Cluster, broker_id: int, topic: str) -> dict[int, set[int]] | None:
    """{partition: ISR} of ``topic`` in broker ``broker_id``'s Metadata answer
    (None: it did not answer)."""
    try:
        with SimpleClient(cluster.broker(broker_id).bootstrap, timeout=10) as c:
            r = c.call(METADATA, MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                allow_auto_topic_creation=False))
    except (ClientError, OSError):
        return None
    return {p.partition_index: set(p.isr_nodes) for t in r.topics if t.name == topic
            for p in t.partitions}


@pytest.mark.parametrize("stopping", ["the controller", "another broker"])
def test_a_stopping_broker_never_rejoins_an_isr_it_left(cluster_factory, stopping):
    # Stop 44/45: a stopping broker kept following the partitions moved off
    # it, caught up and was taken back into their ISRs before it exited, so
    # acks=all writes waited on a broker about to go. Once out of an ISR, it
    # stays out, from the SIGTERM until it has gone (the other brokers no
    # longer list it), while acks=all records keep coming; none is lost.
    # Asking another broker, the controller's answer comes late (a slow
    # network, a busy controller): the moves are made, and the stopping broker
    # has that long to follow the new leaders before it hears it may stop
    # (the fix reverted, that case fails every time; the controller asks
    # itself, with no answer to delay, and rejoins only when a race goes so).
    fault_ports = {b: free_port() for b in range(3)}
    cluster = cluster_factory(broker_overrides={
        b: {"samsa.testing.faults.enable": "true", "samsa.testing.faults.port": str(port)}
        for b, port in fault_ports.items()})
    partitions = 3
    topic = _topic(cluster, partitions=partitions)
    controller = cluster.controller_id()
    victim = controller if stopping == "the controller" else (controller + 1) % 3
    if victim != controller:
        FaultControl("127.0.0.1", fault_ports[controller]).delay(3000, api=CONTROLLED_SHUTDOWN)
    observer = next(b for b in range(3) if b != victim)
    producer = AckedWriter(cluster.bootstrap, topic)
    try:
        wait_until(lambda: len(producer.acked) >= 200, 30, "records acked before the stop")
        mark = cluster.log_marks()[victim]
        exit_code: list[int | None] = []
        terminating = threading.Thread(target=lambda: exit_code.append(cluster.terminate(victim)))
        terminating.start()
        seen_out: set[int] = set()
        back_in: list[tuple[int, list[int]]] = []

        def observe() -> None:
            for p, isr in (_isrs_seen_by(cluster, observer, topic) or {}).items():
                if victim not in isr:
                    seen_out.add(p)
                elif p in seen_out:
                    back_in.append((p, sorted(isr)))

        def gone() -> bool:
            """Exited, no longer a broker the observer lists, and seen out of
            every ISR (the observer's watches need not fire in one order)."""
            observe()
            if terminating.is_alive() or len(seen_out) < partitions:
                return False
            md = cluster.metadata(observer)
            return md is not None and victim not in md[0]
        wait_until(gone, 60, lambda: f"broker {victim} gone, and out of every ISR of {topic} "
                                     f"(out of {sorted(seen_out)})", interval=0)
        terminating.join()
    finally:
        producer.stop()
    assert exit_code == [0]
    cluster.wait_for_log(victim, "controlled shutdown: leadership moved off broker", since=mark)
    assert not back_in, f"broker {victim} back in ISRs it had left: {back_in[:5]}"
    got = _read_all(cluster, topic, partitions, producer.acked)
    lost = set(producer.acked) - {v for _, _, v in got}
    assert not lost, f"{len(lost)} of {len(producer.acked)} acked records not read back"


def test_controlled_shutdown_answers_a_stale_epoch_and_an_unknown_broker_as_kafka(
        cluster_factory):
    # On the wire, as a stopping broker sees it: an epoch older than the
    # broker's registration is STALE_BROKER_EPOCH and moves nothing; a broker
    # id the controller does not know is BROKER_NOT_AVAILABLE, with an epoch
    # (v3) or without (v1).
    cluster = cluster_factory()
    topic = _topic(cluster, partitions=3)
    controller = cluster.controller_id()
    asking = next(b for b in range(3) if b != controller)
    epoch = cluster.zk_client().exists(f"/brokers/ids/{asking}").czxid
    states = [cluster.partition_state(topic, p) for p in range(3)]
    assert any(s["leader"] == asking for s in states), states  # something it could move
    with SimpleClient(cluster.broker(controller).bootstrap) as c:
        def ask(broker_id: int, broker_epoch: int, version: int) -> tuple[int, list]:
            r = c.call(CONTROLLED_SHUTDOWN, ControlledShutdownRequest(
                broker_id=broker_id, broker_epoch=broker_epoch), highest=version)
            return r.error_code, r.remaining_partitions
        assert ask(asking, epoch - 1, 3) == (ErrorCode.STALE_BROKER_EPOCH, [])
        assert [cluster.partition_state(topic, p) for p in range(3)] == states, "nothing moved"
        assert ask(42, epoch, 3) == (ErrorCode.BROKER_NOT_AVAILABLE, [])
        assert ask(42, -1, 1) == (ErrorCode.BROKER_NOT_AVAILABLE, [])
    # (the broker still serves, and its own stop asks with the epoch it holds)
    mark = cluster.log_marks()[asking]
    assert cluster.terminate(asking) == 0
    cluster.wait_for_log(asking, "controlled shutdown: leadership moved off broker", since=mark)


def _wait_for_leader(cluster: Cluster, topic: str, partition: int, wanted: int,
                     timeout: float = 30) -> None:
    wait_until(lambda: _leader(cluster, topic, partition) == wanted, timeout,
               f"broker {wanted} leading {topic}-{partition}")


def _lose_and_regain_preferred(cluster: Cluster, topic: str) -> int:
    """Kill partition 0's preferred leader, let another replica lead, bring it
    back in sync; returns the preferred replica."""
    preferred = json.loads(cluster.zk_client().get(f"/brokers/topics/{topic}")[0]
                           )["partitions"]["0"][0]
    _wait_for_leader(cluster, topic, 0, preferred)
    cluster.kill(preferred)
    wait_until(lambda: _leader(cluster, topic, 0) not in (-1, preferred), 30, "another leader")
    cluster.restart(preferred)
    _wait_for_full_isr(cluster, topic, 1)
    return preferred


def test_elect_leaders_gives_leadership_back_to_the_preferred_replica(cluster_factory):
    cluster = cluster_factory(overrides={"auto.leader.rebalance.enable": "false"})
    topic = _topic(cluster, partitions=1)
    preferred = _lose_and_regain_preferred(cluster, topic)
    assert _leader(cluster, topic, 0) != preferred  # nothing moves it back by itself
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})

    def elect():
        result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(30)
        error = result[TopicPartition(topic, 0)]
        # Its leader can take the restarted replica back into the ISR before
        # the controller has seen it register: until then the controller
        # answers that the preferred leader is not available, as Kafka does.
        if error is not None and error.code() == KafkaError.PREFERRED_LEADER_NOT_AVAILABLE:
            return None
        return result
    assert wait_until(elect, 30, "the preferred replica elected") == {TopicPartition(topic, 0): None}
    assert _leader(cluster, topic, 0) == preferred
    again = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)]).result(30)
    assert again[TopicPartition(topic, 0)].code() == KafkaError.ELECTION_NOT_NEEDED
    _produce(cluster, topic, ["after election"])


def test_the_controller_rebalances_leadership_by_itself(cluster_factory):
    cluster = cluster_factory(overrides={"leader.imbalance.check.interval.seconds": "2"})
    topic = _topic(cluster, partitions=1)
    preferred = _lose_and_regain_preferred(cluster, topic)
    _wait_for_leader(cluster, topic, 0, preferred)
