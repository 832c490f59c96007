"""Legacy v0/v1 message sets and up/down-conversion, against kafka-python and aiokafka."""
from __future__ import annotations

import struct
import zlib

import pytest
from aiokafka.record.legacy_records import LegacyRecordBatchBuilder as AioLegacyBuilder
from aiokafka.record.memory_records import MemoryRecords as AioMemoryRecords
from hypothesis import given, settings, strategies as st
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from samsa.protocol.errors import ErrorCode, ProtocolError
from samsa.protocol.records import (Codec, CorruptRecordError, UnsupportedCompressionError,
                              build_batch, build_control_batch, build_message_set,
                              downconvert_batches, downconvert_within, expand_wrapper, is_legacy,
                              iter_message_set,
                              iter_records, parse_message_set, read_batch_header,
                              set_log_append_time, upconvert_message_set, validate_batches,
                              validate_message_set)
from samsa.protocol.records.codecs import xxh32

TS = 1_600_000_000_000
LEGACY_CODECS = [Codec.NONE, Codec.GZIP, Codec.SNAPPY, Codec.LZ4]


def msgs(n=10, big=False):
    return [(None if i % 4 == 0 else b"k%d" % i,
             None if i == 2 else (b"val-%d " % i) * (100 if big else 1),
             TS + 3 * i - (9 if i == 4 else 0)) for i in range(n)]


def kp_read(buf, reader=MemoryRecords):
    out = []
    mr = reader(bytes(buf))
    while mr.has_next():
        b = mr.next_batch()
        assert b.validate_crc()
        for r in b:
            out.append((r.offset, r.timestamp, r.key, r.value))
    return out


def my_read(buf):
    return [(m.offset, m.timestamp if m.magic else None, m.key, m.value)
            for m in parse_message_set(buf)]


def kp_build(magic, codec, items, offset=0):
    b = MemoryRecordsBuilder(magic, codec, 1 << 20, offset=offset)
    for k, v, ts in items:
        b.append(ts, k, v)
    b.close()
    return bytearray(b.buffer())


def set_wrapper_offset(buf, offset):
    """What a broker does on append: only the wrapper's offset (not CRC-covered)."""
    struct.pack_into(">q", buf, 0, offset)
    return bytes(buf)


class _XXHashShim:
    """Stands in for the optional ``xxhash`` module kafka-python needs for 0.8-style lz4.

    Only the hash comes from us (checked against published vectors in test_codecs);
    the header munging under test is kafka-python's own (lz4_encode/decode_old_kafka).
    """

    class _H:
        def __init__(self, data):
            self.h = xxh32(bytes(data))

        def digest(self):
            return self.h.to_bytes(4, "big")

    xxh32 = _H


@pytest.fixture(autouse=True)
def _kafka_python_old_lz4(monkeypatch):
    import kafka.codec
    if kafka.codec.xxhash is None:
        monkeypatch.setattr(kafka.codec, "xxhash", _XXHashShim)


def aiokafka_can(magic, codec):
    # aiokafka refuses lz4 with magic 0 (KAFKA-3160) when building, and reads it strictly
    return not (magic == 0 and codec == Codec.LZ4)


# -- oracles: their message sets, our parser ---------------------------------------

@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_kafka_python_message_sets_parse(magic, codec):
    items = msgs(big=True)
    buf = kp_build(magic, codec, items, offset=0)
    if codec:
        buf = set_wrapper_offset(buf, 500 + len(items) - 1 if magic else 0)
    else:
        buf = bytes(buf)
    got = my_read(buf)
    assert got == kp_read(buf)
    assert [k for _, _, k, _ in got] == [k for k, _, _ in items]
    assert [v for *_, v in got] == [v for _, v, _ in items]
    if magic == 1:
        assert [t for _, t, _, _ in got] == [t for _, _, t in items]
        if codec:
            assert [o for o, *_ in got] == list(range(500, 510))  # relative inner offsets
    validate_message_set(buf)
    assert is_legacy(buf)


@pytest.mark.parametrize("magic,codec", [(m, c) for m in (0, 1) for c in LEGACY_CODECS
                                         if aiokafka_can(m, c)])
def test_aiokafka_message_sets_parse(magic, codec):
    items = msgs(big=True)
    b = AioLegacyBuilder(magic, codec, 1 << 20)
    for i, (k, v, ts) in enumerate(items):
        b.append(i, timestamp=ts, key=k, value=v)
    buf = bytearray(b.build())
    if codec and magic:
        buf = set_wrapper_offset(buf, 9)
    got = my_read(bytes(buf))
    assert got == kp_read(buf, AioMemoryRecords)
    assert [o for o, *_ in got] == list(range(10))


# -- our message sets, their readers ---------------------------------------------

@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_built_message_sets_read_by_clients(magic, codec):
    items = msgs(big=True)
    buf = build_message_set(items, magic, codec, base_offset=1000)
    expected = [(1000 + i, ts if magic else None, k, v) for i, (k, v, ts) in enumerate(items)]
    assert my_read(buf) == expected
    assert kp_read(buf) == expected
    if aiokafka_can(magic, codec):
        assert kp_read(buf, AioMemoryRecords) == expected
    top = list(iter_message_set(buf))
    if codec:
        (w,) = top
        assert w.offset == 1009 and w.key is None and w.codec == codec
        if magic:
            assert w.timestamp == max(t for *_, t in items)
    else:
        assert len(top) == 10


def test_uncompressed_build_matches_kafka_python_bytes():
    for magic in (0, 1):
        items = msgs()
        assert build_message_set(items, magic) == bytes(kp_build(magic, 0, items))


def test_v0_lz4_wrapper_uses_old_kafka_checksum():
    buf = build_message_set(msgs(), 0, Codec.LZ4)
    (w,) = iter_message_set(buf)
    frame = w.value
    assert frame[6] == (xxh32(frame[0:6]) >> 8) & 0xFF
    assert [m.key for m in expand_wrapper(w)] == [k for k, _, _ in msgs()]


def test_v1_inner_offsets_are_relative_and_v0_absolute():
    for magic in (0, 1):
        buf = build_message_set(msgs(3), magic, Codec.GZIP, offsets=[10, 12, 15])
        (w,) = iter_message_set(buf)
        inner_raw = list(iter_message_set(zlib.decompress(w.value, 31)))
        assert [m.offset for m in inner_raw] == ([0, 2, 5] if magic else [10, 12, 15])
        assert w.offset == 15
        assert [m.offset for m in parse_message_set(buf)] == [10, 12, 15]


def test_v1_log_append_time_wrapper():
    buf = build_message_set(msgs(4), 1, Codec.SNAPPY, timestamp_type=1, log_append_time=TS * 2)
    (w,) = iter_message_set(buf)
    assert w.timestamp_type == 1 and w.timestamp == TS * 2
    got = parse_message_set(buf)
    assert {m.timestamp for m in got} == {TS * 2} and {m.timestamp_type for m in got} == {1}
    assert {t for _, t, _, _ in kp_read(buf)} == {TS * 2}
    # uncompressed LogAppendTime
    buf = build_message_set(msgs(2), 1, timestamp_type=1, log_append_time=5)
    assert [(m.timestamp, m.timestamp_type) for m in parse_message_set(buf)] == [(5, 1), (5, 1)]


def test_v0_has_no_timestamps():
    m = parse_message_set(build_message_set(msgs(2), 0))
    assert [(x.timestamp, x.timestamp_type, x.magic) for x in m] == [(-1, -1, 0)] * 2


def test_zstd_not_allowed_in_legacy():
    with pytest.raises(UnsupportedCompressionError) as ei:
        build_message_set(msgs(2), 1, Codec.ZSTD)
    assert ei.value.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


# -- partial and malformed ------------------------------------------------------

def test_partial_trailing_entry_is_ignored_unless_strict():
    a = build_message_set(msgs(3), 1)
    b = build_message_set(msgs(2), 1, Codec.GZIP, base_offset=3)
    full = a + b
    for cut in range(len(a) + 1, len(full)):
        assert [m.offset for m in parse_message_set(full[:cut])] == [0, 1, 2]
        with pytest.raises(CorruptRecordError):
            parse_message_set(full[:cut], strict=True)
    assert [m.offset for m in parse_message_set(full)] == [0, 1, 2, 3, 4]


def test_bad_crc_magic_and_lengths():
    good = bytearray(build_message_set([(b"k", b"v", TS)], 1))
    bad = bytearray(good)
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC"):
        parse_message_set(bad)
    assert parse_message_set(bad, verify_crc=False)[0].value == b"w"
    bad = bytearray(good)
    bad[16] = 3
    with pytest.raises(CorruptRecordError, match="magic"):
        parse_message_set(bad)
    bad = bytearray(good)
    struct.pack_into(">i", bad, 8, 5)  # size below minimum
    with pytest.raises(CorruptRecordError):
        parse_message_set(bad)
    # key length that runs past the message, CRC fixed so only the length is wrong
    bad = bytearray(good)
    struct.pack_into(">i", bad, 26, 1000)
    struct.pack_into(">I", bad, 12, zlib.crc32(bad[16:]))
    with pytest.raises(CorruptRecordError):
        parse_message_set(bad)
    with pytest.raises(CorruptRecordError):
        validate_message_set(b"")


def _wrap(magic, codec_bits, value, offset=0):
    from samsa.protocol.records.legacy import encode_message
    return encode_message(offset, magic, codec_bits, TS if magic else -1, None, value)


def test_bad_wrappers():
    inner = build_message_set(msgs(2), 1)
    nested = build_message_set(msgs(2), 1, Codec.GZIP)
    cases = [
        _wrap(1, Codec.GZIP, None),                               # null value
        _wrap(1, Codec.GZIP, b"not gzip at all"),                 # garbage
        _wrap(1, Codec.GZIP, zlib.compress(b"", 9)),              # wrong framing
        _wrap(1, Codec.GZIP, _gz(b"")),                          # empty inner set
        _wrap(1, Codec.GZIP, _gz(nested)),                       # nested compression
        _wrap(1, Codec.GZIP, _gz(inner[:-3])),                   # truncated inner set
        _wrap(0, Codec.GZIP, _gz(inner)),                        # magic mismatch
        _wrap(1, Codec.ZSTD, b"\x28\xb5\x2f\xfd"),               # zstd in v1
        _wrap(1, 6, b"x"),                                        # unknown codec
    ]
    for c in cases:
        with pytest.raises(ProtocolError):
            parse_message_set(c)
        with pytest.raises(ProtocolError):
            upconvert_message_set(c)


def _gz(data):
    c = zlib.compressobj(6, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def test_wrapper_bomb_is_bounded():
    big = build_message_set([(None, bytes(4 << 20), TS)], 1, Codec.GZIP)
    with pytest.raises(CorruptRecordError):
        parse_message_set(big, max_output=1 << 20)


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(LEGACY_CODECS), st.sampled_from([0, 1]), st.binary(max_size=200),
       st.integers(0, 500))
def test_fuzz_only_protocol_errors(codec, magic, junk, where):
    buf = build_message_set(msgs(4), magic, codec)
    where = min(where, len(buf))
    for bad in (junk, buf[:where] + junk, buf[:where] + junk + buf[where + len(junk):]):
        for fn in (parse_message_set, upconvert_message_set,
                   lambda b: downconvert_batches(b, magic), validate_message_set):
            try:
                fn(bad)
            except ProtocolError:
                pass


# -- up-conversion ----------------------------------------------------------------

def v2_read(buf):
    return [(r.offset, r.timestamp, r.key, r.value)
            for v in validate_batches(buf) for r in iter_records(buf, v.position)]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_upconvert(magic, codec):
    items = msgs(big=True)
    ms = build_message_set(items, magic, codec, base_offset=40)
    up = upconvert_message_set(ms)
    (v,) = validate_batches(up)  # a valid produce payload: CRC, counts
    assert v.header.codec == codec and v.header.base_offset == 0
    assert v.header.records_count == len(items)
    expected = [(i, ts if magic else -1, k, val) for i, (k, val, ts) in enumerate(items)]
    assert v2_read(up) == expected
    assert kp_read(up) == expected
    kept = upconvert_message_set(ms, keep_offsets=True)
    assert [o for o, *_ in kp_read(kept)] == list(range(40, 50))


def test_upconvert_groups_runs_and_splits_at_wrappers():
    ms = (build_message_set(msgs(2), 1, base_offset=0)
          + build_message_set(msgs(3), 1, Codec.GZIP, base_offset=2)
          + build_message_set(msgs(2), 1, base_offset=5)
          + build_message_set(msgs(2), 1, Codec.LZ4, base_offset=7))
    up = upconvert_message_set(ms)
    hs = [v.header for v in validate_batches(up)]
    assert [(h.base_offset, h.records_count, h.codec) for h in hs] == \
        [(0, 2, 0), (2, 3, 1), (5, 2, 0), (7, 2, 3)]
    assert [o for o, *_ in kp_read(up)] == list(range(9))


def test_upconvert_log_append_time():
    ms = build_message_set(msgs(3), 1, Codec.GZIP, timestamp_type=1, log_append_time=TS + 99)
    up = upconvert_message_set(ms)
    h = read_batch_header(up)
    assert h.timestamp_type == 1 and h.max_timestamp == TS + 99
    assert {t for _, t, _, _ in kp_read(up)} == {TS + 99}


def test_upconvert_rejects_truncated_produce_payload_but_not_when_lenient():
    ms = build_message_set(msgs(3), 1)
    with pytest.raises(CorruptRecordError):
        upconvert_message_set(ms[:-4])
    assert len(v2_read(upconvert_message_set(ms[:-4], strict=False))) == 2


# -- down-conversion ------------------------------------------------------------

@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS)
def test_downconvert(magic, codec):
    recs = [(k, v, [("dropped", b"h")], ts) for k, v, ts in msgs(big=True)]
    a = build_batch(recs[:6], base_offset=100, codec=codec)
    b = build_batch(recs[6:], base_offset=106, codec=codec)
    down = downconvert_batches(a + b + a[:40], magic)  # fetch cut mid-batch
    expected = [(100 + i, ts if magic else None, k, v) for i, (k, v, _, ts) in enumerate(recs)]
    assert my_read(down) == expected
    assert kp_read(down) == expected
    top = list(iter_message_set(down))
    assert {m.magic for m in top} == {magic}
    if codec:
        assert [(m.offset, m.codec) for m in top] == [(105, codec), (109, codec)]


def test_downconvert_skips_control_and_keeps_gaps():
    data = build_batch([(b"a", b"1", [], TS), (b"b", b"2", [], TS + 1)], base_offset=0,
                       producer_id=1, producer_epoch=0, base_sequence=0, is_transactional=True)
    marker = build_control_batch(1, producer_id=1, producer_epoch=0, base_offset=2, timestamp=TS)
    later = build_batch([(b"c", b"3", [], TS + 2)], base_offset=10, codec=Codec.GZIP)
    empty = build_batch([], base_offset=11, last_offset_delta=2)
    down = downconvert_batches(data + marker + later + empty, 1)
    assert kp_read(down) == [(0, TS, b"a", b"1"), (1, TS + 1, b"b", b"2"), (10, TS + 2, b"c", b"3")]


def test_downconvert_log_append_time():
    buf = bytearray(build_batch([(b"k", b"v", [], TS)] * 3, codec=Codec.SNAPPY))
    set_log_append_time(buf, 0, TS + 7)
    down = downconvert_batches(buf, 1)
    (w,) = iter_message_set(down)
    assert w.timestamp_type == 1 and w.timestamp == TS + 7
    assert {t for _, t, _, _ in kp_read(down)} == {TS + 7}
    down0 = downconvert_batches(buf, 0)
    assert {m.timestamp for m in parse_message_set(down0)} == {-1}


def test_downconvert_zstd_is_unsupported():
    buf = build_batch([(b"k", b"v", [], TS)], codec=Codec.ZSTD)
    for magic in (0, 1):
        with pytest.raises(UnsupportedCompressionError):
            downconvert_batches(buf, magic)


def test_downconvert_passes_legacy_entries_through():
    v0 = build_message_set(msgs(2), 0, base_offset=0)
    v1 = build_message_set(msgs(2), 1, Codec.GZIP, base_offset=2)
    v2 = build_batch([(b"x", b"y", [], TS)], base_offset=4)
    down = downconvert_batches(v0 + v1 + v2, 0)
    assert {m.magic for m in iter_message_set(down)} == {0}
    assert [m.offset for m in parse_message_set(down)] == [0, 1, 2, 3, 4]
    assert down.startswith(v0)


def test_downconvert_within_a_budget_always_converts_the_first_batch():
    """The work of a down-conversion is bounded by the fetch's limit: a batch
    that decompresses to 8 MiB is converted when it comes first (a fetcher
    must get past it), and ends the message set when it comes later and
    does not fit what is left; without ever being decompressed further."""
    small = build_batch([(b"k", b"v" * 1000, [], TS)], base_offset=0, codec=Codec.GZIP)
    bomb = build_batch([(None, bytes(8 << 20), [], TS)], base_offset=1, codec=Codec.GZIP)
    after = build_batch([(b"z", b"z", [], TS)], base_offset=2)
    assert len(bomb) < 20_000
    down, decoded = downconvert_within(small + bomb + after, 1, 100_000)
    assert [o for o, *_ in kp_read(down)] == [0] and 1000 <= decoded < 2000
    down, decoded = downconvert_within(bomb + after, 1, 100_000)
    assert [o for o, *_ in kp_read(down)] == [1] and decoded >= 8 << 20
    assert [o for o, *_ in kp_read(downconvert_within(small + after, 1, 100_000)[0])] == [0, 2]
    down, _ = downconvert_within(bomb + after, 1, 100_000, first_batch=False)
    assert down == b""  # a later partition of the same fetch: nothing fits
    assert downconvert_within(small + bomb, 1, None)[0] == downconvert_batches(small + bomb, 1)
    # a corrupt batch past the budget is not this fetch's business; alone it is
    corrupt = bytearray(bomb)
    corrupt[-20:] = b"\xff" * 20
    assert [o for o, *_ in kp_read(downconvert_within(small + corrupt, 1, 100_000)[0])] == [0]
    with pytest.raises(CorruptRecordError):
        downconvert_within(bytes(corrupt), 1, 100_000)


def test_downconvert_empty_and_tiny_inputs():
    assert downconvert_batches(b"", 1) == b""
    assert downconvert_batches(b"\x00" * 10, 1) == b""
    with pytest.raises(ValueError):
        downconvert_batches(b"", 2)


# -- properties across formats ------------------------------------------------------

entries = st.lists(st.tuples(st.none() | st.binary(max_size=30), st.none() | st.binary(max_size=120),
                             st.integers(0, 2**42)), min_size=1, max_size=20)


@settings(max_examples=80, deadline=None)
@given(entries, st.sampled_from([0, 1]), st.sampled_from(LEGACY_CODECS), st.integers(0, 2**40))
def test_legacy_build_parse_round_trip(items, magic, codec, base):
    buf = build_message_set(items, magic, codec, base_offset=base)
    got = parse_message_set(buf, strict=True)
    assert [(m.offset, m.key, m.value) for m in got] == \
        [(base + i, k, v) for i, (k, v, _) in enumerate(items)]
    assert [m.timestamp for m in got] == ([t for *_, t in items] if magic else [-1] * len(items))


@settings(max_examples=60, deadline=None)
@given(entries, st.sampled_from([0, 1]), st.sampled_from(LEGACY_CODECS), st.integers(0, 2**40))
def test_up_then_down_conversion_round_trip(items, magic, codec, base):
    ms = build_message_set(items, magic, codec, base_offset=base)
    up = upconvert_message_set(ms, keep_offsets=True)
    validate_batches(up)
    down = downconvert_batches(up, magic)
    assert [(m.offset, m.timestamp, m.key, m.value) for m in parse_message_set(down)] == \
        [(m.offset, m.timestamp, m.key, m.value) for m in parse_message_set(ms)]


def test_zstd_wrapper_in_legacy_set_is_unsupported_compression():
    for magic in (0, 1):
        with pytest.raises(UnsupportedCompressionError):
            parse_message_set(_wrap(magic, Codec.ZSTD, b"\x28\xb5\x2f\xfd"))
