"""The activity events and the rows the pipeline keeps of them: shared by the streaming job and
the rebuild, so a rebuilt day has exactly the columns (and rows) the stream wrote.

An event is one JSON object per record value:
    {"user": "user-0042", "page": "/pricing", "action": "view", "timestamp": "2026-11-23T23:59:58.123Z"}
The generator keys records by user and sets the record timestamp to the event's (the rebuild
finds a day's records by record timestamp).
"""
from __future__ import annotations

EVENT_DDL = "user string, page string, action string, timestamp timestamp"

# The Parquet dataset: the event, its date (the partition column) and where it came from, so a
# load can be checked or resumed against the topic (topic, partition, offset identify a record).
ROW_COLUMNS = ["user", "page", "action", "event_time", "topic", "partition", "offset",
               "record_timestamp", "date"]


def event_rows(records):
    """Records of the ``samsa`` source -> the dataset's rows. Values that are not an event (not
    JSON, or without a timestamp) have no date to go under and are left out."""
    from pyspark.sql import functions as F

    parsed = records.select(
        F.from_json(F.col("value").cast("string"), EVENT_DDL,
                    {"timestampFormat": "yyyy-MM-dd'T'HH:mm:ss[.SSS]XXX"}).alias("e"),
        "topic", "partition", "offset", F.col("timestamp").alias("record_timestamp"))
    return (parsed.where(F.col("e.timestamp").isNotNull())
            .select("e.user", "e.page", "e.action", F.col("e.timestamp").alias("event_time"),
                    "topic", "partition", "offset", "record_timestamp",
                    F.to_date("e.timestamp").alias("date")))
