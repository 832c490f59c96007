"""The streaming job's Parquet sink: each micro-batch's files, published once per batch id.

Why not Spark's own file sink (``writeStream.format("parquet")``): it lists its files in a
``_spark_metadata`` log that readers of the directory then trust instead of the directory, so a
rebuild that replaces a date partition (a batch overwrite) would leave readers listing files that
are gone and missing the new ones. Here the dataset stays a plain date-partitioned Parquet
directory that batch jobs may overwrite a partition of.

Exactly once per batch id: Spark runs a micro-batch again after a failure with the same offsets
and the same id. A batch is written to ``_staging/batch-<id>`` (overwritten on a retry), then
every file of an earlier attempt at that id is removed from the dataset and the new files are
moved in as ``date=<d>/batch-<id>-<n>.parquet``. A crash at any point leaves either the files of
one attempt or files the retry replaces; Spark commits the batch id only after this returns.
The output path is a local (or mounted) filesystem path: the moves are ``os`` renames.
"""
from __future__ import annotations

import glob
import os
import shutil

STAGING = "_staging"


def batch_file_prefix(batch_id: int) -> str:
    return f"batch-{batch_id:012d}-"


class ParquetBatchSink:
    """A ``foreachBatch`` function: ``ParquetBatchSink(path)(df, batch_id)``."""

    def __init__(self, path: str, partition_by: str = "date"):
        self.path = os.path.abspath(path)
        self.partition_by = partition_by

    def __call__(self, df, batch_id: int) -> None:
        staging = os.path.join(self.path, STAGING, f"batch-{batch_id}")
        df.write.mode("overwrite").partitionBy(self.partition_by).parquet("file://" + staging)
        prefix = batch_file_prefix(batch_id)
        for old in glob.glob(os.path.join(self.path, f"{self.partition_by}=*", prefix + "*")):
            os.remove(old)              # an earlier attempt at this batch
        for part_dir in sorted(glob.glob(os.path.join(staging, f"{self.partition_by}=*"))):
            dest_dir = os.path.join(self.path, os.path.basename(part_dir))
            os.makedirs(dest_dir, exist_ok=True)
            for n, name in enumerate(sorted(f for f in os.listdir(part_dir) if f.endswith(".parquet"))):
                os.replace(os.path.join(part_dir, name), os.path.join(dest_dir, f"{prefix}{n:05d}.parquet"))
        shutil.rmtree(staging, ignore_errors=True)
