"""An admin client's pipelined requests on one connection take effect in the
order it sent them, as Kafka, reading one request of a connection at a time,
applies them: a topic created is there for the CreatePartitions, config
changes and Describe/Metadata requests sent right behind it, and the last of
several config changes is the one that stays.

librdkafka (confluent-kafka's AdminClient) pipelines its admin requests to
the controller: ``create_topics`` then ``create_partitions`` without waiting
on the first future go out back to back. samsa ran each admin write on a
worker thread of its own, so they raced, and a Describe (answered at once)
read what was there before the writes."""
from __future__ import annotations

import asyncio
import uuid

from samsa.client.aio import KafkaConnection
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (CreatePartitionsRequest, CreateTopicsRequest,
                                     DescribeConfigsRequest, IncrementalAlterConfigsRequest,
                                     MetadataRequest)
from samsa.protocol.model import ApiKey

TOPIC_RESOURCE = 2
SET = 0
CHANGES = 8  # retention.ms set this many times, pipelined


async def _pipeline(port: int, topic: str) -> tuple:
    conn = await KafkaConnection.connect("127.0.0.1", port, client_id="pipelined-admin")
    try:
        create = conn.call(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=topic, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=30000, validate_only=False), api_key=ApiKey.CREATE_TOPICS)
        grow = conn.call(CreatePartitionsRequest(topics=[
            CreatePartitionsRequest.CreatePartitionsTopic(name=topic, count=3, assignments=None)],
            timeout_ms=30000, validate_only=False), api_key=ApiKey.CREATE_PARTITIONS)
        R = IncrementalAlterConfigsRequest
        alters = [conn.call(R(resources=[R.AlterConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name=topic, configs=[R.AlterableConfig(
                name="retention.ms", config_operation=SET, value=str(60000 + i))])],
            validate_only=False), api_key=ApiKey.INCREMENTAL_ALTER_CONFIGS)
            for i in range(CHANGES)]
        describe = conn.call(DescribeConfigsRequest(resources=[
            DescribeConfigsRequest.DescribeConfigsResource(
                resource_type=TOPIC_RESOURCE, resource_name=topic,
                configuration_keys=["retention.ms"])],
            include_synonyms=False, include_documentation=False),
            api_key=ApiKey.DESCRIBE_CONFIGS)
        metadata = conn.call(MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
            allow_auto_topic_creation=False), api_key=ApiKey.METADATA)
        # gather starts each call in this order: the frames go out back to back
        return tuple(await asyncio.gather(create, grow, *alters, describe, metadata))
    finally:
        await conn.close()


def test_pipelined_admin_requests_take_effect_in_the_order_sent(module_broker):
    topic = f"admin-order-{uuid.uuid4().hex[:8]}"
    created, grown, *answers = asyncio.run(_pipeline(module_broker.port, topic))
    *altered, described, metadata = answers
    assert created.topics[0].error_code == ErrorCode.NONE, created
    assert grown.results[0].error_code == ErrorCode.NONE, grown
    assert [a.responses[0].error_code for a in altered] == [ErrorCode.NONE] * CHANGES
    result = described.results[0]
    assert result.error_code == ErrorCode.NONE, described
    assert [(c.name, c.value) for c in result.configs] == \
        [("retention.ms", str(60000 + CHANGES - 1))]
    (t,) = metadata.topics
    assert t.error_code == ErrorCode.NONE, metadata
    assert sorted(p.partition_index for p in t.partitions) == [0, 1, 2]
