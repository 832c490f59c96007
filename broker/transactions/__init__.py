"""Transactions (KIP-98): the transaction coordinator and its log.

- state.py: a transactional id's state and the rules that move it (pure);
- log_format.py: Kafka's `__transaction_state` record formats;
- coordinator.py: the coordinator (load/unload with partition leadership,
  writes before answers, markers, timeouts, expiry);
- markers.py: WriteTxnMarkers to every partition leader;
- log_adapter.py: the coordinator's log over this broker's partitions.

The partition side (control batches, the last stable offset, .txnindex,
read_committed) lives in storage/ and the partition layer.
"""
from samsa.protocol.model import TRANSACTION_STATE_TOPIC

from .coordinator import TransactionCoordinator, TxnCoordinatorConfig, TxnLogWriteError

__all__ = ["TRANSACTION_STATE_TOPIC", "TransactionCoordinator", "TxnCoordinatorConfig",
           "TxnLogWriteError"]
