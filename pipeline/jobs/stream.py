"""The streaming job: events topic -> date-partitioned Parquet, and windowed counts -> a topic.

Two queries over the same topic, each with its own checkpoint under ``--checkpoint``:
- ``parquet``: every event as a row of ``events.ROW_COLUMNS`` (the record's topic, partition
  and offset kept in the row), published per micro-batch by ``ParquetBatchSink``; the
  checkpoint says which offsets are done, the rows say where each came from;
- ``aggregates``: per ``--window`` of event time and action, the event count and (approximate)
  distinct users, with a watermark of ``--watermark``; a window is written once, as JSON, to
  ``--aggregates-topic`` when the watermark passes its end (append mode).
"""
from __future__ import annotations

import logging
import os
import signal
import threading
import time
from dataclasses import dataclass

from .events import event_rows
from .generate import ensure_topic
from .parquet_sink import ParquetBatchSink

log = logging.getLogger(__name__)


@dataclass
class StreamConfig:
    bootstrap_servers: str
    events_topic: str
    output: str
    checkpoint: str
    aggregates_topic: str
    window: str = "1 minute"
    watermark: str = "10 minutes"
    trigger: str = "5 seconds"
    available_now: bool = False
    starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None


def source(spark, cfg: StreamConfig):
    r = (spark.readStream.format("samsa")
         .option("kafka.bootstrap.servers", cfg.bootstrap_servers)
         .option("subscribe", cfg.events_topic)
         .option("startingOffsets", cfg.starting_offsets))
    if cfg.max_offsets_per_trigger:
        r = r.option("maxOffsetsPerTrigger", str(cfg.max_offsets_per_trigger))
    return r.load()


def window_counts(rows, window: str, watermark: str):
    """Per window and action: events and approximate distinct users, as Kafka key/value."""
    from pyspark.sql import functions as F

    counted = (rows.withWatermark("event_time", watermark)
               .groupBy(F.window("event_time", window), "action")
               .agg(F.count("*").alias("events"), F.approx_count_distinct("user").alias("users")))
    return counted.select(
        F.concat_ws("|", F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss'Z'"), "action").alias("key"),
        F.to_json(F.struct(
            F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
            F.date_format("window.end", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_end"),
            "action", "events", "users")).alias("value"))


def _trigger(writer, cfg: StreamConfig):
    return writer.trigger(availableNow=True) if cfg.available_now else writer.trigger(processingTime=cfg.trigger)


def _wait_initialized(query, timeout_s: float = 120.0) -> None:
    """Until ``query`` has started its sources (or ended), so two queries do not start their
    Python source processes at the same moment (see ``_transient``)."""
    deadline = time.monotonic() + timeout_s
    while query.isActive and query.status["message"] == "Initializing sources" and time.monotonic() < deadline:
        time.sleep(0.1)


# Spark gives a Python stream source's new Python process a fixed 10 s to connect back; on a busy
# machine (seen with load 6 on 2 cores) a query can fail that way before its first batch. Nothing
# was read or written then, and the checkpoint makes a restart exact: the job restarts it.
_TRANSIENT = ("Python worker failed to connect back",)
RESTARTS = 3


def _transient(exc) -> bool:
    return exc is not None and any(t in str(exc) for t in _TRANSIENT)


def starters(spark, cfg: StreamConfig) -> list:
    """One function per query that starts it: the Parquet load, the window counts."""
    def parquet():
        rows = event_rows(source(spark, cfg))
        return _trigger(rows.writeStream.queryName("events-to-parquet")
                        .foreachBatch(ParquetBatchSink(cfg.output))
                        .option("checkpointLocation", os.path.join(cfg.checkpoint, "parquet")), cfg).start()

    def aggregates():
        counts = window_counts(event_rows(source(spark, cfg)), cfg.window, cfg.watermark)
        return _trigger(counts.writeStream.queryName("window-counts").format("samsa")
                        .outputMode("append")
                        .option("kafka.bootstrap.servers", cfg.bootstrap_servers)
                        .option("topic", cfg.aggregates_topic)
                        .option("checkpointLocation", os.path.join(cfg.checkpoint, "aggregates")), cfg).start()
    return [parquet, aggregates]


def start(spark, cfg: StreamConfig):
    """Start both queries, one after the other; returns them (the caller awaits or stops them)."""
    ensure_topic(cfg.bootstrap_servers, cfg.aggregates_topic, partitions=1)
    queries = []
    try:
        for starter in starters(spark, cfg):
            queries.append(starter())
            _wait_initialized(queries[-1])
    except BaseException:
        for q in queries:
            q.stop()
        raise
    return queries


def run(spark, cfg: StreamConfig, timeout_s: float | None = None) -> None:
    """Run until both queries end (available-now), one fails, Ctrl-C or SIGTERM (or
    ``timeout_s``); then stop both. A stopped query resumes from its checkpoint next time."""
    from pyspark.errors import StreamingQueryException

    queries = start(spark, cfg)
    restart = starters(spark, cfg)
    restarts = 0
    stopping = threading.Event()
    handlers = {}
    if threading.current_thread() is threading.main_thread():
        # PySpark's own SIGINT handler raises KeyboardInterrupt inside whatever py4j call is
        # waiting, which then fails with a screenful of py4j errors: stop between calls instead.
        for sig in (signal.SIGINT, signal.SIGTERM):
            handlers[sig] = signal.signal(sig, lambda *_: stopping.set())
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        while not stopping.is_set():
            for i, q in enumerate(queries):
                if not q.isActive and _transient(q.exception()) and restarts < RESTARTS:
                    restarts += 1
                    log.warning("query %s failed to start (%s): restarting it from its checkpoint",
                                q.name, _TRANSIENT[0])
                    queries[i] = restart[i]()
                    _wait_initialized(queries[i])
            if not any(q.isActive for q in queries):
                break
            if not cfg.available_now and not all(q.isActive for q in queries):
                break           # one failed (or was stopped): stop the other too
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"the streaming job did not finish within {timeout_s} s")
            try:
                spark.streams.awaitAnyTermination(1.0)
            except StreamingQueryException:
                pass            # looked at above: restarted, or reported below
            spark.streams.resetTerminated()
        if stopping.is_set():
            log.info("stopping: the queries resume from %s next time", cfg.checkpoint)
        for q in queries:
            if q.exception() is not None:
                raise RuntimeError(f"query {q.name} failed: {q.exception()}")
    finally:
        for q in queries:
            q.stop()
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
