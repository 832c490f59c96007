"""Where the coordinator persists committed offsets and group metadata.

One interface, `OffsetStore`, so the coordinator does not care whether state
goes to the `__consumer_offsets` log (the embedded default, `ConsumerOffsetsLog`)
or, later, to ZooKeeper. Every method but ``partition_for`` is a coroutine,
always awaited: a write that waits for the ISR (or a store doing network I/O
on a thread) does not block the coordinator's event loop, and the coordinator
has one way to call its store.
A store signals failure by raising; the coordinator answers the request with
the write's error code (COORDINATOR_NOT_AVAILABLE when it has none) and leaves
its in-memory state as it was.
"""
from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple, Protocol, TypeAlias

from samsa.protocol.errors import ProtocolError
# OFFSETS_TOPIC: re-exported, the package and the locator take it from here
from samsa.protocol.model import OFFSETS_TOPIC as OFFSETS_TOPIC, TopicPartition

from .consumer import records as consumer_records
from .share import records as share_records
from .log_format import (
    GroupKey,
    GroupRecord,
    OffsetAndMetadata,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
    partition_for,
)

log = logging.getLogger(__name__)

# group_id -> {(topic, partition): OffsetAndMetadata}
OffsetsByGroup = dict[str, dict[TopicPartition, OffsetAndMetadata]]
# group_id -> producer id -> offsets committed in its still open transaction
PendingTxnOffsets = dict[str, dict[int, dict[TopicPartition, OffsetAndMetadata]]]


class TxnMarker(NamedTuple):
    """A transaction marker met while reading the offsets log: the producer's
    transactional offset commits before it take effect (committed) or not."""
    producer_id: int
    committed: bool


class TxnRecord(NamedTuple):
    """A record written in a transaction (TxnOffsetCommit): pending until its
    producer's marker."""
    key: bytes
    value: bytes | None
    producer_id: int

class ConsumerGroupRecords(NamedTuple):
    """A KIP-848 consumer group as its records in the log say (the last value
    of each key; consumer/records.py reads them); beside the classic groups'
    GroupRecords in what a load returns."""
    group_id: str
    records: dict[bytes, bytes]


class ShareGroupRecords(NamedTuple):
    """A KIP-932 share group as its records in the log say (the last value
    of each key; share/records.py reads them); beside the other groups in
    what a load returns."""
    group_id: str
    records: dict[bytes, bytes]


# what a load returns of each group, by id
LoadedGroups = dict[str, GroupRecord | ConsumerGroupRecords | ShareGroupRecords]

DEFAULT_OFFSETS_TOPIC_PARTITIONS = 50


class OffsetStore(Protocol):
    async def load(self, partition: int | None = None
                   ) -> tuple[OffsetsByGroup, LoadedGroups, PendingTxnOffsets]:
        """All committed offsets, all group records and the transactional
        offset commits whose transaction is still open, as of the last write
        (only those of the groups kept in ``partition`` when given)."""

    def partition_for(self, group_id: str) -> int:
        """The partition of the offsets topic that keeps the group."""

    async def store_offsets(self, group_id: str,
                            entries: Mapping[TopicPartition, OffsetAndMetadata],
                            producer: tuple[int, int] | None = None) -> None:
        """Persist these offsets of the group (replacing earlier commits);
        ``producer`` (id, epoch): written in that producer's transaction."""

    async def store_group(self, record: GroupRecord) -> None:
        """Persist the group's metadata (generation, leader, members, assignments)."""

    async def delete_offsets(self, group_id: str,
                             partitions: Iterable[TopicPartition]) -> None:
        """Forget these committed offsets of the group."""

    async def store_records(self, group_id: str,
                            entries: list[tuple[bytes, bytes | None]]) -> None:
        """Persist these records of the group (a KIP-848 consumer group's
        state; None: a tombstone) in one batch."""

    async def delete_group(self, group_id: str,
                           partitions: Iterable[TopicPartition]) -> None:
        """Forget the group's metadata and these (all its) committed offsets."""


Entry = tuple[bytes, "bytes | None"]
# What a read of the log yields: plain records, records of a transaction, markers.
LogItem: TypeAlias = "Entry | TxnRecord | TxnMarker"


class ConsumerOffsetsLog:
    """An OffsetStore on the `__consumer_offsets` topic, in Kafka's record formats.

    append_fn(partition, [(key, value_or_None), ...]) appends one batch of records
    to that partition of `__consumer_offsets` (atomically, like Kafka, so a
    multi-partition commit is all-or-nothing); read_all_fn() yields every
    (key, value_or_None) of the topic in log order (per partition order is what
    matters: all records of one group live in one partition).

    The broker integrator builds these from protocol.records (build_batch /
    iter_records) and storage.Log; tests pass in-memory lists.
    """

    def __init__(self, append_fn: Callable[..., object],
                 read_all_fn: Callable[[], Iterable[LogItem]],
                 num_partitions: int = DEFAULT_OFFSETS_TOPIC_PARTITIONS,
                 read_partition_fn: Callable[[int], Iterable[LogItem]] | None = None) -> None:
        """read_partition_fn(p): the records of one partition (a coordinator
        taking over that partition loads it alone); without it, read_all_fn's
        records are filtered."""
        self._append = append_fn
        self._read_all = read_all_fn
        self._read_partition = read_partition_fn
        self.num_partitions = num_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    async def load(self, partition: int | None = None
                   ) -> tuple[OffsetsByGroup, LoadedGroups, PendingTxnOffsets]:
        return self.replay(partition)

    def replay(self, partition: int | None = None
               ) -> tuple[OffsetsByGroup, LoadedGroups, PendingTxnOffsets]:
        """Replay the log (one partition of it when given): the last value per
        key wins, a tombstone deletes. Offsets written in a transaction wait
        for its marker: applied on COMMIT, dropped on ABORT, and returned as
        pending when the log holds no marker yet.

        A record that does not decode is logged and skipped: one bad record
        must not keep the coordinator (and every group) from loading.
        """
        offsets: OffsetsByGroup = {}
        groups: LoadedGroups = {}
        pending: PendingTxnOffsets = {}
        # producer id -> groups it has pending offsets in (to settle on its marker)
        by_producer: dict[int, set[str]] = {}
        if partition is None:
            records = self._read_all()
        elif self._read_partition is not None:
            records = self._read_partition(partition)
        else:
            records = self._read_all()
        for item in records:
            if isinstance(item, TxnMarker):
                for gid in by_producer.pop(item.producer_id, ()):
                    settled = pending.get(gid, {}).pop(item.producer_id, {})
                    if not pending.get(gid, True):
                        del pending[gid]
                    if item.committed:
                        offsets.setdefault(gid, {}).update(settled)
                continue
            txn_producer = item.producer_id if isinstance(item, TxnRecord) else -1
            key_bytes, value = item[0], item[1]
            if key_bytes is None:
                continue
            try:
                key = decode_key(key_bytes)
                if key is None and txn_producer < 0 and \
                        consumer_records.record_type(key_bytes) in consumer_records.RECORD_TYPES:
                    self._replay_consumer_record(groups, key_bytes, value, partition)
                    continue
                if key is None and txn_producer < 0 and \
                        share_records.record_type(key_bytes) in share_records.RECORD_TYPES:
                    self._replay_share_record(groups, key_bytes, value, partition)
                    continue
                if key is None:
                    continue  # a record type the classic coordinator does not keep
                if partition is not None and self.partition_for(key.group) != partition:
                    continue
                if txn_producer >= 0:
                    if isinstance(key, OffsetKey) and value is not None:
                        pending.setdefault(key.group, {}).setdefault(txn_producer, {})[
                            (key.topic, key.partition)] = decode_offset_value(value)
                        by_producer.setdefault(txn_producer, set()).add(key.group)
                    continue
                if isinstance(key, OffsetKey):
                    tp = (key.topic, key.partition)
                    # a plain commit supersedes an older transactional one of
                    # the same partition, whatever its marker says later
                    for by_tp in pending.get(key.group, {}).values():
                        by_tp.pop(tp, None)
                    if value is None:
                        committed = offsets.get(key.group)
                        if committed is not None:
                            committed.pop(tp, None)
                            if not committed:
                                del offsets[key.group]
                    else:
                        offsets.setdefault(key.group, {})[tp] = decode_offset_value(value)
                elif isinstance(key, GroupKey):
                    if value is None:
                        if isinstance(groups.get(key.group), GroupRecord):
                            groups.pop(key.group, None)
                    else:
                        groups[key.group] = decode_group_value(key.group, value)
            except ProtocolError as e:
                log.warning("skipping undecodable %s record: %s", OFFSETS_TOPIC, e)
        return offsets, groups, pending

    def _replay_share_record(self, groups: LoadedGroups, key_bytes: bytes,
                             value: bytes | None, partition: int | None) -> None:
        _, group_id = share_records.decode_key(bytes(key_bytes))
        self._replay_group_record(groups, ShareGroupRecords, group_id, key_bytes, value, partition)

    def _replay_consumer_record(self, groups: LoadedGroups,
                                key_bytes: bytes, value: bytes | None,
                                partition: int | None) -> None:
        _, group_id, _ = consumer_records.decode_key(bytes(key_bytes))
        self._replay_group_record(groups, ConsumerGroupRecords, group_id, key_bytes, value,
                                  partition)

    def _replay_group_record(self, groups: LoadedGroups,
                             kind: type[ShareGroupRecords] | type[ConsumerGroupRecords],
                             group_id: str, key_bytes: bytes, value: bytes | None,
                             partition: int | None) -> None:
        """A keyed record of a group's own (the last value of each key wins, a
        tombstone removes its key, a group with no keys left is gone)."""
        if partition is not None and self.partition_for(group_id) != partition:
            return
        found = groups.get(group_id)
        if not isinstance(found, kind):
            if value is None:
                return
            found = groups[group_id] = kind(group_id, {})
        if value is None:
            found.records.pop(bytes(key_bytes), None)
            if not found.records:
                del groups[group_id]
        else:
            found.records[bytes(key_bytes)] = bytes(value)

    async def _write(self, partition: int, recs: list[Entry],
                     producer: tuple[int, int] | None = None) -> None:
        """One batch to the partition. append_fn answers None once written, or
        an awaitable while the write waits for the ISR (the partition layer
        does not make a coroutine for the common case): awaited here, the one
        place that knows."""
        written = (self._append(partition, recs) if producer is None
                   else self._append(partition, recs, producer))
        if inspect.isawaitable(written):
            await written

    async def store_offsets(self, group_id: str,
                            entries: Mapping[TopicPartition, OffsetAndMetadata],
                            producer: tuple[int, int] | None = None) -> None:
        recs: list[Entry] = [(encode_offset_key(group_id, t, p), encode_offset_value(om))
                for (t, p), om in entries.items()]
        if recs:
            await self._write(self.partition_for(group_id), recs, producer)

    async def store_group(self, record: GroupRecord) -> None:
        await self._write(self.partition_for(record.group_id),
                          [(encode_group_key(record.group_id), encode_group_value(record))])

    async def store_records(self, group_id: str,
                            entries: list[tuple[bytes, bytes | None]]) -> None:
        if entries:
            await self._write(self.partition_for(group_id), list(entries))

    async def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        recs: list[Entry] = [(encode_offset_key(group_id, t, p), None) for t, p in partitions]
        if recs:
            await self._write(self.partition_for(group_id), recs)

    async def delete_group(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        # offsets first, group tombstone last: the same order Kafka writes them
        recs: list[Entry] = [(encode_offset_key(group_id, t, p), None) for t, p in partitions]
        recs.append((encode_group_key(group_id), None))
        await self._write(self.partition_for(group_id), recs)
