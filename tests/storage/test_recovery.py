"""Recovery after an unclean stop: torn tails, garbage, zeros, lost indexes, legacy data."""
from __future__ import annotations

import os

import pytest

from samsa.config.topic import TopicConfig
from samsa.protocol.records import build_message_set, iter_batch_headers, parse_message_set
from samsa.storage.log import Log
from samsa.storage.manager import LogManager
from tests.storage.helpers import batch_of

CFG = TopicConfig(segment_bytes=2000, index_interval_bytes=150, file_delete_delay_ms=0)


def fill(lg, n=40):
    acked = []
    for i in range(n):
        r = lg.append(batch_of(1 + i % 3, size=20 + i))
        acked.append((r.first_offset, r.last_offset))
    return acked


def all_batches(lg):
    out = []
    off = lg.log_start_offset
    while off < lg.log_end_offset:
        rr = lg.read(off, 1 << 20)
        if not rr.regions:
            break
        data = rr.regions[0].read_bytes()
        hs = [(h.base_offset, h.last_offset) for _, h in iter_batch_headers(data)]
        out += hs
        off = hs[-1][1] + 1
    return out


def crash(lg):
    """Leave the directory as a SIGKILL would: no trim, no snapshot, no flush."""
    lg.close_handles(trim=False)


def reopen(tmp_path, clean=False, cfg=CFG):
    return Log(os.path.join(tmp_path, "t-0"), "t", 0, cfg, clean_shutdown=clean)


def check_segments_have_no_trailing_bytes(lg):
    for s in lg.segments:
        data = open(s.log_path, "rb").read()
        assert sum(h.size for _, h in iter_batch_headers(data)) == len(data)


@pytest.mark.parametrize("damage", ["garbage", "half_batch", "zeros", "length_past_end",
                                    "bad_crc_last"])
def test_damaged_tail_is_cut(tmp_path, damage):
    lg = reopen(tmp_path, clean=True)
    acked = fill(lg)
    active = lg.active_segment.log_path
    crash(lg)
    keep = list(acked)
    with open(active, "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        if damage == "garbage":
            f.seek(size)
            f.write(os.urandom(333))
        elif damage == "half_batch":
            f.seek(size)
            b = batch_of(3, size=100)
            f.write(b[: len(b) // 2])
        elif damage == "zeros":
            f.seek(size)
            f.write(b"\x00" * 4096)
        elif damage == "length_past_end":
            f.seek(size)
            b = bytearray(batch_of(2))
            b[8:12] = (10_000).to_bytes(4, "big")
            f.write(b)
        elif damage == "bad_crc_last":
            data = open(active, "rb").read()
            last_pos, last = list(iter_batch_headers(data))[-1]
            f.seek(last_pos + last.size - 1)
            f.write(bytes([data[last_pos + last.size - 1] ^ 0xFF]))
            keep = acked[:-1]
    lg2 = reopen(tmp_path)
    assert all_batches(lg2) == keep
    assert lg2.log_end_offset == keep[-1][1] + 1
    check_segments_have_no_trailing_bytes(lg2)
    r = lg2.append(batch_of(1))
    assert r.first_offset == keep[-1][1] + 1
    lg2.close()


def test_corruption_in_middle_segment_drops_everything_after(tmp_path):
    lg = reopen(tmp_path, clean=True)
    fill(lg, 60)
    segs = lg.segments
    assert len(segs) >= 3
    victim = segs[1]
    crash(lg)
    data = open(victim.log_path, "rb").read()
    hs = list(iter_batch_headers(data))
    pos, h = hs[2]
    with open(victim.log_path, "r+b") as f:
        f.seek(pos + 70)
        f.write(b"\xff\xfe")
    lg2 = reopen(tmp_path)
    assert [s.base_offset for s in lg2.segments] == [segs[0].base_offset, victim.base_offset]
    assert lg2.log_end_offset == hs[1][1].last_offset + 1
    assert not os.path.exists(segs[2].log_path)
    check_segments_have_no_trailing_bytes(lg2)
    lg2.close()


@pytest.mark.parametrize("how", ["deleted", "truncated", "garbage"])
def test_lost_or_damaged_index_is_rebuilt(tmp_path, how):
    lg = reopen(tmp_path, clean=True)
    acked = fill(lg, 60)
    first = lg.segments[0]
    lg.close()
    expected_index = open(first.index_path, "rb").read()
    assert expected_index
    if how == "deleted":
        os.unlink(first.index_path)
        os.unlink(first.time_index_path)
    elif how == "truncated":
        with open(first.index_path, "r+b") as f:
            f.truncate(len(expected_index) - 3)
    else:
        with open(first.index_path, "r+b") as f:
            f.seek(0)
            f.write(b"\xff" * 8)   # an entry pointing far past the end of the segment
    lg2 = reopen(tmp_path, clean=True)
    assert all_batches(lg2) == acked
    for first_off, last_off in acked:
        rr = lg2.read(last_off, 1)
        data = rr.regions[0].read_bytes()
        (_, h), = list(iter_batch_headers(data))
        assert h.base_offset == first_off
    assert open(first.index_path, "rb").read() == expected_index
    lg2.close()


def test_active_index_deleted_after_crash(tmp_path):
    lg = reopen(tmp_path, clean=True)
    acked = fill(lg, 10)
    crash(lg)
    os.unlink(lg.active_segment.index_path)
    lg2 = reopen(tmp_path)
    assert all_batches(lg2) == acked
    lg2.close()


def test_clean_marker_skips_recovery(tmp_path):
    d = os.path.join(tmp_path, "data")
    lm = LogManager([d], CFG, 0, "c1")
    lm.startup()
    lg = lm.create_log("t", 0, CFG)
    fill(lg, 60)
    nsegs = len(lg.segments)
    lm.shutdown()
    assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    lm2 = LogManager([d], CFG, 0, "c1")
    lm2.startup()
    lg2 = lm2.get_log("t", 0)
    assert len(lg2.segments) == nsegs
    # clean start: older segments are not even opened until used
    assert all(s._file is None for s in lg2.segments[:-1])
    assert not os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    rp = lg2.recovery_point
    assert rp == lg.log_end_offset
    fill(lg2, 30)
    leo = lg2.log_end_offset
    lm2.shutdown(clean=False)
    lm3 = LogManager([d], CFG, 0, "c1")
    lm3.startup()
    lg3 = lm3.get_log("t", 0)
    # unclean: segments from the one holding the checkpointed recovery point on were
    # checked (recovery rebuilt their indexes), the older ones not even opened; no
    # segment keeps a descriptor from recovery
    for s, nxt in zip(lg3.segments, lg3.segments[1:] + (None,)):
        assert s._file is None
        if nxt is not None and nxt.base_offset <= rp:
            assert s._offset_index is None
        else:
            assert s._offset_index is not None
    assert lg3.log_end_offset == leo
    lm3.shutdown()


def test_legacy_magic_0_and_1_data_opens_and_reads(tmp_path):
    pdir = os.path.join(tmp_path, "old-0")
    os.makedirs(pdir)
    v0 = build_message_set([(b"k", b"v0-%d" % i, None) for i in range(3)], magic=0, base_offset=0)
    v1 = build_message_set([(None, b"v1-%d" % i, 1000 + i) for i in range(4)], magic=1,
                           base_offset=3)
    v1z = build_message_set([(None, b"gz-%d" % i, 2000 + i) for i in range(5)], magic=1,
                            codec=1, base_offset=7)
    with open(os.path.join(pdir, "00000000000000000000.log"), "wb") as f:
        f.write(v0 + v1 + v1z)
    lg = Log(pdir, "old", 0, CFG, clean_shutdown=False)
    assert lg.log_end_offset == 12
    data = lg.read(0, 1 << 20).regions[0].read_bytes()
    msgs = parse_message_set(data)
    assert [m.offset for m in msgs] == list(range(12))
    assert msgs[-1].value == b"gz-4"
    # reading from the middle of the compressed wrapper returns the wrapper
    data = lg.read(9, 1 << 20).regions[0].read_bytes()
    assert data == v1z
    # new data is v2, appended after
    r = lg.append(batch_of(2))
    assert r.first_offset == 12
    assert lg.offset_for_timestamp(1002) == (5, 1002)
    lg.close()
    from samsa.tools.dump_log import main
    import io
    import contextlib
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        main(["--files", os.path.join(pdir, "00000000000000000000.log"), "--deep-iteration"])
    out = buf.getvalue().splitlines()
    assert out[2].startswith("offset: 0 position: 0 NoTimestampType: -1 size: ")
    assert " magic: 0 compresscodec: none crc: " in out[2] and out[2].endswith("isvalid: true")
    assert any(l.startswith("offset: 11 position: ") and "compresscodec: gzip" in l for l in out)
    assert any(l.startswith("| offset: 9 CreateTime: 2002 keySize: -1 valueSize: 4 isValid: true crc: ")
               for l in out)
    assert any(l.startswith("baseOffset: 12 lastOffset: 13 count: 2") for l in out)


def test_legacy_corrupt_crc_is_cut(tmp_path):
    pdir = os.path.join(tmp_path, "old-0")
    os.makedirs(pdir)
    v1 = bytearray(build_message_set([(None, b"abc%d" % i, 1000) for i in range(4)], magic=1))
    v1[-1] ^= 0x55
    with open(os.path.join(pdir, "00000000000000000000.log"), "wb") as f:
        f.write(v1)
    lg = Log(pdir, "old", 0, CFG, clean_shutdown=False)
    assert lg.log_end_offset == 3
    lg.close()


def _stamp(path):
    st = os.stat(path)
    return st.st_ino, st.st_mtime_ns, st.st_size


def _offset_entries(path):
    data = open(path, "rb").read()
    out = []
    for pos in range(0, len(data) - 7, 8):
        rel, p = int.from_bytes(data[pos:pos + 4], "big"), int.from_bytes(data[pos + 4:pos + 8], "big")
        if out and (rel <= out[-1][0] or p <= out[-1][1]):
            break
        if not out and (rel, p) == (0, 0):
            break
        out.append((rel, p))
    return out


def test_recovery_keeps_index_files_holding_what_it_rebuilds_and_still_cuts_a_torn_tail(tmp_path):
    """After a kill -9 the active segment is checked whole, as before; its index
    files, which hold exactly the entries the check rebuilds, are not written
    again (each rewrite is a journalled truncate and preallocation: 20,000 of
    them for 10,000 partitions). A half-written batch past them is still cut."""
    lg = reopen(tmp_path, clean=True)
    acked = fill(lg, 25)
    active = lg.active_segment
    crash(lg)
    entries = _offset_entries(active.index_path)
    assert entries, "the test wants an active segment with index entries"
    before = {p: _stamp(p) for p in (active.index_path, active.time_index_path)}
    torn = batch_of(3, size=100)
    with open(active.log_path, "ab") as f:
        f.write(torn[:len(torn) // 2])
    lg2 = reopen(tmp_path)
    assert all_batches(lg2) == acked
    check_segments_have_no_trailing_bytes(lg2)
    assert {p: _stamp(p) for p in before} == before
    assert _offset_entries(active.index_path) == entries
    assert lg2.append(batch_of(1)).first_offset == acked[-1][1] + 1
    lg2.close()
    lg3 = reopen(tmp_path, clean=True)
    assert all_batches(lg3)[:-1] == acked
    lg3.close()


def test_recovery_rewrites_an_index_holding_more_than_the_log(tmp_path):
    """A stale entry after the rebuilt ones (the log lost its batch, the index
    kept its entry) makes recovery write the file anew: no entry past the log."""
    lg = reopen(tmp_path, clean=True)
    acked = fill(lg, 25)
    active = lg.active_segment
    crash(lg)
    entries = _offset_entries(active.index_path)
    rel, pos = entries[-1]
    with open(active.index_path, "r+b") as f:
        f.seek(len(entries) * 8)
        f.write((rel + 50).to_bytes(4, "big") + (pos + 5000).to_bytes(4, "big"))
    assert len(_offset_entries(active.index_path)) == len(entries) + 1
    lg2 = reopen(tmp_path)
    assert _offset_entries(active.index_path) == entries
    assert all_batches(lg2) == acked
    lg2.close()


def test_segments_below_the_recovery_point_are_not_checked_again(tmp_path):
    """Kafka's rule: what the recovery point covers was flushed and is trusted;
    only the segment holding it and later ones are checked after a crash."""
    lg = reopen(tmp_path, clean=True)
    fill(lg, 60)
    segs = lg.segments
    assert len(segs) >= 3
    rp = segs[-1].base_offset
    crash(lg)
    old = segs[0].log_path
    size = os.path.getsize(old)
    with open(old, "r+b") as f:   # damage the trusted segment's last batch
        f.seek(size - 1)
        last = f.read(1)
        f.seek(size - 1)
        f.write(bytes([last[0] ^ 0xFF]))
    lg2 = Log(os.path.join(tmp_path, "t-0"), "t", 0, CFG, clean_shutdown=False,
              recovery_point=rp)
    assert os.path.getsize(old) == size
    assert [s.base_offset for s in lg2.segments] == [s.base_offset for s in segs]
    lg2.close()
