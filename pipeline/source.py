"""``samsa``: a PySpark Python data source with the options and schema of Spark's Kafka source.

    spark.dataSource.register(SamsaDataSource)
    df = (spark.read.format("samsa")
          .option("kafka.bootstrap.servers", "localhost:9092")
          .option("subscribe", "events")
          .load())

Where things run: ``schema()`` (at ``load()``) and ``reader()``/``writer()`` run in the driver's
Python worker and check every option there, so a bad option fails the query before any task
starts; ``SamsaReader.partitions()`` asks the broker for metadata and offsets (also in the
driver); ``read()`` and ``write()`` run in the executors' Python workers. The Kafka work is in
``pipeline.client``; this module is the thin Spark-facing layer; the streaming reader and writer
are in ``pipeline.stream_source`` and share the task code here (``read_partition``) and in
``pipeline.client`` (``read_range``, ``write_batches``).
"""

from __future__ import annotations

from typing import Iterator

from pyspark.sql.datasource import (
    DataSource, DataSourceArrowWriter, DataSourceReader, DataSourceStreamArrowWriter,
    DataSourceStreamReader, InputPartition, WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType, BinaryType, DataType, DoubleType, IntegerType, StringType, StructField, StructType,
    TimestampType,
)

from . import client
from .arrow import schema_ddl
from .options import (
    INCLUDE_HEADERS, ReadOptions, SamsaOptionError, WriteOptions, check_common_read_options, lower_keys,
    parse_read_options, parse_stream_options, parse_write_options,
)
from .ranges import OffsetRange

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


class SamsaDataSource(DataSource):
    """Batch and streaming read and write of Kafka topics (any Kafka-protocol broker, samsa first)."""

    @classmethod
    def name(cls) -> str:
        return "samsa"

    def schema(self) -> str:
        # Called for reads only, at load(): the place to refuse bad options early. It cannot tell
        # a batch from a streaming read, so the checks of one or the other wait for reader() /
        # streamReader() (streaming: when the query starts).
        check_common_read_options(self.options)
        return schema_ddl(lower_keys(self.options).get(INCLUDE_HEADERS, "false").strip().lower() == "true")

    def reader(self, schema: StructType) -> "SamsaReader":
        return SamsaReader(parse_read_options(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .stream_source import RefusedStreamReader, SamsaStreamReader
        try:
            return SamsaStreamReader(parse_stream_options(self.options))
        except SamsaOptionError as e:
            # Raised here, PySpark 4.3's source runner buries it under an UnboundLocalError of
            # its own; raised from the first call it is the query's error, as it stands.
            return RefusedStreamReader(e)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        # Every output mode is accepted, as Spark's Kafka sink does: complete mode (overwrite=True)
        # appends the whole result table to the topic each trigger.
        from .stream_source import SamsaExactlyOnceStreamWriter, SamsaStreamWriter
        opts = self._checked_write_options(schema)
        if opts.exactly_once is not None:
            from .eos_writer import check_marker_topic
            check_marker_topic(opts)
            return SamsaExactlyOnceStreamWriter(opts)
        return SamsaStreamWriter(opts)

    def writer(self, schema: StructType, overwrite: bool) -> "SamsaWriter":
        if overwrite:
            raise SamsaOptionError("Save mode Overwrite not allowed for Kafka (nor for samsa): records "
                                   "are appended to topics. Use mode(\"append\").")
        opts = self._checked_write_options(schema)
        if opts.exactly_once is not None:
            raise SamsaOptionError("Option 'exactlyOnce' is for streaming writes (writeStream): a batch "
                                   "write has no micro-batch id to recognise a task run again by. "
                                   "Batch writes are at least once.")
        return SamsaWriter(opts)

    def _checked_write_options(self, schema: StructType) -> WriteOptions:
        opts = parse_write_options(self.options)
        validate_write_schema(schema, opts.topic)
        client.check_producer_options(opts)
        return opts


class SamsaReader(DataSourceReader):
    def __init__(self, opts: ReadOptions):
        self.opts = opts

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(r) for r in client.plan_batch(self.opts)]

    def read(self, partition: InputPartition) -> Iterator:
        return read_partition(self.opts, partition)


def read_partition(opts: ReadOptions, partition: InputPartition) -> Iterator:
    """One task's records as Arrow batches: the batch and the streaming reader both read here."""
    rng: OffsetRange | None = getattr(partition, "value", None)
    if rng is None:     # PySpark runs one task with no partition when partitions() is empty
        return
    try:
        yield from client.read_range(opts, rng)
    except client.KafkaSourceError:
        raise
    except Exception as e:      # anything else: say which range it was
        raise client.KafkaSourceError(f"Reading {rng} failed: {type(e).__name__}: {e}") from e


# ---------------------------------------------------------------------------------------------
# Write

def _check_type(schema: StructType, name: str, allowed: list[DataType]) -> bool:
    """Spark's KafkaWriter.expression: False when absent, error when of a type not allowed."""
    if name not in schema.fieldNames():
        return False
    dt = schema[name].dataType
    if not any(_same_type(dt, a) for a in allowed):
        wanted = " or ".join(a.simpleString() for a in allowed)
        raise SamsaOptionError(f"{name} attribute unsupported type {dt.simpleString()}. "
                               f"{name} must be a(n) {wanted}")
    return True


def _same_type(a: DataType, b: DataType) -> bool:
    # Spark's DataTypeUtils.sameType: equal ignoring nullability.
    return a.simpleString() == b.simpleString()


def validate_write_schema(schema: StructType, topic_option: str | None) -> None:
    """The columns Spark's Kafka sink takes: topic, key, value, headers, partition, timestamp."""
    if topic_option is None and not _check_type(schema, "topic", [StringType()]):
        raise SamsaOptionError("topic option required when no 'topic' attribute is present. "
                               "Use the topic option for setting a topic.")
    _check_type(schema, "key", [StringType(), BinaryType()])
    if not _check_type(schema, "value", [StringType(), BinaryType()]):
        raise SamsaOptionError("Required attribute 'value' not found")
    _check_type(schema, "headers", [HEADERS_TYPE])
    _check_type(schema, "partition", [IntegerType()])
    _check_type(schema, "timestamp", [DoubleType(), TimestampType()])


class SamsaCommitMessage(WriterCommitMessage):
    def __init__(self, records: int):
        self.records = records


class SamsaWriter(DataSourceArrowWriter):
    """At-least-once: each task flushes its producer and fails if any record was not acknowledged."""

    def __init__(self, opts: WriteOptions):
        self.opts = opts

    def write(self, iterator) -> SamsaCommitMessage:
        return SamsaCommitMessage(client.write_batches(self.opts, iterator))

    def commit(self, messages) -> None:
        pass

    def abort(self, messages) -> None:
        # Records of tasks that succeeded stay in the topics: the sink is at-least-once.
        pass
