"""SIGKILL a process that is appending, 20 times; every acknowledged batch must survive.

The child opens a LogManager on the same directory each time (so it also runs
recovery after the previous kill), appends batches of random sizes (some large
enough that the kill can land inside a write) and prints ``first last`` for each
append that returned, flushing stdout. The parent kills it at a random moment,
sometimes adds a torn/garbage tail to the active segment as a crashed disk write
would, then reopens the directory itself and checks: every acknowledged batch
is readable at its offsets, offsets are contiguous from 0 to the log end, every
batch's CRC is valid and no segment holds bytes after its last valid batch.
"""
from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time

import pytest

from samsa.config.topic import TopicConfig
from samsa.protocol.records import iter_batch_headers, validate_batches
from samsa.storage.manager import LogManager

# A child process appends and is killed with SIGKILL.
pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r'''
import os, random, sys
sys.path.insert(0, sys.argv[2])
from samsa.config.topic import TopicConfig
from samsa.storage.manager import LogManager
from tests.storage.helpers import build_batch
cfg = TopicConfig(segment_bytes=1_000_000, index_interval_bytes=4096, flush_ms=50,
                  file_delete_delay_ms=0)
lm = LogManager([sys.argv[1]], cfg, 0, "crash", checkpoint_interval_ms=100,
                flush_check_interval_ms=50)
lm.startup()
lg = lm.create_log("c", 0, cfg)
rnd = random.Random(int(sys.argv[3]))
print("ready", lg.log_end_offset, flush=True)
seq = 0
while True:
    n = rnd.choice([1, 1, 2, 5])
    size = rnd.choice([10, 100, 2000, 60_000])
    r = lg.append(build_batch([b"%d:" % seq + b"x" * size] * n))
    seq += 1
    sys.stdout.write("%d %d\n" % (r.first_offset, r.last_offset))
    sys.stdout.flush()
'''

CFG = TopicConfig(segment_bytes=1_000_000, index_interval_bytes=4096, file_delete_delay_ms=0)


def _run_child(script, data_dir, seed, kill_after):
    proc = subprocess.Popen([sys.executable, script, data_dir, ROOT, str(seed)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": ROOT})
    acked = []
    buf = b""
    deadline = None
    try:
        while True:
            r, _, _ = select.select([proc.stdout], [], [], 0.01)
            if r:
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if line.startswith(b"ready"):
                        deadline = time.monotonic() + kill_after
                    else:
                        a, b = line.split()
                        acked.append((int(a), int(b)))
            if deadline is not None and time.monotonic() >= deadline:
                proc.send_signal(signal.SIGKILL)
                break
            if proc.poll() is not None:
                break
        proc.wait(timeout=10)
        rest = proc.stdout.read()
        buf += rest
        for line in buf.split(b"\n")[:-1]:   # only complete lines were acknowledged
            if line and not line.startswith(b"ready"):
                a, b = line.split()
                acked.append((int(a), int(b)))
        err = proc.stderr.read().decode(errors="replace")
        assert proc.returncode == -signal.SIGKILL, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    return acked


def _verify(data_dir, all_acked):
    lm = LogManager([data_dir], CFG, 0, "crash")
    lm.startup()
    try:
        lg = lm.get_log("c", 0)
        batches = []
        off = 0
        while off < lg.log_end_offset:
            rr = lg.read(off, 1 << 22)
            data = rr.regions[0].read_bytes()
            validate_batches(data)          # every CRC checks out
            hs = [(h.base_offset, h.last_offset) for _, h in iter_batch_headers(data)]
            batches += hs
            off = hs[-1][1] + 1
        # contiguous from 0 to the log end
        expect = 0
        for first, last in batches:
            assert first == expect
            expect = last + 1
        assert expect == lg.log_end_offset
        present = set(batches)
        missing = [a for a in all_acked if a not in present]
        assert not missing, f"acknowledged batches lost: {missing[:5]}"
        # no bytes after the last valid batch of any segment
        for s in lg.segments:
            with open(s.log_path, "rb") as f:
                data = f.read()
            assert sum(h.size for _, h in iter_batch_headers(data)) == len(data)
        return lg.log_end_offset, lg.active_segment.log_path
    finally:
        lm.shutdown(clean=False)


def test_sigkill_while_appending(tmp_path):
    script = os.path.join(tmp_path, "child.py")
    with open(script, "w") as f:
        f.write(CHILD)
    data_dir = os.path.join(tmp_path, "data")
    rnd = random.Random(1234)
    all_acked = []
    for i in range(20):
        acked = _run_child(script, data_dir, i, kill_after=rnd.uniform(0.02, 0.3))
        all_acked += acked
        leo, active = _verify(data_dir, all_acked)
        # now and then, leave a torn write behind as a crashed disk might
        damage = rnd.choice([None, None, "garbage", "zeros", "torn"])
        if damage:
            with open(active, "ab") as f:
                if damage == "garbage":
                    f.write(os.urandom(rnd.randint(1, 5000)))
                elif damage == "zeros":
                    f.write(b"\x00" * rnd.randint(1, 5000))
                else:
                    from tests.storage.helpers import batch_of
                    b = batch_of(3, size=500)
                    f.write(b[: rnd.randint(1, len(b) - 1)])
    assert len(all_acked) > 20
    _verify(data_dir, all_acked)
