"""The bounded set of open segment files (storage/fd_cache.py, issue 29): many
partitions over a small limit keep at most that many .log files open, and
every read, append, truncation, deletion and recovery stays right when the
file it needs was let go, by this thread or another."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from samsa.config.broker import BrokerConfig
from samsa.config.errors import ConfigError
from samsa.config.topic import TopicConfig
from samsa.protocol.records import iter_records
import samsa.storage.segment as segment_module
from samsa.storage.fd_cache import DESCRIPTORS, derived_limit
from samsa.storage.log import Log
from samsa.storage.manager import LogManager
from tests.storage.helpers import build_batch, open_under

LIMIT = 6


@pytest.fixture
def small_cache():
    old = DESCRIPTORS.limit
    DESCRIPTORS.configure(LIMIT)
    yield DESCRIPTORS
    DESCRIPTORS.configure(old)



def _values(lg: Log, start: int = 0) -> list[bytes]:
    out: list[bytes] = []
    offset = start
    while offset < lg.log_end_offset:
        rr = lg.read(offset, 1 << 20)
        if not rr.regions:
            break
        for region in rr.regions:
            for rec in iter_records(region.read_bytes()):
                if rec.offset >= offset:
                    out.append(rec.value)
                    offset = rec.offset + 1
    return out


def _logs(tmp_path, n: int, cfg: TopicConfig | None = None) -> list[Log]:
    cfg = cfg or TopicConfig(segment_bytes=500, file_delete_delay_ms=0)
    return [Log(str(tmp_path / f"t-{p}"), "t", p, cfg) for p in range(n)]


def test_many_partitions_over_a_small_cache_hold_at_most_its_limit(tmp_path, small_cache):
    logs = _logs(tmp_path, 40)
    for rnd in range(12):   # several segments each, written round the partitions
        for p, lg in enumerate(logs):
            lg.append(build_batch([f"{p}:{rnd}".encode() * 20]))
        assert len(open_under(tmp_path)) <= LIMIT
    assert all(len(lg.segments) > 2 for lg in logs)
    for p, lg in enumerate(logs):   # each read opens (and evicts) again
        assert _values(lg) == [f"{p}:{rnd}".encode() * 20 for rnd in range(12)]
        assert len(open_under(tmp_path)) <= LIMIT
    assert small_cache.evictions > 0
    for lg in logs:
        lg.close()
    assert open_under(tmp_path) == []


def test_a_region_read_before_its_file_was_let_go_stays_readable(tmp_path, small_cache):
    logs = _logs(tmp_path, LIMIT + 3)
    for p, lg in enumerate(logs):
        lg.append(build_batch([f"first of {p}".encode()]))
    region = logs[0].read(0, 1 << 20).regions[0]
    for lg in logs[1:]:   # every other partition read: partition 0's file is let go
        lg.read(0, 1 << 20)
    assert logs[0].active_segment._file is None
    # the region holds its descriptor: still the same bytes, not another file's
    assert [r.value for r in iter_records(region.read_bytes())] == [b"first of 0"]
    held = len(open_under(tmp_path))
    del region
    assert len(open_under(tmp_path)) == held - 1   # closed with its last holder
    # a region not used before its file was let go holds no descriptor
    # meanwhile: it opens the same file again when it is used
    regions = [lg.read(0, 1 << 20).regions[0] for lg in logs]
    assert len(open_under(tmp_path)) <= LIMIT
    assert [[r.value for r in iter_records(region.read_bytes())] for region in regions] == [
        [f"first of {p}".encode()] for p in range(len(logs))]
    del regions
    logs[0].append(build_batch([b"second of 0"]))   # reopened for the append
    assert _values(logs[0]) == [b"first of 0", b"second of 0"]
    for lg in logs:
        lg.close()


def test_concurrent_appenders_and_readers_over_a_tiny_cache(tmp_path, small_cache):
    """Three appending threads (network threads) and two reading ones over
    twelve partitions and a cache of six: every file is let go under
    somebody many times, and no read ever sees another partition's bytes."""
    logs = _logs(tmp_path, 12)
    rounds = 40
    errors: list[BaseException] = []
    done = threading.Event()

    def append(part_ids):
        try:
            for rnd in range(rounds):
                for p in part_ids:
                    logs[p].append(build_batch([f"{p}:{rnd}".encode() * 10]))
        except BaseException as exc:   # pragma: no cover - reported below
            errors.append(exc)

    def read():
        try:
            while not done.is_set():
                for p, lg in enumerate(logs):
                    for v in _values(lg):
                        assert v.split(b":")[0] == str(p).encode(), (p, v)
        except BaseException as exc:   # pragma: no cover - reported below
            errors.append(exc)

    writers = [threading.Thread(target=append, args=(range(k, 12, 3),)) for k in range(3)]
    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in writers + readers:
        t.start()
    for t in writers:
        t.join()
    done.set()
    for t in readers:
        t.join()
    assert not errors, errors
    for p, lg in enumerate(logs):
        assert _values(lg) == [f"{p}:{rnd}".encode() * 10 for rnd in range(rounds)]
        lg.flush()   # files let go after their writes are synced all the same
        assert lg.recovery_point == lg.log_end_offset
    assert small_cache.evictions > 0
    assert len(open_under(tmp_path)) <= LIMIT
    for lg in logs:
        lg.close()


def test_truncation_and_deletion_of_segments_whose_files_were_let_go(tmp_path, small_cache):
    cfg = TopicConfig(segment_bytes=300, file_delete_delay_ms=60000, retention_bytes=-1)
    lg = Log(str(tmp_path / "t-0"), "t", 0, cfg)
    others = _logs(tmp_path / "o", LIMIT)
    for i in range(20):
        lg.append(build_batch([f"v{i}".encode() * 10]))
    assert len(lg.segments) > 4
    _values(lg)   # every segment opened for reading
    old = lg.segments[0]
    for o in others:   # ... and let go again
        o.append(build_batch([b"x"]))
    assert all(s._file is None for s in lg.segments)
    # a follower's truncation into a segment that is not open
    cut = lg.segments[2].base_offset + 1
    lg.truncate_to(cut)
    assert lg.log_end_offset == cut
    lg.append(build_batch([b"after the truncation"]))
    assert _values(lg) == [f"v{i}".encode() * 10 for i in range(cut)] + [b"after the truncation"]
    # retention renames the oldest segment for its delayed delete; a reader
    # that still has it opens it by its new name
    unsent = lg.read(0, 1 << 20).regions[0]   # a fetch answer not sent yet
    for o in others:
        o.read(0, 100)
    assert old._file is None
    lg.update_high_watermark(lg.log_end_offset)
    lg.delete_records_before(lg.segments[1].base_offset)
    lg.apply_retention()
    assert old.deleted and not os.path.exists(old.log_path)
    region = old.read(0, 1 << 20)
    assert [r.value for r in iter_records(region.read_bytes())][0] == b"v0" * 10
    del region
    # the unsent region opens the renamed file (the same inode) when sent
    assert [r.value for r in iter_records(unsent.read_bytes())][0] == b"v0" * 10
    lg.close()
    for o in others:
        o.close()


_KILLED_WRITER = textwrap.dedent("""
    import os, signal, sys
    from samsa.config.topic import TopicConfig
    from samsa.storage.fd_cache import DESCRIPTORS
    from samsa.storage.log import Log
    from tests.storage.helpers import build_batch
    DESCRIPTORS.configure(3)
    cfg = TopicConfig(segment_bytes=2000)
    logs = [Log(os.path.join(sys.argv[1], f"t-{p}"), "t", p, cfg) for p in range(10)]
    for rnd in range(15):
        for p, lg in enumerate(logs):
            lg.append(build_batch([f"{p}:{rnd}".encode() * 20]))
    for lg in logs[:5]:
        lg.flush()
    print(len(DESCRIPTORS), DESCRIPTORS.evictions, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
""")


@pytest.mark.integration
def test_restart_after_kill_9_of_a_process_whose_files_were_let_go(tmp_path, small_cache):
    data = tmp_path / "data"
    data.mkdir()
    proc = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(data)],
                          capture_output=True, text=True, timeout=120,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    held, evicted = map(int, proc.stdout.split())
    assert held <= 3 and evicted > 0
    cfg = TopicConfig(segment_bytes=2000)
    for p in range(10):   # every log's tail recovered (nothing was flushed for 5 of them)
        lg = Log(str(data / f"t-{p}"), "t", p, cfg, recovery_point=0)
        assert _values(lg) == [f"{p}:{rnd}".encode() * 20 for rnd in range(15)]
        lg.append(build_batch([b"after"]))
        lg.close()


def test_a_log_manager_sets_the_limit_and_a_broker_refuses_bad_values(tmp_path):
    old = DESCRIPTORS.limit
    lm = LogManager([str(tmp_path / "d")], TopicConfig(), 0, "c1", open_segment_files_max=5)
    try:
        lm.startup()
        assert DESCRIPTORS.limit == 5
    finally:
        lm.shutdown()
        DESCRIPTORS.configure(old)
    key = "samsa.log.open.segment.files.max"
    assert BrokerConfig.from_dict({key: "4000"}).samsa_log_open_segment_files_max == 4000
    assert BrokerConfig().samsa_log_open_segment_files_max == -1   # derived
    assert derived_limit() >= 64
    for bad in ("0", "-2", "many"):
        with pytest.raises(ConfigError, match=key):
            BrokerConfig.from_dict({key: bad})


def test_a_flush_between_an_append_and_its_write_still_syncs_it_once_let_go(tmp_path,
                                                                           monkeypatch):
    """The flusher thread runs between an append's start and its write (the
    GIL switched), then the cache lets the file go: the next flush must still
    sync the .log before the recovery point passes those bytes (it skipped
    it when a flag said the file had been synced since its last write)."""
    lg = Log(str(tmp_path / "t-0"), "t", 0, TopicConfig(file_delete_delay_ms=0))
    lg.append(build_batch([b"a"]))
    lg.flush()
    seg = lg.segments[-1]
    synced: list[str] = []
    monkeypatch.setattr(segment_module, "sync_file", lambda fd, path: synced.append(path))
    monkeypatch.setattr(segment_module, "sync_path", lambda path: synced.append(path))
    write = segment_module._pwritev

    def flush_first(fd, parts, pos):
        seg.flush()
        return write(fd, parts, pos)
    monkeypatch.setattr(segment_module, "_pwritev", flush_first)
    lg.append(build_batch([b"b"]))
    monkeypatch.setattr(segment_module, "_pwritev", write)
    synced.clear()
    seg.release_file()
    before = lg.recovery_point
    lg.flush()
    assert lg.recovery_point > before
    assert seg.log_path in synced


def test_a_retired_segment_let_go_reads_its_own_file_not_its_successors(tmp_path):
    """A reader holding a segment that retention retired (renamed .deleted)
    after the cache let its file go opens it again by the .deleted name and
    inode, not the new file a cleaner's swap or a truncation put at its name."""
    lg = Log(str(tmp_path / "t-0"), "t", 0, TopicConfig(file_delete_delay_ms=60_000))
    for i in range(5):
        lg.append(build_batch([f"old-{i}".encode() * 10]))
    lg.roll()
    lg.append(build_batch([b"x"]))
    old = lg.segments[0]
    old.read(0, 1 << 20)
    old.release_file()
    assert any(p.endswith(".log.deleted") for p in old.rename_to_deleted())
    with open(old.log_path, "wb") as f:
        f.write(bytes(build_batch([b"NEW-DATA" * 10])))
    region = old.read(0, 1 << 20)
    assert [r.value for r in iter_records(region.read_bytes())][0] == b"old-0" * 10
    os.unlink(old.log_path + ".deleted")   # and once its own file is gone: an error, not another's
    old.release_file()
    with pytest.raises(FileNotFoundError):
        old.read(0, 1 << 20).read_bytes()
