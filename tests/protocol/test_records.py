"""v2 records: decode/build against kafka-python and aiokafka builders/readers, malformed input."""
from __future__ import annotations

import struct

import pytest
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AioBuilder
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from hypothesis import HealthCheck, given, settings, strategies as st
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from samsa.protocol.errors import ProtocolError
from samsa.protocol.records import (CONTROL_ABORT, CONTROL_COMMIT, Codec, CorruptRecordError, Record,
                              build_batch, build_control_batch, decode_batch, iter_all_records,
                              iter_records, parse_control_record, read_batch_header,
                              set_log_append_time, validate_batches)
from samsa.protocol.records.batch import write_crc
from samsa.protocol.records.varint import (decode_varint, decode_varlong, encode_varint,
                                     encode_varlong, size_of_varint)

CODECS = list(Codec)
TS = 1_700_000_000_000


def sample_records(n=12, big=False):
    out = []
    for i in range(n):
        key = None if i % 4 == 0 else b"key-%d" % i
        value = None if i == 3 else (b"v%d-" % i) * (200 if big else 3)
        headers = [("h1", b"x" * i), ("nul", None)] if i % 3 == 1 else []
        out.append((key, value, headers, TS + 7 * i - (50 if i == 5 else 0)))
    return out


def kp_records(buf):
    """(offset, timestamp, key, value, headers) for every record, via kafka-python, CRCs checked."""
    out = []
    mr = MemoryRecords(bytes(buf))
    while mr.has_next():
        b = mr.next_batch()
        assert b.validate_crc()
        for r in b:
            out.append((r.offset, r.timestamp, r.key, r.value, list(r.headers)))
    return out


def aio_records(buf):
    out = []
    mr = AioMemoryRecords(bytes(buf))
    while mr.has_next():
        b = mr.next_batch()
        assert b.validate_crc()
        for r in b:
            out.append((r.offset, r.timestamp, r.key, r.value, list(r.headers)))
    return out


def mine(buf):
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers))
            for _, r in iter_all_records(buf)]


# -- varints ------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, 1, -1, 63, -64, 64, 127, 128, 300, -300,
                               2**31 - 1, -(2**31)])
def test_varint_round_trip(n):
    out = bytearray()
    encode_varint(n, out)
    assert len(out) == size_of_varint(n)
    assert decode_varint(out, 0, len(out)) == (n, len(out))


@settings(max_examples=200, deadline=None)
@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(n):
    out = bytearray()
    encode_varlong(n, out)
    assert len(out) == size_of_varint(n)
    assert decode_varlong(out, 0, len(out)) == (n, len(out))


def test_varint_malformed():
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x80\x80", 0, 2)  # runs off the end
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\xff\xff\xff\xff\xff\x01", 0, 6)  # longer than 5 bytes
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\xff\xff\xff\xff\x7f", 0, 5)  # > 32 bits
    with pytest.raises(CorruptRecordError):
        decode_varlong(b"\xff" * 10 + b"\x01", 0, 11)
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x05\x80", 1, 1)  # end bound respected even if bytes exist
    with pytest.raises(ValueError):
        encode_varint(2**31, bytearray())


# -- oracles: their batches, our reader ----------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_decode(codec):
    b = MemoryRecordsBuilder(2, codec, 1 << 20, offset=0)
    for key, value, headers, ts in sample_records(big=True):
        b.append(ts, key, value, headers)
    b.close()
    buf = bytes(b.buffer())
    validate_batches(buf)
    assert mine(buf) == kp_records(buf)
    hdr, recs = decode_batch(buf)
    assert hdr.codec == codec and len(recs) == 12
    assert [r.offset_delta for r in recs] == list(range(12))
    assert all(r.absolute_timestamp(hdr.base_timestamp) == r.timestamp for r in recs)


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_batches_decode(codec):
    b = AioBuilder(magic=2, compression_type=codec, is_transactional=0, producer_id=-1,
                   producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, (key, value, headers, ts) in enumerate(sample_records(big=True)):
        b.append(i, timestamp=ts, key=key, value=value, headers=headers)
    buf = bytes(b.build())
    validate_batches(buf)
    assert mine(buf) == aio_records(buf)


# -- our batches, their readers ---------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
def test_built_batches_read_by_kafka_python_and_aiokafka(codec):
    recs = sample_records(big=True)
    buf = build_batch(recs, base_offset=1000, codec=codec, producer_id=7, producer_epoch=2,
                      base_sequence=10, partition_leader_epoch=4)
    (v,) = validate_batches(buf)
    h = v.header
    assert (h.codec, h.producer_id, h.producer_epoch, h.base_sequence, h.partition_leader_epoch) \
        == (codec, 7, 2, 10, 4)
    assert h.base_timestamp == TS and h.max_timestamp == TS + 77
    expected = [(1000 + i, ts, k, v, hd) for i, (k, v, hd, ts) in enumerate(recs)]
    assert kp_records(buf) == expected
    assert aio_records(buf) == expected
    assert mine(buf) == expected


def test_uncompressed_build_is_byte_identical_to_kafka_python():
    recs = sample_records()
    b = MemoryRecordsBuilder(2, 0, 1 << 20, offset=0)
    for key, value, headers, ts in recs:
        b.append(ts, key, value, headers)
    b.close()
    # kafka-python stamps leader epoch 0 where Java writes -1 (NO_PARTITION_LEADER_EPOCH)
    assert build_batch(recs, partition_leader_epoch=0) == bytes(b.buffer())


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=200),
                       st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)),
                                max_size=3),
                       st.integers(-1, 2**45)), min_size=1, max_size=30),
    st.sampled_from(CODECS), st.integers(0, 2**40), st.booleans())
def test_build_parse_round_trip(recs, codec, base, log_append):
    buf = bytearray(build_batch(recs, base_offset=base, codec=codec))
    if log_append:
        set_log_append_time(buf, 0, 2**41)
    validate_batches(buf)
    expected = [(base + i, 2**41 if log_append else ts, k, v, hd)
                for i, (k, v, hd, ts) in enumerate(recs)]
    assert mine(buf) == expected
    assert kp_records(buf) == expected


def test_record_objects_keep_offset_deltas_for_compaction():
    buf = build_batch(sample_records(6), base_offset=50)
    hdr, recs = decode_batch(buf)
    kept = [r for r in recs if r.offset_delta in (1, 4)]
    out = build_batch(kept, base_offset=hdr.base_offset, last_offset_delta=hdr.last_offset_delta)
    h2 = read_batch_header(out)
    assert h2.last_offset_delta == 5 and h2.records_count == 2
    assert [(r.offset, r.timestamp, r.key) for r in iter_records(out)] == \
        [(r.offset, r.timestamp, r.key) for r in kept]
    # Kafka's produce-time count rule would reject it; recovery mode accepts it
    with pytest.raises(ProtocolError):
        validate_batches(out)
    validate_batches(out, check_counts=False)
    assert [o for o, *_ in kp_records(out)] == [51, 54]
    # Records given with deltas only
    rs = [Record(0, 0, b"a", b"1"), Record(2, 5, b"b", b"2")]
    out = build_batch(rs, base_timestamp=TS)
    assert [(r.offset, r.timestamp) for r in iter_records(out)] == [(0, TS), (2, TS + 5)]


def test_empty_batch_for_compaction():
    out = build_batch([], base_offset=10, last_offset_delta=3)
    h = read_batch_header(out)
    assert h.records_count == 0 and h.last_offset == 13
    assert list(iter_records(out)) == []
    validate_batches(out, check_counts=False)


def test_transactional_and_control_batches():
    buf = build_batch(sample_records(3), producer_id=9, producer_epoch=1, base_sequence=0,
                      is_transactional=True)
    h = read_batch_header(buf)
    assert h.is_transactional and not h.is_control
    ctrl = build_control_batch(CONTROL_COMMIT, producer_id=9, producer_epoch=1,
                               coordinator_epoch=5, timestamp=TS, base_offset=3)
    (v,) = validate_batches(ctrl)
    assert v.header.is_control and v.header.is_transactional and v.header.producer_id == 9
    (rec,) = iter_records(ctrl)
    assert parse_control_record(rec.key, rec.value) == (CONTROL_COMMIT, 5)
    abort = build_control_batch(CONTROL_ABORT, 9, 1)
    (rec,) = iter_records(abort)
    assert parse_control_record(rec.key)[0] == CONTROL_ABORT
    # kafka-python recognises the marker
    mr = MemoryRecords(ctrl)
    b = mr.next_batch()
    assert b.validate_crc() and b.is_control_batch
    with pytest.raises(CorruptRecordError):
        parse_control_record(b"\x00")


def test_log_append_time_records_read_max_timestamp():
    buf = bytearray(build_batch(sample_records(4), codec=Codec.LZ4))
    set_log_append_time(buf, 0, TS + 10**6)
    assert {r.timestamp for r in iter_records(buf)} == {TS + 10**6}
    assert {t for _, t, *_ in kp_records(buf)} == {TS + 10**6}
    # built directly as LogAppendTime
    direct = build_batch(sample_records(4), timestamp_type=1, max_timestamp=TS + 5)
    assert read_batch_header(direct).timestamp_type == 1
    assert {t for _, t, *_ in kp_records(direct)} == {TS + 5}


# -- malformed ----------------------------------------------------------------

def _patched(buf, off, data):
    b = bytearray(buf)
    b[off:off + len(data)] = data
    write_crc(b, 0)
    return bytes(b)


def test_record_level_corruption_is_detected():
    buf = build_batch([(b"k", b"value", [], TS)])
    rec0 = 61
    for bad in (
        _patched(buf, rec0, b"\x7e"),           # record length larger than the batch
        _patched(buf, rec0, b"\x02"),           # record length too small
        _patched(buf, rec0 + 4, b"\x7f"),       # key length past the record
        _patched(buf, rec0 + 4, b"\x03"),       # key length -2
        _patched(buf, 57, struct.pack(">i", 2)),            # count says 2 records
        _patched(buf, 57, struct.pack(">i", 2_000_000_000)),  # huge count, no allocation
        _patched(buf, 57, struct.pack(">i", -1)),
        buf[:-1],
    ):
        with pytest.raises(ProtocolError):
            list(iter_records(bad))


def test_trailing_bytes_after_records_are_corrupt():
    buf = bytearray(build_batch([(b"k", b"v", [], TS)]))
    buf += b"\x00\x00"
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    write_crc(buf, 0)
    with pytest.raises(CorruptRecordError):
        list(iter_records(buf))


def test_header_key_must_be_utf8():
    buf = build_batch([(b"k", b"v", [(b"\xff\xfe", b"x")], TS)])
    with pytest.raises(CorruptRecordError):
        list(iter_records(buf))


def test_compressed_bomb_in_batch():
    buf = build_batch([(None, bytes(8 * 1024 * 1024), [], TS)], codec=Codec.GZIP)
    validate_batches(buf)  # within the 64 MiB a batch may decompress to
    with pytest.raises(CorruptRecordError):
        list(iter_records(buf, max_output=1 << 20))


def test_wrong_magic_for_decode():
    buf = bytearray(build_batch([(b"k", b"v", [], TS)]))
    buf[16] = 1
    with pytest.raises(CorruptRecordError):
        decode_batch(buf)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(CODECS), st.integers(0, 400), st.binary(min_size=1, max_size=6))
def test_fuzz_record_bytes_only_protocol_errors(codec, where, junk):
    buf = build_batch(sample_records(5), codec=codec)
    where = 61 + where % max(1, len(buf) - 61)
    bad = bytearray(buf[:where] + junk + buf[where + len(junk):])
    struct.pack_into(">i", bad, 8, len(bad) - 12)
    write_crc(bad, 0)
    try:
        validate_batches(bad)
    except ProtocolError:
        pass
    try:
        list(iter_records(bad, max_output=1 << 20))
    except ProtocolError:
        pass


def test_iter_all_records_ignores_partial_tail():
    a = build_batch(sample_records(2), base_offset=0)
    b = build_batch(sample_records(3), base_offset=2)
    assert [r.offset for _, r in iter_all_records(a + b[:-3])] == [0, 1]
    assert [r.offset for _, r in iter_all_records(a + b)] == [0, 1, 2, 3, 4]
