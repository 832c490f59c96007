"""Options of the ``samsa`` data source: parsed and checked in the driver, no network.

The option names, defaults, precedence and error wording are those of Spark's built-in
Kafka source (``connector/kafka-0-10-sql``, ``KafkaSourceProvider`` and ``JsonUtils``), so a
pipeline moves between ``format("kafka")`` and ``format("samsa")`` by the format name alone.
Where Spark's message does not say which option it is about, ours adds the option name in
front of Spark's words.

Everything here is plain data: ``parse_read_options`` and ``parse_write_options`` turn the
(case-insensitive) option map into frozen dataclasses that pickle to the executors; the
streaming reader uses the same pieces (``parse_stream_options``: latest by default, no ending offsets).
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from dataclasses import dataclass, field
from typing import Mapping, Union

log = logging.getLogger(__name__)

# Kafka's own sentinels in the offsets JSON.
LATEST = -1
EARLIEST = -2

# Kafka's TimestampType ids, which Spark puts in the ``timestampType`` column.
NO_TIMESTAMP_TYPE = -1
CREATE_TIME = 0
LOG_APPEND_TIME = 1


class SamsaOptionError(ValueError):
    """A bad option or option combination (Spark's Kafka source raises IllegalArgumentException)."""


# ---------------------------------------------------------------------------------------------
# Offset specifications (Spark's KafkaOffsetRangeLimit)

@dataclass(frozen=True)
class Earliest:
    pass


@dataclass(frozen=True)
class Latest:
    pass


@dataclass(frozen=True)
class SpecificOffsets:
    """``{(topic, partition): offset}``; offset -2 = earliest, -1 = latest."""
    offsets: dict


@dataclass(frozen=True)
class GlobalTimestamp:
    """One timestamp (ms) for every partition read (``startingTimestamp``/``endingTimestamp``)."""
    timestamp: int
    strategy: str = "error"


@dataclass(frozen=True)
class SpecificTimestamps:
    """``{(topic, partition): timestamp_ms}`` (``starting/endingOffsetsByTimestamp``)."""
    timestamps: dict
    strategy: str = "error"


OffsetSpec = Union[Earliest, Latest, SpecificOffsets, GlobalTimestamp, SpecificTimestamps]


# ---------------------------------------------------------------------------------------------
# Which partitions to read (Spark's ConsumerStrategy)

@dataclass(frozen=True)
class Assign:
    partitions: tuple  # ((topic, partition), ...)


@dataclass(frozen=True)
class Subscribe:
    topics: tuple


@dataclass(frozen=True)
class SubscribePattern:
    pattern: str


Strategy = Union[Assign, Subscribe, SubscribePattern]


def tp_str(tp) -> str:
    """A topic-partition as Kafka's Java ``TopicPartition.toString`` prints it: ``topic-0``."""
    return f"{tp[0]}-{tp[1]}"


def _tp_set_str(tps) -> str:
    return "Set(" + ", ".join(tp_str(tp) for tp in sorted(tps)) + ")"


# ---------------------------------------------------------------------------------------------
# Option keys (lower case; options are case-insensitive)

ASSIGN = "assign"
SUBSCRIBE = "subscribe"
SUBSCRIBE_PATTERN = "subscribepattern"
STRATEGY_KEYS = (SUBSCRIBE, SUBSCRIBE_PATTERN, ASSIGN)  # Spark prints them in this order
STARTING_OFFSETS = "startingoffsets"
ENDING_OFFSETS = "endingoffsets"
STARTING_OFFSETS_BY_TIMESTAMP = "startingoffsetsbytimestamp"
ENDING_OFFSETS_BY_TIMESTAMP = "endingoffsetsbytimestamp"
STARTING_TIMESTAMP = "startingtimestamp"
ENDING_TIMESTAMP = "endingtimestamp"
STARTING_BY_TIMESTAMP_STRATEGY = "startingoffsetsbytimestampstrategy"
FAIL_ON_DATA_LOSS = "failondataloss"
MIN_PARTITIONS = "minpartitions"
MAX_OFFSETS_PER_TRIGGER = "maxoffsetspertrigger"
MIN_OFFSETS_PER_TRIGGER = "minoffsetspertrigger"
MAX_TRIGGER_DELAY = "maxtriggerdelay"
INCLUDE_HEADERS = "includeheaders"
GROUP_ID_PREFIX = "groupidprefix"
POLL_TIMEOUT_MS = "kafkaconsumer.polltimeoutms"
TOPIC = "topic"
# The exactly-once streaming sink (samsa's own; Spark's Kafka sink has no such option).
EXACTLY_ONCE = "exactlyonce"
TRANSACTIONAL_ID_PREFIX = "transactionalidprefix"
MARKER_TOPIC = "exactlyoncemarkertopic"

# How Spark spells them, for messages.
SPELLING = {
    ASSIGN: "assign", SUBSCRIBE: "subscribe", SUBSCRIBE_PATTERN: "subscribePattern",
    STARTING_OFFSETS: "startingOffsets", ENDING_OFFSETS: "endingOffsets",
    STARTING_OFFSETS_BY_TIMESTAMP: "startingOffsetsByTimestamp",
    ENDING_OFFSETS_BY_TIMESTAMP: "endingOffsetsByTimestamp",
    STARTING_TIMESTAMP: "startingTimestamp", ENDING_TIMESTAMP: "endingTimestamp",
    STARTING_BY_TIMESTAMP_STRATEGY: "startingOffsetsByTimestampStrategy",
    FAIL_ON_DATA_LOSS: "failOnDataLoss", MIN_PARTITIONS: "minPartitions",
    MAX_OFFSETS_PER_TRIGGER: "maxOffsetsPerTrigger", MIN_OFFSETS_PER_TRIGGER: "minOffsetsPerTrigger",
    MAX_TRIGGER_DELAY: "maxTriggerDelay",
    INCLUDE_HEADERS: "includeHeaders", GROUP_ID_PREFIX: "groupIdPrefix",
    POLL_TIMEOUT_MS: "kafkaConsumer.pollTimeoutMs", TOPIC: "topic",
    EXACTLY_ONCE: "exactlyOnce", TRANSACTIONAL_ID_PREFIX: "transactionalIdPrefix",
    MARKER_TOPIC: "exactlyOnceMarkerTopic",
}

# Spark's default for kafkaConsumer.pollTimeoutMs is spark.network.timeout (120 s).
DEFAULT_POLL_TIMEOUT_MS = 120_000

AUTO_OFFSET_RESET_MESSAGE = (
    "\nKafka option 'auto.offset.reset' is not supported.\n"
    "Instead set the source option 'startingoffsets' to 'earliest' or 'latest'\n"
    "to specify where to start. Structured Streaming manages which offsets are consumed\n"
    "internally, rather than relying on the kafkaConsumer to do it. This will ensure that no\n"
    "data is missed when new topics/partitions are dynamically subscribed. Note that\n"
    "'startingoffsets' only applies when a new Streaming query is started, and\n"
    "that resuming will always pick up from where the query left off. See the docs for more\n"
    "details.\n")

# Client options the source sets itself; the message says why each one is refused.
REJECTED_CONSUMER_OPTIONS = {
    # Spark 2.x refused group.id the same way; Spark 3.0+ only warns (it can use a user's group
    # id for ACLs). samsa's source never joins a group and commits nothing: offsets live in the
    # query (batch: the options; streaming: the checkpoint), so a group id would do nothing but
    # mislead.
    "group.id": ("Kafka option 'group.id' is not supported as user-specified consumer groups "
                 "are not used to track offsets: the samsa source reads each partition "
                 "directly (assign and seek, no consumer group) and keeps offsets itself. "
                 "Use the 'groupIdPrefix' option to name the internal group id."),
    "auto.offset.reset": AUTO_OFFSET_RESET_MESSAGE,
    "key.deserializer": ("Kafka option 'key.deserializer' is not supported as keys are "
                         "deserialized as byte arrays with ByteArrayDeserializer. Use DataFrame "
                         "operations to explicitly deserialize the keys."),
    "value.deserializer": ("Kafka option 'value.deserializer' is not supported as values are "
                           "deserialized as byte arrays with ByteArrayDeserializer. Use DataFrame "
                           "operations to explicitly deserialize the values."),
    # committing correctly requires new APIs in Source
    "enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    # interceptors can modify payload, so not safe
    "interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}

REJECTED_PRODUCER_OPTIONS = {
    "key.serializer": ("Kafka option 'key.serializer' is not supported as keys are serialized "
                       "with ByteArraySerializer."),
    "value.serializer": ("Kafka option 'value.serializer' is not supported as value are "
                         "serialized with ByteArraySerializer."),
    # One transactional id shared by every task would have each task fence the others.
    "transactional.id": ("Kafka option 'transactional.id' is not supported: the samsa sink makes "
                         "one transactional id per task partition. Set 'exactlyOnce' to 'true' on a "
                         "streaming write, and 'transactionalIdPrefix' to choose the ids' prefix."),
}


# ---------------------------------------------------------------------------------------------
# Parsed options

@dataclass(frozen=True)
class ReadOptions:
    bootstrap_servers: str
    strategy: Strategy
    starting: OffsetSpec
    ending: OffsetSpec | None          # None in streaming queries
    client_options: dict               # kafka.* without the prefix (bootstrap.servers included)
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_offsets_per_trigger: int | None = None   # streaming only (read limit)
    min_offsets_per_trigger: int | None = None   # streaming only
    max_trigger_delay_ms: int = 15 * 60 * 1000   # streaming only, with minOffsetsPerTrigger
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    group_id_prefix: str = "spark-kafka-relation"
    query_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def group_id(self) -> str:
        """The internal group id librdkafka needs to exist; never joined, nothing committed."""
        return f"{self.group_id_prefix}-{self.query_id}"


@dataclass(frozen=True)
class ExactlyOnce:
    """The exactly-once streaming sink's settings (``exactlyOnce=true``): see pipeline/eos.py."""
    # None: derived from Spark's query id in each task ("samsa-<query id>"), which Spark keeps in
    # the checkpoint, so it is the same for every run of the query from that checkpoint.
    transactional_id_prefix: str | None
    # The topic whose partition 0 the committed batch ids are kept against (as consumer group
    # offsets): a Kafka broker accepts offsets only for a partition that exists.
    marker_topic: str


@dataclass(frozen=True)
class WriteOptions:
    bootstrap_servers: str
    topic: str | None
    client_options: dict
    exactly_once: ExactlyOnce | None = None     # None: at least once (the default)


def lower_keys(options: Mapping[str, str]) -> dict:
    """Options are case-insensitive (Spark hands them over lower-cased already)."""
    return {str(k).lower(): ("" if v is None else str(v)) for k, v in dict(options).items()}


def client_options(options: Mapping[str, str]) -> dict:
    """``kafka.<x>`` options with the prefix dropped, for the client (librdkafka) config."""
    return {k[len("kafka."):]: v for k, v in options.items() if k.startswith("kafka.")}


def _option_error(key: str, value: str, why: str) -> SamsaOptionError:
    return SamsaOptionError(f"Invalid value '{value}' for option '{SPELLING.get(key, key)}': {why}")


def _bool(opts: dict, key: str, default: bool) -> bool:
    if key not in opts:
        return default
    v = opts[key].strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise _option_error(key, opts[key], "expected 'true' or 'false'")


def _long(opts: dict, key: str) -> int | None:
    if key not in opts:
        return None
    try:
        return int(opts[key].strip())
    except ValueError:
        raise _option_error(key, opts[key], "expected an integer") from None


def _json_object(key: str, raw: str, example: str) -> dict:
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise SamsaOptionError(f"Invalid value for option '{SPELLING[key]}': Expected e.g. {example}, got {raw}")
    return value


def parse_assign(raw: str) -> Assign:
    example = '{"topicA":[0,1],"topicB":[0,1]}'
    value = _json_object(ASSIGN, raw, example)
    tps: list[tuple[str, int]] = []
    for topic, parts in value.items():
        if not isinstance(parts, list) or not all(isinstance(p, int) and not isinstance(p, bool) for p in parts):
            raise SamsaOptionError(f"Invalid value for option 'assign': Expected e.g. {example}, got {raw}")
        tps.extend((topic, p) for p in parts)
    return Assign(tuple(dict.fromkeys(tps)))


def parse_partition_longs(key: str, raw: str) -> dict:
    """``{"topicA":{"0":23,"1":-1}}`` -> ``{("topicA", 0): 23, ("topicA", 1): -1}``."""
    if key in (STARTING_OFFSETS_BY_TIMESTAMP, ENDING_OFFSETS_BY_TIMESTAMP):
        example = '{"topicA": {"0": 123456789, "1": 123456789}, "topicB": {"0": 123456789, "1": 123456789}}'
    else:
        example = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
    value = _json_object(key, raw, example)
    out = {}
    try:
        for topic, parts in value.items():
            if not isinstance(parts, dict):
                raise ValueError
            for p, off in parts.items():
                if isinstance(off, bool) or not isinstance(off, int):
                    raise ValueError
                out[(topic, int(p))] = off
    except ValueError:
        raise SamsaOptionError(f"Invalid value for option '{SPELLING[key]}': Expected e.g. {example}, got {raw}") from None
    return out


def offsets_to_json(offsets: Mapping) -> str:
    """``{(topic, partition): offset}`` as Spark's offsets JSON (sorted, like Spark writes it)."""
    out: dict = {}
    for (topic, part) in sorted(offsets):
        out.setdefault(topic, {})[str(part)] = offsets[(topic, part)]
    return json.dumps(out, separators=(",", ":"))


def parse_strategy(opts: dict) -> Strategy:
    given = [k for k in STRATEGY_KEYS if k in opts]
    names = ", ".join(STRATEGY_KEYS)
    if not given:
        raise SamsaOptionError(f"One of the following options must be specified for Kafka source: "
                               f"{names}. See the docs for more details.")
    if len(given) > 1:
        raise SamsaOptionError(f"Only one of the following options can be specified for Kafka source: "
                               f"{names}. See the docs for more details.")
    key = given[0]
    value = opts[key]
    if key == ASSIGN:
        if not value.strip().startswith("{"):
            raise SamsaOptionError(f"No topicpartitions to assign as specified value for option 'assign' is '{value}'")
        return parse_assign(value)
    if key == SUBSCRIBE:
        topics = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
        if not topics:
            raise SamsaOptionError(f"No topics to subscribe to as specified value for option 'subscribe' is '{value}'")
        return Subscribe(topics)
    pattern = value.strip()
    if not pattern:
        raise SamsaOptionError(f"Pattern to subscribe is empty as specified value for option "
                               f"'subscribePattern' is '{value}'")
    try:
        re.compile(pattern)
    except re.error as e:
        raise _option_error(SUBSCRIBE_PATTERN, value, f"not a regular expression ({e})") from None
    return SubscribePattern(pattern)


def parse_offset_spec(opts: dict, timestamp_key: str, by_timestamp_key: str, offsets_key: str,
                      default: OffsetSpec) -> OffsetSpec:
    """Spark's getKafkaOffsetRangeLimit: global timestamp, then per-partition timestamps, then offsets."""
    strategy = opts.get(STARTING_BY_TIMESTAMP_STRATEGY, "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise _option_error(STARTING_BY_TIMESTAMP_STRATEGY, opts[STARTING_BY_TIMESTAMP_STRATEGY],
                            "expected 'error' or 'latest'")
    if timestamp_key in opts:
        raw = opts[timestamp_key].strip()
        try:
            return GlobalTimestamp(int(raw), strategy)
        except ValueError:
            raise SamsaOptionError(f"Invalid value for option '{SPELLING[timestamp_key]}': "
                                   f"Expected a single long value, got {raw}") from None
    if by_timestamp_key in opts:
        return SpecificTimestamps(parse_partition_longs(by_timestamp_key, opts[by_timestamp_key].strip()), strategy)
    if offsets_key in opts:
        raw = opts[offsets_key].strip()
        if raw.lower() == "latest":
            return Latest()
        if raw.lower() == "earliest":
            return Earliest()
        return SpecificOffsets(parse_partition_longs(offsets_key, raw))
    return default


def _check_kafka_params(opts: dict, *, for_producer: bool) -> dict:
    params = client_options(opts)
    rejected = REJECTED_PRODUCER_OPTIONS if for_producer else REJECTED_CONSUMER_OPTIONS
    for key, message in rejected.items():
        if key in params:
            raise SamsaOptionError(message)
    if "bootstrap.servers" not in params or not params["bootstrap.servers"].strip():
        role = "producer" if for_producer else "consumer"
        raise SamsaOptionError(f"Option 'kafka.bootstrap.servers' must be specified for configuring Kafka {role}")
    return params


def _check_limit_validity(start: OffsetSpec, end: OffsetSpec) -> None:
    """Spark's checkOffsetLimitValidity (before anything is resolved against a broker)."""
    if isinstance(start, SpecificOffsets) and isinstance(end, SpecificOffsets):
        s, e, what = start.offsets, end.offsets, "offset"
    elif isinstance(start, SpecificTimestamps) and isinstance(end, SpecificTimestamps):
        s, e, what = start.timestamps, end.timestamps, "timestamp"
    else:
        return
    if set(s) != set(e):
        raise SamsaOptionError(
            "The specified start offset and end offset should have the same topic-partitions. "
            f"Topic-partitions for start offset: {_tp_set_str(s)}, "
            f"topic-partitions for end offset: {_tp_set_str(e)}.")
    for tp, so in s.items():
        eo = e[tp]
        if so > eo and so >= 0 and eo >= 0:
            raise SamsaOptionError(f"The specified start {what} {so} is greater than the end {what} {eo} "
                                   f"for topic {tp[0]} partition {tp[1]}.")


def _general(opts: dict) -> dict:
    """What batch and streaming reads share (Spark's validateGeneralOptions)."""
    min_partitions = _long(opts, MIN_PARTITIONS)
    if min_partitions is not None and min_partitions <= 0:
        raise SamsaOptionError("minPartitions must be positive")
    max_opt = _long(opts, MAX_OFFSETS_PER_TRIGGER)
    min_opt = _long(opts, MIN_OFFSETS_PER_TRIGGER)
    if max_opt is not None and min_opt is not None and min_opt > max_opt:
        raise SamsaOptionError(f"The value of minOffsetPerTrigger({min_opt}) is higher than the "
                               f"maxOffsetsPerTrigger({max_opt}).")
    poll = _long(opts, POLL_TIMEOUT_MS)
    if poll is not None and poll <= 0:
        raise _option_error(POLL_TIMEOUT_MS, opts[POLL_TIMEOUT_MS], "must be positive")
    params = _check_kafka_params(opts, for_producer=False)
    return dict(
        bootstrap_servers=params["bootstrap.servers"].strip(),
        strategy=parse_strategy(opts),
        client_options=params,
        fail_on_data_loss=_bool(opts, FAIL_ON_DATA_LOSS, True),
        include_headers=_bool(opts, INCLUDE_HEADERS, False),
        min_partitions=min_partitions,
        max_offsets_per_trigger=max_opt,
        poll_timeout_ms=poll if poll is not None else DEFAULT_POLL_TIMEOUT_MS,
        group_id_prefix=opts.get(GROUP_ID_PREFIX, "spark-kafka-relation"),
    )


def parse_read_options(options: Mapping[str, str]) -> ReadOptions:
    """A batch read's options (Spark's validateBatchOptions), or SamsaOptionError naming the option."""
    opts = lower_keys(options)
    starting = parse_offset_spec(opts, STARTING_TIMESTAMP, STARTING_OFFSETS_BY_TIMESTAMP, STARTING_OFFSETS, Earliest())
    if isinstance(starting, Latest):
        raise SamsaOptionError("starting offset can't be latest for batch queries on Kafka")
    if isinstance(starting, SpecificOffsets):
        for tp, off in sorted(starting.offsets.items()):
            if off == LATEST:
                raise SamsaOptionError(f"startingOffsets for {tp_str(tp)} can't be latest for batch queries on Kafka")
    ending = parse_offset_spec(opts, ENDING_TIMESTAMP, ENDING_OFFSETS_BY_TIMESTAMP, ENDING_OFFSETS, Latest())
    if isinstance(ending, Earliest):
        raise SamsaOptionError("ending offset can't be earliest for batch queries on Kafka")
    if isinstance(ending, SpecificOffsets):
        for tp, off in sorted(ending.offsets.items()):
            if off == EARLIEST:
                raise SamsaOptionError(f"ending offset for {tp_str(tp)} can't be earliest for batch queries on Kafka")
    general = _general(opts)
    _check_limit_validity(starting, ending)
    for key in (MAX_OFFSETS_PER_TRIGGER, MIN_OFFSETS_PER_TRIGGER, MAX_TRIGGER_DELAY):
        if key in opts:
            log.warning("%s option ignored in batch queries", SPELLING[key])
    return ReadOptions(starting=starting, ending=ending, **general)


def check_common_read_options(options: Mapping[str, str]) -> None:
    """What a batch and a streaming read both require: ``DataSource.schema()`` cannot tell which
    of the two it is planning, so it checks this much and ``reader()`` / ``streamReader()`` the rest."""
    opts = lower_keys(options)
    parse_offset_spec(opts, STARTING_TIMESTAMP, STARTING_OFFSETS_BY_TIMESTAMP, STARTING_OFFSETS, Earliest())
    _general(opts)


def parse_stream_options(options: Mapping[str, str]) -> ReadOptions:
    """A streaming read's options (Spark's validateStreamOptions), or SamsaOptionError naming the option."""
    opts = lower_keys(options)
    for key in (ENDING_OFFSETS, ENDING_OFFSETS_BY_TIMESTAMP, ENDING_TIMESTAMP):
        if key in opts:
            # Spark's words, with the option named.
            what = "offset" if key == ENDING_OFFSETS else "timestamp"
            raise SamsaOptionError(f"ending {what} not valid in streaming queries (option '{SPELLING[key]}')")
    starting = parse_offset_spec(opts, STARTING_TIMESTAMP, STARTING_OFFSETS_BY_TIMESTAMP, STARTING_OFFSETS, Latest())
    general = _general(opts)
    for key in (MAX_OFFSETS_PER_TRIGGER, MIN_OFFSETS_PER_TRIGGER):
        value = general["max_offsets_per_trigger"] if key == MAX_OFFSETS_PER_TRIGGER else _long(opts, key)
        if value is not None and value <= 0:
            raise _option_error(key, opts[key], "must be a positive number of offsets")
    delay_ms = DEFAULT_MAX_TRIGGER_DELAY_MS
    if MAX_TRIGGER_DELAY in opts:
        delay_ms = parse_duration_ms(MAX_TRIGGER_DELAY, opts[MAX_TRIGGER_DELAY])
    return ReadOptions(starting=starting, ending=None, min_offsets_per_trigger=_long(opts, MIN_OFFSETS_PER_TRIGGER),
                       max_trigger_delay_ms=delay_ms, **general)


# Spark's default maxTriggerDelay ("15m").
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60 * 1000
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_DURATION_MS = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(key: str, raw: str) -> int:
    """``maxTriggerDelay``: a duration such as ``15m``, ``30s``, ``500ms`` (Spark's JavaUtils.timeStringAsMs)."""
    m = _DURATION.match(raw)
    if not m:
        raise _option_error(key, raw, "expected a duration such as '15m', '30s' or '500ms'")
    return int(m.group(1)) * _DURATION_MS[m.group(2).lower() if m.group(2) else None]


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    opts = lower_keys(options)
    params = _check_kafka_params(opts, for_producer=True)
    topic = opts.get(TOPIC)
    topic = topic.strip() if topic is not None else None
    return WriteOptions(bootstrap_servers=params["bootstrap.servers"].strip(), topic=topic,
                        client_options=params, exactly_once=_exactly_once(opts, params, topic))


def _exactly_once(opts: dict, params: dict, topic: str | None) -> ExactlyOnce | None:
    """``exactlyOnce`` and the options that only mean something with it."""
    if not _bool(opts, EXACTLY_ONCE, False):
        for key in (TRANSACTIONAL_ID_PREFIX, MARKER_TOPIC):
            if key in opts:
                raise SamsaOptionError(f"Option '{SPELLING[key]}' is only used with 'exactlyOnce' set to "
                                       f"'true' (the sink is at least once without it)")
        return None
    if params.get("enable.idempotence", "true").strip().lower() == "false":
        raise SamsaOptionError("Option 'kafka.enable.idempotence' cannot be 'false' with 'exactlyOnce': "
                               "transactions need the idempotent producer")
    prefix = opts.get(TRANSACTIONAL_ID_PREFIX)
    if prefix is not None:
        prefix = prefix.strip()
        if not prefix:
            raise _option_error(TRANSACTIONAL_ID_PREFIX, opts[TRANSACTIONAL_ID_PREFIX],
                                "must not be empty (leave it out to derive the ids from the query id)")
    marker = opts.get(MARKER_TOPIC, "").strip() or topic
    if not marker:
        raise SamsaOptionError("Option 'exactlyOnceMarkerTopic' is required with 'exactlyOnce' when there "
                               "is no 'topic' option: the sink keeps each task's last committed batch id "
                               "as a consumer group offset on partition 0 of that (existing) topic")
    return ExactlyOnce(transactional_id_prefix=prefix, marker_topic=marker)
