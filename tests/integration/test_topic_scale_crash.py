"""A topic of many partitions, acknowledged as created, survives a kill -9 whole.

Creating a topic writes its partitions' files in one durable batch (storage/
checkpoints.py durable_batch): the create must not be answered before every
partition's files are in place, so a broker killed right after the answer comes
back with every partition, its topic id and its leader epoch.

A stop closes every log in one durable batch too (storage/manager.py shutdown):
records acknowledged before a SIGTERM are all there after the restart, and the
restarted broker, killed -9 right after its next acks, comes back with those as
well. A restarted broker reads each partition's directory at its first use or in
a background pass (storage/lazy_log.py): records read and offsets given right
after a restart, and a kill -9 during that pass, show the same records. The
restart after a SIGTERM recovers nothing, and idempotent producers' state
(their duplicates, their sequence gaps) comes back with the records."""
from __future__ import annotations

import os

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 2000


def test_many_partitions_created_then_killed_come_back_whole(broker_factory):
    broker = broker_factory(startup_timeout=120)
    topic = "scale-crash"
    _create(broker.bootstrap, topic, PARTITIONS, timeout=240)
    broker.kill()

    dirs = [broker.data_dir / f"{topic}-{p}" for p in range(PARTITIONS)]
    missing = [d.name for d in dirs
               if not (d / "partition.metadata").is_file()
               or not (d / "leader-epoch-checkpoint").is_file()]
    assert not missing, f"{len(missing)} partitions lack their files, first {missing[:5]}"
    ids = {(d / "partition.metadata").read_text() for d in dirs}
    assert len(ids) == 1, "every partition names the same topic id"
    assert not [f for d in dirs for f in os.listdir(d) if f.endswith(".tmp")]

    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def all_led():
        md = admin.list_topics(topic, timeout=30).topics[topic]
        return len(md.partitions) == PARTITIONS and all(
            p.leader >= 0 and p.error is None for p in md.partitions.values())
    wait_until(all_led, 120, f"all {PARTITIONS} partitions led after the restart")

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all"})
    delivered: list[int] = []
    for p in (0, PARTITIONS // 2, PARTITIONS - 1):
        producer.produce(topic, b"after-crash", partition=p,
                         on_delivery=lambda err, msg: delivered.append(msg.partition())
                         if err is None else None)
    assert producer.flush(60) == 0
    assert sorted(delivered) == [0, PARTITIONS // 2, PARTITIONS - 1]


def _create(bootstrap, topic, partitions, timeout=120):
    """``topic`` of ``partitions`` partitions on the one broker, its creation acknowledged."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=timeout,
                                   request_timeout=timeout).values():
        fut.result(timeout + 20)


def _produce_one_each(bootstrap, topic, partitions, value, offset):
    """One record to every partition; each must be acked at ``offset``."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    acked = {}
    for p in range(partitions):
        producer.produce(topic, value, partition=p,
                         on_delivery=lambda err, msg: acked.__setitem__(msg.partition(), msg.offset())
                         if err is None else None)
        producer.poll(0)
    assert producer.flush(120) == 0
    assert acked == dict.fromkeys(range(partitions), offset)


def _ends(bootstrap, topic, partitions):
    """Each partition's end offset, or None while the restarted broker cannot say yet."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    specs = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    try:
        result = admin.list_offsets(specs, request_timeout=60)
        return {tp.partition: fut.result(60).offset for tp, fut in result.items()}
    except KafkaException:
        return None


def _values(bootstrap, topic, partitions, count):
    """The first ``count`` values of each of ``partitions``, read from offset 0."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "scale-reader",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        got: dict[int, list[bytes]] = {p: [] for p in partitions}

        def all_read():
            for msg in consumer.consume(len(partitions) * count, timeout=0.2):
                assert msg.error() is None, msg.error()
                got[msg.partition()].append(msg.value())
            return all(len(v) >= count for v in got.values())
        wait_until(all_read, 60, f"{count} records from each of {partitions}")
        return {p: v[:count] for p, v in got.items()}
    finally:
        consumer.close()


def test_records_acked_before_a_stop_of_many_partitions_survive_it_and_a_crash(broker_factory):
    """Whether a partition's log is loaded at its first use after the restart or
    by the broker's background pass (storage/lazy_log.py), the records, and the
    offsets new ones get, are the same; a kill -9 while the logs load loses nothing."""
    partitions = 600   # the stop's batch uses syncfs from 256 files
    broker = broker_factory(startup_timeout=120)
    topic = "scale-stop"
    _create(broker.bootstrap, topic, partitions)
    _produce_one_each(broker.bootstrap, topic, partitions, b"before-stop", 0)
    assert broker.stop(timeout=120) == 0
    assert (broker.data_dir / ".kafka_cleanshutdown").is_file()

    broker.start()
    # the first uses of these partitions since the restart: old records read, new ones appended
    last = (partitions - 1, partitions // 2)
    assert _values(broker.bootstrap, topic, last, 1) == dict.fromkeys(last, [b"before-stop"])
    _produce_one_each(broker.bootstrap, topic, partitions, b"before-kill", 1)
    broker.kill()

    broker.start()
    wait_until(lambda: _ends(broker.bootstrap, topic, partitions) == dict.fromkeys(
        range(partitions), 2), 120, "every record acked before the kill -9 is there")
    _produce_one_each(broker.bootstrap, topic, partitions, b"after-kill", 2)
    assert broker.stop(timeout=120) == 0

    broker.start()
    broker.kill()   # as soon as it serves: while its logs load in the background
    broker.start()
    wait_until(lambda: _ends(broker.bootstrap, topic, partitions) == dict.fromkeys(
        range(partitions), 3), 120, "every record acked before the kill -9 is there")
    assert _values(broker.bootstrap, topic, (0, partitions - 1), 3) == dict.fromkeys(
        (0, partitions - 1), [b"before-stop", b"before-kill", b"after-kill"])


def _idempotent_produce(client, topic, topic_id, partition, pid, seq, values):
    """One batch of ``values`` from producer ``pid`` at sequence ``seq``: (error, base offset)."""
    from samsa.protocol.messages import ProduceRequest
    from samsa.protocol.records import build_batch
    batch = build_batch([(None, v, [], None) for v in values], producer_id=pid,
                        producer_epoch=0, base_sequence=seq)
    resp = client.call(0, ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, topic_id=topic_id, partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=batch)])]))
    answer = resp.responses[0].partition_responses[0]
    return answer.error_code, answer.base_offset


def test_a_restart_after_sigterm_recovers_nothing_and_has_every_record_and_producer(
        broker_factory):
    """What a clean stop of many partitions leaves is all the next start needs: it
    runs no recovery (the clean-shutdown marker, every recovery point at its log
    end), reads back every record, and an idempotent producer's state is kept (a
    retry is answered as a duplicate, a sequence gap refused; without the state
    both would be appended). Partitions no idempotent producer wrote to have no
    producers after the restart either: a new one appends from sequence 0."""
    from samsa.client.blocking import SimpleClient
    from samsa.protocol.errors import ErrorCode
    from samsa.protocol.messages import InitProducerIdRequest, MetadataRequest
    from samsa.storage.checkpoints import read_offset_checkpoint

    partitions = 300   # the stop's batch uses syncfs from 256 files
    broker = broker_factory(startup_timeout=120)
    topic = "clean-stop"
    _create(broker.bootstrap, topic, partitions)
    _produce_one_each(broker.bootstrap, topic, partitions, b"plain", 0)
    idem = (0, partitions - 1)
    with SimpleClient(broker.bootstrap) as c:
        topic_id = c.call(3, MetadataRequest(allow_auto_topic_creation=False, topics=[
            MetadataRequest.MetadataRequestTopic(name=topic)])).topics[0].topic_id
        init = c.call(22, InitProducerIdRequest(transactional_id=None,
                                                transaction_timeout_ms=60000))
        assert init.error_code == 0
        pid = init.producer_id
        for p in idem:
            assert _idempotent_produce(c, topic, topic_id, p, pid, 0, [b"i0", b"i1"]) == (0, 1)
    logged_before = broker.log_path.stat().st_size
    assert broker.stop(timeout=120) == 0

    assert (broker.data_dir / ".kafka_cleanshutdown").is_file()
    points = read_offset_checkpoint(str(broker.data_dir / "recovery-point-offset-checkpoint"))
    assert {p: points.get((topic, p)) for p in range(partitions)} == {
        p: 3 if p in idem else 1 for p in range(partitions)}

    broker.start()
    with SimpleClient(broker.bootstrap) as c:
        for p in idem:
            # the retry of the batch acked before the stop: its offsets, nothing appended
            assert _idempotent_produce(c, topic, topic_id, p, pid, 0, [b"i0", b"i1"]) == (0, 1)
            assert _idempotent_produce(c, topic, topic_id, p, pid, 7, [b"gap"])[0] \
                == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            assert _idempotent_produce(c, topic, topic_id, p, pid, 2, [b"i2"]) == (0, 3)
        # a partition only plain producers wrote to knows no producer: any sequence starts it
        assert _idempotent_produce(c, topic, topic_id, 1, pid, 5, [b"new"]) == (0, 1)
    expected = {p: 4 if p in idem else (2 if p == 1 else 1) for p in range(partitions)}
    wait_until(lambda: _ends(broker.bootstrap, topic, partitions) == expected, 120,
               "every partition's records are there")
    assert _values(broker.bootstrap, topic, range(partitions), 1) == dict.fromkeys(
        range(partitions), [b"plain"])
    assert _values(broker.bootstrap, topic, idem, 4) == dict.fromkeys(
        idem, [b"plain", b"i0", b"i1", b"i2"])
    with open(broker.log_path, errors="replace") as f:
        f.seek(logged_before)
        restart_log = f.read()
    assert "not shut down cleanly" not in restart_log
    assert "not at its recovery point" not in restart_log
