"""Calling the transaction coordinator and the KIP-890 verifier from handlers on
other event loops (see broker/loop_bridge.py): both live on the main loop."""
from __future__ import annotations

from ..loop_bridge import LoopBridge, forward
from .coordinator import TransactionCoordinator
from .verification import TxnVerifier


class TransactionsBridge(LoopBridge[TransactionCoordinator]):
    """The coordinator's API the transaction handlers use."""

    init_producer_id = forward(TransactionCoordinator.init_producer_id)
    add_partitions = forward(TransactionCoordinator.add_partitions)
    verify_partitions = forward(TransactionCoordinator.verify_partitions)
    end_transaction = forward(TransactionCoordinator.end_transaction)
    describe = forward(TransactionCoordinator.describe)
    list_transactions = forward(TransactionCoordinator.list_transactions)


class VerifierBridge(LoopBridge[TxnVerifier]):
    """Produce's check that a transactional batch's partition is in its transaction."""

    verify = forward(TxnVerifier.verify)
