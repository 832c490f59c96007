"""Kafka's small metadata files: exact text, and tolerance of damaged ones."""
from __future__ import annotations

import os
import threading
import uuid

from samsa.storage.checkpoints import (durable_batch, read_leader_epoch_checkpoint, read_offset_checkpoint,
                                 read_partition_metadata, topic_id_from_str, topic_id_to_str,
                                 write_leader_epoch_checkpoint, write_offset_checkpoint,
                                 write_partition_metadata)
from samsa.storage.leader_epoch import LeaderEpochCache


def test_offset_checkpoint_roundtrip_and_damage(tmp_path):
    p = str(tmp_path / "recovery-point-offset-checkpoint")
    write_offset_checkpoint(p, {("b", 1): 7, ("a.x-y", 0): 3})
    assert open(p).read() == "0\n2\na.x-y 0 3\nb 1 7\n"
    assert read_offset_checkpoint(p) == {("b", 1): 7, ("a.x-y", 0): 3}
    assert not os.path.exists(p + ".tmp")
    for bad in ("1\n0\n", "0\n3\na 0 1\n", "0\nx\n", "garbage"):
        open(p, "w").write(bad)
        assert read_offset_checkpoint(p) == {}
    assert read_offset_checkpoint(str(tmp_path / "missing")) == {}


def test_leader_epoch_checkpoint_and_cache(tmp_path):
    p = str(tmp_path / "leader-epoch-checkpoint")
    write_leader_epoch_checkpoint(p, [(0, 0), (3, 17)])
    assert open(p).read() == "0\n2\n0 0\n3 17\n"
    assert read_leader_epoch_checkpoint(p) == [(0, 0), (3, 17)]
    c = LeaderEpochCache(str(tmp_path))
    assert c.latest_epoch == 3
    c.assign(5, 30)
    c.assign(4, 31)          # older epoch: ignored
    assert c.entries == [(0, 0), (3, 17), (5, 30)]
    assert c.end_offset_for(3, 40) == (3, 30)
    assert c.end_offset_for(5, 40) == (5, 40)
    assert c.end_offset_for(-1, 40) == (-1, -1)
    c.truncate_from_start(20)
    assert c.entries == [(3, 20), (5, 30)]
    c.truncate_from_end(30)
    assert c.entries == [(3, 20)]
    assert LeaderEpochCache(str(tmp_path)).entries == [(3, 20)]


def test_topic_id_kafka_form(tmp_path):
    tid = uuid.UUID("a1b2c3d4-e5f6-4711-8899-aabbccddeeff")
    s = topic_id_to_str(tid)
    assert len(s) == 22 and "=" not in s and "+" not in s and "/" not in s
    assert topic_id_from_str(s) == tid
    assert topic_id_from_str(str(tid)) == tid
    write_partition_metadata(str(tmp_path), tid)
    assert read_partition_metadata(str(tmp_path)) == tid
    (tmp_path / "partition.metadata").write_text("version: 9\ntopic_id: x")
    assert read_partition_metadata(str(tmp_path)) is None


def test_durable_batch_puts_every_file_in_place_when_it_ends(tmp_path):
    """Inside a batch the writes wait (no torn or half-renamed file); at its end
    (the outermost one's, even after an error) each file holds its last content,
    byte for byte what a lone write gives, and no temporary file is left."""
    dirs = [tmp_path / f"t-{p}" for p in range(3)]
    tid = uuid.uuid4()
    try:
        with durable_batch():
            for d in dirs:
                d.mkdir()
                write_partition_metadata(str(d), tid)
                with durable_batch():  # nested: the outer batch commits
                    write_leader_epoch_checkpoint(str(d / "leader-epoch-checkpoint"), [(0, 0)])
                write_leader_epoch_checkpoint(str(d / "leader-epoch-checkpoint"), [(0, 0), (1, 5)])
            assert not (dirs[0] / "partition.metadata").exists()
            raise RuntimeError("the caller failed after writing")
    except RuntimeError:
        pass
    lone = tmp_path / "lone"
    lone.mkdir()
    write_partition_metadata(str(lone), tid)
    for d in dirs:
        assert (d / "partition.metadata").read_bytes() == (lone / "partition.metadata").read_bytes()
        assert read_partition_metadata(str(d)) == tid
        assert read_leader_epoch_checkpoint(str(d / "leader-epoch-checkpoint")) == [(0, 0), (1, 5)]
        assert sorted(os.listdir(d)) == ["leader-epoch-checkpoint", "partition.metadata"]


def test_a_write_from_another_thread_during_a_batch_is_the_one_kept(tmp_path):
    """A partition's role pass writes its new leader epoch inside a batch while a
    request's thread may already write a newer one: the newer content stays in
    place whatever the order of the renames, and the batch's other files land."""
    a, b = tmp_path / "a-0", tmp_path / "b-0"
    a.mkdir()
    b.mkdir()
    path_a = str(a / "leader-epoch-checkpoint")
    write_leader_epoch_checkpoint(path_a, [(1, 0)])

    def newer() -> None:   # not in any batch: in place at once
        write_leader_epoch_checkpoint(path_a, [(1, 0), (2, 10), (3, 12)])

    with durable_batch():
        write_leader_epoch_checkpoint(path_a, [(1, 0), (2, 10)])
        thread = threading.Thread(target=newer)
        thread.start()
        thread.join()
        write_leader_epoch_checkpoint(str(b / "leader-epoch-checkpoint"), [(1, 0), (2, 7)])
    assert read_leader_epoch_checkpoint(path_a) == [(1, 0), (2, 10), (3, 12)]
    assert read_leader_epoch_checkpoint(str(b / "leader-epoch-checkpoint")) == [(1, 0), (2, 7)]
    assert sorted(os.listdir(a)) == ["leader-epoch-checkpoint"]
    assert sorted(os.listdir(b)) == ["leader-epoch-checkpoint"]


def test_a_checkpoint_cut_short_reads_as_malformed_never_as_other_content(tmp_path):
    """A new partition's files are written in place (write_new_file): a crash
    may cut them anywhere, and no cut may read as fewer entries or a
    shortened offset (review finding)."""
    p = tmp_path / "checkpoint"
    whole = {read_leader_epoch_checkpoint: ("0\n2\n0 0\n5 1000\n", [(0, 0), (5, 1000)], []),
             read_offset_checkpoint: ("0\n2\na 0 17\nb 3 1234\n", {("a", 0): 17, ("b", 3): 1234},
                                      {})}
    for read, (text, entries, empty) in whole.items():
        for cut in range(len(text) + 1):
            p.write_text(text[:cut])
            assert read(str(p)) == (entries if cut == len(text) else empty), (read, text[:cut])
    p.write_bytes(b"0\n1\n\xff\xfe 0\n")  # not UTF-8: malformed, not a failed start
    assert read_leader_epoch_checkpoint(str(p)) == []
    d = tmp_path / "t-0"
    d.mkdir()
    tid = uuid.uuid4()
    write_partition_metadata(str(d), tid)
    text = (d / "partition.metadata").read_text()
    for cut in range(len(text)):
        (d / "partition.metadata").write_text(text[:cut])
        assert read_partition_metadata(str(d)) is None, text[:cut]


def test_a_checked_file_is_new_in_place_in_a_batch_and_replaces_an_old_one_only_whole(tmp_path):
    """write_checked_file (producer snapshots): a new file is written in place
    inside a batch, as Kafka writes a snapshot (no temporary file, no rename);
    one already there keeps its content until the batch's barrier, when the new
    one replaces it whole."""
    from samsa.storage.checkpoints import write_checked_file
    new, old = tmp_path / "new.snapshot", tmp_path / "old.snapshot"
    old.write_bytes(b"old")
    with durable_batch():
        write_checked_file(str(new), b"new bytes")
        write_checked_file(str(old), b"newer")
        assert new.read_bytes() == b"new bytes" and old.read_bytes() == b"old"
        assert sorted(os.listdir(tmp_path))[:2] == ["new.snapshot", "old.snapshot"]
    assert old.read_bytes() == b"newer"
    assert sorted(os.listdir(tmp_path)) == ["new.snapshot", "old.snapshot"]
    write_checked_file(str(new), b"outside a batch")   # (atomic_write)
    assert new.read_bytes() == b"outside a batch"
