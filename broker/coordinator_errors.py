"""What a coordinator answers when its write to its internal topic failed
(Kafka's GroupMetadataManager and TransactionStateManager map the same way):
the partition is led elsewhere now (or its disk failed) -> NOT_COORDINATOR,
the client looks for the new coordinator; the ISR was short or slow ->
COORDINATOR_NOT_AVAILABLE, the client retries. Anything else is the
caller's to name (a record too large, a fenced producer)."""
from __future__ import annotations

from samsa.protocol.errors import ErrorCode

_MOVED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR})
_UNAVAILABLE = frozenset({ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                          ErrorCode.REQUEST_TIMED_OUT})


class CoordinatorWriteError(Exception):
    """A coordinator's write to its internal topic did not make it;
    ``error_code`` is the partition layer's reason (this broker does not lead
    the partition any more, its ISR did not take the write in time, ...)."""

    def __init__(self, message: str, error_code: ErrorCode) -> None:
        super().__init__(message)
        self.error_code = error_code


def coordinator_write_error(code: int) -> ErrorCode | None:
    """The answer for a failed write's ``code``, or None when it is neither
    a moved partition nor a short ISR."""
    if code in _MOVED:
        return ErrorCode.NOT_COORDINATOR
    if code in _UNAVAILABLE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return None
