"""The exactly-once streaming sink's task: one Kafka transaction per micro-batch and task partition.

confluent-kafka (librdkafka) in the executors, over the wire only; the bookkeeping (ids, the
"already written" decision) is pipeline/eos.py. One task, in this order:

1. a transactional producer with ``transactional.id = <prefix>-<task partition>``;
   ``init_transactions`` fences every earlier producer with that id: an attempt of this task
   still running somewhere (a zombie), or one that died with its transaction open, which the
   coordinator aborts now instead of when it times out;
2. only then (a fenced zombie can no longer commit) read the mark: the committed offset of the
   group ``<prefix>-<task partition>`` on the marker topic's partition 0, with read_committed so
   the broker answers with stable offsets only;
3. the batch is already written: write nothing. Otherwise begin, produce every row, commit the
   mark with ``send_offsets_to_transaction`` (batch id + 1, the query id as metadata), commit.

A new producer per task, not one kept per Python worker as the at-least-once sink does: the
same task partition runs in different Python workers from one batch to the next, each one's
``init_transactions`` fences the producer another worker keeps, and a fenced producer is dead.
A task with no rows starts no transaction: run again, it writes nothing either.
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass
from typing import Iterable, Iterator

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from .client import KafkaSourceError, _client, _kafka_error, produce_all, producer_config, rdkafka_log
from .eos import (
    MARKER_PARTITION, Mark, TaskBatch, already_written, mark_for, marker_group, prefix_for,
    transactional_id,
)
from .options import ExactlyOnce, SamsaOptionError, WriteOptions

log = logging.getLogger(__name__)

# How long one transactional call (init, send offsets, commit, abort) may take: the coordinator
# may be loading its partition, or finishing the transaction a dead attempt left.
CALL_TIMEOUT_S = 120.0

# Kafka's (and librdkafka's) default transaction.timeout.ms.
DEFAULT_TRANSACTION_TIMEOUT_MS = "60000"


class ExactlyOnceWriteError(KafkaSourceError):
    """A transactional write failed; the task fails and Spark runs it again (or fails the query)."""


@dataclass(frozen=True)
class TaskOutcome:
    records: int        # written (and committed) by this task
    skipped: bool       # the batch was already committed by an earlier attempt


def _eo(opts: WriteOptions) -> ExactlyOnce:
    if opts.exactly_once is None:
        raise SamsaOptionError("the exactly-once writer needs 'exactlyOnce' set to 'true'")
    return opts.exactly_once


def transactional_producer_config(opts: WriteOptions, txn_id: str) -> dict:
    conf = producer_config(opts)
    conf["transactional.id"] = txn_id
    conf["enable.idempotence"] = "true"
    conf.setdefault("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS)
    # librdkafka refuses a message timeout longer than the transaction's; the at-least-once
    # sink's default (120 s, the Java producer's delivery.timeout.ms) only fits a longer one.
    if "delivery.timeout.ms" not in opts.client_options and "message.timeout.ms" not in opts.client_options:
        conf["message.timeout.ms"] = str(min(120_000, int(conf["transaction.timeout.ms"])))
    return conf


# The producer settings users pass most often: left out of the marker consumer's config, where
# librdkafka would warn about each one on every task.
PRODUCER_ONLY_KEYS = frozenset({
    "acks", "request.required.acks", "linger.ms", "queue.buffering.max.ms", "batch.size",
    "batch.num.messages", "compression.type", "compression.codec", "enable.idempotence", "retries",
    "message.send.max.retries", "message.timeout.ms", "delivery.timeout.ms", "transaction.timeout.ms",
    "queue.buffering.max.messages", "queue.buffering.max.kbytes", "partitioner", "max.in.flight",
    "max.in.flight.requests.per.connection", "retry.backoff.ms",
})


def marker_consumer_config(opts: WriteOptions, group: str) -> dict:
    # The kafka.* options as given (security settings apply to this client too). The group is
    # never joined: it holds the mark only.
    conf = {k: v for k, v in opts.client_options.items() if k not in PRODUCER_ONLY_KEYS}
    conf.update({
        "group.id": group,
        "isolation.level": "read_committed",    # OffsetFetch asks for stable offsets only
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "allow.auto.create.topics": False,
        "logger": rdkafka_log,
    })
    return conf


# Marker topics found, per driver-side Python worker: PySpark calls streamWriter() again for the
# commit of every micro-batch, and one metadata request per query is enough (the tasks' own
# requests fail, naming the topic, if it is deleted later).
_marker_topics_seen: set = set()


def check_marker_topic(opts: WriteOptions, timeout: float = 30.0) -> None:
    """In the driver, before any task: the marks need the marker topic to exist."""
    eo = _eo(opts)
    if (opts.bootstrap_servers, eo.marker_topic) in _marker_topics_seen:
        return
    admin = _client(AdminClient, {**opts.client_options, "logger": rdkafka_log}, "admin client")
    option = "exactlyOnceMarkerTopic" if eo.marker_topic != opts.topic else "topic"
    try:
        # Every topic: asking for this one by name lets a broker create it (auto.create.topics.enable).
        md = admin.list_topics(timeout=timeout)
    except KafkaException as e:
        raise ExactlyOnceWriteError(f"Could not look up the marker topic '{eo.marker_topic}' (option "
                                    f"'{option}') at kafka.bootstrap.servers='{opts.bootstrap_servers}': "
                                    f"{_kafka_error(e)}") from None
    topic = md.topics.get(eo.marker_topic)
    if topic is None or topic.error is not None or MARKER_PARTITION not in topic.partitions:
        why = topic.error.str() if topic is not None and topic.error is not None else "no such topic"
        raise SamsaOptionError(f"Option '{option}': the exactly-once sink keeps its committed batch ids "
                               f"on partition {MARKER_PARTITION} of topic '{eo.marker_topic}', which "
                               f"does not exist ({why}). Create the topic first.")
    _marker_topics_seen.add((opts.bootstrap_servers, eo.marker_topic))


def read_mark(consumer: Consumer, marker_topic: str) -> Mark | None:
    """The group's committed offset on the marker partition, or None when it has none."""
    tp = TopicPartition(marker_topic, MARKER_PARTITION)
    [got] = consumer.committed([tp], timeout=CALL_TIMEOUT_S)
    if got.error is not None:
        raise KafkaException(got.error)
    if got.offset < 0:
        return None
    return Mark(next_batch=got.offset, query_id=got.metadata or "")


def _first_rows(batches: Iterator):
    """The first batch that has rows, or None: an empty task starts no transaction."""
    for batch in batches:
        if batch.num_rows:
            return batch
    return None


def write_exactly_once(opts: WriteOptions, task: TaskBatch, batches: Iterable) -> TaskOutcome:
    eo = _eo(opts)
    batches = iter(batches)
    first = _first_rows(batches)
    if first is None:
        return TaskOutcome(records=0, skipped=False)
    prefix = prefix_for(eo.transactional_id_prefix, task.query_id)
    txn_id = transactional_id(prefix, task.partition)
    where = (f"batch {task.batch_id}, task partition {task.partition}, transactional.id '{txn_id}' "
             f"(option 'transactionalIdPrefix'), kafka.bootstrap.servers='{opts.bootstrap_servers}'")
    step = "creating the transactional producer"
    producer = _client(Producer, transactional_producer_config(opts, txn_id), "producer")
    consumer = None
    in_transaction = False
    try:
        step = "initialising transactions (fencing earlier attempts of this task)"
        producer.init_transactions(CALL_TIMEOUT_S)
        step = (f"reading the last committed batch id (group '{marker_group(prefix, task.partition)}', "
                f"topic '{eo.marker_topic}' partition {MARKER_PARTITION}, option 'exactlyOnceMarkerTopic')")
        group = marker_group(prefix, task.partition)
        consumer = _client(Consumer, marker_consumer_config(opts, group), "consumer")
        mark = read_mark(consumer, eo.marker_topic)
        if already_written(mark, task):
            log.info("exactly-once sink: %s already committed (mark %s): nothing written", where, mark)
            for _ in batches:       # Spark hands the rows over all the same; take them
                pass
            return TaskOutcome(records=0, skipped=True)
        step = "beginning the transaction"
        producer.begin_transaction()
        in_transaction = True
        step = "producing the batch's records"
        records = produce_all(opts, producer, itertools.chain([first], batches))
        step = f"adding the batch id to the transaction (topic '{eo.marker_topic}')"
        new = mark_for(task)
        producer.send_offsets_to_transaction(
            [TopicPartition(eo.marker_topic, MARKER_PARTITION, new.next_batch, metadata=new.query_id)],
            consumer.consumer_group_metadata(), CALL_TIMEOUT_S)
        step = "committing the transaction"
        _commit(producer)
        in_transaction = False
        return TaskOutcome(records=records, skipped=False)
    except Exception as e:
        # Whatever failed (the client, or the rows, e.g. a null topic), abort now rather than
        # leave the transaction to hold read_committed readers back until it times out.
        if in_transaction:
            _abort(producer, e)
        failed = f"Exactly-once write failed while {step}"
        if isinstance(e, (KafkaException, KafkaSourceError)):
            raise ExactlyOnceWriteError(f"{failed}: {_describe(e)} ({where})") from None
        raise ExactlyOnceWriteError(f"{failed}: {type(e).__name__}: {e} ({where})") from e
    finally:
        if consumer is not None:
            consumer.close()


def _error_of(e: BaseException) -> KafkaError | None:
    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        return e.args[0]
    return None


def _commit(producer: Producer) -> None:
    """commit_transaction, again while the error says retrying may succeed (confluent-kafka's
    documented loop); an abortable or fatal error goes up."""
    deadline = time.monotonic() + CALL_TIMEOUT_S
    while True:
        try:
            producer.commit_transaction(max(1.0, deadline - time.monotonic()))
            return
        except KafkaException as e:
            err = _error_of(e)
            if err is None or not err.retriable() or time.monotonic() >= deadline:
                raise


def _abort(producer: Producer, cause: BaseException) -> None:
    """Best effort: a fenced or fatally failed producer cannot abort; the coordinator aborts its
    transaction when the next attempt initialises, or when the transaction times out."""
    err = _error_of(cause)
    if err is not None and err.fatal():
        return
    try:
        producer.abort_transaction(CALL_TIMEOUT_S)
    except KafkaException as e:
        log.warning("exactly-once sink: aborting after %s failed too: %s", _describe(cause), _kafka_error(e))


def _describe(e: BaseException) -> str:
    text = _kafka_error(e)
    err = _error_of(e)
    if err is not None and err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                          KafkaError.INVALID_PRODUCER_EPOCH):
        text += (": a newer producer with this transactional.id fenced this one (a later attempt of "
                 "this task, or another running query with the same 'transactionalIdPrefix')")
    return text
