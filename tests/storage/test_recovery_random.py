"""Recovery, randomised: clean stops, kill -9s, torn tails and lost tails in any order;
every acked batch (not lost) reads back at its offset, index files point inside their
segments, and a clean restart afterwards agrees."""
from __future__ import annotations

import os
import random

import pytest

from samsa.protocol.records import iter_batch_headers
from tests.storage.helpers import batch_of
from tests.storage.test_recovery import all_batches, crash, reopen


def _batch_ends(path):
    data = open(path, "rb").read()
    out, pos = [], 0
    for _, h in iter_batch_headers(data):
        pos += h.size
        out.append((pos, h.last_offset))
    return out


def _check(lg, expected):
    assert all_batches(lg) == expected
    for first, last in expected[::3]:
        for off in (first, last):
            rr = lg.read(off, 1)
            assert rr.regions, off
            hs = [(h.base_offset, h.last_offset) for _, h in iter_batch_headers(rr.regions[0].read_bytes())]
            assert hs and hs[0][0] <= off <= hs[0][1], (off, hs[:1])
    for s in lg.segments:
        size = os.path.getsize(s.log_path)
        # (an empty segment's files are ignored on load and cut by its first append)
        if size and os.path.exists(s.index_path):
            data = open(s.index_path, "rb").read()
            for i in range(0, len(data) - 7, 8):
                rel, pos = int.from_bytes(data[i:i + 4], "big"), int.from_bytes(data[i + 4:i + 8], "big")
                if (rel, pos) == (0, 0):
                    break
                assert pos < size, (s.index_path, i // 8, pos, size)
        nxt = s.read_next_offset() if hasattr(s, "read_next_offset") else None
        if size and nxt is not None and os.path.exists(s.time_index_path):
            data = open(s.time_index_path, "rb").read()
            for i in range(0, len(data) - 11, 12):
                ts, rel = int.from_bytes(data[i:i + 8], "big"), int.from_bytes(data[i + 8:i + 12], "big")
                if (ts, rel) == (0, 0):
                    break
                assert s.base_offset + rel < nxt, (s.time_index_path, i // 12, rel, nxt)


@pytest.mark.parametrize("seed", range(6))
def test_random_stops_kills_and_tails(tmp_path, seed):
    rnd = random.Random(seed)
    lg = reopen(tmp_path, clean=True)
    expected = []
    for _step in range(14):
        for _ in range(rnd.randrange(0, 12)):
            r = lg.append(batch_of(1 + rnd.randrange(3), size=20 + rnd.randrange(80)))
            expected.append((r.first_offset, r.last_offset))
        how = rnd.choice(["clean", "kill", "torn", "lost", "zeroed"])
        if how == "clean":
            lg.close()
            lg = reopen(tmp_path, clean=True)
        else:
            active = lg.active_segment.log_path
            crash(lg)
            lg.closed = True
            if how == "torn":
                with open(active, "ab") as f:
                    b = batch_of(3, size=100)
                    f.write(b[: rnd.randrange(1, len(b))])
            elif how == "zeroed":   # power loss: the active segment's blocks read as zeros
                size = os.path.getsize(active)
                with open(active, "r+b") as f:
                    f.write(bytes(size))
                base = int(os.path.basename(active).split(".")[0])
                expected = [e for e in expected if e[1] < base]
            elif how == "lost":
                ends = _batch_ends(active)
                if ends:
                    keep = rnd.randrange(len(ends))
                    cut_at = ends[keep][0] if keep else 0
                    os.truncate(active, cut_at)
                    last = ends[keep][1] if keep else None
                    base = int(os.path.basename(active).split(".")[0])
                    expected = [e for e in expected if e[1] < base or (last is not None and e[1] <= last)]
            lg = reopen(tmp_path)
        _check(lg, expected)
        if expected:
            assert lg.log_end_offset == expected[-1][1] + 1
    lg.close()
    lg = reopen(tmp_path, clean=True)
    _check(lg, expected)
    r = lg.append(batch_of(2))
    assert r.first_offset == (expected[-1][1] + 1 if expected else lg.log_start_offset)
    lg.close()
