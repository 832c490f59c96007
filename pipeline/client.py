"""The Kafka client side of the data source: confluent-kafka (librdkafka) in driver and executors.

Why confluent-kafka: it is the maintained Python binding of librdkafka, the C client that
Confluent keeps feature-complete with the Java client (ListOffsets by timestamp, idempotent
producer, transactions for the exactly-once sink to come, every security option), and its
fetch path runs in C threads with prefetching, so a Spark task is limited by Arrow conversion,
not by the wire. kafka-python and aiokafka are pure Python (several times slower per record);
samsa's own client core is for the broker's internal use and its tests, and the data source
must work against any Kafka broker. Everything here goes over the wire; nothing imports the
broker.

Driver: ``plan_batch`` lists the topics, picks the partitions for ``subscribe`` /
``subscribePattern`` / ``assign``, resolves starting and ending offsets (earliest/latest and
timestamps through ListOffsets: ``offsets_for_times``) and returns resolved offset ranges.
Executors: ``read_range`` reads one range directly (assign + seek, no group membership, no
commits) and yields Arrow batches; ``write_batches`` produces rows and flushes before the task
ends. ``OffsetReader`` is the streaming reader's driver side (the same listing and resolving,
one consumer kept for the whole query); its executors read with ``read_range`` too.
"""

from __future__ import annotations

import bisect
import logging
import re
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any, Iterable, Iterator, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from .arrow import BatchBuilder
from .options import (
    EARLIEST, LATEST, Assign, Earliest, GlobalTimestamp, Latest, OffsetSpec, ReadOptions,
    SamsaOptionError, SpecificOffsets, SpecificTimestamps, Subscribe, SubscribePattern,
    WriteOptions, tp_str,
)
from .ranges import OffsetRange, sort_ranges, split_ranges

# Message.offset is Optional in the stubs (a message being produced has none yet); a consumed
# record has its offset, and librdkafka's partition-EOF event the log's end: this alias says
# so, cast once (Message.offset is called per record on the read path).
_offset = cast(Callable[[Message], int], Message.offset)

rdkafka_log = logging.getLogger("pipeline.librdkafka")

# Kafka's internal topics, which AdminClient.listTopics() leaves out (so subscribePattern does).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})

# Rows per Arrow batch handed to Spark (spark.sql.execution.arrow.maxRecordsPerBatch's default).
BATCH_ROWS = 10_000

# The executors' librdkafka fetch.queue.backoff.ms unless kafka.fetch.queue.backoff.ms says otherwise
# (see consumer_config).
EXECUTOR_FETCH_QUEUE_BACKOFF_MS = "10"
# An executor reading at least LARGE_RANGE_RECORDS records fetches up to LARGE_RANGE_FETCH_BYTES
# per request (librdkafka's max.partition.fetch.bytes, 1 MB by default) unless
# kafka.max.partition.fetch.bytes says otherwise.
LARGE_RANGE_RECORDS = 10_000
LARGE_RANGE_FETCH_BYTES = str(10 * 1024 * 1024)

# Messages per consume() call in the executors. The messages of one call are taken apart
# column-wise right after it; while they still sit in the CPU cache (500 records of 1 KiB fit in
# a 1 MB L2) that costs a quarter less than for 10k records at once, which have left it by the
# time they are walked again: main thread 0.57 -> 0.41 s for 250k records of 1 KiB, in one process.
CONSUME_BATCH = 500

# Driver-side metadata and ListOffsets calls wait at most this long (or kafkaConsumer.pollTimeoutMs
# when it is shorter), retried the way Spark's fetchOffset.numRetries does.
DRIVER_TIMEOUT_S = 60.0


class KafkaSourceError(RuntimeError):
    """The broker could not be reached or does not have what the options ask for."""


class DataLossError(KafkaSourceError):
    """Records the query was to read are no longer in the partition (failOnDataLoss=true)."""


DATA_LOSS_HINT = (
    "Some data may have been lost because they are not available in Kafka any more; either the "
    "data was aged out by Kafka or the topic may have been deleted before all the data in the topic "
    "was processed. If you don't want your query to fail on such cases, set the source option "
    "failOnDataLoss to false.")


# ---------------------------------------------------------------------------------------------
# Clients

_UNKNOWN_PROPERTY = re.compile(r'No such configuration property: "([^"]+)"')


def _client(cls, conf: dict, what: str):
    try:
        return cls(conf)
    except KafkaException as e:
        text = str(e.args[0].str() if e.args and isinstance(e.args[0], KafkaError) else e)
        m = _UNKNOWN_PROPERTY.search(text)
        if m:
            raise SamsaOptionError(f"Option 'kafka.{m.group(1)}' is not a setting of the Kafka client "
                                   f"(librdkafka) the samsa source uses: {text}") from None
        raise SamsaOptionError(f"The 'kafka.*' options do not make a valid {what} configuration: {text}") from None


def consumer_config(opts: ReadOptions, role: str, range_records: int = 0) -> dict:
    """librdkafka's configuration for the driver or an executor (reading ``range_records``)."""
    conf = dict(opts.client_options)
    # Java's default (and so Spark's); librdkafka's own default is read_committed.
    conf.setdefault("isolation.level", "read_uncommitted")
    if role == "executor":
        # A task drains its prefetch queue as fast as librdkafka fills it. When the queue is full
        # (queued.max.messages.kbytes, 64 MB by default), librdkafka postpones the partition's
        # next fetch by fetch.queue.backoff.ms, 1 s by default, and does not fetch again sooner
        # once the task has emptied the queue: a task reading more than 64 MB sat idle up to 1 s
        # each time (measured: 250k records of 1 KiB, 0.83-0.96 s gaps, 83-146k rows/s -> 190-260k).
        conf.setdefault("fetch.queue.backoff.ms", EXECUTOR_FETCH_QUEUE_BACKOFF_MS)
        if range_records >= LARGE_RANGE_RECORDS:
            # Fewer, larger fetches for a long range: a tenth of the Fetch requests for the
            # broker to serve (samsa's CPU for 1M records of 1 KiB: 0.45-0.6 -> 0.2-0.25 s).
            # Not for short ranges (streaming micro-batches): a fetch returns up to this much
            # past the range's end, read for nothing.
            conf.setdefault("max.partition.fetch.bytes", LARGE_RANGE_FETCH_BYTES)
    conf.update({
        # librdkafka insists on a group id; it is never joined (assign only) and nothing is committed.
        "group.id": f"{opts.group_id}-{role}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "error",          # an offset out of range is data loss, never a silent jump
        "enable.partition.eof": True,
        "allow.auto.create.topics": False,
        "logger": rdkafka_log,
    })
    return conf


def _consumer(opts: ReadOptions, role: str, range_records: int = 0) -> Consumer:
    return _client(Consumer, consumer_config(opts, role, range_records), "consumer")


def producer_config(opts: WriteOptions) -> dict:
    conf = dict(opts.client_options)
    # Idempotent by default: a retried send inside one task does not duplicate or reorder records.
    conf.setdefault("enable.idempotence", "true")
    # The Java client's default partitioner, so keyed rows land where Spark's Kafka sink puts them.
    conf.setdefault("partitioner", "murmur2_random")
    # The Java producer's delivery.timeout.ms default (librdkafka's own is 300 s).
    if "delivery.timeout.ms" not in conf and "message.timeout.ms" not in conf:
        conf["message.timeout.ms"] = "120000"
    conf["logger"] = rdkafka_log
    return conf


def check_producer_options(opts: WriteOptions) -> None:
    """Let librdkafka judge the ``kafka.*`` options in the driver, before any write task starts."""
    producer = _client(Producer, producer_config(opts), "producer")
    producer.flush(0)
    del producer


def _kafka_error(e: BaseException) -> str:
    if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
        err = e.args[0]
        return f"{err.name()}: {err.str()}"
    return str(e)


# ---------------------------------------------------------------------------------------------
# Driver: partitions and offsets

def _driver_timeout(opts: ReadOptions) -> float:
    return min(DRIVER_TIMEOUT_S, opts.poll_timeout_ms / 1000.0)


def _metadata(consumer: Consumer, opts: ReadOptions):
    timeout = _driver_timeout(opts)
    try:
        return consumer.list_topics(timeout=timeout)
    except KafkaException as e:
        raise KafkaSourceError(
            f"Cannot get metadata from the Kafka brokers at kafka.bootstrap.servers="
            f"'{opts.bootstrap_servers}' within {timeout:g} s ({_kafka_error(e)}). "
            "Is the broker running and reachable from the Spark driver?") from None


def list_partitions(consumer: Consumer, opts: ReadOptions, *, missing_ok: bool = False) -> list[tuple[str, int]]:
    """The topic-partitions the strategy names, checked against the cluster's metadata.

    ``missing_ok`` (streaming): a subscribed topic that does not exist yet has no partitions,
    as a Kafka consumer's subscription waits for it; its partitions are new ones once it exists."""
    strategy = opts.strategy
    for attempt in range(3):
        md = _metadata(consumer, opts)
        transient = [t for t, tm in md.topics.items()
                     if tm.error is not None and tm.error.retriable()]
        if not transient:
            break
        time.sleep(1.0)
    topics = {name: tm for name, tm in md.topics.items() if tm.error is None}

    def missing(topic: str, option: str) -> KafkaSourceError:
        return KafkaSourceError(
            f"Topic '{topic}' (option '{option}') does not exist on the Kafka brokers at "
            f"kafka.bootstrap.servers='{opts.bootstrap_servers}'")

    if isinstance(strategy, Subscribe):
        out: list[tuple[str, int]] = []
        for topic in strategy.topics:
            if topic not in topics:
                if missing_ok:
                    continue
                raise missing(topic, "subscribe")
            out.extend((topic, p) for p in sorted(topics[topic].partitions))
        return out
    if isinstance(strategy, SubscribePattern):
        pattern = re.compile(strategy.pattern)
        return [(t, p) for t in sorted(topics) if t not in INTERNAL_TOPICS and pattern.fullmatch(t)
                for p in sorted(topics[t].partitions)]
    assert isinstance(strategy, Assign)
    for topic, part in strategy.partitions:
        if topic not in topics:
            raise missing(topic, "assign")
        if part not in topics[topic].partitions:
            raise KafkaSourceError(
                f"Partition {tp_str((topic, part))} (option 'assign') does not exist: topic '{topic}' "
                f"has partitions {sorted(topics[topic].partitions)}")
    return list(strategy.partitions)


def _list_offsets(consumer: Consumer, opts: ReadOptions, query: dict) -> dict:
    """ListOffsets for ``{tp: timestamp}`` (-2 earliest, -1 latest): ``{tp: offset or -1}``."""
    if not query:
        return {}
    timeout = _driver_timeout(opts)
    tps = [TopicPartition(t, p, ts) for (t, p), ts in query.items()]
    result = _retrying(lambda left: consumer.offsets_for_times(tps, timeout=left), timeout,
                       lambda r: next((tp.error for tp in r if tp.error is not None), None),
                       lambda why: f"ListOffsets for {', '.join(tp_str(tp) for tp in query)} failed at "
                                   f"kafka.bootstrap.servers='{opts.bootstrap_servers}': {why}")
    return {(tp.topic, tp.partition): tp.offset for tp in result}


# Errors that say a broker or a leader went away, not that the call cannot succeed: librdkafka
# finds the new leader (seen when a leader is killed: _DESTROY_BROKER from ListOffsets, which
# librdkafka does not call retriable). Reads wait up to kafkaConsumer.pollTimeoutMs meanwhile.
TRANSIENT_ERRORS = frozenset({
    KafkaError._TRANSPORT, KafkaError._DESTROY_BROKER, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE, KafkaError._TIMED_OUT,
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.REQUEST_TIMED_OUT,
    KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH,
})


# How long to wait between retries of a call that failed with a retriable error (a leader moving,
# a broker restarting); Spark's Kafka source retries its offset requests the same way
# (fetchOffset.numRetries, fetchOffset.retryIntervalMs) before failing the query.
RETRY_INTERVAL_S = 0.5
ATTEMPT_TIMEOUT_S = 10.0


def _retrying(call, timeout: float, error_of, message):
    """``call(time_left)`` until it succeeds, retrying retriable errors (raised, or reported by
    ``error_of(result)``) within ``timeout`` seconds; then KafkaSourceError(``message(why)``)."""
    deadline = time.monotonic() + timeout
    while True:
        # One attempt never takes the whole time: a request sent to a leader that has just died
        # waits for its connection, while the next attempt goes to the new leader.
        left = min(max(deadline - time.monotonic(), 0.1), ATTEMPT_TIMEOUT_S)
        try:
            result = call(left)
            err = error_of(result)
        except KafkaException as e:
            err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
            if err is None:
                raise KafkaSourceError(message(_kafka_error(e))) from None
        if err is None:
            return result
        if not (err.retriable() or err.code() in TRANSIENT_ERRORS) or time.monotonic() + RETRY_INTERVAL_S >= deadline:
            raise KafkaSourceError(message(f"{err.name()}: {err.str()}")) from None
        time.sleep(RETRY_INTERVAL_S)


def resolve_offsets(consumer: Consumer, opts: ReadOptions, spec: OffsetSpec, tps: list, *,
                    starting: bool, option: str) -> dict:
    """Offsets for every topic-partition in ``tps`` (Spark's KafkaOffsetReaderAdmin.fetchPartitionOffsets)."""
    if isinstance(spec, Earliest):
        return _list_offsets(consumer, opts, {tp: EARLIEST for tp in tps})
    if isinstance(spec, Latest):
        return _list_offsets(consumer, opts, {tp: LATEST for tp in tps})
    if isinstance(spec, SpecificOffsets):
        if set(spec.offsets) != set(tps):
            raise SamsaOptionError(
                f"If {option} contains specific offsets, you must specify all TopicPartitions.\n"
                "Use -1 for latest, -2 for earliest, if you don't care.\n"
                f"Specified: {_set(spec.offsets)} Assigned: {_set(tps)}")
        out = dict(spec.offsets)
        for sentinel in (EARLIEST, LATEST):
            out.update(_list_offsets(consumer, opts, {tp: sentinel for tp, off in out.items() if off == sentinel}))
        return out
    if isinstance(spec, SpecificTimestamps):
        if set(spec.timestamps) != set(tps):
            raise SamsaOptionError(
                f"If {option} contains specific offsets, you must specify all topics. "
                f"Specified: {_set(spec.timestamps)} Assigned: {_set(tps)}")
        timestamps = dict(spec.timestamps)
    else:
        assert isinstance(spec, GlobalTimestamp)
        timestamps = {tp: spec.timestamp for tp in tps}
    found = _list_offsets(consumer, opts, timestamps)
    no_match = [tp for tp, off in found.items() if off < 0]
    if no_match:
        if starting and spec.strategy == "error":
            tp = sorted(no_match)[0]
            raise KafkaSourceError(f"No offset matched from request of topic-partition {tp_str(tp)} and "
                                   f"timestamp {timestamps[tp]}. (option '{option}'; set "
                                   "startingOffsetsByTimestampStrategy=latest to start from the latest "
                                   "offset instead)")
        found.update(_list_offsets(consumer, opts, {tp: LATEST for tp in no_match}))
    return found


def _set(tps) -> str:
    return "Set(" + ", ".join(tp_str(tp) for tp in sorted(tps)) + ")"


def _option_name(spec: OffsetSpec, starting: bool) -> str:
    prefix = "starting" if starting else "ending"
    if isinstance(spec, GlobalTimestamp):
        return f"{prefix}Timestamp"
    if isinstance(spec, SpecificTimestamps):
        return f"{prefix}OffsetsByTimestamp"
    return f"{prefix}Offsets"


def plan_batch(opts: ReadOptions) -> list[OffsetRange]:
    """The offset ranges of a batch read, split for minPartitions; one Spark partition each."""
    if opts.ending is None:  # (parse_read_options always sets one; parse_stream_options none)
        raise ValueError("plan_batch needs a batch query's options: they have no ending offsets")
    ending = opts.ending
    consumer = _consumer(opts, "driver")
    try:
        tps = list_partitions(consumer, opts)
        start = resolve_offsets(consumer, opts, opts.starting, tps, starting=True,
                                option=_option_name(opts.starting, True))
        end = resolve_offsets(consumer, opts, ending, tps, starting=False,
                              option=_option_name(ending, False))
    finally:
        consumer.close()
    ranges = []
    for tp in tps:
        s, e = start[tp], end[tp]
        if s > e:
            raise KafkaSourceError(
                f"The resolved start offset {s} is greater than the resolved end offset {e} for topic "
                f"{tp[0]} partition {tp[1]}. There may be multiple reasons: 1. Start offset is set to "
                "too big a value that after resolution, end offset is smaller than it (a start timestamp "
                "with an end offset, a start offset with an end timestamp, or a start offset with end "
                "latest). 2. The Kafka topic partition is broken.")
        ranges.append(OffsetRange(tp[0], tp[1], s, e))
    return sort_ranges(split_ranges(ranges, opts.min_partitions))


class OffsetReader:
    """The driver's partitions and offsets for a streaming query: one consumer kept across triggers.

    The stream reader lives in one long-running Python worker of the driver for the whole query,
    so the consumer (its connections and metadata) is made once, on first use. PySpark also
    pickles the reader to the executors, where this is never used: the consumer is not pickled.
    """

    def __init__(self, opts: ReadOptions):
        self.opts = opts
        self._consumer: Consumer | None = None

    def __getstate__(self):
        return {"opts": self.opts, "_consumer": None}

    def _client(self) -> Consumer:
        if self._consumer is None:
            self._consumer = _consumer(self.opts, "driver")
        return self._consumer

    def _call(self, fn):
        """``fn(consumer)``; when it fails, once more with a new consumer (as Spark's offset reader
        resets its admin client between retries): one whose brokers died can stay stuck on them."""
        try:
            return fn(self._client())
        except KafkaSourceError as e:
            logging.getLogger(__name__).warning("%s; retrying with a new client", e)
            self.close()
            return fn(self._client())

    def partitions(self) -> list[tuple[str, int]]:
        return self._call(lambda c: list_partitions(c, self.opts, missing_ok=True))

    def starting(self, tps: list) -> dict:
        """Where a new query starts: the startingOffsets / startingTimestamp options resolved."""
        spec = self.opts.starting
        return self._call(lambda c: resolve_offsets(c, self.opts, spec, tps, starting=True,
                                                    option=_option_name(spec, True)))

    def earliest(self, tps) -> dict:
        return self._call(lambda c: _list_offsets(c, self.opts, {tp: EARLIEST for tp in tps}))

    def latest(self, tps) -> dict:
        return self._call(lambda c: _list_offsets(c, self.opts, {tp: LATEST for tp in tps}))

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


# ---------------------------------------------------------------------------------------------
# Executors: read one range


def _wire_reader() -> ModuleType | None:
    """pipeline/wire_reader.py, or None where samsa's wire client is not installed: the
    pipeline image (deploy/pipeline/Dockerfile) ships pipeline/ alone and reads with
    confluent-kafka."""
    global _said_no_wire_reader
    try:
        from . import wire_reader
    except ImportError as e:
        if not _said_no_wire_reader:
            logging.getLogger(__name__).warning(
                "samsa's wire client is not installed (%s): the samsa source reads with "
                "confluent-kafka", e)
            _said_no_wire_reader = True
        return None
    return wire_reader


_said_no_wire_reader = False


def read_range(opts: ReadOptions, rng: OffsetRange, batch_rows: int = BATCH_ROWS) -> Iterator:
    """Records ``[rng.start, rng.end)`` of one partition as Arrow RecordBatches: through samsa's
    wire reader, or confluent-kafka where it is missing or cannot serve the options."""
    if rng.size <= 0:
        return
    wire_reader = _wire_reader()
    if wire_reader is not None and wire_reader.wanted():
        why = wire_reader.unsupported(opts)
        if why is None:
            yield from wire_reader.read_range_wire(opts, rng, batch_rows)
            return
        logging.getLogger(__name__).info("reading %s-%d with confluent-kafka: %s", rng.topic,
                                         rng.partition, why)
    yield from read_range_librdkafka(opts, rng, batch_rows)


# How long one consume() of the confluent-kafka reader waits for a record. Between two, the
# reader looks whether librdkafka's position has passed the range's end without a record (see
# read_range_librdkafka): the longest a range whose last offsets hold none can wait is this.
CONSUME_WAIT_S = 0.1


def read_range_librdkafka(opts: ReadOptions, rng: OffsetRange, batch_rows: int = BATCH_ROWS, *,
                          wait_s: float = CONSUME_WAIT_S) -> Iterator:
    """``read_range`` through a confluent-kafka consumer of its own (assign, no group).

    A range's last offsets may hold no record: a transaction's marker, aborted records under
    read_committed, a gap left by compaction. Its last record does not end the read then, and
    consume() returns only once it has as many records as asked for (or at its timeout):
    asking for the rest of the range at once waited out the whole timeout, for every such
    range (1 s per partition and task: streaming micro-batches over transactional topics
    stalled). So it asks for one record (any record or event wakes it), takes what else is
    queued without waiting, and then reads librdkafka's position, which moves past control
    records (so past aborted data too, up to its abort marker) as consume() serves them
    (rd_kafka_q_serve_rkmessages, librdkafka 2.x): at or past the end, the range is read.
    Otherwise a record past the end ends it (after a compaction gap: the position follows
    records only), or the end of the partition (enable.partition.eof), which comes one Fetch
    later, a Fetch the broker holds up to fetch.wait.max.ms."""
    if rng.size <= 0:
        return
    where = f"topic-partition {rng.topic}-{rng.partition}"
    poll_timeout = opts.poll_timeout_ms / 1000.0
    consumer = _consumer(opts, "executor", rng.size)
    try:
        start, end = rng.start, rng.end
        low, high = _retrying(
            lambda left: consumer.get_watermark_offsets(TopicPartition(rng.topic, rng.partition),
                                                        timeout=left, cached=False),
            poll_timeout, lambda r: None,
            lambda why: f"Cannot get the offsets of {where} from kafka.bootstrap.servers="
                        f"'{opts.bootstrap_servers}': {why}")
        if start < low or end > high:
            lost = f"offsets [{start}, {end}) were to be read, the partition now holds [{low}, {high})"
            if opts.fail_on_data_loss:
                raise DataLossError(f"{DATA_LOSS_HINT} Could not read records of {where}: {lost}.")
            log = logging.getLogger(__name__)
            log.warning("failOnDataLoss=false: skipping missing records of %s: %s", where, lost)
            start, end = max(start, low), min(end, high)
            if start >= end:
                return
        tp = TopicPartition(rng.topic, rng.partition)
        consumer.assign([TopicPartition(rng.topic, rng.partition, start)])
        builder = BatchBuilder(rng.topic, rng.partition, opts.include_headers)
        position = start         # after the last record taken
        served = start           # librdkafka's position: after the last record or control record
        # librdkafka's position only grows, and a seek resets it later, in librdkafka's own
        # thread: after one (a transient error, rare) the read ends on a record or EOF only.
        by_position = True
        last_progress = time.monotonic()
        done = False
        while not done:
            # Ask for what the current batch still lacks, so batches hold exactly batch_rows rows,
            # CONSUME_BATCH at a time: the first record or event, then whatever else is queued.
            want = min(batch_rows - len(builder), end - position, CONSUME_BATCH)
            msgs = consumer.consume(num_messages=1, timeout=min(wait_s, poll_timeout))
            if msgs and want > 1:
                msgs += consumer.consume(num_messages=want - 1, timeout=0)
            if not msgs:
                now = consumer.position([tp])[0].offset if by_position else served
                if now >= end:
                    break        # the range's last offsets hold no record
                if now > served:
                    served, last_progress = now, time.monotonic()
                elif time.monotonic() - last_progress > poll_timeout:
                    raise KafkaSourceError(
                        f"No records from {where} at offset {position} (reading [{start}, {end})) within "
                        f"kafkaConsumer.pollTimeoutMs={opts.poll_timeout_ms}")
                continue
            last_progress = time.monotonic()
            # The records before the first error (usually all of them), taken column-wise.
            errors = list(map(Message.error, msgs))
            # (not errors.count(None): KafkaError.__eq__ raises TypeError when given None)
            first_error = next((i for i, e in enumerate(errors) if e is not None), len(msgs))
            good = msgs if first_error == len(msgs) else msgs[:first_error]
            if good:
                offsets = list(map(_offset, good))
                if offsets[-1] >= end:       # past the range (offsets only grow): keep those below
                    keep = bisect.bisect_left(offsets, end)
                    good, offsets = good[:keep], offsets[:keep]
                    done = True
                if good:
                    builder.extend(good, offsets)
                    position = offsets[-1] + 1
                if position >= end:
                    done = True
            err = errors[first_error] if first_error < len(msgs) else None
            if not done and err is not None:
                m = msgs[first_error]
                if err.code() == KafkaError._PARTITION_EOF:
                    # At or past the end: done. Below it: the log was truncated since planning.
                    if _offset(m) < end and opts.fail_on_data_loss:
                        raise DataLossError(f"{DATA_LOSS_HINT} Could not read records of {where}: "
                                            f"offsets up to {end} were to be read, the log ends at {_offset(m)}.")
                    done = True
                elif err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    if opts.fail_on_data_loss:
                        raise DataLossError(f"{DATA_LOSS_HINT} Could not read records of {where} "
                                            f"from offset {position}: {err.str()}")
                    done = True
                elif err.retriable() or err.code() in TRANSIENT_ERRORS:
                    # A leader moving or a broker going away: librdkafka finds the new leader.
                    # Records after the error in this call were not taken: read them again.
                    logging.getLogger(__name__).warning("reading %s at offset %d: %s (retrying)",
                                                        where, position, err.str())
                    consumer.seek(TopicPartition(rng.topic, rng.partition, position))
                    by_position = False
                else:
                    raise KafkaSourceError(f"Reading {where} at offset {position} failed: {err.name()}: {err.str()}")
            elif not done and by_position:
                served = consumer.position([tp])[0].offset
                done = served >= end
            if len(builder) >= batch_rows:
                yield builder.flush()
        if len(builder):
            yield builder.flush()
    finally:
        consumer.close()


# ---------------------------------------------------------------------------------------------
# Executors: write

def _bytes_column(batch, name: str) -> list:
    if name not in batch.schema.names:
        return [None] * batch.num_rows
    return [v.encode("utf-8") if isinstance(v, str) else v for v in batch.column(name).to_pylist()]


_UNIT_TO_MS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}


def _timestamps_ms(batch) -> list:
    if "timestamp" not in batch.schema.names:
        return [None] * batch.num_rows
    import pyarrow as pa
    col = batch.column("timestamp")
    if pa.types.is_timestamp(col.type):
        mul, div = _UNIT_TO_MS[col.type.unit]
        return [None if v is None else v * mul // div for v in col.cast(pa.int64()).to_pylist()]
    # DoubleType: seconds since the epoch, as Spark's cast from double to timestamp reads it.
    return [None if v is None else int(v * 1000) for v in col.to_pylist()]


# Producers kept per Python worker between tasks, as Spark's Kafka sink keeps its producers per
# executor (CachedKafkaProducer, spark.kafka.producer.cache.timeout 10 min): a new idempotent
# librdkafka producer waits about 500 ms for its producer id (its PID timer), which made every
# micro-batch of a streaming write half a second slower. Python workers run one task at a time,
# so a task's flush() waits for its own records only.
PRODUCER_IDLE_S = 600.0
_producers: dict = {}       # config key -> [Producer, last used (monotonic)]


def _producer_key(opts: WriteOptions) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in producer_config(opts).items() if k != "logger"))


def _cached_producer(opts: WriteOptions) -> tuple[tuple, Producer]:
    now = time.monotonic()
    for key in [k for k, (_, used) in _producers.items() if now - used > PRODUCER_IDLE_S]:
        _producers.pop(key)[0].flush(10)
    key = _producer_key(opts)
    entry = _producers.get(key)
    if entry is None:
        entry = _producers[key] = [_client(Producer, producer_config(opts), "producer"), now]
    entry[1] = now
    return key, entry[0]


def write_batches(opts: WriteOptions, batches: Iterable) -> int:
    """Produce every row of ``batches``; returns the count once all are acknowledged."""
    key, producer = _cached_producer(opts)
    try:
        return produce_all(opts, producer, batches)
    except BaseException:
        # A failed task may leave the producer in a state of its own (a fatal idempotence
        # error, records still queued): the next task starts a fresh one.
        _producers.pop(key, None)
        raise


def produce_all(opts: WriteOptions, producer: Producer, batches: Iterable) -> int:
    """Produce every row with ``producer`` and flush; fails naming the topic and partition unless
    every record was acknowledged. The exactly-once sink calls it inside a transaction."""
    failure: list = []
    sent = 0

    def on_delivery(err, msg):
        if err is not None and not failure:
            failure.append((msg.topic(), msg.partition(), err))

    def check():
        if failure:
            topic, part, err = failure[0]
            where = f"topic '{topic}' partition {part}" if part is not None and part >= 0 else f"topic '{topic}'"
            raise KafkaSourceError(f"Writing to Kafka failed: delivery to {where} failed: "
                                   f"{err.name()}: {err.str()} (kafka.bootstrap.servers="
                                   f"'{opts.bootstrap_servers}')")

    for batch in batches:
        n = batch.num_rows
        names = batch.schema.names
        keys = _bytes_column(batch, "key")
        values = _bytes_column(batch, "value")
        topics = [opts.topic] * n if opts.topic is not None else batch.column("topic").to_pylist()
        parts = batch.column("partition").to_pylist() if "partition" in names else [None] * n
        headers = batch.column("headers").to_pylist() if "headers" in names else [None] * n
        stamps = _timestamps_ms(batch)
        for i in range(n):
            topic = topics[i]
            if topic is None:
                raise KafkaSourceError("The Kafka message data sent to the producer contains a null topic. "
                                       "Use the `topic` option for setting a default topic.")
            kw: dict[str, Any] = {}  # produce()'s optional arguments, each of its own type
            if parts[i] is not None:
                kw["partition"] = parts[i]
            if stamps[i] is not None:
                kw["timestamp"] = stamps[i]
            row_headers = headers[i]
            if row_headers:
                kw["headers"] = [(h["key"], h["value"]) for h in row_headers]
            while True:
                try:
                    producer.produce(topic, value=values[i], key=keys[i], on_delivery=on_delivery, **kw)
                    break
                except BufferError:
                    producer.poll(0.05)     # local queue full: serve delivery reports, then retry
                except KafkaException as e:
                    where = f"topic '{topic}'" + (f" partition {parts[i]}" if parts[i] is not None
                                                  else "")
                    raise KafkaSourceError(f"Writing to Kafka failed: producing to {where} "
                                           f"failed: {_kafka_error(e)}") from None
            sent += 1
        producer.poll(0)
        check()
    remaining = producer.flush()
    check()
    if remaining:
        raise KafkaSourceError(f"Writing to Kafka failed: {remaining} records were still undelivered "
                               f"after flush (kafka.bootstrap.servers='{opts.bootstrap_servers}')")
    return sent
