"""Logs loaded on first use (storage/lazy_log.py): a start reads no partition
directory; what a log holds is right whoever loads it first, and a stop, clean
or not, at any point of the loading loses nothing."""
from __future__ import annotations

import os
import threading
import uuid

import pytest

from samsa.config.topic import TopicConfig
from samsa.protocol.records import iter_batch_headers
from samsa.storage.checkpoints import CLEAN_SHUTDOWN_MARKER, read_partition_metadata
from samsa.storage.errors import StorageError
from samsa.storage.manager import LogManager
from tests.storage.helpers import batch_of
from tests.support.waiting import wait_until

CFG = TopicConfig(segment_bytes=1000, file_delete_delay_ms=0)
CHECKPOINTS = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
               "replication-offset-checkpoint")


@pytest.fixture
def managers():
    made = []

    def factory(d):
        lm = LogManager([d], CFG, 0, "cid", log_cleaner_enable=False)
        made.append(lm)
        lm.startup()
        return lm

    yield factory
    for lm in made:
        if not lm._shut_down:
            lm.shutdown(clean=False)


def _fill(lm, partitions=3, batches=7, tid=None):
    """``batches`` batches of 2 records in each partition of topic t; the
    high watermark at the end (as a leader alone has it)."""
    for p in range(partitions):
        lg = lm.create_log("t", p, CFG, tid)
        for _ in range(batches):
            lg.append(batch_of(2, size=60))
        lg.update_high_watermark(lg.log_end_offset)


def _offsets(lg, start=0):
    """(base, last) of every batch from ``start``, read back through the log."""
    out = []
    off = start
    while off < lg.log_end_offset:
        rr = lg.read(off, 1 << 20, max_offset=lg.log_end_offset)
        data = b"".join(r.read_bytes() for r in rr.regions)
        hs = [(h.base_offset, h.last_offset) for _, h in iter_batch_headers(data)]
        out += hs
        off = hs[-1][1] + 1
    return out


def test_a_clean_start_loads_a_log_on_its_first_use_with_everything_in_place(tmp_path, managers):
    d = str(tmp_path / "d")
    lm = managers(d)
    _fill(lm)
    lm.get_log("t", 1).delete_records_before(4)
    lm.shutdown()

    lm = managers(d)
    logs = [lm.get_log("t", p) for p in range(3)]
    assert not any(lg.loaded for lg in logs)
    # what a leader's take-up and Metadata read, without a load
    assert [lg.log_end_offset for lg in logs] == [14, 14, 14]
    assert [lg.high_watermark for lg in logs] == [14, 14, 14]
    assert [lg.log_start_offset for lg in logs] == [0, 4, 0]
    logs[0].begin_leader_epoch(3)
    assert not any(lg.loaded for lg in logs)

    assert logs[0].append(batch_of(1)).first_offset == 14
    assert logs[0].loaded and logs[0].leader_epochs.entries[-1] == (3, 14)
    assert _offsets(logs[1], 4) == [(4, 5), (6, 7), (8, 9), (10, 11), (12, 13)]
    assert logs[1].loaded and not logs[2].loaded
    assert logs[2].read(0, 1 << 20, max_offset=14).regions   # old data, first use a read


def test_the_background_pass_loads_the_rest_and_nothing_changes_on_disk(tmp_path, managers):
    d = str(tmp_path / "d")
    lm = managers(d)
    _fill(lm, partitions=5)
    lm.shutdown()
    before = {name: open(os.path.join(d, name)).read() for name in CHECKPOINTS}

    lm = managers(d)
    assert lm.write_checkpoints() == []   # unloaded logs keep the entries read at the start
    assert {name: open(os.path.join(d, name)).read() for name in CHECKPOINTS} == before
    lm.start_background_load()
    wait_until(lambda: all(lg.loaded for lg in lm.all_logs().values()), 30, "every log loaded")
    assert [lm.get_log("t", p).log_end_offset for p in range(5)] == [14] * 5
    assert lm.get_log("t", 4).append(batch_of(1)).first_offset == 14


def _tear_tail(d, p):
    """Garbage after the last batch of t-``p``'s active segment, as a crash mid-write leaves."""
    seg = sorted(f for f in os.listdir(os.path.join(d, f"t-{p}")) if f.endswith(".log"))[-1]
    with open(os.path.join(d, f"t-{p}", seg), "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x0e\x00\x00\x01\x00garbage")


def test_after_an_unclean_stop_a_log_is_recovered_before_its_first_use(tmp_path, managers):
    d = str(tmp_path / "d")
    lm = managers(d)
    _fill(lm)
    lm.shutdown(clean=False)   # (as kill -9 leaves it)
    for p in range(3):
        _tear_tail(d, p)

    lm = managers(d)
    assert not any(lg.loaded for lg in lm.all_logs().values())
    assert lm.get_log("t", 0).append(batch_of(1)).first_offset == 14
    assert lm.get_log("t", 1).log_end_offset == 14   # (no end known unloaded: a load)
    assert _offsets(lm.get_log("t", 2))[-1] == (12, 13)


def test_a_stop_before_every_log_is_recovered_leaves_the_next_start_to_recover(tmp_path,
                                                                              managers):
    d = str(tmp_path / "d")
    lm = managers(d)
    _fill(lm)
    lm.shutdown(clean=False)
    _tear_tail(d, 2)

    lm = managers(d)
    lm.get_log("t", 0).append(batch_of(1))
    assert lm.shutdown() == []
    assert not os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_MARKER))   # t-2 not recovered yet

    lm = managers(d)
    assert lm.get_log("t", 2).append(batch_of(1)).first_offset == 14
    assert lm.get_log("t", 0).log_end_offset == 15
    lm.start_background_load()   # t-1 too: all recovered, so the stop is clean
    wait_until(lambda: all(lg.loaded for lg in lm.all_logs().values()), 30, "every log loaded")
    assert lm.shutdown() == []
    assert os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_MARKER))


def test_a_crash_while_logs_load_loses_no_record(tmp_path, managers):
    d = str(tmp_path / "d")
    lm = managers(d)
    _fill(lm, partitions=6)
    lm.shutdown()

    lm = managers(d)
    for p in (0, 2, 4):   # half loaded, then a crash
        lm.get_log("t", p).append(batch_of(1))
    lm.write_checkpoints()
    lm.shutdown(clean=False)

    lm = managers(d)
    assert [lm.get_log("t", p).log_end_offset for p in range(6)] == [15, 14] * 3
    assert [_offsets(lm.get_log("t", p))[-1][1] for p in range(6)] == [14, 13] * 3


def test_a_topic_id_claimed_before_the_load_is_checked_against_partition_metadata(tmp_path,
                                                                                  managers):
    d = str(tmp_path / "d")
    old, new = uuid.uuid4(), uuid.uuid4()
    lm = managers(d)
    _fill(lm, partitions=2, tid=old)
    lm.shutdown()

    lm = managers(d)
    assert lm.create_log("t", 0, CFG, old).topic_id == old
    assert lm.create_log("t", 1, CFG, new).topic_id == new   # (a tool rewrote the id)
    assert not lm.get_log("t", 1).loaded
    lm.get_log("t", 1).load()
    assert read_partition_metadata(os.path.join(d, "t-1")) == new
    assert lm.get_log("t", 1).topic_id == new and lm.get_log("t", 0).topic_id == old


def test_a_log_that_cannot_be_loaded_stays_offline_and_keeps_its_entries(tmp_path, managers):
    d = str(tmp_path / "d")
    lm = managers(d)
    _fill(lm, partitions=2)
    lm.shutdown()
    active = sorted(f for f in os.listdir(os.path.join(d, "t-1")) if f.endswith(".log"))[-1]
    seg = os.path.join(d, "t-1", active)
    os.unlink(seg)
    os.mkdir(seg)   # an active segment that cannot be opened

    lm = managers(d)
    lm.start_background_load()
    wait_until(lambda: lm.get_log("t", 0).loaded, 30, "t-0 loaded")
    with pytest.raises(StorageError):
        lm.get_log("t", 1).append(batch_of(1))
    assert lm.write_checkpoints() == []
    assert "t 1 14" in open(os.path.join(d, "recovery-point-offset-checkpoint")).read()


def test_threads_using_an_unloaded_log_at_once_share_one_load(tmp_path, managers):
    d = str(tmp_path / "d")
    lm = managers(d)
    _fill(lm, partitions=1)
    lm.shutdown()
    lm = managers(d)
    lg = lm.get_log("t", 0)
    firsts: list[int] = []
    threads = [threading.Thread(target=lambda: firsts.append(lg.append(batch_of(1)).first_offset))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(firsts) == list(range(14, 22))
    assert _offsets(lg)[-8:] == [(o, o) for o in range(14, 22)]


def test_the_background_pass_reports_each_log_once_loaded_whoever_loaded_it(tmp_path, managers):
    """What the broker takes a role up with after an unclean stop: then no log
    knows its end before it is loaded (the recovery may cut it)."""
    d = str(tmp_path / "d")
    lm = managers(d)
    _fill(lm, partitions=4)
    lm.shutdown(clean=False)

    lm = managers(d)
    assert not any(lg.knows_end() for lg in lm.all_logs().values())
    lm.get_log("t", 2).append(batch_of(1))   # loaded by its first use
    reported = []
    lm.start_background_load(on_loaded=lambda lg: reported.append((lg.partition, lg.loaded)),
                             on_done=lambda: reported.append("done"))
    wait_until(lambda: "done" in reported, 30, "the pass over")
    assert reported[-1] == "done"
    assert sorted(reported[:-1]) == [(0, True), (1, True), (3, True)]
    assert all(lg.knows_end() for lg in lm.all_logs().values())


def test_a_call_begun_on_an_unloaded_log_that_another_thread_loads_meanwhile_goes_through(
        tmp_path, managers):
    """A role take-up looked up ``begin_leader_epoch`` on an unloaded log while
    the background pass loaded it (its class became Log): the call then raised
    TypeError, the leader role was not taken up after a kill -9, and a request
    was answered NOT_LEADER_OR_FOLLOWER. The lookup and the load are made to
    happen in that order here, for each method the unloaded log answers itself."""
    d = str(tmp_path / "d")
    lm = managers(d)
    _fill(lm, partitions=1)
    lm.shutdown(clean=False)   # (no end known unloaded: each call falls through to Log's)
    lm = managers(d)
    lg = lm.get_log("t", 0)
    calls = [(lg.begin_leader_epoch, (3,)), (lg.update_high_watermark, (14,)),
             (lg.claim_topic_id, (lg.topic_id or uuid.uuid4(),)),
             (lg.unflushed_messages, ()), (lg.flush, ()), (lg.__repr__, ())]
    threading.Thread(target=lg.load).start()
    wait_until(lambda: lg.loaded, 30, "the other thread's load")
    for method, args in calls:
        method(*args)
    assert lg.leader_epochs.latest_epoch == 3
    assert lg.append(batch_of(1)).first_offset == 14


def test_the_background_pass_calls_after_chunk_once_each_chunk_is_loaded(
        tmp_path, managers, monkeypatch):
    """The broker freezes what the loaded logs hold after each chunk
    (broker/gc_tuning.py keep_for_good): once at the end of the pass, the
    collection before the freeze walked every log loaded and stopped every
    thread for a second or more at 30,000 partitions."""
    import samsa.storage.lazy_log as lazy_log
    monkeypatch.setattr(lazy_log, "_CHUNK", 2)
    d = str(tmp_path / "d")
    lm = managers(d)
    _fill(lm, partitions=5)
    lm.shutdown(clean=False)

    lm = managers(d)
    loaded_at_each_call = []
    lm.start_background_load(
        after_chunk=lambda: loaded_at_each_call.append(
            sum(lg.loaded for lg in lm.all_logs().values())),
        on_done=lambda: loaded_at_each_call.append("done"))
    wait_until(lambda: "done" in loaded_at_each_call, 30, "the pass over")
    assert loaded_at_each_call == [2, 4, 5, "done"]
