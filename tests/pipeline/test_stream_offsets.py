"""The streaming reader's offset rules and options, without Spark or a broker (pipeline.streaming)."""

from __future__ import annotations

import pytest

from samsa.pipeline.options import Latest, SamsaOptionError, SpecificOffsets, parse_stream_options
from samsa.pipeline.ranges import OffsetRange
from samsa.pipeline.streaming import from_offsets, plan_ranges, rate_limit, to_offsets

A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def test_offsets_json_round_trip_sorted():
    raw = to_offsets({B0: 7, A1: 5, A0: 3})
    assert list(raw) == ["a", "b"] and list(raw["a"]) == ["0", "1"]
    assert raw == {"a": {"0": 3, "1": 5}, "b": {"0": 7}}
    assert from_offsets(raw) == {A0: 3, A1: 5, B0: 7}


def test_rate_limit_shares_by_backlog():
    assert rate_limit(30, {A0: 0, A1: 0}, {A0: 40, A1: 20}) == {A0: 20, A1: 10}
    # A share below one rounds up (no partition starved), above one rounds down.
    assert rate_limit(10, {A0: 0, A1: 0}, {A0: 19, A1: 1}) == {A0: 9, A1: 1}
    # Never past the latest offset; partitions without backlog keep it.
    assert rate_limit(100, {A0: 5, A1: 3}, {A0: 10, A1: 3}) == {A0: 10, A1: 3}
    assert rate_limit(5, {A0: 10}, {A0: 10}) == {A0: 10}


def test_plan_ranges_new_gone_and_backwards_partitions():
    lost = []
    ranges = plan_ranges({A0: 3, A1: 9, B0: 1}, {A0: 8, A1: 4, ("c", 0): 6}, {("c", 0): 2}, lost.append)
    assert ranges == [OffsetRange("a", 0, 3, 8), OffsetRange("c", 0, 2, 6)]
    assert lost == ["Set(b-0) are gone. Some data may have been missed",
                    "Partition a-1's offset was changed from 9 to 4, some data may have been missed"]

    def fail(message):
        raise RuntimeError(message)
    with pytest.raises(RuntimeError, match="Cannot find earliest offsets of Set\\(c-0\\)"):
        plan_ranges({}, {("c", 0): 6}, {}, fail)


def test_stream_options():
    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    opts = parse_stream_options(base)
    assert opts.starting == Latest() and opts.ending is None and opts.max_offsets_per_trigger is None
    opts = parse_stream_options({**base, "startingOffsets": '{"t":{"0":-2}}', "maxOffsetsPerTrigger": "10",
                                 "minOffsetsPerTrigger": "5", "maxTriggerDelay": "30s"})
    assert opts.starting == SpecificOffsets({("t", 0): -2})
    assert (opts.max_offsets_per_trigger, opts.min_offsets_per_trigger, opts.max_trigger_delay_ms) == (10, 5, 30_000)
    for key, message in (("endingOffsets", "ending offset not valid in streaming queries (option 'endingOffsets')"),
                         ("endingOffsetsByTimestamp", "ending timestamp not valid in streaming queries"),
                         ("maxOffsetsPerTrigger", "Invalid value '-1' for option 'maxOffsetsPerTrigger'")):
        with pytest.raises(SamsaOptionError) as e:
            parse_stream_options({**base, key: "-1"})
        assert message in str(e.value)
