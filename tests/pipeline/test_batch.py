"""Batch read and write through ``format("samsa")``: real Spark (local[2]) against a real samsa broker.

Every comparison is against what a plain confluent-kafka client writes or reads on the same broker.
"""

from __future__ import annotations

import json
import time

import pyarrow as pa
import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka import TopicPartition

from samsa.pipeline import client
from samsa.pipeline.arrow import ARROW_SCHEMA, ARROW_SCHEMA_WITH_HEADERS
from samsa.pipeline.options import parse_read_options
from samsa.pipeline.ranges import OffsetRange
from tests.support.kafka_wire import free_port

from .conftest import consume_all, create_topic, produce, spark_rows

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def broker(module_broker):
    """One broker for the module (tests/conftest.py): every test here uses topics of names of
    its own, but for the ``.*`` pattern, which counts every topic and has a broker of its own."""
    return module_broker


def reader(spark, bootstrap, **opts):
    r = spark.read.format("samsa").option("kafka.bootstrap.servers", bootstrap)
    for k, v in opts.items():
        r = r.option(k, v)
    return r.load()


def error_of(action) -> str:
    with pytest.raises(Exception) as e:
        action()
    return str(e.value)


def mixed_records(topic, partitions, n, base_ts=None):
    """Keys, null keys, headers (a null header value, a repeated key), explicit timestamps."""
    base_ts = base_ts or int(time.time() * 1000) - 60_000
    out = []
    for i in range(n):
        r = {"topic": topic, "value": f"value-{i}".encode(), "partition": i % partitions,
             "timestamp": base_ts + i * 10}
        if i % 4:
            r["key"] = f"key-{i}".encode()
        if i % 3 == 0:
            r["headers"] = [("h1", f"x{i}".encode()), ("empty", None), ("h1", b"again")]
        out.append(r)
    return out


# ---------------------------------------------------------------------------------------------
# Read

def test_read_equals_plain_consumer(spark, broker):
    b = broker.bootstrap
    create_topic(b, "events", 3)
    produce(b, mixed_records("events", 3, 60))
    produce(b, [{"topic": "events", "value": b"", "partition": 1},          # empty value
                {"topic": "events", "value": None, "key": b"tombstone", "partition": 2}])
    expected = consume_all(b, "events")
    assert len(expected) == 62

    df = reader(spark, b, subscribe="events", includeHeaders="true")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int,headers:array<struct<key:string,value:binary>>>")
    assert spark_rows(df, include_headers=True) == sorted(expected, key=lambda t: (t[2], t[3], t[4]))
    assert df.rdd.getNumPartitions() == 3          # one Spark partition per topic-partition

    plain = reader(spark, b, subscribe="events")
    assert plain.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert spark_rows(plain) == sorted((r[:7] for r in expected), key=lambda t: (t[2], t[3], t[4]))


def test_log_append_time(spark, broker):
    b = broker.bootstrap
    create_topic(b, "appended", 1, {"message.timestamp.type": "LogAppendTime"})
    produce(b, mixed_records("appended", 1, 5, base_ts=1_000))
    expected = consume_all(b, "appended", include_headers=False)
    assert {r[6] for r in expected} == {1} and all(r[5] > 1_000_000 for r in expected)
    assert spark_rows(reader(spark, b, subscribe="appended")) == expected


def test_read_yields_arrow_batches_of_sparks_types(spark, broker):
    """read() hands Spark Arrow RecordBatches whose schema is PySpark's own for the Spark schema."""
    from pyspark.sql.pandas.types import to_arrow_schema
    b = broker.bootstrap
    produce(b, mixed_records("arrow", 1, 25))
    for headers, expected in (("false", ARROW_SCHEMA), ("true", ARROW_SCHEMA_WITH_HEADERS)):
        df = reader(spark, b, subscribe="arrow", includeHeaders=headers)
        assert to_arrow_schema(df.schema, timezone="UTC") == expected
        opts = parse_read_options({"kafka.bootstrap.servers": b, "subscribe": "arrow", "includeHeaders": headers})
        batches = list(client.read_range(opts, OffsetRange("arrow", 0, 0, 25), batch_rows=10))
        assert all(isinstance(x, pa.RecordBatch) and x.schema == expected for x in batches)
        assert [x.num_rows for x in batches] == [10, 10, 5]
        assert pa.Table.from_batches(batches).column("offset").to_pylist() == list(range(25))


def test_subscribe_list_and_pattern_across_topics(spark, broker_factory):
    b = broker_factory().bootstrap
    create_topic(b, "orders-eu", 2)
    create_topic(b, "orders-us", 1)
    create_topic(b, "payments", 1)
    for t in ("orders-eu", "orders-us", "payments"):
        produce(b, [{"topic": t, "value": f"{t}-{i}".encode(), "partition": 0} for i in range(3)])
    every = {t: consume_all(b, t, include_headers=False) for t in ("orders-eu", "orders-us", "payments")}

    df = reader(spark, b, subscribe=" orders-us, payments ")
    assert spark_rows(df) == every["orders-us"] + every["payments"]

    df = reader(spark, b, subscribePattern="orders-.*")      # a whole-name match, as Java's matches()
    assert spark_rows(df) == every["orders-eu"] + every["orders-us"]
    assert df.rdd.getNumPartitions() == 2                      # orders-eu partition 1 is empty
    assert spark_rows(reader(spark, b, subscribePattern="orders")) == []
    assert reader(spark, b, subscribePattern=".*").select("topic").distinct().count() == 3   # no __consumer_offsets


def test_assign(spark, broker):
    b = broker.bootstrap
    create_topic(b, "assigned", 3)
    produce(b, mixed_records("assigned", 3, 30))
    every = consume_all(b, "assigned", include_headers=False)
    df = reader(spark, b, assign=json.dumps({"assigned": [0, 2]}))
    assert spark_rows(df) == [r for r in every if r[3] in (0, 2)]


def test_starting_and_ending_offsets(spark, broker):
    b = broker.bootstrap
    create_topic(b, "offsets", 2)
    produce(b, mixed_records("offsets", 2, 20))        # 10 records in each partition
    every = consume_all(b, "offsets", include_headers=False)

    def rows(**opts):
        return [(r[3], r[4]) for r in spark_rows(reader(spark, b, subscribe="offsets", **opts))]

    # Specific offsets, -2 (earliest) and -1 (latest) in the JSON.
    got = rows(startingOffsets='{"offsets":{"0":3,"1":-2}}', endingOffsets='{"offsets":{"0":5,"1":-1}}')
    assert got == [(0, 3), (0, 4)] + [(1, o) for o in range(10)]
    assert rows(STARTINGOFFSETS="earliest", endingOffsets="latest") == [(r[3], r[4]) for r in every]
    assert rows(startingOffsets='{"offsets":{"0":10,"1":4}}', endingOffsets='{"offsets":{"0":10,"1":5}}') == [(1, 4)]

    # The JSON must name every partition read.
    msg = error_of(lambda: reader(spark, b, subscribe="offsets", startingOffsets='{"offsets":{"0":1}}').collect())
    assert "If startingOffsets contains specific offsets, you must specify all TopicPartitions" in msg
    assert "Specified: Set(offsets-0) Assigned: Set(offsets-0, offsets-1)" in msg
    # Resolved start past the resolved end.
    msg = error_of(lambda: reader(spark, b, subscribe="offsets", startingOffsets='{"offsets":{"0":15,"1":0}}').collect())
    assert "The resolved start offset 15 is greater than the resolved end offset 10 for topic offsets partition 0" in msg


def test_timestamps(spark, broker):
    b = broker.bootstrap
    create_topic(b, "times", 2)
    base = int(time.time() * 1000) - 60_000
    produce(b, mixed_records("times", 2, 20, base_ts=base))    # partition p holds base + 10*i, i % 2 == p
    every = consume_all(b, "times", include_headers=False)

    def rows(**opts):
        return spark_rows(reader(spark, b, subscribe="times", **opts))

    got = rows(startingTimestamp=str(base + 50), endingTimestamp=str(base + 120))
    assert got == [r for r in every if base + 50 <= r[5] < base + 120]
    # Per partition; an ending timestamp past every record means latest.
    got = rows(startingOffsetsByTimestamp=json.dumps({"times": {"0": base + 100, "1": base}}),
               endingOffsetsByTimestamp=json.dumps({"times": {"0": base + 10_000, "1": base + 31}}))
    assert got == [r for r in every if (r[3] == 0 and r[5] >= base + 100) or (r[3] == 1 and r[5] < base + 31)]
    # A starting timestamp no record reaches: an error by default, latest with the strategy.
    future = str(base + 3_600_000)
    msg = error_of(lambda: rows(startingTimestamp=future))
    assert f"No offset matched from request of topic-partition times-0 and timestamp {future}" in msg
    assert rows(startingTimestamp=future, startingOffsetsByTimestampStrategy="latest") == []


def test_min_partitions_splits_ranges(spark, broker):
    b = broker.bootstrap
    create_topic(b, "split", 2)
    produce(b, [{"topic": "split", "value": str(i).encode(), "partition": 0} for i in range(100)]
            + [{"topic": "split", "value": b"lone", "partition": 1}])
    every = consume_all(b, "split", include_headers=False)
    df = reader(spark, b, subscribe="split", minPartitions="5")
    assert df.rdd.getNumPartitions() == 5          # partition 1 whole, partition 0 in four parts
    assert spark_rows(df) == every
    assert reader(spark, b, subscribe="split", minPartitions="1").rdd.getNumPartitions() == 2


def test_fail_on_data_loss(spark, broker):
    b = broker.bootstrap
    create_topic(b, "lossy", 1)
    produce(b, [{"topic": "lossy", "value": str(i).encode(), "partition": 0} for i in range(10)])
    admin = AdminClient({"bootstrap.servers": b})
    for fut in admin.delete_records([TopicPartition("lossy", 0, 4)]).values():
        fut.result(timeout=30)
    opts = dict(subscribe="lossy", startingOffsets='{"lossy":{"0":0}}')
    msg = error_of(lambda: reader(spark, b, **opts).collect())
    assert "Some data may have been lost" in msg and "topic-partition lossy-0" in msg
    assert "offsets [0, 10) were to be read, the partition now holds [4, 10)" in msg
    got = reader(spark, b, failOnDataLoss="false", **opts).selectExpr("offset").collect()
    assert [r.offset for r in got] == list(range(4, 10))


@pytest.mark.parametrize("opts, message", [
    ({"subscribe": "t", "assign": '{"t":[0]}'},
     "Only one of the following options can be specified for Kafka source: subscribe, subscribepattern, assign"),
    ({"subscribe": "t", "kafka.group.id": "mine"}, "Kafka option 'group.id' is not supported"),
    ({"subscribe": "t", "kafka.auto.offset.reset": "earliest"}, "Kafka option 'auto.offset.reset' is not supported"),
])
def test_bad_options_fail_at_load(spark, broker, opts, message):
    # load() alone raises: the options are checked in the driver before any query or task.
    msg = error_of(lambda: reader(spark, broker.bootstrap, **opts))
    assert message in msg


def test_batch_only_offsets_refused_at_the_first_action(spark, broker):
    # schema() (load()) cannot tell a batch read from a streaming one, where latest is the
    # default start: the batch reader refuses it when the query is planned, before any task.
    df = reader(spark, broker.bootstrap, subscribe="t", startingOffsets="latest")
    assert "starting offset can't be latest for batch queries on Kafka" in error_of(df.collect)
    df = reader(spark, broker.bootstrap, subscribe="t", endingOffsets="earliest")
    assert "ending offset can't be earliest for batch queries on Kafka" in error_of(df.collect)


def test_unknown_topic_partition_and_client_option(spark, broker):
    b = broker.bootstrap
    create_topic(b, "known", 2)
    msg = error_of(lambda: reader(spark, b, subscribe="known,missing").collect())
    assert "Topic 'missing' (option 'subscribe') does not exist" in msg
    msg = error_of(lambda: reader(spark, b, assign='{"known":[0,5]}').collect())
    assert "Partition known-5 (option 'assign') does not exist: topic 'known' has partitions [0, 1]" in msg
    msg = error_of(lambda: reader(spark, b, subscribe="known", **{"kafka.no.such.setting": "1"}).collect())
    assert "Option 'kafka.no.such.setting' is not a setting of the Kafka client" in msg


def test_unreachable_broker(spark):
    bootstrap = f"127.0.0.1:{free_port()}"
    msg = error_of(lambda: reader(spark, bootstrap, subscribe="t", **{"kafkaConsumer.pollTimeoutMs": "1500"}).collect())
    assert f"Cannot get metadata from the Kafka brokers at kafka.bootstrap.servers='{bootstrap}'" in msg


# ---------------------------------------------------------------------------------------------
# Write

def test_write_reads_back_identical(spark, broker):
    from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, StringType, StructField,
                                   StructType, TimestampType)
    import datetime as dt
    b = broker.bootstrap
    create_topic(b, "out-a", 2)
    create_topic(b, "out-b", 1)
    headers_type = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
    schema = StructType([StructField("topic", StringType()), StructField("key", StringType()),
                         StructField("value", BinaryType()), StructField("partition", IntegerType()),
                         StructField("headers", headers_type), StructField("timestamp", TimestampType()),
                         StructField("ignored", StringType())])
    base = int(time.time()) - 60
    rows = []
    for i in range(40):
        rows.append(("out-a" if i % 2 else "out-b", None if i % 5 == 0 else f"k{i}", f"v{i}".encode(),
                     (i // 2) % 2 if i % 2 else 0,
                     [("h", f"{i}".encode()), ("n", None)] if i % 3 == 0 else None,
                     dt.datetime.fromtimestamp(base + i, dt.timezone.utc), "x"))
    spark.createDataFrame(rows, schema).repartition(2).write.format("samsa") \
        .option("kafka.bootstrap.servers", b).mode("append").save()

    got = consume_all(b, "out-a") + consume_all(b, "out-b")
    assert len(got) == 40
    want = {(r[0], r[3], r[1].encode() if r[1] else None, r[2], (base + int(r[2][1:])) * 1000,
             r[4] and tuple(r[4])) for r in rows}
    assert {(g[2], g[3], g[0], g[1], g[5], g[7] and tuple(g[7])) for g in got} == want
    assert {g[6] for g in got} == {0}                           # CreateTime
    # The partition column was obeyed.
    for topic, part, count in (("out-a", 0, 10), ("out-a", 1, 10), ("out-b", 0, 20)):
        assert len([g for g in got if (g[2], g[3]) == (topic, part)]) == count


def test_write_with_topic_option_and_string_value(spark, broker):
    b = broker.bootstrap
    create_topic(b, "via-option", 1)
    df = spark.createDataFrame([(f"k{i}", f"v{i}", "not-this-topic") for i in range(7)], "key string, value string, topic string")
    df.coalesce(1).write.format("samsa").option("kafka.bootstrap.servers", b).option("topic", "via-option") \
        .mode("append").save()
    got = consume_all(b, "via-option", include_headers=False)
    assert [(g[0], g[1]) for g in got] == [(f"k{i}".encode(), f"v{i}".encode()) for i in range(7)]
    # Read back through the source too: the same rows.
    assert spark_rows(reader(spark, b, subscribe="via-option")) == got


@pytest.mark.parametrize("ddl, options, message", [
    ("key string, topic string", {}, "Required attribute 'value' not found"),
    ("value string", {}, "topic option required when no 'topic' attribute is present. Use the topic option for setting a topic."),
    ("value int, topic string", {}, "value attribute unsupported type int. value must be a(n) string or binary"),
    ("value string, partition long", {"topic": "t"}, "partition attribute unsupported type bigint. partition must be a(n) int"),
    ("value string", {"topic": "t", "kafka.value.serializer": "x"}, "Kafka option 'value.serializer' is not supported"),
    ("value string", {"topic": "t", "kafka.no.such.setting": "1"}, "Option 'kafka.no.such.setting' is not a setting of the Kafka client"),
])
def test_write_schema_and_option_errors(spark, broker, ddl, options, message):
    df = spark.createDataFrame([], ddl)
    w = df.write.format("samsa").option("kafka.bootstrap.servers", broker.bootstrap).mode("append")
    for k, v in options.items():
        w = w.option(k, v)
    assert message in error_of(w.save)


def test_write_failure_names_partition_and_overwrite_refused(spark, broker):
    b = broker.bootstrap
    create_topic(b, "small", 2)
    df = spark.createDataFrame([("v", 7)], "value string, partition int")
    w = df.write.format("samsa").option("kafka.bootstrap.servers", b).option("topic", "small")
    msg = error_of(w.mode("append").save)
    # refused by librdkafka at once (it knew the topic's partitions) or in the delivery
    # report (it did not yet): either way the partition is named
    assert "topic 'small' partition 7 failed" in msg and "UNKNOWN_PARTITION" in msg, msg
    assert "Save mode Overwrite not allowed" in error_of(w.mode("overwrite").save)
