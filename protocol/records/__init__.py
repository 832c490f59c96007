"""Record formats: v2 record batches, legacy v0/v1 message sets, codecs, conversions.

Pure bytes in, bytes out. Every malformed input raises a ``ProtocolError``
subclass (see ``protocol.records.errors`` for which Kafka error code each maps to).
"""
from samsa.protocol.records.errors import (CorruptRecordError, InvalidRecordError,
                                     UnsupportedCompressionError, error_code_for)
from samsa.protocol.records.batch import (BATCH_OVERHEAD, LOG_OVERHEAD, BatchHeader, ValidatedBatch,
                                    compute_crc, iter_batch_headers, peek_magic,
                                    read_batch_header, set_base_offset, set_log_append_time,
                                    set_partition_leader_epoch, validate_batches, write_crc)
from samsa.protocol.records.codecs import (DEFAULT_MAX_OUTPUT, Codec, codec_for_name, compress,
                                     decompress)
from samsa.protocol.records.records import (CONTROL_ABORT, CONTROL_COMMIT, Record, build_batch,
                                      build_control_batch, decode_batch, iter_all_records,
                                      iter_records, parse_control_record)
from samsa.protocol.records.legacy import (LegacyMessage, build_message_set, expand_wrapper,
                                     is_legacy, iter_message_set, parse_message_set,
                                     validate_message_set)
from samsa.protocol.records.convert import downconvert_batches, downconvert_within, upconvert_message_set

__all__ = [
    # errors
    "CorruptRecordError", "InvalidRecordError", "UnsupportedCompressionError", "error_code_for",
    # v2 batch headers (hot path)
    "BATCH_OVERHEAD", "LOG_OVERHEAD", "BatchHeader", "ValidatedBatch", "read_batch_header",
    "iter_batch_headers", "validate_batches", "compute_crc", "write_crc", "peek_magic",
    "set_base_offset", "set_partition_leader_epoch", "set_log_append_time",
    # codecs
    "Codec", "compress", "decompress", "codec_for_name", "DEFAULT_MAX_OUTPUT",
    # v2 records
    "Record", "build_batch", "decode_batch", "iter_records", "iter_all_records",
    "build_control_batch", "parse_control_record", "CONTROL_ABORT", "CONTROL_COMMIT",
    # legacy v0/v1
    "LegacyMessage", "is_legacy", "iter_message_set", "expand_wrapper", "parse_message_set",
    "build_message_set", "validate_message_set",
    # conversion
    "upconvert_message_set", "downconvert_batches", "downconvert_within",
]
