"""A streaming query writing with the exactly-once sink, in a process of its own (its own Spark),
so that test_eos_streaming.py can kill it (SIGKILL, the whole process group) mid-batch and run it
again from the same checkpoint:

    python -m tests.pipeline.eos_query BOOTSTRAP CHECKPOINT INPUT OUTPUT PREFIX [--hold B:P:N]

Reads INPUT from the earliest offset, 2000 records per micro-batch (Trigger.AvailableNow: it
stops when it has read what INPUT held at the start), and writes each record's value to OUTPUT's
partition of the same number. ``--hold B:P:N``: the task of partition P of batch B passes N rows
on to the sink, then waits for ever, its transaction open with those rows in it: the test's
deterministic "mid-batch" (it kills the query there). The hold is a UDF ahead of the sink, in
this test program only; the sink is the data source's, unchanged.
"""

from __future__ import annotations

import argparse
import sys
import threading

# Rows per Arrow batch into the sink: small, so that the N rows the held task lets through reach
# the sink, and the broker, while the task waits.
SLICE_ROWS = 100


def hold_udf(hold: tuple[int, int, int] | None):
    """The identity on ``value``, except in the held task, which stops at its N+1st row. A plain
    Python UDF (no pandas needed): Spark hands it rows in batches of 100 and the sink what it
    returned, in Arrow batches of SLICE_ROWS rows."""
    from pyspark.sql.functions import udf
    from pyspark.sql.types import BinaryType
    passed = [0]        # per task: Spark unpickles the function for every task

    def value_of(value):
        if hold is not None:
            from pyspark import TaskContext
            ctx = TaskContext.get()
            if int(ctx.getLocalProperty("streaming.sql.batchId")) == hold[0] and ctx.partitionId() == hold[1]:
                if passed[0] >= hold[2]:
                    # Until the test kills the query (SIGKILL of the driver and its JVM; Spark's
                    # worker daemon then ends its workers, this one too).
                    threading.Event().wait()
                passed[0] += 1
        return value
    return udf(value_of, BinaryType())


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    for name in ("bootstrap", "checkpoint", "input", "output", "prefix"):
        ap.add_argument(name)
    ap.add_argument("--hold", default=None, help="batch:partition:rows")
    args = ap.parse_args(argv)
    hold = tuple(int(x) for x in args.hold.split(":")) if args.hold else None

    from samsa.pipeline.session import local_session
    spark = local_session("eos-query", conf={"spark.sql.execution.arrow.maxRecordsPerBatch": str(SLICE_ROWS),
                                             "spark.sql.execution.pythonUDF.arrow.enabled": "false"})
    rows = (spark.readStream.format("samsa")
            .option("kafka.bootstrap.servers", args.bootstrap)
            .option("subscribe", args.input)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", "2000")
            .load()
            .select(hold_udf(hold)("value").alias("value"), "partition"))
    query = (rows.writeStream.format("samsa")
             .option("kafka.bootstrap.servers", args.bootstrap)
             .option("topic", args.output)
             .option("exactlyOnce", "true")
             .option("transactionalIdPrefix", args.prefix)
             .option("checkpointLocation", args.checkpoint)
             .trigger(availableNow=True)
             .start())
    query.awaitTermination()
    print(f"query done: {query.lastProgress and query.lastProgress['batchId']}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
