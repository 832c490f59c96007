"""The two functions ConsumerOffsetsLog needs, over storage.Log partitions.

Kept apart from store.py so the store stays testable with plain lists, while
the broker gets a ready-made bridge to its partition logs: each append is ONE
v2 record batch (a multi-partition commit is all-or-nothing, as in Kafka), and
the replay reads every partition from its log start, record by record.

Who creates the `__consumer_offsets` partitions (with cleanup.policy=compact and
a topic id the metadata layer knows) is the broker's business: pass `get_log`,
which returns the partition's Log or None when it does not exist.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Protocol

from samsa.protocol.errors import ProtocolError
from samsa.protocol.records import build_batch, iter_all_records, parse_control_record
from samsa.storage import ReadResult

from .store import LogItem, TxnMarker, TxnRecord

READ_CHUNK = 1 << 20


class OffsetsLog(Protocol):
    """What the replay reads of a storage.Log."""
    @property
    def log_start_offset(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    def read(self, fetch_offset: int, max_bytes: int, min_one_batch: bool = True) -> ReadResult: ...


class AppendableOffsetsLog(OffsetsLog, Protocol):
    """A storage.Log appended to directly (no partition layer in between)."""
    def append(self, payload: bytes) -> object: ...


def offsets_log_functions(get_log: Callable[[int], AppendableOffsetsLog | None], num_partitions: int,
                          time_ms: Callable[[], int] = lambda: int(time.time() * 1000),
                          append_batch: Callable[[int, bytes], object] | None = None
                          ) -> tuple[Callable[..., object], Callable[[], Iterator[LogItem]]]:
    """(append_fn, read_all_fn) for ConsumerOffsetsLog over storage.Log partitions.
    append_batch(partition, batch): how a batch reaches the partition (the
    broker's partition layer, which stamps the leader epoch and moves the high
    watermark); without it, straight to the log."""

    def append_fn(partition: int, entries: list[tuple[bytes, bytes | None]],
                  producer: tuple[int, int] | None = None) -> object:
        """None, or an awaitable the coordinator awaits (a write waiting for the ISR).
        ``producer`` (id, epoch): a TxnOffsetCommit, written as a batch of that
        producer's transaction (no sequence: the coordinator writes it, as Kafka's)."""
        if producer is None:
            batch = build_batch([(k, v, [], time_ms()) for k, v in entries])
        else:
            batch = build_batch([(k, v, [], time_ms()) for k, v in entries],
                                producer_id=producer[0], producer_epoch=producer[1],
                                is_transactional=True)
        if append_batch is not None:
            return append_batch(partition, batch)
        log = get_log(partition)
        if log is None:
            raise RuntimeError(f"__consumer_offsets-{partition} does not exist")
        log.append(batch)
        return None

    read_partition_fn = partition_reader(get_log)

    def read_all_fn() -> Iterator[LogItem]:
        for p in range(num_partitions):
            yield from read_partition_fn(p)

    return append_fn, read_all_fn


def partition_reader(get_log: Callable[[int], OffsetsLog | None]
                     ) -> Callable[[int], Iterator[LogItem]]:
    """read_partition_fn for ConsumerOffsetsLog: one partition's records (with
    transactions' records and markers, which the replay settles)."""
    def read_partition_fn(partition: int) -> Iterator[LogItem]:
        log = get_log(partition)
        if log is not None:
            yield from _read_partition(log)
    return read_partition_fn


def _read_partition(log: OffsetsLog) -> Iterator[LogItem]:
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        rr = log.read(offset, READ_CHUNK, min_one_batch=True)
        data = b"".join(r.read_bytes() for r in rr.regions)
        if not data:
            return
        next_offset = offset
        for hdr, rec in iter_all_records(data):
            next_offset = max(next_offset, hdr.last_offset + 1)
            if rec.offset is not None and rec.offset < offset:
                continue  # a batch that began before the read position
            if hdr.is_control:
                try:
                    control_type, _ = parse_control_record(rec.key, rec.value)
                except ProtocolError:
                    continue
                if control_type in (0, 1):  # ABORT, COMMIT
                    yield TxnMarker(hdr.producer_id, control_type == 1)
                continue
            if rec.key is None:
                continue
            if hdr.is_transactional:
                yield TxnRecord(rec.key, rec.value, hdr.producer_id)
            else:
                yield rec.key, rec.value
        if next_offset <= offset:
            return  # nothing decodable past here; do not spin
        offset = next_offset
