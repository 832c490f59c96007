"""``readStream.format("samsa")`` and ``writeStream.format("samsa")``: PySpark 4.3's stream API.

Reader, in the driver (one long-lived Python worker per query): ``initialOffset`` resolves
``startingOffsets`` (default latest); each trigger ``latestOffset(start, limit)`` lists the
partitions (new ones start at their earliest offset), asks for their latest offsets and applies
the read limit (``maxOffsetsPerTrigger`` as ``ReadMaxRows``; ``minOffsetsPerTrigger`` with
``maxTriggerDelay``); ``partitions(start, end)`` turns the two offset maps into offset ranges.
Spark writes the offset maps to the query's checkpoint (``offsets/<batch>``), so a restarted
query resumes at the last committed end. Executors read each range with the batch reader's code
(``read_partition``: records removed before they were read are data loss there).

Writer: the batch sink's code per task (``client.write_batches``): idempotent producer, every
record acknowledged before the task succeeds; a retried micro-batch writes again (at least once).
With ``exactlyOnce=true``, ``SamsaExactlyOnceStreamWriter``: one transaction per micro-batch and
task (``pipeline.eos_writer``), a batch run again is recognised and not written twice.
"""

from __future__ import annotations

import logging
import time
from typing import Iterator

from pyspark.sql.datasource import (
    DataSourceStreamArrowWriter, DataSourceStreamReader, InputPartition, WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable, ReadLimit, ReadMaxRows, ReadMinRows, SupportsTriggerAvailableNow,
)

from . import client, eos_writer
from .eos import BATCH_ID_PROPERTY, QUERY_ID_PROPERTY, TaskBatch
from .options import ReadOptions, SamsaOptionError, WriteOptions
from .ranges import sort_ranges, split_ranges
from .source import SamsaCommitMessage, read_partition
from .streaming import backlog, from_offsets, plan_ranges, rate_limit, to_offsets

log = logging.getLogger(__name__)


class SamsaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):

    def __init__(self, opts: ReadOptions):
        self.opts = opts
        self.offsets = client.OffsetReader(opts)
        self._latest: dict | None = None          # all available, from the last latestOffset
        self._available_now: dict | None = None   # Trigger.AvailableNow's target
        self._last_trigger = time.monotonic()     # for minOffsetsPerTrigger's maxTriggerDelay

    def __getstate__(self):
        # Pickled to the executors for read(): only the options travel.
        state = dict(self.__dict__)
        state["offsets"] = client.OffsetReader(self.opts)
        return state

    # -- driver ---------------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        tps = self.offsets.partitions()
        return to_offsets(self.offsets.starting(tps))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def _available(self, start: dict) -> tuple[dict, dict]:
        """(where each partition's next records start, the latest offsets), new partitions included."""
        if self._available_now is not None:
            latest = dict(self._available_now)
        else:
            latest = self.offsets.latest(self.offsets.partitions())
        begin = dict(start)
        new = [tp for tp in latest if tp not in begin]
        if new:
            begin.update(self.offsets.earliest(new))
        return begin, latest

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        start_map = from_offsets(start)
        begin, latest = self._available(start_map)
        self._latest = latest
        if isinstance(limit, ReadAllAvailable):
            return to_offsets(latest)
        # The engine passes the default read limit (or ReadAllAvailable, which wins over the options).
        min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else self.opts.min_offsets_per_trigger
        if min_rows is not None and self._available_now is None:
            waited_ms = (time.monotonic() - self._last_trigger) * 1000
            if backlog(begin, latest) < min_rows and waited_ms < self.opts.max_trigger_delay_ms:
                return start        # not enough yet: skip this trigger (Spark's delayBatch)
        self._last_trigger = time.monotonic()
        if isinstance(limit, ReadMaxRows):
            return to_offsets(rate_limit(limit.max_rows, begin, latest))
        return to_offsets(latest)

    def reportLatestOffset(self) -> dict | None:
        return to_offsets(self._latest) if self._latest is not None else None

    def prepareForTriggerAvailableNow(self) -> None:
        # Everything there is now, and nothing produced later (nor partitions added later).
        self._available_now = self.offsets.latest(self.offsets.partitions())

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        start_map, end_map = from_offsets(start), from_offsets(end)
        new = [tp for tp in end_map if tp not in start_map]
        new_starts = self.offsets.earliest(new) if new else {}
        ranges = plan_ranges(start_map, end_map, new_starts, self._report_data_loss)
        return [InputPartition(r) for r in sort_ranges(split_ranges(ranges, self.opts.min_partitions))]

    def _report_data_loss(self, message: str) -> None:
        if self.opts.fail_on_data_loss:
            raise client.DataLossError(f"{message}. {client.DATA_LOSS_HINT}")
        log.warning("failOnDataLoss=false: %s", message)

    def commit(self, end: dict) -> None:
        pass        # offsets live in Spark's checkpoint; nothing is committed to the brokers

    def stop(self) -> None:
        self.offsets.close()

    # -- executors ------------------------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator:
        return read_partition(self.opts, partition)


class RefusedStreamReader(DataSourceStreamReader):
    """A streaming read whose options were refused: the query fails with that error, and only it."""

    def __init__(self, error: SamsaOptionError):
        self.message = str(error)       # not the exception: its traceback would come along

    @property
    def error(self) -> SamsaOptionError:
        return SamsaOptionError(self.message)

    def initialOffset(self) -> dict:
        raise self.error

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        raise self.error

    def partitions(self, start: dict, end: dict) -> list:
        raise self.error

    def read(self, partition: InputPartition) -> Iterator:
        raise self.error


class SamsaStreamWriter(DataSourceStreamArrowWriter):
    """At least once: each task flushes and fails unless every record was acknowledged; a retried
    micro-batch is written again (the idempotent producer only removes duplicates inside a task)."""

    def __init__(self, opts: WriteOptions):
        self.opts = opts

    def write(self, iterator) -> SamsaCommitMessage:
        return SamsaCommitMessage(client.write_batches(self.opts, iterator))

    def commit(self, messages, batchId: int) -> None:
        pass

    def abort(self, messages, batchId: int) -> None:
        pass        # what tasks that succeeded wrote stays in the topics


class EosCommitMessage(WriterCommitMessage):
    def __init__(self, records: int, skipped: bool):
        self.records = records
        self.skipped = skipped


class SamsaExactlyOnceStreamWriter(DataSourceStreamArrowWriter):
    """Exactly once (``exactlyOnce=true``): each task writes its part of a micro-batch in one
    transaction that also commits the batch id; a task run again for a batch already committed
    writes nothing (pipeline/eos.py says how)."""

    def __init__(self, opts: WriteOptions):
        self.opts = opts

    def write(self, iterator) -> EosCommitMessage:
        outcome = eos_writer.write_exactly_once(self.opts, current_task_batch(), iterator)
        return EosCommitMessage(outcome.records, outcome.skipped)

    def commit(self, messages, batchId: int) -> None:
        # Every task committed its own transaction already; this is the log line only.
        done = [m for m in messages if isinstance(m, EosCommitMessage)]
        log.info("exactly-once sink: batch %d: %d records, %d of %d tasks had it committed already",
                 batchId, sum(m.records for m in done), sum(m.skipped for m in done), len(messages))

    def abort(self, messages, batchId: int) -> None:
        # Tasks that committed keep their records and their marks: run again, they write nothing.
        pass


def current_task_batch() -> TaskBatch:
    """The running task's query id, batch id and partition, from Spark's task context: PySpark
    4.3 calls a stream writer's write() with the rows only, but every task of a micro-batch
    carries the query's local properties, the batch id among them."""
    from pyspark import TaskContext
    ctx = TaskContext.get()
    query_id = ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx is not None else None
    batch_id = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
    if ctx is None or not query_id or batch_id is None:
        raise SamsaOptionError(f"Option 'exactlyOnce': the task does not know its streaming query and "
                               f"micro-batch (Spark task properties '{QUERY_ID_PROPERTY}', "
                               f"'{BATCH_ID_PROPERTY}'); the exactly-once sink runs in micro-batch "
                               f"streaming queries only")
    return TaskBatch(query_id=query_id, batch_id=int(batch_id), partition=ctx.partitionId())
