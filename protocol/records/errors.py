"""Exceptions of the record layer, all ProtocolError subclasses.

Callers map them to Kafka error codes via the ``error_code`` class attribute, so
the produce handler and the log never have to guess which code a failure deserves:

- CorruptRecordError         -> CORRUPT_MESSAGE (2): bytes that cannot be trusted
  (length field past the end, wrong magic, CRC mismatch, undecodable data).
- InvalidRecordError         -> INVALID_RECORD (87): well-formed bytes whose fields
  break Kafka's rules (record count vs. offset delta, empty batch, a record's
  framing inside a batch whose CRC is right, as DefaultRecord.readFrom refuses it, ...).
- UnsupportedCompressionError -> UNSUPPORTED_COMPRESSION_TYPE (76): e.g. zstd in a
  format (magic 0/1) that cannot carry it.
"""
from __future__ import annotations

from samsa.protocol.errors import ErrorCode, ProtocolError


class CorruptRecordError(ProtocolError):
    """The bytes of a batch/message cannot be trusted (size, magic, CRC, encoding)."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(ProtocolError):
    """A structurally sound batch whose header fields violate Kafka's rules."""

    error_code = ErrorCode.INVALID_RECORD


class UnsupportedCompressionError(ProtocolError):
    """A codec the target format (or this build) cannot represent."""

    error_code = ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


# ProtocolError itself carries no code; give callers one place to ask.
def error_code_for(exc: ProtocolError) -> int:
    """Kafka error code for a record-layer failure (CORRUPT_MESSAGE when unknown)."""
    return int(getattr(exc, "error_code", ErrorCode.CORRUPT_MESSAGE))
