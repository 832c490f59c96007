"""LogManager: directories, checkpoint files, background retention/flush, topic deletion."""
from __future__ import annotations

import os
import uuid

import pytest

from samsa.config.topic import TopicConfig
from samsa.storage.checkpoints import topic_id_to_str
from samsa.storage.errors import StorageError
from samsa.storage.manager import LogManager
from tests.storage.helpers import batch_of
from tests.support.waiting import wait_until

CFG = TopicConfig(segment_bytes=1000, file_delete_delay_ms=0)


@pytest.fixture
def managers():
    made = []

    def factory(dirs, **kw):
        kw.setdefault("broker_id", 0)
        kw.setdefault("cluster_id", "cid")
        lm = LogManager(dirs, kw.pop("default_config", CFG), **kw)
        made.append(lm)
        return lm

    yield factory
    for lm in made:
        lm.shutdown(clean=False) if not lm._shut_down else None


def test_files_written_like_kafka(tmp_path, managers):
    d = str(tmp_path / "d1")
    lm = managers([d])
    lm.startup()
    tid = uuid.uuid4()
    lg = lm.create_log("orders", 3, CFG, tid)
    assert lm.create_log("orders", 3, CFG, tid) is lg   # idempotent
    for _ in range(5):
        lg.append(batch_of(2))
    lg.update_high_watermark(lg.log_end_offset)
    lg.delete_records_before(4)
    lm.shutdown()
    props = open(os.path.join(d, "meta.properties")).read().splitlines()
    assert "version=0" in props and "broker.id=0" in props and "cluster.id=cid" in props
    assert open(os.path.join(d, "recovery-point-offset-checkpoint")).read() == "0\n1\norders 3 10\n"
    assert open(os.path.join(d, "log-start-offset-checkpoint")).read() == "0\n1\norders 3 4\n"
    pm = open(os.path.join(d, "orders-3", "partition.metadata")).read()
    assert pm == f"version: 0\ntopic_id: {topic_id_to_str(tid)}"
    assert len(topic_id_to_str(tid)) == 22
    assert os.path.exists(os.path.join(d, ".kafka_cleanshutdown"))
    lm2 = managers([d])
    lm2.startup()
    lg2 = lm2.get_log("orders", 3)
    assert lg2.topic_id == tid and lg2.log_start_offset == 4 and lg2.log_end_offset == 10
    assert (lg2.topic, lg2.partition) == ("orders", 3)


def test_foreign_files_and_dirs_are_ignored_not_deleted(tmp_path, managers, caplog):
    d = tmp_path / "d"
    lm = managers([str(d)])
    lm.startup()
    lm.create_log("t", 0, CFG).append(batch_of(1))
    lm.shutdown()
    (d / "t-0" / "notes.txt").write_text("keep me")
    (d / "not_a_partition").mkdir()
    (d / "not_a_partition" / "x").write_text("keep")
    (d / "weird-dir-x").mkdir()
    lm2 = managers([str(d)])
    lm2.startup()
    assert set(lm2.all_logs()) == {("t", 0)}
    assert (d / "t-0" / "notes.txt").read_text() == "keep me"
    assert (d / "not_a_partition" / "x").exists() and (d / "weird-dir-x").exists()
    lm2.get_log("t", 0).load()   # (a partition's own files are read as it is loaded)
    assert any("notes.txt" in r.getMessage() for r in caplog.records)
    assert any("not_a_partition" in r.getMessage() for r in caplog.records)


def test_broker_id_mismatch_refuses(tmp_path, managers):
    d = str(tmp_path / "d")
    lm = managers([d])
    lm.startup()
    lm.shutdown()
    with pytest.raises(StorageError):
        managers([d], broker_id=7).startup()


def test_partitions_spread_over_log_dirs(tmp_path, managers):
    dirs = [str(tmp_path / "a"), str(tmp_path / "b")]
    lm = managers(dirs)
    lm.startup()
    for p in range(4):
        lm.create_log("t", p, CFG)
    where = [os.path.dirname(lg.dir) for lg in lm.all_logs().values()]
    assert where.count(dirs[0]) == 2 and where.count(dirs[1]) == 2
    lm.shutdown()
    lm2 = managers(dirs)
    lm2.startup()
    assert set(lm2.all_logs()) == {("t", p) for p in range(4)}


def test_delete_topic_renames_then_removes(tmp_path, managers):
    d = tmp_path / "d"
    lm = managers([str(d)])
    lm.startup()
    for p in range(2):
        lm.create_log("gone", p, CFG.replace(file_delete_delay_ms=100)).append(batch_of(1))
    lm.create_log("stay", 0, CFG).append(batch_of(1))
    lm.delete_topic("gone")
    assert lm.get_log("gone", 0) is None
    names = os.listdir(d)
    marked = [n for n in names if n.startswith("gone-") and n.endswith("-delete")]
    assert len(marked) == 2
    assert all(len(n.split(".")[1]) == len("-delete") + 32 for n in marked)
    wait_until(lambda: not any(n.endswith("-delete") for n in os.listdir(d)), 5,
               "the deleted directories removed", interval=0.01)
    assert (d / "stay-0").exists()


def test_background_retention(tmp_path, managers):
    cfg = CFG.replace(retention_bytes=1500)
    lm = managers([str(tmp_path / "d")], default_config=cfg, retention_check_interval_ms=30)
    lm.startup()
    lg = lm.create_log("t", 0, cfg)
    for _ in range(40):
        lg.append(batch_of(2, size=60))
    wait_until(lambda: lg.log_start_offset > 0, 5, "retention to move the log start", interval=0.01)
    wait_until(lambda: lg.size_in_bytes() - lg.segments[0].size < 1500, 5,
               "retention to delete the old segments", interval=0.01)


def test_flush_messages_advances_recovery_point_in_background(tmp_path, managers):
    cfg = CFG.replace(flush_messages=5)
    lm = managers([str(tmp_path / "d")], default_config=cfg)
    lm.startup()
    lg = lm.create_log("t", 0, cfg)
    for _ in range(5):
        lg.append(batch_of(2))
    wait_until(lambda: lg.recovery_point >= 10, 5, "the flush to reach offset 10", interval=0.01)


def test_flush_ms(tmp_path, managers):
    cfg = CFG.replace(flush_ms=20)
    lm = managers([str(tmp_path / "d")], default_config=cfg, flush_check_interval_ms=10)
    lm.startup()
    lg = lm.create_log("t", 0, cfg)
    lg.append(batch_of(3))
    wait_until(lambda: lg.recovery_point == 3, 5, "the flush to reach offset 3", interval=0.01)


def test_update_topic_config(tmp_path, managers):
    lm = managers([str(tmp_path / "d")])
    lm.startup()
    lg = lm.create_log("t", 0, CFG)
    new = CFG.replace(max_message_bytes=50)
    lm.update_topic_config("t", new)
    assert lg.config is new


def test_reads_do_not_wait_for_flush(tmp_path, managers):
    """A flush in progress (held flush lock) blocks neither appends nor reads."""
    lm = managers([str(tmp_path / "d")])
    lm.startup()
    lg = lm.create_log("t", 0, CFG)
    lg.append(batch_of(1))
    with lg._flush_lock:
        lg.append(batch_of(1))
        assert lg.read(0, 1000).regions


def test_each_checkpoint_file_on_its_own_interval(tmp_path, managers):
    """Kafka writes high watermarks every replica.high.watermark.checkpoint.interval.ms
    (5 s) and recovery points / log start offsets every minute: a broker that
    crashes comes back with a high watermark at most seconds old."""
    from samsa.storage.checkpoints import read_offset_checkpoint
    d = str(tmp_path / "d1")
    lm = managers([d], checkpoint_interval_ms=10**7, start_offset_checkpoint_interval_ms=10**7,
                  high_watermark_checkpoint_interval_ms=20)
    lm.startup()
    lg = lm.create_log("hw", 0, CFG, uuid.uuid4())
    for _ in range(3):
        lg.append(batch_of(2))
    lg.update_high_watermark(lg.log_end_offset)
    hw_file = os.path.join(d, "replication-offset-checkpoint")
    wait_until(lambda: os.path.exists(hw_file)
               and read_offset_checkpoint(hw_file).get(("hw", 0)) == 6, 5,
               "the high watermark checkpoint at 6", interval=0.01)
    assert not os.path.exists(os.path.join(d, "recovery-point-offset-checkpoint"))
    assert not os.path.exists(os.path.join(d, "log-start-offset-checkpoint"))


def test_a_checkpoint_that_would_not_change_is_not_written_again(tmp_path, managers):
    """An idle broker's checkpoint task finds every file holding what it would
    write (its own last write, or what start-up read): it writes none."""
    d = str(tmp_path / "d1")
    lm = managers([d])
    lm.startup()
    lg = lm.create_log("t", 0, CFG, uuid.uuid4())
    lg.append(batch_of(2))
    lg.update_high_watermark(lg.log_end_offset)
    files = [os.path.join(d, name) for name in ("recovery-point-offset-checkpoint",
                                                 "log-start-offset-checkpoint",
                                                 "replication-offset-checkpoint")]
    assert lm.write_checkpoints() == []
    inodes = [os.stat(f).st_ino for f in files]   # (a write replaces the file: a new inode)
    assert lm.write_checkpoints() == []
    assert [os.stat(f).st_ino for f in files] == inodes
    lg.append(batch_of(1))
    lg.update_high_watermark(lg.log_end_offset)
    assert lm.write_checkpoints() == []
    changed = [os.stat(f).st_ino != ino for f, ino in zip(files, inodes)]
    assert changed == [False, False, True]   # (not flushed: the recovery point stays)
    assert open(files[2]).read() == "0\n1\nt 0 3\n"
    lm.shutdown()
    inodes = [os.stat(f).st_ino for f in files]

    lm2 = managers([d])
    lm2.startup()
    assert lm2.write_checkpoints() == []
    assert [os.stat(f).st_ino for f in files] == inodes
