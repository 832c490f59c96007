"""Fetched record batches straight into Arrow (protocol/records/columns.py, pipeline/fetch_arrow.py),
without a broker: the compiled decoder, its pure-Python twin and a reference decoding agree field
by field, on batches written by protocol/records' encoder (every codec, headers, null keys and
values, control batches, aborted transactions, compaction's gaps, LogAppendTime, a batch that
starts before the fetch offset, a response cut inside its last batch); the reference is the
records reader (decode_batch) with the transactions resolved independently, turned into Arrow
by the confluent-kafka reader's own BatchBuilder from librdkafka Message objects. Corrupted and
truncated batches fail with PartitionDecodeError naming the partition and offset, never a crash.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Message
from hypothesis import HealthCheck, given, settings, strategies as st

from samsa.pipeline.arrow import BatchBuilder
from samsa.pipeline.fetch_arrow import columns_to_batch
from samsa.protocol.records import (BATCH_OVERHEAD, CONTROL_ABORT, CONTROL_COMMIT, Codec, Record,
                                    build_batch, build_control_batch, compress, decode_batch,
                                    iter_batch_headers, parse_control_record, write_crc)
from samsa.protocol.records.batch import MIN_BATCH_LENGTH
from samsa.protocol.records.columns import (COMPILED, PartitionDecodeError, PartitionDecoder,
                                            decode_records, decode_records_py, next_fetch_offset,
                                            next_fetch_offset_py)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOPIC, PARTITION = "events", 7
CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]
DECODERS = [pytest.param(decode_records_py, id="python")] + (
    [pytest.param(decode_records, id="compiled")] if COMPILED else [])
# the walk over batch headers that says where the next Fetch starts, and its Python twin
WALKS = [next_fetch_offset_py] + ([next_fetch_offset] if COMPILED else [])
requires_c = pytest.mark.skipif(not COMPILED, reason="protocol/records/_columns.c is not built")


# -- the reference: the records reader, transactions resolved from the markers ---------------

def reference_rows(records: bytes, fetch_offset: int, aborted, read_committed: bool,
                   end_offset: int = 1 << 62) -> list[Message]:
    """The records a consumer sees, as librdkafka Message objects: every complete batch decoded
    by protocol/records, control batches dropped and, read_committed, a transactional record
    dropped when its producer has an aborted transaction that began at or before it and whose
    abort marker comes after it."""
    batches = [decode_batch(records, pos, header=hdr) for pos, hdr in iter_batch_headers(records)]
    markers = {}  # producer id -> offsets of its abort markers
    for hdr, recs in batches:
        if hdr.is_control and parse_control_record(recs[0].key)[0] == CONTROL_ABORT:
            markers.setdefault(hdr.producer_id, []).append(hdr.base_offset)
    out = []
    for hdr, recs in batches:
        if hdr.is_control:
            continue
        for r in recs:
            if not fetch_offset <= r.offset < end_offset:
                continue
            if read_committed and hdr.is_transactional and any(
                    pid == hdr.producer_id and first <= r.offset
                    and any(m > r.offset for m in markers.get(pid, ()))
                    for pid, first in aborted):
                continue
            ts_type = TIMESTAMP_LOG_APPEND_TIME if hdr.timestamp_type else TIMESTAMP_CREATE_TIME
            out.append(Message(topic=TOPIC, partition=PARTITION, offset=r.offset, key=r.key,
                               value=r.value, timestamp=(ts_type, r.timestamp),
                               headers=list(r.headers) or None))
    return out


def reference_batch(msgs: list[Message], headers: bool):
    builder = BatchBuilder(TOPIC, PARTITION, headers)
    if msgs:
        builder.extend(msgs, [m.offset() for m in msgs])
    return builder.flush()


def decode(decoder, records: bytes, fetch_offset: int, aborted=(), *, read_committed=False,
           headers=True, end_offset=1 << 62):
    d = PartitionDecoder(TOPIC, PARTITION, with_headers=headers, read_committed=read_committed,
                         decoder=decoder)
    nxt = d.decode(records, fetch_offset, aborted, end_offset)
    return columns_to_batch(d.take(), TOPIC, PARTITION), nxt


def walked(records: bytes, fetch_offset: int) -> int:
    """``next_fetch_offset``, the C walk and its Python twin agreeing."""
    (nxt,) = {walk(records, fetch_offset) for walk in WALKS}
    return nxt


def assert_all_agree(records: bytes, fetch_offset: int, aborted=(), *, read_committed=False,
                     headers=True, end_offset=1 << 62):
    expected = reference_batch(reference_rows(records, fetch_offset, aborted, read_committed,
                                              end_offset), headers)
    results = [decode(dec, records, fetch_offset, aborted, read_committed=read_committed,
                      headers=headers, end_offset=end_offset)
               for dec in [decode_records_py] + ([decode_records] if COMPILED else [])]
    for batch, _ in results:
        batch.validate(full=True)
        assert batch.schema == expected.schema
        assert batch.to_pylist() == expected.to_pylist()
        assert batch.equals(expected)
    assert len({nxt for _, nxt in results}) == 1
    return results[0]


# -- a fetch response's worth of batches ------------------------------------------------------

def data_batch(base, codec, n=5, *, pid=-1, txn=False, headers=True, log_append=False,
               ts=1_700_000_000_000, key_every=3, value_size=40):
    recs = []
    for i in range(n):
        key = None if i % key_every == 0 else b"key-%d-%d" % (base, i)
        value = None if i % 4 == 3 else (b"" if i % 5 == 4 else bytes([i % 251]) * value_size)
        hs = [("trace", b"t%d" % i), ("empty", None)] if headers and i % 2 else None
        recs.append((key, value, hs, ts + i * 7))
    return build_batch(recs, base_offset=base, codec=codec, producer_id=pid, producer_epoch=0 if
                       pid >= 0 else -1, base_sequence=0 if pid >= 0 else -1,
                       is_transactional=txn, timestamp_type=1 if log_append else 0,
                       max_timestamp=ts + 10_000 if log_append else None)


def compacted_batch(base, codec):
    """What the cleaner leaves: offset deltas with gaps, the last delta kept."""
    recs = [Record(d, d, b"k%d" % d, b"v%d" % d if d != 4 else None) for d in (0, 2, 3, 4, 9)]
    return build_batch(recs, base_offset=base, codec=codec, base_timestamp=1_700_000_000_000,
                       last_offset_delta=11)


def response(codec) -> tuple[bytes, list[tuple[int, int]]]:
    """Batches of one partition as a Fetch response holds them, and its aborted list."""
    parts = [
        data_batch(0, codec),                                   # 0-4
        data_batch(5, codec, pid=11, txn=True),                 # 5-9 committed below
        data_batch(10, codec, pid=12, txn=True),                # 10-14 aborted below
        build_control_batch(CONTROL_COMMIT, 11, 0, base_offset=15),
        data_batch(16, codec, log_append=True),                 # 16-20
        data_batch(21, codec, pid=12, txn=True, n=3),           # 21-23 aborted below
        build_control_batch(CONTROL_ABORT, 12, 0, base_offset=24),
        data_batch(25, codec, pid=12, txn=True, n=2),           # 25-26 committed: new txn
        build_control_batch(CONTROL_COMMIT, 12, 0, base_offset=27),
        compacted_batch(28, codec),                             # 28, 30, 31, 32, 37 (to 39)
        data_batch(40, codec, n=50, value_size=1024),           # 40-89
    ]
    return b"".join(parts), [(12, 10)]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: Codec(c).name.lower())
@pytest.mark.parametrize("read_committed", [False, True], ids=["uncommitted", "committed"])
def test_every_codec_agrees_with_the_reference(codec, read_committed):
    records, aborted = response(codec)
    batch, nxt = assert_all_agree(records, 0, aborted, read_committed=read_committed)
    assert nxt == 90
    offsets = batch.column("offset").to_pylist()
    assert (10 in offsets) is not read_committed and (21 in offsets) is not read_committed
    assert {25, 26, 28, 30, 37} <= set(offsets) and 29 not in offsets and 15 not in offsets
    # nulls are nulls, empties are empties, in keys, values and header values
    assert batch.column("key").null_count > 0 and batch.column("value").null_count > 0
    assert b"" in batch.column("value").to_pylist()
    assert batch.column("timestampType").to_pylist()[offsets.index(16)] == 1


@pytest.mark.parametrize("codec", [Codec.NONE, Codec.ZSTD], ids=["none", "zstd"])
def test_fetch_offset_inside_a_batch_a_cut_response_and_an_end_offset(codec):
    records, aborted = response(codec)
    # a leader may answer from the start of the batch holding the fetch offset
    batch, nxt = assert_all_agree(records, 12, aborted, read_committed=True)
    assert batch.column("offset").to_pylist()[0] == 16 and nxt == 90
    # the response's size limit cut its last batch: the rest is fetched again from there
    cut = records[:-100]
    batch, nxt = assert_all_agree(cut, 3, aborted)
    assert nxt == 40 and batch.column("offset").to_pylist()[-1] == 37
    # the wire reader sends its next Fetch from there before decoding (compacted: the
    # batch's last offset delta, not its last record, says where it ends)
    assert walked(records, 12) == 90 and walked(cut, 3) == 40
    assert walked(b"", 3) == 3 and walked(records[:60], 3) == 3
    # a range ends inside a batch
    batch, _ = assert_all_agree(records, 0, end_offset=43)
    assert batch.column("offset").to_pylist()[-1] == 42
    # without headers the column is not there
    batch, _ = assert_all_agree(records, 0, headers=False)
    assert "headers" not in batch.schema.names


def test_successive_responses_append_to_one_set_of_columns():
    records, _ = response(Codec.LZ4)
    batches = [pos for pos, _ in iter_batch_headers(records)] + [len(records)]
    for dec in [decode_records_py] + ([decode_records] if COMPILED else []):
        d = PartitionDecoder(TOPIC, PARTITION, with_headers=True, decoder=dec)
        offset = 0
        for start, end in zip(batches, batches[1:]):
            offset = d.decode(records[start:end], offset)
        whole = decode(dec, records, 0)[0]
        assert columns_to_batch(d.take(), TOPIC, PARTITION).equals(whole)


# -- property: random records, random batching, random fetch offsets -------------------------

record_st = st.tuples(st.none() | st.binary(max_size=20), st.none() | st.binary(max_size=300),
                      st.none() | st.lists(st.tuples(st.text(max_size=5),
                                                     st.none() | st.binary(max_size=8)),
                                           max_size=3),
                      st.integers(-1, 2**41))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.lists(record_st, min_size=1, max_size=12), st.sampled_from(CODECS),
                          st.booleans()), min_size=1, max_size=6),
       st.integers(0, 40), st.booleans())
def test_random_batches_agree_with_the_reference(batches, fetch_offset, headers):
    parts, base = [], 0
    for recs, codec, log_append in batches:
        parts.append(build_batch(recs, base_offset=base, codec=codec,
                                 timestamp_type=1 if log_append else 0,
                                 max_timestamp=2**40 if log_append else None))
        base += len(recs)
    _, nxt = assert_all_agree(b"".join(parts), fetch_offset, headers=headers)
    assert walked(b"".join(parts), fetch_offset) == nxt


def test_the_next_fetch_offset_of_a_response_of_many_small_batches():
    """Thousands of one-record batches in one response (a producer that does not batch): the
    walk reaches the last complete batch, so the next Fetch goes out before they are decoded."""
    one = [build_batch([(b"k", b"v%d" % i, None, 1_700_000_000_000)], base_offset=i)
           for i in range(5000)]
    records = b"".join(one)
    d = PartitionDecoder(TOPIC, PARTITION)
    assert d.decode(records, 0) == 5000 == walked(records, 0) == walked(records + one[0][:70], 0)
    assert walked(records[:-1], 10) == 4999 and walked(memoryview(records), 6000) == 6000


# -- fuzz: corrupted and truncated batches ----------------------------------------------------

def raw_batch(body: bytes, count: int, codec: int, base: int = 100) -> bytes:
    """A v2 batch around ``body`` (records, before compression) with a correct CRC, so the
    record loop, not the CRC check, meets what is wrong in the records."""
    data = compress(codec, body) if codec else body
    buf = bytearray(BATCH_OVERHEAD) + data
    struct.pack_into(">qiibIhiqqqhii", buf, 0, base, len(buf) - 12, -1, 2, 0, codec,
                     max(count - 1, 0), 1_700_000_000_000, 1_700_000_000_000, -1, -1, -1, count)
    write_crc(buf, 0)
    return bytes(buf)


def outcome(decoder, records: bytes, fetch_offset: int, headers: bool):
    try:
        batch, nxt = decode(decoder, records, fetch_offset, headers=headers)
    except PartitionDecodeError as exc:
        assert f"{TOPIC}-{PARTITION} at offset " in str(exc)
        return "error", str(exc)
    batch.validate(full=True)
    return "ok", batch.to_pylist(), nxt


def assert_same_outcome(records: bytes, fetch_offset: int = 0, headers: bool = True):
    py = outcome(decode_records_py, records, fetch_offset, headers)
    if COMPILED:
        assert outcome(decode_records, records, fetch_offset, headers) == py
    # the walk ahead of the decoder: where it would have gone on from, had it decoded
    nxt = walked(records, fetch_offset)
    if py[0] == "ok":
        assert nxt == py[2]
    return py


def _body(batch: bytes) -> bytes:
    return batch[BATCH_OVERHEAD:]


GOOD = data_batch(100, Codec.NONE, n=8)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(_body(GOOD)) - 1), st.integers(0, 255)),
                min_size=1, max_size=6),
       st.sampled_from(CODECS), st.integers(-2, 3), st.booleans())
def test_corrupted_records_inside_a_correct_crc(mutations, codec, count_change, headers):
    body = bytearray(_body(GOOD))
    for at, byte in mutations:
        body[at] = byte
    records = raw_batch(bytes(body), 8 + count_change, codec)
    result = assert_same_outcome(records, 0, headers)
    if result[0] == "error":  # the batch's offset, or the record's (a header key's UTF-8)
        assert re.search(r"events-7 at offset 10[0-7]: ", result[1]), result[1]


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=400), st.integers(-1, 50), st.sampled_from(CODECS))
def test_random_bytes_as_records(body, count, codec):
    assert_same_outcome(raw_batch(body, count, codec))


@settings(max_examples=200, deadline=None)
@given(st.integers(0, len(GOOD) * 2), st.lists(st.integers(0, len(GOOD) * 2 - 1), max_size=3),
       st.integers(0, 255))
def test_truncated_and_flipped_responses(cut, flips, byte):
    """A response cut anywhere, or bytes flipped anywhere (the CRC then refuses the batch)."""
    records = bytearray(GOOD + data_batch(108, Codec.GZIP, n=4))
    for at in flips:
        records[at % len(records)] ^= byte or 1
    result = assert_same_outcome(bytes(records[:cut]))
    if result[0] == "ok" and not flips:  # (a flipped base offset is not under the CRC)
        assert result[2] in (0, 108, 112)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(-2**63, 2**63 - 1),
                          st.none() | st.integers(-2**31, 2**31 - 1),  # None: the true one
                          st.integers(-2**31, 2**31 - 1), st.binary(max_size=80)), max_size=4),
       st.integers(0, 80), st.integers(-2**63, 2**63 - 1))
def test_the_walk_over_batch_headers_takes_any_bytes(frames, cut, position):
    """Batch headers with any base offset, length and last offset delta (past int64 too),
    whatever follows them, cut anywhere: the C walk and its twin agree, and never crash."""
    records = bytearray()
    for base, length, delta, rest in frames:
        header = bytearray(BATCH_OVERHEAD)
        struct.pack_into(">qi", header, 0, base,
                         MIN_BATCH_LENGTH + len(rest) if length is None else length)
        struct.pack_into(">i", header, 23, delta)
        records += header + rest
    walked(bytes(records[:len(records) - cut]), position)


def test_named_errors():
    bad_crc = bytearray(GOOD)
    bad_crc[-1] ^= 0xFF
    with pytest.raises(PartitionDecodeError, match=r"events-7 at offset 100: batch CRC-32C"):
        decode(decode_records_py, bytes(bad_crc), 0)
    with pytest.raises(PartitionDecodeError, match=r"events-7 at offset 100: cannot decompress"):
        not_gzip = bytearray(raw_batch(b"not gzip data", 1, Codec.NONE))
        not_gzip[22] = Codec.GZIP  # the attributes' codec bits
        write_crc(not_gzip, 0)
        decode(decode_records_py, bytes(not_gzip), 0)
    body = bytearray(_body(GOOD))
    body[0] = 0x7F  # the first record's length: past the end
    for dec in DECODERS:
        with pytest.raises(PartitionDecodeError, match=r"events-7 at offset 100: record 0: length"):
            decode(dec.values[0], raw_batch(bytes(body), 8, Codec.NONE), 0)


@requires_c
def test_bad_header_key_utf8_names_the_record():
    batch = build_batch([(b"k", b"v", None, 0), (b"k", b"v", [(b"\xff\xfe", b"x")], 0)],
                        base_offset=50)
    with pytest.raises(PartitionDecodeError, match=r"events-7 at offset 51: a header key is not"):
        decode(decode_records, batch, 0)
    # without the headers column the key is never read
    assert decode(decode_records, batch, 0, headers=False)[0].num_rows == 2


@pytest.mark.integration
def test_without_the_compiled_decoder_the_twin_runs_and_says_so():
    """The compiled module missing (an install without a compiler): the Python twin decodes,
    and one warning says so; the Spark source then keeps reading with confluent-kafka."""
    code = (
        "import logging, sys\n"
        "logging.basicConfig(level=logging.WARNING, format='%(name)s %(message)s')\n"
        "sys.modules['samsa.protocol.records._columns'] = None\n"
        "from samsa.protocol.records import columns, build_batch\n"
        "assert not columns.COMPILED and columns.decode_records is columns.decode_records_py\n"
        "assert columns.next_fetch_offset is columns.next_fetch_offset_py\n"
        "d = columns.PartitionDecoder('t', 0)\n"
        "d.decode(build_batch([(b'k', b'v', None, 5)]), 0)\n"
        "assert d.columns.rows == 1\n"
        "from samsa.pipeline import wire_reader\n"
        "from samsa.pipeline.options import parse_read_options\n"
        "opts = parse_read_options({'kafka.bootstrap.servers': 'x:1', 'subscribe': 't'})\n"
        "assert wire_reader.unsupported(opts) == 'the compiled record decoder is not built'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "decoder" in line]
    assert len(lines) == 2, done.stderr  # the decoder's, and the source's once
    assert "protocol/records/_columns.c) is not built" in lines[0]
    assert "reads with confluent-kafka" in lines[1]
