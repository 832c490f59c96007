"""The record walker (protocol/records/walker.py): the C module and its
pure-Python twin accept and refuse the same bytes, with the same message and
position and the same field offsets, on real batches, random bytes and
mutated batches; and produce's batch validation refuses a malformed record
inside a batch whose CRC is right (issue 24, item 10)."""
from __future__ import annotations

import os
import struct
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st
from kafka.record import MemoryRecordsBuilder

from samsa.protocol.records import (BATCH_OVERHEAD, Codec, CorruptRecordError, InvalidRecordError,
                              build_batch, decode_batch, validate_batches, write_crc)
from samsa.protocol.records.batch import validate_single_batch, walk_record_pieces
from samsa.protocol.records.varint import encode_varint, encode_varlong
from samsa.protocol.records.walker import (COMPILED, walk_prefix, walk_prefix_py, walk_records,
                                     walk_records_py)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD]

# setup.py builds it; a checkout without it runs the fallback only, and says so here
requires_c = pytest.mark.skipif(not COMPILED, reason="protocol/records/_walker.c is not built")


def _outcome(walker, buf, pos, end, count, consecutive):
    """What a walker makes of the bytes: ("ok", fields) or ("corrupt", message, position)."""
    fields: list = []
    try:
        walker(buf, pos, end, count, consecutive, fields)
    except CorruptRecordError as exc:
        return "corrupt", str(exc), exc.offset
    return "ok", fields


def _agree(buf, pos, end, count, consecutive=True):
    py = _outcome(walk_records_py, buf, pos, end, count, consecutive)
    if COMPILED:
        assert _outcome(walk_records, buf, pos, end, count, consecutive) == py
    return py


def poison_batch() -> bytearray:
    """The attack: a valid v2 header and CRC around records Kafka refuses
    (a record length of 2^30, a key length of 2^31 as a varlong-sized varint,
    then random bytes)."""
    body = bytearray()
    encode_varint(1 << 30, body)           # record length
    body.append(0)                          # attributes
    encode_varlong(0, body)                 # timestamp delta
    encode_varint(0, body)                  # offset delta
    body += b"\x80\x80\x80\x80\x10"       # key length 2^31: not an int32 varint
    body += bytes(range(7, 250, 3))         # random bytes
    buf = bytearray(BATCH_OVERHEAD) + body
    struct.pack_into(">qiibIhiqqqhii", buf, 0, 0, len(buf) - 12, -1, 2, 0, 0, 0,
                     1_700_000_000_000, 1_700_000_000_000, -1, -1, -1, 1)
    write_crc(buf, 0)
    return buf


def kp_batch(codec, n=5):
    b = MemoryRecordsBuilder(2, codec, 1 << 20)
    for i in range(n):
        b.append(1_700_000_000_000 + i, b"key-%d" % i if i % 3 else None, b"v" * (i * 40),
                 [("h%d" % i, b"x" if i % 2 else None)] * (i % 3))
    b.close()
    return bytes(b.buffer())


def test_the_poison_pill_is_corrupt_in_both_walkers():
    buf = poison_batch()
    kind, message, at = _agree(buf, BATCH_OVERHEAD, len(buf), 1)
    assert kind == "corrupt" and "length 1073741824 invalid or past the end" in message
    assert at == BATCH_OVERHEAD + 5
    # produce's checks: the fast path declines, the general one says why, as
    # Kafka answers a producer (INVALID_RECORD, not the retriable CORRUPT_MESSAGE)
    assert validate_single_batch(buf) is None
    with pytest.raises(InvalidRecordError, match="1073741824"):
        validate_batches(buf)


@pytest.mark.parametrize("codec", CODECS)
def test_real_batches_walk_and_yield_the_fields_decoders_slice(codec):
    buf = kp_batch(codec, n=9)
    assert validate_single_batch(buf) is not None
    _, records = decode_batch(buf)
    assert [r.key for r in records] == [b"key-%d" % i if i % 3 else None for i in range(9)]
    assert [r.headers for r in records] == [[("h%d" % i, b"x" if i % 2 else None)] * (i % 3)
                                            for i in range(9)]
    if codec == Codec.NONE:
        kind, fields = _agree(buf, BATCH_OVERHEAD, len(buf), 9)
        assert kind == "ok" and [f[0] for f in fields] == list(range(9))


@pytest.mark.parametrize("codec", CODECS)
def test_a_malformed_record_inside_a_compressed_batch_is_invalid(codec):
    records = bytearray()
    encode_varint(6, records)
    records += b"\x00\x00\x00\x01\x01\x00"  # a 6-byte record...
    records += b"\x07"                      # ...and a byte the record count does not cover
    from samsa.protocol.records.codecs import compress
    body = compress(codec, records) if codec else bytes(records)
    buf = bytearray(BATCH_OVERHEAD) + body
    struct.pack_into(">qiibIhiqqqhii", buf, 0, 0, len(buf) - 12, -1, 2, 0, codec, 0,
                     1, 1, -1, -1, -1, 1)
    write_crc(buf, 0)
    assert validate_single_batch(buf) is None
    with pytest.raises(InvalidRecordError, match="1 bytes left after the last of 1 records"):
        validate_batches(buf)


def test_offset_deltas_must_count_up_from_zero_on_produce_only():
    buf = build_batch([(b"a", b"1", [], 5), (b"b", b"2", [], 5)])
    from samsa.protocol.records.records import Record
    gap = build_batch([Record(0, 0, b"a", b"1"), Record(2, 0, b"b", b"2")],
                      last_offset_delta=1)
    assert _agree(buf, BATCH_OVERHEAD, len(buf), 2)[0] == "ok"
    kind, message, at = _agree(gap, BATCH_OVERHEAD, len(gap), 2)
    assert kind == "corrupt" and "record 1: offset delta 2, expected 1" in message
    # stored (compacted) batches keep their gaps and still decode
    assert _agree(gap, BATCH_OVERHEAD, len(gap), 2, consecutive=False)[0] == "ok"
    assert [r.offset_delta for r in decode_batch(gap)[1]] == [0, 2]


@settings(max_examples=600, deadline=None)
@given(st.binary(max_size=120), st.integers(0, 25), st.booleans())
def test_random_bytes_agree(data, count, consecutive):
    _agree(data, 0, len(data), count, consecutive)


@settings(max_examples=600, deadline=None)
@given(st.integers(0, 4), st.integers(0, 10_000), st.binary(min_size=1, max_size=8),
       st.sampled_from(["overwrite", "insert", "delete"]), st.integers(-2, 2))
def test_mutated_batches_agree(which, where, junk, how, count_shift):
    buf = kp_batch(Codec.NONE, n=which + 3)
    body = bytearray(buf[BATCH_OVERHEAD:])
    at = where % len(body)
    if how == "overwrite":
        body[at:at + len(junk)] = junk
    elif how == "insert":
        body[at:at] = junk
    else:
        del body[at:at + len(junk)]
    _agree(body, 0, len(body), which + 3 + count_shift)
    # the batch around the mutated records, CRC fixed: produce takes it exactly
    # when the walker does
    full = bytearray(buf[:BATCH_OVERHEAD]) + body
    struct.pack_into(">i", full, 8, len(full) - 12)
    write_crc(full, 0)
    taken = _agree(body, 0, len(body), which + 3)[0] == "ok"
    assert (validate_single_batch(full) is not None) == taken


@requires_c
@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64), st.integers(-5, 80), st.integers(-5, 80), st.integers(-3, 30))
def test_out_of_range_arguments_are_refused_not_read(data, pos, end, count):
    for walker in (walk_records, walk_records_py):
        try:
            walker(data, pos, end, count, True, None)
        except (CorruptRecordError, ValueError):
            pass
    for walker in (walk_prefix, walk_prefix_py):
        try:
            walker(data, pos, end, count, True, count % 3)
        except (CorruptRecordError, ValueError):
            pass


@pytest.mark.integration
def test_the_fallback_is_chosen_by_the_environment_and_tools_do_not_warn_of_it():
    """The slower walker is the broker's business (it warns as it starts,
    tests/integration/test_record_errors.py); a command-line tool run says nothing of it."""
    env = {**os.environ, "SAMSA_PURE_PYTHON_RECORDS": "1"}
    code = ("from samsa.protocol.records.walker import COMPILED, walk_records, walk_records_py;"
            "assert not COMPILED and walk_records is walk_records_py")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "samsa", "dump-log", "--help"], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "validated in Python" not in proc.stdout + proc.stderr


def _record(ts=b"\x00", off=b"\x00", key=b"\x01", value=b"\x01", headers=b"\x00"):
    """One record from raw field bytes, its length prefix computed."""
    body = b"\x00" + ts + off + key + value + headers
    out = bytearray()
    encode_varint(len(body), out)
    return bytes(out) + body


@pytest.mark.parametrize("record, fault", [
    (_record(ts=b"\xff" * 9 + b"\x02"), "varlong overflows int64"),
    (_record(ts=b"\xff" * 10 + b"\x00"), "varint longer than 10 bytes"),
    (_record(off=b"\xff\xff\xff\xff\x1f"), "varint overflows int32"),
    (_record(off=b"\xff\xff\xff\xff\xff\x00"), "varint longer than 5 bytes"),
    (_record(key=b"\x03"), "record 0: invalid key length -2"),
    (_record(key=b"\x0a"), "record 0: key length 5 past the end of the record"),
    (_record(value=b"\x05"), "record 0: invalid value length -3"),
    (_record(headers=b"\x01"), "record 0: invalid header count -1"),
    (_record(headers=b"\x02\x01\x00"), "record 0: invalid header key length -1"),
    (_record(headers=b"\x02\x00\x03"), "record 0: invalid header value length -2"),
    (_record(headers=b"\x02\x00\x04x"), "record 0: header value length 2 past the end"),
    (_record(off=b"\x02"), "record 0: offset delta 1, expected 0"),
    (_record(headers=b"\x04"), "record 0: invalid header count 2"),
])
def test_each_field_fault_is_named_alike(record, fault):
    kind, message, _ = _agree(record, 0, len(record), 1)
    assert kind == "corrupt" and fault in message


def test_a_record_longer_than_its_fields_is_corrupt():
    rec = bytearray(_record(headers=b"\x00\x00"))  # one byte its fields do not use
    kind, message, _ = _agree(bytes(rec), 0, len(rec), 1)
    assert kind == "corrupt" and "record 0: declared 7 bytes but its fields used 6" in message


def _prefix_outcome(walker, buf, count, consecutive, first):
    try:
        return walker(buf, 0, len(buf), count, consecutive, first)
    except CorruptRecordError as exc:
        return "corrupt", str(exc), exc.offset


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 4), st.integers(0, 10_000), st.binary(max_size=6), st.integers(0, 3000),
       st.integers(0, 12), st.booleans())
def test_walk_prefix_agrees_and_stops_only_before_a_cut_record(which, where, junk, cut, count,
                                                                consecutive):
    body = bytearray(kp_batch(Codec.NONE, n=which + 3)[BATCH_OVERHEAD:])
    at = where % len(body)
    body[at:at + len(junk)] = junk
    piece = bytes(body[:cut % (len(body) + 1)])
    py = _prefix_outcome(walk_prefix_py, piece, count, consecutive, 2 if consecutive else 0)
    if COMPILED:
        assert _prefix_outcome(walk_prefix, piece, count, consecutive,
                               2 if consecutive else 0) == py


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 4), st.integers(0, 10_000), st.binary(max_size=6),
       st.lists(st.integers(0, 3000), max_size=6), st.integers(-1, 1))
def test_records_in_pieces_get_the_verdict_of_the_whole(which, where, junk, cuts, count_shift):
    n = which + 3
    body = bytearray(kp_batch(Codec.NONE, n=n)[BATCH_OVERHEAD:])
    if junk:
        at = where % len(body)
        body[at:at + len(junk)] = junk
    body = bytes(body)
    bounds = sorted({c % (len(body) + 1) for c in cuts} | {0, len(body)})
    pieces = [body[a:b] for a, b in zip(bounds, bounds[1:])]
    whole = _outcome(walk_records, body, 0, len(body), n + count_shift, True)[0]
    try:
        walk_record_pieces(pieces, n + count_shift)
        assert whole == "ok"
    except CorruptRecordError:
        assert whole == "corrupt"


# A record of 50 headers, each key length written in five bytes (0), whose
# buffer a finalizer rewrites during the walk: the last header's key length
# becomes 2^31 - 1. The collection that runs it comes from the objects the
# walker builds for the fields (gc threshold 1), after the record was checked.
_REWRITTEN_DURING_THE_WALK = """
import gc
from samsa.protocol.records.walker import walk_records
from samsa.protocol.records.varint import encode_varint
body = bytearray([0, 0, 0, 1, 1])
encode_varint(50, body)
for _ in range(50):
    body += b"\\x80\\x80\\x80\\x80\\x00"
    encode_varint(-1, body)
buf = bytearray()
encode_varint(len(body), buf)
buf += body
last = len(buf) - 6
class Rewriter:
    def __del__(self):
        buf[last:last + 5] = b"\\xfe\\xff\\xff\\xff\\x0f"
r = Rewriter(); r.cycle = r; del r
gc.set_threshold(1)
try:
    walk_records(buf, 0, len(buf), 1, True, [])
except RuntimeError as e:
    print(e)
"""


@requires_c
@pytest.mark.integration  # a subprocess, so that a crash fails the test and not the run
def test_a_buffer_rewritten_during_the_walk_is_refused_not_read_past():
    """The C walker's field offsets re-read the headers after building
    objects, which can run a finalizer that rewrites a bytearray's bytes:
    those reads were unbounded, and a header length rewritten to 2^31 read
    2 GiB past the buffer (a segfault); now they are bounded by the record."""
    proc = subprocess.run([sys.executable, "-c", _REWRITTEN_DURING_THE_WALK], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "bytes changed while they were walked" in proc.stdout
