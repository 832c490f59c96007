"""A small local Spark session with the samsa data source registered, for the
pipeline tests and bench/bench_spark.py (about 10 s to start: one per module).
The builder is pipeline.session's, which the pipeline's jobs use as well."""
from __future__ import annotations


def local_session(app_name: str, driver_memory: str = "1g"):
    from samsa.pipeline.session import local_session as build
    return build(app_name, driver_memory=driver_memory)
