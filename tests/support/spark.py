"""A small local Spark session with the samsa data source registered, for the
pipeline tests and bench/bench_spark.py (about 10 s to start: one per module)."""
from __future__ import annotations

import os
import sys


def local_session(app_name: str, driver_memory: str = "1g"):
    # Spark starts its Python workers with `python3` from PATH unless told otherwise: they
    # must run this interpreter (the venv), or they import neither pyarrow nor pipeline.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import pipeline

    session = (SparkSession.builder.master("local[2]")
               .appName(app_name)
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", driver_memory)
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    pipeline.register(session)
    return session
