"""The source's schema, as Spark's Kafka source has it, and Arrow batches of it.

PySpark 4.x takes ``pyarrow.RecordBatch`` objects from ``DataSourceReader.read`` as they are
(it checks the column names and count) instead of converting Python tuples row by row; the
batches here carry exactly the Arrow types PySpark's ``to_arrow_schema(schema, "UTC")`` gives
for the Spark schema, so nothing is cast on the way into the JVM.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Message

from .options import CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP_TYPE

SCHEMA_DDL = ("key binary, value binary, topic string, partition int, offset long, "
              "timestamp timestamp, timestampType int")
HEADERS_DDL = "headers array<struct<key: string, value: binary>>"

HEADER_TYPE = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]
HEADERS_FIELD = pa.field("headers", pa.list_(pa.field("element", HEADER_TYPE)))
ARROW_SCHEMA = pa.schema(_FIELDS)
ARROW_SCHEMA_WITH_HEADERS = pa.schema(_FIELDS + [HEADERS_FIELD])

# A consumed message's headers: librdkafka hands them over as a list of (key, value) pairs.
# The stubs type Message.headers with the HeadersType that produce() takes, which also allows
# a dict; this alias says what a consumer's message answers (the cast is made once, here).
_consumed_headers = cast(Callable[[Message], "list[tuple[str, bytes | None]] | None"],
                         Message.headers)

# librdkafka's timestamp types (confluent_kafka.TIMESTAMP_*) -> Kafka's TimestampType ids.
_TS_TYPE = {0: NO_TIMESTAMP_TYPE, 1: CREATE_TIME, 2: LOG_APPEND_TIME}


def schema_ddl(include_headers: bool) -> str:
    return f"{SCHEMA_DDL}, {HEADERS_DDL}" if include_headers else SCHEMA_DDL


def binary_array(items: list) -> pa.Array:
    """A binary array of ``items`` (bytes or None).

    Large values are joined into one buffer and the array is built on it: one copy of exact
    size, where ``pa.array`` grows its data buffer as it appends (1 KiB values: 2.3 ms per 10k
    rows instead of 3.5 ms). Small ones (keys) and any null go through ``pa.array``, faster there.
    """
    n = len(items)
    if n == 0 or None in items:
        return pa.array(items, pa.binary())
    data = b"".join(items)
    if len(data) < _JOIN_MIN_BYTES * n or len(data) > _INT32_MAX:
        return pa.array(items, pa.binary())
    ends = pc.cumulative_sum(pa.array(list(map(len, items)), pa.int32()))
    offsets = pa.concat_arrays([_ZERO_INT32, ends])
    return pa.Array.from_buffers(pa.binary(), n, [None, offsets.buffers()[1], pa.py_buffer(data)])


# Average value size from which binary_array joins the values (measured crossover: keys of 12
# bytes are faster through pa.array, values of 1 KiB through the join), and binary's offset limit.
_JOIN_MIN_BYTES = 128
_INT32_MAX = 2**31 - 1
_ZERO_INT32 = pa.array([0], pa.int32())
_MS = pa.timestamp("ms", tz="UTC")
_US = pa.timestamp("us", tz="UTC")


class BatchBuilder:
    """Collects confluent-kafka messages of one topic-partition into RecordBatches.

    Column-wise: ``extend`` takes the messages of one ``consume()`` call and pulls each field
    out with ``map`` over the unbound method (a C loop, no Python frame per record); ``flush``
    builds each Arrow array once per batch, the constant columns (topic, partition, usually
    timestampType) without a Python list and the timestamps as Kafka's milliseconds, cast to
    Spark's microseconds in Arrow.
    """

    def __init__(self, topic: str, partition: int, include_headers: bool):
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.schema = ARROW_SCHEMA_WITH_HEADERS if include_headers else ARROW_SCHEMA
        self._topic_scalar = pa.scalar(topic, pa.string())
        self._partition_scalar = pa.scalar(partition, pa.int32())
        self._reset()

    def _reset(self) -> None:
        self.keys: list = []
        self.values: list = []
        self.offsets: list = []
        self.timestamps: list = []      # ms since the epoch, as Kafka has them
        self.ts_types: list = []        # librdkafka's TIMESTAMP_* ids
        self.headers: list = []

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, msg: Message) -> None:
        self.extend([msg], [msg.offset()])

    def extend(self, msgs: list, offsets: list) -> None:
        """Append data messages (no errors) whose offsets are ``offsets``."""
        self.keys += map(Message.key, msgs)
        self.values += map(Message.value, msgs)
        self.offsets += offsets
        # (type, ms) pairs; zip(*) splits them in C.
        types, stamps = zip(*map(Message.timestamp, msgs))
        self.ts_types += types
        # Kafka's NO_TIMESTAMP is -1 ms; Spark turns it into a timestamp all the same.
        self.timestamps += stamps
        if self.include_headers:
            # Spark: a record without headers has a null array, not an empty one.
            self.headers += [[{"key": k, "value": v} for k, v in hs] if hs else None
                             for hs in map(_consumed_headers, msgs)]

    def _ts_type_array(self, n: int) -> pa.Array:
        raw = self.ts_types
        if n and raw.count(raw[0]) == n:        # one topic-partition: nearly always one type
            return pa.repeat(pa.scalar(_TS_TYPE.get(raw[0], NO_TIMESTAMP_TYPE), pa.int32()), n)
        return pa.array([_TS_TYPE.get(t, NO_TIMESTAMP_TYPE) for t in raw], pa.int32())

    def flush(self) -> pa.RecordBatch:
        n = len(self.offsets)
        arrays = [
            binary_array(self.keys),
            binary_array(self.values),
            pa.repeat(self._topic_scalar, n),
            pa.repeat(self._partition_scalar, n),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.timestamps, pa.int64()).cast(_MS).cast(_US),
            self._ts_type_array(n),
        ]
        if self.include_headers:
            arrays.append(pa.array(self.headers, HEADERS_FIELD.type))
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)
