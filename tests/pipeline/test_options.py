"""Option parsing and range splitting of the samsa data source: plain functions, no Spark, no broker."""

from __future__ import annotations

import pytest

from samsa.pipeline.options import (
    Assign, Earliest, GlobalTimestamp, Latest, SamsaOptionError, SpecificOffsets, SpecificTimestamps,
    Subscribe, SubscribePattern, offsets_to_json, parse_read_options, parse_write_options,
)
from samsa.pipeline.ranges import OffsetRange, split_ranges

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def read(**opts):
    return parse_read_options({**BOOT, **opts})


def test_defaults_and_case_insensitive_keys():
    o = parse_read_options({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "Subscribe": " a, b ,,a",
                            "INCLUDEHEADERS": "TRUE", "kafka.Isolation.Level": "read_committed"})
    assert o.strategy == Subscribe(("a", "b"))
    assert o.starting == Earliest() and o.ending == Latest()
    assert o.include_headers and o.fail_on_data_loss
    assert o.client_options == {"bootstrap.servers": "h:1", "isolation.level": "read_committed"}


def test_strategies():
    assert read(assign='{"t":[0,2],"u":[1]}').strategy == Assign((("t", 0), ("t", 2), ("u", 1)))
    assert read(subscribePattern=" t.* ").strategy == SubscribePattern("t.*")


@pytest.mark.parametrize("opts, message", [
    ({}, "One of the following options must be specified for Kafka source: subscribe, subscribepattern, assign"),
    ({"subscribe": "a", "assign": '{"a":[0]}'}, "Only one of the following options can be specified"),
    ({"subscribe": " , "}, "No topics to subscribe to as specified value for option 'subscribe' is ' , '"),
    ({"subscribePattern": " "}, "Pattern to subscribe is empty"),
    ({"subscribePattern": "(["}, "option 'subscribePattern'"),
    ({"assign": "t"}, "No topicpartitions to assign as specified value for option 'assign' is 't'"),
    ({"assign": '{"t":0}'}, "option 'assign': Expected e.g. {\"topicA\":[0,1],\"topicB\":[0,1]}, got {\"t\":0}"),
])
def test_strategy_errors(opts, message):
    with pytest.raises(SamsaOptionError) as e:
        read(**opts)
    assert message in str(e.value)


def test_offsets_json_and_sentinels():
    o = read(subscribe="t", startingOffsets='{"t":{"0":5,"1":-2}}', endingOffsets='{"t":{"0":9,"1":-1}}')
    assert o.starting == SpecificOffsets({("t", 0): 5, ("t", 1): -2})
    assert o.ending == SpecificOffsets({("t", 0): 9, ("t", 1): -1})
    assert read(subscribe="t", startingOffsets="EARLIEST", endingOffsets="Latest").starting == Earliest()
    assert offsets_to_json({("b", 1): 3, ("a", 0): -2, ("b", 0): 7}) == '{"a":{"0":-2},"b":{"0":7,"1":3}}'


@pytest.mark.parametrize("opts, message", [
    ({"startingOffsets": "latest"}, "starting offset can't be latest for batch queries on Kafka"),
    ({"startingOffsets": '{"t":{"0":-1}}'}, "startingOffsets for t-0 can't be latest for batch queries on Kafka"),
    ({"endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries on Kafka"),
    ({"endingOffsets": '{"t":{"1":-2}}'}, "ending offset for t-1 can't be earliest for batch queries on Kafka"),
    ({"startingOffsets": "{oops"}, "option 'startingOffsets': Expected e.g. {\"topicA\":{\"0\":23,\"1\":-1},\"topicB\":{\"0\":-2}}, got {oops"),
    ({"startingOffsets": '{"t":{"0":1}}', "endingOffsets": '{"t":{"1":5}}'},
     "The specified start offset and end offset should have the same topic-partitions. "
     "Topic-partitions for start offset: Set(t-0), topic-partitions for end offset: Set(t-1)."),
    ({"startingOffsets": '{"t":{"0":7}}', "endingOffsets": '{"t":{"0":5}}'},
     "The specified start offset 7 is greater than the end offset 5 for topic t partition 0."),
    ({"startingTimestamp": "yesterday"}, "option 'startingTimestamp': Expected a single long value, got yesterday"),
    ({"startingOffsetsByTimestampStrategy": "closest"}, "option 'startingOffsetsByTimestampStrategy'"),
    ({"minPartitions": "0"}, "minPartitions must be positive"),
    ({"minPartitions": "many"}, "option 'minPartitions'"),
    ({"failOnDataLoss": "maybe"}, "option 'failOnDataLoss'"),
    ({"includeHeaders": "yes"}, "option 'includeHeaders'"),
    ({"maxOffsetsPerTrigger": "5", "minOffsetsPerTrigger": "6"},
     "The value of minOffsetPerTrigger(6) is higher than the maxOffsetsPerTrigger(5)."),
])
def test_offset_and_value_errors(opts, message):
    with pytest.raises(SamsaOptionError) as e:
        read(subscribe="t", **opts)
    assert message in str(e.value)


def test_timestamp_precedence():
    # A global timestamp wins over per-partition timestamps, which win over offsets (Spark's order).
    o = read(subscribe="t", startingTimestamp="1000", startingOffsetsByTimestamp='{"t":{"0":5}}',
             startingOffsets="earliest", endingOffsetsByTimestamp='{"t":{"0":9}}',
             startingOffsetsByTimestampStrategy="LATEST")
    assert o.starting == GlobalTimestamp(1000, "latest")
    assert o.ending == SpecificTimestamps({("t", 0): 9}, "latest")


@pytest.mark.parametrize("key, why", [
    ("group.id", "user-specified consumer groups are not used to track offsets"),
    ("auto.offset.reset", "Kafka option 'auto.offset.reset' is not supported.\nInstead set the source option 'startingoffsets'"),
    ("key.deserializer", "keys are deserialized as byte arrays with ByteArrayDeserializer"),
    ("value.deserializer", "values are deserialized as byte arrays with ByteArrayDeserializer"),
    ("enable.auto.commit", "Kafka option 'enable.auto.commit' is not supported"),
    ("interceptor.classes", "Kafka option 'interceptor.classes' is not supported"),
])
def test_rejected_consumer_options(key, why):
    with pytest.raises(SamsaOptionError) as e:
        read(subscribe="t", **{f"kafka.{key}": "x"})
    assert why in str(e.value)


def test_bootstrap_servers_required():
    with pytest.raises(SamsaOptionError, match="Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"):
        parse_read_options({"subscribe": "t"})
    with pytest.raises(SamsaOptionError, match="Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer"):
        parse_write_options({"topic": "t"})


def test_write_options():
    o = parse_write_options({**BOOT, "Topic": " out ", "kafka.acks": "all"})
    assert o.topic == "out" and o.client_options["acks"] == "all"
    with pytest.raises(SamsaOptionError, match="keys are serialized with ByteArraySerializer"):
        parse_write_options({**BOOT, "kafka.key.serializer": "x"})


def test_split_ranges_like_spark():
    big, small = OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 10, 12)
    assert split_ranges([big, small], None) == [big, small]
    assert split_ranges([big, small, OffsetRange("t", 2, 5, 5)], 2) == [big, small]   # empty dropped
    parts = split_ranges([big, small], 5)
    # The small range stays whole; the big one takes the other four parts, the last the rounding.
    assert parts == [OffsetRange("t", 0, 0, 25), OffsetRange("t", 0, 25, 50), OffsetRange("t", 0, 50, 75),
                     OffsetRange("t", 0, 75, 100), small]
    three = split_ranges([OffsetRange("t", 0, 0, 10)], 3)
    assert [(r.start, r.end) for r in three] == [(0, 3), (3, 6), (6, 10)]
    # More parts than records: never an empty range.
    assert [(r.start, r.end) for r in split_ranges([OffsetRange("t", 0, 0, 2)], 5)] == [(0, 1), (1, 2)]


def test_executor_fetch_defaults_yield_to_kafka_options():
    from samsa.pipeline.client import consumer_config

    opts = read(subscribe="t")
    long_range = consumer_config(opts, "executor", range_records=50_000)
    assert long_range["fetch.queue.backoff.ms"] == "10"
    assert long_range["max.partition.fetch.bytes"] == str(10 * 1024 * 1024)
    short_range = consumer_config(opts, "executor", range_records=50)
    assert "max.partition.fetch.bytes" not in short_range         # librdkafka's 1 MB
    driver = consumer_config(opts, "driver")
    assert "fetch.queue.backoff.ms" not in driver and "max.partition.fetch.bytes" not in driver
    own = read(subscribe="t", **{"kafka.fetch.queue.backoff.ms": "100", "kafka.max.partition.fetch.bytes": "2000000"})
    conf = consumer_config(own, "executor", range_records=50_000)
    assert (conf["fetch.queue.backoff.ms"], conf["max.partition.fetch.bytes"]) == ("100", "2000000")
