"""The ``samsa`` source read through its confluent-kafka reader, for bench_spark.py.

The executors read with the wire reader unless ``SAMSA_SPARK_READER`` chooses confluent-kafka's,
and Spark starts its Python workers with one environment for the whole session. To compare the
two readers in one session, run by run, ``samsa_librdkafka`` is the samsa source whose tasks set
that variable while they read (and restore it: Python workers are reused across tasks).
"""
from __future__ import annotations

import os
from typing import Iterator

from pyspark.sql.datasource import DataSourceReader, InputPartition

from samsa.pipeline.source import SamsaDataSource
from samsa.pipeline.wire_reader import READER_ENV


class LibrdkafkaReader(DataSourceReader):
    def __init__(self, inner: DataSourceReader):
        self.inner = inner

    def partitions(self) -> list[InputPartition]:
        return self.inner.partitions()

    def read(self, partition: InputPartition) -> Iterator:
        before = os.environ.get(READER_ENV)
        os.environ[READER_ENV] = "librdkafka"
        try:
            yield from self.inner.read(partition)
        finally:
            if before is None:
                os.environ.pop(READER_ENV, None)
            else:
                os.environ[READER_ENV] = before


class LibrdkafkaDataSource(SamsaDataSource):
    @classmethod
    def name(cls) -> str:
        return "samsa_librdkafka"

    def reader(self, schema) -> LibrdkafkaReader:  # type: ignore[override]
        return LibrdkafkaReader(super().reader(schema))
