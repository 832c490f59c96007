"""The transaction coordinator's TxnLog over this broker's partitions of
`__transaction_state`.

Writes go through the partition layer as a coordinator append with acks=all
(Kafka writes the transaction log with required acks -1), and the errors of
that write become the ones Kafka's coordinator answers producers with: a lost
leadership is NOT_COORDINATOR (the producer looks for the new one), a short
ISR or a timeout COORDINATOR_NOT_AVAILABLE (the producer retries).
"""
from __future__ import annotations

import time
from typing import Callable, Iterator

from samsa.protocol.errors import ErrorCode
from samsa.protocol.model import TRANSACTION_STATE_TOPIC
from samsa.protocol.records import build_batch
from samsa.storage import AppendOrigin
from samsa.storage.errors import StorageError

from ..coordinator_errors import coordinator_write_error
from ..groups.log_adapter import OffsetsLog, partition_reader
from ..groups.store import TxnMarker, TxnRecord
from ..partitions import PartitionLayer
from ..replication.leader import NotEnoughReplicasError, NotLeaderError
from .coordinator import TxnLogWriteError

class PartitionTxnLog:
    def __init__(self, partitions: PartitionLayer, get_log: Callable[[int], OffsetsLog | None],
                 write_timeout_ms: Callable[[], int]) -> None:
        self._partitions = partitions
        self._read = partition_reader(get_log)
        self._timeout_ms = write_timeout_ms

    def leader_epoch(self, partition: int) -> int | None:
        found = self._partitions.leader_log(TRANSACTION_STATE_TOPIC, partition)
        return found.leader_epoch if found.ok else None

    def named_leader(self, partition: int) -> bool:
        meta = self._partitions.partition(TRANSACTION_STATE_TOPIC, partition)
        return meta is not None and meta.leader == self._partitions.broker_id

    def read(self, partition: int) -> Iterator[tuple[bytes, bytes | None]]:
        for item in self._read(partition):
            if not isinstance(item, (TxnRecord, TxnMarker)):
                yield item

    async def append(self, partition: int, key: bytes, value: bytes | None) -> None:
        found = self._partitions.leader_log(TRANSACTION_STATE_TOPIC, partition)
        if not found.ok:
            raise TxnLogWriteError(ErrorCode.NOT_COORDINATOR,
                                   f"{TRANSACTION_STATE_TOPIC}-{partition}: {found.error.name}")
        batch = build_batch([(key, value, [], int(time.time() * 1000))])
        where = f"{TRANSACTION_STATE_TOPIC}-{partition}"
        try:
            result = self._partitions.append(found, batch, AppendOrigin.COORDINATOR, acks=-1)
        except (NotLeaderError, NotEnoughReplicasError, StorageError) as e:
            raise TxnLogWriteError(_answer(e.error_code), f"{where}: {e}") from None
        min_isr = found.found_log.config.min_insync_replicas
        code, = await self._partitions.wait_replicated(
            [(found, result.last_offset + 1, min_isr)], self._timeout_ms())
        if code:
            raise TxnLogWriteError(_answer(code), f"{where}: {code.name}")


def _answer(code: int) -> ErrorCode:
    """Kafka's TransactionStateManager: a moved partition or a short ISR as
    every coordinator answers them, anything else (a record too large)
    UNKNOWN_SERVER_ERROR."""
    return coordinator_write_error(code) or ErrorCode.UNKNOWN_SERVER_ERROR
