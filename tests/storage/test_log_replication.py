"""Storage for replication: REPLICATION appends (a follower copies the leader's
batches byte for byte), truncation to a divergence point, reads bounded by the
high watermark, the high watermark owned outside append, and its checkpoint."""
from __future__ import annotations

import os

import pytest

from samsa.config.topic import TopicConfig
from samsa.protocol.records import build_batch as proto_build_batch, iter_batch_headers
from samsa.storage.checkpoints import REPLICATION_OFFSET_CHECKPOINT
from samsa.storage.errors import (CorruptRecordError, OffsetOutOfRangeError, OffsetsOutOfOrderError,
                            OutOfOrderSequenceError)
from samsa.storage.log import AppendOrigin, Log
from samsa.storage.manager import LogManager
from tests.storage.helpers import batch_of, build_batch
from tests.support.waiting import wait_until

REPL = AppendOrigin.REPLICATION


# ------------------------------------------------------------------ helpers
def read_bytes(lg, start=None, max_offset=None):
    start = lg.log_start_offset if start is None else start
    out = []
    off = start
    leo = lg.log_end_offset
    while off < leo:
        rr = lg.read(off, 1 << 20, max_offset=max_offset)
        if not rr.regions:
            break
        data = rr.regions[0].read_bytes()
        out.append(data)
        off = [h for _, h in iter_batch_headers(data)][-1].last_offset + 1
    return b"".join(out)


def batches(lg, **kw):
    return [(h.base_offset, h.last_offset) for _, h in iter_batch_headers(read_bytes(lg, **kw))]


def replicate(leader, follower, max_bytes=1 << 20):
    """What a replica fetcher does: read from the follower's end, append as is."""
    while follower.log_end_offset < leader.log_end_offset:
        rr = leader.read(follower.log_end_offset, max_bytes)
        payload = b"".join(r.read_bytes() for r in rr.regions)
        assert payload
        follower.append(payload, origin=REPL)


def files(lg, suffix):
    return sorted(n for n in os.listdir(lg.dir) if n.endswith(suffix))




def pbatch(pid, seq, n=2, epoch=0, ts=None, size=40):
    return build_batch([b"p%d-%d-" % (pid, seq) + b"v" * size] * n, producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, timestamp=ts)


CFG = TopicConfig(segment_bytes=1200, index_interval_bytes=150, file_delete_delay_ms=0)


def write_leader(lg):
    """Client appends over two leader epochs with idempotent producers and a roll
    by segment.bytes; returns {(pid, seq): (bytes, first, last)} of producer batches."""
    sent = {}
    lg.begin_leader_epoch(1)
    for i in range(6):
        b = pbatch(7, 2 * i, ts=1000 + i)
        r = lg.append(b, 1)
        sent[(7, 2 * i)] = (b, r.first_offset, r.last_offset)
        lg.append(batch_of(1 + i % 3, size=30, timestamp=1000 + i), 1)
    lg.begin_leader_epoch(3)
    for i in range(6, 12):
        b = pbatch(7, 2 * i, ts=1000 + i)
        r = lg.append(b, 3)
        sent[(7, 2 * i)] = (b, r.first_offset, r.last_offset)
        b = pbatch(9, 3 * (i - 6), n=3, ts=1000 + i)
        r = lg.append(b, 3)
        sent[(9, 3 * (i - 6))] = (b, r.first_offset, r.last_offset)
    assert len(lg.segments) >= 3      # rolled in the middle
    return sent


# ------------------------------------------------------------------ replication appends
@pytest.mark.parametrize("max_bytes", [1 << 20, 300])
def test_follower_is_byte_identical_and_dedupes_as_new_leader(make_log, max_bytes):
    leader = make_log(CFG, name="t-0")
    follower = make_log(CFG, name="f-0")
    sent = write_leader(leader)
    replicate(leader, follower, max_bytes)

    assert follower.log_end_offset == leader.log_end_offset
    assert files(follower, ".log") == files(leader, ".log")
    for name in files(leader, ".log"):
        with open(os.path.join(leader.dir, name), "rb") as a, \
                open(os.path.join(follower.dir, name), "rb") as b:
            assert a.read() == b.read(), name
    # the rolled segments' indexes follow from the same bytes
    for seg_l, seg_f in zip(leader.segments[:-1], follower.segments[:-1]):
        for path_l, path_f in ((seg_l.index_path, seg_f.index_path),
                               (seg_l.time_index_path, seg_f.time_index_path)):
            assert open(path_l, "rb").read() == open(path_f, "rb").read()
    assert follower.leader_epochs.entries == leader.leader_epochs.entries == [(1, 0), (3, 24)]
    assert follower.end_offset_for_epoch(1) == leader.end_offset_for_epoch(1) == (1, 24)

    # the follower becomes leader: a producer retrying its last batch gets the
    # original offsets back, nothing is appended; its next batch goes on in sequence
    follower.begin_leader_epoch(5)
    leo = follower.log_end_offset
    for key in [(7, 22), (9, 15), (7, 20)]:
        b, first, last = sent[key]
        r = follower.append(b, 5)
        assert r.duplicate and (r.first_offset, r.last_offset) == (first, last)
    assert follower.log_end_offset == leo
    with pytest.raises(OutOfOrderSequenceError):
        follower.append(pbatch(7, 30), 5)
    r = follower.append(pbatch(7, 24), 5)
    assert not r.duplicate and r.first_offset == leo
    assert follower.leader_epochs.entries == [(1, 0), (3, 24), (5, leo)]


def test_producer_state_of_replica_survives_reopen(make_log):
    leader = make_log(CFG, name="t-0")
    follower = make_log(CFG, name="f-0")
    sent = write_leader(leader)
    replicate(leader, follower)
    for clean in (True, False):
        if clean:
            follower.close()
        else:
            follower.close_handles(trim=False)
        follower = make_log(CFG, name="f-0", clean_shutdown=clean)
        b, first, last = sent[(9, 15)]
        r = follower.append(b, 5)
        assert r.duplicate and (r.first_offset, r.last_offset) == (first, last)


def test_replication_keeps_the_leaders_bytes_and_skips_client_policy(make_log):
    strict = TopicConfig(max_message_bytes=200, message_timestamp_difference_max_ms=1000,
                         file_delete_delay_ms=0)
    lg = make_log(strict)
    # offsets, epoch 4, an old timestamp and a size over max.message.bytes, as the leader wrote them
    big = proto_build_batch([(b"k", b"v" * 500, (), 5)], base_offset=10)
    big = bytearray(big)
    big[12:16] = (4).to_bytes(4, "big")        # partitionLeaderEpoch is outside the CRC
    r = lg.append(bytes(big), 0, origin=REPL)
    assert (r.first_offset, r.last_offset) == (10, 10)
    assert lg.log_end_offset == 11
    assert read_bytes(lg) == bytes(big)
    assert lg.leader_epochs.entries == [(4, 10)]
    # the same batch from a client is refused on both counts
    from samsa.storage.errors import InvalidTimestampError, RecordTooLargeError
    with pytest.raises((RecordTooLargeError, InvalidTimestampError)):
        lg.append(proto_build_batch([(b"k", b"v" * 500, (), 5)]))


def test_replication_below_the_log_end_or_out_of_order_writes_nothing(make_log):
    leader = make_log(CFG, name="t-0")
    follower = make_log(CFG, name="f-0")
    for _ in range(4):
        leader.append(batch_of(3))
    replicate(leader, follower)
    size, leo = follower.active_segment.size, follower.log_end_offset
    again = leader.read(3, 1 << 20).regions[0].read_bytes()
    with pytest.raises(OffsetsOutOfOrderError):
        follower.append(again, origin=REPL)
    b1 = proto_build_batch([(None, b"a", (), 1)] * 3, base_offset=20)
    b2 = proto_build_batch([(None, b"b", (), 1)], base_offset=21)   # inside b1
    with pytest.raises(OffsetsOutOfOrderError):
        follower.append(b1 + b2, origin=REPL)
    bad = bytearray(b1)
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        follower.append(bytes(bad), origin=REPL)
    with pytest.raises(CorruptRecordError):
        follower.append(b1[:-4], origin=REPL)
    assert follower.active_segment.size == size and follower.log_end_offset == leo
    assert os.path.getsize(follower.active_segment.log_path) == size
    r = follower.append(b"", origin=REPL)
    assert (r.first_offset, r.last_offset) == (-1, -1) and follower.log_end_offset == leo
    # a gap is fine (the leader's log may be compacted)
    r = follower.append(b1, origin=REPL)
    assert (r.first_offset, r.last_offset, follower.log_end_offset) == (20, 22, 23)


def test_replication_payload_larger_than_a_segment_is_split(make_log):
    leader = make_log(TopicConfig(segment_bytes=100_000, file_delete_delay_ms=0), name="t-0")
    follower = make_log(TopicConfig(segment_bytes=1000, file_delete_delay_ms=0), name="f-0")
    for _ in range(20):
        leader.append(batch_of(2, size=100))
    replicate(leader, follower)
    assert follower.log_end_offset == 40
    assert len(follower.segments) > 3 and all(s.size <= 1000 for s in follower.segments)
    assert read_bytes(follower) == read_bytes(leader)


# ------------------------------------------------------------------ truncation
def build_for_truncation(make_log, cfg, name="t-0", **kw):
    """Batches of 3 records with distinct timestamps and producer 5's sequences,
    over epochs 1, 2 and 4, across several segments."""
    lg = make_log(cfg, name=name, **kw)
    sent = []
    for i in range(18):
        epoch = 1 if i < 6 else (2 if i < 12 else 4)
        b = pbatch(5, 3 * i, n=3, ts=10_000 + 10 * i)
        r = lg.append(b, epoch)
        sent.append((b, r.first_offset, r.last_offset))
    lg.update_high_watermark(lg.log_end_offset)
    assert len(lg.segments) >= 4
    return lg, sent


def reopen(make_log, lg, cfg, clean, name="t-0"):
    if clean:
        lg.close()
    else:
        lg.close_handles(trim=False)
    return make_log(cfg, name=name, clean_shutdown=clean)


def check_index_consistent(lg):
    for seg in lg.segments:
        data = open(seg.log_path, "rb").read()
        starts = {pos: h.last_offset for pos, h in iter_batch_headers(data)}
        for off, pos in zip(seg.offset_index.keys, seg.offset_index.values):
            assert starts.get(pos) == off
        for ts, off in zip(seg.time_index.keys, seg.time_index.values):
            assert off < seg.base_offset + 10**6 and off in starts.values()


@pytest.mark.parametrize("where,target,new_leo", [
    ("boundary", 45, 45),          # batch 15 starts at 45, in the active segment
    ("inside", 46, 45),            # inside batch 15: it goes too
    ("older segment", 13, 12),     # inside batch 4, in the first segments
    ("segment base", None, None),  # exactly the base offset of a later segment
])
@pytest.mark.parametrize("clean", [True, False])
def test_truncate_to(make_log, where, target, new_leo, clean):
    cfg = TopicConfig(segment_bytes=600, index_interval_bytes=100, file_delete_delay_ms=0)
    lg, sent = build_for_truncation(make_log, cfg)
    if target is None:
        target = new_leo = lg.segments[2].base_offset
    before = batches(lg)
    old_segments = len(lg.segments)
    assert lg.truncate_to(target) == new_leo
    expect = [(b, l) for b, l in before if l < new_leo]
    assert lg.log_end_offset == new_leo and batches(lg) == expect
    assert lg.high_watermark == new_leo and lg.recovery_point <= new_leo
    epochs = [(e, o) for e, o in [(1, 0), (2, 18), (4, 36)] if o < new_leo]
    assert lg.leader_epochs.entries == epochs
    assert lg.end_offset_for_epoch(epochs[-1][0]) == (epochs[-1][0], new_leo)
    if where == "older segment":
        assert len(lg.segments) < old_segments
        assert not [n for n in os.listdir(lg.dir) if n.endswith(".deleted")]
        assert max(int(n[:20]) for n in files(lg, ".log")) <= new_leo
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(new_leo + 1, 100)
    assert lg.read(new_leo, 100).regions == []
    # the largest timestamp is that of the last batch kept (ListOffsets -3)
    assert lg.max_timestamp_and_offset()[1] == 10_000 + 10 * (len(expect) - 1)
    assert lg.offset_for_timestamp(10_000 + 10 * len(expect)) is None
    check_index_consistent(lg)

    # producer 5: a batch that was truncated away is new again, a kept one is a duplicate
    kept = [s for s in sent if s[2] < new_leo]
    gone = [s for s in sent if s[2] >= new_leo]
    b, first, last = kept[-1]
    r = lg.append(b, 6)
    assert r.duplicate and (r.first_offset, r.last_offset) == (first, last)
    b, first, last = gone[0]
    r = lg.append(b, 6)
    assert not r.duplicate and r.first_offset == new_leo

    lg = reopen(make_log, lg, cfg, clean)
    assert lg.log_end_offset == new_leo + 3
    assert batches(lg) == expect + [(new_leo, new_leo + 2)]
    assert lg.leader_epochs.entries == epochs + [(6, new_leo)]
    check_index_consistent(lg)
    r = lg.append(b, 6)     # the retry of the batch just written again
    assert r.duplicate and (r.first_offset, r.last_offset) == (new_leo, new_leo + 2)
    for _ in range(10):
        lg.append(batch_of(2, size=60), 6)
    assert lg.log_end_offset == new_leo + 3 + 20
    assert batches(lg)[:len(expect) + 1] == expect + [(new_leo, new_leo + 2)]
    lg = reopen(make_log, lg, cfg, not clean)
    assert lg.log_end_offset == new_leo + 23
    assert lg.leader_epochs.entries == epochs + [(6, new_leo)]
    check_index_consistent(lg)


def test_truncate_at_or_after_the_end_is_a_noop(make_log):
    cfg = TopicConfig(segment_bytes=600, index_interval_bytes=100, file_delete_delay_ms=0)
    lg, _ = build_for_truncation(make_log, cfg)
    before = read_bytes(lg)
    leo = lg.log_end_offset
    assert lg.truncate_to(leo) == leo
    assert lg.truncate_to(leo + 100) == leo
    assert read_bytes(lg) == before and lg.log_end_offset == leo == lg.high_watermark
    assert lg.leader_epochs.entries == [(1, 0), (2, 18), (4, 36)]
    # an epoch begun without records at the end goes (Kafka's truncateTo does so too)
    lg.begin_leader_epoch(7)
    assert lg.leader_epochs.entries[-1] == (7, leo)
    assert lg.truncate_to(leo) == leo
    assert lg.leader_epochs.entries == [(1, 0), (2, 18), (4, 36)]


class HeldScheduler:
    """A log's scheduler whose tasks run when the test says: "until the delete delay"
    is then a point in the test, not 300 ms of a loaded machine's wall clock."""

    def __init__(self) -> None:
        self.tasks: list = []

    def __call__(self, fn, delay_ms: int) -> None:
        self.tasks.append(fn)

    def run_all(self) -> None:
        while self.tasks:
            self.tasks.pop(0)()


def test_truncate_keeps_regions_of_deleted_segments_until_the_delay(make_log):
    cfg = TopicConfig(segment_bytes=600, index_interval_bytes=100, file_delete_delay_ms=300)
    held = HeldScheduler()
    lg, _ = build_for_truncation(make_log, cfg, scheduler=held)
    last = lg.segments[-1]
    region = lg.read(last.base_offset, 1 << 20).regions[0]
    data = region.read_bytes()
    lg.truncate_to(7)
    assert os.path.exists(last.log_path + ".deleted")
    assert region.read_bytes() == data
    held.run_all()   # the delay is over
    assert not os.path.exists(last.log_path + ".deleted")
    assert lg.log_end_offset == 6


def test_truncate_fully_and_start_at(make_log):
    cfg = TopicConfig(segment_bytes=600, index_interval_bytes=100, file_delete_delay_ms=300)
    held = HeldScheduler()
    lg, sent = build_for_truncation(make_log, cfg, scheduler=held)
    region = lg.read(0, 1).regions[0]          # the first batch: offsets 0 and 1
    data = region.read_bytes()
    old_logs = files(lg, ".log")
    lg.truncate_fully_and_start_at(1000)
    assert (lg.log_start_offset, lg.log_end_offset, lg.high_watermark, lg.recovery_point) == \
        (1000, 1000, 1000, 1000)
    assert lg.read(1000, 100).regions == []
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(0, 100)
    assert region.read_bytes() == data        # in flight until the delete delay
    assert lg.leader_epochs.entries == []
    assert lg.producer_state.producers == {} and files(lg, ".snapshot") == []
    held.run_all()   # the delay is over
    assert not [n for n in os.listdir(lg.dir) if n.endswith(".deleted")]
    assert files(lg, ".log") == ["%020d.log" % 1000] and "%020d.log" % 1000 not in old_logs
    # a retried batch of the producer is not a duplicate any more
    b, _, _ = sent[-1]
    r = lg.append(b, 8)
    assert not r.duplicate and (r.first_offset, r.last_offset) == (1000, 1002)
    assert lg.leader_epochs.entries == [(8, 1000)]
    for clean in (False, True):
        lg = reopen(make_log, lg, cfg, clean)
        assert (lg.log_start_offset, lg.log_end_offset) == (1000, 1003)
        assert batches(lg) == [(1000, 1002)]


def test_truncate_below_the_first_segment_restarts_the_log(make_log):
    cfg = TopicConfig(segment_bytes=600, index_interval_bytes=100, file_delete_delay_ms=0)
    lg = make_log(cfg)
    lg.truncate_fully_and_start_at(100)
    for _ in range(3):
        lg.append(batch_of(2))
    assert lg.truncate_to(50) == 50
    assert (lg.log_start_offset, lg.log_end_offset) == (50, 50)
    assert lg.append(batch_of(1)).first_offset == 50


def test_follower_truncates_then_catches_up_with_new_leader(make_log):
    """Two replicas diverge after a leader change; after truncation to the epoch's
    end the follower's files are the new leader's again."""
    cfg = TopicConfig(segment_bytes=800, index_interval_bytes=100, file_delete_delay_ms=0)
    a = make_log(cfg, name="a-0")
    b = make_log(cfg, name="b-0")
    a.begin_leader_epoch(1)
    for i in range(8):
        a.append(batch_of(2, size=50, timestamp=5000 + i), 1)
    replicate(a, b)
    for i in range(3):                           # a writes on but b never gets these
        a.append(batch_of(3, size=50, timestamp=6000 + i), 1)
    b.begin_leader_epoch(2)                      # b becomes leader
    for i in range(4):
        b.append(batch_of(1, size=70, timestamp=7000 + i), 2)
    # a asks b where its epoch 1 ended, truncates there and fetches
    epoch, end = b.end_offset_for_epoch(a.leader_epochs.latest_epoch)
    assert (epoch, end) == (1, 16)
    a.truncate_to(end)
    replicate(b, a)
    assert read_bytes(a) == read_bytes(b)
    assert files(a, ".log") == files(b, ".log")
    for name in files(a, ".log"):
        assert open(os.path.join(a.dir, name), "rb").read() == \
            open(os.path.join(b.dir, name), "rb").read()
    assert a.leader_epochs.entries == b.leader_epochs.entries == [(1, 0), (2, 16)]


def test_reads_below_the_high_watermark_race_truncations_above_it(make_log):
    """Lock-free readers bounded by the high watermark always get the committed
    batches, whole and unchanged, while the follower truncates above it and
    fetches again (segments deleted at once: file.delete.delay.ms=0)."""
    import random
    import threading
    cfg = TopicConfig(segment_bytes=700, index_interval_bytes=120, file_delete_delay_ms=0)
    leader = make_log(cfg, name="t-0")
    follower = make_log(cfg, name="f-0")
    for i in range(60):
        leader.append(batch_of(1 + i % 3, size=20 + i % 50))
    replicate(leader, follower)
    committed = {h.base_offset: data[pos:pos + h.size]
                 for data in [read_bytes(leader)] for pos, h in iter_batch_headers(data)}
    hw = sorted(committed)[len(committed) // 2]
    follower.update_high_watermark(hw)
    leo = follower.log_end_offset
    stop = threading.Event()
    errors = []

    def reader(seed):
        rnd = random.Random(seed)
        try:
            while not stop.is_set():
                off = rnd.randrange(0, hw)
                rr = follower.read(off, rnd.randrange(1, 3000), max_offset=follower.high_watermark)
                assert rr.high_watermark == hw
                data = rr.regions[0].read_bytes()
                hs = list(iter_batch_headers(data))
                assert hs and sum(h.size for _, h in hs) == len(data)
                for pos, h in hs:
                    assert h.last_offset < hw
                    assert data[pos:pos + h.size] == committed[h.base_offset]
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    rnd = random.Random(1)
    try:
        for _ in range(25):
            follower.truncate_to(rnd.randrange(hw, leo + 1))
            replicate(leader, follower, max_bytes=rnd.choice([200, 1 << 20]))
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors[:3]
    assert read_bytes(follower) == read_bytes(leader)


def test_a_region_read_before_a_truncation_of_its_segment_still_reads(make_log):
    """A segment loaded at start-up is read through a read-only handle, which a
    truncation into it replaces with a writable one. A fetch that got its
    region just before (and sends it just after) still reads those committed
    bytes, even with file.delete.delay.ms=0: the old handle lives as long as
    the segment, not the deletion delay."""
    cfg = TopicConfig(segment_bytes=700, file_delete_delay_ms=0)
    lg = make_log(cfg)
    for i in range(30):
        lg.append(batch_of(2, size=40))
    assert len(lg.segments) >= 3
    lg.close()
    lg = make_log(cfg)
    first = lg.segments[0]
    region = lg.read(0, 1).regions[0]          # the first batch: offsets 0 and 1
    expected = region.read_bytes()
    lg.truncate_to(first.base_offset + 2)     # into the first segment: it becomes active
    assert region.read_bytes() == expected
    lg.append(batch_of(2, size=40))            # and is written through its new handle
    assert lg.log_end_offset == 4


# ------------------------------------------------------------------ bounded reads
def test_read_bounded_by_high_watermark(make_log):
    lg = make_log(TopicConfig(segment_bytes=400, index_interval_bytes=50, file_delete_delay_ms=0))
    for _ in range(10):
        lg.append(batch_of(3, size=30))          # batches [0-2], [3-5], ... [27-29]
    assert len(lg.segments) >= 3
    assert lg.high_watermark == 0
    rr = lg.read(0, 1 << 20, max_offset=lg.high_watermark)
    assert rr.regions == [] and rr.high_watermark == 0 and rr.last_stable_offset == 0
    assert lg.update_high_watermark(18)
    hw = lg.high_watermark
    assert batches(lg, max_offset=hw) == [(b, b + 2) for b in range(0, 18, 3)]
    assert batches(lg) == [(b, b + 2) for b in range(0, 30, 3)]      # followers: up to the end
    rr = lg.read(4, 1 << 20, max_offset=hw)
    assert rr.high_watermark == 18 and rr.last_stable_offset == 18
    got = [(h.base_offset, h.last_offset) for _, h in iter_batch_headers(rr.regions[0].read_bytes())]
    assert got[0] == (3, 5) and got[-1][1] < 18
    # a batch straddling the bound is left out
    assert batches(lg, max_offset=20) == [(b, b + 2) for b in range(0, 18, 3)]
    assert batches(lg, max_offset=21) == [(b, b + 2) for b in range(0, 21, 3)]
    # at least one batch, but never past the bound
    rr = lg.read(15, 10, max_offset=hw)
    assert [h.base_offset for _, h in iter_batch_headers(rr.regions[0].read_bytes())] == [15]
    assert lg.read(15, 10, min_one_batch=False, max_offset=hw).regions == []
    # between the high watermark and the end: nothing, no error; beyond the end: error
    for off in (18, 20, 29, 30):
        rr = lg.read(off, 1 << 20, max_offset=hw)
        assert rr.regions == [] and rr.high_watermark == 18
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(31, 1 << 20, max_offset=hw)


def test_read_bounded_across_a_gap(make_log):
    lg = make_log()
    lg.append(proto_build_batch([(None, b"a", (), 1)] * 3, base_offset=0), origin=REPL)
    lg.append(proto_build_batch([(None, b"b", (), 1)] * 3, base_offset=10), origin=REPL)
    lg.append(proto_build_batch([(None, b"c", (), 1)] * 3, base_offset=13), origin=REPL)
    assert lg.log_end_offset == 16
    assert batches(lg, start=3) == [(10, 12), (13, 15)]
    assert batches(lg, start=3, max_offset=11) == []
    assert batches(lg, start=3, max_offset=13) == [(10, 12)]
    assert batches(lg, start=0, max_offset=8) == [(0, 2)]


# ------------------------------------------------------------------ high watermark
def test_update_high_watermark_clamps_and_only_moves_forward(make_log):
    lg = make_log()
    lg.append(batch_of(6))
    assert lg.high_watermark == 0
    assert lg.update_high_watermark(3) and lg.high_watermark == 3
    assert not lg.update_high_watermark(2) and lg.high_watermark == 3
    assert lg.update_high_watermark(100) and lg.high_watermark == 6
    assert not lg.update_high_watermark(6)
    lg.append(batch_of(2))
    assert lg.high_watermark == 6
    lg.truncate_fully_and_start_at(50)
    assert lg.high_watermark == 50
    assert not lg.update_high_watermark(10) and lg.high_watermark == 50


def test_high_watermark_on_open(make_log):
    lg = make_log()
    lg.append(batch_of(6))
    lg.close()
    assert make_log(high_watermark=4).high_watermark == 4
    assert make_log(high_watermark=100).high_watermark == 6
    assert make_log().high_watermark == 6       # no checkpoint: everything is committed
    lg = make_log(high_watermark=None)
    lg.delete_records_before(3)
    lg.close()
    assert make_log(high_watermark=1, log_start_offset=3).high_watermark == 3


def test_begin_leader_epoch(make_log):
    lg = make_log()
    lg.append(batch_of(4), 1)
    lg.begin_leader_epoch(3)
    assert lg.leader_epochs.entries == [(1, 0), (3, 4)]
    assert lg.end_offset_for_epoch(1) == (1, 4)
    assert lg.end_offset_for_epoch(3) == (3, 4)
    lg.begin_leader_epoch(2)                    # not newer: nothing changes
    lg.append(batch_of(2), 3)
    assert lg.leader_epochs.entries == [(1, 0), (3, 4)]
    assert lg.end_offset_for_epoch(3) == (3, 6)
    text = open(os.path.join(lg.dir, "leader-epoch-checkpoint")).read()
    assert text == "0\n2\n1 0\n3 4\n"


def test_high_watermark_checkpoint_round_trip(tmp_path):
    d = str(tmp_path / "d")
    cfg = TopicConfig(segment_bytes=1000, file_delete_delay_ms=0)
    lm = LogManager([d], cfg, 0, "cid")
    lm.startup()
    a = lm.create_log("a", 0, cfg)
    b = lm.create_log("b", 1, cfg)
    for _ in range(5):
        a.append(batch_of(2))
        b.append(batch_of(1))
    a.update_high_watermark(6)
    assert not lm.shutdown()
    path = os.path.join(d, REPLICATION_OFFSET_CHECKPOINT)
    assert open(path).read() == "0\n2\na 0 6\nb 1 0\n"
    lm = LogManager([d], cfg, 0, "cid")
    lm.startup()
    a, b = lm.get_log("a", 0), lm.get_log("b", 1)
    assert (a.high_watermark, b.high_watermark) == (6, 0)
    assert a.read(0, 1 << 20, max_offset=a.high_watermark).regions
    # a truncation gets the checkpoints written without waiting for the interval
    a.truncate_to(4)
    wait_until(lambda: "a 0 4" in open(path).read(), 5, "the checkpoint written")
    assert not lm.shutdown()
    os.unlink(path)
    lm = LogManager([d], cfg, 0, "cid")
    lm.startup()
    assert lm.get_log("a", 0).high_watermark == 4 == lm.get_log("a", 0).log_end_offset
    assert lm.get_log("b", 1).high_watermark == 5
    lm.shutdown()


def test_open_classmethod_takes_high_watermark(tmp_path):
    path = str(tmp_path / "x-0")
    lg = Log.open(path, TopicConfig())
    lg.append(batch_of(3))
    lg.close()
    lg = Log.open(path, TopicConfig(), high_watermark=2)
    assert (lg.high_watermark, lg.log_end_offset) == (2, 3)
    lg.close()
