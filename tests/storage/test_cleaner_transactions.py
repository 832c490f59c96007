"""Compaction of transactional data, as Kafka's cleaner: aborted records go,
markers go once no batch of their transaction is left and their delete horizon
has passed, a producer's last batch stays (emptied) while the producer is
remembered, and an ongoing transaction is never touched."""
from __future__ import annotations

import os

from kafka.record.default_records import DefaultRecordBatchBuilder

from samsa.protocol.records import (CONTROL_ABORT, CONTROL_COMMIT, build_control_batch, decode_batch,
                              iter_batch_headers)
from samsa.storage.cleaner import DELETE_HORIZON_MASK, clean_log
from samsa.storage.log import AppendOrigin
from tests.storage.test_cleaner import T0, open_log

A, B, C = 501, 502, 503


def txn_batch(pid, seq, items):
    b = DefaultRecordBatchBuilder(2, 0, True, pid, 0, seq, batch_size=1 << 30)
    for i, (k, v) in enumerate(items):
        b.append(i, T0 + i, k, v, [])
    return bytes(b.build())


def plain(items):
    b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, batch_size=1 << 30)
    for i, (k, v) in enumerate(items):
        b.append(i, T0 + i, k, v, [])
    return bytes(b.build())


def marker(pid, ctype):
    return build_control_batch(ctype, pid, 0, 0, timestamp=T0)


def data_records(seg):
    data = open(seg.log_path, "rb").read()
    return [(r.offset, r.key, r.value) for pos, h in iter_batch_headers(data) if not h.is_control
            for r in decode_batch(data, pos, header=h)[1]]


def headers(seg):
    data = open(seg.log_path, "rb").read()
    return [h for _, h in iter_batch_headers(data)]


def test_aborted_data_and_markers_leave_ongoing_transaction_stays(tmp_path):
    lg = open_log(tmp_path)
    coord = AppendOrigin.COORDINATOR
    lg.append(txn_batch(A, 0, [(b"k1", b"a1"), (b"k2", b"a2")]))   # 0-1 aborted
    lg.append(txn_batch(B, 0, [(b"k1", b"b1")]))                   # 2   committed
    lg.append(marker(A, CONTROL_ABORT), origin=coord)              # 3
    lg.append(marker(B, CONTROL_COMMIT), origin=coord)             # 4
    lg.append(plain([(b"k1", b"z")]))                              # 5   supersedes b1
    lg.roll()
    lg.append(txn_batch(C, 0, [(b"k1", b"c-open")]))               # 6   ongoing
    lg.append(plain([(b"k4", b"p")]))                              # 7
    lg.roll()
    lg.append(plain([(b"k5", b"q")]))                              # 8   active
    lg.update_high_watermark(lg.log_end_offset)
    assert lg.first_unstable_offset == 6
    seg1_before = open(lg.segments[1].log_path, "rb").read()

    clean_log(lg, None, T0, force=True)
    seg0 = lg.segments[0]
    # A's records are gone (k2 had no other value: it is gone altogether); B's
    # record was superseded. Each batch was its producer's last, so it stays
    # emptied (Kafka's RETAIN_EMPTY: producer state can be rebuilt from the
    # log); both markers stay: their transactions had batches in this pass
    assert data_records(seg0) == [(5, b"k1", b"z")]
    hs = headers(seg0)
    assert [(h.base_offset, h.records_count) for h in hs] == [(0, 0), (2, 0), (3, 1), (4, 1),
                                                              (5, 1)]
    assert hs[0].is_transactional and hs[0].last_offset == 1 and hs[0].producer_id == A
    assert all(h.is_control for h in hs[2:4]) and not any(h.has_delete_horizon for h in hs)
    # the kept ABORT marker is indexed in the cleaned segment, as Kafka's cleaner does
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in seg0.txn_index.entries] == [
        (A, 0, 3)]
    # the segment holding the open transaction is not cleaned
    assert open(lg.segments[1].log_path, "rb").read() == seg1_before

    # the producers expire (not C: its transaction is open): their last batches may go
    assert lg.remove_expired_producers(now_ms=T0 + 10 ** 9, expiration_ms=1) == 2
    clean_log(lg, None, T0 + 10, force=True)
    hs = headers(lg.segments[0])
    assert [h.base_offset for h in hs] == [3, 4, 5] and not any(h.has_delete_horizon for h in hs)

    clean_log(lg, None, T0 + 20, force=True)
    hs = headers(lg.segments[0])
    # nothing of either transaction left: the markers get a delete horizon
    assert [h.base_offset for h in hs] == [3, 4, 5]
    assert all(h.attributes & DELETE_HORIZON_MASK and h.base_timestamp == T0 + 20 + 1000
               for h in hs[:2])
    assert lg.segments[0].txn_index.entries == ()

    clean_log(lg, None, T0 + 20 + 1000, force=True)
    assert [h.base_offset for h in headers(lg.segments[0])] == [5]
    assert open(lg.segments[1].log_path, "rb").read() == seg1_before
    assert not os.path.exists(lg.segments[0].txn_index.path)
    lg.close()
