"""Idempotent producer rules inside Log.append, and the .snapshot files."""
from __future__ import annotations

import os
import struct

import pytest
from crc32c import crc32c

from samsa.config.topic import TopicConfig
from samsa.storage.errors import InvalidProducerEpochError, OutOfOrderSequenceError
from samsa.storage.log import Log
from samsa.storage.producer_state import decode_snapshot
from tests.storage.helpers import build_batch

PID = 1000


def pb(seq, n=1, epoch=0, pid=PID):
    return build_batch([b"v%d" % (seq + i) for i in range(n)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq)


def test_in_sequence_appends(make_log):
    lg = make_log()
    assert lg.append(pb(0, 2)).first_offset == 0
    assert lg.append(pb(2, 3)).first_offset == 2
    assert lg.log_end_offset == 5


def test_duplicate_of_recent_batch_is_not_appended(make_log):
    lg = make_log()
    results = [lg.append(pb(s, 2)) for s in range(0, 14, 2)]   # 7 batches
    leo = lg.log_end_offset
    size = lg.active_segment.size
    # the last 5 batches are remembered
    for r, s in list(zip(results, range(0, 14, 2)))[-5:]:
        dup = lg.append(pb(s, 2))
        assert dup.duplicate
        assert (dup.first_offset, dup.last_offset) == (r.first_offset, r.last_offset)
    assert lg.log_end_offset == leo and lg.active_segment.size == size
    # older ones are no longer known: a sequence gap
    with pytest.raises(OutOfOrderSequenceError):
        lg.append(pb(0, 2))


def test_sequence_gap(make_log):
    lg = make_log()
    lg.append(pb(0, 2))
    with pytest.raises(OutOfOrderSequenceError):
        lg.append(pb(3))
    assert lg.log_end_offset == 2


def test_lower_epoch_is_fenced(make_log):
    lg = make_log()
    lg.append(pb(0, epoch=3))
    with pytest.raises(InvalidProducerEpochError):
        lg.append(pb(1, epoch=2))


def test_new_epoch_must_start_at_zero(make_log):
    lg = make_log()
    lg.append(pb(0, 3, epoch=0))
    with pytest.raises(OutOfOrderSequenceError):
        lg.append(pb(3, epoch=1))
    assert lg.append(pb(0, epoch=1)).first_offset == 3
    # and the old epoch is now fenced
    with pytest.raises(InvalidProducerEpochError):
        lg.append(pb(3, epoch=0))


def test_sequence_wraps_at_int32_max(make_log):
    lg = make_log()
    lg.append(pb(2**31 - 3, 3))        # last sequence 2^31-1
    assert lg.append(pb(0, 2)).first_offset == 3


def test_unknown_producer_accepts_any_sequence(make_log):
    lg = make_log()
    assert lg.append(pb(17, pid=5)).first_offset == 0


def test_rejected_append_writes_nothing_even_with_good_batches_first(make_log):
    lg = make_log()
    lg.append(pb(0))
    with pytest.raises(OutOfOrderSequenceError):
        lg.append(build_batch([b"plain"]) + pb(5))
    assert lg.log_end_offset == 1


def test_snapshot_format_and_reload(tmp_path, make_log):
    cfg = TopicConfig(segment_bytes=400)
    lg = make_log(cfg)
    for s in range(0, 20, 2):
        lg.append(pb(s, 2))
    lg.append(pb(0, epoch=0, pid=77))
    lg.close()
    snaps = sorted(f for f in os.listdir(lg.dir) if f.endswith(".snapshot"))
    assert f"{lg.log_end_offset:020d}.snapshot" in snaps
    data = open(os.path.join(lg.dir, snaps[-1]), "rb").read()
    version, crc = struct.unpack_from(">hI", data)
    assert version == 1 and crc == crc32c(data[6:])
    assert struct.unpack_from(">i", data, 6)[0] == 2
    entries = {e.producer_id: e for e in decode_snapshot(data)}
    assert entries[PID].last_seq == 19 and entries[PID].batches[-1].last_offset == 19
    lg2 = make_log(cfg)
    dup = lg2.append(pb(18, 2))
    assert dup.duplicate and dup.first_offset == 18
    with pytest.raises(OutOfOrderSequenceError):
        lg2.append(pb(21))


def test_state_rebuilt_from_log_after_unclean_stop(tmp_path):
    d = os.path.join(tmp_path, "t-0")
    cfg = TopicConfig(segment_bytes=400)
    lg = Log(d, "t", 0, cfg)
    for s in range(0, 30, 2):
        lg.append(pb(s, 2))
    lg.close_handles(trim=False)     # crash: no snapshot at the end
    for f in os.listdir(d):
        if f.endswith(".snapshot"):
            os.unlink(os.path.join(d, f))
    lg2 = Log(d, "t", 0, cfg, clean_shutdown=False)
    dup = lg2.append(pb(28, 2))
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (28, 29)
    assert lg2.append(pb(30)).first_offset == 30
    lg2.close()
