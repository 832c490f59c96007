"""Topic names are checked whole, on every path that creates or names a
topic, as Kafka checks them (issue 15, item 2). A trailing newline used to
pass (the pattern was anchored with ``$``) and became a directory name."""
from __future__ import annotations

import os

import pytest

from samsa.client.blocking import SimpleClient
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (CreatePartitionsRequest, CreateTopicsRequest,
                               DescribeConfigsRequest, MetadataRequest, ProduceRequest)
from samsa.protocol.topic_name import topic_name_error

ILLEGAL = ["abc\n", "abc\r", "a b", "tab\there", "ünïcode", ".", "..", "a" * 250, "",
           "slash/dir", "nul\x00"]


def _create(client, name, partitions=1):
    resp = client.call(19, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=10000, validate_only=False))
    return resp.topics[0]


def _dirs(broker):
    return sorted(os.listdir(broker.data_dir))


@pytest.mark.parametrize("name", ["abc\n", "x" * 249 + "\n"])
def test_unit_a_final_newline_is_illegal(name):
    assert topic_name_error(name) is not None


def test_unit_legal_names():
    for name in ["a", "A-b.c_d", "x" * 249, "__consumer_offsets", "..."]:
        assert topic_name_error(name) is None, name


def test_metadata_does_not_auto_create_illegal_names(broker):
    with SimpleClient(broker.bootstrap) as client:
        before = _dirs(broker)
        resp = client.call(3, MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in ILLEGAL if n],
            allow_auto_topic_creation=True))
        assert {t.name: t.error_code for t in resp.topics} == {
            n: ErrorCode.INVALID_TOPIC_EXCEPTION for n in ILLEGAL if n}
        assert _dirs(broker) == before
    assert "abc\n" not in broker.log_path.read_text()


def test_create_topics_refuses_illegal_names(broker):
    with SimpleClient(broker.bootstrap) as client:
        for name in ILLEGAL:
            result = _create(client, name)
            assert result.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION, repr(name)
        assert _create(client, "x" * 249).error_code == ErrorCode.NONE


def test_dot_and_underscore_collide(broker):
    with SimpleClient(broker.bootstrap) as client:
        assert _create(client, "metrics.cpu").error_code == ErrorCode.NONE
        clash = _create(client, "metrics_cpu")
        assert clash.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert "metrics.cpu" in clash.error_message


def test_produce_and_configs_name_illegal_topics(broker):
    with SimpleClient(broker.bootstrap) as client:
        # v12: topics by name (v13 names them by id)
        produce = client._call(0, 12, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
            ProduceRequest.TopicProduceData(name="abc\n", partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=None)])]))
        assert produce.responses[0].partition_responses[0].error_code == \
            ErrorCode.INVALID_TOPIC_EXCEPTION
        described = client.call(32, DescribeConfigsRequest(resources=[
            DescribeConfigsRequest.DescribeConfigsResource(resource_type=2,
                                                           resource_name="abc\n",
                                                           configuration_keys=None)]))
        assert described.results[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        grown = client.call(37, CreatePartitionsRequest(topics=[
            CreatePartitionsRequest.CreatePartitionsTopic(name="abc\n", count=2,
                                                          assignments=None)],
            timeout_ms=5000, validate_only=False))
        assert grown.results[0].error_code in (ErrorCode.INVALID_TOPIC_EXCEPTION,
                                               ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert _dirs(broker) == sorted(d for d in _dirs(broker) if "\n" not in d)


def test_a_directory_with_an_illegal_name_is_skipped_at_start(broker):
    (broker.data_dir / "abc\n-0").mkdir()
    (broker.data_dir / "bad name-0").mkdir()
    broker.restart()
    with SimpleClient(broker.bootstrap) as client:
        resp = client.call(3, MetadataRequest(topics=None, allow_auto_topic_creation=False))
        assert all(topic_name_error(t.name) is None for t in resp.topics)
    assert "ignoring directory" in broker.log_path.read_text()
