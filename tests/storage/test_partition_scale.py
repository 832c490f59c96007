"""What keeps thousands of partitions cheap to create, restart and stop, and safe.

- A partition created here (its directory new) skips the load (no listing, no
  checkpoint, no snapshot, no scan) and leaves the same files as a load does.
- A partition's index files are made by its segment's first append (by the log
  manager's scheduler) or its roll or close, holding exactly their entries, and
  grown to their preallocated size once entries are written to them: one
  nobody writes to has none (and no producer snapshot), through clean and
  unclean restarts, and reads and recovers as an empty log; one with a few
  small batches has its stop write the time index's closing entry, no more.
- A restart does not rewrite a leader-epoch-checkpoint that already holds what
  the leader assigns; the truncation a load makes is written before the log grows,
  so a crash after new appends still finds the right epochs.
"""
from __future__ import annotations

import os
import uuid

from samsa.config.topic import TopicConfig
from samsa.storage.checkpoints import (LEADER_EPOCH_CHECKPOINT, read_leader_epoch_checkpoint,
                                       read_offset_checkpoint, read_partition_metadata,
                                       write_leader_epoch_checkpoint)
from samsa.storage.log import Log
from samsa.storage.manager import LogManager
from tests.storage.helpers import batch_of

CFG = TopicConfig(file_delete_delay_ms=0)


def listing(d):
    return sorted((n, os.path.getsize(os.path.join(d, n))) for n in os.listdir(d))


def test_a_new_partition_leaves_the_files_a_load_does(tmp_path):
    lm = LogManager(str(tmp_path / "a"), CFG, 1, "c")
    lm.startup()
    try:
        tid = uuid.uuid4()
        created = lm.create_log("t", 0, config=CFG, topic_id=tid)
        os.makedirs(tmp_path / "b" / "t-0")
        loaded = Log(str(tmp_path / "b" / "t-0"), "t", 0, CFG, topic_id=tid)
        assert "partition.metadata" in os.listdir(created.dir)
        assert [f for f in listing(created.dir) if f[0] != "partition.metadata"] \
            == listing(loaded.dir)
        for lg in (created, loaded):
            assert (lg.log_end_offset, lg.log_start_offset, lg.high_watermark) == (0, 0, 0)
            lg.begin_leader_epoch(0)
            assert lg.append(batch_of(3), 0).first_offset == 0
            assert lg.append(batch_of(2), 0).first_offset == 3
        loaded.close()
    finally:
        lm.shutdown()
    reopened = Log(created.dir, "t", 0, CFG)
    try:
        assert reopened.log_end_offset == 5
        assert read_partition_metadata(reopened.dir) == tid
        assert reopened.leader_epochs.entries == [(0, 0)]
    finally:
        reopened.close()


def test_an_existing_directory_is_loaded_not_recreated(tmp_path):
    lm = LogManager(str(tmp_path), CFG, 1, "c")
    lm.startup()
    lg = lm.create_log("t", 0, config=CFG)
    lg.append(batch_of(4), 0)
    lm.shutdown()
    lm = LogManager(str(tmp_path), CFG, 1, "c")
    # not started: create_log finds the directory (as after a failed load) and loads it
    try:
        assert lm.create_log("t", 0, config=CFG).log_end_offset == 4
    finally:
        lm.shutdown()


def test_restarting_an_empty_led_partition_writes_no_epoch_file(make_log):
    lg = make_log()
    lg.begin_leader_epoch(0)
    lg.close()
    path = os.path.join(lg.dir, LEADER_EPOCH_CHECKPOINT)
    before = os.stat(path)
    lg = make_log()
    # the load drops the epoch starting at the (empty) log's end, in memory
    assert lg.leader_epochs.entries == []
    lg.begin_leader_epoch(0)
    assert lg.leader_epochs.entries == [(0, 0)]
    after = os.stat(path)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert lg.append(batch_of(2), 0).last_offset == 1
    assert read_leader_epoch_checkpoint(path) == [(0, 0)]


def test_a_deferred_epoch_truncation_is_on_disk_before_the_log_grows(make_log):
    """A crash left an epoch on disk beyond the log's end (its batches torn off);
    the restarted log appends more of the old epoch, then is killed: the epoch
    beyond the old end must not come back as if it began inside the new data."""
    lg = make_log()
    lg.begin_leader_epoch(0)
    lg.append(batch_of(3), 0)
    lg.close()
    path = os.path.join(lg.dir, LEADER_EPOCH_CHECKPOINT)
    write_leader_epoch_checkpoint(path, [(0, 0), (1, 5)])   # epoch 1's data never landed

    lg = make_log(clean_shutdown=False)
    assert lg.leader_epochs.entries == [(0, 0)]
    lg.append(batch_of(7), 0)                                 # offsets 3..9, epoch 0
    assert read_leader_epoch_checkpoint(path) == [(0, 0)]
    lg.close_handles(trim=False)                              # kill -9
    lg.closed = True

    again = make_log(clean_shutdown=False)
    assert again.log_end_offset == 10
    assert again.leader_epochs.entries == [(0, 0)]
    assert again.end_offset_for_epoch(0) == (0, 10)


def test_a_clean_stop_of_many_partitions_checkpoints_only_what_is_durable(tmp_path):
    """The stop closes every log in one durable batch: each log's recovery point
    (in the checkpoint) is its end only because the batch made it durable, each
    has its producer snapshot, and the next start needs no recovery."""
    n = 300   # above the batch's syncfs threshold
    lm = LogManager(str(tmp_path), CFG, 1, "c", flush_check_interval_ms=3600_000)
    lm.startup()
    for p in range(n):
        lg = lm.create_log("t", p, config=CFG)
        lg.begin_leader_epoch(0)
        lg.append(batch_of(1 + p % 3, producer_id=p, producer_epoch=0, base_sequence=0), 0)
    assert lm.shutdown() == []
    assert os.path.exists(tmp_path / ".kafka_cleanshutdown")
    points = read_offset_checkpoint(str(tmp_path / "recovery-point-offset-checkpoint"))
    assert points == {("t", p): 1 + p % 3 for p in range(n)}
    snap = tmp_path / "t-7" / f"{2:020d}.snapshot"
    assert snap.is_file()
    before = os.stat(snap)

    lm = LogManager(str(tmp_path), CFG, 1, "c")
    lm.startup()
    try:
        for p in range(n):
            lg = lm.get_log("t", p)
            assert lg.log_end_offset == 1 + p % 3
            assert p in lg.producer_state.producers
        # a producer retrying its batch after the restart is told it is a duplicate
        dup = lm.get_log("t", 7).append(
            batch_of(2, producer_id=7, producer_epoch=0, base_sequence=0), 0)
        assert dup.duplicate
    finally:
        assert lm.shutdown() == []
    after = os.stat(snap)   # nothing new in t-7: its snapshot was not written again
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_failed_durable_batch_leaves_the_epoch_file_to_be_written_again(tmp_path, monkeypatch):
    """Inside a durable batch the leader-epoch file holds new entries only once the
    batch commits; if the barrier fails, a later write of the same entries must not be
    skipped as if the file already held them."""
    import pytest

    from samsa.storage import checkpoints
    from samsa.storage.leader_epoch import LeaderEpochCache
    cache = LeaderEpochCache(str(tmp_path))
    cache.assign(0, 0)
    path = str(tmp_path / LEADER_EPOCH_CHECKPOINT)

    def barrier_fails(*args, **kwargs):
        raise OSError(5, "Input/output error")
    with monkeypatch.context() as m:
        m.setattr(checkpoints, "_sync_all", barrier_fails)
        with pytest.raises(OSError):
            with checkpoints.durable_batch():
                cache.assign(1, 5)
    assert read_leader_epoch_checkpoint(path) == [(0, 0)]
    cache.truncate_from_end(5, defer_flush=True)  # a load's truncation, deferred
    cache.assign(1, 5)
    assert read_leader_epoch_checkpoint(path) == [(0, 0), (1, 5)]


def test_a_clean_stop_syncs_every_file_of_every_log_before_the_recovery_points_move(
        tmp_path, monkeypatch):
    """A kill -9 keeps the page cache, so only this can catch a file left out of the
    stop's barrier: every segment, index, time index and producer snapshot of each
    closed log is made durable before the recovery points are checkpointed."""
    from samsa.storage import checkpoints
    n = 6   # below the syncfs threshold: each file is fsynced by name
    lm = LogManager(str(tmp_path), CFG, 1, "c", flush_check_interval_ms=3600_000)
    lm.startup()
    for p in range(n):
        lg = lm.create_log("t", p, config=CFG)
        lg.begin_leader_epoch(0)
        lg.append(batch_of(2, producer_id=p, producer_epoch=0, base_sequence=0), 0)
    synced: set[str] = set()
    checkpoint = str(tmp_path / "recovery-point-offset-checkpoint")
    points_at_sync: list[dict] = []
    real_sync_all = checkpoints._sync_all

    def recording(files, dirs, missing_ok=frozenset()):
        synced.update(os.path.realpath(f) for f in files)
        points_at_sync.append(read_offset_checkpoint(checkpoint) if os.path.exists(checkpoint)
                              else {})
        return real_sync_all(files, dirs, missing_ok)
    monkeypatch.setattr(checkpoints, "_sync_all", recording)
    assert lm.shutdown() == []
    for p in range(n):
        d = tmp_path / f"t-{p}"
        wanted = {os.path.realpath(d / name) for name in os.listdir(d)
                  if name.endswith((".log", ".index", ".timeindex", ".snapshot"))}
        # (a snapshot new in a batch is written in place: write_checked_file; one
        # replacing a file there already, through its temporary file <name>.<n>.tmp)
        missing = {f for f in wanted if f not in synced and not any(
            s.startswith(f + ".") and s.endswith(".tmp") for s in synced)}
        assert any(f.endswith(".snapshot") for f in wanted) and not missing, (p, sorted(missing))
    # the logs' barrier came first: no recovery point had moved to the ends then
    assert points_at_sync and all(pts.get(("t", p), 0) < 2
                                  for pts in points_at_sync[:1] for p in range(n))
    assert read_offset_checkpoint(checkpoint) == {("t", p): 2 for p in range(n)}


def _written_logs(tmp_path, n: int, **kw) -> LogManager:
    lm = LogManager(str(tmp_path), CFG, 1, "c", flush_check_interval_ms=3600_000, **kw)
    lm.startup()
    for p in range(n):
        lg = lm.create_log("t", p, config=CFG)
        lg.begin_leader_epoch(0)
        lg.append(batch_of(2, producer_id=p, producer_epoch=0, base_sequence=0), 0)
    return lm


def test_a_stop_closing_logs_on_several_threads_makes_them_all_durable_in_its_one_barrier(
        tmp_path, monkeypatch):
    """close_threads_per_dir workers close a dir's logs side by side, each inside
    the stop's one durable batch: every worker's files (segments, indexes,
    snapshots) are synced by the barrier before any recovery point is
    checkpointed, and the next start is clean and finds every producer."""
    import threading

    from samsa.storage import checkpoints, manager
    monkeypatch.setattr(manager, "_CLOSES_PER_WORKER", 1)
    n = 6
    lm = _written_logs(tmp_path, n, close_threads_per_dir=3)
    closers: set[str] = set()
    real_close = Log.close

    def close(self):
        closers.add(threading.current_thread().name)
        real_close(self)
    monkeypatch.setattr(Log, "close", close)
    synced: set[str] = set()
    checkpoint = str(tmp_path / "recovery-point-offset-checkpoint")
    real_sync_all = checkpoints._sync_all

    def recording(files, dirs, missing_ok=frozenset()):
        if not os.path.exists(checkpoint) or not read_offset_checkpoint(checkpoint):
            synced.update(os.path.realpath(f) for f in files)
        return real_sync_all(files, dirs, missing_ok)
    monkeypatch.setattr(checkpoints, "_sync_all", recording)
    assert lm.shutdown() == []
    assert len(closers) == 3   # (two workers and the stopping thread)
    for p in range(n):
        d = tmp_path / f"t-{p}"
        wanted = {os.path.realpath(d / name) for name in os.listdir(d)
                  if name.endswith((".log", ".index", ".timeindex", ".snapshot"))}
        assert len(wanted) == 4 and wanted <= synced, (p, sorted(wanted - synced))
        assert not [name for name in os.listdir(d) if name.endswith(".tmp")]
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    monkeypatch.undo()
    lm = LogManager(str(tmp_path), CFG, 1, "c")
    lm.startup()
    try:
        assert all(lm.get_log("t", p).log_end_offset == 2
                   and p in lm.get_log("t", p).producer_state.producers for p in range(n))
    finally:
        assert lm.shutdown() == []


def test_a_stop_whose_barrier_fails_vouches_for_nothing(tmp_path, monkeypatch):
    """The logs' barrier failing (an IO error making them durable): the stop
    reports it, no recovery point moves past what was flushed before, and no
    clean-shutdown marker is written, so the next start recovers every log."""
    from samsa.storage import checkpoints, manager
    monkeypatch.setattr(manager, "_CLOSES_PER_WORKER", 1)
    lm = _written_logs(tmp_path, 4, close_threads_per_dir=2)

    def barrier_fails(*args, **kwargs):
        raise OSError(5, "Input/output error")
    with monkeypatch.context() as m:
        m.setattr(checkpoints, "_sync_all", barrier_fails)
        failures = lm.shutdown()
    assert failures and "Input/output error" in " ".join(failures)
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    points = read_offset_checkpoint(str(tmp_path / "recovery-point-offset-checkpoint"))
    assert all(v == 0 for v in points.values())
    lm = LogManager(str(tmp_path), CFG, 1, "c")
    lm.startup()   # unclean: recovered, the records are there
    try:
        assert all(lm.get_log("t", p).log_end_offset == 2 for p in range(4))
    finally:
        assert lm.shutdown() == []


def test_a_snapshot_a_crash_cut_short_is_skipped_deleted_and_written_again(tmp_path):
    """A stop writes each new producer snapshot in place (as Kafka does), so a
    crash before its barrier may leave one cut short: the next load skips it
    (the producers come from the segments), deletes it as Kafka's does, and
    the next clean stop writes a whole one at that offset again."""
    lm = _written_logs(tmp_path, 1)
    assert lm.shutdown() == []
    snap = tmp_path / "t-0" / f"{2:020d}.snapshot"
    whole = snap.read_bytes()
    snap.write_bytes(whole[:-3])
    os.unlink(tmp_path / ".kafka_cleanshutdown")   # the crash: no marker
    lm = LogManager(str(tmp_path), CFG, 1, "c")
    lm.startup()
    try:
        lg = lm.get_log("t", 0)
        lg.load()
        assert 0 in lg.producer_state.producers and not snap.exists()
    finally:
        assert lm.shutdown() == []
    assert snap.read_bytes() == whole


def test_index_files_come_with_the_first_append_and_an_idle_log_never_has_them(tmp_path):
    d = str(tmp_path / "t-0")
    os.makedirs(d)
    lg = Log(d, "t", 0, CFG)
    index_files = ("00000000000000000000.index", "00000000000000000000.timeindex")

    def present() -> list[str]:
        return [n for n in index_files if n in os.listdir(d)]

    assert present() == [] and "00000000000000000000.log" in os.listdir(d)
    lg.close()                               # clean stop: nor a producer snapshot, as Kafka
    assert not [n for n in os.listdir(d) if n.endswith(".snapshot")]
    lg = Log(d, "t", 0, CFG)
    assert present() == [] and lg.log_end_offset == 0
    lg.close()
    lg = Log(d, "t", 0, CFG, clean_shutdown=False)   # after a kill -9: recovered, still none
    assert present() == [] and lg.log_end_offset == 0
    assert lg.read(0, 1024).regions == []
    assert lg.append(batch_of(3), 0).first_offset == 0
    # (made at once here: a Log of its own runs its scheduler's tasks in place)
    assert [os.path.getsize(os.path.join(d, n)) for n in index_files] == [0, 0]
    lg.close()                               # the time index's closing entry, as Kafka's
    assert [os.path.getsize(os.path.join(d, n)) for n in index_files] == [0, 12]
    reopened = Log(d, "t", 0, CFG)
    try:
        assert reopened.log_end_offset == 3 and reopened.segments[0].time_index.entries == 1
        for _ in range(520):   # 4 KiB of index entries: written out, the files grown
            reopened.append(batch_of(1, size=5000), 0)
        assert os.path.getsize(os.path.join(d, index_files[0])) == CFG.segment_index_bytes
    finally:
        reopened.close()
    assert os.path.getsize(os.path.join(d, index_files[0])) == 8 * reopened.segments[0].offset_index.entries


def test_a_first_append_leaves_the_index_files_to_the_scheduler_or_the_stop(tmp_path, monkeypatch):
    """Creating two files costs a produce a millisecond or two: a first append
    under a LogManager returns before they exist, the scheduler makes them
    (empty: nothing to preallocate and trim again), and a stop that comes
    first makes them itself - for every log written just before it (their
    closes side by side: a stop owing many closes on a worker per CPU), so
    each active segment holding records has both files (Kafka's loader
    recovers a segment whose offset index is missing) and the restart is
    clean, recovers nothing and rewrites none of them."""
    import threading

    from samsa.storage import manager
    from tests.support.waiting import wait_until
    monkeypatch.setattr(manager, "_CLOSES_PER_WORKER", 2)
    lm = LogManager(str(tmp_path), CFG, 1, "c")
    lm.startup()
    busy = threading.Event()
    lm._scheduler.schedule(busy.wait, 0)   # the scheduler is held up
    a = lm.create_log("t", 0, config=CFG)
    a.append(batch_of(3), 0)
    index = os.path.join(a.dir, "00000000000000000000.index")
    assert not os.path.exists(index)
    busy.set()
    wait_until(lambda: os.path.exists(index), 10, "a's index made")

    lm._scheduler.schedule(busy.clear, 0)
    wait_until(lambda: not busy.is_set(), 10, "the scheduler reset the event")
    lm._scheduler.schedule(busy.wait, 0)   # held up again, and then stopped
    written = [lm.create_log("t", p, config=CFG) for p in range(1, 9)]
    idle = lm.create_log("t", 9, config=CFG)
    for lg in written:
        lg.append(batch_of(3), 0)
    lm._scheduler.stop()
    busy.set()
    logs = [(("t", lg.partition), lg, str(tmp_path)) for lg in [a, *written, idle]]
    cpus = os.cpu_count() or 1
    assert lm._close_workers_per_dir(logs) == max(cpus, lm.close_threads_per_dir)
    assert lm._close_workers_per_dir(logs[-1:]) == lm.close_threads_per_dir  # owes none
    assert lm.shutdown() == []
    names = ("00000000000000000000.index", "00000000000000000000.timeindex")
    paths = [os.path.join(lg.dir, n) for lg in written for n in names]
    assert [os.path.getsize(p) for p in paths] == [0, 12] * len(written)
    assert not [n for n in os.listdir(idle.dir) if n in names]   # no records: no files
    assert (tmp_path / ".kafka_cleanshutdown").exists()
    points = read_offset_checkpoint(str(tmp_path / "recovery-point-offset-checkpoint"))
    assert {p: v for (_, p), v in points.items()} == {**{p: 3 for p in range(9)}, 9: 0}

    def stamps():
        return [(s.st_ino, s.st_mtime_ns, s.st_size) for s in map(os.stat, paths)]
    before = stamps()
    lm = LogManager(str(tmp_path), CFG, 1, "c")
    lm.startup()
    try:
        for p in range(1, 9):
            lg = lm.get_log("t", p)
            assert lg.log_end_offset == 3 and lg.recovery_point == 3
            assert lg.read(0, 1 << 20).regions
        assert stamps() == before
    finally:
        assert lm.shutdown() == []


def test_a_restart_and_a_kill_of_an_idle_partition_rewrite_none_of_its_index_files(make_log):
    """Stopped cleanly (indexes trimmed), restarted, killed, restarted: neither the
    reopen (no preallocation until entries are written) nor the recovery (the
    files hold what it rebuilds, the time index's closing entry included)
    touches the index files, and the log still reads and appends right."""
    lg = make_log()
    lg.append(batch_of(3), 0)
    lg.close()
    seg = lg.segments[0]
    paths = (seg.index_path, seg.time_index_path)

    def stamps():
        return [(s.st_ino, s.st_mtime_ns, s.st_size) for s in map(os.stat, paths)]
    before = stamps()
    assert [b[2] for b in before] == [0, 12]
    lg = make_log()
    assert stamps() == before
    lg.close_handles(trim=False)   # kill -9
    lg.closed = True
    lg = make_log(clean_shutdown=False)
    assert stamps() == before
    assert lg.log_end_offset == 3 and lg.segments[0].time_index.entries == 1
    assert lg.append(batch_of(2), 0).first_offset == 3
    lg.close()
    reopened = make_log()
    assert reopened.log_end_offset == 5
    assert reopened.read(0, 1 << 20).regions


def test_a_topic_created_in_one_batch_writes_its_new_files_in_place_and_syncs_them(
        tmp_path, monkeypatch):
    """In a directory the batch made, partition.metadata and leader-epoch-checkpoint
    are written in place (no temporary file, no rename), in Kafka's bytes, and the
    batch's barrier makes each of them and their directory durable; outside a
    batch (a partition added alone) the same files come through a rename."""
    from samsa.storage import checkpoints
    synced: set[str] = set()
    real_sync_all = checkpoints._sync_all

    def recording(files, dirs, missing_ok=frozenset()):
        synced.update(files)
        synced.update(dirs)
        return real_sync_all(files, dirs, missing_ok)
    monkeypatch.setattr(checkpoints, "_sync_all", recording)
    lm = LogManager(str(tmp_path), CFG, 1, "c")
    lm.startup()
    tid = uuid.uuid4()
    try:
        with checkpoints.durable_batch():
            for p in range(3):
                lm.create_log("t", p, config=CFG, topic_id=tid).begin_leader_epoch(4)
        for p in range(3):
            d = tmp_path / f"t-{p}"
            assert sorted(os.listdir(d)) == ["00000000000000000000.log", LEADER_EPOCH_CHECKPOINT,
                                             "partition.metadata"]
            assert (d / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n1\n4 0\n"
            assert (d / "partition.metadata").read_text() == \
                f"version: 0\ntopic_id: {checkpoints.topic_id_to_str(tid)}"
            assert {str(d), str(d / LEADER_EPOCH_CHECKPOINT), str(d / "partition.metadata")} \
                <= synced
        alone = lm.create_log("t", 3, config=CFG, topic_id=tid)
        alone.begin_leader_epoch(4)
        assert read_partition_metadata(alone.dir) == tid
        assert read_leader_epoch_checkpoint(os.path.join(alone.dir, LEADER_EPOCH_CHECKPOINT)) \
            == [(4, 0)]
    finally:
        lm.shutdown()


def test_the_collector_comes_back_after_the_last_pause_only_if_it_was_on():
    import gc

    from samsa.storage.gc_pause import gc_paused
    assert gc.isenabled()
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_stop_keeps_the_two_newest_snapshots_without_listing_or_looking_for_them(
        tmp_path, monkeypatch):
    """The snapshot files a log has are known since its load (a new partition:
    none), as Kafka's producer state manager knows them: a stop writes the one
    at the log end and deletes all but the two newest without listing any
    partition directory or looking up any snapshot's name (with 10,000
    partitions, 10,000 listings and 10,000 lookups of missing names were a
    third of the stop); what is on disk after it is what a listing would
    have left."""
    n = 4
    lm = _written_logs(tmp_path, n)
    for p in range(n):
        lg = lm.get_log("t", p)
        for seq in (2, 4):   # two rolls: snapshots at 2 and 4, then records up to 6
            lg.roll()
            lg.append(batch_of(2, producer_id=p, producer_epoch=0, base_sequence=seq), 0)
    # a log loaded from its directory (a restart) knows its snapshots from the load's listing
    d = tmp_path / "loaded-0"
    os.makedirs(d)
    loaded = Log(str(d), "loaded", 0, CFG)
    loaded.begin_leader_epoch(0)
    for seq in (0, 2):
        loaded.append(batch_of(2, producer_id=9, producer_epoch=0, base_sequence=seq), 0)
        loaded.roll()
    loaded.close()
    loaded = Log(str(d), "loaded", 0, CFG)
    loaded.append(batch_of(2, producer_id=9, producer_epoch=0, base_sequence=4), 0)
    listed: list[str] = []
    looked_up: list[str] = []
    real_listdir, real_stat = os.listdir, os.stat

    def listdir(path="."):
        listed.append(os.fspath(path))
        return real_listdir(path)

    def stat(path, *a, **kw):
        if isinstance(path, (str, os.PathLike)) and os.fspath(path).endswith(".snapshot"):
            looked_up.append(os.fspath(path))
        return real_stat(path, *a, **kw)
    with monkeypatch.context() as m:
        m.setattr(os, "listdir", listdir)
        m.setattr(os, "stat", stat)
        assert lm.shutdown() == []
        loaded.close()
    partition_dirs = {str(tmp_path / f"t-{p}") for p in range(n)} | {str(d)}
    assert not [p for p in listed if os.path.realpath(p) in partition_dirs]
    assert looked_up == []
    for p in range(n):
        assert sorted(x for x in os.listdir(tmp_path / f"t-{p}") if x.endswith(".snapshot")) \
            == [f"{4:020d}.snapshot", f"{6:020d}.snapshot"]
    assert sorted(x for x in os.listdir(d) if x.endswith(".snapshot")) \
        == [f"{4:020d}.snapshot", f"{6:020d}.snapshot"]
    reopened = Log(str(d), "loaded", 0, CFG)
    try:
        assert reopened.log_end_offset == 6 and 9 in reopened.producer_state.producers
    finally:
        reopened.close()


def _snapshots(d):
    return sorted(x for x in os.listdir(d) if x.endswith(".snapshot"))


def test_a_clean_stop_writes_no_snapshot_for_a_log_without_producers_and_the_restart_has_none(
        tmp_path):
    """A log written by producers without idempotence has no producer state: its
    clean stop writes no snapshot (10,000 such partitions: 10,000 file creations
    a stop saved), and the clean start that finds none has no producers, as
    Kafka's loader reads a clean log dir without snapshots. A log with a
    producer keeps its snapshot and its duplicates. After a crash, no snapshot
    is no proof of no producers: that start reads them from the segments."""
    lm = LogManager(str(tmp_path), CFG, 1, "c", flush_check_interval_ms=3600_000)
    lm.startup()
    plain, idem = lm.create_log("t", 0, config=CFG), lm.create_log("t", 1, config=CFG)
    for lg in (plain, idem):
        lg.begin_leader_epoch(0)
    plain.append(batch_of(3), 0)
    idem.append(batch_of(2, producer_id=7, producer_epoch=0, base_sequence=0), 0)
    assert lm.shutdown() == []
    assert os.path.exists(tmp_path / ".kafka_cleanshutdown")
    assert _snapshots(tmp_path / "t-0") == []
    assert _snapshots(tmp_path / "t-1") == [f"{2:020d}.snapshot"]

    lm = LogManager(str(tmp_path), CFG, 1, "c")
    lm.startup()
    plain, idem = lm.get_log("t", 0), lm.get_log("t", 1)
    assert plain.log_end_offset == 3 and plain.producer_state.producers == {}
    assert idem.append(batch_of(2, producer_id=7, producer_epoch=0, base_sequence=0), 0).duplicate
    # the plain log takes an idempotent producer now, then the broker crashes
    plain.append(batch_of(1, producer_id=8, producer_epoch=0, base_sequence=0), 0)
    lm.shutdown(clean=False)
    assert not os.path.exists(tmp_path / ".kafka_cleanshutdown")

    lm = LogManager(str(tmp_path), CFG, 1, "c")
    lm.startup()
    try:
        plain = lm.get_log("t", 0)
        assert 8 in plain.producer_state.producers
        assert plain.append(batch_of(1, producer_id=8, producer_epoch=0, base_sequence=0),
                            0).duplicate
    finally:
        assert lm.shutdown() == []
    # a log with producers now: its clean stop writes the snapshot
    assert _snapshots(tmp_path / "t-0") == [f"{4:020d}.snapshot"]
