"""dump-log prints kafka-dump-log's lines for .log, .index, .timeindex, .snapshot and .txnindex files."""
from __future__ import annotations

import os

from samsa.config.topic import TopicConfig
from samsa.protocol.records import build_batch, compute_crc
from samsa.tools.dump_log import main
from tests.storage.conftest import make_log  # noqa: F401 - a fixture (the logs dump-log reads)


def run(capsys, *args):
    assert main(list(args)) == 0
    return capsys.readouterr().out.splitlines()


def test_log_lines_match_kafka(make_log, capsys):
    lg = make_log(TopicConfig(index_interval_bytes=50))
    b1 = build_batch([(None, b"asdf as", (), 1631771618877),
                      (b"key", b"v", [("h1", b"x"), ("h2", b"y")], 1631771619770)])
    lg.append(b1)
    b2 = build_batch([(None, b"p", (), 1631771619999)], producer_id=9, producer_epoch=1,
                     base_sequence=4, codec=1)
    lg.append(b2, leader_epoch=4)
    lg.close()
    seg = os.path.join(lg.dir, "00000000000000000000")
    out = run(capsys, "--files", seg + ".log", "--print-data-log")
    data = open(seg + ".log", "rb").read()
    crc1 = compute_crc(data, 0)
    size1 = len(b1)
    assert out[0] == f"Dumping {seg}.log"
    assert out[1] == "Log starting offset: 0"
    assert out[2] == (
        "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
        f"deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1631771619770 size: {size1} "
        f"magic: 2 compresscodec: none crc: {crc1} isvalid: true")
    assert out[3] == ("| offset: 0 CreateTime: 1631771618877 keySize: -1 valueSize: 7 sequence: -1 "
                      "headerKeys: [] payload: asdf as")
    assert out[4] == ("| offset: 1 CreateTime: 1631771619770 keySize: 3 valueSize: 1 sequence: -1 "
                      "headerKeys: [h1,h2] key: key payload: v")
    assert out[5].startswith(
        "baseOffset: 2 lastOffset: 2 count: 1 baseSequence: 4 lastSequence: 4 producerId: 9 "
        "producerEpoch: 1 partitionLeaderEpoch: 4 isTransactional: false isControl: false "
        f"deleteHorizonMs: OptionalLong.empty position: {size1} CreateTime: 1631771619999 ")
    assert " magic: 2 compresscodec: gzip crc: " in out[5]
    assert out[6] == ("| offset: 2 CreateTime: 1631771619999 keySize: -1 valueSize: 1 sequence: 4 "
                      "headerKeys: [] payload: p")
    # shallow by default
    assert len(run(capsys, "--files", seg + ".log")) == 4


def test_corrupt_batch_marked_invalid_and_walk_goes_on(make_log, capsys):
    lg = make_log()
    for i in range(3):
        lg.append(build_batch([(None, b"value%d" % i, (), 1000 + i)]))
    lg.close()
    path = os.path.join(lg.dir, "00000000000000000000.log")
    data = bytearray(open(path, "rb").read())
    size = len(data) // 3
    data[size + 70] ^= 0xFF          # a record byte of the middle batch
    data += b"\x00" * 10             # and a tail that is no batch
    open(path, "wb").write(bytes(data))
    out = run(capsys, "--files", path, "--deep-iteration")
    batch_lines = [l for l in out if l.startswith("baseOffset")]
    assert [l.endswith("isvalid: true") for l in batch_lines] == [True, False, True]
    assert out[-1] == "Found 10 invalid bytes at the end of 00000000000000000000.log"


def test_index_and_timeindex(make_log, capsys):
    lg = make_log(TopicConfig(index_interval_bytes=10))
    for i in range(4):
        lg.append(build_batch([(None, b"v" * 30, (), 5000 + i)]))
    lg.close()
    seg = os.path.join(lg.dir, "00000000000000000000")
    # as if preallocated and never trimmed (a crash): the zero tail must not print
    for suffix in (".index", ".timeindex"):
        with open(seg + suffix, "ab") as f:
            f.write(b"\x00" * 1200)
    out = run(capsys, "--files", f"{seg}.index,{seg}.timeindex")
    pos = [i * lg.segments[0].size // 4 for i in range(4)]
    assert out == [f"Dumping {seg}.index",
                   f"offset: 1 position: {pos[1]}",
                   f"offset: 2 position: {pos[2]}",
                   f"offset: 3 position: {pos[3]}",
                   f"Dumping {seg}.timeindex",
                   "timestamp: 5001 offset: 1",
                   "timestamp: 5002 offset: 2",
                   "timestamp: 5003 offset: 3"]


def test_empty_index_and_unknown_file(make_log, capsys, tmp_path):
    lg = make_log()
    lg.append(build_batch([(None, b"v", (), 1)]))
    lg.close()
    seg = os.path.join(lg.dir, "00000000000000000000")
    other = tmp_path / "x.foo"
    other.write_text("")
    assert main(["--files", f"{seg}.index,{other}"]) == 0
    cap = capsys.readouterr()
    assert cap.out.splitlines() == [f"Dumping {seg}.index", f"{seg}.index is empty.",
                                    f"Dumping {other}"]
    assert f"Ignoring unknown file {other}" in cap.err


def test_transaction_markers_and_txnindex(make_log, capsys):
    from samsa.protocol.records import build_control_batch
    from samsa.storage.log import AppendOrigin
    lg = make_log()
    lg.append(build_batch([(None, b"t", (), 1631771619000)], producer_id=77, producer_epoch=2,
                          base_sequence=0, is_transactional=True))
    lg.append(build_control_batch(0, 77, 2, coordinator_epoch=5, timestamp=1631771619100),
              origin=AppendOrigin.COORDINATOR)
    lg.close()
    seg = os.path.join(lg.dir, "00000000000000000000")
    out = run(capsys, "--files", seg + ".log", "--deep-iteration")
    assert " isTransactional: true isControl: false " in out[2]
    assert " isTransactional: true isControl: true " in out[4]
    assert out[5] == ("| offset: 1 CreateTime: 1631771619100 keySize: 4 valueSize: 6 sequence: -1 "
                      "headerKeys: [] endTxnMarker: ABORT coordinatorEpoch: 5")
    assert run(capsys, "--files", seg + ".txnindex") == [
        f"Dumping {seg}.txnindex",
        "version: 0 producerId: 77 firstOffset: 0 lastOffset: 1 lastStableOffset: 2"]
