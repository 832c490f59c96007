"""Broker behaviour no client round trip shows on its own: timestamps, DeleteRecords,
configs that survive restarts, producer ids, long-poll wake-ups, acks=0, duplicates,
pagination and size limits. Requests go through samsa's SimpleClient (the codec
itself is checked against kafka-python's and aiokafka's elsewhere)."""
from __future__ import annotations

import socket
import struct
import threading
import uuid

import pytest

from samsa.client.blocking import SimpleClient
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (CreateTopicsRequest, DeleteRecordsRequest, ElectLeadersRequest,
                               DescribeConfigsRequest, DescribeTopicPartitionsRequest,
                               FetchRequest, IncrementalAlterConfigsRequest,
                               InitProducerIdRequest, ListOffsetsRequest, MetadataRequest,
                               OffsetForLeaderEpochRequest, ProduceRequest, RequestHeader,
                               encode_request)
from samsa.protocol.records import build_batch, iter_all_records

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3


@pytest.fixture
def broker(module_broker):
    """One broker for the module (tests/conftest.py): every test here uses topics of names of
    its own; those that restart or kill it start it again."""
    return module_broker


def _topic(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def _create(client, name, partitions=1, configs=None):
    resp = client.call(19, CreateTopicsRequest(timeout_ms=5000, topics=[
        CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=1,
            configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                     for k, v in (configs or {}).items()])]))
    assert resp.topics[0].error_code == 0, resp


def _produce(client, topic, batch, partition=0, acks=-1):
    # Produce v13 names the topic by id; older versions by name: send both.
    resp = client.call(PRODUCE, ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, topic_id=_topic_id(client, topic), partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=batch)])]))
    return resp.responses[0].partition_responses[0]


def _list_offset(client, topic, timestamp, partition=0):
    resp = client.call(LIST_OFFSETS, ListOffsetsRequest(replica_id=-1, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(partition_index=partition,
                                                    timestamp=timestamp)])]))
    return resp.topics[0].partitions[0]


def _records(values, t0=None):
    return [(None, v, [], None if t0 is None else t0 + i) for i, v in enumerate(values)]


def test_list_offsets_by_timestamp_and_max_timestamp(broker):
    topic = _topic("ts")
    with SimpleClient(broker.bootstrap) as c:
        _create(c, topic)
        t0 = 1_700_000_000_000
        for i in range(10):  # ten batches of ten records, timestamps t0 .. t0+99
            batch = build_batch(_records([b"v%d" % (i * 10 + j) for j in range(10)], t0 + i * 10))
            assert _produce(c, topic, batch).error_code == 0
        assert _list_offset(c, topic, -2).offset == 0
        assert _list_offset(c, topic, -1).offset == 100
        hit = _list_offset(c, topic, t0 + 55)
        assert (hit.offset, hit.timestamp) == (55, t0 + 55)
        assert _list_offset(c, topic, t0 + 1000).offset == -1  # nothing that late
        top = _list_offset(c, topic, -3)
        assert (top.offset, top.timestamp) == (99, t0 + 99)


def test_delete_records_moves_log_start(broker):
    topic = _topic("delrec")
    with SimpleClient(broker.bootstrap) as c:
        _create(c, topic)
        assert _produce(c, topic, build_batch(_records([b"x%d" % i for i in range(20)]))).error_code == 0
        resp = c.call(21, DeleteRecordsRequest(timeout_ms=5000, topics=[
            DeleteRecordsRequest.DeleteRecordsTopic(name=topic, partitions=[
                DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=5)])]))
        part = resp.topics[0].partitions[0]
        assert part.error_code == 0 and part.low_watermark == 5
        assert _list_offset(c, topic, -2).offset == 5
        fetched = _fetch(c, topic, 0, max_wait_ms=0)
        assert fetched.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
        assert fetched.log_start_offset == 5
        beyond = c.call(21, DeleteRecordsRequest(timeout_ms=5000, topics=[
            DeleteRecordsRequest.DeleteRecordsTopic(name=topic, partitions=[
                DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=999)])]))
        assert beyond.topics[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def _describe_topic(client, topic):
    resp = client.call(32, DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name=topic,
                                                       configuration_keys=None)]))
    return {e.name: (e.value, e.config_source) for e in resp.results[0].configs}


def test_topic_configs_survive_restart(broker):
    topic = _topic("cfg")
    with SimpleClient(broker.bootstrap) as c:
        _create(c, topic)
        resp = c.call(44, IncrementalAlterConfigsRequest(resources=[
            IncrementalAlterConfigsRequest.AlterConfigsResource(
                resource_type=2, resource_name=topic, configs=[
                    IncrementalAlterConfigsRequest.AlterableConfig(
                        name="retention.ms", config_operation=0, value="123456"),
                    IncrementalAlterConfigsRequest.AlterableConfig(
                        name="cleanup.policy", config_operation=0, value="compact")])]))
        assert resp.responses[0].error_code == 0
        bad = c.call(44, IncrementalAlterConfigsRequest(resources=[
            IncrementalAlterConfigsRequest.AlterConfigsResource(
                resource_type=2, resource_name=topic, configs=[
                    IncrementalAlterConfigsRequest.AlterableConfig(
                        name="retention.ms", config_operation=0, value="soon")])]))
        assert bad.responses[0].error_code == ErrorCode.INVALID_CONFIG
    broker.restart()
    with SimpleClient(broker.bootstrap) as c:
        configs = _describe_topic(c, topic)
    assert configs["retention.ms"] == ("123456", 1)  # DYNAMIC_TOPIC_CONFIG
    assert configs["cleanup.policy"] == ("compact", 1)
    assert configs["segment.bytes"][1] != 1


def _init_pid(client):
    resp = client.call(22, InitProducerIdRequest(transactional_id=None,
                                                 transaction_timeout_ms=60000))
    assert resp.error_code == 0
    return resp.producer_id


def test_producer_ids_never_reused_across_restarts(broker):
    with SimpleClient(broker.bootstrap) as c:
        first = [_init_pid(c) for _ in range(3)]
    assert len(set(first)) == 3
    broker.kill()  # even an unclean stop must not hand out an id twice
    broker.start()
    with SimpleClient(broker.bootstrap) as c:
        after = _init_pid(c)
    assert after > max(first)


def test_idempotent_duplicate_is_acknowledged_once(broker):
    topic = _topic("idem")
    with SimpleClient(broker.bootstrap) as c:
        _create(c, topic)
        pid = _init_pid(c)
        b0 = build_batch(_records([b"a", b"b"]), producer_id=pid, producer_epoch=0, base_sequence=0)
        b1 = build_batch(_records([b"c"]), producer_id=pid, producer_epoch=0, base_sequence=2)
        assert _produce(c, topic, b0).base_offset == 0
        assert _produce(c, topic, b1).base_offset == 2
        again = _produce(c, topic, b0)  # a retry of the first batch
        assert again.error_code == 0 and again.base_offset == 0
        gap = build_batch(_records([b"z"]), producer_id=pid, producer_epoch=0, base_sequence=9)
        assert _produce(c, topic, gap).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert _list_offset(c, topic, -1).offset == 3


def _fetch(client, topic, offset, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20,
           partition_max_bytes=1 << 20):
    resp = client.call(FETCH, FetchRequest(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
        isolation_level=0, session_id=0, session_epoch=-1, topics=[
            FetchRequest.FetchTopic(topic=topic, topic_id=_topic_id(client, topic), partitions=[
                FetchRequest.FetchPartition(partition=0, fetch_offset=offset,
                                            partition_max_bytes=partition_max_bytes)])],
        forgotten_topics_data=[], rack_id=""))
    assert resp.error_code == 0
    return resp.responses[0].partitions[0]


def _topic_id(client, topic):
    resp = client.call(METADATA, MetadataRequest(allow_auto_topic_creation=False, topics=[
        MetadataRequest.MetadataRequestTopic(name=topic)]))
    return resp.topics[0].topic_id


def test_long_poll_fetch_is_woken_by_an_append(broker):
    topic = _topic("poll")
    with SimpleClient(broker.bootstrap) as setup:
        _create(setup, topic)
    result = {}
    # The fetch may wait two minutes; the client gives up after 30 s. Only an append
    # waking the fetch lets it answer in between.
    waiter = SimpleClient(broker.bootstrap, timeout=30)

    def fetch():
        try:
            result["part"] = _fetch(waiter, topic, 0, max_wait_ms=120_000)
        except Exception as e:  # reported below
            result["error"] = e

    t = threading.Thread(target=fetch)
    t.start()
    try:
        with SimpleClient(broker.bootstrap) as c:
            # Wait until the fetch is parked: the broker keeps reading it for its records.
            while t.is_alive() and not result:
                assert _produce(c, topic, build_batch(_records([b"wake up"]))).error_code == 0
                t.join(2)
        t.join(35)
    finally:
        waiter.close()
    assert "error" not in result, result.get("error")
    records = [r for _, r in iter_all_records(bytes(result["part"].records))]
    assert records[0].value == b"wake up"


def test_fetch_limits_return_whole_batches_and_at_least_one(broker):
    topic = _topic("limits")
    with SimpleClient(broker.bootstrap) as c:
        _create(c, topic)
        big = build_batch(_records([b"x" * 5000]))
        for _ in range(3):
            assert _produce(c, topic, big).error_code == 0
        one = _fetch(c, topic, 0, partition_max_bytes=100)  # smaller than one batch
        assert len(one.records) == len(big)
        two = _fetch(c, topic, 0, partition_max_bytes=2 * len(big) + 10)
        assert len(two.records) == 2 * len(big)
        mid = _fetch(c, topic, 1)  # the batch holding offset 1 starts at offset 1
        # the answer starts at the batch holding offset 1, which is the second batch
        assert [r.offset for _, r in iter_all_records(bytes(mid.records))][0] == 1


def test_a_fetch_of_many_partitions_keeps_its_byte_limit_across_the_whole_answer(broker):
    """A Fetch naming more than 500 partitions is read a slice at a time; its
    max_bytes still bounds the whole answer, which may pass it only by the
    first batch of the first partition with data (Kafka's rule), not by one
    batch per slice."""
    topic = _topic("many")
    partitions = 1200
    with SimpleClient(broker.bootstrap) as c:
        _create(c, topic, partitions=partitions)
        big = build_batch(_records([b"x" * 5000]))
        topic_id = _topic_id(c, topic)
        resp = c.call(PRODUCE, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, topic_id=topic_id, partition_data=[
                ProduceRequest.PartitionProduceData(index=p, records=big)
                for p in range(partitions)])]))
        assert all(p.error_code == 0 for p in resp.responses[0].partition_responses)
        # room for one batch and a half: the first batch whole, a second that fits
        limit = len(big) * 3 // 2
        resp = c.call(FETCH, FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=limit, isolation_level=0,
            session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                topic=topic, topic_id=topic_id, partitions=[
                    FetchRequest.FetchPartition(partition=p, fetch_offset=0,
                                                partition_max_bytes=1 << 20)
                    for p in range(partitions)])],
            forgotten_topics_data=[], rack_id=""))
        assert resp.error_code == 0
        answered = [p for t in resp.responses for p in t.partitions]
        assert len(answered) == partitions and not any(p.error_code for p in answered)
        with_records = [p.partition_index for p in answered if p.records]
        # the first partition's batch passes the limit alone; nothing else fits after it
        assert with_records == [0]


def test_acks_zero_sends_no_response(broker):
    topic = _topic("acks0")
    with SimpleClient(broker.bootstrap) as c:
        _create(c, topic)
    with socket.create_connection((broker.host, broker.port), timeout=10) as s:
        produce = ProduceRequest(acks=0, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.PartitionProduceData(index=0,
                                                    records=build_batch(_records([b"q"])))])])
        s.sendall(encode_request(RequestHeader(PRODUCE, 9, 1, "t"), produce))
        s.sendall(encode_request(RequestHeader(METADATA, 9, 2, "t"),
                                 MetadataRequest(topics=[])))
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        frame = s.recv(size, socket.MSG_WAITALL)
        assert struct.unpack_from(">i", frame)[0] == 2  # the Metadata answer comes first
    with SimpleClient(broker.bootstrap) as c:
        assert _list_offset(c, topic, -1).offset == 1  # and the record was written


def test_message_too_large_for_topic(broker):
    topic = _topic("big")
    with SimpleClient(broker.bootstrap) as c:
        _create(c, topic, configs={"max.message.bytes": "1000"})
        part = _produce(c, topic, build_batch(_records([b"y" * 2000])))
        assert part.error_code == ErrorCode.MESSAGE_TOO_LARGE
        assert _list_offset(c, topic, -1).offset == 0


def test_metadata_topic_ids_and_leader_epochs(broker):
    topic = _topic("meta")
    with SimpleClient(broker.bootstrap) as c:
        _create(c, topic, partitions=3)
        tid = _topic_id(c, topic)
        assert tid is not None and tid.int != 0
        resp = c.call(METADATA, MetadataRequest(allow_auto_topic_creation=False, topics=[
            MetadataRequest.MetadataRequestTopic(name=None, topic_id=tid)]))
        assert resp.topics[0].name == topic
        epochs = c.call(23, OffsetForLeaderEpochRequest(replica_id=-1, topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=topic, partitions=[
                OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                    partition=0, current_leader_epoch=0, leader_epoch=0)])]))
        p = epochs.topics[0].partitions[0]
        assert p.error_code == 0 and p.end_offset == 0
        fenced = c.call(23, OffsetForLeaderEpochRequest(replica_id=-1, topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=topic, partitions=[
                OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                    partition=0, current_leader_epoch=7, leader_epoch=0)])]))
        assert fenced.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_describe_topic_partitions_pages_with_a_cursor(broker):
    topic = _topic("pages")
    with SimpleClient(broker.bootstrap) as c:
        _create(c, topic, partitions=5)
        seen = []
        cursor = None
        for _ in range(10):
            resp = c.call(75, DescribeTopicPartitionsRequest(
                topics=[DescribeTopicPartitionsRequest.TopicRequest(name=topic)],
                response_partition_limit=2, cursor=cursor))
            seen += [p.partition_index for p in resp.topics[0].partitions]
            if resp.next_cursor is None:
                break
            cursor = DescribeTopicPartitionsRequest.Cursor(
                topic_name=resp.next_cursor.topic_name,
                partition_index=resp.next_cursor.partition_index)
    assert seen == [0, 1, 2, 3, 4]


def test_internal_offsets_topic_cannot_be_deleted(broker):
    from samsa.protocol.messages import DeleteTopicsRequest
    with SimpleClient(broker.bootstrap) as c:
        resp = c.call(20, DeleteTopicsRequest(timeout_ms=5000, topics=[
            DeleteTopicsRequest.DeleteTopicState(name="__consumer_offsets")],
            topic_names=["__consumer_offsets"]))
        assert resp.responses[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        meta = c.call(METADATA, MetadataRequest(allow_auto_topic_creation=False, topics=[
            MetadataRequest.MetadataRequestTopic(name="__consumer_offsets")]))
        assert meta.topics[0].error_code == 0 and meta.topics[0].is_internal


def test_absurd_partition_counts_are_refused(broker):
    topic = _topic("huge")
    with SimpleClient(broker.bootstrap) as c:
        resp = c.call(19, CreateTopicsRequest(timeout_ms=5000, topics=[
            CreateTopicsRequest.CreatableTopic(name=topic, num_partitions=2**31 - 1,
                                               replication_factor=1)]))
        assert resp.topics[0].error_code == ErrorCode.INVALID_PARTITIONS
        _create(c, topic)
        from samsa.protocol.messages import CreatePartitionsRequest
        grow = c.call(37, CreatePartitionsRequest(timeout_ms=5000, validate_only=False, topics=[
            CreatePartitionsRequest.CreatePartitionsTopic(name=topic, count=2**31 - 1,
                                                          assignments=None)]))
        assert grow.results[0].error_code == ErrorCode.INVALID_PARTITIONS
        assert len(c.call(METADATA, MetadataRequest(allow_auto_topic_creation=False, topics=[
            MetadataRequest.MetadataRequestTopic(name=topic)])).topics[0].partitions) == 1


def test_one_broker_answers_the_controller_admin_apis(broker):
    """The embedded broker is the controller Metadata names: ElectLeaders and
    the partition reassignment APIs get a one-broker Kafka's answers, not
    NOT_CONTROLLER (kafka-python's admin client sends them to the controller)."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import (ElectionNotNeededError, InvalidReplicationAssignmentError,
                              NoReassignmentInProgressError, UnknownTopicOrPartitionError)

    topic = f"ctl-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=20000)
    try:
        admin.create_topics([NewTopic(topic, 2, 1)])
        # preferred election: the only replica leads already
        resp = admin.elect_leaders(0, {topic: [0, 1, 9]}, raise_errors=False)
        assert resp.error_code == 0
        got = {(r.topic, p.partition_id): (p.error_code, p.error_message)
               for r in resp.replica_election_results for p in r.partition_result}
        assert {tp: e for tp, (e, _) in got.items()} == {
            (topic, 0): ElectionNotNeededError.errno, (topic, 1): ElectionNotNeededError.errno,
            (topic, 9): UnknownTopicOrPartitionError.errno}
        assert all(m for _, m in got.values())
        # unclean: the leader is alive, nothing to do either
        resp = admin.elect_leaders(1, {topic: [0]}, raise_errors=False)
        assert [p.error_code for r in resp.replica_election_results
                for p in r.partition_result] == [ElectionNotNeededError.errno]
        # kafka-python names every partition itself: each is answered
        resp = admin.elect_leaders(0, None, raise_errors=False)
        codes = {(r.topic, p.partition_id): p.error_code
                 for r in resp.replica_election_results for p in r.partition_result}
        assert {(topic, 0), (topic, 1), ("__consumer_offsets", 0)} <= set(codes)
        assert set(codes.values()) == {ElectionNotNeededError.errno}
        # no partitions named (null): only those acted on are answered, and none was
        with SimpleClient(broker.bootstrap) as c:
            resp = c.call(43, ElectLeadersRequest(election_type=0, topic_partitions=None,
                                                  timeout_ms=10000))
        assert (resp.error_code, resp.replica_election_results) == (0, [])

        assert admin.list_partition_reassignments() == {}
        assert admin.list_partition_reassignments({topic: [0]}) == {}
        results = admin.alter_partition_reassignments({
            TopicPartition(topic, 0): [0],  # where it is: nothing to move
            TopicPartition(topic, 1): [0, 7],  # no broker 7
            TopicPartition(topic, 5): [0],  # no such partition
        })
        assert results == {TopicPartition(topic, 0): None,
                           TopicPartition(topic, 1): InvalidReplicationAssignmentError,
                           TopicPartition(topic, 5): UnknownTopicOrPartitionError}
        assert admin.alter_partition_reassignments({TopicPartition(topic, 0): None}) == {
            TopicPartition(topic, 0): NoReassignmentInProgressError}
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()
