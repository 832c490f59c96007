"""What Spark itself costs to take rows from a Python data source, for bench_spark.py.

``samsa_floor`` yields one prebuilt Arrow batch of the samsa schema (10k rows of 12-byte keys
and values of the bench's size) over and over, from as many partitions as the bench's topic has: no broker,
no Kafka client, no per-row Python. Whatever a read through it costs is PySpark's Python worker
writing Arrow to the JVM and the JVM turning it into rows, which the samsa source pays too: the
fastest any Python data source delivering these rows can be in this Spark.
"""
from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from samsa.pipeline.arrow import ARROW_SCHEMA, schema_ddl

BATCH_ROWS = 10_000


def batch(rows: int, value_size: int) -> pa.RecordBatch:
    values = [(bytes(range(256)) * (value_size // 256 + 1))[:value_size]] * rows
    ts = pa.array([1_700_000_000_000] * rows, pa.int64()).cast(pa.timestamp("ms", tz="UTC"))
    return pa.RecordBatch.from_arrays([
        pa.array([b"key-%08d" % i for i in range(rows)], pa.binary()),
        pa.array(values, pa.binary()),
        pa.repeat(pa.scalar("bench-spark", pa.string()), rows),
        pa.repeat(pa.scalar(0, pa.int32()), rows),
        pa.array(range(rows), pa.int64()),
        ts.cast(pa.timestamp("us", tz="UTC")),
        pa.repeat(pa.scalar(0, pa.int32()), rows),
    ], schema=ARROW_SCHEMA)


class FloorReader(DataSourceReader):
    def __init__(self, rows: int, partitions: int, value_size: int):
        self.rows, self.parts, self.value_size = rows, partitions, value_size

    def partitions(self) -> list[InputPartition]:
        share = [self.rows // self.parts + (1 if i < self.rows % self.parts else 0) for i in range(self.parts)]
        return [InputPartition(n) for n in share if n]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        left = partition.value
        full = batch(min(BATCH_ROWS, left), self.value_size)
        while left:
            yield full if left >= full.num_rows else full.slice(0, left)
            left -= min(left, full.num_rows)


class FloorDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "samsa_floor"

    def schema(self) -> str:
        return schema_ddl(False)

    def reader(self, schema) -> FloorReader:
        return FloorReader(int(self.options["rows"]), int(self.options["partitions"]),
                           int(self.options["valueSize"]))
