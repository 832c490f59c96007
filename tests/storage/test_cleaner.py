"""Log compaction (storage/cleaner.py) on real logs; input batches come from
kafka-python's builder, cleaned segments are read back by kafka-python too."""
from __future__ import annotations

import os
import random
import time

import pytest
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatchBuilder

from samsa.config.topic import TopicConfig
from samsa.protocol.records import decode_batch, iter_batch_headers
from samsa.storage import LogManager
from samsa.storage.cleaner import (CLEANER_OFFSET_CHECKPOINT, DELETE_HORIZON_MASK, clean_log)
from samsa.storage.errors import InvalidRecordError, OffsetOutOfRangeError
from samsa.storage.log import Log
from tests.support.waiting import wait_until

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
T0 = 1_700_000_000_000
COMPACT = TopicConfig(cleanup_policy="compact", segment_bytes=16_384, index_interval_bytes=1024,
                      file_delete_delay_ms=0, retention_ms=-1, delete_retention_ms=1000,
                      min_cleanable_dirty_ratio=0.5)


def keyed_batch(items, *, codec="none", ts=T0, producer_id=-1, producer_epoch=-1,
                base_sequence=-1):
    """items: (key, value) pairs; value None is a tombstone."""
    b = DefaultRecordBatchBuilder(2, CODECS[codec], False, producer_id, producer_epoch,
                                  base_sequence, batch_size=1 << 30)
    for i, (k, v) in enumerate(items):
        b.append(i, ts + i, k, v, [])
    return bytes(b.build())


def read_all(lg, start=None):
    """Every record a consumer reading from ``start`` (log start) sees: [(offset, key, value)]."""
    out = []
    off = lg.log_start_offset if start is None else start
    while off < lg.log_end_offset:
        regions = lg.read(off, 1 << 20).regions
        if not regions:
            break
        data = regions[0].read_bytes()
        last = off
        for pos, h in iter_batch_headers(data):
            for r in decode_batch(data, pos, header=h)[1]:
                if r.offset >= off:
                    out.append((r.offset, r.key, r.value))
            last = h.last_offset + 1
        off = last
    return out


def segment_records(seg):
    data = open(seg.log_path, "rb").read()
    return [(r.offset, r.key, r.value) for pos, h in iter_batch_headers(data)
            for r in decode_batch(data, pos, header=h)[1]]


def latest_view(records):
    view = {}
    for _, k, v in records:
        view[k] = v
    return {k: v for k, v in view.items() if v is not None}


def open_log(tmp_path, cfg=COMPACT, name="c-0", **kw):
    topic, _, part = name.rpartition("-")
    return Log(os.path.join(tmp_path, name), topic, int(part), cfg, **kw)


def fill(lg, n_updates, n_keys, *, per_batch=100, seed=1, codec="none", ts=T0):
    """Random updates; returns {offset: (key, value)} of what was written."""
    rnd = random.Random(seed)
    written = {}
    for start in range(0, n_updates, per_batch):
        items = [(b"key-%04d" % rnd.randrange(n_keys), b"v%07d" % (start + i))
                 for i in range(min(per_batch, n_updates - start))]
        res = lg.append(keyed_batch(items, codec=codec, ts=ts))
        for i, kv in enumerate(items):
            written[res.first_offset + i] = kv
    return written


def check_offsets_kept(records, written):
    for off, k, v in records:
        assert written[off] == (k, v), f"offset {off} moved"


def test_100k_updates_leave_latest_per_key(tmp_path):
    lg = open_log(tmp_path)
    written = fill(lg, 100_000, 1000)
    expected = latest_view([(o, k, v) for o, (k, v) in sorted(written.items())])
    assert len(lg.segments) > 50
    stats = clean_log(lg, None, T0)
    assert stats is not None and stats.end_offset == lg.segments[-1].base_offset
    cleaned = [r for seg in lg.segments[:-1] for r in segment_records(seg)]
    keys = [k for _, k, _ in cleaned]
    assert len(keys) == len(set(keys)) <= 1000      # one record per key in the cleaned part
    # groups are formed from the input sizes (like Kafka): full segments are cleaned
    # one by one, and the small results are merged by the next pass
    n = len(lg.segments)
    clean_log(lg, stats.end_offset, T0, force=True)
    assert len(lg.segments) < 10 < n
    assert all(s.size <= COMPACT.segment_bytes for s in lg.segments)
    assert [r for seg in lg.segments[:-1] for r in segment_records(seg)] == cleaned
    everything = read_all(lg)
    check_offsets_kept(everything, written)
    assert latest_view(everything) == expected
    # the cleaned part's record for a key is that key's latest below the active segment
    active_base = lg.segments[-1].base_offset
    latest_below = latest_view([(o, k, v) for o, (k, v) in sorted(written.items())
                                if o < active_base])
    assert {k: v for _, k, v in cleaned} == latest_below
    # a reopened log (clean and unclean) reads the same
    lg.close()
    for clean in (True, False):
        lg2 = open_log(tmp_path, clean_shutdown=clean)
        assert read_all(lg2) == everything
        lg2.close()


def test_offsets_and_batch_fields_kept(tmp_path):
    lg = open_log(tmp_path)
    first = lg.append(keyed_batch([(b"a", b"1"), (b"b", b"1"), (b"c", b"1")],
                                  producer_id=7, producer_epoch=3, base_sequence=0))
    lg.append(keyed_batch([(b"a", b"2"), (b"b", b"2")], producer_id=7, producer_epoch=3,
                          base_sequence=3))
    lg.roll()
    lg.append(keyed_batch([(b"z", b"0")]))
    clean_log(lg, None, T0, force=True)
    data = open(lg.segments[0].log_path, "rb").read()
    hs = [h for _, h in iter_batch_headers(data)]
    # batch 1 keeps only c (offset 2) but still spans offsets 0..2 with its sequence range
    h = hs[0]
    assert (h.base_offset, h.last_offset_delta, h.records_count) == (first.first_offset, 2, 1)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 3, 0)
    assert h.last_sequence == 2
    assert [(r.offset, r.key, r.value, r.timestamp)
            for r in decode_batch(data, 0, header=h)[1]] == [(2, b"c", b"1", T0 + 2)]
    assert [(o, k, v) for o, k, v in read_all(lg)] == [
        (2, b"c", b"1"), (3, b"a", b"2"), (4, b"b", b"2"), (5, b"z", b"0")]
    lg.close()


def test_tombstones_removed_after_delete_retention(tmp_path):
    lg = open_log(tmp_path)
    lg.append(keyed_batch([(b"k%d" % i, b"v") for i in range(20)]))
    lg.append(keyed_batch([(b"k%d" % i, None) for i in range(10)]))
    lg.roll()
    lg.append(keyed_batch([(b"x", b"y")]))
    now = T0 + 5000
    stats = clean_log(lg, None, now)
    assert stats.delete_horizon == now + COMPACT.delete_retention_ms
    # tombstones stay (the values they delete are gone), stamped with a delete horizon
    recs = segment_records(lg.segments[0])
    assert sorted(k for _, k, v in recs if v is None) == sorted(b"k%d" % i for i in range(10))
    assert sorted(k for _, k, v in recs if v is not None) == sorted(b"k%d" % i
                                                                    for i in range(10, 20))
    data = open(lg.segments[0].log_path, "rb").read()
    tomb = [h for _, h in iter_batch_headers(data) if h.attributes & DELETE_HORIZON_MASK]
    assert len(tomb) == 1 and tomb[0].base_timestamp == now + 1000
    # record timestamps are unchanged by the rebased baseTimestamp
    pos = next(p for p, h in iter_batch_headers(data) if h.attributes & DELETE_HORIZON_MASK)
    assert [r.timestamp for r in decode_batch(data, pos)[1]] == [T0 + i for i in range(10)]
    # before the horizon: a pass keeps them
    clean_log(lg, stats.end_offset, now + 999, force=True)
    assert sum(v is None for _, _, v in segment_records(lg.segments[0])) == 10
    # after it: gone
    clean_log(lg, stats.end_offset, now + 1000, force=True)
    recs = read_all(lg)
    assert all(v is not None for _, _, v in recs)
    assert latest_view(recs) == {**{b"k%d" % i: b"v" for i in range(10, 20)}, b"x": b"y"}
    lg.close()


def test_dirty_ratio_respected(tmp_path):
    lg = open_log(tmp_path, COMPACT.replace(min_cleanable_dirty_ratio=0.5))
    fill(lg, 2000, 50, per_batch=50)
    lg.roll()
    stats = clean_log(lg, None, T0)
    assert stats is not None
    clean_end = stats.end_offset
    clean_bytes = sum(s.size for s in lg.segments[:-1])
    # a little dirty data (ratio well below 0.5): no cleaning, nothing changes
    lg.append(keyed_batch([(b"key-0001", b"new")]))
    lg.roll()
    lg.append(keyed_batch([(b"other", b"x")]))
    before = [(s.base_offset, s.size) for s in lg.segments]
    assert clean_log(lg, clean_end, T0) is None
    assert [(s.base_offset, s.size) for s in lg.segments] == before
    # more dirty bytes than clean ones: cleaned
    fill(lg, 3000, 50, per_batch=50, seed=2)
    lg.roll()
    dirty = sum(s.size for s in lg.segments[:-1]) - clean_bytes
    assert dirty > clean_bytes
    assert clean_log(lg, clean_end, T0) is not None
    lg.close()


def test_min_compaction_lag(tmp_path):
    lg = open_log(tmp_path, COMPACT.replace(min_compaction_lag_ms=60_000))
    fill(lg, 500, 10, per_batch=50)
    lg.roll()
    lg.append(keyed_batch([(b"x", b"y")]))
    assert clean_log(lg, None, T0 + 30_000) is None       # records younger than the lag
    assert clean_log(lg, None, T0 + 120_000) is not None
    lg.close()


def test_keyless_records_rejected_on_compacted_topics(tmp_path):
    lg = open_log(tmp_path)
    with pytest.raises(InvalidRecordError, match="without key"):
        lg.append(keyed_batch([(b"k", b"v"), (None, b"v")], codec="gzip"))
    assert lg.log_end_offset == 0
    plain = open_log(tmp_path, TopicConfig(file_delete_delay_ms=0), name="d-0")
    plain.append(keyed_batch([(None, b"v")]))
    lg.close()
    plain.close()


@pytest.mark.parametrize("codec", ["gzip", "zstd", "lz4", "snappy"])
def test_compressed_segments_stay_readable_by_kafka_python(tmp_path, codec):
    lg = open_log(tmp_path)
    written = fill(lg, 3000, 1000, per_batch=30, codec=codec)
    lg.append(keyed_batch([(b"key-%04d" % i, None) for i in range(5)], codec=codec))
    lg.roll()
    lg.append(keyed_batch([(b"tail", b"x")], codec=codec))
    # kafka-python leaves a batch uncompressed when compressing does not pay
    codec_of = {h.base_offset: h.codec for seg in lg.segments
                for _, h in iter_batch_headers(open(seg.log_path, "rb").read())}
    clean_log(lg, None, T0)
    seen = {}
    compressed = 0
    for seg in lg.segments:
        data = open(seg.log_path, "rb").read()
        mr = MemoryRecords(data)
        while True:
            batch = mr.next_batch()
            if batch is None:
                break
            assert batch.validate_crc()
            assert batch.compression_type == codec_of[batch.base_offset]
            compressed += batch.compression_type == CODECS[codec]
            for rec in batch:
                seen[rec.offset] = (rec.key, rec.value)
    assert compressed > 5
    tomb_offsets = {o for o, (k, v) in seen.items() if v is None}
    assert len(tomb_offsets) == 5
    for o, kv in seen.items():
        if o not in tomb_offsets and kv != (b"tail", b"x"):
            assert written[o] == kv
    keys = [k for o, (k, v) in seen.items()]
    assert len(keys) == len(set(keys))
    lg.close()


class Crash(BaseException):
    """Stands for the process dying at a given step (nothing catches it)."""


@pytest.mark.parametrize("stage", ["cleaned", "swap"])
def test_crash_during_swap_recovers(tmp_path, stage):
    lg = open_log(tmp_path)
    written = fill(lg, 3000, 30, per_batch=30)
    lg.roll()
    lg.append(keyed_batch([(b"tail", b"x")]))
    before = read_all(lg)
    real = Log.replace_segments

    def crashing(self, old, cleaned_path, aborted_txns=()):
        if stage == "swap":
            base = old[0].base_offset
            swap = os.path.join(self.dir, f"{base:020d}.log.swap")
            os.rename(cleaned_path, swap)
            for seg in old:    # the old segments were being retired when it died
                seg.rename_to_deleted()
        raise Crash()

    Log.replace_segments = crashing
    try:
        with pytest.raises(Crash):
            clean_log(lg, None, T0)
    finally:
        Log.replace_segments = real
    names = os.listdir(lg.dir)
    assert any(n.endswith(".cleaned" if stage == "cleaned" else ".swap") for n in names)
    lg.close_handles(trim=False)
    lg2 = open_log(tmp_path, clean_shutdown=False)
    assert not any(n.endswith((".cleaned", ".swap")) for n in os.listdir(lg2.dir))
    after = read_all(lg2)
    check_offsets_kept([r for r in after if r[1] != b"tail"], written)
    assert latest_view(after) == latest_view(before)
    if stage == "cleaned":
        assert after == before          # never swapped in: old data untouched
    else:
        assert len(after) < len(before)  # the first group's cleaned copy was swapped in
    # and the cleaner can run again to completion
    assert clean_log(lg2, None, T0, force=True) is not None
    assert latest_view(read_all(lg2)) == latest_view(before)
    lg2.close()


def test_log_manager_cleans_in_background(tmp_path):
    d = str(tmp_path / "data")
    lm = LogManager([d], TopicConfig(), 0, "cluster", log_cleaner_backoff_ms=20)
    lm.startup()
    try:
        lg = lm.create_log("__consumer_offsets", 3, config=COMPACT)
        written = fill(lg, 5000, 20, per_batch=50)
        lg.roll()
        lg.append(keyed_batch([(b"tail", b"x")]))
        path = os.path.join(d, CLEANER_OFFSET_CHECKPOINT)
        want = f"0\n1\n__consumer_offsets 3 {lg.segments[-1].base_offset}\n"
        seen = {"got": None}

        def checkpointed() -> bool:
            if os.path.exists(path):
                with open(path) as f:
                    seen["got"] = f.read()
            return seen["got"] == want

        wait_until(checkpointed, 30, lambda: f"the cleaner checkpoint {want!r}, last {seen['got']!r}",
                   interval=0.02)
        recs = read_all(lg)
        check_offsets_kept([r for r in recs if r[1] != b"tail"], written)
        assert len(recs) <= 21
        assert lm.run_cleaner() == {}            # nothing dirty any more
    finally:
        lm.shutdown()
    lm2 = LogManager([d], TopicConfig(), 0, "cluster", log_cleaner_enable=False)
    lm2.startup()
    try:
        lg = lm2.create_log("__consumer_offsets", 3, config=COMPACT)
        assert lm2.cleaner.first_dirty_offset("__consumer_offsets", 3) == lg.segments[-1].base_offset
        assert read_all(lg) == recs
    finally:
        lm2.shutdown()


def test_segments_emptied_by_cleaning_stay_readable(tmp_path):
    lg = open_log(tmp_path)
    for i in range(600):
        lg.append(keyed_batch([(b"a", b"%05d" % i + b"." * 100)]))
    lg.roll()
    lg.append(keyed_batch([(b"b", b"1")]))
    n = len(lg.segments)
    clean_log(lg, None, T0)
    assert len(lg.segments) == n and sum(s.size == 0 for s in lg.segments) == n - 2
    expect = [(599, b"a", b"00599" + b"." * 100), (600, b"b", b"1")]
    assert read_all(lg) == expect
    assert read_all(lg, start=5) == expect     # a removed offset reads as the next one kept
    lg.close()
    for clean in (True, False):
        lg2 = open_log(tmp_path, clean_shutdown=clean)
        assert read_all(lg2) == expect and lg2.log_end_offset == expect[-1][0] + 1
        lg2.append(keyed_batch([(b"c", b"2")]))
        lg2.close()
        expect = expect + [(expect[-1][0] + 1, b"c", b"2")]


def test_log_append_time_batches_keep_their_timestamps(tmp_path):
    lg = open_log(tmp_path, COMPACT.replace(message_timestamp_type="LogAppendTime"))
    lg.append(keyed_batch([(b"a", b"1"), (b"b", b"1")], codec="gzip"))
    lg.append(keyed_batch([(b"a", b"2")]))
    lg.roll()
    lg.append(keyed_batch([(b"z", b"0")]))
    data0 = open(lg.segments[0].log_path, "rb").read()
    h0 = next(iter_batch_headers(data0))[1]
    clean_log(lg, None, T0, force=True)
    data = open(lg.segments[0].log_path, "rb").read()
    h = next(iter_batch_headers(data))[1]
    assert h.timestamp_type == 1 and h.max_timestamp == h0.max_timestamp
    assert h.records_count == 1 and h.last_offset_delta == 1
    mr = MemoryRecords(data)
    batch = mr.next_batch()
    assert batch.validate_crc()
    assert [(r.offset, r.key, r.timestamp) for r in batch] == [(1, b"b", h0.max_timestamp)]
    lg.close()


def test_expired_tombstones_removed_by_background_passes(tmp_path):
    d = str(tmp_path / "data")
    clock = [T0]
    lm = LogManager([d], TopicConfig(), 0, "cluster", log_cleaner_enable=False)
    lm.startup()
    lm.cleaner._clock = lambda: clock[0]
    try:
        lg = lm.create_log("t", 0, config=COMPACT)
        lg.append(keyed_batch([(b"k%d" % i, b"v") for i in range(5)]))
        lg.append(keyed_batch([(b"k%d" % i, None) for i in range(3)]))
        lg.roll()
        lg.append(keyed_batch([(b"x", b"y")]))
        assert ("t", 0) in lm.run_cleaner()
        assert sum(v is None for _, _, v in read_all(lg)) == 3
        assert lm.run_cleaner() == {}               # nothing dirty, horizon not reached
        clock[0] = T0 + COMPACT.delete_retention_ms
        assert ("t", 0) in lm.run_cleaner()         # horizon passed: a pass is due
        assert [k for _, k, v in read_all(lg)] == [b"k3", b"k4", b"x"]
        assert lm.run_cleaner() == {}
    finally:
        lm.shutdown()
    # after a restart the pending horizon is found again from the batch headers
    lm = LogManager([d], TopicConfig(), 0, "cluster", log_cleaner_enable=False)
    lm.startup()
    try:
        lg = lm.create_log("t", 0, config=COMPACT)
        lg.append(keyed_batch([(b"k3", None)]))
        lg.roll()
        lg.append(keyed_batch([(b"w", b"1")]))
        lm.cleaner._clock = lambda: T0
        lm.run_cleaner(force=True)
        assert lm.cleaner.delete_horizons[("t", 0)] == T0 + COMPACT.delete_retention_ms
    finally:
        lm.shutdown()
    lm = LogManager([d], TopicConfig(), 0, "cluster", log_cleaner_enable=False)
    lm.startup()
    try:
        lg = lm.create_log("t", 0, config=COMPACT)
        lm.cleaner._clock = lambda: T0 + COMPACT.delete_retention_ms
        assert ("t", 0) in lm.run_cleaner()
        assert [k for _, k, v in read_all(lg)] == [b"k4", b"x", b"w"]
    finally:
        lm.shutdown()


def test_recreated_topic_does_not_inherit_cleaner_state(tmp_path):
    lm = LogManager([str(tmp_path / "data")], TopicConfig(), 0, "cluster",
                    log_cleaner_enable=False)
    lm.startup()
    try:
        lg = lm.create_log("t", 0, config=COMPACT)
        fill(lg, 2000, 10, per_batch=50)
        lg.roll()
        lm.run_cleaner()
        assert lm.cleaner.first_dirty_offset("t", 0) == 2000
        lm.delete_topic("t")
        assert lm.cleaner.first_dirty_offset("t", 0) is None
        lg = lm.create_log("t", 0, config=COMPACT)
        written = fill(lg, 3000, 10, per_batch=50)
        lg.roll()
        lm.run_cleaner()
        recs = read_all(lg)
        check_offsets_kept(recs, written)
        assert len(recs) == 10
    finally:
        lm.shutdown()


def test_cleaning_while_appending_reading_and_retention(tmp_path):
    """The cleaner thread, an appender, a reader and retention (compact,delete) at
    once: every read sees valid batches, and the end result is the latest per key."""
    import threading
    # file.delete.delay.ms > 0: regions handed out stay valid while being read
    cfg = COMPACT.replace(cleanup_policy="compact,delete", retention_bytes=30_000,
                          min_cleanable_dirty_ratio=0.01, file_delete_delay_ms=2000)
    lm = LogManager([str(tmp_path / "data")], TopicConfig(), 0, "cluster",
                    log_cleaner_backoff_ms=1)
    lm.startup()
    errors = []
    stop = threading.Event()
    try:
        lg = lm.create_log("t", 0, config=cfg)

        def reader():
            while not stop.is_set():
                try:
                    # an append is in the log before the appender notes it in
                    # ``written``: check what was noted before this read began
                    known = written.copy()
                    end = max(known, default=-1)
                    check_offsets_kept([r for r in read_all(lg) if r[0] <= end], known)
                except OffsetOutOfRangeError:
                    pass    # retention moved the log start under the read: start over
                except Exception as exc:  # reported below
                    errors.append(exc)
                    return
                time.sleep(0.005)  # a reader beside the writer, not a busy loop

        written = {}
        rnd = random.Random(3)
        th = threading.Thread(target=reader)
        th.start()
        for start in range(0, 20_000, 100):
            items = [(b"key-%03d" % rnd.randrange(200), b"v%06d" % (start + i))
                     for i in range(100)]
            res = lg.append(keyed_batch(items))
            written.update({res.first_offset + i: kv for i, kv in enumerate(items)})
            if start % 2000 == 0:
                lm.run_retention()
        stop.set()
        th.join()
        assert not errors, errors[0]
        assert lm.cleaner.first_dirty_offset("t", 0) is not None   # cleaned in the background
        assert lg.log_start_offset > 0                             # and retention deleted
        lg.roll()
        lm.run_cleaner(force=True)
        recs = read_all(lg)
        check_offsets_kept(recs, written)
        assert len({k for _, k, _ in recs}) == len(recs)
        last = {}
        for o, (k, v) in sorted(written.items()):
            last[k] = (o, v)
        # retention may have taken a key's latest record; compaction never does
        expected = {k: v for k, (o, v) in last.items() if o >= lg.log_start_offset}
        assert latest_view(recs) == expected
    finally:
        stop.set()
        lm.shutdown()
