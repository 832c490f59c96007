"""KIP-890 for the handlers that write a producer's transactional data
(Produce, TxnOffsetCommit): the transaction coordinator's word on partitions
a request would open a transaction in, before anything is appended. Part 1
verifies them; for a producer of transactions v2 (Produce v12+,
TxnOffsetCommit v5, as Kafka decides by request version) the coordinator adds
them to the transaction instead: such a producer no longer sends
AddPartitionsToTxn itself."""
from __future__ import annotations

from samsa.protocol.errors import ErrorCode
from samsa.protocol.model import TopicPartition

from ..partitions import LeaderLookup
from .services import Services


def verification_on(broker: Services, v2: bool = False) -> bool:
    """transaction.partition.verification.enable, once the verifier runs. A v2
    producer's writes always go through it: its partitions join only so."""
    return (broker.txn_verifier is not None
            and (v2 or broker.config.transaction_partition_verification_enable))


def opens_transaction(broker: Services, found: LeaderLookup, producer_id: int, producer_epoch: int) -> bool:
    """Whether a transactional write of the producer to the partition
    (``found`` from leader_log) would open a transaction there: only such a
    write is verified (one joining an open transaction was verified when
    that transaction's first write came)."""
    return not broker.partitions.transaction_open(found, producer_id, producer_epoch)


async def verify_opening(broker: Services, transactional_id: str,
                         opening: dict[tuple[int, int], list[TopicPartition]],
                         add: bool = False) -> dict[TopicPartition, ErrorCode]:
    """The coordinator's answer, as the write's error, for each partition
    of ``opening`` ((producer id, epoch) -> partitions it would open a
    transaction in); NONE where the write may go ahead. ``add``: a v2
    producer's partitions, added to its transaction."""
    verdicts: dict[TopicPartition, ErrorCode] = {}
    verifier = broker.txn_verifier
    if verifier is None:  # callers ask verification_on first
        return verdicts
    for (pid, epoch), partitions in opening.items():
        verdicts.update(await verifier.verify(transactional_id, pid, epoch, partitions, add))
    return verdicts
