"""Transactions in a partition's log (KIP-98): producer state, last stable
offset, .txnindex (Kafka's bytes), recovery, replication, truncation."""
from __future__ import annotations

import os
import struct

import pytest

from samsa.config.topic import TopicConfig
from samsa.protocol.errors import ErrorCode
from samsa.protocol.records import CONTROL_ABORT, CONTROL_COMMIT, build_control_batch
from samsa.storage.errors import (InvalidProducerEpochError, InvalidRecordError,
                            InvalidTxnStateError, TransactionCoordinatorFencedError)
from samsa.storage.log import AppendOrigin
from samsa.storage.producer_state import decode_snapshot
from tests.storage.helpers import build_batch

COORD = AppendOrigin.COORDINATOR
P1, P2 = 4000, 4001


def txn(pid, seq, n=1, epoch=0):
    return build_batch([b"t%d" % (seq + i) for i in range(n)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, transactional=True)


def idem(pid, seq, n=1, epoch=0):
    return build_batch([b"i%d" % (seq + i) for i in range(n)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq)


def marker(pid, commit, epoch=0, coordinator_epoch=0):
    return build_control_batch(CONTROL_COMMIT if commit else CONTROL_ABORT, pid, epoch,
                               coordinator_epoch, timestamp=1_700_000_000_000)


def hw_to_end(lg):
    lg.update_high_watermark(lg.log_end_offset)


def txnindex_bytes(lg, seg=None):
    seg = seg or lg.active_segment
    path = seg.txn_index.path
    if not os.path.exists(path):
        return b""
    with open(path, "rb") as f:
        return f.read()


def expected_entry(pid, first, last, lso):
    # Kafka's AbortedTxn, written out field by field: version i16 = 0, then
    # producerId, firstOffset, lastOffset, lastStableOffset as big-endian i64.
    return (b"\x00\x00" + pid.to_bytes(8, "big", signed=True) + first.to_bytes(8, "big")
            + last.to_bytes(8, "big") + lso.to_bytes(8, "big"))


def test_transaction_opens_and_commit_closes_it(make_log):
    lg = make_log()
    lg.append(build_batch([b"plain"]))                # 0
    hw_to_end(lg)
    assert lg.last_stable_offset == 1
    lg.append(txn(P1, 0, 2))                          # 1-2
    hw_to_end(lg)
    entry = lg.producer_state.producers[P1]
    assert entry.current_txn_first_offset == 1
    assert lg.first_unstable_offset == 1
    assert lg.last_stable_offset == 1 and lg.high_watermark == 3
    lg.append(marker(P1, True, coordinator_epoch=3), origin=COORD)   # 3
    # decided, but the marker is not below the high watermark yet
    assert lg.last_stable_offset == 1
    hw_to_end(lg)
    assert lg.last_stable_offset == 4
    assert entry.current_txn_first_offset == -1 and entry.coordinator_epoch == 3
    assert txnindex_bytes(lg) == b""                  # commits are not indexed


def test_abort_writes_kafkas_txnindex_entry(make_log):
    lg = make_log()
    lg.append(txn(P1, 0, 2))                          # 0-1 P1
    lg.append(txn(P2, 0, 1))                          # 2   P2
    lg.append(marker(P1, False), origin=COORD)        # 3   abort P1: P2 still open at 2
    lg.append(marker(P2, False), origin=COORD)        # 4   abort P2: nothing open -> 5
    assert txnindex_bytes(lg) == expected_entry(P1, 0, 3, 2) + expected_entry(P2, 2, 4, 5)
    assert len(txnindex_bytes(lg)) == 68
    assert lg.last_stable_offset == 0                 # hw still 0
    hw_to_end(lg)
    assert lg.last_stable_offset == 5


def test_lso_is_earliest_open_transaction_below_hw(make_log):
    lg = make_log()
    lg.append(build_batch([b"a", b"b"]))              # 0-1
    lg.append(txn(P1, 0))                             # 2
    lg.append(txn(P2, 0))                             # 3
    lg.update_high_watermark(2)
    assert lg.last_stable_offset == 2
    hw_to_end(lg)
    assert lg.last_stable_offset == 2
    lg.append(marker(P1, True), origin=COORD)         # 4
    hw_to_end(lg)
    assert lg.last_stable_offset == 3                 # P2 still open
    lg.append(marker(P2, True), origin=COORD)
    hw_to_end(lg)
    assert lg.last_stable_offset == lg.log_end_offset == 6
    rr = lg.read(0, 1 << 20)
    assert rr.last_stable_offset == 6


def test_read_committed_bound_and_aborted_list(make_log):
    lg = make_log()
    lg.append(txn(P1, 0, 2))                          # 0-1
    lg.append(build_batch([b"x"]))                    # 2
    lg.append(marker(P1, False), origin=COORD)        # 3
    lg.append(txn(P2, 0))                             # 4 open
    hw_to_end(lg)
    assert lg.last_stable_offset == 4
    rr = lg.read(0, 1 << 20, max_offset=lg.last_stable_offset)
    assert rr.last_stable_offset == 4
    data = b"".join(r.read_bytes() for r in rr.regions)
    assert struct.unpack_from(">q", data, 0)[0] == 0
    aborted = lg.aborted_transactions(0, rr.regions)
    assert [(a.producer_id, a.first_offset) for a in aborted] == [(P1, 0)]
    # a fetch past the aborted transaction does not get it
    rr = lg.read(4, 1 << 20, max_offset=lg.last_stable_offset)
    assert rr.regions == [] and lg.aborted_transactions(4, rr.regions) == []


def test_non_transactional_batch_while_transaction_open_is_refused(make_log):
    lg = make_log()
    lg.append(txn(P1, 0))
    with pytest.raises(InvalidTxnStateError) as e:
        lg.append(idem(P1, 1))
    assert e.value.error_code == ErrorCode.INVALID_TXN_STATE
    lg.append(txn(P1, 1))                             # still fine transactional
    lg.append(marker(P1, True), origin=COORD)
    lg.append(idem(P1, 2))                            # after the marker: fine again


def test_transactional_batch_from_lower_epoch_is_refused(make_log):
    lg = make_log()
    lg.append(txn(P1, 0, epoch=2))
    with pytest.raises(InvalidProducerEpochError):
        lg.append(txn(P1, 1, epoch=1))


def test_marker_epoch_checks(make_log):
    lg = make_log()
    lg.append(txn(P1, 0, epoch=5))
    with pytest.raises(InvalidProducerEpochError):
        lg.append(marker(P1, True, epoch=4), origin=COORD)
    lg.append(marker(P1, True, epoch=5, coordinator_epoch=7), origin=COORD)
    lg.append(txn(P1, 1, epoch=5))
    with pytest.raises(TransactionCoordinatorFencedError) as e:
        lg.append(marker(P1, False, epoch=5, coordinator_epoch=6), origin=COORD)
    assert e.value.error_code == 52
    # TV2: markers carry a bumped epoch, an equal one is a zombie while the txn is open
    with pytest.raises(InvalidProducerEpochError):
        lg.append(marker(P1, False, epoch=5, coordinator_epoch=7), origin=COORD, txn_version=2)
    lg.append(marker(P1, False, epoch=6, coordinator_epoch=7), origin=COORD, txn_version=2)
    assert lg.producer_state.producers[P1].epoch == 6
    # ... and the retry of that marker, transaction over, is let through
    lg.append(marker(P1, False, epoch=6, coordinator_epoch=7), origin=COORD, txn_version=2)


def test_clients_may_not_write_control_batches(make_log):
    lg = make_log()
    lg.append(txn(P1, 0))
    with pytest.raises(InvalidRecordError):
        lg.append(marker(P1, True))
    with pytest.raises(InvalidRecordError):   # the general path (two batches) too
        lg.append(txn(P1, 1) + marker(P1, True))
    assert lg.log_end_offset == 1


def test_marker_without_open_transaction_indexes_nothing(make_log):
    lg = make_log()
    lg.append(marker(P1, False), origin=COORD)
    hw_to_end(lg)
    assert txnindex_bytes(lg) == b""
    assert lg.last_stable_offset == 1


def test_snapshot_keeps_open_transaction_across_clean_restart(make_log, tmp_path):
    lg = make_log()
    lg.append(build_batch([b"a"]))
    lg.append(txn(P1, 0, 2))                          # 1-2
    lg.append(marker(P2, True, coordinator_epoch=9), origin=COORD)
    hw_to_end(lg)
    lg.close()
    snaps = [n for n in os.listdir(lg.dir) if n.endswith(".snapshot")]
    with open(os.path.join(lg.dir, sorted(snaps)[-1]), "rb") as f:
        entries = {e.producer_id: e for e in decode_snapshot(f.read())}
    assert entries[P1].current_txn_first_offset == 1
    assert entries[P2].coordinator_epoch == 9
    lg2 = make_log(high_watermark=4)
    assert lg2.last_stable_offset == 1
    lg2.append(marker(P1, False), origin=COORD)
    hw_to_end(lg2)
    assert lg2.last_stable_offset == 5
    assert txnindex_bytes(lg2) == expected_entry(P1, 1, 4, 5)


def _build_txn_log(lg):
    lg.append(txn(P1, 0, 2))                          # 0-1
    lg.append(txn(P2, 0))                             # 2
    lg.append(marker(P1, False), origin=COORD)        # 3
    lg.roll()
    lg.append(txn(P2, 1))                             # 4
    lg.append(txn(P1, 0, epoch=1))                    # 5 (a new epoch starts at 0)
    lg.append(marker(P2, False), origin=COORD)        # 6
    lg.append(marker(P1, True, epoch=1), origin=COORD)   # 7
    lg.append(txn(P1, 1, epoch=1))                    # 8 open


def test_recovery_after_kill_rebuilds_txnindex(make_log, tmp_path):
    lg = make_log()
    _build_txn_log(lg)
    hw_to_end(lg)
    before = [txnindex_bytes(lg, s) for s in lg.segments]
    assert before == [expected_entry(P1, 0, 3, 2), expected_entry(P2, 2, 6, 5)]
    lg.flush()
    # a kill: no clean close; the files of the active segment are what a crash
    # leaves, the txnindex lost and garbage after the last batch
    lg.close_handles(trim=False)
    active = lg.segments[-1]
    os.unlink(active.txn_index.path)
    with open(active.log_path, "ab") as f:
        f.write(b"\x00" * 7)
    for n in os.listdir(lg.dir):
        if n.endswith(".snapshot") and int(n[:20]) > active.base_offset:
            os.unlink(os.path.join(lg.dir, n))
    lg2 = make_log(clean_shutdown=False, recovery_point=active.base_offset, high_watermark=9)
    assert [txnindex_bytes(lg2, s) for s in lg2.segments] == before
    assert lg2.log_end_offset == 9
    assert lg2.last_stable_offset == 8                # P1's last transaction is still open
    assert lg2.producer_state.producers[P1].current_txn_first_offset == 8


def test_recovery_truncating_a_torn_marker_reopens_the_transaction(make_log):
    lg = make_log()
    lg.append(txn(P1, 0, 2))
    lg.append(marker(P1, False), origin=COORD)
    hw_to_end(lg)
    assert txnindex_bytes(lg) == expected_entry(P1, 0, 2, 3)
    lg.flush()
    lg.close_handles(trim=False)
    seg = lg.segments[-1]
    with open(seg.log_path, "r+b") as f:
        f.truncate(os.path.getsize(seg.log_path) - 5)   # the marker torn
    for n in os.listdir(lg.dir):
        if n.endswith(".snapshot"):
            os.unlink(os.path.join(lg.dir, n))
    lg2 = make_log(clean_shutdown=False, recovery_point=0, high_watermark=2)
    assert lg2.log_end_offset == 2
    assert txnindex_bytes(lg2) == b""
    assert lg2.last_stable_offset == 0


def test_follower_writes_the_same_txnindex(make_log, tmp_path):
    leader = make_log()
    _build_txn_log(leader)
    follower = make_log(name="f-0")
    # all of the leader's bytes in one replicated append (a follower's fetch)
    data = b"".join(r.read_bytes() for s in leader.segments
                    for r in [s.read(s.base_offset, 1 << 30)] if r is not None)
    follower.append(data, origin=AppendOrigin.REPLICATION)
    assert follower.log_end_offset == leader.log_end_offset
    fidx = b"".join(txnindex_bytes(follower, s) for s in follower.segments)
    lidx = b"".join(txnindex_bytes(leader, s) for s in leader.segments)
    assert fidx == lidx and len(fidx) == 68
    hw_to_end(follower)
    assert follower.last_stable_offset == 8


def test_truncation_cuts_txnindex_and_reopens_transaction(make_log):
    lg = make_log()
    lg.append(txn(P1, 0, 2))                          # 0-1
    lg.append(marker(P1, False), origin=COORD)        # 2
    lg.append(txn(P2, 0))                             # 3
    lg.append(marker(P2, False), origin=COORD)        # 4
    assert len(txnindex_bytes(lg)) == 68
    lg.truncate_to(4)
    assert txnindex_bytes(lg) == expected_entry(P1, 0, 2, 3)
    hw_to_end(lg)
    assert lg.last_stable_offset == 3                 # P2's transaction open again
    assert lg.producer_state.producers[P2].current_txn_first_offset == 3


def test_segment_deletion_takes_its_txnindex(make_log):
    lg = make_log(TopicConfig(file_delete_delay_ms=0, retention_ms=-1))
    lg.append(txn(P1, 0))
    lg.append(marker(P1, False), origin=COORD)
    lg.roll()
    lg.append(build_batch([b"x"]))
    hw_to_end(lg)
    path = lg.segments[0].txn_index.path
    assert os.path.exists(path)
    lg.delete_records_before(2)
    assert not os.path.exists(path)


def test_expired_producers_are_removed_but_not_open_transactions(make_log):
    lg = make_log()
    lg.append(build_batch([b"a"], producer_id=P1, producer_epoch=0, base_sequence=0,
                          timestamp=1000))
    lg.append(build_batch([b"b"], producer_id=P2, producer_epoch=0, base_sequence=0,
                          timestamp=1000, transactional=True))
    assert lg.remove_expired_producers(now_ms=1000 + 60_000, expiration_ms=60_000) == 1
    assert set(lg.producer_state.producers) == {P2}


def test_log_manager_expiry_reads_the_live_setting(tmp_path):
    from samsa.storage import LogManager
    expiration = [10 ** 9]
    lm = LogManager([str(tmp_path / "d")], TopicConfig(), 0, "c1",
                    producer_id_expiration_ms=lambda: expiration[0])
    lm.startup()
    try:
        lg = lm.create_log("t", 0)
        lg.append(build_batch([b"a"], producer_id=P1, producer_epoch=0, base_sequence=0,
                              timestamp=1000))
        assert lm.expire_producers(now_ms=2000) == 0
        expiration[0] = 1000   # producer.id.expiration.ms changed (a dynamic config)
        assert lm.expire_producers(now_ms=2000) == 1
        assert lg.producer_state.producers == {}
    finally:
        lm.shutdown()


def test_open_transaction_comes_back_from_replay_after_the_snapshot(make_log):
    lg = make_log()
    lg.append(txn(P1, 0))                             # 0 P1 open
    lg.roll()                                         # snapshot at 1: P1 open
    lg.append(txn(P2, 0))                             # 1 P2 open
    lg.append(marker(P1, False), origin=COORD)        # 2 abort P1 (P2 open: LSO 1)
    hw_to_end(lg)
    lg.close()
    for n in os.listdir(lg.dir):                      # only the roll's snapshot is left
        if n.endswith(".snapshot") and int(n[:20]) != 1:
            os.unlink(os.path.join(lg.dir, n))
    lg2 = make_log(high_watermark=3)
    assert set(lg2.producer_state.ongoing.values()) == {P2}
    assert lg2.last_stable_offset == 1
    assert txnindex_bytes(lg2) == expected_entry(P1, 0, 2, 1)


def test_aborted_list_looks_past_the_segment_read(make_log):
    # the ABORT marker (and so its .txnindex entry) is in a later segment than the
    # data a fetch returns: the search walks on, as Kafka's does
    lg = make_log()
    lg.append(txn(P1, 0))                             # 0
    lg.append(build_batch([b"x"]))                    # 1
    lg.roll()
    lg.append(marker(P1, False), origin=COORD)        # 2
    lg.append(build_batch([b"y"]))                    # 3
    hw_to_end(lg)
    rr = lg.read(0, 1 << 20, max_offset=lg.last_stable_offset)
    assert len(rr.regions) == 1 and rr.regions[0].file.name == lg.segments[0].log_path
    assert [(t.producer_id, t.first_offset) for t in lg.aborted_transactions(0, rr.regions)] == [
        (P1, 0)]
    assert txnindex_bytes(lg, lg.segments[0]) == b""
    assert txnindex_bytes(lg, lg.segments[1]) == expected_entry(P1, 0, 2, 3)
