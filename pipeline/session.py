"""A Spark session with the ``samsa`` data source registered: the jobs' command line, the tests
and the bench build theirs here.

Spark starts its Python workers with ``python3`` from PATH unless ``PYSPARK_PYTHON`` says
otherwise: they must run this interpreter (a virtualenv's), or they import neither pyarrow nor
``pipeline`` (seen: ``ModuleNotFoundError: pyarrow`` inside a crashed worker). Times are UTC so
that dates (the Parquet dataset's partitions) and windows do not depend on the machine's zone.
"""
from __future__ import annotations

import os
import sys


def local_session(app_name: str, master: str = "local[2]", driver_memory: str = "1g",
                  shuffle_partitions: int = 2, conf: dict | None = None):
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from . import register

    builder = (SparkSession.builder.master(master)
               .appName(app_name)
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", driver_memory))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session
