"""The executors' Arrow batches, without Spark or a broker: confluent-kafka builds real Message
objects, and the batches must hold exactly what PySpark's own conversion of the row tuples
would (the Arrow types of the Spark schema; nulls, empty values, timestamps, headers)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, TIMESTAMP_NOT_AVAILABLE, Message

from samsa.pipeline.arrow import ARROW_SCHEMA, ARROW_SCHEMA_WITH_HEADERS, BatchBuilder, binary_array
from samsa.pipeline.options import CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP_TYPE

UTC = dt.timezone.utc


def message(offset, key=None, value=None, ts=(TIMESTAMP_CREATE_TIME, 1_700_000_000_123), headers=None):
    return Message(topic="t", partition=3, offset=offset, key=key, value=value, timestamp=ts, headers=headers)


def test_binary_array_joins_large_values_and_keeps_nulls_and_empties():
    large = [bytes([i]) * 1024 for i in range(50)]
    assert binary_array(large).equals(pa.array(large, pa.binary()))
    small = [b"k%d" % i for i in range(50)] + [b""]
    assert binary_array(small).equals(pa.array(small, pa.binary()))
    with_null = large[:3] + [None] + [b""]
    assert binary_array(with_null).to_pylist() == with_null
    assert binary_array([]).to_pylist() == []
    # A sliced join offset never leaks: the result is a plain binary array of the right length.
    arr = binary_array(large + [b""])
    assert arr.type == pa.binary() and len(arr) == 51 and arr[50].as_py() == b""


def test_batch_has_sparks_types_and_every_field():
    b = BatchBuilder("t", 3, include_headers=False)
    msgs = [message(10, b"k0", b"v" * 2000), message(11, None, None),            # null key, tombstone
            message(13, b"", b"", ts=(TIMESTAMP_CREATE_TIME, -1))]                  # gap at 12; no timestamp
    b.extend(msgs, [10, 11, 13])
    assert len(b) == 3
    batch = b.flush()
    assert len(b) == 0
    assert batch.schema.equals(ARROW_SCHEMA)
    rows = batch.to_pylist()
    assert [r["key"] for r in rows] == [b"k0", None, b""]
    assert [r["value"] for r in rows] == [b"v" * 2000, None, b""]
    assert {r["topic"] for r in rows} == {"t"} and {r["partition"] for r in rows} == {3}
    assert [r["offset"] for r in rows] == [10, 11, 13]
    assert rows[0]["timestamp"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
    assert rows[2]["timestamp"] == dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)
    assert {r["timestampType"] for r in rows} == {CREATE_TIME}


def test_mixed_timestamp_types_and_headers():
    b = BatchBuilder("t", 0, include_headers=True)
    msgs = [message(0, b"a", b"x", ts=(TIMESTAMP_LOG_APPEND_TIME, 5), headers=[("h", b"1"), ("h", None)]),
            message(1, b"b", b"y", ts=(TIMESTAMP_NOT_AVAILABLE, -1)),
            message(2, b"c", b"z")]
    b.extend(msgs[:1], [0])          # batches are built from several consume() calls
    b.extend(msgs[1:], [1, 2])
    batch = b.flush()
    assert batch.schema.equals(ARROW_SCHEMA_WITH_HEADERS)
    rows = batch.to_pylist()
    assert [r["timestampType"] for r in rows] == [LOG_APPEND_TIME, NO_TIMESTAMP_TYPE, CREATE_TIME]
    assert rows[0]["headers"] == [{"key": "h", "value": b"1"}, {"key": "h", "value": None}]
    assert rows[1]["headers"] is None and rows[2]["headers"] is None
