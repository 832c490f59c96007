"""Codecs: round trips, interop with kafka-python's and aiokafka's codec functions, bombs, garbage."""
from __future__ import annotations

import gzip
import os
import struct
import zlib

import aiokafka.codec as ac
import kafka.codec as kc
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings, strategies as st

from samsa.protocol.errors import ErrorCode, ProtocolError
from samsa.protocol.records import (Codec, CorruptRecordError, UnsupportedCompressionError,
                              codec_for_name, compress, decompress)
from samsa.protocol.records.codecs import XERIAL_MAGIC, xxh32

ALL = list(Codec)
PAYLOADS = [b"", b"x", os.urandom(3000), b"abc" * 40000 + os.urandom(70000)]


@pytest.mark.parametrize("codec", ALL)
@pytest.mark.parametrize("payload", PAYLOADS, ids=["empty", "one", "random", "mixed-large"])
def test_round_trip(codec, payload):
    assert decompress(codec, compress(codec, payload)) == payload


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(ALL), st.binary(max_size=5000), st.sampled_from([0, 1, 2]))
def test_round_trip_property(codec, payload, magic):
    if codec == Codec.ZSTD and magic < 2:
        with pytest.raises(UnsupportedCompressionError):
            compress(codec, payload, magic=magic)
        return
    assert decompress(codec, compress(codec, payload, magic=magic)) == payload


def test_deterministic_output():
    data = b"hello world " * 500
    for c in ALL:
        assert compress(c, data) == compress(c, data)


@pytest.mark.parametrize("payload", PAYLOADS[1:], ids=["one", "random", "mixed-large"])
def test_kafka_python_interop(payload):
    # theirs -> ours
    assert decompress(Codec.GZIP, kc.gzip_encode(payload)) == payload
    assert decompress(Codec.SNAPPY, kc.snappy_encode(payload)) == payload  # xerial
    assert decompress(Codec.SNAPPY, kc.snappy_encode(payload, xerial_compatible=False)) == payload
    assert decompress(Codec.LZ4, kc.lz4_encode(payload)) == payload
    assert decompress(Codec.ZSTD, kc.zstd_encode(payload)) == payload
    # ours -> theirs
    assert kc.gzip_decode(compress(Codec.GZIP, payload)) == payload
    assert kc.snappy_decode(compress(Codec.SNAPPY, payload)) == payload
    assert kc.lz4_decode(compress(Codec.LZ4, payload)) == payload
    assert kc.zstd_decode(compress(Codec.ZSTD, payload)) == payload


@pytest.mark.parametrize("payload", PAYLOADS[1:], ids=["one", "random", "mixed-large"])
def test_aiokafka_interop(payload):
    assert decompress(Codec.GZIP, ac.gzip_encode(payload)) == payload
    assert decompress(Codec.SNAPPY, ac.snappy_encode(payload, xerial_compatible=True)) == payload
    assert decompress(Codec.SNAPPY, ac.snappy_encode(payload, xerial_compatible=False)) == payload
    assert decompress(Codec.LZ4, ac.lz4_encode(payload)) == payload
    assert decompress(Codec.ZSTD, ac.zstd_encode(payload)) == payload
    assert ac.gzip_decode(compress(Codec.GZIP, payload)) == payload
    assert ac.snappy_decode(compress(Codec.SNAPPY, payload)) == payload
    assert ac.lz4_decode(compress(Codec.LZ4, payload)) == payload
    assert ac.zstd_decode(compress(Codec.ZSTD, payload)) == payload


def test_snappy_output_is_xerial_framed():
    out = compress(Codec.SNAPPY, b"a" * 100_000)
    assert out[:8] == XERIAL_MAGIC
    assert struct.unpack(">ii", out[8:16]) == (1, 1)


def test_lz4_output_is_kafka_compatible_frame():
    out = compress(Codec.LZ4, os.urandom(200_000))
    flg, bd = out[4], out[5]
    assert flg & 0x20  # independent blocks: Kafka's Java reader decodes blocks one by one
    assert not flg & 0x08  # no content size: old Kafka rejects it
    assert (bd >> 4) & 0x7 == 4  # 64 KiB blocks


def test_xxh32_known_vectors():
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F
    # and agrees with the header checksum lz4 itself writes
    frame = lz4.frame.compress(b"data", store_size=True)
    assert (xxh32(frame[4:14]) >> 8) & 0xFF == frame[14]


def test_lz4_old_kafka_header_checksum():
    data = b"old kafka " * 1000
    old = compress(Codec.LZ4, data, magic=0)
    new = compress(Codec.LZ4, data, magic=1)
    assert old[:6] == new[:6] and old[7:] == new[7:]
    # Kafka 0.8 hashed the magic number too (KIP-57)
    assert old[6] == (xxh32(old[0:6]) >> 8) & 0xFF
    assert new[6] == (xxh32(new[4:6]) >> 8) & 0xFF
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(old)  # a strict reader refuses it ...
    assert decompress(Codec.LZ4, old) == data  # ... we read both
    assert decompress(Codec.LZ4, new) == data
    # the same munging kafka-python applies (lz4_encode_old_kafka), with content size
    framed = lz4.frame.compress(data, store_size=True)
    hc_pos = 14
    broken = framed[:hc_pos] + bytes([(xxh32(framed[:hc_pos]) >> 8) & 0xFF]) + framed[hc_pos + 1:]
    assert decompress(Codec.LZ4, broken) == data


def test_concatenated_frames():
    assert decompress(Codec.GZIP, gzip.compress(b"a") + gzip.compress(b"b")) == b"ab"
    assert decompress(Codec.LZ4, lz4.frame.compress(b"a") + lz4.frame.compress(b"b")) == b"ab"
    z = zstandard.ZstdCompressor()
    assert decompress(Codec.ZSTD, z.compress(b"a") + z.compress(b"b")) == b"ab"


def test_zstd_without_content_size():
    z = zstandard.ZstdCompressor(write_content_size=False)
    data = os.urandom(1000) * 300
    assert decompress(Codec.ZSTD, z.compress(data)) == data
    cobj = zstandard.ZstdCompressor().compressobj()
    streamed = cobj.compress(data) + cobj.flush()
    assert decompress(Codec.ZSTD, streamed) == data


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_decompression_bomb_is_bounded(codec):
    bomb = compress(codec, bytes(20 * 1024 * 1024))
    assert len(bomb) < 2 * 1024 * 1024
    with pytest.raises(CorruptRecordError, match="more than|larger than"):
        decompress(codec, bomb, max_output=1024 * 1024)
    # just at the limit is fine
    small = compress(codec, bytes(1000))
    assert decompress(codec, small, max_output=1000) == bytes(1000)
    with pytest.raises(CorruptRecordError):
        decompress(codec, small, max_output=999)


def test_raw_snappy_lying_about_length_is_bounded():
    # preamble claims 4 GiB; we refuse before the library tries to allocate it
    with pytest.raises(CorruptRecordError):
        decompress(Codec.SNAPPY, b"\x80\x80\x80\x80\x10" + b"\x00" * 10)


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_truncated_and_garbage_raise_protocol_error(codec):
    good = compress(codec, os.urandom(500) * 20)
    for bad in (good[: len(good) // 2], good[:-1], good[:3], b"", b"\x00" * 40, os.urandom(64)):
        with pytest.raises(ProtocolError) as ei:
            decompress(codec, bad)
        assert isinstance(ei.value, CorruptRecordError)
        assert ei.value.error_code == ErrorCode.CORRUPT_MESSAGE


def test_xerial_block_length_past_end():
    good = compress(Codec.SNAPPY, b"q" * 1000)
    bad = good[:16] + struct.pack(">I", 10_000) + good[20:]
    with pytest.raises(CorruptRecordError):
        decompress(Codec.SNAPPY, bad)
    with pytest.raises(CorruptRecordError):
        decompress(Codec.SNAPPY, good + b"\x00\x00")


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(ALL[1:]), st.binary(max_size=400), st.integers(0, 300))
def test_fuzz_only_protocol_errors(codec, junk, cut):
    good = compress(codec, b"fuzz me " * 100)
    for bad in (junk, good[:cut] + junk, bytes(b ^ 0x5A if i == cut else b for i, b in enumerate(good))):
        try:
            decompress(codec, bad, max_output=1 << 20)
        except ProtocolError:
            pass


def test_unknown_codec():
    with pytest.raises(UnsupportedCompressionError) as ei:
        decompress(5, b"x")
    assert ei.value.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    with pytest.raises(UnsupportedCompressionError):
        compress(7, b"x")


def test_codec_for_name():
    assert codec_for_name("gzip") is Codec.GZIP
    assert codec_for_name("uncompressed") is Codec.NONE
    assert codec_for_name("ZSTD") is Codec.ZSTD
    with pytest.raises(ValueError):
        codec_for_name("producer")


def test_gzip_output_is_plain_gzip():
    out = compress(Codec.GZIP, b"hello")
    assert out[:2] == b"\x1f\x8b"
    assert gzip.decompress(out) == b"hello"
    assert zlib.decompress(out, 31) == b"hello"
