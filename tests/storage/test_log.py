"""Log: offsets, reads as file regions, rolls, limits, timestamps, DeleteRecords, retention."""
from __future__ import annotations

import os
import struct
import threading

import pytest

from samsa.config.topic import TopicConfig
from samsa.protocol.records import build_batch as proto_build_batch, iter_batch_headers, iter_records
from samsa.storage.errors import (CorruptRecordError, InvalidRecordError, OffsetOutOfRangeError,
                            RecordTooLargeError)
from samsa.storage.log import AppendOrigin
from tests.storage.helpers import batch_of, build_batch
from tests.support.waiting import wait_until


def read_all(lg, start=0, max_bytes=1 << 30):
    rr = lg.read(start, max_bytes)
    return b"".join(r.read_bytes() for r in rr.regions)


def offsets_in(data):
    return [(h.base_offset, h.last_offset) for _, h in iter_batch_headers(data)]


def test_offsets_assigned_contiguously(make_log):
    lg = make_log()
    r1 = lg.append(batch_of(3))
    r2 = lg.append(batch_of(1) + batch_of(2))
    assert (r1.first_offset, r1.last_offset) == (0, 2)
    assert (r2.first_offset, r2.last_offset) == (3, 5)
    assert lg.log_end_offset == 6
    assert lg.high_watermark == 0   # appends never commit: the partition's owner does
    assert offsets_in(read_all(lg)) == [(0, 2), (3, 3), (4, 5)]


def test_file_names_and_layout(make_log, tmp_path):
    lg = make_log(TopicConfig(segment_bytes=400, index_interval_bytes=1, segment_index_bytes=4096))
    for _ in range(10):
        lg.append(batch_of(2, size=50))
    names = sorted(os.listdir(lg.dir))
    assert "00000000000000000000.log" in names
    assert all(len(n.split(".")[0]) == 20 for n in names if n[0].isdigit())
    # rolled segments have trimmed indexes; the active one's entries are
    # buffered (written per 4 KiB, and then the file is preallocated)
    segs = lg.segments
    assert len(segs) > 1
    first = segs[0]
    assert os.path.getsize(first.index_path) == 8 * first.offset_index.entries
    assert os.path.getsize(first.time_index_path) == 12 * first.time_index.entries
    assert os.path.getsize(segs[-1].index_path) == 0 < segs[-1].offset_index.entries
    assert os.path.getsize(segs[-1].time_index_path) == 0
    lg.close()
    assert os.path.getsize(segs[-1].index_path) == 8 * segs[-1].offset_index.entries


def test_index_entries_bytes(make_log):
    lg = make_log(TopicConfig(index_interval_bytes=100))
    for _ in range(6):
        lg.append(batch_of(1, size=80))   # ~150 bytes each
    lg.roll()
    seg = lg.segments[0]
    with open(seg.index_path, "rb") as f:
        raw = f.read()
    entries = [struct.unpack_from(">II", raw, i) for i in range(0, len(raw), 8)]
    # each entry: relative last offset of a batch -> its position, batches after >100 bytes
    data = open(seg.log_path, "rb").read()
    positions = {pos: h.last_offset for pos, h in iter_batch_headers(data)}
    assert entries
    for rel, pos in entries:
        assert positions[pos] == rel


def test_read_never_ends_mid_batch(make_log):
    lg = make_log(TopicConfig(index_interval_bytes=200))
    sizes = []
    for i in range(30):
        b = batch_of(1 + i % 3, size=20 + 7 * i)
        sizes.append(len(b))
        lg.append(b)
    total = sum(sizes)
    for max_bytes in range(1, total + 50, 13):
        rr = lg.read(0, max_bytes, min_one_batch=True)
        (region,) = rr.regions
        data = region.read_bytes()
        hdrs = list(iter_batch_headers(data))
        assert sum(h.size for _, h in hdrs) == len(data)
        if sizes[0] > max_bytes:
            assert len(data) == sizes[0]
        else:
            assert len(data) <= max_bytes
            # and it is the longest whole-batch prefix that fits
            acc = 0
            for s in sizes:
                if acc + s > max_bytes:
                    break
                acc += s
            assert len(data) == acc


def test_min_one_batch_false_returns_nothing_when_first_too_big(make_log):
    lg = make_log()
    lg.append(batch_of(1, size=500))
    assert lg.read(0, 100, min_one_batch=False).regions == []
    assert len(lg.read(0, 100, min_one_batch=True).regions[0].read_bytes()) > 500


def test_read_mid_batch_offset_returns_whole_batch(make_log):
    lg = make_log()
    lg.append(batch_of(5))
    lg.append(batch_of(5))
    data = read_all(lg, 7)
    assert offsets_in(data) == [(5, 9)]


def test_read_out_of_range(make_log):
    lg = make_log()
    lg.append(batch_of(2))
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(3, 100)
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(-1, 100)
    lg.update_high_watermark(2)
    rr = lg.read(2, 100)
    assert rr.regions == [] and rr.high_watermark == 2


def test_read_region_is_sendfile_ready(make_log, tmp_path):
    lg = make_log()
    lg.append(batch_of(3))
    (region,) = lg.read(0, 1000).regions
    out = os.path.join(tmp_path, "out")
    with open(out, "wb") as f:
        sent = os.sendfile(f.fileno(), region.file.fileno(), region.position, region.length)
    assert sent == region.length
    assert open(out, "rb").read() == region.read_bytes()


def test_roll_by_segment_bytes(make_log):
    lg = make_log(TopicConfig(segment_bytes=1000))
    for _ in range(20):
        lg.append(batch_of(1, size=100))
    assert len(lg.segments) > 1
    for s in lg.segments:
        assert s.size <= 1000
    assert offsets_in(b"".join(read_all(lg, s.base_offset, 1 << 20) for s in lg.segments[:1]))[0] == (0, 0)


def test_roll_by_segment_ms_uses_batch_timestamps(make_log):
    lg = make_log(TopicConfig(segment_ms=1000))
    lg.append(build_batch([b"a"], timestamp=10_000))
    lg.append(build_batch([b"b"], timestamp=10_900))
    assert len(lg.segments) == 1
    lg.append(build_batch([b"c"], timestamp=11_001))
    assert [s.base_offset for s in lg.segments] == [0, 2]


def test_roll_jitter_is_per_segment_and_bounded(make_log):
    lg = make_log(TopicConfig(segment_ms=1000, segment_jitter_ms=500, segment_bytes=300))
    for _ in range(10):
        lg.append(batch_of(1, size=100))
    for s in lg.segments:
        assert 0 <= s.roll_jitter_ms < 500


def test_roll_when_index_full(make_log):
    lg = make_log(TopicConfig(segment_index_bytes=24, index_interval_bytes=1))  # 3 entries
    for _ in range(12):
        lg.append(batch_of(1))
    assert len(lg.segments) >= 3
    for s in lg.segments:
        assert s.offset_index.entries <= 3
    assert offsets_in(b"".join(r.read_bytes() for s in lg.segments
                              for r in lg.read(s.base_offset, 1 << 20).regions))[-1] == (11, 11)


def test_roll_when_relative_offset_would_overflow(make_log):
    lg = make_log()
    lg.append(batch_of(1))
    far = proto_build_batch([(None, b"x", (), 1)], base_offset=(1 << 31) + 10)
    lg.append(far, origin=AppendOrigin.REPLICATION)
    assert [s.base_offset for s in lg.segments] == [0, (1 << 31) + 10]
    assert lg.log_end_offset == (1 << 31) + 11
    assert offsets_in(read_all(lg, (1 << 31) + 10)) == [((1 << 31) + 10, (1 << 31) + 10)]


def test_max_message_bytes(make_log):
    lg = make_log(TopicConfig(max_message_bytes=200))
    with pytest.raises(RecordTooLargeError):
        lg.append(batch_of(1, size=300))
    assert lg.log_end_offset == 0 and lg.active_segment.size == 0
    lg.append(batch_of(1, size=50))


def test_bad_batches_write_nothing(make_log):
    lg = make_log()
    lg.append(batch_of(2))
    size = lg.active_segment.size
    good = batch_of(2)
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        lg.append(good + bytes(bad_crc))
    with pytest.raises(CorruptRecordError):
        lg.append(good[:-3])
    with pytest.raises(CorruptRecordError):
        lg.append(b"\x00" * 70)
    wrong_count = bytearray(good)
    struct.pack_into(">i", wrong_count, 57, 7)   # records count != lastOffsetDelta + 1
    from samsa.protocol.records import write_crc
    write_crc(wrong_count)
    with pytest.raises(InvalidRecordError):
        lg.append(bytes(wrong_count))
    with pytest.raises(InvalidRecordError):
        lg.append(b"")
    assert lg.active_segment.size == size and lg.log_end_offset == 2


def test_offsets_going_backwards_rejected(make_log):
    from samsa.storage.errors import OffsetsOutOfOrderError
    lg = make_log()
    lg.append(batch_of(5))
    old = proto_build_batch([(None, b"x", (), 1)], base_offset=3)
    with pytest.raises(OffsetsOutOfOrderError):
        lg.append(old, origin=AppendOrigin.REPLICATION)
    assert lg.log_end_offset == 5


def test_leader_epoch_stamped_and_cached(make_log):
    lg = make_log()
    lg.append(batch_of(2), leader_epoch=3)
    lg.append(batch_of(2), leader_epoch=5)
    lg.append(batch_of(1), leader_epoch=5)
    eps = [h.partition_leader_epoch for _, h in iter_batch_headers(read_all(lg))]
    assert eps == [3, 5, 5]
    assert lg.end_offset_for_epoch(3) == (3, 2)
    assert lg.end_offset_for_epoch(5) == (5, 5)
    assert lg.end_offset_for_epoch(4) == (3, 2)
    assert lg.end_offset_for_epoch(1) == (1, 0)
    assert lg.end_offset_for_epoch(9) == (-1, -1)
    text = open(os.path.join(lg.dir, "leader-epoch-checkpoint")).read()
    assert text == "0\n2\n3 0\n5 2\n"


def test_log_append_time(make_log):
    lg = make_log(TopicConfig(message_timestamp_type="LogAppendTime"))
    res = lg.append(build_batch([b"a", b"b"], timestamp=5))
    assert res.log_append_time > 1_600_000_000_000
    data = read_all(lg)
    (_, h), = list(iter_batch_headers(data))
    assert h.timestamp_type == 1 and h.max_timestamp == res.log_append_time
    from kafka.record.default_records import DefaultRecordBatch
    kb = DefaultRecordBatch(bytearray(data))
    assert kb.validate_crc()
    assert [r.timestamp for r in kb] == [res.log_append_time] * 2


def test_offset_for_timestamp(make_log):
    lg = make_log(TopicConfig(segment_bytes=600, index_interval_bytes=50))
    for i in range(20):
        lg.append(build_batch([b"v" * 20] * 2, timestamp=lambda j, i=i: 1000 + 10 * i + j))
    assert lg.offset_for_timestamp(0) == (0, 1000)
    assert lg.offset_for_timestamp(1000) == (0, 1000)
    assert lg.offset_for_timestamp(1001) == (1, 1001)
    assert lg.offset_for_timestamp(1002) == (2, 1010)
    assert lg.offset_for_timestamp(1095) == (20, 1100)
    assert lg.offset_for_timestamp(1191) == (39, 1191)
    assert lg.offset_for_timestamp(1192) is None
    assert lg.offset_for_timestamp(-2) == (0, -1)
    assert lg.offset_for_timestamp(-1) == (40, -1)
    assert lg.max_timestamp_and_offset() == (39, 1191)


def test_delete_records_before(make_log):
    lg = make_log(TopicConfig(segment_bytes=500, file_delete_delay_ms=0))
    for _ in range(20):
        lg.append(batch_of(2, size=40))
    lg.update_high_watermark(30)
    with pytest.raises(OffsetOutOfRangeError):
        lg.delete_records_before(31)   # above the high watermark: not committed yet
    lg.update_high_watermark(lg.log_end_offset)
    nsegs = len(lg.segments)
    assert lg.delete_records_before(15) == 15
    assert lg.log_start_offset == 15
    assert len(lg.segments) < nsegs
    assert lg.segments[0].base_offset <= 15
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(14, 100)
    assert offsets_in(read_all(lg, 15, 10_000))[0][1] >= 15
    with pytest.raises(OffsetOutOfRangeError):
        lg.delete_records_before(41)
    assert lg.delete_records_before(-1) == 40
    assert lg.read(40, 100).regions == []
    lg.append(batch_of(1))
    assert offsets_in(read_all(lg, 40)) == [(40, 40)]


def test_retention_by_bytes_and_time(make_log):
    lg = make_log(TopicConfig(segment_bytes=500, retention_bytes=1000, file_delete_delay_ms=0))
    for _ in range(30):
        lg.append(batch_of(2, size=40))
    deleted = lg.apply_retention()
    assert deleted > 0
    assert lg.size_in_bytes() - lg.segments[0].size < 1000 <= lg.size_in_bytes() or len(lg.segments) == 1
    assert lg.log_start_offset == lg.segments[0].base_offset
    lg2 = make_log(TopicConfig(segment_bytes=500, retention_ms=1000, file_delete_delay_ms=0),
                   name="u-0")
    for i in range(30):
        lg2.append(build_batch([b"x" * 40] * 2, timestamp=1000 + i))
    n = lg2.apply_retention(now_ms=1000 + 15 + 1000 + 1)
    assert n > 0
    # every remaining non-active segment holds a batch younger than retention
    assert all(s.max_timestamp >= 1015 for s in lg2.segments[:-1])
    lg2.apply_retention(now_ms=10**13)
    assert len(lg2.segments) == 1  # everything but the active segment is gone


def test_deleted_segment_files_renamed_then_removed(make_log):
    lg = make_log(TopicConfig(segment_bytes=300, retention_bytes=0, file_delete_delay_ms=200))
    for _ in range(6):
        lg.append(batch_of(1, size=100))
    old = lg.segments[0]
    region = lg.read(0, 1000).regions[0]
    lg.apply_retention()
    assert os.path.exists(old.log_path + ".deleted")
    assert region.read_bytes()  # still readable until the delayed delete
    wait_until(lambda: not os.path.exists(old.log_path + ".deleted"), 5,
               "the delayed delete of the old segment", interval=0.02)


def test_append_listener_called(make_log):
    lg = make_log()
    seen = []
    lg.add_append_listener(lambda l: seen.append(l.log_end_offset))
    lg.append(batch_of(2))
    lg.append(batch_of(3))
    assert seen == [2, 5]


def test_concurrent_appends_and_reads(make_log):
    lg = make_log(TopicConfig(segment_bytes=20_000, index_interval_bytes=500))
    n_threads, per_thread = 3, 150
    errors = []
    stop = threading.Event()

    def writer():
        for _ in range(per_thread):
            lg.append(batch_of(2, size=30))

    def reader():
        try:
            while not stop.is_set():
                leo = lg.log_end_offset
                start = lg.log_start_offset
                off = start
                while off < leo:
                    rr = lg.read(off, 4000)
                    if not rr.regions:
                        break
                    data = rr.regions[0].read_bytes()
                    hs = list(iter_batch_headers(data))
                    assert sum(h.size for _, h in hs) == len(data)
                    assert hs[0][1].base_offset <= off <= hs[0][1].last_offset
                    off = hs[-1][1].last_offset + 1
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    writers = [threading.Thread(target=writer) for _ in range(n_threads)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert not errors
    assert lg.log_end_offset == n_threads * per_thread * 2
    got = []
    off = 0
    while off < lg.log_end_offset:
        data = lg.read(off, 1 << 20).regions[0].read_bytes()
        got += offsets_in(data)
        off = got[-1][1] + 1
    assert [b for b, _ in got] == list(range(0, n_threads * per_thread * 2, 2))


def test_reopen_after_clean_close(make_log):
    cfg = TopicConfig(segment_bytes=700, index_interval_bytes=100)
    lg = make_log(cfg)
    for _ in range(25):
        lg.append(batch_of(2, size=30))
    before = read_all(lg, 0, 1 << 20)
    lg.close()
    lg2 = make_log(cfg)
    assert lg2.log_end_offset == 50
    assert len(lg2.segments) == len(lg.segments)
    assert read_all(lg2, 0, 1 << 20) == before
    r = lg2.append(batch_of(1))
    assert r.first_offset == 50


def test_compressed_batches_roundtrip(make_log):
    lg = make_log()
    for codec in (1, 2, 3, 4):
        b = proto_build_batch([(b"k", b"v%d" % i, (), 1000 + i) for i in range(5)], codec=codec)
        lg.append(b)
    data = read_all(lg)
    hs = list(iter_batch_headers(data))
    assert [h.codec for _, h in hs] == [1, 2, 3, 4]
    assert [r.offset for pos, _ in hs for r in iter_records(data, pos)] == list(range(20))


def test_reads_during_retention_with_immediate_deletes(make_log):
    """file.delete.delay.ms=0: readers racing deletion get data or OffsetOutOfRange, never junk."""
    lg = make_log(TopicConfig(segment_bytes=2000, retention_bytes=4000, file_delete_delay_ms=0))
    stop = threading.Event()
    errors = []

    def reader():
        while not stop.is_set():
            off = lg.log_start_offset
            try:
                rr = lg.read(off, 3000)
                for r in rr.regions:
                    data = r.read_bytes()
                    hs = list(iter_batch_headers(data))
                    assert sum(h.size for _, h in hs) == len(data)
            except (OffsetOutOfRangeError, OSError, ValueError):
                pass   # the region's segment went away after read() returned
            except Exception as exc:  # pragma: no cover
                errors.append(exc)

    def retention():
        while not stop.is_set():
            lg.apply_retention()

    threads = [threading.Thread(target=reader) for _ in range(2)] + [threading.Thread(target=retention)]
    for t in threads:
        t.start()
    for _ in range(400):
        lg.append(batch_of(2, size=40))
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert lg.log_start_offset > 0


def test_the_one_batch_fast_path_appends_as_the_general_walk_does(make_log):
    """Appends of one batch skip the general walk over the payload unless the
    topic needs its records (here a timestamp bound sends them through it);
    either way the same rules decide: the same offsets, duplicates, refusals,
    time- and size-based rolls and bytes on disk."""
    def cfg(**kw):
        return TopicConfig(segment_ms=1000, segment_bytes=700, max_message_bytes=400,
                           file_delete_delay_ms=0, **kw)

    fast = make_log(cfg(), name="fast-0")
    walked = make_log(cfg(message_timestamp_before_max_ms=1 << 50), name="walked-0")
    assert fast._config_fast[1] and not walked._config_fast[1]   # the two paths
    ts = [10_000, 10_400, 10_900, 11_001, 11_050, 11_100, 12_500]
    appends = [build_batch([b"v" * 40] * 2, timestamp=t, producer_id=7, producer_epoch=0,
                           base_sequence=2 * i) for i, t in enumerate(ts)]
    appends.insert(3, appends[2])                           # a retry: a duplicate
    appends.insert(5, batch_of(3, size=200))                # over max.message.bytes

    def run(lg):
        out = []
        for payload in appends:
            try:
                out.append(tuple(lg.append(payload, leader_epoch=3)))
            except RecordTooLargeError:
                out.append("too large")
        segs = []
        for s in lg.segments:
            with open(s.log_path, "rb") as f:
                segs.append((s.base_offset, f.read(s.size)))
        return out, segs, lg.end_offset_for_epoch(3)

    got = run(fast)
    assert got == run(walked)
    results, segs, _ = got
    assert "too large" in results and any(r != "too large" and r[4] for r in results)
    assert [base for base, _ in segs] == [0, 6, 12]   # rolled by segment.ms at 11_001 and 12_500
