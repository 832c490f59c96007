"""The batch job: rebuild one day of the Parquet dataset from the topic.

Reads the records whose record timestamp lies in ``[day - slack, day + 1 day + slack)``
(``startingTimestamp``/``endingTimestamp``, resolved per partition with ListOffsets), keeps the
events of that day by event time (the slack catches events whose record timestamp differs from
their event time; the generator makes them equal) and overwrites that date's partition only
(dynamic partition overwrite): the other days are not touched.

Run it for a day the stream has finished with (past the watermark), or with the stream stopped:
events the stream writes for that day after the rebuild are added to it.
"""
from __future__ import annotations

import datetime as dt
import logging

from .events import ROW_COLUMNS, event_rows

log = logging.getLogger(__name__)

DAY_MS = 86_400_000


def day_range_ms(day: dt.date, slack_ms: int) -> tuple[int, int]:
    start = int(dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc).timestamp() * 1000)
    return start - slack_ms, start + DAY_MS + slack_ms


def rebuild_day(spark, bootstrap_servers: str, events_topic: str, output: str, day: dt.date,
                slack_ms: int = 3_600_000) -> int:
    """Overwrite ``date=<day>`` of ``output``; returns the number of rows written."""
    from pyspark.sql import functions as F

    start_ms, end_ms = day_range_ms(day, slack_ms)
    records = (spark.read.format("samsa")
               .option("kafka.bootstrap.servers", bootstrap_servers)
               .option("subscribe", events_topic)
               .option("startingTimestamp", str(start_ms))
               .option("endingTimestamp", str(end_ms))
               # A partition with nothing that late yet: nothing to read there, not an error.
               .option("startingOffsetsByTimestampStrategy", "latest")
               .load())
    rows = event_rows(records).where(F.col("date") == F.lit(day.isoformat()).cast("date")).select(*ROW_COLUMNS)
    rows = rows.cache()
    try:
        count = rows.count()
        if count == 0:
            log.warning("no events of %s in '%s': date=%s left as it was", day, events_topic, day)
            return 0
        previous = spark.conf.get("spark.sql.sources.partitionOverwriteMode")
        spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
        try:
            rows.write.mode("overwrite").partitionBy("date").parquet(output)
        finally:
            spark.conf.set("spark.sql.sources.partitionOverwriteMode", previous)
        return count
    finally:
        rows.unpersist()
