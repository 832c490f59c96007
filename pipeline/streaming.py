"""Streaming offsets: the JSON Spark checkpoints, admission control, micro-batch ranges (pure).

A micro-batch's offsets are Spark's Kafka source's own JSON, ``{"topic":{"0":23,"1":5}}``: the
next offset to read per partition, written to the query's checkpoint by Spark (PySpark hands the
reader a ``dict``; ``to_offsets``/``from_offsets`` convert). Nothing here talks to a broker: the
driver (``pipeline.client.OffsetReader``) resolves offsets and hands them to these functions.

The rules are those of Spark's ``KafkaMicroBatchStream``:
- ``rate_limit``: ``maxOffsetsPerTrigger`` shared among partitions in proportion to their backlog,
  a partition whose share is below one still gets one (never starved);
- ``plan_ranges``: partitions absent from the start (new ones) start at their earliest offset,
  partitions gone from the end and offsets that went backwards are data loss.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

from .options import tp_str
from .ranges import OffsetRange

Offsets = dict  # {(topic, partition): offset}


def to_offsets(offsets: Mapping) -> dict:
    """``{(topic, partition): offset}`` -> Spark's JSON shape, sorted so equal offsets compare equal
    as text (the engine tells "no new data" by comparing the serialized offsets)."""
    out: dict = {}
    for topic, part in sorted(offsets):
        out.setdefault(topic, {})[str(part)] = int(offsets[(topic, part)])
    return out


def from_offsets(raw: Mapping) -> Offsets:
    """Spark's JSON shape (from the checkpoint) -> ``{(topic, partition): offset}``."""
    return {(topic, int(part)): int(off) for topic, parts in raw.items() for part, off in parts.items()}


def rate_limit(limit: int, begin: Mapping, latest: Mapping) -> Offsets:
    """End offsets admitting at most about ``limit`` records past ``begin`` (Spark's rateLimit).

    ``begin`` has a start for every partition of ``latest``. Each partition with a backlog gets
    ``limit * backlog / total`` records, rounded down, or up when the share is below one; so the
    sum can exceed ``limit`` by less than the number of partitions, as in Spark.
    """
    sizes = {tp: end - begin[tp] for tp, end in latest.items() if tp in begin and end - begin[tp] > 0}
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        if tp not in sizes:
            out[tp] = end
            continue
        prorate = limit * (sizes[tp] / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[tp] = min(end, begin[tp] + int(share))
    return out


def backlog(begin: Mapping, latest: Mapping) -> int:
    return sum(max(end - begin.get(tp, end), 0) for tp, end in latest.items())


def plan_ranges(start: Mapping, end: Mapping, new_partition_starts: Mapping,
                report_data_loss: Callable[[str], None]) -> list[OffsetRange]:
    """The offset ranges of the micro-batch ``(start, end]`` (Spark's planInputPartitions).

    ``new_partition_starts``: the earliest offsets of the partitions in ``end`` and not in
    ``start`` (found since the previous batch). ``report_data_loss`` raises or warns
    (``failOnDataLoss``); the ranges it was told about are left out.
    """
    missing_new = sorted(tp for tp in end if tp not in start and tp not in new_partition_starts)
    if missing_new:
        report_data_loss(f"Cannot find earliest offsets of Set({', '.join(tp_str(tp) for tp in missing_new)}). "
                         "Some data may have been missed")
    gone = sorted(tp for tp in start if tp not in end)
    if gone:
        report_data_loss(f"Set({', '.join(tp_str(tp) for tp in gone)}) are gone. Some data may have been missed")
    ranges = []
    for tp in sorted(end):
        if tp in start:
            begin = start[tp]
        elif tp in new_partition_starts:
            begin = new_partition_starts[tp]
        else:
            continue
        until = end[tp]
        if until < begin:
            report_data_loss(f"Partition {tp_str(tp)}'s offset was changed from {begin} to {until}, "
                             "some data may have been missed")
            continue
        ranges.append(OffsetRange(tp[0], tp[1], begin, until))
    return ranges
