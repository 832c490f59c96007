"""What the broker reads and writes of a partition's log (a storage.Log), as a
Protocol of its own: the partition layer hands it to handlers, and the leader
replica's log is one (replication.leader.ReplicaLog extends it), so a leader
lookup can give handlers the leader's own log."""
from __future__ import annotations

from typing import Protocol

from samsa.config.topic import TopicConfig
from samsa.storage import FileRegion, ReadResult
from samsa.storage.producer_state import ProducerSummary
from samsa.storage.txn_index import AbortedTxn


class PartitionLog(Protocol):
    """What handlers use of a storage.Log (kept narrow on purpose)."""
    topic: str
    config: TopicConfig
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    last_stable_offset: int   # KIP-98: min(first unstable offset, high watermark)

    def aborted_transactions(self, fetch_offset: int,
                             regions: list[FileRegion]) -> list[AbortedTxn]: ...
    def read(self, fetch_offset: int, max_bytes: int, min_one_batch: bool = True,
             max_offset: int | None = None) -> ReadResult: ...
    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...
    def delete_records_before(self, offset: int) -> int: ...
    def active_producers(self) -> list[ProducerSummary]: ...
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None: ...
    def max_timestamp_and_offset(self) -> tuple[int, int] | None: ...
    def transaction_open(self, producer_id: int, epoch: int) -> bool: ...
