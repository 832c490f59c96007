"""A transactional id's state and the rules that move it (Kafka's
TransactionMetadata and TransactionCoordinator checks), as pure functions.

Each request is decided here against the current metadata, without I/O: the
answer is either an error, an answer without a write, or the metadata to
write to `__transaction_state` first (the coordinator applies it only once
the write is replicated, as Kafka does). The coordinator around it does the
writing, the markers and the timers.

The states and their numbers are Kafka's (they are written to the log):

    Empty --AddPartitions--> Ongoing --EndTxn--> PrepareCommit/PrepareAbort
      ^                                             | markers written everywhere
      +------ (next transaction) CompleteCommit/CompleteAbort <+

An Ongoing transaction of a producer that is fenced (InitProducerId from a
new instance) or timed out is aborted with the epoch bumped, so the old
producer's next request is refused (PRODUCER_FENCED / INVALID_PRODUCER_EPOCH).

Transactions v2 (KIP-890 part 2, a client speaking EndTxn v5): every
PrepareCommit / PrepareAbort bumps the producer epoch, so the markers carry
an epoch newer than any of the transaction's data and a late batch of an
ended transaction is refused as a zombie; the producer learns the new epoch
from the EndTxn answer. Once the epoch would pass MAX_EPOCH - 1 a new
producer id is allocated at the end instead (``next_producer_id``, taken up
by Complete*: the producer continues at epoch 0 of it). Partitions join a v2
transaction implicitly: the partition leader adds them on the first
transactional write (AddPartitionsToTxn v5 from the broker).
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Callable, NamedTuple

from samsa.protocol.errors import ErrorCode
from samsa.protocol.model import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_EPOCH = 32767
# ClientTransactionVersion (Kafka's TransactionVersion feature levels): 0 and 1
# speak the classic protocol (1 only adds flexible __transaction_state
# records), 2 is KIP-890 part 2.
TV_CLASSIC = 0
TV_2 = 2


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """The name DescribeTransactions / ListTransactions use."""
        return _NAMES[self]

    @classmethod
    def from_display_name(cls, name: str) -> "TxnState | None":
        return _BY_NAME.get(name)


_NAMES = {
    TxnState.EMPTY: "Empty", TxnState.ONGOING: "Ongoing",
    TxnState.PREPARE_COMMIT: "PrepareCommit", TxnState.PREPARE_ABORT: "PrepareAbort",
    TxnState.COMPLETE_COMMIT: "CompleteCommit", TxnState.COMPLETE_ABORT: "CompleteAbort",
    TxnState.DEAD: "Dead", TxnState.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
_BY_NAME = {v: k for k, v in _NAMES.items()}
# A transactional id may expire (transactional.id.expiration.ms) only when no
# transaction is open or completing.
EXPIRABLE = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})
COMPLETED = frozenset({TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})



@dataclasses.dataclass(frozen=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = frozenset()
    start_ms: int = -1
    update_ms: int = -1
    # Not in the log record (Kafka keeps them in memory too): the producer id
    # before a rotation, and the epoch before the last bump, so a producer
    # retrying an InitProducerId whose answer it lost is recognised.
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    # v2: the producer id the producer moves to once this transaction is
    # complete (its epoch ran out), and the transaction version of the client
    # (both written to the log as TransactionLogValue v1's tagged fields).
    next_producer_id: int = NO_PRODUCER_ID
    client_version: int = TV_CLASSIC

    @property
    def epoch_exhausted(self) -> bool:
        return epoch_exhausted(self.producer_epoch)

    @property
    def bumps_epoch(self) -> bool:
        """Whether this transaction ends with an epoch bump (transactions v2)."""
        return self.client_version >= TV_2

    def with_(self, **changes) -> "TxnMetadata":
        return dataclasses.replace(self, **changes)


def epoch_exhausted(epoch: int) -> bool:
    """Kafka keeps the last epoch for fencing: a producer at MAX_EPOCH - 1 gets a
    new producer id on its next InitProducerId."""
    return epoch >= MAX_EPOCH - 1


class Decision(NamedTuple):
    """``target`` None: answer ``error`` at once. Otherwise write ``target``
    first; once written, answer ``error`` (NONE: the request's normal answer)."""
    error: ErrorCode
    target: TxnMetadata | None = None


def new_transactional_id(transactional_id: str, producer_id: int, timeout_ms: int,
                         now: int) -> TxnMetadata:
    """The metadata of an id seen for the first time (not written until its
    InitProducerId decides the first epoch)."""
    return TxnMetadata(transactional_id, producer_id, NO_PRODUCER_EPOCH, timeout_ms,
                       TxnState.EMPTY, update_ms=now)


def init_producer_id(cur: TxnMetadata, timeout_ms: int, expected: tuple[int, int] | None,
                     next_producer_id: Callable[[], int], now: int) -> Decision:
    """InitProducerId with a transactional id. ``expected``: the (producer id,
    epoch) the producer already has (v3+, KIP-360), None for a fresh producer."""
    if expected is not None and not _expected_matches(cur, expected):
        return Decision(ErrorCode.PRODUCER_FENCED)
    state = cur.state
    if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        return Decision(ErrorCode.CONCURRENT_TRANSACTIONS)  # the client retries
    if state == TxnState.ONGOING:
        # Fence the current producer: abort its transaction with the epoch
        # bumped, and let the new one retry once the abort completed (its
        # retry bumps the epoch again, or rotates the id if that exhausted it).
        return Decision(ErrorCode.CONCURRENT_TRANSACTIONS,
                        fence_and_abort(cur, now, next_producer_id))
    if state not in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
        return Decision(ErrorCode.CONCURRENT_TRANSACTIONS)
    if cur.epoch_exhausted and (expected is None or expected[1] == cur.producer_epoch):
        return Decision(ErrorCode.NONE, cur.with_(
            producer_id=next_producer_id(), producer_epoch=0,
            last_producer_id=cur.producer_id,
            last_producer_epoch=cur.producer_epoch if expected is not None else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms, state=TxnState.EMPTY, partitions=frozenset(),
            start_ms=-1, update_ms=now, next_producer_id=NO_PRODUCER_ID,
            client_version=TV_CLASSIC))
    bumped = cur.producer_epoch + 1
    if expected is None:
        epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
    elif cur.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == cur.producer_epoch:
        epoch, last_epoch = bumped, cur.producer_epoch
    elif expected[1] == cur.last_producer_epoch:
        epoch, last_epoch = cur.producer_epoch, cur.last_producer_epoch  # a retried init
    else:
        return Decision(ErrorCode.PRODUCER_FENCED)
    return Decision(ErrorCode.NONE, cur.with_(
        producer_epoch=epoch, last_producer_epoch=last_epoch, timeout_ms=timeout_ms,
        state=TxnState.EMPTY, partitions=frozenset(), start_ms=-1, update_ms=now,
        next_producer_id=NO_PRODUCER_ID, client_version=TV_CLASSIC))


def _expected_matches(cur: TxnMetadata, expected: tuple[int, int]) -> bool:
    pid, epoch = expected
    return (cur.producer_epoch == NO_PRODUCER_EPOCH or pid == cur.producer_id
            or (pid == cur.last_producer_id and epoch_exhausted(epoch)))


def fence_and_abort(cur: TxnMetadata, now: int,
                    next_producer_id: Callable[[], int] | None = None) -> TxnMetadata:
    """The coordinator aborts ``cur``'s open transaction itself (a newer producer
    instance, or the transaction timed out): PrepareAbort at a bumped epoch.
    A v2 transaction is bumped once, as its own end would be; when that uses
    up the epoch the producer id rotates on completion (``next_producer_id``
    is asked then; the coordinator allocates one for an exhausted epoch)."""
    epoch = cur.producer_epoch if cur.producer_epoch >= MAX_EPOCH else cur.producer_epoch + 1
    next_id = NO_PRODUCER_ID
    if cur.bumps_epoch and cur.epoch_exhausted and next_producer_id is not None:
        next_id = next_producer_id()
    return cur.with_(producer_epoch=epoch, last_producer_epoch=NO_PRODUCER_EPOCH,
                     state=TxnState.PREPARE_ABORT, update_ms=now, next_producer_id=next_id)


def _check_producer(cur: TxnMetadata, producer_id: int, producer_epoch: int) -> ErrorCode:
    if cur.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if cur.producer_epoch != producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    return ErrorCode.NONE


def add_partitions(cur: TxnMetadata, producer_id: int, producer_epoch: int,
                   partitions: frozenset[TopicPartition], now: int,
                   client_version: int = TV_CLASSIC) -> Decision:
    """AddPartitionsToTxn (and AddOffsetsToTxn, with the group's offsets
    partition); with ``client_version`` 2, a partition leader adding the
    partition of a v2 producer's first transactional write there."""
    code = _check_producer(cur, producer_id, producer_epoch)
    if code:
        return Decision(code)
    if cur.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        return Decision(ErrorCode.CONCURRENT_TRANSACTIONS)
    if cur.state == TxnState.ONGOING and partitions <= cur.partitions:
        return Decision(ErrorCode.NONE)  # nothing new: no write
    if cur.state not in (TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                         TxnState.COMPLETE_ABORT):
        return Decision(ErrorCode.CONCURRENT_TRANSACTIONS)
    starting = cur.state != TxnState.ONGOING
    return Decision(ErrorCode.NONE, cur.with_(
        state=TxnState.ONGOING, partitions=cur.partitions | partitions,
        start_ms=now if starting else cur.start_ms, update_ms=now,
        client_version=client_version))


def end_transaction(cur: TxnMetadata, producer_id: int, producer_epoch: int, commit: bool,
                    now: int, client_version: int = TV_CLASSIC,
                    next_producer_id: Callable[[], int] | None = None) -> Decision:
    """EndTxn from the producer: PrepareCommit / PrepareAbort, or the answer to
    a retry of one already decided. ``client_version`` 2 (EndTxn v5) follows
    the v2 rules (``end_transaction_v2``)."""
    if client_version >= TV_2:
        return end_transaction_v2(cur, producer_id, producer_epoch, commit, now,
                                  next_producer_id)
    code = _check_producer(cur, producer_id, producer_epoch)
    if code:
        return Decision(code)
    state = cur.state
    if state == TxnState.ONGOING:
        target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        return Decision(ErrorCode.NONE, cur.with_(state=target, update_ms=now,
                                                  client_version=TV_CLASSIC,
                                                  next_producer_id=NO_PRODUCER_ID))
    wanted_done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
    wanted_prepare = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    if state == wanted_done:
        return Decision(ErrorCode.NONE)  # a retry of a transaction already ended
    if state == wanted_prepare:
        return Decision(ErrorCode.CONCURRENT_TRANSACTIONS)
    return Decision(ErrorCode.INVALID_TXN_STATE)


def end_transaction_v2(cur: TxnMetadata, producer_id: int, producer_epoch: int, commit: bool,
                       now: int, next_producer_id: Callable[[], int] | None = None
                       ) -> Decision:
    """EndTxn v5 (Kafka's endTransaction for TV2). The prepare bumps the epoch;
    the producer retrying after losing the answer sends the epoch before the
    bump (or, after a producer id rotation, the old id at MAX_EPOCH - 1) and
    is answered as before. An abort is allowed with no transaction open (the
    producer cannot tell whether its first write added a partition).

                      Abort            Commit
                    retry  current   retry  current
    Empty            FENCED  bump     FENCED  INVALID_TXN_STATE
    CompleteAbort    NONE    bump     INVALID_TXN_STATE
    CompleteCommit   INVALID bump     NONE    INVALID_TXN_STATE
    """
    state = cur.state
    retry_on_overflow = (cur.last_producer_id == producer_id and cur.producer_id != producer_id
                         and producer_epoch == MAX_EPOCH - 1 and cur.producer_epoch == 0)
    retry_on_bump = cur.producer_id == producer_id and cur.producer_epoch == producer_epoch + 1
    if cur.producer_id != producer_id and not retry_on_overflow:
        return Decision(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        valid_epoch = retry_on_bump
    elif state in COMPLETED:
        valid_epoch = retry_on_bump or retry_on_overflow or producer_epoch == cur.producer_epoch
    else:
        valid_epoch = producer_epoch == cur.producer_epoch
    if not valid_epoch:
        return Decision(ErrorCode.PRODUCER_FENCED)
    retry = retry_on_bump or retry_on_overflow

    def prepare(target: TxnState, nothing_added: bool) -> Decision:
        # The epoch can already be MAX_EPOCH (a classic transaction at the last
        # usable epoch, aborted by the coordinator, then an EndTxn v5 retry
        # answered with it). It must not pass it: an abort goes through at
        # MAX_EPOCH and rotates the id, as Kafka lets it; a commit cannot
        # carry markers newer than its data, so the producer is fenced (a new
        # instance's InitProducerId aborts and rotates).
        at_max = cur.producer_epoch >= MAX_EPOCH
        if at_max and target == TxnState.PREPARE_COMMIT:
            return Decision(ErrorCode.PRODUCER_FENCED)
        next_id = NO_PRODUCER_ID
        if cur.epoch_exhausted:
            if next_producer_id is None:
                raise ValueError("an exhausted epoch needs a new producer id")
            next_id = next_producer_id()
        return Decision(ErrorCode.NONE, cur.with_(
            state=target, producer_epoch=MAX_EPOCH if at_max else cur.producer_epoch + 1,
            last_producer_epoch=cur.producer_epoch, next_producer_id=next_id,
            client_version=TV_2, start_ms=now if nothing_added else cur.start_ms,
            update_ms=now))

    if state == TxnState.ONGOING:
        return prepare(TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, False)
    if state == TxnState.PREPARE_COMMIT:
        return Decision(ErrorCode.CONCURRENT_TRANSACTIONS if commit
                        else ErrorCode.INVALID_TXN_STATE)
    if state == TxnState.PREPARE_ABORT:
        return Decision(ErrorCode.INVALID_TXN_STATE if commit
                        else ErrorCode.CONCURRENT_TRANSACTIONS)
    if state == TxnState.COMPLETE_COMMIT:
        if commit:
            return Decision(ErrorCode.NONE if retry else ErrorCode.INVALID_TXN_STATE)
        return (Decision(ErrorCode.INVALID_TXN_STATE) if retry
                else prepare(TxnState.PREPARE_ABORT, True))
    if state == TxnState.COMPLETE_ABORT:
        if not commit:
            return Decision(ErrorCode.NONE) if retry else prepare(TxnState.PREPARE_ABORT, True)
        return Decision(ErrorCode.INVALID_TXN_STATE)
    if state == TxnState.EMPTY and not commit:
        return prepare(TxnState.PREPARE_ABORT, True)
    return Decision(ErrorCode.INVALID_TXN_STATE)


def producer_after_end(meta: TxnMetadata) -> tuple[int, int]:
    """The (producer id, epoch) an EndTxn v5 answer gives the producer for
    ``meta`` (prepared or complete): the rotated id at epoch 0 when the epoch
    ran out, else the bumped epoch."""
    if meta.next_producer_id != NO_PRODUCER_ID:
        return meta.next_producer_id, 0
    return meta.producer_id, meta.producer_epoch


def complete(cur: TxnMetadata, now: int) -> TxnMetadata:
    """Every partition has its marker: CompleteCommit / CompleteAbort. A v2
    transaction whose epoch ran out hands over to its next producer id here
    (the last epoch the producer saw, MAX_EPOCH - 1, is kept to recognise its
    retries)."""
    done = (TxnState.COMPLETE_COMMIT if cur.state == TxnState.PREPARE_COMMIT
            else TxnState.COMPLETE_ABORT)
    if cur.bumps_epoch and cur.next_producer_id != NO_PRODUCER_ID:
        return cur.with_(state=done, partitions=frozenset(), update_ms=now,
                         producer_id=cur.next_producer_id, producer_epoch=0,
                         last_producer_id=cur.producer_id,
                         last_producer_epoch=MAX_EPOCH - 1,
                         next_producer_id=NO_PRODUCER_ID)
    return cur.with_(state=done, partitions=frozenset(), update_ms=now)


def timed_out(cur: TxnMetadata, now: int) -> bool:
    """An open transaction older than its timeout (transaction.timeout.ms)."""
    return cur.state == TxnState.ONGOING and cur.start_ms + cur.timeout_ms < now


def expired(cur: TxnMetadata, now: int, expiration_ms: int) -> bool:
    """transactional.id.expiration.ms: an id idle that long with no transaction
    open is forgotten."""
    return cur.state in EXPIRABLE and cur.update_ms + expiration_ms <= now
