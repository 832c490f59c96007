"""Offset ranges, one per Spark partition, and the ``minPartitions`` split.

Pure data: the driver resolves offsets against a broker (``pipeline.client``) and hands the
resolved ranges to ``split_ranges``; each resulting ``OffsetRange`` becomes one Spark input
partition. The split is Spark's ``KafkaOffsetRangeCalculator.getRanges``: partitions whose
share of ``minPartitions`` rounds to one stay whole, the others are cut into near-equal parts
(the last part takes the rounding), empty ranges are dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence


@dataclass(frozen=True)
class OffsetRange:
    """Records ``[start, end)`` of one topic-partition (resolved offsets, never -1/-2)."""
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition} [{self.start}, {self.end})"


def _part_count(size: int, total: int, min_parts: int) -> int:
    # Scala's math.round on a double: half rounds up.
    return max(int(size / total * min_parts + 0.5), 1)


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    unsplit = [r for r in ranges if _part_count(r.size, total, min_partitions) == 1]
    split_total = total - sum(r.size for r in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    unsplit_ids = {(r.topic, r.partition, r.start) for r in unsplit}
    out: list[OffsetRange] = []
    for r in ranges:
        parts = 1 if (r.topic, r.partition, r.start) in unsplit_ids else _part_count(r.size, split_total, split_min)
        remaining, start = r.size, r.start
        for part in range(parts):
            this = remaining // (parts - part)
            remaining -= this
            end = min(start + this, r.end)
            if end > start:
                out.append(OffsetRange(r.topic, r.partition, start, end))
            start = end
    return out


def sort_ranges(ranges: Sequence[OffsetRange]) -> list[OffsetRange]:
    return sorted(ranges, key=lambda r: (r.topic, r.partition, r.start))
