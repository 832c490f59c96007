"""Committed offsets' flows for every group of this broker (Kafka's
OffsetMetadataManager beside its GroupMetadataManager): OffsetCommit and
TxnOffsetCommit with their writes, the settling of transactional offsets by a
marker, OffsetFetch, OffsetDelete and retention.

The rules are not here either: what a commit stores and what retention expires
are offsets.py's, and who may commit is the group type's machine's
(``commit_error``). The groups themselves, and how an event's effects are
carried out, belong to the coordinator runtime (coordinator.py), which this
reaches through the small ``GroupRuntime`` interface below. Runs on the
coordinator's event loop, as the runtime does.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from samsa.protocol.errors import ErrorCode
from samsa.protocol.model import TopicPartition

from ..network.log_limit import RateLimitedLog
from . import offsets as offset_rules
from .classic import GroupState
from .effects import Effects, GroupMachine
from .kinds import AnyGroup
from .log_format import OffsetAndMetadata
from .results import FetchedOffset, OffsetDeleteResult, OffsetFetchResult, PartitionError
from .store import OffsetStore
from .write_errors import log_store_failure, store_error

if TYPE_CHECKING:
    from .coordinator import GroupCoordinatorConfig

log = logging.getLogger("samsa.broker.groups.coordinator")  # one log for the coordinator's work

E = ErrorCode
NONE = int(E.NONE)


class GroupRuntime(Protocol):
    """What the offsets flows need of the coordinator runtime."""

    groups: dict[str, AnyGroup]

    @property
    def loaded(self) -> bool: ...

    def now_ms(self) -> int: ...

    def check(self, group_id: str | None, allow_empty: bool) -> int:
        """NONE, or the error a request for the group answers (not loaded, not ours...)."""
        ...

    def owns(self, group_id: str) -> bool: ...

    def machine(self, group: AnyGroup) -> GroupMachine: ...

    def group_for_offsets(self, group_id: str) -> AnyGroup: ...

    def apply(self, group: AnyGroup, fx: Effects) -> asyncio.Future[object] | None: ...

    async def drop_if_empty(self, group: AnyGroup) -> None: ...


def _txn_store_error(exc: BaseException) -> int:
    """TxnOffsetCommit's answer: as a commit's, except that a zombie producer
    hears it is fenced and anything unforeseen is UNKNOWN_SERVER_ERROR."""
    if getattr(exc, "error_code", None) in (E.INVALID_PRODUCER_EPOCH, E.PRODUCER_FENCED):
        return int(E.INVALID_PRODUCER_EPOCH)
    return store_error(exc, too_large=int(E.INVALID_COMMIT_OFFSET_SIZE),
                        otherwise=int(E.UNKNOWN_SERVER_ERROR))


def _drop_older_pending(group: AnyGroup, partitions: Iterable[TopicPartition]) -> None:
    """A commit or a deletion of ``partitions`` applied: the transactional
    offsets still pending for them were written before it (changes are
    applied in the order written), so their transaction's COMMIT must not
    bring them back (Kafka compares log positions; the log's replay drops
    them on any later offset record)."""
    for by_tp in group.pending_txn_offsets.values():
        for tp in partitions:
            by_tp.pop(tp, None)


class OffsetManager:
    """The committed offsets of the groups the runtime coordinates, and their writes."""

    def __init__(self, runtime: GroupRuntime, store: OffsetStore,
                 config: GroupCoordinatorConfig) -> None:
        self._runtime = runtime
        self.store = store
        self.config = config
        # group id -> futures of offset commits accepted but still being stored.
        # OffsetFetch waits for them: a rebalance can complete while a commit that
        # was valid for the previous generation is being written, and the new owner
        # of a partition must see that commit when it asks where to start.
        self._storing_commits: dict[str, set[asyncio.Future]] = {}
        # group id -> the future of its offset change written last: the next
        # one is applied only after it (see _in_order)
        self._last_commit: dict[str, asyncio.Future] = {}
        self._refusal_log = RateLimitedLog(log)
        # producer id -> ids of groups holding its pending transactional offsets,
        # so a marker settles them without a walk over every group
        self._txn_groups: dict[int, set[str]] = {}

    def add_loaded_pending(self, group: AnyGroup, producer_id: int,
                           offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        """A transaction's offsets read back from the log, still waiting for its marker."""
        group.pending_txn_offsets.setdefault(producer_id, {}).update(offsets)
        self._txn_groups.setdefault(producer_id, set()).add(group.group_id)

    def committed_offsets(self) -> dict[str, dict[tuple[str, int], int]]:
        """Read-only copy of the committed offsets of the groups this broker
        coordinates: {group id: {(topic, partition): offset}}. For metrics,
        which scrape from another thread: it only copies (list() of a dict
        view is one step under the GIL), never awaits or changes anything."""
        return {gid: {tp: om.offset for tp, om in list(g.offsets.items())}
                for gid, g in list(self._runtime.groups.items())
                if not g.is_(GroupState.DEAD) and self._runtime.owns(gid)}

    async def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                             group_instance_id: str | None,
                             offsets: Sequence[tuple[str, int, int, int, str | None]],
                             retention_ms: int | None = None) -> list[PartitionError]:
        """OffsetCommit: offsets are (topic, partition, offset, leader_epoch, metadata).

        generation_id -1 with an empty member id is a commit from outside group
        management (a "simple" consumer, or admin tools): allowed only while the
        group has no members. retention_ms: OffsetCommit v2-v4 retention_time_ms
        (-1/None = broker default).
        """
        member_id = member_id or ""
        offsets = list(offsets)

        err = self._runtime.check(group_id, allow_empty=True)
        if err:
            return offset_rules.every_partition(offsets, err)
        group = self._runtime.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # a member of a generation we never had (or a group we deleted)
                return self._refuse_commit(group_id, offsets, int(E.ILLEGAL_GENERATION),
                                           generation_id, member_id, "the group does not exist")
            # outside group management: a "simple" group that only keeps offsets
            group = self._runtime.group_for_offsets(group_id)
        machine = self._runtime.machine(group)
        err = machine.commit_error(group, generation_id, member_id, group_instance_id)
        if err:
            return self._refuse_commit(group_id, offsets, err, generation_id, member_id,
                                       f"the group is {group.state}, generation "
                                       f"{group.generation_id}")
        if member_id in group.members:
            self._runtime.apply(group, machine.offsets_committed(group, member_id))

        now = self._runtime.now_ms()
        codes, entries = offset_rules.offset_entries(
            offsets, now, offset_rules.expire_at(now, retention_ms),
            self.config.offset_metadata_max_bytes)
        if entries:
            def apply(live: AnyGroup) -> None:
                live.offsets.update(entries)
                _drop_older_pending(live, entries)
            error = await self._in_order(
                group_id, lambda: self.store.store_offsets(group_id, entries), apply)
            if error is not None:
                log_store_failure("storing offsets", group_id, error)
                code = store_error(error, too_large=int(E.INVALID_COMMIT_OFFSET_SIZE))
                for tp in entries:
                    codes[tp] = code
        return [PartitionError(t, p, codes[(t, p)]) for t, p, *_ in offsets]

    async def _in_order(self, group_id: str, write: Callable[[], Awaitable[None]],
                        apply: Callable[[AnyGroup], None]) -> Exception | None:
        """``write`` a change of the group's offsets (a commit, plain or
        transactional, or a deletion), then ``apply`` it to the group if it
        was written and the group is still here. Returns the write's error.

        A group's offset changes are written in the order they come (a
        connection's in the order sent: request_order.py) and applied in
        that order, each after the one written before it: the replication of
        one may be answered after the next one's (an ISR shrunk between the
        two writes answers the later one at once), and the group must keep
        the newer offset, or lose a deleted one to a commit written after
        the deletion. Meanwhile the change counts as in flight
        (``commits_in_flight``, ``checked_after_commits``).

        (Only the broker's stop cancels a request being handled, a client
        that goes does not: a change written is applied, as in Kafka.)"""
        storing = asyncio.get_running_loop().create_future()
        self._storing_commits.setdefault(group_id, set()).add(storing)
        before = self._last_commit.get(group_id)
        self._last_commit[group_id] = storing
        try:
            error: Exception | None = None
            try:
                await write()  # (appended before its first wait: see ConsumerOffsetsLog)
            except Exception as e:  # noqa: BLE001 - the caller answers it
                error = e
            if before is not None and not before.done():
                await asyncio.wait([before])  # (not cancelled with this one)
            live = self._runtime.groups.get(group_id) if error is None else None
            if live is not None:
                apply(live)
            return error
        finally:
            pending = self._storing_commits.get(group_id)
            if pending is not None:
                pending.discard(storing)
                if not pending:
                    del self._storing_commits[group_id]
            if self._last_commit.get(group_id) is storing:
                del self._last_commit[group_id]
            storing.set_result(None)

    async def _delete_in_order(self, group_id: str,
                               partitions: list[TopicPartition]) -> Exception | None:
        """Delete these offsets of the group (tombstones), in order with its
        commits (``_in_order``): a commit written after the tombstones keeps
        its offset. Returns the write's error."""
        def apply(live: AnyGroup) -> None:
            for tp in partitions:
                live.offsets.pop(tp, None)
            _drop_older_pending(live, partitions)
        return await self._in_order(
            group_id, lambda: self.store.delete_offsets(group_id, partitions), apply)

    def commits_in_flight(self, group_id: str) -> bool:
        """Some change of the group's offsets (a commit, plain or
        transactional, or a deletion) is being written (``_in_order``)."""
        return bool(self._storing_commits.get(group_id))

    async def checked_after_commits(self, group_id: str, allow_empty: bool) -> int:
        """The coordinator's check of the group (``runtime.check``), made
        again once the group's commits being written now are applied (or
        failed): what reads or deletes its offsets sees every commit handed
        in before it (a connection's requests go on in the order sent: a
        fetch or a deletion pipelined behind a commit must find it), and a
        commit waits for the ISR, during which the partition may have moved
        (its groups dropped here). A group that is not ours answers at once."""
        err = self._runtime.check(group_id, allow_empty=allow_empty)
        pending = self._storing_commits.get(group_id)
        if err or not pending:
            return err
        await asyncio.wait(list(pending))
        return self._runtime.check(group_id, allow_empty=allow_empty)

    async def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                 generation_id: int, member_id: str,
                                 group_instance_id: str | None,
                                 offsets: Sequence[tuple[str, int, int, int, str | None]]
                                 ) -> list[PartitionError]:
        """TxnOffsetCommit: offsets written in the producer's transaction, kept
        pending until its marker (complete_txn_offsets). The member fields
        (v3+, KIP-447) are checked when given; generation -1 with no member
        is a producer outside group management, always allowed (as Kafka)."""
        member_id = member_id or ""
        offsets = list(offsets)

        err = self._runtime.check(group_id, allow_empty=True)
        if err:
            return offset_rules.every_partition(offsets, err)
        group = self._runtime.group_for_offsets(group_id)
        err = self._runtime.machine(group).commit_error(group, generation_id, member_id,
                                                group_instance_id, transactional=True)
        if err:
            return self._refuse_commit(group_id, offsets, err, generation_id, member_id,
                                       f"transactional, the group is {group.state}, "
                                       f"generation {group.generation_id}")
        codes, entries = offset_rules.offset_entries(offsets, self._runtime.now_ms(), None,
                                                     self.config.offset_metadata_max_bytes)
        if entries:
            def apply(live: AnyGroup) -> None:
                live.pending_txn_offsets.setdefault(producer_id, {}).update(entries)
                self._txn_groups.setdefault(producer_id, set()).add(group_id)
            error = await self._in_order(
                group_id, lambda: self.store.store_offsets(group_id, entries,
                                                           (producer_id, producer_epoch)),
                apply)
            if error is not None:
                code = _txn_store_error(error)
                log_store_failure("storing transactional offsets", group_id, error)
                for tp in entries:
                    codes[tp] = code
        return [PartitionError(t, p, codes[(t, p)]) for t, p, *_ in offsets]

    async def complete_txn_offsets(self, partition: int, producer_id: int,
                                   committed: bool) -> None:
        """The producer's transaction marker landed in offsets partition
        ``partition``: its pending offsets there take effect, or are dropped."""
        gids = self._txn_groups.get(producer_id, set())
        for gid in [g for g in gids if self.store.partition_for(g) == partition]:
            gids.discard(gid)
            group = self._runtime.groups.get(gid)
            if group is None:
                continue
            settled = group.pending_txn_offsets.pop(producer_id, None)
            if settled and committed:
                group.offsets.update(settled)
            if settled is not None:
                await self._runtime.drop_if_empty(group)
        if not gids:
            self._txn_groups.pop(producer_id, None)

    def _refuse_commit(self, group_id: str, offsets: list, code: int, generation_id: int,
                       member_id: str, why: str) -> list[PartitionError]:
        """Every partition of a refused commit answers ``code``; the refusal
        is logged (at most a line per error code every interval), since
        a client that ignores the answer otherwise loses its offsets silently."""
        self._refusal_log.info(
            f"commit-refused:{code}",
            "group %s: offset commit (generation %d, member %r) refused with %s: %s",
            group_id, generation_id, member_id, ErrorCode(code).name, why)
        return offset_rules.every_partition(offsets, code)

    async def fetch_offsets(self, group_id: str,
                            partitions: Iterable[tuple[str, int]] | None,
                            require_stable: bool = False, member_id: str | None = None,
                            member_epoch: int = -1) -> OffsetFetchResult:
        """OffsetFetch; partitions None = every committed offset of the group.
        Nothing committed -> offset -1, leader_epoch -1, metadata "", error NONE.
        ``require_stable`` (v7+, KIP-447): a partition with a transactional
        commit still open answers UNSTABLE_OFFSET_COMMIT, which clients retry.
        member_id/member_epoch (v9+, KIP-848): a consumer group's member
        asking is checked as Kafka's ConsumerGroup.validateOffsetFetch does."""
        err = await self.checked_after_commits(group_id, allow_empty=True)
        if err:
            return OffsetFetchResult(err, [])
        group = self._runtime.groups.get(group_id)
        if group is not None and not group.is_(GroupState.DEAD):
            err = self._runtime.machine(group).fetch_error(group, member_id, member_epoch)
            if err:
                return OffsetFetchResult(err, [])
        committed = group.offsets if group is not None and not group.is_(GroupState.DEAD) else {}
        if partitions is None:
            partitions = sorted(committed)
        unstable: set[tuple[str, int]] = set()
        if require_stable and group is not None:
            for by_tp in group.pending_txn_offsets.values():
                unstable.update(by_tp)
        out = []
        for t, p in partitions:
            om = committed.get((t, p))
            if (t, p) in unstable:
                out.append(FetchedOffset(t, p, -1, -1, "", int(E.UNSTABLE_OFFSET_COMMIT)))
            elif om is None:
                out.append(FetchedOffset(t, p, -1, -1, "", NONE))
            else:
                out.append(FetchedOffset(t, p, om.offset, om.leader_epoch, om.metadata, NONE))
        return OffsetFetchResult(NONE, out)

    async def delete_offsets(self, group_id: str,
                             partitions: Iterable[tuple[str, int]]) -> OffsetDeleteResult:
        """OffsetDelete (KIP-496). Refuses topics a live consumer group subscribes to."""
        partitions = list(partitions)
        # (a commit handed in before is deleted too)
        err = await self.checked_after_commits(group_id, allow_empty=False)
        if err:
            return OffsetDeleteResult(err)
        group = self._runtime.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return OffsetDeleteResult(int(E.GROUP_ID_NOT_FOUND))
        err, codes = self._runtime.machine(group).offsets_deletable(group, partitions)
        if err:
            return OffsetDeleteResult(err)
        eligible = [tp for tp in partitions if codes[tp] == NONE]
        present = [tp for tp in dict.fromkeys(eligible) if tp in group.offsets]
        if present:
            error = await self._delete_in_order(group_id, present)
            if error is not None:
                log_store_failure("deleting offsets", group_id, error)
                for tp in eligible:
                    codes[tp] = int(E.COORDINATOR_NOT_AVAILABLE)
                present = []
        if present:
            await self._runtime.drop_if_empty(group)
        return OffsetDeleteResult(NONE, [PartitionError(t, p, codes[(t, p)])
                                         for t, p in partitions])

    async def expire_offsets(self, now_ms: int | None = None) -> int:
        """Drop offsets past retention (call every offsets.retention.check.interval.ms),
        as offsets.expired decides with the base time and kept topics the
        group's machine gives (KIP-211). Returns how many went."""
        if not self._runtime.loaded:
            return 0
        now = self._runtime.now_ms() if now_ms is None else now_ms
        removed = 0
        for group in list(self._runtime.groups.values()):
            gid = group.group_id
            if (self._runtime.groups.get(gid) is not group
                    or self._runtime.check(gid, allow_empty=True)):
                continue  # gone, replaced or no longer ours while the pass wrote
            if self.commits_in_flight(gid):
                # (this pass would judge offsets a commit is replacing, and
                # could drop the group its first commit is being written to:
                # the next pass looks again)
                continue
            condition = self._runtime.machine(group).expiry(group)
            if condition is None:
                continue
            expired = offset_rules.expired(group.offsets, now, self.config.offsets_retention_ms,
                                           *condition)
            if expired:
                error = await self._delete_in_order(group.group_id, expired)
                if error is not None:
                    log_store_failure("expiring offsets", group.group_id, error)
                    continue
                removed += len(expired)
            await self._runtime.drop_if_empty(group)
        return removed
