"""The transaction coordinator's rules (broker/transactions/state.py) and its
log format, without a broker: each case is a request a producer can send."""
from __future__ import annotations

import struct

import pytest

from samsa.broker.transactions import state as rules
from samsa.broker.transactions.log_format import decode_key, decode_value, encode_key, encode_value
from samsa.broker.transactions.state import TxnMetadata, TxnState
from samsa.protocol.errors import ErrorCode

NOW = 1_700_000_000_000


def _fresh(tid="t", pid=1000, timeout=60000):
    return rules.new_transactional_id(tid, pid, timeout, NOW)


def _no_new_id():
    raise AssertionError("no new producer id expected")


def _init(meta, expected=None, timeout=60000, next_id=_no_new_id):
    return rules.init_producer_id(meta, timeout, expected, next_id, NOW)


def test_first_init_gives_epoch_zero_and_each_init_bumps_it():
    d = _init(_fresh())
    assert d.error == ErrorCode.NONE and d.target.producer_epoch == 0
    assert d.target.state == TxnState.EMPTY
    d2 = _init(d.target)
    assert d2.target.producer_id == 1000 and d2.target.producer_epoch == 1


def test_init_while_a_transaction_is_open_aborts_it_at_a_bumped_epoch():
    meta = _init(_fresh()).target
    ongoing = rules.add_partitions(meta, 1000, 0, frozenset({("a", 0)}), NOW).target
    d = _init(ongoing)
    assert d.error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert d.target.state == TxnState.PREPARE_ABORT
    assert d.target.producer_epoch == 1          # the old producer (epoch 0) is fenced
    assert d.target.partitions == {("a", 0)}     # the markers go where it wrote


def test_init_while_completing_asks_the_client_to_retry_without_a_write():
    meta = _init(_fresh()).target.with_(state=TxnState.PREPARE_COMMIT)
    assert _init(meta) == rules.Decision(ErrorCode.CONCURRENT_TRANSACTIONS)


def test_exhausted_epoch_rotates_the_producer_id():
    meta = _init(_fresh()).target.with_(producer_epoch=rules.MAX_EPOCH - 1)
    d = _init(meta, next_id=lambda: 2000)
    assert (d.target.producer_id, d.target.producer_epoch) == (2000, 0)
    assert d.target.last_producer_id == 1000


def test_kip360_expected_epoch_bumps_retries_and_fences():
    meta = _init(_fresh()).target                       # epoch 0
    bumped = _init(meta, expected=(1000, 0)).target     # epoch 1, last epoch 0
    assert (bumped.producer_epoch, bumped.last_producer_epoch) == (1, 0)
    # the producer lost the answer and retries with its old epoch: same answer
    retry = _init(bumped, expected=(1000, 0)).target
    assert retry.producer_epoch == 1
    # an id this transactional id never had is a zombie
    assert _init(bumped, expected=(999, 5)).error == ErrorCode.PRODUCER_FENCED
    assert _init(bumped, expected=(1000, 7)).error == ErrorCode.PRODUCER_FENCED


def test_add_partitions_checks_the_producer_and_starts_the_clock_once():
    meta = _init(_fresh()).target
    assert rules.add_partitions(meta, 999, 0, frozenset({("a", 0)}), NOW).error == \
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert rules.add_partitions(meta, 1000, 3, frozenset({("a", 0)}), NOW).error == \
        ErrorCode.PRODUCER_FENCED
    first = rules.add_partitions(meta, 1000, 0, frozenset({("a", 0)}), NOW).target
    assert first.state == TxnState.ONGOING and first.start_ms == NOW
    more = rules.add_partitions(first, 1000, 0, frozenset({("b", 1)}), NOW + 5).target
    assert more.partitions == {("a", 0), ("b", 1)} and more.start_ms == NOW
    # nothing new: answered without a write
    assert rules.add_partitions(more, 1000, 0, frozenset({("a", 0)}), NOW + 9) == \
        rules.Decision(ErrorCode.NONE)


def test_end_transaction_and_its_retries():
    meta = _init(_fresh()).target
    ongoing = rules.add_partitions(meta, 1000, 0, frozenset({("a", 0)}), NOW).target
    prepared = rules.end_transaction(ongoing, 1000, 0, True, NOW).target
    assert prepared.state == TxnState.PREPARE_COMMIT
    assert rules.end_transaction(prepared, 1000, 0, True, NOW).error == \
        ErrorCode.CONCURRENT_TRANSACTIONS
    assert rules.end_transaction(prepared, 1000, 0, False, NOW).error == \
        ErrorCode.INVALID_TXN_STATE
    done = rules.complete(prepared, NOW)
    assert done.state == TxnState.COMPLETE_COMMIT and not done.partitions
    assert rules.end_transaction(done, 1000, 0, True, NOW) == rules.Decision(ErrorCode.NONE)
    assert rules.end_transaction(done, 1000, 0, False, NOW).error == ErrorCode.INVALID_TXN_STATE
    assert rules.end_transaction(meta, 1000, 0, True, NOW).error == ErrorCode.INVALID_TXN_STATE


def test_timeouts_and_expiry():
    meta = _init(_fresh(), timeout=1000).target
    ongoing = rules.add_partitions(meta, 1000, 0, frozenset({("a", 0)}), NOW).target
    assert not rules.timed_out(ongoing, NOW + 1000)
    assert rules.timed_out(ongoing, NOW + 1001)
    aborted = rules.fence_and_abort(ongoing, NOW + 1001)
    assert aborted.state == TxnState.PREPARE_ABORT and aborted.producer_epoch == 1
    assert not rules.expired(ongoing, NOW + 10**9, 1000)       # open: never expires
    assert rules.expired(meta, NOW + 1000, 1000)


# ---------------------------------------------------------------- log format

def test_key_is_version_0_and_the_id():
    assert encode_key("tx-1") == b"\x00\x00\x00\x04tx-1"
    assert decode_key(encode_key("tx-1")) == "tx-1"
    assert decode_key(b"\x00\x01\x00\x01x") is None  # a key version we do not know


def test_value_v0_layout_byte_for_byte():
    meta = TxnMetadata("t", 42, 3, 60000, TxnState.ONGOING,
                       frozenset({("b", 2), ("a", 1), ("a", 0)}), start_ms=10, update_ms=20)
    expected = (struct.pack(">hqhib", 0, 42, 3, 60000, 1)
                + struct.pack(">i", 2)
                + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 1)
                + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 2)
                + struct.pack(">qq", 20, 10))
    assert encode_value(meta) == expected
    back = decode_value("t", expected)
    assert back == meta


def test_empty_state_writes_null_partitions():
    meta = TxnMetadata("t", 42, 0, 60000, TxnState.EMPTY, update_ms=5)
    data = encode_value(meta)
    assert data[2 + 8 + 2 + 4 + 1:][:4] == struct.pack(">i", -1)
    assert decode_value("t", data) == meta


def test_flexible_v1_value_is_read():
    # v1: compact strings/arrays (length + 1 as unsigned varint), tag buffers
    body = (struct.pack(">hqhib", 1, 7, 2, 1000, 4)
            + bytes([2])                     # one topic
            + bytes([2]) + b"x"              # "x"
            + bytes([2]) + struct.pack(">i", 3)
            + bytes([0])                     # topic's tag buffer
            + struct.pack(">qq", 99, 98)
            + bytes([0]))                    # top-level tag buffer
    meta = decode_value("t", body)
    assert (meta.producer_id, meta.producer_epoch, meta.state) == (7, 2,
                                                                    TxnState.COMPLETE_COMMIT)
    assert meta.partitions == {("x", 3)} and (meta.update_ms, meta.start_ms) == (99, 98)


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x00\x00", b"\x00\x09" + b"\x00" * 30,
                                  struct.pack(">hqhib", 0, 1, 1, 1, 99) + b"\x00" * 24])
def test_bad_values_raise_protocol_errors(data):
    from samsa.protocol.errors import ProtocolError
    with pytest.raises(ProtocolError):
        decode_value("t", data)
