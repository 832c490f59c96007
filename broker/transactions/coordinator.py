"""The transaction coordinator (Kafka's TransactionCoordinator and
TransactionStateManager): transactional ids kept in `__transaction_state`.

A transactional id lives in partition ``partition_for(id, N)`` of
`__transaction_state`; the broker leading that partition coordinates it, and
loads the ids kept there when it takes the leadership up (the leader epoch of
that partition is the coordinator epoch stamped on markers, so a deposed
coordinator's markers are refused by partitions that saw a newer one).

Every change of a transactional id is decided by ``state`` (pure rules),
written to the log (acks=all), and only then applied in memory, so what a
client was told is always what a new coordinator reads back. While a write is
in flight the id answers CONCURRENT_TRANSACTIONS, as Kafka's pending
transition does. After PrepareCommit / PrepareAbort is written the producer is
answered, the markers go to every partition of the transaction (``markers``),
and CompleteCommit / CompleteAbort is written once all have them. A coordinator
that loads a partition resumes the markers of every transaction it finds
prepared there.

Runs on one event loop (the broker's main loop); handlers on the processor
loops reach it through a LoopBridge.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import time
from typing import Awaitable, Callable, Coroutine, Iterable, Iterator, NamedTuple, Protocol

from samsa.config import BrokerConfig
from samsa.protocol.errors import ErrorCode, ProtocolError
from samsa.protocol.model import TRANSACTION_STATE_TOPIC, TopicPartition

from ..groups.log_format import partition_for
from . import state as rules
from .log_format import decode_key, decode_value, encode_key, encode_value
from .state import TxnMetadata, TxnState

log = logging.getLogger("broker.transactions")


class TxnLogWriteError(Exception):
    """A write to `__transaction_state` did not make it (carries the error the
    producer is answered with)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class TxnLog(Protocol):
    """The coordinator's view of its partitions of `__transaction_state`."""

    def append(self, partition: int, key: bytes, value: bytes | None) -> Awaitable[None]:
        """Write one record with acks=all; raises TxnLogWriteError."""

    def read(self, partition: int) -> Iterable[tuple[bytes, bytes | None]]:
        """Every (key, value) of the partition, in log order."""

    def leader_epoch(self, partition: int) -> int | None:
        """The partition's leader epoch when this broker leads it, else None."""

    def named_leader(self, partition: int) -> bool:
        """Whether the metadata names this broker the partition's leader (it
        may not have taken the leadership up yet)."""


class MarkerWriter(Protocol):
    async def write_markers(self, producer_id: int, producer_epoch: int, commit: bool,
                            coordinator_epoch: int, partitions: frozenset[TopicPartition],
                            still_wanted: Callable[[], bool]) -> bool:
        """Write the marker into every partition (retrying until each partition
        has it, is gone, or ``still_wanted()`` turns false). False when it
        stopped before all had it."""


@dataclasses.dataclass(frozen=True)
class TxnCoordinatorConfig:
    num_partitions: int = 50
    max_timeout_ms: int = 900000
    id_expiration_ms: int = 604800000
    abort_check_interval_ms: int = 10000
    expire_check_interval_ms: int = 3600000

    @classmethod
    def from_broker_config(cls, cfg: BrokerConfig) -> "TxnCoordinatorConfig":
        return cls(cfg.transaction_state_log_num_partitions, cfg.transaction_max_timeout_ms,
                   cfg.transactional_id_expiration_ms,
                   cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms,
                   cfg.transaction_remove_expired_transaction_cleanup_interval_ms)


class InitResult(NamedTuple):
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


class DescribedTxn(NamedTuple):
    error: ErrorCode
    transactional_id: str
    metadata: TxnMetadata | None = None


class _Entry:
    """One transactional id as this coordinator holds it."""
    __slots__ = ("meta", "writing")

    def __init__(self, meta: TxnMetadata) -> None:
        self.meta = meta
        self.writing = False  # a transition is being written (Kafka's pending state)


class _Partition:
    __slots__ = ("epoch", "ids", "loaded")

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch           # coordinator epoch: the partition's leader epoch
        self.ids: dict[str, _Entry] = {}
        self.loaded = False


def _wall_ms() -> int:
    return int(time.time() * 1000)


class TransactionCoordinator:
    def __init__(self, txn_log: TxnLog, markers: MarkerWriter,
                 allocate_producer_id: Callable[[], Awaitable[int]],
                 config: TxnCoordinatorConfig, *, time_ms: Callable[[], int] = _wall_ms,
                 num_partitions: Callable[[], int] | None = None) -> None:
        self._log = txn_log
        self._markers = markers
        self._allocate = allocate_producer_id
        self.config = config
        self._time_ms = time_ms
        self._num_partitions = num_partitions or (lambda: config.num_partitions)
        self._partitions: dict[int, _Partition] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timers: list[asyncio.Task[None]] = []

    # ============================================================ lifecycle

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._timers = [
            self._loop.create_task(self._every(self.config.abort_check_interval_ms,
                                               self.abort_timed_out)),
            self._loop.create_task(self._every(self.config.expire_check_interval_ms,
                                               self.expire_ids)),
        ]

    async def shutdown(self) -> None:
        for t in self._timers:
            t.cancel()
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._timers, *self._tasks, return_exceptions=True)
        self._partitions.clear()

    async def _every(self, interval_ms: int, action: Callable[[], Awaitable[int]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            try:
                await action()
            except Exception:  # the next round tries again
                log.exception("transaction coordinator housekeeping failed")

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self._num_partitions())

    async def load_partition(self, partition: int, wait_s: float = 10.0) -> None:
        """This broker now leads ``partition`` of `__transaction_state`: read its
        transactional ids and finish the transactions found prepared. Told
        just before the leadership is taken up, it waits (up to ``wait_s``)
        for it; its ids answer COORDINATOR_LOAD_IN_PROGRESS meanwhile."""
        held = _Partition(-1)
        self._partitions[partition] = held
        deadline = asyncio.get_running_loop().time() + wait_s
        epoch = self._log.leader_epoch(partition)
        while epoch is None:
            if (asyncio.get_running_loop().time() > deadline
                    or not self._still_current(partition, held)):
                if self._still_current(partition, held):
                    del self._partitions[partition]
                return
            await asyncio.sleep(0.01)
            epoch = self._log.leader_epoch(partition)
        held.epoch = epoch
        for tid, meta in self._read(partition):
            if meta is None:
                held.ids.pop(tid, None)
            else:
                held.ids[tid] = _Entry(meta)
        if self._partitions.get(partition) is not held:
            return  # unloaded (or reloaded) while reading
        held.loaded = True
        resumed = 0
        for tid, entry in held.ids.items():
            if entry.meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                self._spawn(self._complete(partition, held, tid, entry.meta))
                resumed += 1
        log.info("loaded %d transactional id(s) of %s-%d at coordinator epoch %d%s",
                 len(held.ids), TRANSACTION_STATE_TOPIC, partition, epoch,
                 f", completing {resumed} prepared transaction(s)" if resumed else "")

    def _read(self, partition: int) -> Iterator[tuple[str, TxnMetadata | None]]:
        for key, value in self._log.read(partition):
            try:
                tid = decode_key(key)
                if tid is None:
                    continue
                yield tid, (decode_value(tid, value) if value is not None else None)
            except (ProtocolError, ValueError) as e:
                log.warning("skipping undecodable %s record: %s", TRANSACTION_STATE_TOPIC, e)

    def unload_partition(self, partition: int) -> None:
        """Another broker leads ``partition`` now; its markers still in flight
        stop (the new coordinator resumes them)."""
        self._partitions.pop(partition, None)

    # ============================================================ lookups

    def _held(self, transactional_id: str) -> tuple[ErrorCode, int, _Partition | None]:
        p = self.partition_for(transactional_id)
        held = self._partitions.get(p)
        epoch = self._log.leader_epoch(p)
        if held is None:
            if epoch is not None:
                # leading, but not loaded: the load after taking the leadership
                # up gave up (or the leadership came before this coordinator)
                self._partitions[p] = _Partition(-1)  # one load, whoever asks meanwhile
                self._spawn(self.load_partition(p))
                return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, p, None
            if self._log.named_leader(p):
                # named leader, its log still being opened: the load follows
                return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, p, None
            return ErrorCode.NOT_COORDINATOR, p, None
        if not held.loaded:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, p, None
        if epoch is None or epoch < held.epoch:
            return ErrorCode.NOT_COORDINATOR, p, None
        if epoch > held.epoch:
            # Still leading at a newer epoch (the controller changed the ISR):
            # the same leadership goes on, and markers carry the newer epoch.
            held.epoch = epoch
        return ErrorCode.NONE, p, held

    def _still_current(self, partition: int, held: _Partition) -> bool:
        return self._partitions.get(partition) is held

    # ============================================================ writes

    async def _apply(self, partition: int, held: _Partition, tid: str, entry: _Entry,
                     decision: rules.Decision) -> ErrorCode:
        """Write ``decision.target`` (if any), apply it, start its markers."""
        target = decision.target
        if target is None:
            return decision.error
        entry.writing = True
        try:
            await self._log.append(partition, encode_key(tid), encode_value(target))
        except TxnLogWriteError as e:
            log.info("transactional id %s: %s not written (%s)", tid, target.state.name, e)
            return e.code
        finally:
            entry.writing = False
        if not self._still_current(partition, held):
            return ErrorCode.NOT_COORDINATOR
        entry.meta = target
        if target.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            self._spawn(self._complete(partition, held, tid, target))
        return decision.error

    async def _complete(self, partition: int, held: _Partition, tid: str,
                        prepared: TxnMetadata) -> None:
        """Markers into every partition of the transaction, then Complete*."""
        def wanted() -> bool:
            entry = held.ids.get(tid)
            return self._still_current(partition, held) and entry is not None \
                and entry.meta is prepared
        if not await self._markers.write_markers(
                prepared.producer_id, prepared.producer_epoch,
                prepared.state == TxnState.PREPARE_COMMIT, held.epoch, prepared.partitions,
                wanted):
            return  # deposed (a newer coordinator finishes it), or no longer wanted
        delay = 0.05
        while wanted():
            entry = held.ids[tid]
            if entry.writing:
                await asyncio.sleep(delay)
                continue
            code = await self._apply(partition, held, tid, entry, rules.Decision(
                ErrorCode.NONE, rules.complete(prepared, self._time_ms())))
            if code == ErrorCode.NONE or code == ErrorCode.NOT_COORDINATOR:
                return
            await asyncio.sleep(delay)  # the log refused (ISR short): try again
            delay = min(delay * 2, 2.0)

    def _spawn(self, coro: Coroutine[object, object, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("transaction completion failed", exc_info=task.exception())

    # ============================================================ the API

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> InitResult:
        if transactional_id == "":
            return InitResult(ErrorCode.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        code, p, held = self._held(transactional_id)
        if held is None:
            return InitResult(code)
        entry = held.ids.get(transactional_id)
        fresh_id = None
        if entry is None or entry.meta.epoch_exhausted:
            fresh_id = await self._allocate()
            if not self._still_current(p, held):
                return InitResult(ErrorCode.NOT_COORDINATOR)
            entry = held.ids.get(transactional_id)
            if entry is None:
                entry = held.ids[transactional_id] = _Entry(rules.new_transactional_id(
                    transactional_id, fresh_id, timeout_ms, self._time_ms()))
        if entry.writing:
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)

        def next_id() -> int:
            if fresh_id is None:  # the epoch ran out between our check and now
                raise RuntimeError("no producer id was allocated")
            return fresh_id
        decision = rules.init_producer_id(entry.meta, timeout_ms, expected, next_id,
                                          self._time_ms())
        code = await self._apply(p, held, transactional_id, entry, decision)
        if code:
            return InitResult(code)
        return InitResult(ErrorCode.NONE, entry.meta.producer_id, entry.meta.producer_epoch)

    async def _decide(self, transactional_id: str,
                      rule: Callable[[TxnMetadata, int], rules.Decision]) -> ErrorCode:
        """A request about a transactional id this coordinator must know
        already: ``rule(its metadata, now)`` decides, then that is applied."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        code, p, held = self._held(transactional_id)
        if held is None:
            return code
        entry = held.ids.get(transactional_id)
        if entry is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if entry.writing:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return await self._apply(p, held, transactional_id, entry,
                                 rule(entry.meta, self._time_ms()))

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition]) -> ErrorCode:
        added = frozenset(partitions)
        return await self._decide(transactional_id, lambda meta, now: rules.add_partitions(
            meta, producer_id, producer_epoch, added, now))

    async def verify_partitions(self, transactional_id: str, producer_id: int,
                                producer_epoch: int, partitions: Iterable[TopicPartition]
                                ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ with verify_only (a partition leader asking,
        KIP-890): is each partition part of the producer's open transaction?"""
        wanted = list(partitions)
        code, _, held = self._held(transactional_id)
        if held is None:
            return {tp: code for tp in wanted}
        entry = held.ids.get(transactional_id)
        if entry is None or entry.meta.producer_id != producer_id:
            return {tp: ErrorCode.INVALID_PRODUCER_ID_MAPPING for tp in wanted}
        if entry.meta.producer_epoch != producer_epoch:
            return {tp: ErrorCode.PRODUCER_FENCED for tp in wanted}
        ongoing = entry.meta.state == TxnState.ONGOING
        return {tp: (ErrorCode.NONE if ongoing and tp in entry.meta.partitions
                     else ErrorCode.INVALID_TXN_STATE) for tp in wanted}

    async def end_transaction(self, transactional_id: str, producer_id: int,
                              producer_epoch: int, commit: bool) -> ErrorCode:
        return await self._decide(transactional_id, lambda meta, now: rules.end_transaction(
            meta, producer_id, producer_epoch, commit, now))

    async def describe(self, transactional_ids: Iterable[str]) -> list[DescribedTxn]:
        out = []
        for tid in transactional_ids:
            if not tid:
                out.append(DescribedTxn(ErrorCode.INVALID_REQUEST, tid))
                continue
            code, _, held = self._held(tid)
            entry = held.ids.get(tid) if held is not None else None
            if held is None:
                out.append(DescribedTxn(code, tid))
            elif entry is None or entry.meta.state == TxnState.DEAD:
                out.append(DescribedTxn(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, tid))
            else:
                out.append(DescribedTxn(ErrorCode.NONE, tid, entry.meta))
        return out

    async def list_transactions(self, states: Iterable[str], producer_ids: Iterable[int],
                          min_duration_ms: int = -1, id_pattern: str | None = None
                          ) -> tuple[list[str], list[TxnMetadata]]:
        """(unknown state names, the ids this broker coordinates matching every
        filter given): Kafka's ListTransactions. A pattern that is not a
        regular expression raises re.error."""
        names = list(states)
        wanted_states = {TxnState.from_display_name(n) for n in names} - {None}
        unknown = [n for n in names if TxnState.from_display_name(n) is None]
        pids = set(producer_ids)
        pattern = re.compile(id_pattern) if id_pattern else None
        now = self._time_ms()
        out = []
        for _, _, tid, entry in self._loaded_entries():
            m = entry.meta
            if m.state == TxnState.DEAD:
                continue
            if names and m.state not in wanted_states:
                continue
            if pids and m.producer_id not in pids:
                continue
            if min_duration_ms >= 0 and (m.state != TxnState.ONGOING
                                         or now - m.start_ms < min_duration_ms):
                continue
            if pattern is not None and not pattern.fullmatch(tid):
                continue
            out.append(m)
        return unknown, out

    # ============================================================ housekeeping

    def _loaded_entries(self) -> Iterator[tuple[int, _Partition, str, _Entry]]:
        """(partition, its holder, transactional id, entry) of every loaded
        partition, from a copy: callers await between items."""
        for p, held in list(self._partitions.items()):
            if held.loaded:
                for tid, entry in list(held.ids.items()):
                    yield p, held, tid, entry

    async def abort_timed_out(self) -> int:
        """Abort (with the epoch bumped, fencing the producer) every open
        transaction past its timeout. Returns how many."""
        now = self._time_ms()
        count = 0
        for p, held, tid, entry in self._loaded_entries():
            if entry.writing or not rules.timed_out(entry.meta, now):
                continue
            log.info("aborting the transaction of %s (producer %d epoch %d): older than "
                     "its timeout of %d ms", tid, entry.meta.producer_id,
                     entry.meta.producer_epoch, entry.meta.timeout_ms)
            code = await self._apply(p, held, tid, entry, rules.Decision(
                ErrorCode.NONE, rules.fence_and_abort(entry.meta, now)))
            count += code == ErrorCode.NONE
        return count

    async def expire_ids(self) -> int:
        """Forget transactional ids idle past transactional.id.expiration.ms
        (a tombstone, so compaction removes them from the log too)."""
        now = self._time_ms()
        count = 0
        for p, held, tid, entry in self._loaded_entries():
            if entry.writing or not rules.expired(entry.meta, now,
                                                  self.config.id_expiration_ms):
                continue
            entry.writing = True
            try:
                await self._log.append(p, encode_key(tid), None)
            except TxnLogWriteError:
                continue
            finally:
                entry.writing = False
            if self._still_current(p, held) and held.ids.get(tid) is entry:
                del held.ids[tid]
                count += 1
        return count
