"""Committed offsets' rules, the same for every group type: what a commit
stores and which offsets retention expires. Plain functions, no I/O; who may
commit is the group type's rule (its machine's ``commit_error``), and the
store writes are the coordinator's.
"""
from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from samsa.protocol.errors import ErrorCode
from samsa.protocol.model import TopicPartition

from .log_format import OffsetAndMetadata
from .results import PartitionError

NONE = int(ErrorCode.NONE)
# (topic, partition, offset, leader_epoch, metadata) as OffsetCommit carries them
Commit = tuple[str, int, int, "int | None", "str | None"]


def every_partition(offsets: Iterable[tuple], code: int) -> list[PartitionError]:
    """One answer for every partition of an OffsetCommit / TxnOffsetCommit."""
    return [PartitionError(t, p, code) for t, p, *_ in offsets]


def offset_entries(offsets: Iterable[Commit], now_ms: int, expire_ms: int | None,
                   metadata_max_bytes: int
                   ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, OffsetAndMetadata]]:
    """(error per partition, the offsets to store): metadata longer than
    offset.metadata.max.bytes is OFFSET_METADATA_TOO_LARGE, the rest kept."""
    codes: dict[TopicPartition, int] = {}
    entries: dict[TopicPartition, OffsetAndMetadata] = {}
    for t, p, offset, epoch, metadata in offsets:
        metadata = metadata or ""
        if len(metadata) > metadata_max_bytes:
            codes[(t, p)] = int(ErrorCode.OFFSET_METADATA_TOO_LARGE)
        else:
            entries[(t, p)] = OffsetAndMetadata(offset, -1 if epoch is None else epoch,
                                                metadata, now_ms, expire_ms)
            codes[(t, p)] = NONE
    return codes, entries


def expire_at(now_ms: int, retention_ms: int | None) -> int | None:
    """OffsetCommit v2-v4's retention_time_ms: -1/None is the broker's default."""
    return now_ms + retention_ms if retention_ms is not None and retention_ms >= 0 else None


def expired(offsets: Mapping[TopicPartition, OffsetAndMetadata], now_ms: int,
            retention_ms: int, base_ms: int | None,
            kept_topics: Collection[str] | None) -> list[TopicPartition]:
    """The offsets past retention (KIP-211): an explicit expire timestamp wins;
    otherwise retention counts from ``base_ms`` (when the group became Empty)
    or, when None, from each commit; topics in ``kept_topics`` (a Stable
    group's subscription) never expire."""
    out = []
    for (t, p), om in offsets.items():
        if kept_topics is not None and t in kept_topics:
            continue
        if om.expire_timestamp is not None:
            gone = now_ms >= om.expire_timestamp
        else:
            gone = now_ms - (om.commit_timestamp if base_ms is None else base_ms) >= retention_ms
        if gone:
            out.append((t, p))
    return out
