"""One hierarchy of record errors: storage/'s refine protocol/'s, so code that catches
either layer's class catches both, and both answer with the same Kafka error code."""
from __future__ import annotations

import pytest

from samsa.protocol.errors import ErrorCode, ProtocolError
from samsa.protocol.records import CorruptRecordError as ProtocolCorrupt
from samsa.protocol.records import InvalidRecordError as ProtocolInvalid
from samsa.storage.errors import (CorruptRecordError, InvalidRecordError, InvalidTimestampError,
                            RecordError, StorageError)


@pytest.mark.parametrize("storage_cls, protocol_cls, code", [
    (CorruptRecordError, ProtocolCorrupt, ErrorCode.CORRUPT_MESSAGE),
    (InvalidRecordError, ProtocolInvalid, ErrorCode.INVALID_RECORD),
])
def test_storage_record_errors_are_protocol_record_errors(storage_cls, protocol_cls, code):
    for catch in (protocol_cls, ProtocolError, StorageError, storage_cls):
        with pytest.raises(catch):
            raise storage_cls("batch 0 is bad")
    assert storage_cls.error_code == protocol_cls.error_code == code


def test_refined_record_errors_keep_their_code_and_records():
    e = InvalidTimestampError("timestamp out of range", [RecordError(3, "too old")])
    assert isinstance(e, ProtocolInvalid)
    assert e.error_code == ErrorCode.INVALID_TIMESTAMP
    assert e.record_errors == (RecordError(3, "too old"),) and str(e) == "timestamp out of range"
