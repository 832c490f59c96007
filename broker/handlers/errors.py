"""Which Kafka error code answers which exception from storage/ or protocol/.

Exceptions are matched by class name so that this table needs no import of
every module that may raise them; anything unknown is UNKNOWN_SERVER_ERROR.
"""
from __future__ import annotations

import logging

from samsa.broker.network.log_limit import RateLimitedLog
from samsa.protocol.errors import ErrorCode, ProtocolError

log = logging.getLogger("broker.handlers")
# A full or failing disk fails every write the same way: one line per kind of
# error per interval, not one per request (a full disk wrote ~1,500 in 2 minutes).
_storage_log = RateLimitedLog(log)

_BY_NAME = {
    "CorruptRecordError": ErrorCode.CORRUPT_MESSAGE,
    "InvalidRecordError": ErrorCode.INVALID_RECORD,
    "RecordTooLargeError": ErrorCode.MESSAGE_TOO_LARGE,
    "OffsetOutOfRangeError": ErrorCode.OFFSET_OUT_OF_RANGE,
    "OutOfOrderSequenceError": ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    "InvalidProducerEpochError": ErrorCode.INVALID_PRODUCER_EPOCH,
    "UnknownProducerIdError": ErrorCode.UNKNOWN_PRODUCER_ID,
    "UnsupportedCompressionError": ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
    "InvalidTimestampError": ErrorCode.INVALID_TIMESTAMP,
}


def error_code_for(exc: BaseException) -> ErrorCode:
    code = getattr(exc, "error_code", None)
    if code is not None:
        return ErrorCode(code)
    for cls in type(exc).__mro__:
        if cls.__name__ in _BY_NAME:
            return _BY_NAME[cls.__name__]
    if isinstance(exc, ProtocolError):
        return ErrorCode.CORRUPT_MESSAGE
    if isinstance(exc, OSError):
        _storage_log.log(f"storage-{exc.errno}", logging.ERROR,
                         "storage error (answered KAFKA_STORAGE_ERROR): %s", exc)
        return ErrorCode.KAFKA_STORAGE_ERROR
    log.exception("unexpected error in a handler", exc_info=exc)
    return ErrorCode.UNKNOWN_SERVER_ERROR
