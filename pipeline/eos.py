"""The exactly-once sink's bookkeeping: names, and whether a task's micro-batch is already written.

Pure (no client, no Spark), so the decision is tested on its own (tests/pipeline/test_eos.py).

Each task partition of the query writes through its own transactional id,
``<prefix>-<task partition>``, and inside the transaction that holds a micro-batch's records it
also commits ``batch id + 1`` as the offset of the consumer group ``<prefix>-<task partition>``
on partition 0 of the marker topic, with Spark's query id as the offset's metadata: the records
and the "batch N is written" mark become visible together, or not at all. A task that Spark runs
again (a task retry, or the whole micro-batch again after the query was restarted from its
checkpoint) first fences any earlier attempt (``init_transactions`` on the same id aborts its
open transaction and makes its later commit fail), then reads the mark: if its batch is there,
it writes nothing.

Why the query id goes with the mark: with an explicit ``transactionalIdPrefix``, a new query (a
new checkpoint, batch ids from 0 again) may reuse the prefix; the marks of the old query say
nothing about the new one's batches, and honouring them would drop its first batches.
"""

from __future__ import annotations

from dataclasses import dataclass

# Spark's local properties of every task of a micro-batch (StreamExecution.QUERY_ID_KEY and
# MicroBatchExecution.BATCH_ID_KEY): the only way the batch id reaches a Python stream writer's
# write(), which PySpark 4.3 calls with the rows alone. The query id is the one Spark keeps in
# the checkpoint's metadata file: the same for every run of the query from that checkpoint.
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"

# The partition of the marker topic that the marks are committed against (any partition that
# exists would do; every topic has a partition 0).
MARKER_PARTITION = 0


@dataclass(frozen=True)
class TaskBatch:
    """Which micro-batch a task writes, and as which of its tasks."""
    query_id: str
    batch_id: int
    partition: int          # the task's partition id: stable for a batch run again (same offsets)


@dataclass(frozen=True)
class Mark:
    """The group offset a task's last committed transaction left: ``next_batch`` = batch id + 1."""
    next_batch: int
    query_id: str


def prefix_for(explicit: str | None, query_id: str) -> str:
    return explicit if explicit is not None else f"samsa-{query_id}"


def transactional_id(prefix: str, partition: int) -> str:
    return f"{prefix}-{partition}"


def marker_group(prefix: str, partition: int) -> str:
    return f"{prefix}-{partition}"


def mark_for(task: TaskBatch) -> Mark:
    """The mark a task commits with its batch's records."""
    return Mark(next_batch=task.batch_id + 1, query_id=task.query_id)


def already_written(mark: Mark | None, task: TaskBatch) -> bool:
    """True when this task's batch (or a later one) was committed by this query: write nothing.

    A later one too: Spark only ever runs the last batch again, but if a mark is ahead it is
    because this batch's records went out with an earlier commit, not because they are missing.
    """
    return mark is not None and mark.query_id == task.query_id and mark.next_batch > task.batch_id
