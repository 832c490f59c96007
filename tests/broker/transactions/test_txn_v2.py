"""Transactions v2 (KIP-890 part 2) in the coordinator's rules and log format:
the epoch bumped at the end of every transaction, the producer id rotated
when the epoch runs out, EndTxn v5's retries, and TransactionLogValue v1."""
from __future__ import annotations

import asyncio
import struct

from samsa.broker.transactions import state as rules
from samsa.broker.transactions.log_format import decode_value, encode_value
from samsa.broker.transactions.state import MAX_EPOCH, TV_2, TxnState
from samsa.protocol.errors import ErrorCode

from .test_txn_coordinator import Clock, MemoryTxnLog, RecordingMarkers, _coordinator, _settle

NOW = 1_700_000_000_000
A0 = frozenset({("a", 0)})


def _no_new_id() -> int:
    raise AssertionError("no new producer id expected")


def _initialised(pid: int = 1000):
    meta = rules.init_producer_id(rules.new_transactional_id("t", pid, 60000, NOW), 60000,
                                  None, _no_new_id, NOW).target
    assert meta is not None
    return meta


def _ongoing(meta, partitions=A0):
    d = rules.add_partitions(meta, meta.producer_id, meta.producer_epoch, partitions, NOW, TV_2)
    assert d.error == ErrorCode.NONE and d.target is not None
    return d.target


def _end(meta, pid, epoch, commit, next_id=_no_new_id):
    return rules.end_transaction(meta, pid, epoch, commit, NOW + 1, TV_2, next_id)


def test_every_transaction_ends_with_the_epoch_bumped():
    meta = _initialised()                                    # epoch 0
    for epoch in range(3):
        d = _end(_ongoing(meta), 1000, epoch, commit=True)
        assert d.error == ErrorCode.NONE
        assert (d.target.state, d.target.producer_epoch) == (TxnState.PREPARE_COMMIT, epoch + 1)
        assert rules.producer_after_end(d.target) == (1000, epoch + 1)   # EndTxn v5's answer
        meta = rules.complete(d.target, NOW + 2)
        assert (meta.state, meta.producer_epoch) == (TxnState.COMPLETE_COMMIT, epoch + 1)
    # the producer's old epoch is a zombie now: its late write cannot join a transaction
    late = rules.add_partitions(meta, 1000, 2, A0, NOW, TV_2)
    assert late.error == ErrorCode.PRODUCER_FENCED


def test_the_classic_protocol_keeps_its_epoch():
    meta = _ongoing(_initialised())
    d = rules.end_transaction(meta, 1000, 0, True, NOW)
    assert d.target.producer_epoch == 0 and d.target.client_version == 0


def test_a_retried_end_is_answered_from_the_bumped_state():
    prepared = _end(_ongoing(_initialised()), 1000, 0, commit=True).target
    # markers still going out: come back later
    assert _end(prepared, 1000, 0, commit=True) == rules.Decision(
        ErrorCode.CONCURRENT_TRANSACTIONS)
    done = rules.complete(prepared, NOW + 2)
    retry = _end(done, 1000, 0, commit=True)
    assert retry == rules.Decision(ErrorCode.NONE)           # no write
    assert rules.producer_after_end(done) == (1000, 1)
    # a retry asking the other outcome, or an epoch older still, is refused
    assert _end(done, 1000, 0, commit=False).error == ErrorCode.INVALID_TXN_STATE
    assert _end(done, 1000, 5, commit=True).error == ErrorCode.PRODUCER_FENCED


def test_abort_without_a_transaction_bumps_commit_is_refused():
    meta = _initialised()
    assert _end(meta, 1000, 0, commit=True).error == ErrorCode.INVALID_TXN_STATE
    d = _end(meta, 1000, 0, commit=False)
    assert (d.target.state, d.target.producer_epoch, d.target.partitions) == (
        TxnState.PREPARE_ABORT, 1, frozenset())
    aborted = rules.complete(d.target, NOW)
    again = _end(aborted, 1000, 1, commit=False)              # current epoch: another abort
    assert again.target.producer_epoch == 2


def test_an_exhausted_epoch_moves_the_producer_to_a_new_id():
    meta = _ongoing(_initialised().with_(producer_epoch=MAX_EPOCH - 1))
    d = _end(meta, 1000, MAX_EPOCH - 1, commit=True, next_id=lambda: 2000)
    # the markers still go out under the old id, at the last epoch it has
    assert (d.target.producer_id, d.target.producer_epoch) == (1000, MAX_EPOCH)
    assert d.target.next_producer_id == 2000
    assert rules.producer_after_end(d.target) == (2000, 0)
    done = rules.complete(d.target, NOW + 2)
    assert (done.producer_id, done.producer_epoch, done.last_producer_id) == (2000, 0, 1000)
    # the producer retrying its EndTxn with the old id is answered as done
    assert _end(done, 1000, MAX_EPOCH - 1, commit=True) == rules.Decision(ErrorCode.NONE)
    assert rules.producer_after_end(done) == (2000, 0)
    assert _end(done, 1000, 5, commit=True).error == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    # and goes on with the new one
    nxt = _end(_ongoing(done), 2000, 0, commit=False)
    assert (nxt.target.producer_id, nxt.target.producer_epoch) == (2000, 1)


def test_a_fenced_v2_transaction_at_the_last_epoch_rotates_the_id():
    meta = _ongoing(_initialised().with_(producer_epoch=MAX_EPOCH - 1))
    fenced = rules.init_producer_id(meta, 60000, None, lambda: 2000, NOW)
    assert fenced.error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert (fenced.target.state, fenced.target.producer_epoch,
            fenced.target.next_producer_id) == (TxnState.PREPARE_ABORT, MAX_EPOCH, 2000)
    done = rules.complete(fenced.target, NOW)
    assert (done.producer_id, done.producer_epoch) == (2000, 0)
    # the old producer's retried InitProducerId (KIP-360) gets the new id back
    retried = rules.init_producer_id(done, 60000, (1000, MAX_EPOCH - 1), _no_new_id, NOW)
    assert (retried.target.producer_id, retried.target.producer_epoch) == (2000, 0)


def test_init_producer_id_starts_the_classic_protocol_again():
    meta = rules.complete(_end(_ongoing(_initialised()), 1000, 0, True).target, NOW)
    assert meta.client_version == TV_2
    again = rules.init_producer_id(meta, 60000, None, _no_new_id, NOW).target
    assert (again.producer_epoch, again.client_version) == (2, 0)


def test_the_epoch_never_passes_max_after_a_classic_abort_at_the_last_epoch():
    # a classic transaction at the last usable epoch, aborted by the coordinator
    # (timed out): CompleteAbort at MAX_EPOCH
    classic = rules.add_partitions(_initialised().with_(producer_epoch=MAX_EPOCH - 1), 1000,
                                   MAX_EPOCH - 1, A0, NOW).target
    done = rules.complete(rules.fence_and_abort(classic, NOW, lambda: 2000), NOW)
    assert (done.state, done.producer_epoch) == (TxnState.COMPLETE_ABORT, MAX_EPOCH)
    # an EndTxn v5 abort from the epoch before reads as a retry (as in Kafka)
    assert _end(done, 1000, MAX_EPOCH - 1, commit=False) == rules.Decision(ErrorCode.NONE)
    assert rules.producer_after_end(done) == (1000, MAX_EPOCH)
    nxt = _ongoing(done)
    # a commit cannot bump past MAX_EPOCH: fenced, not a record that cannot be written
    assert _end(nxt, 1000, MAX_EPOCH, commit=True, next_id=lambda: 2000) == rules.Decision(
        ErrorCode.PRODUCER_FENCED)
    # an abort goes through at MAX_EPOCH and moves the producer to a new id
    aborted = _end(nxt, 1000, MAX_EPOCH, commit=False, next_id=lambda: 2000).target
    assert (aborted.state, aborted.producer_epoch, aborted.next_producer_id) == (
        TxnState.PREPARE_ABORT, MAX_EPOCH, 2000)
    assert decode_value("t", encode_value(aborted, 1)).producer_epoch == MAX_EPOCH
    assert rules.producer_after_end(aborted) == (2000, 0)
    after = rules.complete(aborted, NOW + 2)
    assert (after.producer_id, after.producer_epoch) == (2000, 0)


# ------------------------------------------------------------------ TransactionLogValue v1

def _uvarint(n: int) -> bytes:
    assert n < 0x80
    return bytes([n])


def test_log_value_v1_layout_and_tagged_fields():
    meta = _ongoing(_initialised(42), frozenset({("a", 0), ("a", 1), ("b", 2)})).with_(
        producer_epoch=3, update_ms=20, start_ms=10, next_producer_id=77)
    expected = (struct.pack(">hqhib", 1, 42, 3, 60000, 1)
                + _uvarint(3)                                        # 2 topics, compact
                + _uvarint(2) + b"a" + _uvarint(3) + struct.pack(">ii", 0, 1) + b"\x00"
                + _uvarint(2) + b"b" + _uvarint(2) + struct.pack(">i", 2) + b"\x00"
                + struct.pack(">qq", 20, 10)
                + _uvarint(3)                                        # three tagged fields
                + _uvarint(0) + _uvarint(8) + struct.pack(">q", 41)  # previous producer id
                + _uvarint(1) + _uvarint(8) + struct.pack(">q", 77)  # next producer id
                + _uvarint(2) + _uvarint(2) + struct.pack(">h", 2))  # client version
    data = encode_value(meta, 1, previous_producer_id=41)
    assert data == expected
    back = decode_value("t", data)
    assert (back.producer_id, back.producer_epoch, back.partitions, back.state) == (
        42, 3, meta.partitions, TxnState.ONGOING)
    assert (back.last_producer_id, back.next_producer_id, back.client_version) == (41, 77, 2)


def test_log_value_v1_leaves_defaults_out_and_empty_partitions_null():
    meta = _initialised(42).with_(update_ms=5)
    data = encode_value(meta, 1, previous_producer_id=-1)
    assert data == (struct.pack(">hqhib", 1, 42, 0, 60000, 0) + b"\x00"
                    + struct.pack(">qq", 5, -1) + b"\x00")
    assert encode_value(meta) == encode_value(meta, 0)          # v0 as before


# ------------------------------------------------------------------ the coordinator

def test_the_coordinator_answers_the_bumped_epoch_and_marks_with_it():
    async def run():
        log, markers, clock = MemoryTxnLog(), RecordingMarkers(), Clock()
        log.epochs[0] = 7
        c = _coordinator(log, markers, clock)
        await c.start()
        await c.load_partition(0)
        init = await c.init_producer_id("t", 60000, None)
        assert (init.producer_id, init.producer_epoch) == (5000, 0)
        assert await c.add_partitions("t", 5000, 0, [("a", 0)], TV_2) == 0
        ended = await c.end_transaction("t", 5000, 0, True, TV_2)
        assert tuple(ended) == (ErrorCode.NONE, 5000, 1)
        await _settle()
        # the marker carries the bumped epoch, newer than every write of the transaction
        assert markers.sent == [(5000, 1, True, 7, A0)]
        # the record is Kafka 4's: v1 with the client's transaction version
        _, value = log.records[0][-1]
        assert value[:2] == b"\x00\x01" and decode_value("t", value).client_version == TV_2
        # a retry with the old epoch is answered the same
        assert tuple(await c.end_transaction("t", 5000, 0, True, TV_2)) == (0, 5000, 1)
        await c.shutdown()
    asyncio.run(run())


def test_the_coordinator_allocates_the_next_id_when_the_epoch_runs_out():
    async def run():
        log, markers, clock = MemoryTxnLog(), RecordingMarkers(), Clock()
        log.epochs[0] = 7
        c = _coordinator(log, markers, clock)
        await c.start()
        await c.load_partition(0)
        await c.init_producer_id("t", 60000, None)                   # producer 5000
        held = c._partitions[0].ids["t"]
        held.meta = held.meta.with_(producer_epoch=MAX_EPOCH - 1)
        assert await c.add_partitions("t", 5000, MAX_EPOCH - 1, [("a", 0)], TV_2) == 0
        ended = await c.end_transaction("t", 5000, MAX_EPOCH - 1, False, TV_2)
        assert tuple(ended) == (ErrorCode.NONE, 5001, 0)
        await _settle()
        assert markers.sent == [(5000, MAX_EPOCH, False, 7, A0)]
        assert (held.meta.state, held.meta.producer_id, held.meta.producer_epoch) == (
            TxnState.COMPLETE_ABORT, 5001, 0)
        assert await c.add_partitions("t", 5001, 0, [("a", 0)], TV_2) == 0
        await c.shutdown()
    asyncio.run(run())
