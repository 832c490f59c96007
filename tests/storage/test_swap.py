"""Compaction hand-off: Log.replace_segments and recovery of an interrupted swap."""
from __future__ import annotations

import os
import shutil

import pytest

from samsa.config.topic import TopicConfig
from samsa.protocol.records import iter_batch_headers
from samsa.storage.log import Log
from tests.storage.helpers import batch_of

CFG = TopicConfig(segment_bytes=600, index_interval_bytes=100, file_delete_delay_ms=0)


def batches_of(path):
    data = open(path, "rb").read()
    return [(pos, h) for pos, h in iter_batch_headers(data)], data


def all_offsets(lg):
    out, off = [], lg.log_start_offset
    while off < lg.log_end_offset:
        data = lg.read(off, 1 << 20).regions[0].read_bytes()
        hs = [(h.base_offset, h.last_offset) for _, h in iter_batch_headers(data)]
        out += hs
        off = hs[-1][1] + 1
    return out


def cleaned_copy(lg, segs, keep):
    """What a cleaner would write: the kept batches of ``segs``, offsets unchanged."""
    out = bytearray()
    for s in segs:
        hs, data = batches_of(s.log_path)
        for pos, h in hs:
            if keep(h):
                out += data[pos:pos + h.size]
    path = os.path.join(lg.dir, f"{segs[0].base_offset:020d}.log.cleaned")
    with open(path, "wb") as f:
        f.write(out)
    return path


def test_replace_segments(tmp_path):
    lg = Log(os.path.join(tmp_path, "c-0"), "c", 0, CFG)
    for _ in range(30):
        lg.append(batch_of(2, size=40))
    segs = lg.segments
    assert len(segs) >= 4
    before = all_offsets(lg)
    old = list(segs[:3])
    path = cleaned_copy(lg, old, keep=lambda h: h.base_offset % 4 == 0)
    new = lg.replace_segments(old, path)
    assert lg.segments[0] is new and len(lg.segments) == len(segs) - 2
    expect = [b for b in before if b[0] >= segs[3].base_offset or b[0] % 4 == 0]
    assert all_offsets(lg) == expect
    # a removed offset reads as the next surviving batch
    data = lg.read(2, 1).regions[0].read_bytes()
    assert next(iter_batch_headers(data))[1].base_offset == 4
    assert os.path.getsize(new.index_path) == 8 * new.offset_index.entries
    assert not any(n.endswith((".cleaned", ".swap", ".deleted")) for n in os.listdir(lg.dir))
    with pytest.raises(ValueError):
        lg.replace_segments([lg.segments[-1]], path)
    lg.close()
    for clean in (True, False):
        lg2 = Log(os.path.join(tmp_path, "c-0"), "c", 0, CFG, clean_shutdown=clean)
        assert all_offsets(lg2) == expect
        lg2.close()


@pytest.mark.parametrize("stage", ["cleaned", "swap"])
def test_interrupted_swap_is_finished_or_dropped(tmp_path, stage):
    d = os.path.join(tmp_path, "c-0")
    lg = Log(d, "c", 0, CFG)
    for _ in range(30):
        lg.append(batch_of(2, size=40))
    segs = list(lg.segments)
    before = all_offsets(lg)
    path = cleaned_copy(lg, segs[:2], keep=lambda h: h.base_offset % 4 == 0)
    lg.close()
    if stage == "swap":
        shutil.move(path, path[: -len(".cleaned")] + ".swap")
        with open(os.path.join(d, f"{segs[0].base_offset:020d}.index.swap"), "wb"):
            pass
    lg2 = Log(d, "c", 0, CFG, clean_shutdown=False)
    if stage == "cleaned":   # never swapped in: the old data stays, the output goes
        assert all_offsets(lg2) == before
    else:                    # swapped in: the old segments it covers are gone
        assert all_offsets(lg2) == [b for b in before
                                    if b[0] >= segs[2].base_offset or b[0] % 4 == 0]
        assert not os.path.exists(segs[1].log_path)
    assert not any(n.endswith((".cleaned", ".swap")) for n in os.listdir(d))
    lg2.close()
