"""v2 batch header validation and in-place patching, checked against kafka-python's builder/reader."""
from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from samsa.protocol.errors import ErrorCode, ProtocolError
from samsa.protocol.records import (BATCH_OVERHEAD, BatchHeader, CorruptRecordError, InvalidRecordError,
                              ValidatedBatch, iter_batch_headers, read_batch_header,
                              set_base_offset, set_log_append_time, set_partition_leader_epoch,
                              validate_batches)
from samsa.protocol.records.batch import compute_crc, write_crc

CODECS = [0, 1, 2, 3, 4]


def kp_batch(codec=0, n=5, ts0=1_700_000_000_000, producer=None, transactional=False, big=False):
    kw = {}
    if producer:
        kw = dict(producer_id=producer[0], producer_epoch=producer[1], base_sequence=producer[2],
                  transactional=transactional)
    b = MemoryRecordsBuilder(2, codec, 1 << 20, **kw)
    for i in range(n):
        val = (b"value-%d-" % i) * (50 if big else 1)
        b.append(ts0 + i, b"key-%d" % i, val, [("h", b"x")] if i % 2 else [])
    b.close()
    return bytes(b.buffer())


def kp_read(buf):
    """Records as kafka-python sees them, after it validated every CRC."""
    out = []
    mr = MemoryRecords(bytes(buf))
    while mr.has_next():
        batch = mr.next_batch()
        assert batch.validate_crc()
        for r in batch:
            out.append((r.offset, r.timestamp, r.key, r.value))
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_validate(codec):
    buf = kp_batch(codec, n=7, big=True) + kp_batch(codec, n=3)
    vb = validate_batches(buf)
    assert [v.position for v in vb] == [0, vb[0].header.size]
    h = vb[0].header
    assert isinstance(vb[0], ValidatedBatch) and isinstance(h, BatchHeader)
    assert h.magic == 2 and h.records_count == 7 and h.last_offset_delta == 6
    assert h.codec == codec
    assert h.size == vb[1].position
    assert h.base_timestamp == 1_700_000_000_000 and h.max_timestamp == 1_700_000_000_006
    assert h.timestamp_type == 0 and not h.is_transactional and not h.is_control
    assert h.last_sequence == -1
    assert vb[1].position + vb[1].header.size == len(buf)


def test_producer_fields():
    buf = kp_batch(0, n=4, producer=(42, 3, 2147483646), transactional=True)
    (v,) = validate_batches(buf)
    h = v.header
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (42, 3, 2147483646)
    assert h.is_transactional
    assert h.last_sequence == 1  # wraps at 2^31-1 to 0, like Kafka's


def test_read_and_iter_headers_stop_at_partial_tail():
    a, b = kp_batch(0, n=2), kp_batch(1, n=3, big=True)
    buf = a + b
    assert read_batch_header(buf) == validate_batches(buf)[0].header
    assert read_batch_header(buf, len(a)).records_count == 3
    for cut in (len(a), len(a) + 1, len(a) + BATCH_OVERHEAD, len(buf) - 1):
        got = list(iter_batch_headers(buf[:cut]))
        assert [p for p, _ in got] == [0]
    assert [p for p, _ in iter_batch_headers(buf)] == [0, len(a)]
    with pytest.raises(ProtocolError):
        read_batch_header(buf[:60])
    with pytest.raises(ProtocolError):
        read_batch_header(buf, len(buf) - 10)


def test_empty_buffer_is_no_batches():
    assert validate_batches(b"") == []


@pytest.mark.parametrize("cut", [1, 12, 60, 61, -1])
def test_truncated_is_corrupt(cut):
    buf = kp_batch(0, n=3)
    with pytest.raises(CorruptRecordError) as ei:
        validate_batches(buf[:cut] if cut > 0 else buf[:cut])
    assert ei.value.error_code == ErrorCode.CORRUPT_MESSAGE
    # Recovery mode: a torn tail is not an error, the walk just stops.
    assert validate_batches(buf + buf[:cut], allow_trailing_partial=True)[0].position == 0


def test_trailing_garbage_and_length_past_end():
    buf = bytearray(kp_batch(0, n=3))
    with pytest.raises(CorruptRecordError):
        validate_batches(bytes(buf) + b"\x00" * 5)
    struct.pack_into(">i", buf, 8, len(buf))  # claims more than present
    with pytest.raises(CorruptRecordError):
        validate_batches(buf)
    struct.pack_into(">i", buf, 8, 10)  # below the minimum header
    with pytest.raises(CorruptRecordError):
        validate_batches(buf)
    struct.pack_into(">i", buf, 8, -5)
    with pytest.raises(CorruptRecordError):
        validate_batches(buf)


def test_bad_magic_and_crc():
    buf = bytearray(kp_batch(0, n=3))
    buf[16] = 1
    with pytest.raises(CorruptRecordError, match="magic"):
        validate_batches(buf)
    buf = bytearray(kp_batch(0, n=3))
    buf[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_batches(buf)
    # Fields before the CRC'd range are not covered: flipping them is fine.
    buf = bytearray(kp_batch(0, n=3))
    buf[0] = 0x01
    buf[13] = 0x22
    validate_batches(buf)


def _with_field(buf, fmt, off, value):
    b = bytearray(buf)
    struct.pack_into(fmt, b, off, value)
    write_crc(b, 0)
    return b


def test_semantic_count_checks():
    buf = kp_batch(0, n=3)
    for bad in (_with_field(buf, ">i", 57, 0), _with_field(buf, ">i", 57, -1),
                _with_field(buf, ">i", 23, 5), _with_field(buf, ">i", 57, 2_000_000_000)):
        with pytest.raises(InvalidRecordError) as ei:
            validate_batches(bad)
        assert ei.value.error_code == ErrorCode.INVALID_RECORD
        # Recovery of compacted segments does not check counts.
        assert len(validate_batches(bad, check_counts=False)) == 1


def test_patching_base_offset_and_epoch_keeps_crc():
    buf = bytearray(kp_batch(2, n=4, big=True))
    crc = read_batch_header(buf).crc
    set_base_offset(buf, 0, 1234567890123)
    set_partition_leader_epoch(buf, 0, 17)
    h = validate_batches(buf)[0].header
    assert (h.base_offset, h.partition_leader_epoch, h.crc) == (1234567890123, 17, crc)
    assert h.last_offset == 1234567890126
    assert [o for o, *_ in kp_read(buf)] == list(range(1234567890123, 1234567890127))


@pytest.mark.parametrize("codec", CODECS)
def test_set_log_append_time_is_valid_for_kafka_python(codec):
    a, b = kp_batch(codec, n=3, big=True), kp_batch(codec, n=2)
    buf = bytearray(a + b)
    set_log_append_time(buf, len(a), 1_800_000_000_000)
    vb = validate_batches(buf)
    h = vb[1].header
    assert h.timestamp_type == 1 and h.max_timestamp == 1_800_000_000_000
    assert h.base_timestamp == 1_700_000_000_000  # Kafka leaves it alone
    assert h.crc == compute_crc(buf, len(a))
    recs = kp_read(buf)
    assert [t for _, t, _, _ in recs[3:]] == [1_800_000_000_000] * 2
    assert [t for _, t, _, _ in recs[:3]] == [1_700_000_000_000 + i for i in range(3)]
    before = bytes(buf)
    set_log_append_time(buf, len(a), 1_800_000_000_000)  # idempotent
    assert bytes(buf) == before


def test_accepts_memoryview_and_bytearray():
    buf = kp_batch(3, n=3)
    assert validate_batches(memoryview(buf)) == validate_batches(bytearray(buf)) == validate_batches(buf)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 400))
def test_fuzz_only_protocol_errors(junk, where):
    base = bytearray(kp_batch(0, n=2) + kp_batch(1, n=2))
    where = min(where, len(base))
    for buf in (junk, bytes(base[:where]) + junk, bytes(base[:where]) + junk + bytes(base[where:])):
        try:
            validate_batches(buf)
        except ProtocolError:
            pass
        list(iter_batch_headers(buf))
