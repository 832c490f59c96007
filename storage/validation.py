"""Record-level rules of an append, apart from the append itself (Kafka's
LogValidator): the checks that need the records decoded.

- A compacted topic keeps the latest record per key, so a record without a
  key has no place there: INVALID_RECORD.
- A CreateTime timestamp outside ``message.timestamp.before.max.ms`` /
  ``after.max.ms`` (or the older ``difference.max.ms``, which bounds both)
  of the broker's clock: INVALID_TIMESTAMP.

Both name every offending record by its index in the request's records
(Kafka's ``batch_index``, KIP-467), so the producer can fail exactly those
and retry the rest. Nothing of the request is appended.

Records are decoded only when a rule applies (a compacted topic, a
timestamp bound configured) and, for an upper bound alone, only when the
batch's max timestamp already breaks it: the produce hot path of an
ordinary topic never comes here.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, Sequence

from samsa.protocol.errors import ProtocolError
from samsa.protocol.model import Buf
from samsa.protocol.records import ValidatedBatch, decode_batch
from samsa.storage.errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError, RecordError

if TYPE_CHECKING:
    from samsa.config.topic import TopicConfig

LONG_MAX = (1 << 63) - 1


class RecordRules(NamedTuple):
    """What a topic's config asks of each record (None: no bound)."""

    require_keys: bool
    min_timestamp_lag: int | None   # how far behind the broker's clock a timestamp may be
    max_timestamp_lead: int | None  # how far ahead

    @property
    def any(self) -> bool:
        return (self.require_keys or self.min_timestamp_lag is not None
                or self.max_timestamp_lead is not None)


def rules_for(config: TopicConfig) -> RecordRules:
    """The rules of a topic config (storage's ``TopicConfig``)."""
    create_time = config.message_timestamp_type != "LogAppendTime"
    difference = config.message_timestamp_difference_max_ms
    before = min(config.message_timestamp_before_max_ms, difference)
    after = min(config.message_timestamp_after_max_ms, difference)
    return RecordRules(
        require_keys=config.compact,
        min_timestamp_lag=before if create_time and before < LONG_MAX else None,
        max_timestamp_lead=after if create_time and after < LONG_MAX else None)


def check_records(payload: Buf, batches: Sequence[ValidatedBatch], rules: RecordRules, now_ms: int,
                  where: str) -> None:
    """Raise InvalidRecordError / InvalidTimestampError naming each bad record
    (``where`` is the partition, for the messages)."""
    low = now_ms - rules.min_timestamp_lag if rules.min_timestamp_lag is not None else None
    high = now_ms + rules.max_timestamp_lead if rules.max_timestamp_lead is not None else None
    missing_keys: list[RecordError] = []
    bad_times: list[RecordError] = []
    index = 0
    for b in batches:
        h = b.header
        if h.is_control:
            index += h.records_count
            continue
        needs_records = rules.require_keys or low is not None or (
            high is not None and h.max_timestamp > high)
        if not needs_records:
            index += h.records_count
            continue
        try:
            records = decode_batch(payload, b.position, header=h)[1]
        except ProtocolError as exc:
            raise CorruptRecordError(str(exc)) from exc
        for r in records:
            if rules.require_keys and r.key is None:
                missing_keys.append(RecordError(
                    index, f"Compacted topic cannot accept message without key in topic "
                           f"partition {where}."))
            # (decode_batch sets every record's timestamp: only records to build lack one)
            ts: int = r.timestamp  # type: ignore[assignment]
            if ((low is not None and ts < low) or (high is not None and ts > high)):
                bad_times.append(RecordError(
                    index, f"Timestamp {ts} of message with offset {r.offset_delta} is out of "
                           f"range. The timestamp should be within "
                           f"[{low if low is not None else '-inf'}, "
                           f"{high if high is not None else 'inf'}]"))
            index += 1
    # Kafka reports the first kind of failure it meets; keys are checked first.
    if missing_keys:
        raise InvalidRecordError(
            f"One or more records have been rejected due to {len(missing_keys)} record "
            f"errors in total, and only showing the first error: "
            f"{missing_keys[0].message}", missing_keys)
    if bad_times:
        raise InvalidTimestampError(
            f"One or more records have been rejected due to invalid timestamp: "
            f"{bad_times[0].message}", bad_times)
