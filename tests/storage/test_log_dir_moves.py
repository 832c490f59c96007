"""Moving a partition's log to another log dir (AlterReplicaLogDirs, JBOD), as
Kafka does it: a ``-future`` copy in the destination, filled while the log
keeps taking appends, swapped in when caught up, found there after a restart."""
from __future__ import annotations

import logging
import os
import uuid

import pytest

import samsa.storage.manager
from samsa.config.topic import TopicConfig
from samsa.protocol.errors import ErrorCode
from samsa.storage.checkpoints import read_offset_checkpoint
from samsa.storage.cleaner import CLEANER_OFFSET_CHECKPOINT
from samsa.storage.errors import LogDirNotFoundError, StorageError
from samsa.storage.manager import LogManager
from tests.storage.helpers import batch_of
from tests.storage.test_cleaner import COMPACT, keyed_batch
from tests.support.waiting import wait_until

CFG = TopicConfig(segment_bytes=2000, file_delete_delay_ms=0)


@pytest.fixture
def dirs(tmp_path):
    return [str(tmp_path / "a"), str(tmp_path / "b")]


@pytest.fixture
def managers():
    made = []

    def factory(dirs, **kw):
        lm = LogManager(dirs, CFG, 0, "cid", log_cleaner_enable=False, **kw)
        made.append(lm)
        return lm

    yield factory
    for lm in made:
        if not lm._shut_down:
            lm.shutdown(clean=False)


def _batches(lg):
    """Every batch of the log, as bytes, by reading it front to back."""
    out, offset = [], lg.log_start_offset
    while offset < lg.log_end_offset:
        read = lg.read(offset, 1 << 20)
        data = b"".join(r.read_bytes() for r in read.regions)
        out.append(data)
        offset = _last_offset_after(data)
    return b"".join(out)


def _last_offset_after(data: bytes) -> int:
    pos = end = 0
    while pos < len(data):
        base = int.from_bytes(data[pos:pos + 8], "big")
        length = int.from_bytes(data[pos + 8:pos + 12], "big")
        last_delta = int.from_bytes(data[pos + 23:pos + 27], "big")
        end = base + last_delta + 1
        pos += 12 + length
    return end


def _filled(managers, dirs, batches=40, epoch=1):
    """A started manager with one log t-0 of ``batches`` 5-record batches:
    (manager, log, its dir, the other dir)."""
    lm = managers(dirs)
    lm.startup()
    lg = lm.create_log("t", 0, CFG)
    for _ in range(batches):
        lg.append(batch_of(5, size=50), leader_epoch=epoch)
    src = os.path.dirname(lg.dir)
    return lm, lg, src, next(d for d in dirs if d != src)


def _partition_dirs(d):
    return sorted(n for n in os.listdir(d) if n.startswith("t-"))


def test_move_copies_while_appending_then_swaps_and_survives_restart(dirs, managers):
    lm, lg, src, dst = _filled(managers, dirs, epoch=3)
    lg.update_high_watermark(lg.log_end_offset)
    assert len(lg.segments) > 3
    # slow enough that appends land while the copy is being made
    lm.move_bytes_per_second = 20000
    assert lm.alter_log_dir("t", 0, dst)
    wait_until(lambda: lm.future_logs_by_dir().get(dst), timeout=10)
    (future,) = lm.future_logs_by_dir()[dst]
    assert os.path.basename(future.dir).startswith("t-0.") and future.dir.endswith("-future")
    for _ in range(10):
        lg.append(batch_of(3, size=50), leader_epoch=4)
    lm.move_bytes_per_second = 10 ** 12
    before = _batches(lg)
    end = lg.log_end_offset
    wait_until(lambda: os.path.dirname(lg.dir) == dst, timeout=30)
    # the same Log object goes on, in the new dir, with every batch
    assert lm.get_log("t", 0) is lg and lg.log_end_offset == end
    assert _batches(lg) == before
    assert lm.logs_by_dir()[dst] == [lg] and lm.logs_by_dir()[src] == []
    assert not lm.future_logs_by_dir()
    assert [e for e, _ in lg.leader_epochs.entries] == [3, 4]
    lg.append(batch_of(2), leader_epoch=4)   # appends go to the new files
    wait_until(lambda: _partition_dirs(src) == [], timeout=10)
    assert _partition_dirs(dst) == ["t-0"]
    after = _batches(lg)
    lm.shutdown()
    lm2 = managers(dirs)
    lm2.startup()
    lg2 = lm2.get_log("t", 0)
    assert os.path.dirname(lg2.dir) == dst and _batches(lg2) == after


def test_errors_and_no_ops(dirs, managers, tmp_path):
    lm = managers(dirs)
    lm.startup()
    lg = lm.create_log("t", 0, CFG)
    lg.append(batch_of(1))
    here = os.path.dirname(lg.dir)
    assert lm.alter_log_dir("t", 0, here) and not lm.future_logs_by_dir()
    with pytest.raises(LogDirNotFoundError):
        lm.alter_log_dir("t", 0, str(tmp_path / "elsewhere"))
    with pytest.raises(LogDirNotFoundError):   # a log dir, but not as an absolute path
        lm.alter_log_dir("t", 0, os.path.relpath(here))
    # not held here: False, and the log is created in that dir when it comes
    other = next(d for d in dirs if d != here)
    assert lm.alter_log_dir("t", 1, here) is False
    assert os.path.dirname(lm.create_log("t", 1, CFG).dir) == here
    assert lm.alter_log_dir("u", 0, other) is False
    assert os.path.dirname(lm.create_log("u", 0, CFG).dir) == other
    os.rename(other, other + ".gone")   # as a disk that went away
    try:
        with pytest.raises(StorageError) as e:
            lm.alter_log_dir("t", 0, other)
        assert type(e.value) is StorageError and "offline" in str(e.value)
    finally:
        os.rename(other + ".gone", other)


def test_moving_back_cancels_a_move_and_removes_the_copy(dirs, managers):
    lm, lg, src, dst = _filled(managers, dirs)
    lm.move_bytes_per_second = 1000
    assert lm.alter_log_dir("t", 0, dst)
    wait_until(lambda: any(n.endswith("-future") for n in _partition_dirs(dst)))
    assert lm.alter_log_dir("t", 0, src)
    assert not lm.future_logs_by_dir()
    wait_until(lambda: _partition_dirs(dst) == [], timeout=10)
    assert os.path.dirname(lg.dir) == src and lg.log_end_offset == 200


def test_a_move_interrupted_by_a_stop_goes_on_after_it(dirs, managers):
    lm, lg, src, dst = _filled(managers, dirs)
    before = _batches(lg)
    lm.move_bytes_per_second = 3000
    assert lm.alter_log_dir("t", 0, dst)
    wait_until(lambda: lm.future_logs_by_dir()[dst][0].log_end_offset > 0)
    lm.shutdown()
    assert any(n.endswith("-future") for n in _partition_dirs(dst))
    lm2 = managers(dirs)
    lm2.startup()
    lg2 = lm2.get_log("t", 0)
    wait_until(lambda: os.path.dirname(lg2.dir) == dst, timeout=30)
    assert _batches(lg2) == before
    wait_until(lambda: _partition_dirs(src) == [], timeout=10)


def test_a_stop_between_the_renames_keeps_the_copy(dirs, managers):
    """The old directory is renamed for deletion before the copy takes the
    partition's name: a stop in between leaves only the complete copy, which
    the next start takes as the partition's log."""
    lm, lg, src, dst = _filled(managers, dirs, batches=10)
    before = _batches(lg)
    assert lm.alter_log_dir("t", 0, dst)
    wait_until(lambda: _partition_dirs(src) == [], what="the move")
    lm.shutdown()
    # the state between the two renames: the old one done, the copy not yet renamed
    future_name = "t-0." + "ab" * 16 + "-future"
    os.rename(os.path.join(dst, "t-0"), os.path.join(dst, future_name))
    assert _partition_dirs(src) == []
    lm2 = managers(dirs)
    lm2.startup()
    lg2 = lm2.get_log("t", 0)
    assert os.path.dirname(lg2.dir) == dst and _batches(lg2) == before
    assert _partition_dirs(dst) == ["t-0"]


def test_a_truncation_during_the_move_restarts_the_copy(dirs, managers, caplog):
    """A follower cut back to a divergence point mid-move: the copy holds
    batches the log no longer has, so it starts over rather than keep them."""
    caplog.set_level(logging.INFO, logger="samsa.storage.manager")
    lm, lg, src, dst = _filled(managers, dirs)
    # The swap waits for the cleaner (no pass half-way through the files it
    # replaces): held here, the move is certainly still in progress when the
    # log is truncated, however fast the copy goes.
    assert lm.cleaner.try_hold()
    try:
        assert lm.alter_log_dir("t", 0, dst)
        wait_until(lambda: lm.future_logs_by_dir()[dst][0].log_end_offset >= 20,
                   what="a partial copy")
        lg.truncate_to(10)
        for _ in range(5):
            lg.append(batch_of(4, size=70), leader_epoch=2)
        expected = _batches(lg)
        wait_until(lambda: "t-0: restarting its copy" in caplog.text, what="the copy restarted")
    finally:
        lm.cleaner.release()
    wait_until(lambda: _partition_dirs(src) == [], what="the move")
    assert os.path.dirname(lg.dir) == dst and lg.log_end_offset == 30
    assert _batches(lg) == expected
    assert lg.leader_epochs.entries == [(1, 0), (2, 10)]


def test_a_destination_that_goes_offline_stops_the_move(dirs, managers):
    lm, lg, src, dst = _filled(managers, dirs)
    lm.move_bytes_per_second = 2000
    assert lm.alter_log_dir("t", 0, dst)
    wait_until(lambda: lm.future_logs_by_dir().get(dst), what="the copy")
    os.rename(dst, dst + ".gone")   # as a disk that failed
    wait_until(lambda: not lm.future_logs_by_dir(), what="the move given up")
    assert os.path.dirname(lg.dir) == src and lg.log_end_offset == 200
    lg.append(batch_of(1))   # the partition goes on where it was
    assert lg.log_end_offset == 201


def test_the_copy_is_flushed_before_the_log_is_frozen_for_the_swap(dirs, managers):
    """The swap holds the log's append lock (produce to the partition waits,
    on the broker's event loop) while it closes the copy, and closing fsyncs
    what is not yet flushed: the copy's active segment, up to segment.bytes
    (1 GiB by default). That fsync is done before the freeze, so only the
    batches caught up under it are left."""
    lm = managers(dirs)
    lm.startup()
    big = TopicConfig(segment_bytes=1 << 30, file_delete_delay_ms=0)
    lg = lm.create_log("t", 0, big)
    for _ in range(40):
        lg.append(batch_of(5, size=50))
    dst = next(d for d in dirs if d != os.path.dirname(lg.dir))
    seen = []
    frozen = lg.frozen

    def probe():
        (future,) = lm.future_logs_by_dir()[dst]
        seen.append((future.recovery_point, future.log_end_offset))
        return frozen()
    lg.frozen = probe
    assert lm.alter_log_dir("t", 0, dst)
    wait_until(lambda: os.path.dirname(lg.dir) == dst, what="the move")
    assert seen == [(200, 200)]


def test_a_failed_swap_whose_roll_back_fails_keeps_the_copy_and_takes_the_dir_offline(
        dirs, managers, monkeypatch):
    """The copy cannot take the partition's name and the old directory cannot
    get its own back: the copy is the only complete log left under a name the
    next start reads, so it must stay; the source dir goes offline, its log
    answers KAFKA_STORAGE_ERROR, and the next start serves the log from the copy."""
    lm, lg, src, dst = _filled(managers, dirs)
    lg.update_high_watermark(lg.log_end_offset)
    lg.delete_records_before(60)
    before = _batches(lg)
    real_rename = os.rename

    def failing_rename(a, b):   # the disk refuses both renames back into place
        a, b = str(a), str(b)
        if b == os.path.join(dst, "t-0") or b == os.path.join(src, "t-0"):
            raise OSError(5, "Input/output error")
        return real_rename(a, b)
    monkeypatch.setattr(os, "rename", failing_rename)
    assert lm.alter_log_dir("t", 0, dst)
    wait_until(lambda: not lm.log_dir_online(src), what="the source dir going offline")
    monkeypatch.setattr(os, "rename", real_rename)
    assert not lm.future_logs_by_dir()
    assert [n for n in _partition_dirs(dst) if n.endswith("-future")]
    with pytest.raises(StorageError) as e:
        lg.append(batch_of(1))
    assert e.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    lm.shutdown()
    lm2 = managers(dirs)
    lm2.startup()
    lg2 = lm2.get_log("t", 0)
    assert os.path.dirname(lg2.dir) == dst and _batches(lg2) == before
    assert lg2.log_start_offset == 60
    wait_until(lambda: _partition_dirs(src) == [], what="the old directory deleted")


def test_a_stop_right_after_the_swap_keeps_the_log_start_and_high_watermark(dirs, managers,
                                                                           monkeypatch):
    """A stop after the swap's renames, before the checkpoints are next
    written: the moved log comes back with its DeleteRecords start and its
    high watermark, not its first segment's base and its end."""
    lm, lg, src, dst = _filled(managers, dirs)
    lg.update_high_watermark(150)
    lg.delete_records_before(60)
    lm.write_checkpoints()
    # the stop comes before any checkpoint is written after the swap
    monkeypatch.setattr(lm, "write_checkpoints", lambda *a, **kw: [])
    assert lm.alter_log_dir("t", 0, dst)
    wait_until(lambda: os.path.dirname(lg.dir) == dst, what="the move")
    lm.shutdown(clean=False)
    lm2 = managers(dirs)
    lm2.startup()
    lg2 = lm2.get_log("t", 0)
    assert os.path.dirname(lg2.dir) == dst
    assert (lg2.log_start_offset, lg2.high_watermark, lg2.log_end_offset) == (60, 150, 200)


def test_a_copy_that_cannot_be_created_is_a_storage_error_and_leaves_nothing(dirs, managers,
                                                                              monkeypatch):
    """A full disk while the copy's directory is made: the client is answered
    KAFKA_STORAGE_ERROR (a StorageError), and no half-made copy is left for
    the next start to resume a move the client was told failed."""
    lm = managers(dirs)
    lm.startup()
    lg = lm.create_log("t", 0, CFG, topic_id=uuid.uuid4())
    lg.append(batch_of(5))
    dst = next(d for d in dirs if d != os.path.dirname(lg.dir))

    def disk_full(path, topic_id):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(samsa.storage.manager, "write_partition_metadata", disk_full)
    with pytest.raises(StorageError) as e:
        lm.alter_log_dir("t", 0, dst)
    assert e.value.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert _partition_dirs(dst) == [] and not lm.future_logs_by_dir()
    lm.shutdown()
    lm2 = managers(dirs)
    lm2.startup()
    assert not lm2.future_logs_by_dir()


def test_the_cleaner_offset_of_a_moving_log_survives_a_checkpoint_of_its_dir(dirs, managers):
    """A log being moved is hidden from the cleaner; a cleaner checkpoint of
    its dir written meanwhile (another log cleaned) keeps its offset, so a
    cancelled move does not leave it to be cleaned all over again."""
    lm = managers(dirs)
    lm.startup()
    logs = {}
    for p in (0, 1):
        lg = lm.create_log("c", p, COMPACT)
        for i in range(300):
            lg.append(keyed_batch([(b"k%d" % (i % 5), b"v" * 100)]))
        lg.roll()
        lg.append(keyed_batch([(b"tail", b"x")]))
        logs[p] = lg
    # both in one dir: move c-1 out, so c-0 and c-1 share a dir
    src = os.path.dirname(logs[0].dir)
    if os.path.dirname(logs[1].dir) != src:
        assert lm.alter_log_dir("c", 1, src)
        wait_until(lambda: os.path.dirname(logs[1].dir) == src, what="c-1 with c-0")
    dst = next(d for d in dirs if d != src)
    assert set(lm.run_cleaner(force=True)) == {("c", 0), ("c", 1)}
    cleaned = lm.cleaner.first_dirty_offset("c", 1)
    assert cleaned
    lm.move_bytes_per_second = 1000
    assert lm.alter_log_dir("c", 1, dst)
    logs[0].append(keyed_batch([(b"k1", b"again")]))
    logs[0].roll()
    logs[0].append(keyed_batch([(b"tail", b"y")]))
    assert set(lm.run_cleaner(force=True)) == {("c", 0)}   # writes src's checkpoint
    assert lm.alter_log_dir("c", 1, src)   # the move called off
    checkpoint = read_offset_checkpoint(os.path.join(src, CLEANER_OFFSET_CHECKPOINT))
    assert checkpoint.get(("c", 1)) == cleaned
    assert lm.run_cleaner() == {}   # nothing of c-1 is dirty again
