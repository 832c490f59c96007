"""Exceptions raised by storage/, each carrying the Kafka error code a handler answers with.

The produce/fetch handlers map a failure to a response with ``exc.error_code``
instead of keeping their own table, so the two cannot drift apart.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

from samsa.protocol.errors import ErrorCode
from samsa.protocol.records.errors import CorruptRecordError as RecordBytesError
from samsa.protocol.records.errors import InvalidRecordError as RecordRulesError


class StorageError(Exception):
    """Base of every storage failure (disk trouble, bad layout, refused append)."""

    error_code = ErrorCode.KAFKA_STORAGE_ERROR


class OffsetOutOfRangeError(StorageError):
    """A fetch/delete offset below the log start offset or above the log end offset."""

    error_code = ErrorCode.OFFSET_OUT_OF_RANGE


# The record errors are protocol/'s, refined: an ``except`` of either layer's class catches
# them, and both layers answer them with the same code.
class CorruptRecordError(StorageError, RecordBytesError):
    """An appended batch failed size/magic/CRC checks; nothing was written."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class RecordError(NamedTuple):
    """One rejected record: its index among the request's records (KIP-467)."""

    batch_index: int
    message: str


class InvalidRecordError(StorageError, RecordRulesError):
    """An appended batch breaks Kafka's rules (counts, offsets going backwards,
    keyless records on a compacted topic...). ``record_errors`` names the
    records at fault when the rule is about single records."""

    error_code = ErrorCode.INVALID_RECORD

    def __init__(self, message: str = "", record_errors: Sequence[RecordError] = ()) -> None:
        super().__init__(message)
        self.record_errors = tuple(record_errors)


class InvalidTimestampError(InvalidRecordError):
    """A CreateTime timestamp outside the topic's allowed window."""

    error_code = ErrorCode.INVALID_TIMESTAMP


class OffsetsOutOfOrderError(InvalidRecordError):
    """Appending with pre-assigned offsets that do not increase past the log end."""


class RecordTooLargeError(StorageError):
    """A batch bigger than max.message.bytes, or an append bigger than a segment."""

    error_code = ErrorCode.MESSAGE_TOO_LARGE


class OutOfOrderSequenceError(StorageError):
    """Idempotent producer sequence gap (or a new epoch not starting at 0)."""

    error_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class InvalidProducerEpochError(StorageError):
    """A batch from an older producer epoch than the one the log has seen (fenced)."""

    error_code = ErrorCode.INVALID_PRODUCER_EPOCH


class UnknownProducerIdError(StorageError):
    """Kept for the contract; current Kafka accepts unknown producers, so does samsa."""

    error_code = ErrorCode.UNKNOWN_PRODUCER_ID


class InvalidTxnStateError(StorageError):
    """A non-transactional batch from a producer whose transaction is open
    (Kafka's InvalidTxnStateException in ProducerAppendInfo.appendDataBatch)."""

    error_code = ErrorCode.INVALID_TXN_STATE


class TransactionCoordinatorFencedError(StorageError):
    """A transaction marker from a coordinator epoch older than the last one this
    partition saw for the producer: a zombie coordinator (Kafka's code 52)."""

    error_code = ErrorCode.TRANSACTION_COORDINATOR_FENCED


class LogDirNotFoundError(StorageError):
    """A log dir that is not one of this broker's ``log.dirs`` (AlterReplicaLogDirs)."""

    error_code = ErrorCode.LOG_DIR_NOT_FOUND


class InvalidTopicError(StorageError):
    """A topic name the storage cannot hold (a moved replica's directory name
    would be longer than a file name may be, Kafka's KAFKA-4893 check)."""

    error_code = ErrorCode.INVALID_TOPIC_EXCEPTION
