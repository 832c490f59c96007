"""Property tests: random appends/rolls/retention/reads/restarts against a simple model."""
from __future__ import annotations

import os
import shutil
import tempfile

from hypothesis import HealthCheck, given, settings, strategies as st

from samsa.config.topic import TopicConfig
from samsa.protocol.records import iter_batch_headers
from samsa.storage.entries import EntryScanner
from samsa.storage.index import OffsetIndex
from samsa.storage.log import Log
from tests.storage.helpers import build_batch

op = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 4), st.integers(0, 400)),
    st.tuples(st.just("roll")),
    st.tuples(st.just("retention"), st.integers(0, 3000)),
    st.tuples(st.just("delete_records"), st.integers(0, 100)),
    st.tuples(st.just("reopen"), st.booleans()),
    st.tuples(st.just("read"), st.integers(0, 200), st.integers(1, 3000)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=1, max_size=40),
       segment_bytes=st.integers(300, 3000), interval=st.integers(1, 600),
       index_bytes=st.sampled_from([16, 64, 4096]))
def test_random_operations_keep_every_batch_at_its_offset(ops, segment_bytes, interval, index_bytes):
    cfg = TopicConfig(segment_bytes=segment_bytes, index_interval_bytes=interval,
                      segment_index_bytes=index_bytes, file_delete_delay_ms=0,
                      retention_ms=-1)
    tmp = tempfile.mkdtemp()
    path = os.path.join(tmp, "p-0")
    lg = Log(path, "p", 0, cfg)
    model: dict[int, tuple[int, bytes]] = {}   # base offset -> (last offset, values digest)
    try:
        for o in ops:
            kind = o[0]
            if kind == "append":
                n, size = o[1], o[2]
                vals = [os.urandom(size)[: size] for _ in range(n)]
                b = build_batch(vals)
                if len(b) > segment_bytes:
                    continue
                r = lg.append(b)
                lg.update_high_watermark(r.last_offset + 1)   # committed, as a single replica
                model[r.first_offset] = (r.last_offset, b[61:])   # records bytes are unchanged
            elif kind == "roll":
                lg.roll()
            elif kind == "retention":
                lg.config = cfg.replace(retention_bytes=o[1])
                lg.apply_retention()
                lg.config = cfg
            elif kind == "delete_records":
                target = min(lg.log_start_offset + o[1], lg.high_watermark)
                lg.delete_records_before(target)
            elif kind == "reopen":
                clean = o[1]
                if clean:
                    lg.close()
                else:
                    lg.close_handles(trim=False)
                lg = Log(path, "p", 0, cfg, clean_shutdown=clean)
            elif kind == "read":
                if lg.log_end_offset > lg.log_start_offset:
                    off = lg.log_start_offset + o[1] % (lg.log_end_offset - lg.log_start_offset)
                    rr = lg.read(off, o[2])
                    data = rr.regions[0].read_bytes()
                    hs = list(iter_batch_headers(data))
                    assert sum(h.size for _, h in hs) == len(data)
                    assert hs[0][1].base_offset <= off <= hs[0][1].last_offset or \
                        hs[0][1].base_offset > off
                    assert len(data) <= max(o[2], hs[0][1].size)
            # invariant: everything from the log start offset on is readable at its offset
            lso, leo = lg.log_start_offset, lg.log_end_offset
            expect = sorted((b, v) for b, v in model.items() if v[0] >= lso)
            got = []
            off = lso
            while off < leo:
                rr = lg.read(off, 1 << 20)
                assert rr.regions, (off, leo)
                data = rr.regions[0].read_bytes()
                for pos, h in iter_batch_headers(data):
                    got.append((h.base_offset, (h.last_offset, data[pos + 61:pos + h.size])))
                off = got[-1][1][0] + 1
            # retention may leave batches below the log start offset in the first segment
            got = [g for g in got if g[1][0] >= lso]
            assert got == expect
            assert leo == (max(v[0] for v in model.values()) + 1 if model else 0) or not model
    finally:
        lg.close()
        shutil.rmtree(tmp, ignore_errors=True)


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 700), min_size=1, max_size=60),
       interval=st.integers(1, 2000), probes=st.lists(st.integers(0, 400), max_size=30))
def test_index_lookup_agrees_with_linear_scan(sizes, interval, probes):
    cfg = TopicConfig(index_interval_bytes=interval)
    tmp = tempfile.mkdtemp()
    try:
        lg = Log(os.path.join(tmp, "i-0"), "i", 0, cfg)
        for i, s in enumerate(sizes):
            lg.append(build_batch([b"x" * s] * (1 + i % 3)))
        seg = lg.active_segment
        fd = seg.file.fileno()
        entries = list(EntryScanner(fd, 0, seg.size))
        leo = lg.log_end_offset
        for p in probes + [0, leo - 1]:
            target = p % leo
            linear = next(e for e in entries if e.last_offset >= target)
            assert seg.translate_offset(target, seg.size) == (linear.position, linear.size)
            # the sparse entry used never points past the batch a scan finds
            idx_off, idx_pos = seg.offset_index.lookup(target)
            assert idx_off <= target or idx_pos == 0
            assert idx_pos <= linear.position
        # the on-disk index holds exactly the in-memory entries, and they point at batch starts
        lg.roll()
        oi = OffsetIndex(seg.index_path, seg.base_offset, cfg.segment_index_bytes, writable=False)
        assert list(oi.keys) == list(seg.offset_index.keys)
        starts = {e.position: e.last_offset for e in entries}
        for off, pos in zip(oi.keys, oi.values):
            assert starts[pos] == off
        lg.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
